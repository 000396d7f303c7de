"""Turns a GPU check's output folder into records of the results store (bench/results/gpu/).

    python3 bench/gpu_record.py OUTDIR [--store DIR] [--note TEXT]

scripts/gpu_check.sh writes into OUTDIR nvidia-smi's view (nvidia-smi.csv); its families part
kernel_families.json; its step part step.json (bitwise, repeatable, memcheck), parity.json,
speed.jsonl (bench/step_time's and bench/gpu_torch.py's lines), speed_variants.jsonl (the
step with the groups' branches or the asynchronous copies off), generate_speed.jsonl
(bench/generate_time's and gpu_torch.py generate's lines) and profile_<size>.tsv. Each
part found becomes one record, named after the time it is written and the GPU
(<time>-<gpu>-kernel-families.json, <time>-<gpu>-step.json); the path of each is printed.
bench/report.py puts the latest of each on docs/performance.md.
"""
import csv
import datetime
import glob
import json
import os
import re

import store
from _cli import Parser, fail, read

FAMILIES_NUMERICS = "portable fp32; cuBLAS with CUBLAS_PEDANTIC_MATH (no TF32)"
STEP_NUMERICS = "portable fp32; torch fp32 with TF32 off"


def read_lines(path) -> list:
    """(FILE:LINE, object) for each line of a .jsonl file (blank lines skipped)."""
    out = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    out.append((f"{path}:{number}", json.loads(line)))
                except json.JSONDecodeError as e:
                    fail(f"{path}:{number} is not JSON: {e}")
    return out


def smi(outdir) -> dict:
    """nvidia-smi's first GPU: name, driver and clocks (absent fields are left out)."""
    path = os.path.join(outdir, "nvidia-smi.csv")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        rows = [[c.strip() for c in row] for row in csv.reader(f) if row]
    if len(rows) < 2:
        return {}
    header = [h.split(" [")[0] for h in rows[0]]
    return dict(zip(header, rows[1]))


def size_of(line) -> str:
    """The model size of a speed line: torch's name it, gptc's is its artifact's folder
    (PREP/<size>/cuda)."""
    if "size" in line:
        return line["size"]
    return os.path.basename(os.path.dirname(os.path.normpath(line["artifact"])))


def speed(line, where) -> dict:
    """A speed line as the record keeps it; a line of neither tool's form stops with one
    line naming `where` (FILE:LINE)."""
    gptc = "artifact" in line
    needed = ("median_ms", "min_ms", "max_ms") + (() if gptc else ("mode", "size"))
    if not isinstance(line, dict) or any(k not in line for k in needed):
        fail(f"{where}: not a line of bench/step_time or bench/gpu_torch.py time")
    return {"size": size_of(line), "framework": "gptc" if gptc else "torch",
            "mode": "graph" if gptc else line["mode"], "env": line.get("env", ""),
            "median_ms": line["median_ms"], "min_ms": line["min_ms"], "max_ms": line["max_ms"],
            "kernels": line.get("kernels") if gptc else line.get("kernels_per_step"),
            "longest_kernel_chain": line.get("longest_kernel_chain") if gptc else None,
            "device_bytes": line.get("device_bytes") if gptc else line.get("peak_bytes")}


def generation(line, where) -> dict:
    """A generation speed line as the record keeps it; a line of neither tool's form stops
    with one line naming `where`."""
    needed = ("tokens_per_s_median", "tokens_per_s_min", "tokens_per_s_max", "batch", "tokens")
    if not isinstance(line, dict) or any(k not in line for k in needed):
        fail(f"{where}: not a line of bench/generate_time or bench/gpu_torch.py generate")
    gptc = "generator" in line
    return {"framework": "gptc" if gptc else "torch", "mode": "generator" if gptc else
            line.get("mode"), **{k: line[k] for k in needed}}


def profile(path, rows=12) -> list:
    """The slowest `rows` kernels of a GPTC_CUDA_PROFILE file."""
    with open(path) as f:
        table = list(csv.DictReader(f, delimiter="\t"))
    return [{"kernel": r["kernel"], "calls": int(r["calls"]), "total_ms": float(r["total_ms"])}
            for r in table[:rows]]


def records(outdir, note, now) -> list:
    """[(name, record)] for the parts of `outdir`."""
    gpu = smi(outdir)
    name = gpu.get("name", "unknown GPU")
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower().replace("nvidia", "")).strip("-") or "gpu"
    stamp = now.strftime("%Y-%m-%dT%H%MZ")
    common = {"finished": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "gpu": name,
              "driver": gpu.get("driver_version"), "note": note}
    out = []
    families = os.path.join(outdir, "kernel_families.json")
    if os.path.exists(families):
        r = read(families, as_json=True)
        out.append((f"{stamp}-{slug}-kernel-families", {
            **common, "gpu": r.get("device", name),
            "kind": "kernel families (test/cuda/kernel_families.cu)", "sm": r.get("sm"),
            "numerics": FAMILIES_NUMERICS, "failures": r.get("failures"),
            "results": r.get("results", [])}))
    step = os.path.join(outdir, "step.json")
    if os.path.exists(step):
        r = {**common, "kind": "step", "numerics": STEP_NUMERICS, **read(step, as_json=True)}
        parity = os.path.join(outdir, "parity.json")
        r["parity"] = read(parity, as_json=True) if os.path.exists(parity) else None
        for key, file in (("speed", "speed.jsonl"), ("variants", "speed_variants.jsonl")):
            path = os.path.join(outdir, file)
            r[key] = [speed(line, where) for where, line in read_lines(path)] \
                if os.path.exists(path) else []
        path = os.path.join(outdir, "generate_speed.jsonl")
        r["generate_speed"] = [generation(line, where) for where, line in read_lines(path)] \
            if os.path.exists(path) else []
        r["profile"] = {}
        for path in sorted(glob.glob(os.path.join(outdir, "profile_*.tsv"))):
            size = os.path.basename(path)[len("profile_"):-len(".tsv")]
            r["profile"][size] = profile(path)
        out.append((f"{stamp}-{slug}-step", r))
    return out


def main():
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", help="the GPU check's output folder")
    ap.add_argument("--store", default=os.path.join(store.STORE, "gpu"),
                    help="where the records go (default: bench/results/gpu)")
    ap.add_argument("--note", default="", help="a line on the run, kept in each record")
    args = ap.parse_args()
    if not os.path.isdir(args.outdir):
        fail(f"{args.outdir} is not a folder")
    written = records(args.outdir, args.note, datetime.datetime.now(datetime.timezone.utc))
    if not written:
        fail(f"{args.outdir} holds neither kernel_families.json nor step.json "
             "(scripts/gpu_check.sh writes them)")
    os.makedirs(args.store, exist_ok=True)
    for name, record in written:
        path = os.path.join(args.store, name + ".json")
        with open(path, "w") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
        print(path)


if __name__ == "__main__":
    main()
