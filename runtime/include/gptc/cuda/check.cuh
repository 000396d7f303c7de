// gptc/cuda/check.cuh — checking every CUDA runtime call.
//
// GPTC_CUDA_CHECK(call) evaluates a cudaError_t expression; on failure it prints one line,
// "gptc: error: <call>: <error name> (<error text>)", and exits 1 (for programs such as
// test/cuda/kernel_families.cu; a runtime reports describe()'s line instead). Error 35
// (cudaErrorInsufficientDriver) is what the CUDA runtime returns when there is no driver at
// all, so it is reported as "no NVIDIA GPU or driver", which is what it means on a machine
// without a GPU.
#pragma once

#include "gptc/cuda/device.cuh"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace gptc::cuda {

inline std::string describe(cudaError_t err, const char* call) {
  std::string line = std::string(call) + ": ";
  if (err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice)
    return line + "no NVIDIA GPU or driver (" + cudaGetErrorName(err) + ")";
  return line + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}

[[noreturn]] inline void fail(cudaError_t err, const char* call) {
  std::fprintf(stderr, "gptc: error: %s\n", describe(err, call).c_str());
  std::exit(1);
}

}  // namespace gptc::cuda

#define GPTC_CUDA_CHECK(call)                                           \
  do {                                                                  \
    const cudaError_t gptc_err_ = (call);                               \
    if (gptc_err_ != cudaSuccess) ::gptc::cuda::fail(gptc_err_, #call); \
  } while (0)

// After a kernel launch: the launch's own error (bad configuration, no device), reported
// with the kernel's name: one line and exit 1, unless the includer defines
// GPTC_CUDA_LAUNCH_FAILED(err, what) first (a generated step records it and fails the step
// with it, so that a program using the runtime lives on).
#ifndef GPTC_CUDA_LAUNCH_FAILED
#define GPTC_CUDA_LAUNCH_FAILED(err, what) ::gptc::cuda::fail(err, what)
#endif
#define GPTC_CUDA_CHECK_LAUNCH(name)                                        \
  do {                                                                      \
    const cudaError_t gptc_err_ = cudaGetLastError();                       \
    if (gptc_err_ != cudaSuccess) GPTC_CUDA_LAUNCH_FAILED(gptc_err_, "launch of " name); \
  } while (0)
