"""Per-kernel wall time of a compiled artifact: where a step's time goes.

    python3 bench/kernel_profile.py ARTIFACT_DIR [--steps 10] [--threads 2] [--top 25]

Copies the artifact, wraps every kernel call of its entry function in a timer, rebuilds
kernels.so with the flags gptc uses, runs the entry `--steps` times on random inputs and
prints each kernel's mean milliseconds per call, largest first. Kernels with the same op
(attention, gelu, ...) are summed; horizontal groups are listed one by one with the ops they
hold. The artifact itself is not touched. Not a test: timings depend on the machine's load.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))


def _kernel_flags() -> list:
    """The host compiler flags gptc builds kernels.so with (`gptc cxxflags`), so that what
    the bench tools build from the prelude is built as the kernels are."""
    from gptc.compiler import find_tool
    return subprocess.run([find_tool("gptc"), "cxxflags"], capture_output=True, text=True,
                          check=True).stdout.split()


FLAGS = _kernel_flags()


def instrument(source: str):
    """The source with a timer around each kernel call of gptc_entry, and the kernels' names."""
    head, entry = source.split("GPTC_EXPORT const char* gptc_entry(", 1)
    lines, names = entry.split("\n"), []
    for i, line in enumerate(lines):
        m = re.match(r"  (k\d+_\w+)\(", line)
        if m:
            names.append(m.group(1))
            lines[i] = ("  { const auto gptc_t0 = std::chrono::steady_clock::now(); " + line.strip()
                        + f" gptc_prof[{len(names) - 1}] += std::chrono::duration<double>("
                          "std::chrono::steady_clock::now() - gptc_t0).count(); }")
    prof = (f"#include <chrono>\nstatic double gptc_prof[{max(len(names), 1)}];\n"
            "extern \"C\" __attribute__((visibility(\"default\"))) const double* "
            "gptc_profile_seconds(void) { return gptc_prof; }\n")
    return prof + head + "GPTC_EXPORT const char* gptc_entry(" + "\n".join(lines), names


def random_inputs(manifest: dict) -> list:
    rng = np.random.default_rng(0)
    rows = [a["shape"][0] for a in manifest["args"] if a["kind"] == "param" and len(a["shape"]) == 2]
    bound = min(rows) if rows else 2
    out = []
    for a in (a for a in manifest["args"] if a["kind"] == "input"):
        if a["name"] == "rng":
            out.append(np.array([7, 1], dtype=np.int64))
        elif a["name"] in ("lr", "step"):
            out.append(np.array(1e-3 if a["name"] == "lr" else 1.0))
        elif a["dtype"] == "i64":  # token ids: below every matrix parameter's row count
            out.append(rng.integers(0, bound, size=a["shape"]).astype(np.int64))
        else:
            dtype = np.float64 if a["dtype"] == "f64" else np.float32
            out.append(rng.standard_normal(a["shape"]).astype(dtype))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("artifact")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    from gptc import _runtime
    import ctypes

    work = tempfile.mkdtemp(prefix="gptc-profile-")
    try:
        art = os.path.join(work, "artifact")
        shutil.copytree(args.artifact, art)
        with open(os.path.join(art, "kernels.cpp")) as f:
            source, names = instrument(f.read())
        with open(os.path.join(art, "kernels.cpp"), "w") as f:
            f.write(source)
        cxx = os.environ.get("GPTC_CXX", "c++")
        subprocess.run([cxx, *FLAGS, "-I", os.path.join(REPO, "runtime", "include"),
                        os.path.join(art, "kernels.cpp"), "-o", os.path.join(art, "kernels.so")],
                       check=True)
        with open(os.path.join(art, "manifest.json")) as f:
            manifest = json.load(f)
        # The library is now the instrumented one, not the one gptc compile recorded: its
        # size and checksum go (the runtime then checks only that it is a whole ELF file).
        for key in ("library_bytes", "library_fnv1a64"):
            manifest.pop(key, None)
        with open(os.path.join(art, "manifest.json"), "w") as f:
            json.dump(manifest, f)
        model = _runtime.Model(art)
        model.set_num_threads(args.threads)
        inputs = random_inputs(manifest)
        model.run(inputs)  # warm-up, not counted
        # The counters of the model's own copy of kernels.so (the runtime loads one per
        # Model), not of the artifact's file opened again.
        profile_seconds = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_double))(
            model.symbol_address("gptc_profile_seconds"))
        before = profile_seconds()[:len(names)]
        t0 = time.perf_counter()
        for _ in range(args.steps):
            model.run(inputs)
        wall = (time.perf_counter() - t0) / args.steps * 1e3
        after = profile_seconds()[:len(names)]
    finally:
        shutil.rmtree(work, ignore_errors=True)

    totals = {}
    for name, a, b in zip(names, before, after):
        ms = (b - a) / args.steps * 1e3
        if "horizontal" in name:
            ops = sorted(set(re.findall(name + r"_\d+_([a-z_]+)\(", source)))
            key = f"{name} [{', '.join(ops)}]"
        else:
            key = re.sub(r"^k\d+_", "", name)
        totals[key] = totals.get(key, 0.0) + ms
    kernels = sum(totals.values())
    print(f"{args.steps} calls, {args.threads} threads: {wall:.3f} ms per call, "
          f"{kernels:.3f} ms in {len(names)} kernels")
    for key, ms in sorted(totals.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{ms:9.3f} ms {100 * ms / kernels:5.1f}%  {key}")


if __name__ == "__main__":
    main()
