// Built for sm_90 by test/cuda/CMakeLists.txt, never run: every function of the prelude's
// portable families called from device code, so that a change that makes one host-only (a
// std:: call, a CPU intrinsic outside the CPU's #if, a missing GPTC_HD) fails the build.
#include <cstdint>

#include "gptc/prelude/bf16.h"
#include "gptc/prelude/math.h"
#include "gptc/prelude/matmul.h"
#include "gptc/prelude/reduce.h"
#include "gptc/prelude/rng.h"

template <class T>
__device__ T elementary(T v) {
  return gptc::exp(v) + gptc::log(v) + gptc::tanh(v) + gptc::erf(v) + gptc::sin(v) +
         gptc::cos(v) + gptc::sqrt(v) + gptc::rsqrt(v) + gptc::abs(v) + gptc::pow(v, v) +
         gptc::sigmoid(v) + gptc::gelu_erf(v) + gptc::gelu_tanh(v) +
         gptc::gelu_erf_grad(v, v) + gptc::gelu_tanh_grad(v, v) + gptc::maximum(v, T(1)) +
         gptc::minimum(v, T(1)) + gptc::fma(v, v, v);
}

template <class T>
__device__ T reductions(const T* x) {
  T sixteen[16];
  gptc::reduce_sum16<T>(40, [&](int64_t k, int l) { return x[k + l]; }, sixteen);
  return gptc::reduce_sum<T>(40, [&](int64_t k) { return x[k]; }) +
         gptc::reduce_max<T>(40, [&](int64_t k) { return x[k]; }) +
         gptc::dot_seq<T>(40, [&](int64_t k) { return x[k]; }, [&](int64_t k) { return x[k]; }) +
         sixteen[3];
}

__global__ void portable_prelude(const float* x, const double* xd, const int64_t* rng,
                                 float* y, double* yd, gptc::bf16* h) {
  const int i = threadIdx.x;
  float v = elementary(x[i]) + reductions(x);
  yd[i] = elementary(xd[i]) + reductions(xd);
  v += gptc::dropout_keep(1, 2, 3, (uint64_t)i, 0.1f) ? 1.0f : 0.0f;
  gptc::MatmulEpilogue<float> ep;
  ep.rng = rng;
  ep.bias = x;
  ep.addend = x;
  y[i] = ep.any() ? ep.apply_one(i, 0, v) : v;
  h[i] = gptc::to_bf16(gptc::to_float(h[i]) + v);
}
