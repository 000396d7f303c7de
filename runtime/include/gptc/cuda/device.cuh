// gptc/cuda/device.cuh — what the CUDA kernel families build on: CUDA's runtime under nvcc,
// or, with GPTC_CUDA_EMULATE defined, gptc/cuda/emulate.hpp, which runs the same kernel
// source on the CPU (blocks one after another, each thread of a block an OS thread,
// shuffles, barriers and shared memory emulated) so that the families are checked where
// there is no GPU. GPTC_LAUNCH(kernel, grid, block, stream)(args...) launches either way.
#pragma once

#if defined(GPTC_CUDA_EMULATE)
#include "gptc/cuda/emulate.hpp"
#else
#include <cuda_runtime.h>
#define GPTC_LAUNCH(kernel, grid, block, stream) kernel<<<(grid), (block), 0, (stream)>>>
#endif

// Every kernel of a family begins with GPTC_CUDA_KERNEL_BEGIN(): it returns at once when
// GPTC_CUDA_HALTED() holds. That is never, unless the includer defines it first: a
// generated step does (gptc/cuda/generated.cuh), so that once its first kernels have found
// a bad id, the rest of the step does nothing and changes no parameter. The test is the
// same for every thread of a launch, so a kernel with barriers returns whole.
#ifndef GPTC_CUDA_HALTED
#define GPTC_CUDA_HALTED() false
#endif
#define GPTC_CUDA_KERNEL_BEGIN() \
  do {                           \
    if (GPTC_CUDA_HALTED()) return; \
  } while (0)
