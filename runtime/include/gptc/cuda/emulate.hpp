// gptc/cuda/emulate.hpp — the CUDA kernel families' source, run on the CPU.
//
// Included (through gptc/cuda/device.cuh) when GPTC_CUDA_EMULATE is defined and the
// families are compiled by a host C++ compiler: the kernels are the very functions nvcc
// builds for the GPU, and this file gives them what CUDA would. A launch runs the grid's
// blocks one after another, in a shuffled order; each block's threads are fibers on the
// launching thread (run in a shuffled order between barriers), so
// __syncthreads is a barrier of the block and a warp's shuffle is an exchange through
// memory between two barriers of its 32 threads. __shared__ variables become function statics, which the
// threads of the running block share (blocks never overlap). Only what the families use is
// here: one-dimensional blocks of whole warps, full-mask shuffles, integer atomics, the
// fp32 fma. Streams, events and graphs keep CUDA's rules of stream capture (below), and a
// graph's replays take other orders of its independent work. Built for the emulation tests
// (test/cuda/) and --target=cuda-emulated artifacts; never by nvcc.
#pragma once

#if defined(__CUDACC__)
#error "gptc/cuda/emulate.hpp is for host compilers; nvcc builds the real thing"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <setjmp.h>
#include <ucontext.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

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
enum cudaGraphNodeType {
  cudaGraphNodeTypeKernel = 0,
  cudaGraphNodeTypeMemcpy = 1,
  cudaGraphNodeTypeMemset = 2
};
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorNoDevice = 100,
  cudaErrorInsufficientDriver = 35,
  cudaErrorIllegalState = 401,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureUnmatched = 903,
  cudaErrorStreamCaptureUnjoined = 904
};
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };
inline const char* cudaGetErrorName(cudaError_t err) {
  switch (err) {
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorStreamCaptureUnjoined: return "cudaErrorStreamCaptureUnjoined";
    default: return "cudaErrorEmulated";
  }
}
inline const char* cudaGetErrorString(cudaError_t err) {
  switch (err) {
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureUnjoined:
      return "capture sequence contains a fork that was not joined to the primary stream";
    default: return "an error in the CPU emulation";
  }
}
// A launch's own error (its configuration), kept until cudaGetLastError reads it.
namespace gptc::cuda::emulate {
inline cudaError_t& last_error() {
  static cudaError_t err = cudaSuccess;
  return err;
}
}  // namespace gptc::cuda::emulate
inline cudaError_t cudaGetLastError() {
  const cudaError_t err = gptc::cuda::emulate::last_error();
  gptc::cuda::emulate::last_error() = cudaSuccess;
  return err;
}
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
// the wrong bytes here as it could there. The work pending is this library's (each
// artifact's kernels.so has its own, as each has its own streams on a GPU): another
// artifact's work does not finish it, as another stream's would not wait for it.
inline std::vector<std::function<void()>>& pending_work() {
  static std::vector<std::function<void()>> work;
  return work;
}
inline DeviceMemory& pinned_memory() {
  static DeviceMemory memory;
  return memory;
}
inline void finish_pending_work() {
  std::vector<std::function<void()>> work;
  work.swap(pending_work());  // (a launch among them finishes the pending work first)
  for (const std::function<void()>& op : work) op();
}
// Work that is done when this library's stream next does anything, as above.
inline void defer(std::function<void()> op) {
  finish_pending_work();
  pending_work().push_back(std::move(op));
}
// Where a GPU may take any order (a graph's independent work, a grid's blocks, a block's
// threads between two barriers), the emulation takes a seeded pseudo-random one
// (splitmix64), so that code which counts on one order gives other results here too. The
// same seed, the same order: a failure repeats.
struct Shuffler {
  uint64_t x;
  uint64_t next() {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return (size_t)(next() % n); }
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }
};
// Each kernel launch's seed.
inline uint64_t& launches() {
  static uint64_t n = 0;
  return n;
}
// Stream capture (a CUDA graph), as CUDA defines it. A capture starts on one stream (its
// origin); another stream takes part once it waits for an event recorded on a stream that
// does (a fork). Work on a stream that takes part is recorded, with its arguments as they
// were then, and not run; each record waits for the stream's previous work and for the
// events the stream waited for (the graph's edges). Work on any other stream runs at once,
// as a GPU runs it, so a branch that forgot its fork is missing from every replay. The
// capture ends only on its origin and only if every record is joined back into it
// (cudaErrorStreamCaptureUnjoined otherwise); a sync, a synchronous copy or an allocation
// during it fails and spoils it, as in CUDA's thread-local mode. A replay runs the records
// in an order that keeps each after the ones it waits for, another such order each launch
// (cudaGraphLaunch), so branches that are not independent give other bits from one replay
// to the next instead of the program order's.
struct Node {
  std::function<void()> run;
  std::vector<size_t> after;  // the records it waits for
  cudaGraphNodeType type;     // what the record is (cudaGraphNodeGetType)
};
using Work = std::vector<Node>;
struct Capture {
  cudaStream_t origin;
  Work work;
  std::map<cudaStream_t, std::vector<size_t>> tails;  // a stream's next record waits for these
  cudaError_t spoiled = cudaSuccess;
  uint64_t id;
};
inline Capture*& capture() {
  static Capture* c = nullptr;
  return c;
}
inline bool capturing(cudaStream_t s) { return capture() && capture()->tails.count(s); }
// A call CUDA forbids during a thread-local capture: spoils it, and returns its error.
inline cudaError_t unsafe_call() {
  if (!capture()) return cudaSuccess;
  capture()->spoiled = cudaErrorStreamCaptureUnsupported;
  return cudaErrorStreamCaptureUnsupported;
}
// Runs `op` now, or records it while `stream` takes part in a capture.
template <class Op>
void enqueue(cudaStream_t stream, cudaGraphNodeType type, Op op) {
  if (capturing(stream)) {
    Capture& c = *capture();
    std::vector<size_t>& tail = c.tails[stream];
    c.work.push_back({op, tail, type});
    tail = {c.work.size() - 1};
    return;
  }
  finish_pending_work();
  op();
}
// Whether every record is one the origin's tail waits for, directly or not.
inline bool joined(const Capture& c) {
  std::vector<char> seen(c.work.size(), 0);
  std::vector<size_t> todo = c.tails.at(c.origin);
  while (!todo.empty()) {
    const size_t n = todo.back();
    todo.pop_back();
    if (seen[n]) continue;
    seen[n] = 1;
    todo.insert(todo.end(), c.work[n].after.begin(), c.work[n].after.end());
  }
  for (char s : seen)
    if (!s) return false;
  return true;
}
// An instantiated graph, and how many times it was launched (which order its next replay
// takes).
struct Exec {
  Work work;
  uint64_t launches = 0;
};
// Runs the records in an order that keeps each after those it waits for: each step takes
// one of the ready records at random.
inline void replay(const Work& work, uint64_t seed) {
  std::vector<size_t> waiting(work.size());
  std::vector<std::vector<size_t>> next(work.size());
  std::vector<size_t> ready;
  for (size_t n = 0; n < work.size(); ++n) {
    waiting[n] = work[n].after.size();
    for (size_t a : work[n].after) next[a].push_back(n);
    if (!waiting[n]) ready.push_back(n);
  }
  Shuffler order{seed};
  while (!ready.empty()) {
    const size_t pick = order.below(ready.size()), n = ready[pick];
    ready[pick] = ready.back();
    ready.pop_back();
    work[n].run();
    for (size_t m : next[n])
      if (--waiting[m] == 0) ready.push_back(m);
  }
}
template <class T>
void require_device_argument(T* p) {
  require_device(p, "a kernel's pointer argument");
}
template <class T>
void require_device_argument(const T&) {}
}  // namespace gptc::cuda::emulate

inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s = nullptr) {
  gptc::cuda::emulate::require_device(p, "cudaMemsetAsync's destination");
  gptc::cuda::emulate::enqueue(s, cudaGraphNodeTypeMemset, [=] { std::memset(p, value, bytes); });
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
                                   cudaStream_t s = nullptr) {
  using gptc::cuda::emulate::require_device;
  if (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice)
    require_device(dst, "a copy's destination");
  if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice)
    require_device(src, "a copy's source");
  const void* host = kind == cudaMemcpyHostToDevice ? src : kind == cudaMemcpyDeviceToHost ? dst : nullptr;
  if (host && gptc::cuda::emulate::pinned_memory().holds(host) &&
      !gptc::cuda::emulate::capturing(s)) {
    gptc::cuda::emulate::defer([=] { std::memmove(dst, src, bytes); });
  } else {
    gptc::cuda::emulate::enqueue(s, cudaGraphNodeTypeMemcpy, [=] { std::memmove(dst, src, bytes); });
  }
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (gptc::cuda::emulate::capture()) return gptc::cuda::emulate::unsafe_call();
  const cudaError_t err = cudaMemcpyAsync(dst, src, bytes, kind);
  gptc::cuda::emulate::finish_pending_work();  // (returns once done, as CUDA's)
  return err;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (gptc::cuda::emulate::capturing(s)) return gptc::cuda::emulate::unsafe_call();
  gptc::cuda::emulate::finish_pending_work();
  return cudaSuccess;
}
// A stream is a handle of its own (captures tell streams apart); work outside a capture
// runs at once, so every stream is in order with every other.
constexpr unsigned cudaStreamNonBlocking = 1;
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = new char;
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete static_cast<char*>(s);
  return cudaSuccess;
}
namespace gptc::cuda::emulate {
// Host memory recorded in `table` (device memory, or page-locked host memory); refused
// during a capture. CUDA does not clear what it allocates, and fresh host pages are often
// zeros: the bytes are 0xff here (a float NaN), so that reading memory nothing wrote shows.
inline cudaError_t allocate(void** p, size_t bytes, DeviceMemory& table) {
  *p = nullptr;
  if (capture()) return unsafe_call();
  *p = std::malloc(bytes);
  if (*p) std::memset(*p, 0xff, bytes);
  if (*p) table.add(*p, bytes);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t release(void* p, DeviceMemory& table) {
  if (capture()) return unsafe_call();
  finish_pending_work();
  table.remove(p);
  std::free(p);
  return cudaSuccess;
}
}  // namespace gptc::cuda::emulate
inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  return gptc::cuda::emulate::allocate(p, bytes, gptc::cuda::emulate::device_memory());
}
inline cudaError_t cudaFree(void* p) {
  return gptc::cuda::emulate::release(p, gptc::cuda::emulate::device_memory());
}
inline cudaError_t cudaMallocHost(void** p, size_t bytes) {
  return gptc::cuda::emulate::allocate(p, bytes, gptc::cuda::emulate::pinned_memory());
}
inline cudaError_t cudaFreeHost(void* p) {
  return gptc::cuda::emulate::release(p, gptc::cuda::emulate::pinned_memory());
}
// Events: outside a capture a kernel has run when its launch returns, so an event is the
// host's clock; recorded in a capture, it holds the stream's tail there, for a fork or a
// join (cudaStreamWaitEvent).
namespace gptc::cuda::emulate {
struct Event {
  double ms = 0;
  uint64_t capture = 0;  // the capture it was recorded in (0: none)
  std::vector<size_t> tail;
};
inline uint64_t& captures_begun() {
  static uint64_t n = 0;
  return n;
}
}  // namespace gptc::cuda::emulate
using cudaEvent_t = gptc::cuda::emulate::Event*;
inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = new gptc::cuda::emulate::Event;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr) {
  using namespace gptc::cuda::emulate;
  if (capturing(s)) {
    e->capture = capture()->id;
    e->tail = capture()->tails[s];
    return cudaSuccess;
  }
  finish_pending_work();
  e->capture = 0;
  e->tail.clear();
  e->ms = std::chrono::duration<double, std::milli>(
              std::chrono::steady_clock::now().time_since_epoch()).count();
  return cudaSuccess;
}
constexpr unsigned cudaEventDisableTiming = 2;
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return cudaEventCreate(e); }
// Outside a capture everything has run already: nothing to wait for. An event recorded in
// the capture brings the stream into it (a fork) or adds the event's tail to its own (a
// join).
inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned = 0) {
  using namespace gptc::cuda::emulate;
  if (!capture() || e->capture != capture()->id) return cudaSuccess;
  std::vector<size_t>& tail = capture()->tails[s];
  for (size_t n : e->tail)
    if (std::find(tail.begin(), tail.end(), n) == tail.end()) tail.push_back(n);
  return cudaSuccess;
}
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = (float)(b->ms - a->ms);
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
// Graphs: the records of a capture (emulate::capture above).
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
};
using cudaGraph_t = gptc::cuda::emulate::Work*;
using cudaGraphExec_t = gptc::cuda::emulate::Exec*;
inline cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  using namespace gptc::cuda::emulate;
  if (capture()) return cudaErrorIllegalState;  // (one capture at a time here)
  finish_pending_work();  // (queued before the capture: not in it)
  capture() = new Capture{s, {}, {}, cudaSuccess, ++captures_begun()};
  capture()->tails[s] = {};
  return cudaSuccess;
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  using namespace gptc::cuda::emulate;
  *graph = nullptr;
  if (!capture()) return cudaErrorIllegalState;
  if (s != capture()->origin) return cudaErrorStreamCaptureUnmatched;
  std::unique_ptr<Capture> c(capture());
  capture() = nullptr;
  if (c->spoiled != cudaSuccess) return cudaErrorStreamCaptureInvalidated;
  if (!joined(*c)) return cudaErrorStreamCaptureUnjoined;
  *graph = new Work(std::move(c->work));
  return cudaSuccess;
}
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                        unsigned long long = 0) {
  *exec = new gptc::cuda::emulate::Exec{*graph, 0};
  return cudaSuccess;
}
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t = nullptr) {
  gptc::cuda::emulate::finish_pending_work();
  gptc::cuda::emulate::replay(exec->work, ++exec->launches);
  return cudaSuccess;
}
// A graph's nodes (its records) and edges (from a record to one that waits for it).
using cudaGraphNode_t = const gptc::cuda::emulate::Node*;
struct cudaGraphEdgeData;
inline cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* n) {
  if (nodes)
    for (size_t i = 0; i < *n && i < graph->size(); ++i) nodes[i] = &(*graph)[i];
  *n = graph->size();
  return cudaSuccess;
}
inline cudaError_t cudaGraphGetEdges(cudaGraph_t graph, cudaGraphNode_t* from, cudaGraphNode_t* to,
                                     cudaGraphEdgeData*, size_t* n) {
  size_t m = 0;
  for (const gptc::cuda::emulate::Node& node : *graph)
    for (size_t a : node.after) {
      if (from && to && m < *n) from[m] = &(*graph)[a], to[m] = &node;
      ++m;
    }
  *n = m;
  return cudaSuccess;
}
inline cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* type) {
  *type = node->type;
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

// Built with AddressSanitizer (the emulation's sanitized tests), each switch is told to it
// (the stack switched to, before; the one switched from, after), so that it checks each
// fiber's stack as a stack of its own.
inline void switching_to(void** fake_stack, const void* bottom, size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#else
  (void)fake_stack, (void)bottom, (void)size;
#endif
}
inline void switched(void* fake_stack, const void** from_bottom, size_t* from_size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake_stack, from_bottom, from_size);
#else
  (void)fake_stack, (void)from_bottom, (void)from_size;
#endif
}

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
  void* fake_stack = nullptr;  // (AddressSanitizer's, while it waits)
};
struct Fibers {
  jmp_buf scheduler;
  std::vector<Fiber> fibers;
  std::vector<char> done;
  const std::function<void()>* body = nullptr;
  int current = 0;
  uint64_t progress = 0;  // arrivals and exits: a round without any is a deadlock
  // The scheduler's stack, for AddressSanitizer.
  void* scheduler_fake_stack = nullptr;
  const void* scheduler_bottom = nullptr;
  size_t scheduler_size = 0;
};
inline Fibers* running_fibers = nullptr;

inline void yield_to_scheduler() {
  Fibers& f = *running_fibers;
  Fiber& me = f.fibers[(size_t)f.current];
  if (!_setjmp(me.at)) {
    switching_to(&me.fake_stack, f.scheduler_bottom, f.scheduler_size);
    _longjmp(f.scheduler, 1);
  }
  switched(me.fake_stack, &f.scheduler_bottom, &f.scheduler_size);
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
  switched(nullptr, &f.scheduler_bottom, &f.scheduler_size);
  (*f.body)();
  f.done[(size_t)f.current] = 1;
  ++f.progress;
  switching_to(nullptr, f.scheduler_bottom, f.scheduler_size);  // (its stack is done)
  _longjmp(f.scheduler, 1);
}

// Runs fiber t until it waits or ends. (A function of its own: the fiber jumps back into
// this frame, whose locals do not change in between.)
[[gnu::noinline]] inline void resume(Fibers& f, unsigned t, void* stack, size_t size) {
  Fiber& fiber = f.fibers[t];
  if (_setjmp(f.scheduler)) {
    switched(f.scheduler_fake_stack, nullptr, nullptr);
    return;
  }
  switching_to(&f.scheduler_fake_stack, stack, size);
  if (!fiber.started) {
    fiber.started = true;
    setcontext(&fiber.start);
  }
  _longjmp(fiber.at, 1);
}

// Runs `body` as each of the `threads` threads of block `block`, to the end: in rounds, each
// thread that has not ended run until it waits or ends, in another order each round.
inline void run_block(unsigned threads, Index block, const std::function<void()>& body,
                      Shuffler& order) {
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
  std::vector<unsigned> round(threads);
  for (unsigned t = 0; t < threads; ++t) round[t] = t;
  for (unsigned left = threads; left > 0;) {
    const uint64_t before = f.progress;
    order.shuffle(round);
    for (unsigned t : round) {
      if (f.done[t]) continue;
      f.current = (int)t;
      thread_index = {t, 0, 0};
      resume(f, t, stacks[t].get(), kStack);
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

// The blocks of a grid, in the order a launch runs them.
inline std::vector<Index> block_order(dim3 grid, Shuffler& order) {
  std::vector<Index> blocks;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) blocks.push_back({x, y, z});
  order.shuffle(blocks);
  return blocks;
}

// Whether CUDA takes a launch of this shape: 1 to 2^31 - 1 blocks along x, 1 to 65,535 along
// y and z, 1 to 1,024 threads a block (the families' blocks are one-dimensional, whole
// warps). A launch it refuses runs nothing and leaves cudaErrorInvalidConfiguration for
// cudaGetLastError, as on a GPU.
inline bool launchable(dim3 grid, dim3 block) {
  const bool ok = grid.x >= 1 && grid.x <= 0x7fffffffu && grid.y >= 1 && grid.y <= 65535 &&
                  grid.z >= 1 && grid.z <= 65535 && block.x >= 1 && block.x <= 1024 &&
                  block.y == 1 && block.z == 1;
  if (!ok) last_error() = cudaErrorInvalidConfiguration;
  return ok;
}

// Runs kernel(args...) over the grid, block by block.
template <class Kernel>
struct Launcher {
  Kernel kernel;
  dim3 grid, block;
  cudaStream_t stream;
  template <class... Args>
  void operator()(Args... args) const {
    (require_device_argument(args), ...);
    if (!launchable(grid, block)) return;
    enqueue(stream, cudaGraphNodeTypeKernel,
            [self = *this, args...] { self.run(args...); });  // (a copy: the launcher is a temporary)
  }
  template <class... Args>
  void run(Args... args) const {
    block_dim = {block.x, 1, 1};
    grid_dim = {grid.x, grid.y, grid.z};
    const std::function<void()> body = [&] { kernel(args...); };
    Shuffler order{++launches()};
    for (const Index& at : block_order(grid, order)) {
      Block b((int)block.x);
      running_block = &b;
      run_block(block.x, at, body, order);
      running_block = nullptr;
    }
  }
};
template <class Kernel>
Launcher<Kernel> launcher(Kernel kernel, dim3 grid, dim3 block, cudaStream_t stream) {
  return {kernel, grid, block, stream};
}

// Runs a kernel whose threads never synchronise nor exchange values (the generated
// grid-stride loops): each block's threads one after another on the calling thread; a
// __syncthreads or shuffle there has no block to run in and stops the program.
template <class Kernel>
struct SerialLauncher {
  Kernel kernel;
  unsigned blocks, threads;
  cudaStream_t stream;
  template <class... Args>
  void operator()(Args... args) const {
    (require_device_argument(args), ...);
    if (!launchable(dim3(blocks), dim3(threads))) return;
    enqueue(stream, cudaGraphNodeTypeKernel,
            [self = *this, args...] { self.run(args...); });  // (a copy: the launcher is a temporary)
  }
  template <class... Args>
  void run(Args... args) const {
    block_dim = {threads, 1, 1};
    grid_dim = {blocks, 1, 1};
    running_block = nullptr;
    Shuffler order{++launches()};
    for (const Index& at : block_order(dim3(blocks), order))
      for (unsigned t = 0; t < threads; ++t) {
        thread_index = {t, 0, 0};
        block_index = at;
        kernel(args...);
      }
  }
};
template <class Kernel>
SerialLauncher<Kernel> serial_launcher(Kernel kernel, unsigned blocks, unsigned threads,
                                       cudaStream_t stream) {
  return {kernel, blocks, threads, stream};
}

}  // namespace gptc::cuda::emulate

#define threadIdx (::gptc::cuda::emulate::thread_index)
#define blockIdx (::gptc::cuda::emulate::block_index)
#define blockDim (::gptc::cuda::emulate::block_dim)
#define gridDim (::gptc::cuda::emulate::grid_dim)
#define GPTC_LAUNCH(kernel, grid, block, stream) \
  ::gptc::cuda::emulate::launcher(kernel, dim3(grid), dim3(block), stream)

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
