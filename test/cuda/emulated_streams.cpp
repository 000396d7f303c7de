// The emulation's streams, events and graphs (gptc/cuda/emulate.hpp) against CUDA's rules
// for stream capture, and the generated step's branches (gptc::cuda::Branches, run_step)
// under them. The emulated GPU runs one kernel at a time, so what it can show of parallel
// branches is that their edges are the ones CUDA captures: a branch that never forked from
// the capture runs outside it, a fork never joined fails the capture, and each replay takes
// another order that respects the edges, so branches that are not independent give other
// results from one replay to the next. Likewise a grid's blocks, and a block's threads
// between barriers, run in another order each launch; and a launch of a shape CUDA refuses
// runs nothing and says why.
#define GPTC_CUDA_EMULATE 1

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "gptc/cuda/generated.cuh"

namespace {

__global__ void set_kernel(int* p, int i, int v) {
  if (threadIdx.x == 0) p[i] = v;
}
// p[i] = p[a] * m + p[b] (the host's arguments frozen into a graph; the memory is read when
// the kernel runs).
__global__ void combine_kernel(int* p, int i, int a, int m, int b) {
  if (threadIdx.x == 0) p[i] = p[a] * m + p[b];
}

struct Device {
  int* p = nullptr;
  Device() {
    EXPECT_EQ(cudaMalloc((void**)&p, 16 * sizeof(int)), cudaSuccess);
    std::memset(p, 0, 16 * sizeof(int));  // (device memory is host memory here)
  }
  ~Device() { cudaFree(p); }
};

cudaStream_t new_stream() {
  cudaStream_t s = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  return s;
}

// A step as the generated entry runs it: the first call direct, later ones one graph; a
// group's members on branches forked from the step's stream and joined back.
TEST(EmulatedStreams, AStepsBranchesReplayWithTheirEdges) {
  Device d;
  gptc::cuda::stream() = new_stream();
  std::string error;
  const void* buffers[] = {d.p};
  for (int call = 1; call <= 12; ++call) {
    d.p[0] = call;  // the step's input, written by the host between calls
    gptc::cuda::run_step(error, buffers, 1, [&] {
      GPTC_LAUNCH(combine_kernel, 1, 32, gptc::cuda::stream())(d.p, 1, 0, 1, 15);  // p1 = p0
      {
        gptc::cuda::Branches branches(error);
        for (int b = 0; b < 4; ++b) {
          branches.to(b);  // p[2 + b] = p1 * (b + 2)
          GPTC_LAUNCH(combine_kernel, 1, 32, gptc::cuda::stream())(d.p, 2 + b, 1, b + 2, 15);
        }
      }
      GPTC_LAUNCH(combine_kernel, 1, 32, gptc::cuda::stream())(d.p, 6, 2, 1, 3);
      GPTC_LAUNCH(combine_kernel, 1, 32, gptc::cuda::stream())(d.p, 6, 4, 1, 6);
      GPTC_LAUNCH(combine_kernel, 1, 32, gptc::cuda::stream())(d.p, 6, 5, 1, 6);
    });
    ASSERT_EQ(error, "") << "call " << call;
    EXPECT_EQ(d.p[6], call * (2 + 3 + 4 + 5)) << "call " << call;
  }
}

// GPTC_CUDA_GRAPH_SHAPE: the captured step's nodes, its kernels, and the longest chain of
// kernels each waiting for the one before: a memset, then p1, then 4 branches, then 3 in
// turn: 9 nodes, 8 kernels, a chain of 1 + 1 + 3.
TEST(EmulatedStreams, AStepsGraphShapeCountsItsKernelsAndLongestChain) {
  Device d;
  gptc::cuda::stream() = new_stream();
  std::string error;
  const void* buffers[] = {d.p};
  const std::string path = ::testing::TempDir() + "graph_shape.json";
  std::remove(path.c_str());
  ASSERT_EQ(setenv("GPTC_CUDA_GRAPH_SHAPE", path.c_str(), 1), 0);
  for (int call = 1; call <= 2; ++call)
    gptc::cuda::run_step(error, buffers, 1, [&] {
      cudaMemsetAsync(d.p + 15, 0, sizeof(int), gptc::cuda::stream());
      GPTC_LAUNCH(combine_kernel, 1, 32, gptc::cuda::stream())(d.p, 1, 0, 1, 15);
      {
        gptc::cuda::Branches branches(error);
        for (int b = 0; b < 4; ++b) {
          branches.to(b);
          GPTC_LAUNCH(combine_kernel, 1, 32, gptc::cuda::stream())(d.p, 2 + b, 1, b + 2, 15);
        }
      }
      for (int k = 0; k < 3; ++k)
        GPTC_LAUNCH(combine_kernel, 1, 32, gptc::cuda::stream())(d.p, 6, 2 + k, 1, 6);
    });
  unsetenv("GPTC_CUDA_GRAPH_SHAPE");
  ASSERT_EQ(error, "");
  std::FILE* f = std::fopen(path.c_str(), "r");
  ASSERT_NE(f, nullptr) << "no graph shape written (the second call captures)";
  char line[256] = {};
  ASSERT_NE(std::fgets(line, sizeof line, f), nullptr);
  std::fclose(f);
  EXPECT_EQ(std::string(line),
            "{\"nodes\": 9, \"kernels\": 8, \"longest_kernel_chain\": 5}\n");
}

// A branch launched on a stream that never waited for the fork is not in the capture: it
// runs at once, as on a GPU, and no replay runs it.
TEST(EmulatedStreams, WorkOnAStreamOutsideTheCaptureRunsAtOnce) {
  Device d;
  cudaStream_t main = new_stream(), side = new_stream();
  ASSERT_EQ(cudaStreamBeginCapture(main, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  GPTC_LAUNCH(set_kernel, 1, 32, main)(d.p, 0, 1);
  GPTC_LAUNCH(set_kernel, 1, 32, side)(d.p, 1, 2);
  EXPECT_EQ(d.p[0], 0);  // recorded, not run
  EXPECT_EQ(d.p[1], 2);  // run
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(main, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  d.p[1] = 0;
  ASSERT_EQ(cudaGraphLaunch(exec, main), cudaSuccess);
  EXPECT_EQ(d.p[0], 1);
  EXPECT_EQ(d.p[1], 0);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// A fork whose branch is not joined back into the capture's stream fails the capture, as
// CUDA's does, and leaves no capture behind.
TEST(EmulatedStreams, AForkNeverJoinedFailsTheCapture) {
  Device d;
  cudaStream_t main = new_stream(), side = new_stream();
  cudaEvent_t fork = nullptr;
  ASSERT_EQ(cudaEventCreate(&fork), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(main, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  GPTC_LAUNCH(set_kernel, 1, 32, main)(d.p, 0, 1);
  ASSERT_EQ(cudaEventRecord(fork, main), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side, fork, 0), cudaSuccess);
  GPTC_LAUNCH(set_kernel, 1, 32, side)(d.p, 1, 2);
  EXPECT_EQ(d.p[1], 0);  // in the capture: recorded
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(main, &graph), cudaErrorStreamCaptureUnjoined);
  EXPECT_EQ(graph, nullptr);
  EXPECT_STREQ(cudaGetErrorName(cudaErrorStreamCaptureUnjoined), "cudaErrorStreamCaptureUnjoined");
  // Joined, the same capture succeeds.
  cudaEvent_t join = nullptr;
  ASSERT_EQ(cudaEventCreate(&join), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(main, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(fork, main), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side, fork, 0), cudaSuccess);
  GPTC_LAUNCH(set_kernel, 1, 32, side)(d.p, 1, 2);
  ASSERT_EQ(cudaEventRecord(join, side), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(main, join, 0), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(main, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  cudaGraphDestroy(graph);
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
}

// A sync, a synchronous copy or an allocation during a thread-local capture is refused and
// spoils the capture.
TEST(EmulatedStreams, AWaitOrAnAllocationSpoilsTheCapture) {
  Device d;
  cudaStream_t main = new_stream();
  int host = 0;
  for (int call = 0; call < 3; ++call) {
    ASSERT_EQ(cudaStreamBeginCapture(main, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    GPTC_LAUNCH(set_kernel, 1, 32, main)(d.p, 0, 1);
    void* p = nullptr;
    if (call == 0) EXPECT_EQ(cudaStreamSynchronize(main), cudaErrorStreamCaptureUnsupported);
    if (call == 1) EXPECT_EQ(cudaMalloc(&p, 4), cudaErrorStreamCaptureUnsupported);
    if (call == 2)
      EXPECT_EQ(cudaMemcpy(&host, d.p, 4, cudaMemcpyDeviceToHost),
                cudaErrorStreamCaptureUnsupported);
    EXPECT_EQ(p, nullptr);
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(main, &graph), cudaErrorStreamCaptureInvalidated) << call;
    EXPECT_EQ(graph, nullptr);
  }
  EXPECT_EQ(d.p[0], 0);
}

// Replays keep each stream's work in order and each join after its branches, and take
// another order of the branches each time: two branches that write the same element leave
// either value.
TEST(EmulatedStreams, ReplaysTakeOtherOrdersOfIndependentWork) {
  Device d;
  cudaStream_t main = new_stream(), side = new_stream();
  cudaEvent_t fork = nullptr, join = nullptr;
  ASSERT_EQ(cudaEventCreate(&fork), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&join), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(main, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  GPTC_LAUNCH(set_kernel, 1, 32, main)(d.p, 1, 0);
  ASSERT_EQ(cudaEventRecord(fork, main), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side, fork, 0), cudaSuccess);
  for (int k = 1; k <= 5; ++k) {
    // main: p1 = p1 * 10 + k (in order: 12345); both streams write p0 (a race)
    GPTC_LAUNCH(set_kernel, 1, 32, main)(d.p, 14, k);
    GPTC_LAUNCH(combine_kernel, 1, 32, main)(d.p, 1, 1, 10, 14);
    GPTC_LAUNCH(set_kernel, 1, 32, side)(d.p, 0, 100 + k);
  }
  GPTC_LAUNCH(set_kernel, 1, 32, main)(d.p, 0, 1);
  ASSERT_EQ(cudaEventRecord(join, side), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(main, join, 0), cudaSuccess);
  GPTC_LAUNCH(combine_kernel, 1, 32, main)(d.p, 2, 0, 1, 15);  // after the join: p2 = p0
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(main, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  std::set<int> last;
  for (int replay = 0; replay < 20; ++replay) {
    ASSERT_EQ(cudaGraphLaunch(exec, main), cudaSuccess);
    EXPECT_EQ(d.p[1], 12345);
    EXPECT_EQ(d.p[2], d.p[0]);
    EXPECT_TRUE(d.p[0] == 1 || d.p[0] == 105) << d.p[0];  // each stream's last write
    last.insert(d.p[0]);
  }
  EXPECT_EQ(last, (std::set<int>{1, 105}));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
}

// Each block, then each of its threads, takes the next slot of `seen` (blocks in p[0..),
// threads of block 0 in p[16..)): the order they ran in.
__global__ void arrival_kernel(int* p) {
  if (threadIdx.x == 0) p[atomicAdd(&p[15], 1)] = (int)blockIdx.x;
  if (blockIdx.x == 0) p[16 + atomicAdd(&p[14], 1)] = (int)threadIdx.x;
}

TEST(EmulatedOrders, BlocksAndThreadsRunInAnotherOrderEachLaunch) {
  int* p = nullptr;
  ASSERT_EQ(cudaMalloc((void**)&p, (16 + 64) * sizeof(int)), cudaSuccess);
  std::set<std::vector<int>> blocks, threads;
  for (int launch = 0; launch < 4; ++launch) {
    std::memset(p, 0, (16 + 64) * sizeof(int));
    GPTC_LAUNCH(arrival_kernel, 8, 64, nullptr)(p);
    std::vector<int> b(p, p + 8), t(p + 16, p + 16 + 64);
    EXPECT_EQ(std::set<int>(b.begin(), b.end()).size(), 8u);  // each block once
    EXPECT_EQ(std::set<int>(t.begin(), t.end()).size(), 64u);  // each thread once
    blocks.insert(b);
    threads.insert(t);
  }
  EXPECT_EQ(blocks.size(), 4u);
  EXPECT_EQ(threads.size(), 4u);
  cudaFree(p);
}

// A launch of a shape CUDA refuses (no blocks, more than 1,024 threads a block, more than
// 65,535 blocks along y) runs nothing, and cudaGetLastError says why, once.
TEST(EmulatedLaunches, AShapeCudaRefusesRunsNothing) {
  Device d;
  const dim3 grids[] = {dim3(0), dim3(1), dim3(1, 65536)};
  const dim3 blocks[] = {dim3(32), dim3(2048), dim3(32)};
  for (int i = 0; i < 3; ++i) {
    GPTC_LAUNCH(set_kernel, grids[i], blocks[i], nullptr)(d.p, 0, 1);
    EXPECT_EQ(d.p[0], 0) << i;
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration) << i;
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << i;
  }
  GPTC_LAUNCH(set_kernel, dim3(1, 2, 2), 1024, nullptr)(d.p, 0, 1);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(d.p[0], 1);
}

}  // namespace
