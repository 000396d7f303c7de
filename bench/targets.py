"""Bench runs against the speed and memory targets: each run's row and, per kind of CPU,
how many runs met them. bench/report.py puts the tables on docs/performance.md; bench/run.py
prints its own run's row.

The targets (issue 4), each judged in one run, with gptc and PyTorch on the same threads:
the tiny step at least 2x eager's speed and the Shakespeare-size step at least 1.3x, both
by the median step; gptc faster than torch.compile at both sizes; the matmul micro-kernel at
85 % of the measured FMA peak; gptc's step peak memory below eager's; at most 25 kernels a
layer plus 15. A missed target is printed in bold. "fastest" is the ratio of the fastest
steps (the machine's quietest moment in the run); it is shown, not judged. "CPUs' round
trip" is the range of what bench/core_latency.cpp measured before each round: where the host
of the virtual machine had placed its two CPUs, near each other or apart.
"""
import math

from config import MICRO_KERNEL, SIZES, SPEEDUP, kernel_budget

HEADER = ("| run | date | CPU | CPUs' round trip | setting | tiny ≥ 2× eager "
          "| Shakespeare ≥ 1.3× eager | fastest | faster than torch.compile (tiny, Shakespeare) "
          "| micro-kernel ≥ 85 % of peak | peak MiB below eager's (tiny, Shakespeare) | kernels (≤ 25/layer + 15) |")


def mark(text: str, met: bool) -> str:
    return text if met else f"**{text}**"


def shown(value: float, targets, digits: int, unit: str) -> str:
    """value to `digits` decimals; one that they would round up to a target it misses is cut
    (not rounded) to one decimal more."""
    if any(value < t <= round(value, digits) for t in targets):
        scale = 10 ** (digits + 1)
        # (+1e-9: 100 * 0.849 is 84.8999...)
        return f"{math.floor(value * scale + 1e-9) / scale:.{digits + 1}f}{unit}"
    return f"{value:.{digits}f}{unit}"


def times(r: float) -> str:
    return shown(r, SPEEDUP.values(), 2, "×")


def cpu(record) -> str:
    """The run's kind of CPU and, for a Zen, its widest vector forms: "Zen 4, AVX-512"."""
    machine = record["machine"]
    width = machine.get("width")
    return f"{machine['kind']}, {width}" if width and width not in machine["kind"] \
        else machine["kind"]


def round_trips(record) -> str:
    """The range of the round trips between the two CPUs that run.py measured before each
    round, "83–465 ns" ("—" for runs from before it did): the host moves its virtual CPUs,
    and the tiny step slows as they move apart."""
    values = [v for r in record["figures"]["steps"] for v in r.get("core_round_trip_ns") or []
              if v is not None]
    if not values:
        return "—"
    low, high = min(values), max(values)
    return f"{low:.0f} ns" if round(low) == round(high) else f"{low:.0f}–{high:.0f} ns"


def setting(record) -> str:
    """How the run differs from the settings the targets are set for (no dropout, each
    size's own batch, SDPA attention, the GPT): "shakespeare batch 16, dropout 0.2", or
    "default"."""
    steps = {(r["size"], r["framework"]): r for r in record["figures"]["steps"]
             if "error" not in r}
    settings = record["settings"]
    out = [f"{s} batch {steps[(s, 'gptc')]['batch']}" for s in SIZES
           if (s, "gptc") in steps and steps[(s, "gptc")]["batch"] != SIZES[s]["batch"]]
    if settings.get("dropout"):
        out.append(f"dropout {settings['dropout']:g}")
    if (settings.get("model") or "gpt") != "gpt":
        out.append(f"{settings['model']} model")
    if (settings.get("attention") or "sdpa") != "sdpa":
        out.append(f"{settings['attention']} attention")
    if settings.get("padded"):
        out.append("padded batches")
    return ", ".join(out) or "default"


def judge(record) -> dict:
    """Each target's cell of one run's row; whether the run is judged (default settings, a
    Shakespeare-size ratio); whether it met the Shakespeare-size target by median and by
    fastest steps, and whether it met every target."""
    steps = {(r["size"], r["framework"]): r for r in record["figures"]["steps"]
             if "error" not in r}
    sizes = [s for s in SIZES if (s, "gptc") in steps]
    cell, missed = {}, []

    def target(text, met):
        missed.extend([] if met else [text])
        return mark(text, met)

    def ratio(size, other, key="ms_median"):
        return steps[(size, other)][key] / steps[(size, "gptc")][key] \
            if (size, other) in steps and (size, "gptc") in steps else None

    for size in SIZES:
        r = ratio(size, "eager")
        cell[size] = "—" if r is None else target(
            f"{times(r)} ({steps[(size, 'gptc')]['ms_median']:.1f} vs "
            f"{steps[(size, 'eager')]['ms_median']:.1f} ms)", r >= SPEEDUP[size])
    fast = ratio("shakespeare", "eager", "ms_min")
    cell["fastest"] = "—" if fast is None else times(fast)
    compile_ = [ratio(s, "compile") for s in sizes]
    cell["compile"] = ", ".join("—" if c is None else target(f"{c:.2f}×", c > 1)
                                for c in compile_)
    m = record["figures"].get("matmul") or {}
    cell["micro"] = "—" if not m.get("gflops") else target(
        f"{shown(100 * m['fraction_of_peak'], [100 * MICRO_KERNEL], 0, ' %')} "
        f"({m['gflops']:.1f} of {m['fma_peak_gflops']:.1f} GFLOP/s)",
        m["fraction_of_peak"] >= MICRO_KERNEL)
    peak = lambda r: r.get("step_peak_rss_mib") or r["peak_rss_mib"]  # noqa: E731
    cell["memory"] = ", ".join(
        target(f"{peak(steps[(s, 'gptc')]):.0f} vs {peak(steps[(s, 'eager')]):.0f}",
              peak(steps[(s, "gptc")]) < peak(steps[(s, "eager")]))
        for s in sizes if (s, "eager") in steps)
    cell["kernels"] = ", ".join(
        target(str(k), k <= kernel_budget(s))
        for s in sizes for k in [steps[(s, "gptc")].get("kernels_per_step")] if k is not None)
    cell["setting"] = setting(record)
    shakespeare = ratio("shakespeare", "eager")
    judged = shakespeare is not None and cell["setting"] == "default"
    # Every target: each figure there and none missed.
    whole = "—" not in (cell["tiny"], cell["micro"]) and None not in compile_ \
        and all((s, "eager") in steps and steps[(s, "gptc")].get("kernels_per_step") is not None
                for s in sizes)
    return dict(cell=cell, judged=judged, met=judged and shakespeare >= SPEEDUP["shakespeare"],
                met_fastest=judged and fast >= SPEEDUP["shakespeare"],
                met_all=judged and whole and not missed)


def row(name: str, record) -> str:
    c = judge(record)["cell"]
    label = f"{name} ({record['note']})" if record.get("note") else name
    return (f"| {label} | {record.get('date', '?')} | {cpu(record)} | {round_trips(record)} | "
            f"{c['setting']} | "
            f"{c['tiny']} | {c['shakespeare']} | {c['fastest']} | {c['compile']} | {c['micro']} | "
            f"{c['memory']} | {c['kernels']} |")


def table(runs) -> list:
    """The Markdown table's lines for (name, record) pairs, in their order."""
    return [HEADER, "|" + "---|" * (HEADER.count(" | ") + 1)] + [row(n, r) for n, r in runs]


def tally(runs) -> list:
    """Per CPU, of the runs that judge the targets (the default settings): how many met every
    target, and how many the Shakespeare-size one by median and by the fastest steps."""
    lines = []
    for label in sorted({cpu(r) for _, r in runs}):
        verdicts = [judge(r) for _, r in runs if cpu(r) == label]
        judged = [v for v in verdicts if v["judged"]]
        if judged:
            lines.append(f"- {label}: every target met in {sum(v['met_all'] for v in judged)} "
                         f"of {len(judged)} runs; Shakespeare size at 1.3× eager in "
                         f"{sum(v['met'] for v in judged)} by median, "
                         f"{sum(v['met_fastest'] for v in judged)} by the fastest steps")
    return lines
