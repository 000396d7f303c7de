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
