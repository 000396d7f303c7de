// gptc/cuda/emulate.hpp — the CUDA kernel families' source, run on the CPU.
//
// Included (through gptc/cuda/device.cuh) when GPTC_CUDA_EMULATE is defined and the
// families are compiled by a host C++ compiler: the kernels are the very functions nvcc
// builds for the GPU, and this file gives them what CUDA would. A launch runs the grid's
// blocks one after another; each block's threads are fibers on the launching thread, so
// __syncthreads is a barrier of the block and a warp's shuffle is an exchange through
// memory between two barriers of its 32 threads. __shared__ variables become function statics, which the
// threads of the running block share (blocks never overlap). Only what the families use is
// here: one-dimensional blocks of whole warps, full-mask shuffles, integer atomics, the
// fp32 fma. Built by test/cuda/CMakeLists.txt for the emulation tests; never by nvcc.
#pragma once

#if defined(__CUDACC__)
#error "gptc/cuda/emulate.hpp is for host compilers; nvcc builds the real thing"
#endif

#include <chrono>
#include <cmath>
#include <setjmp.h>
#include <ucontext.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
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
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorMemoryAllocation = 2,
  cudaErrorNoDevice = 100,
  cudaErrorInsufficientDriver = 35
};
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
namespace gptc::cuda::emulate {
// Device memory is host memory here. With GPTC_CUDA_EMULATE_CHECK_POINTERS (the generated
// artifacts' emulated builds), the emulation still tells them apart: it records what
// cudaMalloc returned and the __device__ variables whose address was taken, and stops the
// program when a kernel is launched with, or a copy's device side is, any other pointer (a
// host buffer passed where the GPU would fault).
struct DeviceMemory {
  std::map<uintptr_t, size_t> ranges;  // begin -> bytes
  void add(const void* p, size_t bytes) { ranges[(uintptr_t)p] = bytes; }
  void remove(const void* p) { ranges.erase((uintptr_t)p); }
  bool holds(const void* p) const {
    auto it = ranges.upper_bound((uintptr_t)p);
    if (it == ranges.begin()) return false;
    --it;
    return (uintptr_t)p < it->first + (it->second ? it->second : 1);
  }
};
inline DeviceMemory& device_memory() {
  static DeviceMemory memory;
  return memory;
}
inline void require_device(const void* p, const char* what) {
#if defined(GPTC_CUDA_EMULATE_CHECK_POINTERS)
  if (p && !device_memory().holds(p)) {
    std::fprintf(stderr, "gptc: error: emulated GPU: %s is not device memory (%p)\n", what, p);
    std::abort();
  }
#else
  (void)p, (void)what;
#endif
}
// Page-locked host memory (cudaMallocHost) is what makes a copy asynchronous on a GPU: a
// copy between it and the device returns at once and is done by the next sync. Here such a
// copy is done when the stream next does anything (a launch, a copy, a memset, a sync), so
// that a caller who reads a download or rewrites an upload's source before it is done gets
// the wrong bytes here as it could there.
struct PendingCopy {
  void* dst;
  const void* src;
  size_t bytes;
};
inline std::vector<PendingCopy>& pending_copies() {
  static std::vector<PendingCopy> copies;
  return copies;
}
inline DeviceMemory& pinned_memory() {
  static DeviceMemory memory;
  return memory;
}
inline void finish_pending_copies() {
  for (const PendingCopy& c : pending_copies()) std::memmove(c.dst, c.src, c.bytes);
  pending_copies().clear();
}
// Stream capture (a CUDA graph): between cudaStreamBeginCapture and cudaStreamEndCapture
// every launch, copy and memset is recorded, with its arguments as they were then, and not
// run; launching the graph runs the records in order. So a step's graph replays here as on
// a GPU: a value the host passed by value when the graph was captured is what every replay
// gets.
using Work = std::vector<std::function<void()>>;
inline Work*& capturing() {
  static Work* work = nullptr;
  return work;
}
// Runs `op` now, or records it while a capture is on.
template <class Op>
void enqueue(Op op) {
  if (Work* work = capturing()) {
    work->push_back(op);
    return;
  }
  finish_pending_copies();
  op();
}
template <class T>
void require_device_argument(T* p) {
  require_device(p, "a kernel's pointer argument");
}
template <class T>
void require_device_argument(const T&) {}
}  // namespace gptc::cuda::emulate

inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t = nullptr) {
  gptc::cuda::emulate::require_device(p, "cudaMemsetAsync's destination");
  gptc::cuda::emulate::enqueue([=] { std::memset(p, value, bytes); });
  return cudaSuccess;
}
// Every copy is a memmove, done at once unless it is asynchronous (pinned_memory above).
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3
};
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                                   cudaStream_t = nullptr) {
  using gptc::cuda::emulate::require_device;
  if (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice)
    require_device(dst, "a copy's destination");
  if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice)
    require_device(src, "a copy's source");
  const void* host = kind == cudaMemcpyHostToDevice ? src : kind == cudaMemcpyDeviceToHost ? dst : nullptr;
  if (host && gptc::cuda::emulate::pinned_memory().holds(host) &&
      !gptc::cuda::emulate::capturing()) {
    gptc::cuda::emulate::finish_pending_copies();
    gptc::cuda::emulate::pending_copies().push_back({dst, src, bytes});
  } else {
    gptc::cuda::emulate::enqueue([=] { std::memmove(dst, src, bytes); });
  }
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  const cudaError_t err = cudaMemcpyAsync(dst, src, bytes, kind);
  gptc::cuda::emulate::finish_pending_copies();  // (returns once done, as CUDA's)
  return err;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t) {
  gptc::cuda::emulate::finish_pending_copies();
  return cudaSuccess;
}
constexpr unsigned cudaStreamNonBlocking = 1;
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  static char stream;  // any non-null handle: there is one emulated stream
  *s = &stream;
  return cudaSuccess;
}
inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = std::malloc(bytes);
  if (*p) gptc::cuda::emulate::device_memory().add(*p, bytes);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void* p) {
  gptc::cuda::emulate::device_memory().remove(p);
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMallocHost(void** p, size_t bytes) {
  *p = std::malloc(bytes);
  if (*p) gptc::cuda::emulate::pinned_memory().add(*p, bytes);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFreeHost(void* p) {
  gptc::cuda::emulate::finish_pending_copies();
  gptc::cuda::emulate::pinned_memory().remove(p);
  std::free(p);
  return cudaSuccess;
}
// Events: a kernel has run when its launch returns, so an event is the host's clock.
using cudaEvent_t = double*;
inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = new double(0);
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) {
  gptc::cuda::emulate::finish_pending_copies();
  *e = std::chrono::duration<double, std::milli>(
           std::chrono::steady_clock::now().time_since_epoch()).count();
  return cudaSuccess;
}
constexpr unsigned cudaEventDisableTiming = 2;
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return cudaEventCreate(e); }
// One emulated stream runs everything in order, so waiting for an event has nothing to do.
inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned = 0) {
  return cudaSuccess;
}
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = (float)(*b - *a);
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
// Graphs: a recorded list of work (capturing() above).
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
};
using cudaGraph_t = gptc::cuda::emulate::Work*;
using cudaGraphExec_t = gptc::cuda::emulate::Work*;
inline cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  gptc::cuda::emulate::finish_pending_copies();  // (queued before the capture: not in it)
  gptc::cuda::emulate::capturing() = new gptc::cuda::emulate::Work;
  return cudaSuccess;
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* graph) {
  *graph = gptc::cuda::emulate::capturing();
  gptc::cuda::emulate::capturing() = nullptr;
  return cudaSuccess;
}
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                        unsigned long long = 0) {
  *exec = new gptc::cuda::emulate::Work(*graph);
  return cudaSuccess;
}
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t = nullptr) {
  gptc::cuda::emulate::finish_pending_copies();
  for (const auto& work : *exec) work();
  return cudaSuccess;
}
inline cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
// One emulated device.
inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
template <class T>
cudaError_t cudaGetSymbolAddress(void** p, T& symbol) {
  *p = (void*)&symbol;
  gptc::cuda::emulate::device_memory().add(*p, sizeof(T));
  return cudaSuccess;
}

namespace gptc::cuda::emulate {

struct Index {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local Index thread_index, block_index;
inline Index block_dim, grid_dim;

// A block's threads are fibers on the launching thread: each runs until it waits at a
// barrier (a __syncthreads, or a shuffle's exchange), then the next one runs; a barrier's
// waiters go on once all its threads have arrived. No OS threads, no locks. A fiber starts
// on a stack of its own through makecontext/setcontext; after that, switches are
// _setjmp/_longjmp, which save no signal mask (swapcontext makes two system calls a
// switch).
struct Fiber {
  ucontext_t start;
  jmp_buf at;  // where it waits
  bool started = false;
};
struct Fibers {
  jmp_buf scheduler;
  std::vector<Fiber> fibers;
  std::vector<char> done;
  const std::function<void()>* body = nullptr;
  int current = 0;
  uint64_t progress = 0;  // arrivals and exits: a round without any is a deadlock
};
inline Fibers* running_fibers = nullptr;

inline void yield_to_scheduler() {
  Fibers& f = *running_fibers;
  if (!_setjmp(f.fibers[(size_t)f.current].at)) _longjmp(f.scheduler, 1);
}

// A reusable barrier of n threads (fibers of the running block).
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    const uint64_t generation = generation_;
    ++running_fibers->progress;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      return;
    }
    while (generation_ == generation) yield_to_scheduler();
  }

 private:
  int n_, arrived_ = 0;
  uint64_t generation_ = 0;
};

// The running block's barriers and each warp's exchange slots.
struct Block {
  explicit Block(int threads) : barrier(threads), warps(threads / 32) {
    for (int w = 0; w < threads / 32; ++w) warp_barriers.emplace_back(new Barrier(32));
    slots.resize((size_t)threads);
    copies.resize((size_t)threads);
  }
  ~Block() {
    for (Barrier* b : warp_barriers) delete b;
  }
  Barrier barrier;
  int warps;
  std::vector<Barrier*> warp_barriers;
  std::vector<uint64_t> slots;  // one value a thread, for shuffles
  // A thread's asynchronous copies (gptc::cuda::copy16_async): those since its last
  // commit, then its committed groups, oldest first, not yet run.
  struct Copy {
    void* dst;
    const void* src;
    bool in;
  };
  struct Copies {
    std::vector<Copy> open;
    std::vector<std::vector<Copy>> committed;
  };
  std::vector<Copies> copies;
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

[[noreturn]] inline void fiber_main() {
  Fibers& f = *running_fibers;
  (*f.body)();
  f.done[(size_t)f.current] = 1;
  ++f.progress;
  _longjmp(f.scheduler, 1);
}

// Runs fiber t until it waits or ends. (A function of its own: the fiber jumps back into
// this frame, whose locals do not change in between.)
[[gnu::noinline]] inline void resume(Fibers& f, unsigned t) {
  Fiber& fiber = f.fibers[t];
  if (_setjmp(f.scheduler)) return;
  if (!fiber.started) {
    fiber.started = true;
    setcontext(&fiber.start);
  }
  _longjmp(fiber.at, 1);
}

// Runs `body` as each of the `threads` threads of block `block`, to the end.
inline void run_block(unsigned threads, Index block, const std::function<void()>& body) {
  constexpr size_t kStack = 256 * 1024;
  static std::vector<std::unique_ptr<char[]>> stacks;  // kept between launches
  while (stacks.size() < threads) stacks.emplace_back(new char[kStack]);
  Fibers f;
  f.fibers.resize(threads);
  f.done.assign(threads, 0);
  f.body = &body;
  running_fibers = &f;
  for (unsigned t = 0; t < threads; ++t) {
    ucontext_t& c = f.fibers[t].start;
    getcontext(&c);
    c.uc_stack.ss_sp = stacks[t].get();
    c.uc_stack.ss_size = kStack;
    c.uc_link = nullptr;  // fiber_main never returns
    makecontext(&c, fiber_main, 0);
  }
  block_index = block;
  for (unsigned left = threads; left > 0;) {
    const uint64_t before = f.progress;
    for (unsigned t = 0; t < threads; ++t) {
      if (f.done[t]) continue;
      f.current = (int)t;
      thread_index = {t, 0, 0};
      resume(f, t);
      if (f.done[t]) --left;
    }
    if (left > 0 && f.progress == before) {
      std::fprintf(stderr, "gptc: error: emulated block (%u, %u, %u): its threads wait at "
                           "barriers that never complete\n", block.x, block.y, block.z);
      std::abort();
    }
  }
  running_fibers = nullptr;
}

// Runs kernel(args...) over the grid, block by block.
template <class Kernel>
struct Launcher {
  Kernel kernel;
  dim3 grid, block;
  template <class... Args>
  void operator()(Args... args) const {
    (require_device_argument(args), ...);
    enqueue([self = *this, args...] { self.run(args...); });  // (a copy: the launcher is a temporary)
  }
  template <class... Args>
  void run(Args... args) const {
    block_dim = {block.x, 1, 1};
    grid_dim = {grid.x, grid.y, grid.z};
    const std::function<void()> body = [&] { kernel(args...); };
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) {
          Block b((int)block.x);
          running_block = &b;
          run_block(block.x, {x, y, z}, body);
          running_block = nullptr;
        }
  }
};
template <class Kernel>
Launcher<Kernel> launcher(Kernel kernel, dim3 grid, dim3 block) {
  return {kernel, grid, block};
}

// Runs a kernel whose threads never synchronise nor exchange values (the generated
// grid-stride loops): each block's threads one after another on the calling thread; a
// __syncthreads or shuffle there has no block to run in and stops the program.
template <class Kernel>
struct SerialLauncher {
  Kernel kernel;
  unsigned blocks, threads;
  template <class... Args>
  void operator()(Args... args) const {
    (require_device_argument(args), ...);
    enqueue([self = *this, args...] { self.run(args...); });  // (a copy: the launcher is a temporary)
  }
  template <class... Args>
  void run(Args... args) const {
    block_dim = {threads, 1, 1};
    grid_dim = {blocks, 1, 1};
    running_block = nullptr;
    for (unsigned x = 0; x < blocks; ++x)
      for (unsigned t = 0; t < threads; ++t) {
        thread_index = {t, 0, 0};
        block_index = {x, 0, 0};
        kernel(args...);
      }
  }
};
template <class Kernel>
SerialLauncher<Kernel> serial_launcher(Kernel kernel, unsigned blocks, unsigned threads) {
  return {kernel, blocks, threads};
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
// A group's copies run when it is waited for, the latest a GPU may land them.
namespace gptc::cuda {
inline void copy16_async(void* shared, const void* global, bool in) {
  emulate::running_block->copies[threadIdx.x].open.push_back({shared, global, in});
}
inline void copies_commit() {
  auto& c = emulate::running_block->copies[threadIdx.x];
  c.committed.push_back(std::move(c.open));
  c.open.clear();
}
template <int N>
void copies_wait() {
  auto& c = emulate::running_block->copies[threadIdx.x];
  const size_t done = c.committed.size() > size_t(N) ? c.committed.size() - size_t(N) : 0;
  for (size_t g = 0; g < done; ++g)
    for (const auto& copy : c.committed[g]) {
      if (copy.in) std::memcpy(copy.dst, copy.src, 16);
      else std::memset(copy.dst, 0, 16);
    }
  c.committed.erase(c.committed.begin(), c.committed.begin() + (std::ptrdiff_t)done);
}
}  // namespace gptc::cuda
inline unsigned atomicCAS(unsigned* p, unsigned expected, unsigned desired) {
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
}
inline unsigned atomicOr(unsigned* p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
