"""Per-kernel wall time of a compiled artifact: where a step's time goes.

    python3 bench/kernel_profile.py ARTIFACT_DIR [--steps 10] [--threads 2] [--top 25] [--each]

Copies the artifact, wraps every kernel call of its entry function in a timer, rebuilds
kernels.so with the flags gptc uses, runs the entry `--steps` times on random inputs and
prints each kernel's mean milliseconds per call, largest first. Kernels with the same op
(attention, gelu, ...) are summed, or with --each listed one by one (a kernel's calls, one
a layer, summed: k8_matmul is the MLP's first product); horizontal groups are listed one by
one with the ops they hold. The artifact itself is not touched. Not a test: timings depend
on the machine's load.
"""
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
from _cli import Parser, fail, read, refuse_below  # noqa: E402 (beside this file)


def kernel_flags() -> list:
    """The host compiler flags gptc builds kernels.so with (`gptc cxxflags`), so that what
    the bench tools build from the prelude is built as the kernels are."""
    from gptc.compiler import GptcError, find_tool
    try:
        run = subprocess.run([find_tool("gptc"), "cxxflags"], capture_output=True, text=True)
    except (GptcError, OSError) as e:
        fail(f"cannot ask gptc for the kernels' flags: {e}")
    if run.returncode != 0:
        fail(f"gptc cxxflags failed: {(run.stderr.strip().splitlines() or ['no message'])[-1]}")
    return run.stdout.split()


def compile_kernels(source: str, library: str) -> None:
    """Compiles `source` into `library` as gptc compiles kernels.so (GPTC_CXX, else c++); a
    failure ends in one line after the compiler's own messages."""
    cxx = os.environ.get("GPTC_CXX", "c++")
    try:
        subprocess.run([cxx, *kernel_flags(), "-I", os.path.join(REPO, "runtime", "include"),
                        source, "-o", library], check=True)
    except OSError as e:
        fail(f"cannot run the host compiler {cxx}: {e.strerror or e}")
    except subprocess.CalledProcessError as e:
        fail(f"{cxx} failed on {os.path.basename(source)} (exit status {e.returncode}; its "
             "messages are above)")


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


def read_artifact(path: str):
    """The artifact's manifest, its kernels.cpp instrumented, and the kernels' names, before
    anything is copied or built; else one line naming what is wrong. The runtime checks the
    rest of the manifest when it loads the copy."""
    if not os.path.isdir(path):
        fail(f"{path}: " + ("not a directory" if os.path.exists(path) else "no such directory")
             + " (the artifact of a gptc compile is one)")
    manifest = read(os.path.join(path, "manifest.json"), as_json=True)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("args"), list) \
            or not all(isinstance(a, dict) for a in manifest["args"]):
        fail(f"{os.path.join(path, 'manifest.json')}: not an artifact's manifest (a JSON object "
             "whose \"args\" is a list of objects)")
    source = read(os.path.join(path, "kernels.cpp"))
    if "GPTC_EXPORT const char* gptc_entry(" not in source:
        fail(f"{os.path.join(path, 'kernels.cpp')}: no gptc_entry function (not the kernels of "
             "a gptc compile)")
    return (manifest, *instrument(source))


def main():
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("artifact")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--each", action="store_true",
                    help="each kernel on a line of its own, not summed by op")
    args = ap.parse_args()
    refuse_below(ap, args, steps=1, top=1, threads=1)
    manifest, source, names = read_artifact(args.artifact)
    from gptc import _runtime
    import ctypes

    work = tempfile.mkdtemp(prefix="gptc-profile-")
    try:
        art = os.path.join(work, "artifact")
        shutil.copytree(args.artifact, art)
        with open(os.path.join(art, "kernels.cpp"), "w") as f:
            f.write(source)
        compile_kernels(os.path.join(art, "kernels.cpp"), os.path.join(art, "kernels.so"))
        # The library is now the instrumented one, not the one gptc compile recorded: its
        # size and checksum go (the runtime then checks only that it is a whole ELF file).
        for key in ("library_bytes", "library_fnv1a64"):
            manifest.pop(key, None)
        with open(os.path.join(art, "manifest.json"), "w") as f:
            json.dump(manifest, f)
        try:
            model = _runtime.Model(art)
            model.set_num_threads(args.threads)
            inputs = random_inputs(manifest)
            model.run(inputs)  # warm-up, not counted
        except RuntimeError as e:  # the runtime's message, of the copy: named as the artifact
            fail(str(e).replace(art, os.path.normpath(args.artifact)))
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
            key = name if args.each else re.sub(r"^k\d+_", "", name)
        totals[key] = totals.get(key, 0.0) + ms
    kernels = sum(totals.values())
    print(f"{args.steps} calls, {args.threads} threads: {wall:.3f} ms per call, "
          f"{kernels:.3f} ms in {len(names)} kernels")
    for key, ms in sorted(totals.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{ms:9.3f} ms {100 * ms / kernels:5.1f}%  {key}")


if __name__ == "__main__":
    main()
