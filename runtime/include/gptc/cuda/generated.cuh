// gptc/cuda/generated.cuh — the header every generated kernels.cu includes (gptc compile
// --target=cuda or cuda-emulated; codegen/cuda/CudaFlavour.cpp).
//
// A generated kernel is either a call of a kernel family (matmul, LayerNorm, attention,
// cross-entropy and their gradients: the .cuh files beside this one) or a kernel of its own
// whose body is the CPU kernel's body with its GPTC_FOR loop written as GPTC_CUDA_FOR, a
// grid-stride loop: every iteration is independent, so which thread runs it changes no
// bit. A reduction kernel takes a warp an output (GPTC_CUDA_FOR_WARPS, warp_sum: the
// canonical 32 partials as lanes, then the butterfly), or for a long sum a block
// (GPTC_CUDA_FOR_BLOCKS, block_sum: the same partials, the elements fetched by the block),
// or for a sum over outer dimensions 8 outputs a block (GPTC_CUDA_FOR_COLUMNS, column_sum:
// a thread a partial, 8 neighbouring outputs read together); a sum inside another body is the
// prelude's gptc::reduce_sum run by one thread (the same order); dropouts draw
// gptc::dropout_keep by element index. The step's kernels run as one CUDA graph
// (run_step); the runtime reaches the device through the gptc_device_* functions below.
//
// Errors found on the device (an embedding index or cross-entropy target out of range) set
// one word, the first error's code; the rest of the step's kernels then return at once, and
// the entry reads the word after the step and returns that error's line (the generated
// file's gptc_errors table). Every CUDA runtime call of the
// entry is checked and fails the step with one line naming the call.
#pragma once

// (Before device.cuh, whose families' kernels test it; gptc::cuda::error_word is below.)
#define GPTC_CUDA_HALTED() (::gptc::cuda::error_word != 0u)
#include "gptc/cuda/device.cuh"

#include <string>

namespace gptc::cuda {
// A kernel family's failed launch, as one line, for the step to return (the families
// would otherwise end the process: GPTC_CUDA_CHECK_LAUNCH).
inline std::string& launch_error() {
  static std::string line;
  return line;
}
inline std::string describe(cudaError_t err, const char* call);

// The first device error's code (1-based index into the generated gptc_errors), 0 if none.
// Set by the checks of the caller's ids, the step's first kernels; every later kernel of
// the step (the generated ones and the families') begins by reading it and returns at once
// if it is set: a step with a bad id runs none of its work, without the host waiting for
// the checks' verdict before launching the step. (The kernels that report errors
// themselves report only ids, already checked; so the word does not change during any
// later kernel, and all of a launch's threads read the same value.)
static __device__ unsigned error_word;
}  // namespace gptc::cuda

#define GPTC_CUDA_LAUNCH_FAILED(err, what)                                            \
  do {                                                                               \
    if (::gptc::cuda::launch_error().empty())                                        \
      ::gptc::cuda::launch_error() = ::gptc::cuda::describe(err, what);              \
  } while (0)

#include "gptc/cuda/attention.cuh"
#include "gptc/cuda/check.cuh"
#include "gptc/cuda/cross_entropy.cuh"
#include "gptc/cuda/device.cuh"
#include "gptc/cuda/layer_norm.cuh"
#include "gptc/cuda/matmul.cuh"
#include "gptc/cuda/reduce.cuh"
#include "gptc/prelude.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// The loops of a generated kernel's body run over its blocks, gptc_block of gptc_blocks:
// its launch's (GPTC_CUDA_GRID()), or the range of a launch's blocks it was given where a
// group's members share one launch (CudaFlavour::group: each member's body a __device__
// function taking its range's block and size).

// A loop of int64_t i over [0, n) shared by the blocks: thread t takes t, t + threads, ...
#define GPTC_CUDA_FOR(i, n)                                                          \
  for (int64_t i = gptc_block * blockDim.x + threadIdx.x, gptc_for_end_##i = (n);    \
       i < gptc_for_end_##i; i += gptc_blocks * blockDim.x)

// A loop of int64_t i over [0, n) that gives each iteration a whole warp: the warp's 32
// lanes run it together (a reduction's 32 partials).
#define GPTC_CUDA_FOR_WARPS(i, n)                                                    \
  for (int64_t i = (gptc_block * blockDim.x + threadIdx.x) / 32, gptc_for_end_##i = (n); \
       i < gptc_for_end_##i; i += gptc_blocks * blockDim.x / 32)

// A loop of int64_t i over [0, n) that gives each iteration a whole block (a long sum's
// threads: block_sum).
#define GPTC_CUDA_FOR_BLOCKS(i, n)                                                   \
  for (int64_t i = gptc_block, gptc_for_end_##i = (n); i < gptc_for_end_##i; i += gptc_blocks)

namespace gptc::cuda {

constexpr int kLoopThreads = 256;

// The canonical sum and max of elem(0..n-1) on every lane of a warp (reduce.cuh's, with
// lane 0's result broadcast).
template <class T, class F>
__device__ __forceinline__ T warp_sum(int64_t n, F elem) {
  return warp_broadcast(warp_reduce_sum<T>(n, elem));
}
template <class T, class F>
__device__ __forceinline__ T warp_max(int64_t n, F elem) {
  return warp_broadcast(warp_reduce_max<T>(n, elem));
}

// The canonical sum (or max) of elem(0..n-1), the same on every thread of the block, which
// all call it: the block's threads make the elements a tile of 128 rows of 32 at a time
// (element r * 32 + j of the tile in row r, column j) into shared memory, and lane j of the
// first warp adds column j row by row: partial j, elements j, j + 32, ... in increasing
// order from T(0), as warp_reduce_sum forms it; then the butterfly. A warp alone would wait
// on its loads; here 256 threads fetch 4,096 elements at once.
//
// Its shared memory is one per element type for a whole kernel, however many sums it has
// (each call's lambda is a type of its own, and a __shared__ array in the function itself
// would be one a call): a block's sums run one after another, each behind a barrier, and a
// launch's blocks each run one member of a group (CudaFlavour::group), so up to a few
// dozen sums share 16 KB rather than take 16 KB each.
template <class T>
struct BlockReduceShared {
  static constexpr int kRows = 128;
  T tile[kRows][32];
  T result;
};
template <class T>
__device__ __forceinline__ BlockReduceShared<T>& block_reduce_shared() {
  __shared__ BlockReduceShared<T> shared;
  return shared;
}
template <class T, bool Max, class F>
__device__ T block_reduce(int64_t n, F elem) {
  constexpr int kRows = BlockReduceShared<T>::kRows;
  auto& tile = block_reduce_shared<T>().tile;
  T& result = block_reduce_shared<T>().result;
  const int t = (int)threadIdx.x, threads = (int)blockDim.x;
  T p = Max ? gptc::max_identity<T>() : T(0);
  __syncthreads();  // (an earlier call's result read by every thread)
  for (int64_t at = 0; at < n; at += kRows * 32) {
    const int m = (int)(n - at < kRows * 32 ? n - at : kRows * 32);
    for (int e = t; e < m; e += threads) tile[e >> 5][e & 31] = T(elem(at + e));
    __syncthreads();
    if (t < 32)
      for (int r = 0, rows = (m - t + 31) / 32; r < rows; ++r)
        p = Max ? gptc::maximum(p, tile[r][t]) : p + tile[r][t];
    __syncthreads();
  }
  if (t < 32) {
    p = Max ? warp_butterfly_max(p) : warp_butterfly_sum(p);
    if (t == 0) result = p;
  }
  __syncthreads();
  return result;
}
template <class T, class F>
__device__ __forceinline__ T block_sum(int64_t n, F elem) {
  return block_reduce<T, false>(n, elem);
}
template <class T, class F>
__device__ __forceinline__ T block_max(int64_t n, F elem) {
  return block_reduce<T, true>(n, elem);
}

// Blocks for a grid-stride loop of n iterations: one iteration a thread up to 4096 blocks.
// (A constant expression: a group's launch adds its members'.)
__host__ __device__ constexpr unsigned loop_blocks(int64_t n) {
  const int64_t blocks = (n + kLoopThreads - 1) / kLoopThreads;
  return (unsigned)(blocks < 1 ? 1 : blocks > 4096 ? 4096 : blocks);
}

// The stream the steps run on (made by gptc_device_init; the default stream before).
inline cudaStream_t& stream() {
  static cudaStream_t s = nullptr;
  return s;
}

__device__ inline void report_error(unsigned code) { atomicCAS(&error_word, 0u, code); }

// The device address of a __device__ variable, or of an array's first element (the
// generated constants).
template <class S>
void* symbol_pointer(S& symbol, const char* what, std::string& error) {
  void* p = nullptr;
  const cudaError_t err = cudaGetSymbolAddress(&p, symbol);
  if (err != cudaSuccess && error.empty()) error = describe(err, what);
  return p;
}
template <class T>
T* symbol_address(T& symbol, const char* what, std::string& error) {
  return static_cast<T*>(symbol_pointer(symbol, what, error));
}
template <class T, size_t N>
T* symbol_address(T (&symbol)[N], const char* what, std::string& error) {
  return static_cast<T*>(symbol_pointer(symbol, what, error));
}

// The step's error code on the host, in page-locked memory so that its download is queued
// on the stream with the step's results (null, and `error` set, if it cannot be allocated).
inline unsigned* status_word(std::string& error) {
  static unsigned* word = nullptr;
  if (!word) {
    void* p = nullptr;
    const cudaError_t err = cudaMallocHost(&p, sizeof(unsigned));
    if (err != cudaSuccess) {
      if (error.empty()) error = describe(err, "cudaMallocHost (the step's error code)");
      return nullptr;
    }
    word = static_cast<unsigned*>(p);
  }
  return word;
}
// Whether the entry returns once the step is queued, its caller waiting for the stream and
// then asking gptc_device_step_status for the step's error (gptc_device_defer_wait: the
// runtime, which queues the results' downloads first, so that a step waits once); else the
// entry waits itself, and returns the step's error.
inline bool& wait_deferred() {
  static bool deferred = false;
  return deferred;
}

// Caller's ids (embedding indices, cross-entropy targets) checked on the device before any
// kernel of the step runs.
__global__ void ids_check_kernel(const int64_t* __restrict ids, int64_t n, int64_t bound,
                                 int64_t ignore, bool has_ignore, unsigned code) {
  GPTC_CUDA_GRID();
  GPTC_CUDA_FOR(i, n) {
    const int64_t id = ids[i];
    if (!((id >= 0 && id < bound) || (has_ignore && id == ignore))) report_error(code);
  }
}

// Reports `code` if a family's own error word is set (launched as a one-thread loop).
__global__ void error_from_word(const unsigned* __restrict word, unsigned code) {
  GPTC_CUDA_GRID();
  GPTC_CUDA_FOR(i, 1) if (*word) report_error(code);
}

template <class T>
__global__ void fill_kernel(T* __restrict p, int64_t n, T value) {
  GPTC_CUDA_GRID();
  GPTC_CUDA_FOR(i, n) p[i] = value;
}

// GPTC_CUDA_DEBUG=1: every kernel of a step runs on its own, followed by a sync and a check,
// so that a failing kernel is named (with its model.py line) rather than the step.
inline bool debug() {
  static const bool on = env_is("GPTC_CUDA_DEBUG", "1");
  return on;
}
// GPTC_CUDA_GRAPH=0: no CUDA graph; each call launches its kernels one by one.
inline bool graphs() {
  static const bool on = !env_is("GPTC_CUDA_GRAPH", "0");
  return on;
}

inline void check_kernel(const char* label, std::string& error) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream());
  if (err != cudaSuccess && error.empty()) error = describe(err, label);
}

// GPTC_CUDA_PROFILE=FILE: every kernel of a step is launched on its own (no graph) between
// two CUDA events on the stream, and after each step FILE is rewritten with one line a
// kernel, slowest first: its label (with its model.py line), calls, total milliseconds and
// microseconds a call. Where a step's time goes, on a machine with no profiler; the
// events' gaps are not counted, so the lines add up to less than a step.
inline const char* profile_path() {
  static const char* const path = [] {
    const char* v = std::getenv("GPTC_CUDA_PROFILE");
    return v && *v ? v : nullptr;
  }();
  return path;
}
struct KernelProfile {
  struct Kernel {
    std::string label;
    long calls = 0;
    double ms = 0;
  };
  std::vector<Kernel> kernels;                            // in first-call order
  std::vector<std::pair<size_t, cudaEvent_t>> started;  // this step's, in launch order
  std::vector<cudaEvent_t> ended;
};
inline KernelProfile& profile() {
  static KernelProfile p;
  return p;
}
inline void profile_begin(const char* label) {
  KernelProfile& p = profile();
  size_t k = 0;
  while (k < p.kernels.size() && p.kernels[k].label != label) ++k;
  if (k == p.kernels.size()) p.kernels.push_back({label});
  cudaEvent_t e = nullptr;
  cudaEventCreate(&e);
  cudaEventRecord(e, stream());
  p.started.push_back({k, e});
}
inline void profile_end() {
  cudaEvent_t e = nullptr;
  cudaEventCreate(&e);
  cudaEventRecord(e, stream());
  profile().ended.push_back(e);
}
// After the step's sync: each kernel's time added to its line, and FILE written.
inline void profile_collect() {
  KernelProfile& p = profile();
  for (size_t i = 0; i < p.started.size() && i < p.ended.size(); ++i) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, p.started[i].second, p.ended[i]) == cudaSuccess) {
      p.kernels[p.started[i].first].calls += 1;
      p.kernels[p.started[i].first].ms += ms;
    }
  }
  for (auto& s : p.started) cudaEventDestroy(s.second);
  for (cudaEvent_t e : p.ended) cudaEventDestroy(e);
  p.started.clear();
  p.ended.clear();
  std::vector<KernelProfile::Kernel> order = p.kernels;
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.ms > b.ms; });
  if (FILE* f = std::fopen(profile_path(), "w")) {
    std::fprintf(f, "kernel\tcalls\ttotal_ms\tus_per_call\n");
    for (const auto& k : order)
      std::fprintf(f, "%s\t%ld\t%.4f\t%.2f\n", k.label.c_str(), k.calls, k.ms,
                   k.calls ? 1000.0 * k.ms / (double)k.calls : 0.0);
    std::fclose(f);
  }
}

// GPTC_CUDA_BRANCHES=0: a group's members in turn on the step's stream.
inline bool branches_on() {
  static const bool on = !env_is("GPTC_CUDA_BRANCHES", "0");
  return on;
}

// A gpt.horizontal's launches as parallel branches of the step (codegen writes one of these
// into each group of several launches, CudaFlavour::group): to(b) sends the launches after
// it to branch b, 0 being the step's stream and the others side streams that first wait
// for what the step's stream had queued before the group (not the group's own members);
// at the group's end the step's stream waits for every branch. Captured into the step's
// graph, the waits are its edges: the branches' kernels may run side by side, and nothing
// after the group starts before all of them end. Each kernel computes what it computed in
// turn: the same bits. Off (everything on the step's stream) with GPTC_CUDA_BRANCHES=0,
// and under GPTC_CUDA_DEBUG and GPTC_CUDA_PROFILE, which take one kernel at a time. A
// failed call is the step's error.
class Branches {
 public:
  static constexpr int kBranches = 8;  // past that, the last branch takes the rest
  explicit Branches(std::string& error)
      : error_(error), main_(stream()), on_(branches_on() && !debug() && !profile_path()) {
    if (on_) check(cudaEventRecord(event(0), main_), "cudaEventRecord (a group's fork)");
  }
  Branches(const Branches&) = delete;
  Branches& operator=(const Branches&) = delete;
  void to(int b) {
    if (!on_) return;
    b = b < kBranches ? b : kBranches - 1;
    if (b > 0 && !(joined_ & (1u << b))) {
      check(cudaStreamWaitEvent(side(b), event(0), 0), "cudaStreamWaitEvent (a branch's start)");
      joined_ |= 1u << b;
    }
    stream() = b > 0 ? side(b) : main_;
  }
  ~Branches() {
    stream() = main_;
    for (int b = 1; b < kBranches; ++b) {
      if (!(joined_ & (1u << b))) continue;
      check(cudaEventRecord(event(b), side(b)), "cudaEventRecord (a branch's end)");
      check(cudaStreamWaitEvent(main_, event(b), 0), "cudaStreamWaitEvent (a group's join)");
    }
  }

 private:
  void check(cudaError_t err, const char* call) {
    if (err != cudaSuccess && error_.empty()) error_ = describe(err, call);
  }
  // The side streams and events, made on first use (a step's first call runs directly,
  // before any capture) and kept.
  cudaStream_t side(int b) {
    static cudaStream_t streams[kBranches] = {};
    if (!streams[b])
      check(cudaStreamCreateWithFlags(&streams[b], cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags (a branch)");
    return streams[b];
  }
  cudaEvent_t event(int i) {
    static cudaEvent_t events[kBranches] = {};
    if (!events[i])
      check(cudaEventCreateWithFlags(&events[i], cudaEventDisableTiming),
            "cudaEventCreateWithFlags (a branch)");
    return events[i];
  }
  std::string& error_;
  cudaStream_t main_;
  bool on_;
  unsigned joined_ = 0;  // the side branches that waited for the fork
};

// GPTC_CUDA_GRAPH_SHAPE=FILE: when a step's graph is captured, FILE gets its shape, one
// JSON object: its nodes, the kernels among them, and the longest chain of kernels each
// waiting for the one before (however wide the GPU, a replay takes at least that many
// kernels' latencies one after another).
inline void write_graph_shape(cudaGraph_t graph) {
  const char* path = std::getenv("GPTC_CUDA_GRAPH_SHAPE");
  if (!path || !*path) return;
  size_t n = 0, m = 0;
  cudaGraphGetNodes(graph, nullptr, &n);
  std::vector<cudaGraphNode_t> nodes(n);
  cudaGraphGetNodes(graph, nodes.data(), &n);
  cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &m);
  std::vector<cudaGraphNode_t> from(m), to(m);
  cudaGraphGetEdges(graph, from.data(), to.data(), nullptr, &m);
  auto index = [&](cudaGraphNode_t node) {
    return (size_t)(std::find(nodes.begin(), nodes.end(), node) - nodes.begin());
  };
  // The longest chain ending at each node, counting kernels (`kernel`: 1 for a kernel
  // node), in an order that puts each node after those it waits for (Kahn's).
  std::vector<size_t> kernel(n, 0), waiting(n, 0), chain(n, 0), ready;
  std::vector<std::vector<size_t>> next(n);
  for (size_t e = 0; e < m; ++e) {
    next[index(from[e])].push_back(index(to[e]));
    ++waiting[index(to[e])];
  }
  size_t kernels = 0, longest = 0;
  for (size_t i = 0; i < n; ++i) {
    cudaGraphNodeType type;
    cudaGraphNodeGetType(nodes[i], &type);
    kernel[i] = chain[i] = type == cudaGraphNodeTypeKernel ? 1 : 0;
    kernels += kernel[i];
    if (!waiting[i]) ready.push_back(i);
  }
  while (!ready.empty()) {
    const size_t i = ready.back();
    ready.pop_back();
    longest = std::max(longest, chain[i]);
    for (size_t j : next[i]) {
      chain[j] = std::max(chain[j], chain[i] + kernel[j]);
      if (--waiting[j] == 0) ready.push_back(j);
    }
  }
  if (FILE* f = std::fopen(path, "w")) {
    std::fprintf(f, "{\"nodes\": %zu, \"kernels\": %zu, \"longest_kernel_chain\": %zu}\n", n,
                 kernels, longest);
    std::fclose(f);
  }
}

// Runs a step's kernels (`body` launches them on stream()). The first call runs them
// directly (the families read the device's attributes, once, outside a capture). The second
// captures them into a CUDA graph, and that call and every later one launch the graph: one
// launch a step. The graph holds the buffers' addresses (`buffers`: the arguments, results
// and arena); calls with other buffers capture again. GPTC_CUDA_GRAPH=0, GPTC_CUDA_DEBUG=1 or
// GPTC_CUDA_PROFILE run every call directly. The emulation captures and replays the same
// way (gptc/cuda/emulate.hpp records the work, cudaGraphLaunch runs it).
// A family's failed launch during `body`, as the step's error.
inline void take_launch_error(std::string& error) {
  if (error.empty()) error = launch_error();
  launch_error().clear();
}

template <class Body>
void run_step(std::string& error, const void* const* buffers, size_t n, const Body& body) {
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    std::vector<const void*> buffers;
    long calls = 0;
  };
  static Graph g;
  if (!graphs() || debug() || profile_path() || g.calls++ == 0) {
    body();
    take_launch_error(error);
    return;
  }
  const std::vector<const void*> now(buffers, buffers + n);
  if (g.exec && g.buffers != now) {
    cudaGraphExecDestroy(g.exec);
    g.exec = nullptr;
  }
  auto fail = [&](cudaError_t err, const char* call) {
    if (err != cudaSuccess && error.empty()) error = describe(err, call);
    return err != cudaSuccess;
  };
  if (!g.exec) {
    if (fail(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal),
             "cudaStreamBeginCapture"))
      return;
    body();
    take_launch_error(error);
    cudaGraph_t graph = nullptr;
    if (fail(cudaStreamEndCapture(stream(), &graph), "cudaStreamEndCapture") || !error.empty()) {
      if (graph) cudaGraphDestroy(graph);
      return;
    }
    write_graph_shape(graph);
    const cudaError_t made = cudaGraphInstantiate(&g.exec, graph, 0);
    cudaGraphDestroy(graph);
    if (fail(made, "cudaGraphInstantiate")) {
      g.exec = nullptr;
      return;
    }
    g.buffers = now;
  }
  fail(cudaGraphLaunch(g.exec, stream()), "cudaGraphLaunch");
}

}  // namespace gptc::cuda

// The device layer the runtime calls through (runtime/src/model.cpp; the runtime itself
// includes no CUDA header and links no CUDA library: a CUDA artifact brings its own). Each
// returns null, or one line naming the CUDA call that failed.
namespace gptc::cuda::detail {
inline const char* failed(cudaError_t err, const char* call) {
  static thread_local std::string line;
  if (err == cudaSuccess) return nullptr;
  line = describe(err, call);
  return line.c_str();
}
}  // namespace gptc::cuda::detail

// Whether there is a GPU to run on ("no NVIDIA GPU or driver" where there is none); makes
// the stream the steps run on.
GPTC_EXPORT const char* gptc_device_init(void) {
  int count = 0;
  if (const char* e = ::gptc::cuda::detail::failed(cudaGetDeviceCount(&count), "cudaGetDeviceCount"))
    return e;
  if (count == 0) return "cudaGetDeviceCount: no NVIDIA GPU";
  if (!::gptc::cuda::stream())
    return ::gptc::cuda::detail::failed(
        cudaStreamCreateWithFlags(&::gptc::cuda::stream(), cudaStreamNonBlocking),
        "cudaStreamCreateWithFlags");
  return nullptr;
}
GPTC_EXPORT const char* gptc_device_alloc(void** p, size_t bytes) {
  *p = nullptr;
  return ::gptc::cuda::detail::failed(cudaMalloc(p, bytes > 0 ? bytes : 1), "cudaMalloc");
}
GPTC_EXPORT const char* gptc_device_free(void* p) {
  return ::gptc::cuda::detail::failed(cudaFree(p), "cudaFree");
}
// Device memory that another artifact's layer allocated in this process (a param the
// runtime shares between two artifacts: Model::load's weights_of), before this layer's
// kernels are given it. On a GPU nothing: the libraries of one process share the device's
// context, and so its memory. The emulation records it as device memory.
GPTC_EXPORT const char* gptc_device_adopt(void* p, size_t bytes) {
#if defined(GPTC_CUDA_EMULATE)
  ::gptc::cuda::emulate::device_memory().add(p, bytes);
#else
  (void)p, (void)bytes;
#endif
  return nullptr;
}
// Copies: gptc_device_copy_async queues one on the steps' stream (to_device: host ->
// device; else device -> host), in order with the steps; gptc_device_sync waits for all
// that is queued. Between page-locked host memory (gptc_device_host_alloc: the staging of
// a step's inputs and results) and the device a copy is asynchronous: its host bytes must
// stay put, and a download is not there, until the sync; from or to other host memory it
// is done when the call returns.
GPTC_EXPORT const char* gptc_device_host_alloc(void** p, size_t bytes) {
  *p = nullptr;
  return ::gptc::cuda::detail::failed(cudaMallocHost(p, bytes > 0 ? bytes : 1), "cudaMallocHost");
}
GPTC_EXPORT const char* gptc_device_host_free(void* p) {
  return ::gptc::cuda::detail::failed(cudaFreeHost(p), "cudaFreeHost");
}
GPTC_EXPORT const char* gptc_device_copy_async(void* dst, const void* src, size_t bytes,
                                               int to_device) {
  return ::gptc::cuda::detail::failed(
      cudaMemcpyAsync(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                      ::gptc::cuda::stream()),
      to_device ? "cudaMemcpyAsync (host to device)" : "cudaMemcpyAsync (device to host)");
}
GPTC_EXPORT const char* gptc_device_sync(void) {
  return ::gptc::cuda::detail::failed(cudaStreamSynchronize(::gptc::cuda::stream()),
                                      "cudaStreamSynchronize");
}
// From now on the entry returns once the step is queued (or a call failed); after the
// caller's gptc_device_sync, gptc_device_step_status (the generated kernels.cu's) gives the
// step's error line, or null. The runtime turns it on when it loads a CUDA artifact.
GPTC_EXPORT const char* gptc_device_defer_wait(void) {
  ::gptc::cuda::wait_deferred() = true;
  return nullptr;
}

// Launches a generated kernel on `blocks` blocks of kLoopThreads on the entry's stream.
#if defined(GPTC_CUDA_EMULATE)
// Its threads never synchronise, so the emulation runs them one after another.
#define GPTC_CUDA_GRID_LAUNCH(kernel, blocks) \
  ::gptc::cuda::emulate::serial_launcher(kernel, (blocks), ::gptc::cuda::kLoopThreads, \
                                         ::gptc::cuda::stream())
#else
#define GPTC_CUDA_GRID_LAUNCH(kernel, blocks) \
  kernel<<<(blocks), ::gptc::cuda::kLoopThreads, 0, ::gptc::cuda::stream()>>>
#endif
// The same for a kernel whose threads exchange values (a warp's or a block's sums).
#define GPTC_CUDA_BLOCK_LAUNCH(kernel, blocks) \
  GPTC_LAUNCH(kernel, (blocks), ::gptc::cuda::kLoopThreads, ::gptc::cuda::stream())
// A grid-stride kernel over n iterations.
#define GPTC_CUDA_LOOP_LAUNCH(kernel, n) GPTC_CUDA_GRID_LAUNCH(kernel, ::gptc::cuda::loop_blocks(n))

// In the entry: a kernel's call; with GPTC_CUDA_DEBUG=1, followed by a sync and a check that
// names it; with GPTC_CUDA_PROFILE, between two events.
#define GPTC_CUDA_KERNEL(label, call)                                        \
  do {                                                                       \
    if (::gptc::cuda::profile_path()) ::gptc::cuda::profile_begin(label);    \
    call;                                                                    \
    if (::gptc::cuda::profile_path()) ::gptc::cuda::profile_end();           \
    if (::gptc::cuda::debug()) ::gptc::cuda::check_kernel(label, gptc_step_error); \
  } while (0)

// In the entry: a CUDA runtime call whose failure ends the step with one line.
#define GPTC_CUDA_TRY(call)                                              \
  do {                                                                   \
    const cudaError_t gptc_err_ = (call);                                \
    if (gptc_err_ != cudaSuccess && gptc_step_error.empty())             \
      gptc_step_error = ::gptc::cuda::describe(gptc_err_, #call);        \
  } while (0)

// Rows of 4-byte words, from src (rows src_pitch words apart; null: zeros) to dst (rows
// dst_pitch apart): a generator's caches kept in device memory between its steps
// (gptc::rt::Generator: a step's key and value rows stored at their position, the caches
// moved to a longer step's layout, a text's cleared).
namespace gptc::cuda {
__global__ void copy_rows_kernel(float* __restrict dst, int64_t dst_pitch,
                                 const float* __restrict src, int64_t src_pitch, int64_t width,
                                 int64_t rows) {
  GPTC_CUDA_GRID();
  GPTC_CUDA_FOR(i, rows * width) {
    const int64_t r = i / width, c = i % width;
    dst[r * dst_pitch + c] = src ? src[r * src_pitch + c] : 0.0f;
  }
}
}  // namespace gptc::cuda

// The same in bytes, multiples of 4, on the steps' stream (device to device; done by the
// next sync, in order with the steps). The regions must not overlap.
GPTC_EXPORT const char* gptc_device_copy_rows(void* dst, size_t dst_pitch, const void* src,
                                              size_t src_pitch, size_t width, size_t rows) {
  if ((dst_pitch | src_pitch | width) % 4 || (uintptr_t)dst % 4 || (uintptr_t)src % 4)
    return "gptc_device_copy_rows: a width, pitch or address not a multiple of 4 bytes";
  if (width == 0 || rows == 0) return nullptr;
  const int64_t n = (int64_t)(width / 4 * rows);
  auto launch = [=] {
    GPTC_CUDA_LOOP_LAUNCH(::gptc::cuda::copy_rows_kernel, n)
    (static_cast<float*>(dst), (int64_t)(dst_pitch / 4), static_cast<const float*>(src),
     (int64_t)(src_pitch / 4), (int64_t)(width / 4), (int64_t)rows);
  };
#if defined(GPTC_CUDA_EMULATE)
  // Done when this library's stream next does anything, as a GPU's stream would have it
  // done: a caller that lets another artifact's run read the rows first reads old ones.
  ::gptc::cuda::emulate::defer(launch);
#else
  launch();
#endif
  return ::gptc::cuda::detail::failed(cudaGetLastError(), "gptc_device_copy_rows (its launch)");
}
