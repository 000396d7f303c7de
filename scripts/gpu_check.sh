#!/usr/bin/env bash
# The GPU check: run on a machine with an NVIDIA GPU, nvcc and cuBLAS (no MLIR needed).
#
#   scripts/gpu_check.sh [OUTDIR]        (default: $OUT, else /tmp/gptc-gpu-check)
#
# Builds test/cuda/kernel_families.cu with the portable flags (scripts/cuda-portable-flags.txt)
# for sm_90 and runs it: every CUDA kernel family bit for bit against the CPU's prelude, and
# the matmul's speed against cuBLAS on shakespeare_char's shapes. Then compute-sanitizer's memcheck on the small shapes.
# Writes kernel_families.json, the logs and nvidia-smi's view into OUTDIR; exit status 1 if
# any bit differs or memcheck finds an error.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/gptc-gpu-check}}
mkdir -p "$out"
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
read -r -a flags < scripts/cuda-portable-flags.txt
build=$(mktemp -d)
status=0

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total \
  --format=csv > "$out/nvidia-smi.csv" 2>&1
cat "$out/nvidia-smi.csv"
"$nvcc" "${flags[@]}" -arch=sm_90 -Xcompiler=-fopenmp -Iruntime/include \
  test/cuda/kernel_families.cu -o "$build/families" -lcublas \
  || { echo "gpu_check: the build failed"; exit 1; }

echo "== kernel families"
"$build/families" "$out/kernel_families.json" | tee "$out/kernel_families.txt" || status=1

echo "== compute-sanitizer memcheck (small shapes)"
if command -v compute-sanitizer > /dev/null; then
  compute-sanitizer --tool memcheck --error-exitcode 3 "$build/families" --quick \
    > "$out/memcheck.txt" 2>&1
  rc=$?
  tail -n 3 "$out/memcheck.txt"
  [ $rc -eq 0 ] || { echo "gpu_check: memcheck exit status $rc"; status=1; }
else
  echo "compute-sanitizer not found: memcheck not run" | tee "$out/memcheck.txt"
fi
exit $status
