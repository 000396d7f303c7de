// A multiply and an add that nvcc contracts into one fma unless built with -fmad=false:
// test/cuda/CMakeLists.txt builds it both ways, and ptx_lint.py must reject the contraction.
__global__ void planted_contraction(const float* a, const float* b, float* c) {
  const int i = threadIdx.x;
  c[i] = a[i] * b[i] + c[i];
}
