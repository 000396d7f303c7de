"""Builds a CUDA artifact's kernels.so again from its kernels.cu, on the machine it is to
run on, with nvcc and the portable flags (scripts/cuda-portable-flags.txt), and records the
new library's size and FNV-1a checksum in its manifest (the runtime checks both).

    python3 scripts/relink_cuda_artifact.py ARTIFACT [--arch sm_90]

For the GPU check (scripts/gpu_check.sh): a library built on another machine's image may
not load on the GPU machine's (other system libraries); the source is the same, so the
kernels are.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fnv1a64_hex(data: bytes) -> str:
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return f"{h:016x}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("artifact")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    with open(os.path.join(ROOT, "scripts", "cuda-portable-flags.txt")) as f:
        flags = f.read().split()
    manifest_path = os.path.join(args.artifact, "manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    if manifest.get("target") != "cuda":
        sys.exit(f"relink_cuda_artifact: error: {args.artifact} is not a cuda artifact")
    lib = os.path.join(args.artifact, manifest.get("library", "kernels.so"))
    fresh = lib + ".fresh"
    subprocess.run([nvcc, *flags, f"-arch={args.arch}", "-Xcompiler=-fPIC,-fvisibility=hidden",
                    "-shared", "-I" + os.path.join(ROOT, "runtime", "include"),
                    os.path.join(args.artifact, manifest.get("source", "kernels.cu")), "-o", fresh],
                   check=True)
    with open(fresh, "rb") as f:
        data = f.read()
    manifest["library_bytes"] = len(data)
    manifest["library_fnv1a64"] = fnv1a64_hex(data)
    os.replace(fresh, lib)
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
