// gptc/cuda/emulate.hpp — the CUDA kernel families' source, run on the CPU.
//
// Included (through gptc/cuda/device.cuh) when GPTC_CUDA_EMULATE is defined and the
// families are compiled by a host C++ compiler: the kernels are the very functions nvcc
// builds for the GPU, and this file gives them what CUDA would. A launch runs the grid's
// blocks one after another; each block's threads are OS threads, so __syncthreads is a
// barrier of the block and a warp's shuffle is an exchange through memory between two
// barriers of its 32 threads. __shared__ variables become function statics, which the
// threads of the running block share (blocks never overlap). Only what the families use is
// here: one-dimensional blocks of whole warps, full-mask shuffles, integer atomics, the
// fp32 fma. Built by test/cuda/CMakeLists.txt for the emulation tests; never by nvcc.
#pragma once

#if defined(__CUDACC__)
#error "gptc/cuda/emulate.hpp is for host compilers; nvcc builds the real thing"
#endif

#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

// CUDA's vocabulary, for the host compiler.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

using cudaStream_t = void*;
enum cudaError_t { cudaSuccess = 0, cudaErrorNoDevice = 100, cudaErrorInsufficientDriver = 35 };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };
inline const char* cudaGetErrorName(cudaError_t) { return "cudaErrorEmulated"; }
inline const char* cudaGetErrorString(cudaError_t) { return "an error in the CPU emulation"; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
// As many multiprocessors as an H200, so that launchers choose the tiles they choose there
// (the tile never changes a bit, but the emulation then runs the GPU's choice).
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr, int) {
  *v = 132;
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t = nullptr) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}

namespace gptc::cuda::emulate {

struct Index {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local Index thread_index, block_index;
inline Index block_dim, grid_dim;

// A reusable barrier of n threads.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation; });
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int n_, arrived_ = 0;
  uint64_t generation_ = 0;
};

// The running block's barriers and each warp's exchange slots.
struct Block {
  explicit Block(int threads) : barrier(threads), warps(threads / 32) {
    for (int w = 0; w < threads / 32; ++w) warp_barriers.emplace_back(new Barrier(32));
    slots.resize((size_t)threads);
  }
  ~Block() {
    for (Barrier* b : warp_barriers) delete b;
  }
  Barrier barrier;
  int warps;
  std::vector<Barrier*> warp_barriers;
  std::vector<uint64_t> slots;  // one value a thread, for shuffles
};
inline Block* running_block = nullptr;

template <class T>
T shuffle(T value, int source_lane) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "shuffles move up to 8 bytes");
  const int tid = (int)thread_index.x, warp = tid / 32;
  Block& b = *running_block;
  uint64_t word = 0;
  std::memcpy(&word, &value, sizeof(T));
  b.slots[(size_t)tid] = word;
  b.warp_barriers[(size_t)warp]->wait();
  T out;
  std::memcpy(&out, &b.slots[(size_t)(warp * 32 + source_lane)], sizeof(T));
  b.warp_barriers[(size_t)warp]->wait();
  return out;
}

// Runs kernel(args...) over the grid, block by block.
template <class Kernel>
struct Launcher {
  Kernel kernel;
  dim3 grid, block;
  template <class... Args>
  void operator()(Args... args) const {
    block_dim = {block.x, 1, 1};
    grid_dim = {grid.x, grid.y, grid.z};
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) {
          Block b((int)block.x);
          running_block = &b;
          std::vector<std::thread> threads;
          threads.reserve(block.x);
          for (unsigned t = 0; t < block.x; ++t)
            threads.emplace_back([&, t] {
              thread_index = {t, 0, 0};
              block_index = {x, y, z};
              kernel(args...);
            });
          for (std::thread& th : threads) th.join();
          running_block = nullptr;
        }
  }
};
template <class Kernel>
Launcher<Kernel> launcher(Kernel kernel, dim3 grid, dim3 block) {
  return {kernel, grid, block};
}

}  // namespace gptc::cuda::emulate

#define threadIdx (::gptc::cuda::emulate::thread_index)
#define blockIdx (::gptc::cuda::emulate::block_index)
#define blockDim (::gptc::cuda::emulate::block_dim)
#define gridDim (::gptc::cuda::emulate::grid_dim)
#define GPTC_LAUNCH(kernel, grid, block, stream) \
  ::gptc::cuda::emulate::launcher(kernel, dim3(grid), dim3(block))

inline void __syncthreads() { ::gptc::cuda::emulate::running_block->barrier.wait(); }
template <class T>
T __shfl_sync(unsigned, T value, int source_lane) {
  return ::gptc::cuda::emulate::shuffle(value, source_lane);
}
template <class T>
T __shfl_down_sync(unsigned, T value, unsigned delta) {
  const int lane = (int)(threadIdx.x % 32);
  const int source = lane + (int)delta;
  // CUDA returns the caller's own value when the source lane is past the warp.
  const T other = ::gptc::cuda::emulate::shuffle(value, source < 32 ? source : lane);
  return other;
}
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline unsigned atomicOr(unsigned* p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
