#!/usr/bin/env bash
# The GPU check: run on a machine with an NVIDIA GPU, nvcc and cuBLAS (no MLIR needed).
#
#   scripts/gpu_check.sh [OUTDIR]        (default: $OUT, else /tmp/gptc-gpu-check)
#
# Part 1, the families: builds test/cuda/kernel_families.cu with the portable flags
# (scripts/cuda-portable-flags.txt) for sm_90 and runs it: every CUDA kernel family bit for
# bit against the CPU's prelude, and the matmul's speed against cuBLAS on shakespeare_char's
# shapes; then compute-sanitizer's memcheck on the small shapes, and its racecheck on the
# weight gradients' products (their asynchronous copies).
# Part 2, the generated step (when scripts/gpu_prepare.py has filled build/gpu-check, or
# $GPTC_GPU_PREP, on the machine with the compiler; carry that folder): the test GPT's
# training step compiled by gptc for the GPU, run through gptc's runtime
# (examples/train_step.cpp, built here with g++): 20 steps with dropout 0.1 must give the CPU
# artifact's losses, parameters and moments bit for bit, twice; without dropout, parity with
# torch's CUDA eager (bench/gpu_torch.py parity); a LLaMA-style relative's 20 steps bit for
# bit against its CPU artifact's; gradient accumulation's two programs (5 steps of 4
# micro-batches) bit for bit against the CPU's; the test GPT's generator writing the CPU's
# text (examples/generate.c); memcheck of one step; and speed, gptc
# (bench/step_time.cpp) beside torch eager, torch.compile and torch.compile with CUDA graphs
# (mode="reduce-overhead") at the tiny and shakespeare_char sizes, with gptc's kernels a
# step and longest chain of them as its graph holds them (step.json, speed.jsonl);
# generation's tokens a second, gptc's generator (bench/generate_time.cpp) beside nanoGPT's
# loop in torch eager and under torch.compile (generate_speed.jsonl);
# each step without its groups' branches or its asynchronous copies
# (speed_variants.jsonl); then each kernel's time in a step (GPTC_CUDA_PROFILE:
# profile_<size>.tsv).
# GPTC_GPU_CHECK_PARTS="families step" (the default) chooses the parts.
# Writes the JSON records, the logs and nvidia-smi's view into OUTDIR; exit status 1 if any
# bit differs, parity fails or memcheck finds an error.
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
parts=${GPTC_GPU_CHECK_PARTS:-families step}
if [[ " $parts " == *" families "* ]]; then
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
  # The products whose tiles arrive by asynchronous copies: a shared-memory race (a stage
  # overwritten while read, or read before it landed) is an error.
  echo "== compute-sanitizer racecheck (the weight gradients' products)"
  compute-sanitizer --tool racecheck --error-exitcode 3 "$build/families" --quick --only dW \
    > "$out/racecheck.txt" 2>&1
  rc=$?
  tail -n 3 "$out/racecheck.txt"
  [ $rc -eq 0 ] || { echo "gpu_check: racecheck exit status $rc"; status=1; }
else
  echo "compute-sanitizer not found: memcheck not run" | tee "$out/memcheck.txt"
fi
fi

prep=${GPTC_GPU_PREP:-build/gpu-check}
if [[ " $parts " == *" step "* ]]; then
  if [ ! -f "$prep/prepared.txt" ]; then
    echo "gpu_check: no $prep/prepared.txt: run scripts/gpu_prepare.py where gptc is, and carry it"
    exit 1
  fi
  read -r _ steps _ seed _ lr < "$prep/prepared.txt"
  echo "== the generated training step ($steps steps, seed $seed, lr $lr)"
  # The runtime's sources compiled once, side by side, then its three drivers.
  cxx=(c++ -std=c++17 -O2 '-DGPTC_VERSION="gpu-check"' -Iruntime/include -I"$prep/include")
  built=true
  for src in runtime/src/*.cpp; do
    "${cxx[@]}" -c "$src" -o "$build/rt_$(basename "$src" .cpp).o" &
  done
  for job in $(jobs -p); do wait "$job" || built=false; done
  ar rcs "$build/libgptc_runtime.a" "$build"/rt_*.o || built=false
  cc -Iruntime/include -c examples/generate.c -o "$build/generate.o" || built=false
  runtime=("$build/libgptc_runtime.a" -ldl -pthread)
  "${cxx[@]}" examples/train_step.cpp "${runtime[@]}" -o "$build/train_step" & a=$!
  "${cxx[@]}" bench/step_time.cpp "${runtime[@]}" -o "$build/step_time" & b=$!
  c++ "$build/generate.o" "${runtime[@]}" -o "$build/generate" & c=$!
  "${cxx[@]}" bench/generate_time.cpp "${runtime[@]}" -o "$build/generate_time" & d=$!
  for job in $a $b $c $d; do wait "$job" || built=false; done
  [ "$built" = true ] || { echo "gpu_check: building the runtime's drivers failed"; exit 1; }
  # shakespeare_char's step travels without its weights: torch's init, written here.
  python3 bench/gpu_torch.py weights --size shakespeare_char \
    --manifest "$prep/shakespeare_char/cuda/manifest.json" \
    --out "$prep/shakespeare_char/cuda/weights.safetensors"
  # A library nvcc built on the other machine may not load on this one's image: then build
  # it here again from the same kernels.cu (scripts/relink_cuda_artifact.py).
  # (accumulate's update, and the generator's prefill and shorter step, load only beside
  # the program holding their weights: alone, a library that loads fails for the missing
  # params, not with "cannot load")
  for case in tiny-dropout llama tiny shakespeare_char accumulate/cuda/micro accumulate/cuda/step \
      generate/cuda generate/cuda/prefill generate/cuda/steps/32; do
    dir=$prep/$case/cuda
    [[ $case == */* ]] && dir=$prep/$case
    log=$out/load_${case//\//_}.log
    if [ -d "$dir" ] && ! "$build/step_time" "$dir" 0 1 > /dev/null 2> "$log" &&
        grep -q "cannot load" "$log"; then
      echo "gpu_check: $case: $(cat "$log"); building kernels.so here"
      python3 scripts/relink_cuda_artifact.py "$dir" || status=1
    fi
  done
  # Bit for bit: the CPU artifact's run (made with the step) against two GPU runs, the
  # first with the step as one CUDA graph, the second launching kernel by kernel.
  same=true
  for run in 1 2; do
    graph=$([ $run = 1 ] && echo 1 || echo 0)
    GPTC_CUDA_GRAPH=$graph "$build/train_step" "$prep/tiny-dropout/cuda" "$prep/batches-tiny.bin" \
      "$steps" "$seed" "$lr" "$out/step_run$run.safetensors" > "$out/step_run${run}_losses.txt" \
      2> "$out/step_run$run.log" || { cat "$out/step_run$run.log"; same=false; }
    cmp -s "$out/step_run${run}_losses.txt" "$prep/tiny-dropout/expected_losses.txt" || same=false
    cmp -s "$out/step_run$run.safetensors" "$prep/tiny-dropout/expected.safetensors" || same=false
  done
  repeat=false
  cmp -s "$out/step_run1.safetensors" "$out/step_run2.safetensors" && repeat=true
  echo "CPU == GPU bitwise (losses, parameters, moments): $same; two GPU runs equal: $repeat"
  [ "$same" = true ] && [ "$repeat" = true ] || status=1
  # The same for the LLaMA-style relative (RMSNorm, rotary, grouped-query attention, SwiGLU).
  llama=null  # (a folder prepared before this case existed)
  if [ -d "$prep/llama/cuda" ]; then
    llama=false
    "$build/train_step" "$prep/llama/cuda" "$prep/batches-tiny.bin" "$steps" "$seed" "$lr" \
      "$out/llama.safetensors" > "$out/llama_losses.txt" 2> "$out/llama.log" &&
      cmp -s "$out/llama_losses.txt" "$prep/llama/expected_losses.txt" &&
      cmp -s "$out/llama.safetensors" "$prep/llama/expected.safetensors" && llama=true
    echo "the LLaMA-style relative, CPU == GPU bitwise: $llama"
    [ "$llama" = true ] || { cat "$out/llama.log"; status=1; }
  fi
  # Gradient accumulation: the micro-batch program and the update sharing the params and
  # the gradient sums in device memory, each its own graph, against the CPU's bits.
  accumulate=null  # (a folder prepared before this case existed)
  if [ -d "$prep/accumulate/cuda" ]; then
    accumulate=false
    read -r acc_steps acc_n < "$prep/accumulate/accumulation.txt"
    "$build/train_step" "$prep/accumulate/cuda/step" "$prep/batches-tiny.bin" "$acc_steps" \
      "$seed" "$lr" "$out/accumulate.safetensors" "$prep/accumulate/cuda/micro" "$acc_n" \
      > "$out/accumulate_losses.txt" 2> "$out/accumulate.log" &&
      cmp -s "$out/accumulate_losses.txt" "$prep/accumulate/expected_losses.txt" &&
      cmp -s "$out/accumulate.safetensors" "$prep/accumulate/expected.safetensors" &&
      accumulate=true
    echo "gradient accumulation ($acc_n micro-batches a step), CPU == GPU bitwise: $accumulate"
    [ "$accumulate" = true ] || { cat "$out/accumulate.log"; status=1; }
  fi
  # Generation: the test GPT's generator (its decode steps and prefill sharing the weights
  # in device memory) through examples/generate.c, against the CPU generator's text.
  generate=null  # (a folder prepared before this case existed)
  if [ -d "$prep/generate/cuda" ]; then
    generate=false
    read -r -a gen_args < "$prep/generate/args.txt"
    "$build/generate" "$prep/generate/cuda" "${gen_args[@]}" > "$out/generate.txt" \
        2> "$out/generate.log" &&
      cmp -s "$out/generate.txt" "$prep/generate/expected.txt" && generate=true
    echo "generation, the CPU's text on the GPU: $generate"
    [ "$generate" = true ] || { cat "$out/generate.log"; status=1; }
  fi
  # Parity with torch's CUDA eager, from the same weights and batches, without dropout.
  "$build/train_step" "$prep/tiny/cuda" "$prep/batches-tiny.bin" "$steps" "$seed" "$lr" \
    "$out/parity.safetensors" > "$out/parity_losses.txt" &&
    python3 bench/gpu_torch.py parity --weights "$prep/tiny/cuda/weights.safetensors" \
      --batches "$prep/batches-tiny.bin" --steps "$steps" --lr "$lr" \
      --losses "$out/parity_losses.txt" --params "$out/parity.safetensors" \
      | tee "$out/parity.json"
  grep -q '"within": true' "$out/parity.json" 2> /dev/null || { echo "gpu_check: parity failed"; status=1; }
  memcheck=not-run
  if command -v compute-sanitizer > /dev/null; then
    compute-sanitizer --tool memcheck --error-exitcode 3 "$build/train_step" \
      "$prep/tiny-dropout/cuda" "$prep/batches-tiny.bin" 1 "$seed" "$lr" "$build/one.safetensors" \
      > "$out/step_memcheck.txt" 2>&1 && memcheck=clean || { memcheck=errors; status=1; }
    tail -n 2 "$out/step_memcheck.txt"
  fi
  # The bits' verdict, written before the timings: a call cut short by its time limit still
  # brings it back.
  printf '{"bitwise": %s, "repeatable": %s, "bitwise_llama": %s, "bitwise_accumulate": %s, "generate_text": %s, "memcheck": "%s", "steps": %s}\n' \
    "$same" "$repeat" "$llama" "$accumulate" "$generate" "$memcheck" "$steps" > "$out/step.json"
  # Speed, gptc beside torch in the same run.
  : > "$out/speed.jsonl"
  for size in tiny shakespeare_char; do
    "$build/step_time" "$prep/$size/cuda" 10 50 | tee -a "$out/speed.jsonl"
    for mode in eager compile reduce-overhead; do
      python3 bench/gpu_torch.py time --size "$size" --mode "$mode" 2> "$out/torch_${size}_$mode.log" \
        | tee -a "$out/speed.jsonl"
    done
  done
  # Generation's speed: the test GPT's generator, 150 tokens for each of its 2 texts (through
  # the shorter step, the move to the full one, the prefill and the context shift), beside
  # nanoGPT's loop (the whole cropped context each token) in torch.
  if [ -d "$prep/generate/cuda" ]; then
    "$build/generate_time" "$prep/generate/cuda" 150 5 | tee "$out/generate_speed.jsonl"
    for mode in eager compile; do
      timeout 120 python3 bench/gpu_torch.py generate --mode "$mode" --tokens 150 --texts 5 \
        2> "$out/torch_generate_$mode.log" | tee -a "$out/generate_speed.jsonl"
    done
  fi
  # What the groups' parallel branches and the weight gradients' asynchronous copies are
  # worth: each step with each off, both off, and as built again (speed_variants.jsonl,
  # each line with its environment).
  : > "$out/speed_variants.jsonl"
  for size in tiny shakespeare_char; do
    for variant in GPTC_CUDA_BRANCHES=0 GPTC_CUDA_ASYNC_COPIES=0 \
        "GPTC_CUDA_BRANCHES=0 GPTC_CUDA_ASYNC_COPIES=0" ""; do
      env $variant "$build/step_time" "$prep/$size/cuda" 10 50 \
        | sed "s/^{/{\"env\": \"$variant\", /" | tee -a "$out/speed_variants.jsonl"
    done
  done
  # Where a step's time goes: each kernel call between two CUDA events, no graph
  # (GPTC_CUDA_PROFILE), a line a kernel, slowest first.
  for size in tiny shakespeare_char; do
    GPTC_CUDA_PROFILE="$out/profile_$size.tsv" "$build/step_time" "$prep/$size/cuda" 2 10 \
      > "$out/profile_$size.json" && head -n 12 "$out/profile_$size.tsv"
  done
fi
exit $status
