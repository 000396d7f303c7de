"""Writes docs/performance.md from the results store (bench/results/, one record a run of
bench/run.py), and README.md's results block, the lines between <!-- results:begin --> and
<!-- results:end -->.

    python3 bench/report.py [--store DIR] [--page FILE] [--readme FILE]

Per kind of CPU: the latest run with the default settings (the targets are set for them),
and every run against the targets with how many met them (bench/targets.py judges them).
Then the latest run of the main job's recipe against PyTorch (bench/main_job.py's records in
bench/results/main_job/), of generation (bench/generate.py's, bench/results/generate/),
and the latest GPU checks (scripts/gpu_check.sh's output, made records of bench/results/gpu/
by bench/gpu_record.py): each CUDA kernel family against the CPU's bits and the matmul's
speed against cuBLAS; the training step's bits, parity and speed against torch.
A README without both marker lines is left as it is (said on stderr).
"""
import glob
import json
import os
import sys

import store
from _cli import REPO, Parser, fail, read
from config import MICRO_KERNEL, SIZES, STEP_PEAK_MOONSHOT, step_flops
from targets import cpu, judge, shown, table, tally

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
NAMES = {"gptc": "gptc", "eager": "eager", "compile": "torch.compile"}


def by_kind(runs) -> dict:
    """{kind: [(name, record), ...]}, the Zen generations first, each kind's runs in order."""
    kinds = {}
    for name, record in runs:
        kinds.setdefault(record["machine"]["kind"], []).append((name, record))
    return dict(sorted(kinds.items(), key=lambda k: (not k[0].startswith("Zen"), k[0])))


def latest(runs):
    """The last (name, record) with the default settings, else the last of any."""
    default = [run for run in runs if judge(run[1])["cell"]["setting"] == "default"]
    return (default or runs)[-1]


def steps_of(record) -> dict:
    return {(r["size"], r["framework"]): r for r in record["figures"]["steps"]
            if "error" not in r}


def about(name: str, record) -> str:
    """One line on a run: its record, when it finished, the commit, the machine, settings."""
    m, s = record["machine"], record["settings"]
    commit = (record.get("commit") or "?")[:12] + (" with uncommitted changes"
                                                    if record.get("dirty") else "")
    cores = f"{m['cores']} cores, " if m.get("cores") else ""
    return (f"Run [{name}](../bench/results/{name}.json), finished {record['finished']}, "
            f"commit {commit}; {cores}{m.get('model_name') or m['kind']}; "
            f"{s.get('threads', '?')} threads, {s.get('rounds', '?')} rounds.")


def step_table(record) -> list:
    """The run's step times and memory per size and framework, as run.py prints them."""
    lines = ["| size | framework | ms/step median (min–max) | speed vs eager | tokens/s | "
             "kernels/step | step peak RSS MiB |", "|---|---|---|---|---|---|---|"]
    steps = steps_of(record)
    for r in record["figures"]["steps"]:
        if "error" in r:
            lines.append(f"| {r['size']} | {r['framework']} | error: {r['error']} | | | | |")
            continue
        eager = steps.get((r["size"], "eager"))
        speed = f"{eager['ms_median'] / r['ms_median']:.2f}×" if eager else "—"
        k, peak = r.get("kernels_per_step"), r.get("step_peak_rss_mib")
        lines.append(
            f"| {r['size']} | {NAMES.get(r['framework'], r['framework'])} | "
            f"{r['ms_median']:.1f} ({r['ms_min']:.1f}–{r['ms_max']:.1f}) | "
            f"{speed} | "
            f"{r['tokens_per_s']:,.0f} | {'—' if k is None else k} | "
            f"{'—' if peak is None else f'{peak:.0f}'} |")
    return lines


def blocking(m) -> str:
    """" The products' blocking from the machine's caches: ...", or "" for runs from
    before matmul_bench printed it."""
    b = m.get("blocking")
    order = {"panels": "panel-task",
             "mixed": "panel-task (weight gradients blocked)"}.get(b["order"], b["order"]) if b else ""
    return (f" The products' blocking from the caches: the {order} order, kc {b['kc']}, "
            f"mc {b['mc']}, nc {b['nc']}." if b else "")


def micro(record) -> str:
    m = record["figures"].get("matmul") or {}
    return "—" if not m.get("gflops") else shown(100 * m["fraction_of_peak"],
                                                 [100 * MICRO_KERNEL], 0, " %")


def step_gflop(step):
    """A step's GFLOP as bench/config.py's step_flops counts them; worked out from the
    record's sizes for runs from before train_step.py recorded it; None without them."""
    if step.get("step_gflop"):
        return step["step_gflop"]
    if "params" not in step or "block_size" not in step:
        return None
    cfg = SIZES[step["size"]]
    wpe = step["block_size"] * cfg["n_embd"] if (step.get("model") or "gpt") == "gpt" else 0
    return step_flops(step["params"] - wpe, cfg["n_layer"], cfg["n_head"], cfg["n_embd"],
                      step["block_size"], step["batch"] * step["block_size"]) / 1e9


def peak_share(record, size: str = "shakespeare") -> str:
    """Each framework's `size` step as a share of the cores' FMA peak (the micro-kernel's
    measured peak of one core times the run's threads): "gptc 41 %, eager 36 %, ..."; ""
    where the run has no such step or no peak."""
    steps, m = steps_of(record), record["figures"].get("matmul") or {}
    cores = (record["settings"].get("threads") or 0) * (m.get("fma_peak_gflops") or 0)
    if (size, "gptc") not in steps or not cores or step_gflop(steps[(size, "gptc")]) is None:
        return ""
    share = lambda st: step_gflop(st) / (st["ms_median"] / 1e3) / cores  # noqa: E731
    return ", ".join(
        f"{NAMES[fw]} {shown(100 * share(steps[(size, fw)]), [100 * STEP_PEAK_MOONSHOT], 0, ' %')}"
        for fw in NAMES if (size, fw) in steps and step_gflop(steps[(size, fw)]) is not None)


def page(runs, gpu_dir: str = "", main_job=None, generation=None) -> list:
    lines = ["# Performance", "",
             "Generated by `python3 bench/report.py` from the run records in "
             "[bench/results/](../bench/results/) (one a run of `python3 bench/run.py`); "
             "run it again after a bench run rather than editing this page.", "",
             "The targets (issue 4), judged in runs with the default settings (no dropout, "
             "each size's own batch, SDPA attention, the GPT): gptc's median training step "
             "at least 2× eager's speed at tiny size and 1.3× at Shakespeare size; faster "
             "than torch.compile at both; the matmul micro-kernel at 85 % of the measured "
             "FMA peak; gptc's step peak memory below eager's; at most 25 kernels a layer "
             "plus 15. Missed targets are in bold. \"fastest\" is the ratio of the fastest "
             "steps, shown and not judged; \"CPUs' round trip\" is where the virtual "
             "machine's host had placed its two CPUs (bench/core_latency.cpp)."]
    for kind, kind_runs in by_kind(runs).items():
        name, record = latest(kind_runs)
        m = record["figures"].get("matmul") or {}
        s = record["figures"].get("sgemm_openblas") or {}
        lines += ["", f"## {cpu(record)}", "", "The latest run with the default settings. "
                  + about(name, record), ""] + step_table(record)
        if m.get("gflops"):
            lines += ["", f"Matmul micro-kernel, {m.get('M', 384)}×{m.get('N', 1536)}×"
                      f"{m.get('K', 2048)} on one core: {m['gflops']:.1f} GFLOP/s, "
                      f"{micro(record)} of the measured {m['fma_peak_gflops']:.1f} GFLOP/s "
                      f"fp32 FMA peak" + (f"; OpenBLAS sgemm {s['gflops']:.1f} GFLOP/s."
                                          if s.get("gflops") else ".") + blocking(m)]
        if peak_share(record):
            g = step_gflop(steps_of(record)[("shakespeare", "gptc")])
            lines += ["", f"The Shakespeare-size step, {g:.1f} GFLOP (nanoGPT's count: 6 a "
                      "parameter a token, and attention's 12 L H Q T over the whole T × T, "
                      "the masked half too), as a share of the "
                      f"{record['settings']['threads']} cores' measured FMA peak (the moonshot: "
                      f"{100 * STEP_PEAK_MOONSHOT:.0f} %): {peak_share(record)}."]
        lines += ["", f"### {kind}: every run against the targets", ""] + table(kind_runs)
        lines += [""] + (tally(kind_runs) or ["- No run with the default settings yet."])
    if main_job:
        lines += ["", "## The main job against PyTorch", ""] + main_job_table(
            *main_job, "../bench/results/main_job/")
    for name, record in generation or []:
        lines += ["", "## " + generate_heading(record), ""] + generate_table(
            name, record, "../bench/results/generate/")
    return lines + (gpu_section(gpu_dir) if gpu_dir else []) + [""]


def gpu_section(directory: str) -> list:
    """The latest GPU records of `directory` (bench/results/gpu/: the kernel families', the
    training step's) as page sections, or no lines if there is none."""
    records = []
    for path in glob.glob(os.path.join(directory, "*.json")):
        with open(path) as f:
            records.append((os.path.basename(path), json.load(f)))
    families = [nr for nr in records if nr[1].get("kind") != "step"]
    steps = [nr for nr in records if nr[1].get("kind") == "step"]
    lines = []
    if families:
        lines += families_section(*max(families, key=lambda nr: nr[1]["finished"]))
    if steps:
        lines += step_section(*max(steps, key=lambda nr: nr[1]["finished"]))
    return lines


def step_section(name, r) -> list:
    """The GPU check's training step (bench/gpu_record.py's step record): bits, parity,
    and gptc's step against torch's at each size."""
    yes = lambda v: "yes" if v else "no"  # noqa: E731
    parity = r.get("parity") or {}
    lines = ["", "## GPU: the training step", "",
             f"The latest step check, {name} ({r['gpu']}; {r['numerics']})"
             + (f": {r['note']}" if r.get("note") else "") + ". "
             f"CPU == GPU bitwise over {r.get('steps', '?')} steps with dropout: "
             f"{yes(r.get('bitwise'))}; two GPU runs equal: {yes(r.get('repeatable'))}; "
             + (f"a LLaMA-style relative, CPU == GPU bitwise: {yes(r['bitwise_llama'])}; "
                if r.get("bitwise_llama") is not None else "") +
             (f"gradient accumulation, CPU == GPU bitwise: {yes(r['bitwise_accumulate'])}; "
              if r.get("bitwise_accumulate") is not None else "") +
             (f"generation, the CPU's text: {yes(r['generate_text'])}; "
              if r.get("generate_text") is not None else "") +
             f"parity with torch's CUDA eager: {yes(parity.get('within'))}; "
             f"memcheck: {r.get('memcheck', 'not run')}.", "",
             "| size | gptc, one graph | eager | torch.compile | reduce-overhead "
             "| kernels a step, gptc / eager | device memory, gptc / eager |",
             "|---|---|---|---|---|---|---|"]
    mib = lambda b: "—" if b is None else f"{b / 2**20:,.0f} MiB"  # noqa: E731
    for size in dict.fromkeys(s["size"] for s in r["speed"]):
        by = {("gptc" if s["framework"] == "gptc" else s["mode"]): s
              for s in r["speed"] if s["size"] == size}
        ms = lambda k: f"{by[k]['median_ms']:.2f} ms" if k in by else "—"  # noqa: E731
        g, e = by.get("gptc", {}), by.get("eager", {})
        lines.append(f"| {size} | {ms('gptc')} | {ms('eager')} | {ms('compile')} | "
                     f"{ms('reduce-overhead')} | {g.get('kernels', '—')} / "
                     f"{e.get('kernels', '—')} | {mib(g.get('device_bytes'))} / "
                     f"{mib(e.get('device_bytes'))} |")
    if r.get("generate_speed"):
        rate = lambda g: (f"{g['tokens_per_s_median']:,.0f} "  # noqa: E731
                          f"({g['tokens_per_s_min']:,.0f}–{g['tokens_per_s_max']:,.0f})")
        first = r["generate_speed"][0]
        lines += ["", f"Generation, tokens a second ({first['batch']} texts at once, "
                  f"{first['tokens']} tokens each; median, slowest–fastest text): " + "; ".join(
                      ("gptc's generator" if g["framework"] == "gptc" else
                       f"nanoGPT's loop, torch {g['mode']}") + " " + rate(g)
                      for g in r["generate_speed"]) + "."]
    if r.get("variants"):
        lines += ["", "gptc's step with a feature turned off (median ms): " + "; ".join(
            f"{v['size']} {v['env'] or 'as built'} {v['median_ms']:.2f}" for v in r["variants"])
            + "."]
    return lines


def families_section(name, r) -> list:
    """The kernel families' record: each family's bits, and the matmul's speed."""
    results = r["results"]
    lines = ["", "## GPU: the CUDA kernel families", "",
             f"The latest GPU check, {name} ({r['gpu']}, sm_{r['sm']}; {r['numerics']}): "
             f"{r['note']}. Every record is in [bench/results/gpu/](../bench/results/gpu/); "
             "what was tried is in bench/NOTES.md, \"GPU\".", "",
             "| family | checked | bits that differ from the CPU's |", "|---|---|---|"]
    for e in results:
        if e["family"] == "matmul":
            continue
        what = e.get("fn", e["family"])
        count = next(f"{e[k]:,} {k}" for k in ("values", "rows", "outputs") if k in e)
        lines.append(f"| {what} | {count} | {e['mismatches']} |")
    matmuls = [e for e in results if e["family"] == "matmul"]
    lines.append(f"| matmul ({len(matmuls)} shapes and layouts) | "
                 f"{sum(e['checked'] for e in matmuls):,} outputs | "
                 f"{sum(e['mismatches'] for e in matmuls)} |")
    timed = [e for e in matmuls if "tflops" in e]
    if timed:
        lines += ["", "| matmul, fp32 | M × N × K | gptc TFLOP/s | cuBLAS TFLOP/s (no TF32) |",
                  "|---|---|---|---|"]
        lines += [f"| {e['case']} | {e['M']} × {e['N']} × {e['K']} | {e['tflops']:.1f} | "
                  f"{e['cublas_tflops']:.1f} |" for e in timed]
    return lines


def latest_record(directory: str):
    """(name, record) of the newest record in `directory` (bench/results/main_job/, written
    by bench/main_job.py), or None."""
    records = []
    for path in glob.glob(os.path.join(directory, "*.json")):
        with open(path) as f:
            records.append((os.path.basename(path)[:-5], json.load(f)))
    return max(records, key=lambda nr: nr[1]["finished"]) if records else None


def main_job_table(name, r, link) -> list:
    """The main job's recipe by each framework: val loss, the untrained twin, times, RSS."""
    s, fig = r["settings"], r["figures"]
    fws = [fw for fw in NAMES if fw in fig]
    last = {fw: fig[fw]["evals"][-1] for fw in fws}
    twin = fig.get("gptc", {}).get("evals", [{}])[-1].get("twin_val")
    corpus = os.path.basename(s["data"]) if s.get("data") else (
        "Debian fortunes" + (" in 12 languages" if s.get("corpus") == "multilingual" else ""))
    lines = [f"The main job (`./run.sh`): nanoGPT's CPU recipe ({s['n_layer']} layers, "
             f"{s['n_embd']} wide, block {s['block_size']}, batch {s['batch']}, "
             f"{s['iters']} steps) on {corpus}, the same batches and initial weights for each "
             f"framework; {cpu(r)}, {s['threads']} threads, {r['finished'][:10]} "
             f"([record]({link}{name}.json)):", "",
             "| | " + " | ".join(NAMES[fw] for fw in fws) + " |",
             "|---" * (len(fws) + 1) + "|",
             f"| val loss after {last[fws[0]]['iter']} steps | "
             + " | ".join(f"{last[fw]['val']:.4f}" for fw in fws) + " |",
             f"| val loss untrained (the twin) | {twin:.4f} |" + " |" * (len(fws) - 1)
             if twin is not None else None,
             "| training loop, s (with evaluations) | "
             + " | ".join(f"{fig[fw]['loop_s']:.1f}" for fw in fws) + " |",
             "| whole run, s (with set-up, compiling) | "
             + " | ".join(f"{fig[fw]['wall_s']:.1f}" for fw in fws) + " |",
             "| peak RSS, MiB | " + " | ".join(
                 "—" if fig[fw].get("peak_rss_mib") is None else f"{fig[fw]['peak_rss_mib']:.0f}"
                 for fw in fws) + " |"]
    return [line for line in lines if line is not None]


GENERATORS = {"gptc": "gptc (KV cache)", "gptc-no-cache": "gptc, whole block a token",
              "eager": "nanoGPT's generate, eager", "compile": "nanoGPT's generate, torch.compile",
              "transformers": "transformers' generate, eager",
              "transformers-compile": "transformers' generate, torch.compile (static cache)"}
# bench/generate.py --model: the transformers model each names.
HF_MODELS = {"hf-gpt2": "transformers' GPT-2", "hf-llama": "transformers' LLaMA",
             "hf-falcon": "transformers' Falcon"}


def latest_generation(directory: str) -> list:
    """The newest record of bench/generate.py for each model and batch it ran (nanoGPT's
    GPT, then the transformers models; one text before several) that has the framework it
    is compared against (a run of gptc alone is a probe, kept in the store but not shown),
    as (name, record)."""
    newest = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path) as f:
            r = json.load(f)
        kind = r["settings"]["model"].get("kind", "gpt")
        if ("transformers" if kind in HF_MODELS else "eager") not in r["figures"]:
            continue
        m = r["settings"]["model"]
        key = (kind, m["n_layer"], m["n_embd"], r["settings"].get("batch", 1))
        if key not in newest or r["finished"] > newest[key][1]["finished"]:
            newest[key] = (os.path.basename(path)[:-5], r)
    return [newest[k] for k in sorted(newest, key=lambda k: (k[0] != "gpt", k))]


def generate_sizes(m) -> str:
    """Which of bench/generate.py's --size a record's model has, in words."""
    if m["n_embd"] == 768 and m["n_layer"] == 12:
        return (f"GPT-2 small's sizes (12 layers, 768 wide, {m['vocab_size']:,} tokens, "
                f"{m['block_size']} positions)")
    return f"the main job's sizes ({m['n_layer']} layers, {m['n_embd']} wide, " + (
        f"{m['block_size']} positions)" if "kind" in m else f"block {m['block_size']})")


def generate_heading(r) -> str:
    m = r["settings"]["model"]
    hf = HF_MODELS.get(m.get("kind"))
    batch = r["settings"].get("batch", 1)
    return ((f"Generation of {hf} against transformers' generate" if hf else
             "Generation against nanoGPT's loop")
            + (", GPT-2 small's size" if m["n_embd"] == 768 and m["n_layer"] == 12 else "")
            + (f", {batch} texts at once" if batch > 1 else ""))


def generate_table(name, r, link) -> list:
    """Generation speed by each framework: tokens a second (median of 3), peak RSS."""
    s, fig = r["settings"], r["figures"]
    m = s["model"]
    hf = HF_MODELS.get(m.get("kind"))
    base = "transformers" if hf else "eager"
    eager = fig.get(base, {}).get("tokens_per_s_median")
    model = f"{hf if hf else 'a nanoGPT-style GPT'} at {generate_sizes(m)}"
    batch = s.get("batch", 1)
    texts = (f"{batch} texts at once (`--batch {batch}`), each of {s['tokens']} tokens after "
             f"a one-token prompt (tokens/s counts all of them)" if batch > 1 else
             f"{s['tokens']} tokens after a one-token prompt")
    lines = [f"Generation (`bench/generate.py`): {texts} "
             f"from {model}, top-k {s['top_k']}; {cpu(r)}, {s['threads']} threads, "
             f"{r['finished'][:10]} ([record]({link}{name}.json)):", "",
             f"| | tokens/s (median of 3) | vs {'transformers' if hf else 'eager'} | "
             "peak RSS, MiB |", "|---|---|---|---|"]
    for fw, label in GENERATORS.items():
        if fw in fig:
            t = fig[fw]["tokens_per_s_median"]
            lines.append(f"| {label} | {t:,.0f} | "
                         + (f"{t / eager:.1f}×" if eager else "—")
                         + f" | {fig[fw]['peak_rss_mib']:.0f} |")
    return lines


def readme_block(runs, main_job=None) -> list:
    """README's results block: one table, per kind the latest default run at both sizes, and
    the main job's table (generation's is on the page only)."""
    lines = ["The latest bench run with the default settings on each kind of CPU, gptc's "
             "training step against PyTorch eager and torch.compile in ms (generated by "
             "`python3 bench/report.py`; every run and the targets: "
             "[docs/performance.md](docs/performance.md)):", "",
             "| CPU, threads, date | model | gptc | eager | torch.compile | vs eager "
             "| vs torch.compile |", "|---|---|---|---|---|---|---|"]
    micro_kernel, shares = [], []
    for kind, kind_runs in by_kind(runs).items():
        _, record = latest(kind_runs)
        if peak_share(record):
            shares.append(f"{kind} {peak_share(record)}")
        steps = steps_of(record)
        machine = (f"{cpu(record)}, {record['settings'].get('threads', '?')} threads, "
                   f"{record['finished'][:10]}")
        for size in SIZES:
            if (size, "gptc") not in steps:
                continue
            ms = {fw: steps[(size, fw)]["ms_median"] if (size, fw) in steps else None
                  for fw in NAMES}
            cell = lambda v: "—" if v is None else f"{v:.1f}"  # noqa: E731
            ratio = lambda v: "—" if v is None else f"{v / ms['gptc']:.2f}×"  # noqa: E731
            label = "Shakespeare size" if size == "shakespeare" else size
            lines.append(f"| {machine} | {label} | {cell(ms['gptc'])} | {cell(ms['eager'])} | "
                         f"{cell(ms['compile'])} | {ratio(ms['eager'])} | "
                         f"{ratio(ms['compile'])} |")
            machine = ""  # said once a kind
        micro_kernel.append(f"{kind} {micro(record)}")
    lines += ["", "Matmul micro-kernel, % of the measured FMA peak: "
              + ", ".join(micro_kernel) + "." + (
                  " The Shakespeare-size step, % of the cores' FMA peak (nanoGPT's FLOP count; "
                  f"the moonshot: {100 * STEP_PEAK_MOONSHOT:.0f} %): " + "; ".join(shares) + "."
                  if shares else "")]
    if main_job:
        lines += [""] + main_job_table(*main_job, "bench/results/main_job/")
    return lines


def splice(text: str, block: list):
    """`text` with the lines between the marker lines replaced by `block`; None when it does
    not hold both, in that order."""
    lines = text.split("\n")
    marks = [i for i, line in enumerate(lines) if line.strip() in (BEGIN, END)]
    kinds = [lines[i].strip() for i in marks]
    if kinds != [BEGIN, END]:
        return None
    begin, end = marks
    return "\n".join(lines[:begin + 1] + block + lines[end:])


def main():
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=store.STORE, help="the records (default: bench/results)")
    ap.add_argument("--page", default=os.path.join(REPO, "docs", "performance.md"))
    ap.add_argument("--readme", default=os.path.join(REPO, "README.md"))
    args = ap.parse_args()
    runs = store.runs(args.store)
    if not runs:
        fail(f"no records in {args.store} (bench/run.py writes them)")
    main_job = latest_record(os.path.join(args.store, "main_job"))
    generation = latest_generation(os.path.join(args.store, "generate"))
    try:
        with open(args.page, "w") as f:
            f.write("\n".join(page(runs, os.path.join(args.store, "gpu"), main_job,
                                    generation)))
    except OSError as e:
        fail(f"cannot write {args.page}: {e.strerror or e}")
    text = read(args.readme)
    spliced = splice(text, readme_block(runs, main_job))
    if spliced is None:
        print(f"report: {args.readme} has no {BEGIN} line followed by an {END} line; "
              "left untouched", file=sys.stderr)
    elif spliced != text:
        with open(args.readme, "w") as f:
            f.write(spliced)


if __name__ == "__main__":
    main()
