// gptc/cuda/device.cuh — what the CUDA kernel families build on: CUDA's runtime under nvcc,
// or, with GPTC_CUDA_EMULATE defined, gptc/cuda/emulate.hpp, which runs the same kernel
// source on the CPU (blocks one after another, each thread of a block an OS thread,
// shuffles, barriers and shared memory emulated) so that the families are checked where
// there is no GPU. GPTC_LAUNCH(kernel, grid, block, stream)(args...) launches either way.
#pragma once

#include <cstdlib>
#include <cstring>

#if defined(GPTC_CUDA_EMULATE)
#include "gptc/cuda/emulate.hpp"
#else
#include <cuda_runtime.h>
#define GPTC_LAUNCH(kernel, grid, block, stream) kernel<<<(grid), (block), 0, (stream)>>>

// Asynchronous copies from global to shared memory (sm_80's cp.async), for kernels that
// fill shared memory a few steps ahead of their use. A thread's copies since its last
// commit form a group; copies_wait<N>() returns once all but its N most recent groups have
// landed (its own copies: a barrier after it makes them visible to the block). The
// emulation runs a group's copies only when it is waited for, so a kernel that reads a
// stage before waiting for it reads stale data there too.
namespace gptc::cuda {
// 16 bytes from `global` to `shared` (both 16-byte aligned), or 16 zero bytes where !in
// (no global byte is read then).
__device__ __forceinline__ void copy16_async(void* shared, const void* global, bool in) {
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(global),
               "r"(in ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void copies_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void copies_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
}  // namespace gptc::cuda
#endif

namespace gptc::cuda {
// Whether environment variable `name` is set to `value` (the GPU path's switches:
// GPTC_CUDA_DEBUG=1, GPTC_CUDA_GRAPH=0, GPTC_CUDA_BRANCHES=0, GPTC_CUDA_ASYNC_COPIES=0), for
// a caller that reads it once.
inline bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}
}  // namespace gptc::cuda

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

// The blocks a kernel's loops run over (GPTC_CUDA_FOR and the others): the whole launch's.
#define GPTC_CUDA_GRID() const int64_t gptc_block = blockIdx.x, gptc_blocks = gridDim.x
