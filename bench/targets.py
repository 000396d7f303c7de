"""Bench runs against the speed and memory targets: one row per results file of bench/run.py,
and how often the Shakespeare-size target was met.

    python3 bench/targets.py [RESULTS.json ...]     (default: every bench/results*.json)

The targets (issue 4), each judged in one run, with gptc and PyTorch on the same threads:
the tiny step at least 2x eager's speed and the Shakespeare-size step at least 1.3x, both
by the median step; gptc faster than torch.compile at both sizes; the matmul micro-kernel at
85 % of the measured FMA peak; gptc's step peak memory below eager's; at most 25 kernels a
layer plus 15. A missed target is printed in bold. "fastest" is the ratio of the fastest
steps (the machine's quietest moment in the run); it is shown, not judged. "CPUs' round
trip" is the range of what bench/core_latency.cpp measured before each round: where the host
of the virtual machine had placed its two CPUs, near each other or apart.
"""
import glob
import json
import math
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _cli import Parser, fail, read  # noqa: E402 (beside this file)
from run import SIZES  # noqa: E402 (bench/run.py, beside this file)

SPEEDUP = {"tiny": 2.0, "shakespeare": 1.3}
MICRO_KERNEL = 0.85
STAMP = "%Y-%m-%dT%H:%M:%SZ"  # run.py's "finished"
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


def finished(path: str, results) -> str:
    """When the run ended, in UTC: run.py records it; for files from before it did, the time
    of the commit that last changed the file (runs were committed right after they ran); for
    a file git does not know, its modification time."""
    if results.get("finished"):
        return results["finished"]
    seconds = os.path.getmtime(path)
    try:
        git = subprocess.run(["git", "log", "-1", "--format=%ct", "--", os.path.basename(path)],
                             cwd=os.path.dirname(os.path.abspath(path)), capture_output=True,
                             text=True)
        if git.returncode == 0 and git.stdout.strip():
            seconds = int(git.stdout)
    except OSError:  # no git
        pass
    return time.strftime(STAMP, time.gmtime(seconds))


def zen(family: int, model: int):
    """The Zen generation of an AMD CPU family and model (as /proc/cpuinfo gives them), or
    None: this kind of machine has been a Zen 2, a Zen 3 and a Zen 4, whose speeds differ
    with the same vector forms (the Zen 2's and the Zen 3's AVX2)."""
    if family == 23:
        return "Zen 2" if model >= 0x30 else "Zen"
    if family == 25:
        return "Zen 4" if 0x10 <= model <= 0x1F or 0x60 <= model <= 0xAF else "Zen 3"
    if family == 26:
        return "Zen 5"
    return None


def cpu(results) -> str:
    """The CPU run.py recorded, as its Zen generation (where its family and model name one)
    and its widest vector forms, "Zen 4, AVX-512"; early runs recorded only cores."""
    machine = results.get("machine") or ""
    if "), " not in machine:
        return "not recorded"
    width = machine.rsplit("), ", 1)[1]
    amd = re.search(r"AMD .*\(family (\d+), model (\d+)\)", machine)
    generation = amd and zen(int(amd[1]), int(amd[2]))
    return f"{generation}, {width}" if generation else width


def round_trips(results) -> str:
    """The range of the round trips between the two CPUs that run.py measured before each
    round, "83–465 ns" ("—" for runs from before it did): the host moves its virtual CPUs,
    and the tiny step slows as they move apart."""
    values = [v for r in results["steps"] for v in r.get("core_round_trip_ns") or []
              if v is not None]
    if not values:
        return "—"
    low, high = min(values), max(values)
    return f"{low:.0f} ns" if round(low) == round(high) else f"{low:.0f}–{high:.0f} ns"


def judge(results) -> dict:
    """Each target's cell of one run's row, and whether the run judges the Shakespeare-size
    target as the issue sets it (no dropout, the default batch) and met it, by median and by
    fastest steps."""
    steps = {(r["size"], r["framework"]): r for r in results["steps"] if "error" not in r}
    sizes = [s for s in SIZES if (s, "gptc") in steps]
    cell = {}

    def ratio(size, other, key="ms_median"):
        return steps[(size, other)][key] / steps[(size, "gptc")][key] \
            if (size, other) in steps and (size, "gptc") in steps else None

    for size in SIZES:
        r = ratio(size, "eager")
        cell[size] = "—" if r is None else mark(
            f"{times(r)} ({steps[(size, 'gptc')]['ms_median']:.1f} vs "
            f"{steps[(size, 'eager')]['ms_median']:.1f} ms)", r >= SPEEDUP[size])
    fast = ratio("shakespeare", "eager", "ms_min")
    cell["fastest"] = "—" if fast is None else times(fast)
    compile_ = [ratio(s, "compile") for s in sizes]
    cell["compile"] = ", ".join("—" if c is None else mark(f"{c:.2f}×", c > 1) for c in compile_)
    m = results.get("matmul") or {}
    cell["micro"] = "—" if not m.get("gflops") else mark(
        f"{shown(100 * m['fraction_of_peak'], [100 * MICRO_KERNEL], 0, ' %')} "
        f"({m['gflops']:.1f} of {m['fma_peak_gflops']:.1f} GFLOP/s)",
        m["fraction_of_peak"] >= MICRO_KERNEL)
    peak = lambda r: r.get("step_peak_rss_mib") or r["peak_rss_mib"]  # noqa: E731
    cell["memory"] = ", ".join(
        mark(f"{peak(steps[(s, 'gptc')]):.0f} vs {peak(steps[(s, 'eager')]):.0f}",
             peak(steps[(s, "gptc")]) < peak(steps[(s, "eager")]))
        for s in sizes if (s, "eager") in steps)
    cell["kernels"] = ", ".join(
        mark(str(k), k <= 25 * SIZES[s]["n_layer"] + 15)
        for s in sizes for k in [steps[(s, "gptc")].get("kernels_per_step")] if k is not None)
    setting = [f"{s} batch {steps[(s, 'gptc')]['batch']}" for s in sizes
               if steps[(s, "gptc")]["batch"] != SIZES[s]["batch"]]
    if results.get("dropout"):
        setting.append(f"dropout {results['dropout']:g}")
    if results.get("model", "gpt") != "gpt":
        setting.append(f"{results['model']} model")
    if results.get("attention", "sdpa") != "sdpa":
        setting.append(f"{results['attention']} attention")
    cell["setting"] = ", ".join(setting) or "default"
    shakespeare = ratio("shakespeare", "eager")
    judged = shakespeare is not None and not setting
    return dict(cell=cell, judged=judged, met=judged and shakespeare >= SPEEDUP["shakespeare"],
                met_fastest=judged and fast >= SPEEDUP["shakespeare"])


def row(name: str, results) -> str:
    c = judge(results)["cell"]
    return (f"| {name} | {results.get('date', '?')} | {cpu(results)} | {round_trips(results)} | "
            f"{c['setting']} | "
            f"{c['tiny']} | {c['shakespeare']} | {c['fastest']} | {c['compile']} | {c['micro']} | "
            f"{c['memory']} | {c['kernels']} |")


def table(runs) -> list:
    """The Markdown table's lines for (name, results) pairs, in their order."""
    return [HEADER, "|" + "---|" * (HEADER.count(" | ") + 1)] + [row(n, r) for n, r in runs]


def tally(runs) -> list:
    """How many of the runs that judge the Shakespeare-size target met it, per CPU."""
    lines = []
    for width in sorted({cpu(r) for _, r in runs}):
        verdicts = [judge(r) for _, r in runs if cpu(r) == width]
        judged = [v for v in verdicts if v["judged"]]
        if judged:
            lines.append(f"- {width}: Shakespeare size at 1.3× eager in "
                         f"{sum(v['met'] for v in judged)} of {len(judged)} runs by median, "
                         f"{sum(v['met_fastest'] for v in judged)} by the fastest steps")
    return lines


def check(results) -> None:
    """ValueError naming the first of the fields judge, row and finished read that `results`
    lacks or holds as something else: what bench/run.py writes, checked no further."""
    def need(obj, key, ok, what, where="", optional=False):  # optional: absent or null
        if optional and obj.get(key) is None:
            return
        if key not in obj:
            raise ValueError(f'{where}no "{key}"')
        if not ok(obj[key]):
            raise ValueError(f'{where}"{key}" is {json.dumps(obj[key])[:40]}, not {what}')

    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    text, positive = (lambda v: isinstance(v, str)), (lambda v: number(v) and v > 0)
    if not isinstance(results, dict):
        raise ValueError("not a JSON object, so not a results file of bench/run.py")
    need(results, "steps", lambda v: isinstance(v, list), "a list")
    for key, ok, what in (("finished", text, "a string"), ("machine", text, "a string"),
                          ("dropout", number, "a number"), ("attention", text, "a string"),
                          ("model", text, "a string"),
                          ("matmul", lambda v: isinstance(v, dict), "an object")):
        need(results, key, ok, what, optional=True)
    if (results.get("matmul") or {}).get("gflops"):
        for key in ("gflops", "fraction_of_peak", "fma_peak_gflops"):
            need(results["matmul"], key, number, "a number", "matmul: ")
    for i, r in enumerate(results["steps"]):
        where = f"steps[{i}]: "
        if not isinstance(r, dict):
            raise ValueError(f"{where}not an object")
        if "error" in r:  # a failed run: only its size and framework are shown
            continue
        need(r, "size", text, "a string", where)
        need(r, "framework", text, "a string", where)
        if r["size"] in SIZES:
            for key in ("ms_median", "ms_min"):
                need(r, key, positive, "a positive number", where)
            need(r, "batch", lambda v: isinstance(v, int) and not isinstance(v, bool),
                 "an integer", where)
            need(r, "peak_rss_mib", number, "a number", where)
            for key in ("step_peak_rss_mib", "kernels_per_step"):
                need(r, key, number, "a number", where, optional=True)
            need(r, "core_round_trip_ns",
                 lambda v: isinstance(v, list) and all(x is None or positive(x) for x in v),
                 "a list of positive numbers", where, optional=True)


def load(path: str):
    """The results file at `path`, checked; else exit 1 with one line naming it."""
    results = read(path, as_json=True)
    try:
        check(results)
    except ValueError as e:
        fail(f"cannot read {path}: {e}")
    return results


def main():
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="*", metavar="RESULTS.json",
                    help="results files of bench/run.py (default: every bench/results*.json)")
    files = ap.parse_args().results or sorted(glob.glob(os.path.join(HERE, "results*.json")))
    runs = []
    for path in files:
        results = load(path)
        runs.append((finished(path, results), os.path.splitext(os.path.basename(path))[0],
                     results))
    runs.sort(key=lambda run: run[0])
    runs = [(name, results) for _, name, results in runs]
    print("\n".join(table(runs) + [""] + tally(runs)))


if __name__ == "__main__":
    main()
