"""gptc's benchmark: one command, one run, one machine.

    python3 bench/run.py    # writes a record to bench/results/ and prints a markdown table

Times the training step (forward, backward, clipping, AdamW) of the test GPT at two sizes
for gptc, PyTorch eager and torch.compile (each in its own process, same thread count),
and gptc's matmul micro-kernel against the measured fp32 FMA peak and OpenBLAS's sgemm
(numpy) on a 384x1536x2048 product. Not part of the tests: it takes minutes.
"""
import json
import os
import subprocess
import sys
import time

import store
from _cli import (Parser, model_arguments, refuse_below, refuse_dropout, refuse_huge_batch,
                  refuse_model_options)
from config import FRAMEWORKS, SIZES, STEPS
from targets import table

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def run_json(cmd, env=None, timeout=1800):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def matmul_bench():
    exe = os.path.join("/tmp", "gptc_matmul_bench")
    subprocess.run(["c++", "-std=c++17", "-O2", "-march=native", "-ffp-contract=off", "-fopenmp",
                    "-I", os.path.join(REPO, "runtime", "include"),
                    os.path.join(HERE, "matmul_bench.cpp"), "-o", exe], check=True)
    return run_json([exe])


def core_latency_build():
    """bench/core_latency.cpp built once per run; its path."""
    exe = os.path.join("/tmp", "gptc_core_latency")
    subprocess.run(["c++", "-std=c++17", "-O2", "-pthread", os.path.join(HERE, "core_latency.cpp"),
                    "-o", exe], check=True)
    return exe


def core_round_trip(exe):
    """How long the first two CPUs this process may use take to pass a cache line there and
    back, in ns (None on one CPU): the host of a virtual machine places its CPUs, and moves
    them, and a step whose two threads share data slows as they move apart."""
    return run_json([exe]).get("round_trip_ns")


def nanoseconds(values) -> str:
    """Round trips as a table cell: "457, 83" (n/a for one not measured)."""
    return ", ".join("n/a" if v is None else f"{v:.0f}" for v in values or []) or "n/a"


def sgemm_bench():
    """numpy's sgemm (OpenBLAS) on one thread, on the same shape."""
    code = ("import json, time, numpy as np\n"
            "a = np.random.default_rng(0).standard_normal((384, 2048), dtype=np.float32)\n"
            "b = np.random.default_rng(1).standard_normal((2048, 1536), dtype=np.float32)\n"
            "best = 1e9\n"
            "for _ in range(5):\n"
            "    t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t)\n"
            "print(json.dumps({'seconds': best, 'gflops': 2 * 384 * 1536 * 2048 / best / 1e9}))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return run_json([sys.executable, "-c", code], env=env)


def pool(runs):
    """One framework's runs of one size as one result: step times pooled (median, min, max
    over all of them; each round's median kept too), the peaks the highest of the runs."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    out = dict(ok[0])
    times = sorted(t for r in ok for t in r.pop("times_ms"))
    tokens = out["batch"] * out["block_size"]
    out.update(rounds=len(ok), round_medians_ms=[r["ms_median"] for r in ok],
               steps_timed=len(times), ms_min=times[0],
               ms_median=times[len(times) // 2], ms_max=times[-1],
               tokens_per_s=tokens / (times[len(times) // 2] / 1e3),
               peak_rss_mib=max(r["peak_rss_mib"] for r in ok),
               compile_and_warmup_s=max(r["compile_and_warmup_s"] for r in ok))
    # Every round runs the same steps: its losses are the round's, not pooled.
    out.update(first_loss=[r.get("first_loss") for r in ok],
               last_loss=[r.get("last_loss") for r in ok])
    # Where the host had placed the two CPUs just before each round.
    out["core_round_trip_ns"] = [r.get("core_round_trip_ns") for r in ok]
    for key in ("step_peak_rss_mib", "step_growth_mib", "children_peak_rss_mib"):
        if all(r.get(key) is not None for r in ok):
            out[key] = max(r[key] for r in ok)
    out.pop("times_ms", None)
    return out


def check_losses(results, dropout):
    """Each framework's losses against eager's, the same steps from the same initialisation
    on the same batch: a gross-error check that every timing is of the same computation
    (the parity tests are in test/). The first step's loss is the forward's: within 1e-5 of
    eager's. The last one's is after every step, whose rounding differs between frameworks
    and grows as a step memorises its batch: within 2 %. With dropout the frameworks draw
    different masks from the first step on, and the losses are printed, not compared.
    Returns the lines to print."""
    lines, ok = [], True
    eager = {r["size"]: r for r in results["steps"]
             if r["framework"] == "eager" and "error" not in r}
    for r in results["steps"]:
        ref = eager.get(r["size"])
        if "error" in r or ref is None or r is ref:
            continue
        for key, tol in (("first_loss", 1e-5), ("last_loss", 2e-2)):
            want = ref[key][0]
            for got in r[key]:
                if want is None or got is None or dropout:
                    continue
                rel = abs(got - want) / abs(want)
                if not rel <= tol:
                    ok = False
                    lines.append(f"LOSSES DIFFER: {r['size']} {r['framework']} {key} {got:.6g} "
                                 f"against eager's {want:.6g} (relative {rel:.1e} > {tol:g})")
        show = lambda v: "n/a" if v is None else f"{v:.6g}"  # noqa: E731 (no warm-up: no first)
        lines.append(f"{r['size']} losses, first and last step: {r['framework']} "
                     f"{show(r['first_loss'][0])}, {show(r['last_loss'][0])}; eager "
                     f"{show(ref['first_loss'][0])}, {show(ref['last_loss'][0])}")
    results["losses_agree"] = ok
    return lines


def main():
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", default=",".join(STEPS))
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--rounds", type=int, default=3,
                    help="runs per framework and size, interleaved; step times pooled")
    ap.add_argument("--dropout", type=float, default=0.0,
                    help="the model's dropout, for every framework (default 0: no dropout)")
    ap.add_argument("--steps", type=int, help="timed steps per round (default: tiny 200, "
                    "shakespeare 10)")
    ap.add_argument("--warmup", type=int, help="warm-up steps per round (default: tiny 50, "
                    "shakespeare 3)")
    ap.add_argument("--batch", type=int, help="sequences per step, for every size (default: "
                    "tiny 8, shakespeare 4)")
    model_arguments(ap)
    ap.add_argument("--note", help="a remark shown beside the run in the report, e.g. "
                    "\"busy host\"")
    ap.add_argument("--out", help="the file to write the run's record to (default: a new "
                    "file in bench/results/, named by when the run finished and the CPU)")
    args = ap.parse_args()
    for name, known in (("sizes", STEPS), ("frameworks", FRAMEWORKS)):
        unknown = [v for v in getattr(args, name).split(",") if v not in known]
        if unknown:
            shown = ", ".join(v or '""' for v in unknown)  # --sizes tiny, names ""
            ap.error(f"--{name}: unknown {shown} (known: {', '.join(known)})")
    refuse_dropout(ap, args.dropout)
    refuse_model_options(ap, args)
    if args.batch:
        refuse_huge_batch(ap, args.batch, args.sizes.split(","))
    # Now, not after the minutes of the run, whose results would then be lost.
    if args.out is not None:
        out_dir = os.path.dirname(os.path.abspath(args.out))
        if os.path.isdir(args.out):
            ap.error(f"--out: {args.out} is a directory")
        if not os.path.isdir(out_dir):
            ap.error(f"--out: no directory {out_dir} to write {os.path.basename(args.out)} in")
    refuse_below(ap, args, threads=1, rounds=1, steps=1, warmup=0, batch=1)  # gptc: last
    sizes, date = args.sizes.split(","), time.strftime("%Y-%m-%d")
    commit, dirty = store.git_commit(REPO)  # the tree measured, before the minutes of the run
    settings = dict(threads=args.threads, rounds=args.rounds, dropout=args.dropout,
                    model=args.model, attention=args.attention, padded=args.padded,
                    batch={s: args.batch or SIZES[s]["batch"] for s in sizes},
                    steps={s: STEPS[s][0] if args.steps is None else args.steps for s in sizes},
                    warmup={s: STEPS[s][1] if args.warmup is None else args.warmup
                            for s in sizes},
                    frameworks=args.frameworks.split(","))
    results = {"steps": []}  # the record's figures
    # Rounds: every framework runs once per round, in turn, and a size's step times are
    # pooled over the rounds. On a shared machine a burst of load then falls on all
    # frameworks alike instead of on whichever ran during it.
    latency = core_latency_build()
    for size in sizes:
        pooled = {}
        for _ in range(args.rounds):
            for fw in settings["frameworks"]:
                timed, warmup = settings["steps"][size], settings["warmup"][size]
                round_trip = core_round_trip(latency)  # just before the run
                r = run_json([sys.executable, os.path.join(HERE, "train_step.py"), "--framework",
                              fw, "--size", size, "--threads", str(args.threads),
                              # Many short tiny steps after a long warm-up: on this shared
                              # machine the first ~70 tiny steps of any framework run slower.
                              "--steps", str(timed), "--warmup", str(warmup),
                              "--dropout", str(args.dropout), "--attention", args.attention,
                              "--model", args.model, *(["--padded"] if args.padded else []),
                              *(["--batch", str(args.batch)] if args.batch else [])])
                r["core_round_trip_ns"] = round_trip
                r.setdefault("framework", fw)
                r.setdefault("size", size)
                print(json.dumps({k: v for k, v in r.items() if k != "times_ms"}), flush=True)
                pooled.setdefault(fw, []).append(r)
        for fw, runs in pooled.items():
            results["steps"].append(pool(runs))
    # The micro-kernel and OpenBLAS in turn, the best of the rounds for each.
    for _ in range(args.rounds):
        for name, bench in (("matmul", matmul_bench), ("sgemm_openblas", sgemm_bench)):
            r = bench()
            if r.get("gflops", 0) > results.get(name, {}).get("gflops", -1):
                results[name] = r
    loss_lines = check_losses(results, args.dropout)
    record = dict(finished=time.strftime(store.STAMP, time.gmtime()), commit=commit,
                  dirty=dirty, machine=store.machine_info(), settings=settings, date=date,
                  figures=results)
    if args.note:
        record["note"] = args.note
    out = store.write(record, args.out)

    print("\n| size | framework | ms/step median (min–max) | speed vs eager | tokens/s | "
          "kernels/step | step peak RSS MiB | step growth MiB | process peak RSS MiB | "
          "largest child's peak RSS MiB | CPUs' round trip ns, per round |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    eager = {r["size"]: r["ms_median"] for r in results["steps"]
             if r["framework"] == "eager" and "error" not in r}
    for r in results["steps"]:
        if "error" in r:
            print(f"| {r['size']} | {r['framework']} | error: {r['error']} | | | | | | | | |")
            continue
        k = r.get("kernels_per_step")
        ratio = eager[r["size"]] / r["ms_median"] if r["size"] in eager else None
        step_peak, growth = r.get("step_peak_rss_mib"), r.get("step_growth_mib")
        child = r.get("children_peak_rss_mib")
        print(f"| {r['size']} | {r['framework']} | {r['ms_median']:.1f} ({r['ms_min']:.1f}–"
              f"{r['ms_max']:.1f}) | {f'{ratio:.2f}x' if ratio else 'n/a'} | "
              f"{r['tokens_per_s']:,.0f} | {k if k is not None else 'n/a'} | "
              f"{f'{step_peak:.0f}' if step_peak else 'n/a'} | "
              f"{f'{growth:.1f}' if growth is not None else 'n/a'} | {r['peak_rss_mib']:.0f} | "
              f"{f'{child:.0f}' if child else 'n/a'} | {nanoseconds(r.get('core_round_trip_ns'))} |")
    m, s = results["matmul"], results["sgemm_openblas"]
    print(f"\nmatmul 384x1536x2048, one core: gptc {m.get('gflops', 0):.1f} GFLOP/s "
          f"({100 * m.get('fraction_of_peak', 0):.0f}% of the measured {m.get('fma_peak_gflops', 0):.0f} "
          f"GFLOP/s fp32 FMA peak); OpenBLAS sgemm {s.get('gflops', 0):.1f} GFLOP/s")
    if m.get("blocking"):  # the blocking the machine's caches gave (docs/architecture.md)
        b = m["blocking"]
        print(f"blocking: {b['order']} order, kc {b['kc']}, mc {b['mc']}, nc {b['nc']} "
              f"(caches from {b['caches_from']})")
    print("\n" + "\n".join(loss_lines))
    print(f"\nRecorded in {os.path.relpath(out)}. Against the targets (bold: missed; "
          "python3 bench/report.py shows every run's on docs/performance.md):\n"
          + "\n".join(table([(os.path.splitext(os.path.basename(out))[0], record)])))
    if not results["losses_agree"]:
        sys.exit("bench: a framework's losses differ from eager's (above): its timings are "
                 "not of the same computation")
    failed = [f"{r['size']} {r['framework']}" for r in results["steps"] if "error" in r]
    if failed:
        sys.exit(f"bench: {', '.join(failed)} failed (the error is in the table above)")


if __name__ == "__main__":
    main()
