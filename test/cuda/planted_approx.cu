// An approximate exponential (ex2.approx.ftz): ptx_lint.py must reject it.
__global__ void planted_approx(const float* a, float* b) {
  const int i = threadIdx.x;
  b[i] = __expf(a[i]);
}
