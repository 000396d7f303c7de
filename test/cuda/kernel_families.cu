// The CUDA kernel families against the CPU's bits, and their speed (scripts/gpu_check.sh).
//
//   kernel_families [--quick] [--only CASE] [RESULT.json]
//
// Each family runs on the GPU and is compared bit for bit with the prelude run on the host
// by the same program (the host half of this file is the prelude's CPU path, the path
// test/unit's *.cuda_host tests hold to the CPU kernels' bits):
//   * elementwise math: exp, log, tanh, erf, sigmoid, gelu (erf and tanh) on random floats
//     over every exponent and on the special values;
//   * dropout masks (Philox by element index);
//   * the canonical row sum and max (warp shuffles) on rows of 1 to 50,257 elements, and
//     sums along an outer dimension (a bias's gradient);
//   * LayerNorm and its input gradient, cross-entropy and its gradient (ignored rows, a
//     target out of range), against the CPU kernels' expressions
//     (codegen/EmitModelKernels.cpp) evaluated by the prelude on the host;
//   * the embedding's gradient (a stable sort by id, no float atomics), ids out of range;
//   * attention and its gradient (causal or not, both layouts, dropout on the weights),
//     against the CPU kernels' per-row online softmax and gradient on the host;
//   * the matmul on the test GPT's and shakespeare_char's forward and gradient shapes, all
//     four operand layouts, a batch, an epilogue (bias, dropout, residual), and a K tail
//     whose products underflow to -0.
// Then the matmul's speed on shakespeare_char's shapes against cuBLAS SGEMM (fp32, TF32
// off), median of 50 after warm-up. Prints a table; writes the figures as JSON. Exits 1 if
// any bit differs, 77 (skipped) if there is no GPU. --quick runs the small shapes only (the
// ctest, compute-sanitizer); --only CASE only the matmul cases whose name contains CASE (for
// a profiler).
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gptc/cuda/attention.cuh"
#include "gptc/cuda/check.cuh"
#include "gptc/cuda/cross_entropy.cuh"
#include "gptc/cuda/embedding.cuh"
#include "gptc/cuda/layer_norm.cuh"
#include "gptc/cuda/matmul.cuh"
#include "gptc/cuda/reduce.cuh"
#include "references.h"

namespace {

using gptc::cuda::MatmulShape;

std::string g_json;  // the result's entries, comma-separated
int g_failures = 0;

void record(const std::string& entry) {
  if (!g_json.empty()) g_json += ",\n  ";
  g_json += entry;
}

// Prints a family's line ("same bits" or "DIFFERENT") and records its JSON entry.
void report(const char* label, const char* family, const char* unit, int64_t count, int64_t bad) {
  std::printf("%-28s %10lld %-8s %s\n", label, (long long)count, unit,
              bad ? "DIFFERENT" : "same bits");
  record("{\"family\": \"" + std::string(family) + "\", \"" + unit + "\": " +
         std::to_string(count) + ", \"mismatches\": " + std::to_string(bad) + "}");
}

// A device buffer that frees itself.
template <class T>
struct DeviceArray {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DeviceArray(size_t count) : n(count) {
    GPTC_CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(count, 1) * sizeof(T)));
  }
  DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    GPTC_CUDA_CHECK(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceArray() { cudaFree(ptr); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  std::vector<T> host() const {
    std::vector<T> out(n);
    GPTC_CUDA_CHECK(cudaMemcpy(out.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }
  // Fills with a NaN pattern, so that an element the kernel never writes is a mismatch.
  void poison() { GPTC_CUDA_CHECK(cudaMemset(ptr, 0xff, n * sizeof(T))); }
};

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
// Bitwise equal, except that any NaN equals any NaN (a NaN's payload is not promised).
bool same_bits(float a, float b) { return (a != a && b != b) || bits_of(a) == bits_of(b); }

// Counts the elements whose bits differ and prints the first few.
int64_t compare(const char* what, const std::vector<float>& gpu, const std::vector<float>& cpu,
                const std::vector<int64_t>* where = nullptr) {
  int64_t bad = 0;
  for (size_t i = 0; i < cpu.size(); ++i)
    if (!same_bits(gpu[i], cpu[i])) {
      if (bad < 3)
        std::printf("  MISMATCH %s element %lld: gpu %a, cpu %a\n", what,
                    (long long)(where ? (*where)[i] : (int64_t)i), gpu[i], cpu[i]);
      ++bad;
    }
  if (bad) ++g_failures;
  return bad;
}

// Random floats over every exponent (a random bit pattern of each sign) mixed with values of
// ordinary size and the special values.
std::vector<float> math_inputs(size_t n, std::mt19937_64& rng) {
  std::vector<float> x(n);
  std::uniform_real_distribution<float> mid(-12.0f, 12.0f);
  const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, -1e-45f,
                           88.72f, -103.9f, 0.84375f, 6.0f, -6.0f, 1.0f, -1.0f};
  for (size_t i = 0; i < n; ++i) {
    if (i < sizeof(special) / sizeof(special[0])) {
      x[i] = special[i];
    } else if (i % 2) {
      const uint32_t u = (uint32_t)rng();
      std::memcpy(&x[i], &u, 4);
    } else {
      x[i] = mid(rng);
    }
  }
  return x;
}

enum class Fn { Exp, Log, Tanh, Erf, Sigmoid, GeluErf, GeluTanh };
const char* const kFnNames[] = {"exp", "log", "tanh", "erf", "sigmoid", "gelu_erf", "gelu_tanh"};

__host__ __device__ float apply_fn(Fn f, float x) {
  switch (f) {
    case Fn::Exp: return gptc::exp(x);
    case Fn::Log: return gptc::log(x);
    case Fn::Tanh: return gptc::tanh(x);
    case Fn::Erf: return gptc::erf(x);
    case Fn::Sigmoid: return gptc::sigmoid(x);
    case Fn::GeluErf: return gptc::gelu_erf(x);
    case Fn::GeluTanh: return gptc::gelu_tanh(x);
  }
  return 0;
}

__global__ void math_kernel(Fn f, int64_t n, const float* x, float* y) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = apply_fn(f, x[i]);
}

void check_math(size_t n, std::mt19937_64& rng) {
  const std::vector<float> x = math_inputs(n, rng);
  DeviceArray<float> dx(x), dy(n);
  for (int f = 0; f <= (int)Fn::GeluTanh; ++f) {
    dy.poison();
    math_kernel<<<1024, 256>>>((Fn)f, (int64_t)n, dx.ptr, dy.ptr);
    GPTC_CUDA_CHECK_LAUNCH("math_kernel");
    const std::vector<float> gpu = dy.host();
    std::vector<float> cpu(n);
#pragma omp parallel for
    for (int64_t i = 0; i < (int64_t)n; ++i) cpu[i] = apply_fn((Fn)f, x[i]);
    const int64_t bad = compare(kFnNames[f], gpu, cpu);
    std::printf("%-28s %10zu values   %s\n", kFnNames[f], n, bad ? "DIFFERENT" : "same bits");
    record("{\"family\": \"math\", \"fn\": \"" + std::string(kFnNames[f]) +
           "\", \"values\": " + std::to_string(n) + ", \"mismatches\": " + std::to_string(bad) +
           "}");
  }
}

__global__ void dropout_kernel(int64_t n, uint64_t seed, uint64_t step, uint64_t id, float p,
                               float* out) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = gptc::dropout_keep(seed, step, id, (uint64_t)i, p) ? 1.0f : 0.0f;
}

void check_dropout(int64_t n) {
  DeviceArray<float> d(n);
  int64_t bad = 0;
  for (uint64_t step : {0ull, 1ull, 12345678901ull}) {
    d.poison();
    dropout_kernel<<<1024, 256>>>(n, 1337, step, 7, 0.1f, d.ptr);
    GPTC_CUDA_CHECK_LAUNCH("dropout_kernel");
    const std::vector<float> gpu = d.host();
    std::vector<float> cpu(n);
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) cpu[i] = gptc::dropout_keep(1337, step, 7, i, 0.1f) ? 1.f : 0.f;
    bad += compare("dropout", gpu, cpu);
  }
  report("dropout_keep", "dropout", "values", 3 * n, bad);
}

void check_reductions(std::mt19937_64& rng) {
  const int64_t lengths[] = {1, 7, 31, 32, 33, 64, 65, 100, 384, 1000, 1536, 4097, 50257};
  int64_t bad = 0, rows_checked = 0;
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (const int64_t n : lengths) {
    const int64_t rows = n > 4096 ? 64 : 257;
    std::vector<float> x(rows * n);
    for (auto& v : x) v = normal(rng) * (rng() % 7 == 0 ? 1e6f : 1.0f);
    DeviceArray<float> dx(x), dsum(rows), dmax(rows);
    dsum.poison();
    dmax.poison();
    gptc::cuda::row_reduce_kernel<<<64, 256>>>(rows, n, dx.ptr, dsum.ptr, gptc::cuda::RowSum{});
    GPTC_CUDA_CHECK_LAUNCH("row_reduce_kernel (sum)");
    gptc::cuda::row_reduce_kernel<<<64, 256>>>(rows, n, dx.ptr, dmax.ptr, gptc::cuda::RowMax{});
    GPTC_CUDA_CHECK_LAUNCH("row_reduce_kernel (max)");
    std::vector<float> sum(rows), mx(rows);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x.data() + r * n;
      sum[r] = gptc::reduce_sum<float>(n, [&](int64_t k) { return row[k]; });
      mx[r] = gptc::reduce_max<float>(n, [&](int64_t k) { return row[k]; });
    }
    bad += compare("row_sum", dsum.host(), sum) + compare("row_max", dmax.host(), mx);
    rows_checked += rows;
  }
  report("row sum, row max", "reduce", "rows", rows_checked, bad);
}

struct ColumnElem {  // element (i, c) of a row-major [n, cols] array
  const float* x;
  int64_t cols;
  __device__ float operator()(int64_t i, int64_t c) const { return x[i * cols + c]; }
};

void check_column_sums(std::mt19937_64& rng) {
  const int64_t shapes[][2] = {{1, 5}, {31, 33}, {100, 77}, {256, 64}, {16384, 384}};
  std::normal_distribution<float> normal(0.0f, 2.0f);
  int64_t bad = 0, outputs = 0;
  for (const auto& sh : shapes) {
    const int64_t n = sh[0], cols = sh[1];
    std::vector<float> x(n * cols);
    for (auto& v : x) v = normal(rng);
    DeviceArray<float> dx(x), dout(cols);
    dout.poison();
    gptc::cuda::column_reduce_sum_kernel<float>
        <<<(unsigned)((cols + 7) / 8), 256>>>(n, cols, ColumnElem{dx.ptr, cols}, dout.ptr);
    GPTC_CUDA_CHECK_LAUNCH("column_reduce_sum_kernel");
    std::vector<float> cpu(cols);
    for (int64_t c = 0; c < cols; ++c)
      cpu[c] = gptc::reduce_sum<float>(n, [&](int64_t i) { return x[i * cols + c]; });
    bad += compare("column sum", dout.host(), cpu);
    outputs += cols;
  }
  report("column sum", "column_sum", "outputs", outputs, bad);
}

void check_layer_norm(std::mt19937_64& rng) {
  const int64_t shapes[][2] = {{256, 64}, {100, 77}, {16384, 384}};
  const float eps = 1e-5f;
  std::normal_distribution<float> normal(0.3f, 1.5f);
  int64_t bad = 0, rows_checked = 0;
  for (const auto& sh : shapes) {
    const int64_t rows = sh[0], n = sh[1];
    std::vector<float> x(rows * n), g(rows * n), w(n), b(n);
    for (auto* v : {&x, &g, &w, &b})
      for (auto& e : *v) e = normal(rng);
    DeviceArray<float> dx(x), dg(g), dw(w), db(b), dy(rows * n), ddx(rows * n);
    for (const bool affine : {true, false}) {
      dy.poison();
      ddx.poison();
      gptc::cuda::layer_norm_kernel<<<256, 256>>>(rows, n, eps, dx.ptr, affine ? dw.ptr : nullptr,
                                                 affine ? db.ptr : nullptr, dy.ptr);
      GPTC_CUDA_CHECK_LAUNCH("layer_norm_kernel");
      gptc::cuda::layer_norm_grad_kernel<<<256, 256>>>(rows, n, eps, dg.ptr, dx.ptr,
                                                      affine ? dw.ptr : nullptr, ddx.ptr);
      GPTC_CUDA_CHECK_LAUNCH("layer_norm_grad_kernel");
      std::vector<float> y(rows * n), d(rows * n);
#pragma omp parallel for
      for (int64_t r = 0; r < rows; ++r) {
        ref::layer_norm_row(n, eps, x.data() + r * n, affine ? w.data() : nullptr,
                            affine ? b.data() : nullptr, y.data() + r * n);
        ref::layer_norm_grad_row(n, eps, g.data() + r * n, x.data() + r * n,
                                 affine ? w.data() : nullptr, d.data() + r * n);
      }
      bad += compare("layer_norm", dy.host(), y) + compare("layer_norm_grad", ddx.host(), d);
      rows_checked += 2 * rows;
    }
  }
  report("layer_norm and its gradient", "layer_norm", "rows", rows_checked, bad);
}

void check_cross_entropy(std::mt19937_64& rng) {
  const int64_t shapes[][2] = {{256, 65}, {16384, 65}, {64, 50257}};
  const int64_t ignore = -1;
  std::normal_distribution<float> normal(0.0f, 3.0f);
  int64_t bad = 0, rows_checked = 0;
  for (const auto& sh : shapes) {
    const int64_t rows = sh[0], v = sh[1];
    std::vector<float> x(rows * v);
    for (auto& e : x) e = normal(rng);
    std::vector<int64_t> t(rows);
    for (int64_t r = 0; r < rows; ++r) t[r] = r % 11 == 3 ? ignore : (int64_t)(rng() % v);
    const std::vector<float> g = {0.75f};
    DeviceArray<float> dx(x), dloss(1), drow(rows), dg(g), dd(rows * v);
    DeviceArray<int64_t> dt(t), dkept(1);
    DeviceArray<unsigned> derr(std::vector<unsigned>{0});
    dloss.poison();
    dd.poison();
    gptc::cuda::cross_entropy_kept_kernel<<<1, 1024>>>(rows, ignore, dt.ptr, dkept.ptr);
    gptc::cuda::cross_entropy_rows_kernel<<<256, 256>>>(rows, v, ignore, dx.ptr, dt.ptr,
                                                       drow.ptr, derr.ptr);
    gptc::cuda::cross_entropy_total_kernel<<<1, 32>>>(rows, ignore, dt.ptr, drow.ptr, dloss.ptr);
    gptc::cuda::cross_entropy_grad_kernel<<<256, 256>>>(rows, v, ignore, dx.ptr, dt.ptr, dg.ptr,
                                                       dkept.ptr, dd.ptr, derr.ptr);
    GPTC_CUDA_CHECK_LAUNCH("cross_entropy kernels");
    std::vector<float> d(rows * v);
    const float loss = ref::cross_entropy(rows, v, ignore, x.data(), t.data(), g[0], d.data());
    bad += compare("cross_entropy", dloss.host(), {loss}) +
           compare("cross_entropy_grad", dd.host(), d);
    if (derr.host()[0] != 0) {
      std::printf("  MISMATCH cross_entropy: a data error on valid targets\n");
      ++bad, ++g_failures;
    }
    rows_checked += rows;
  }
  // A target out of range: the error word is set, the row's gradient is zeros.
  {
    const std::vector<float> x(4 * 5, 1.0f), g = {1.0f};
    const std::vector<int64_t> t = {0, 7, 2, 3};
    DeviceArray<float> dx(x), drow(4), dg(g), dd(4 * 5);
    DeviceArray<int64_t> dt(t), dkept(1);
    DeviceArray<unsigned> derr(std::vector<unsigned>{0});
    gptc::cuda::cross_entropy_kept_kernel<<<1, 1024>>>(4, ignore, dt.ptr, dkept.ptr);
    gptc::cuda::cross_entropy_grad_kernel<<<1, 128>>>(4, 5, ignore, dx.ptr, dt.ptr, dg.ptr,
                                                     dkept.ptr, dd.ptr, derr.ptr);
    GPTC_CUDA_CHECK_LAUNCH("cross_entropy_grad_kernel");
    const std::vector<float> d = dd.host();
    const bool zeros = std::all_of(d.begin() + 5, d.begin() + 10, [](float e) { return e == 0; });
    if (derr.host()[0] == 0 || !zeros) {
      std::printf("  MISMATCH cross_entropy: a target out of range was not reported\n");
      ++bad, ++g_failures;
    }
  }
  report("cross_entropy and gradient", "cross_entropy", "rows", rows_checked, bad);
}

void check_embedding_grad(std::mt19937_64& rng) {
  const int64_t shapes[][3] = {{256, 65, 64}, {16384, 65, 384}, {16384, 50257, 64}};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int64_t bad = 0, outputs = 0;
  for (const auto& sh : shapes) {
    const int64_t n = sh[0], vocab = sh[1], cols = sh[2];
    for (const bool out_of_range : {false, true}) {
      std::vector<float> g(n * cols);
      for (auto& e : g) e = normal(rng);
      std::vector<int64_t> idx(n);
      for (int64_t p = 0; p < n; ++p) idx[p] = (int64_t)(rng() % vocab);
      if (out_of_range) idx[n / 3] = -1, idx[n / 2] = vocab;
      DeviceArray<float> dg(g), dout(vocab * cols);
      DeviceArray<int64_t> didx(idx);
      DeviceArray<unsigned> derr(std::vector<unsigned>{0});
      DeviceArray<char> scratch(gptc::cuda::embedding_grad_scratch_bytes(n, vocab));
      dout.poison();
      gptc::cuda::embedding_grad(nullptr, n, vocab, cols, dg.ptr, didx.ptr, dout.ptr, scratch.ptr,
                                 derr.ptr);
      GPTC_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<float> cpu(vocab * cols);
      ref::embedding_grad(n, vocab, cols, g.data(), idx.data(), cpu.data());
      bad += compare("embedding_grad", dout.host(), cpu);
      if ((derr.host()[0] != 0) != out_of_range) {
        std::printf("  MISMATCH embedding_grad: ids out of range %s\n",
                    out_of_range ? "not reported" : "reported wrongly");
        ++bad, ++g_failures;
      }
      outputs += vocab * cols;
    }
  }
  report("embedding_grad", "embedding_grad", "outputs", outputs, bad);
}

struct AttentionCase {
  const char* name;
  int64_t B, H, T, S, D, Dv;
  bool causal, bthd, dropout;
};

void check_attention(std::mt19937_64& rng, bool quick) {
  std::vector<AttentionCase> cases = {
      {"tiny, causal", 8, 2, 32, 32, 32, 32, true, false, false},
      {"odd, not causal, bthd", 2, 3, 37, 50, 20, 70, false, true, false},
      {"tiny, causal, dropout", 8, 2, 64, 64, 32, 32, true, true, true},
  };
  // shakespeare_char's heads at batch 8 (the host reference of the gradient runs serially).
  if (!quick) cases.push_back({"shakespeare, causal", 8, 6, 256, 256, 64, 64, true, true, true});
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int64_t bad = 0, rows_checked = 0;
  for (const AttentionCase& c : cases) {
    const int64_t nq = c.B * c.H * c.T * c.D, nk = c.B * c.H * c.S * c.D,
                  nv = c.B * c.H * c.S * c.Dv, ny = c.B * c.H * c.T * c.Dv;
    std::vector<float> q(nq), k(nk), v(nv);
    for (auto* x : {&q, &k, &v})
      for (auto& e : *x) e = normal(rng);
    const std::vector<int64_t> words = {987654321, 17};
    DeviceArray<float> dq(q), dk(k), dv(v), dy(ny), dstats(c.B * c.H * c.T * 2);
    DeviceArray<int64_t> drng(words);
    const gptc::cuda::AttentionArgs a =
        ref::attention_args(c.B, c.H, c.T, c.S, c.D, c.Dv, c.causal, c.bthd, c.dropout);
    gptc::cuda::AttentionArgs dev = a;
    dev.q = dq.ptr, dev.k = dk.ptr, dev.v = dv.ptr, dev.y = dy.ptr, dev.stats = dstats.ptr;
    dev.rng = c.dropout ? drng.ptr : nullptr;
    dy.poison();
    dstats.poison();
    gptc::cuda::attention(nullptr, dev);
    GPTC_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> y(ny), stats(c.B * c.H * c.T * 2);
    gptc::cuda::AttentionArgs host = a;
    host.q = q.data(), host.k = k.data(), host.v = v.data();
    host.rng = c.dropout ? words.data() : nullptr;
    const int64_t rows = c.B * c.H * c.T;
    ref::attention(host, y.data(), stats.data());
    bad += compare(c.name, dy.host(), y) + compare(c.name, dstats.host(), stats);
    rows_checked += rows;

    // The gradient from the forward's stats and a random output gradient (laid out as y).
    std::vector<float> g(ny);
    for (auto& e : g) e = normal(rng);
    DeviceArray<float> dgr(g), ddq(nq), ddk(nk), ddv(nv),
        dscratch(gptc::cuda::attention_grad_scratch_floats(a));
    ddq.poison(), ddk.poison(), ddv.poison();
    gptc::cuda::attention_grad(nullptr, {dev, dgr.ptr, ddq.ptr, ddk.ptr, ddv.ptr, dscratch.ptr});
    GPTC_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> wq(nq), wk(nk), wv(nv);
    ref::attention_grad(host, g.data(), stats.data(), wq.data(), wk.data(), wv.data());
    bad += compare(c.name, ddq.host(), wq) + compare(c.name, ddk.host(), wk) +
           compare(c.name, ddv.host(), wv);
  }
  report("attention and gradient", "attention", "rows", rows_checked, bad);
}

struct MatmulCase {
  const char* name;
  MatmulShape s;
  bool epilogue = false;  // bias + dropout + residual add
  bool underflow = false;  // products that underflow to -0 (the K tail's sign)
  bool timed = false;
};

// Row-major operands with the given contiguous dimensions; strides for a batch of them.
MatmulShape shape(int64_t batch, int64_t M, int64_t N, int64_t K, bool a_k_contig,
                  bool b_n_contig) {
  MatmulShape s{batch, M, N, K, M * K, a_k_contig ? K : 1, a_k_contig ? 1 : M,
                K * N, b_n_contig ? N : 1, b_n_contig ? 1 : K};
  return s;
}

double median_ms(std::vector<float> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <class F>
double time_ms(F run, int reps = 50) {
  cudaEvent_t a, b;
  GPTC_CUDA_CHECK(cudaEventCreate(&a));
  GPTC_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) run();
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    GPTC_CUDA_CHECK(cudaEventRecord(a));
    run();
    GPTC_CUDA_CHECK(cudaEventRecord(b));
    GPTC_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    GPTC_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median_ms(t);
}

// One tile of gptc's matmul on the default stream, checked.
template <int RM, int RN, gptc::cuda::detail::Loads L = gptc::cuda::detail::Loads::Best>
void launch_tile(const MatmulShape& s, const float* A, const float* B, float* C,
                 const gptc::MatmulEpilogue<float>& ep) {
  gptc::cuda::detail::launch_matmul<RM, RN, L>(nullptr, s, A, B, C, ep);
  GPTC_CUDA_CHECK_LAUNCH("gptc::cuda::detail::launch_matmul");
}

void check_matmul(const MatmulCase& c, std::mt19937_64& rng, cublasHandle_t blas) {
  const MatmulShape& s = c.s;
  const int64_t a_n = s.batch * s.M * s.K, b_n = s.batch * s.K * s.N, c_n = s.batch * s.M * s.N;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> A(a_n), B(b_n), addend(c_n), bias(s.N);
  for (auto& v : A) v = c.underflow ? 1e-30f : normal(rng);
  for (auto& v : B) v = c.underflow ? -1e-30f : normal(rng);
  for (auto& v : addend) v = normal(rng);
  for (auto& v : bias) v = normal(rng);
  const std::vector<int64_t> rng_words = {20261204, 3};
  DeviceArray<float> dA(A), dB(B), dC(c_n), dAdd(addend), dBias(bias);
  DeviceArray<int64_t> dRng(rng_words);
  gptc::MatmulEpilogue<float> dev_ep, host_ep;
  if (c.epilogue) {
    dev_ep.addend = dAdd.ptr;
    dev_ep.bias = dBias.ptr;
    dev_ep.rng = dRng.ptr;
    dev_ep.dropout_id = 5;
    dev_ep.dropout_p = 0.1f;
    dev_ep.dropout_scale = 1.0f / 0.9f;
    host_ep = dev_ep;
    host_ep.addend = addend.data();
    host_ep.bias = bias.data();
    host_ep.rng = rng_words.data();
  }
  dC.poison();
  gptc::cuda::matmul(nullptr, s, dA.ptr, dB.ptr, dC.ptr, dev_ep);
  GPTC_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> C = dC.host();

  // The CPU's bits: every element of a small product, 20,000 random ones of a large one.
  std::vector<int64_t> where;
  if (c_n <= (1 << 20)) {
    for (int64_t i = 0; i < c_n; ++i) where.push_back(i);
  } else {
    std::uniform_int_distribution<int64_t> pick(0, c_n - 1);
    for (int i = 0; i < 20000; ++i) where.push_back(pick(rng));
  }
  std::vector<float> gpu(where.size()), cpu(where.size());
#pragma omp parallel for
  for (int64_t w = 0; w < (int64_t)where.size(); ++w) {
    const int64_t i = where[w];
    cpu[w] = ref::matmul_element(i, s.M, s.N, s.K, A.data(), s.sab, s.sam, s.sak, B.data(),
                                 s.sbb, s.sbk, s.sbn, host_ep);
    gpu[w] = C[i];
  }
  int64_t bad = compare(c.name, gpu, cpu, &where);
  // Every tile gives the same bits, whichever the shape picks.
  auto tile_bits = [&](auto launch, const char* tile) {
    dC.poison();
    launch();
    GPTC_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> T = dC.host();
    for (size_t w = 0; w < where.size(); ++w) gpu[w] = T[where[w]];
    bad += compare((std::string(c.name) + ", tile " + tile).c_str(), gpu, cpu, &where);
  };
  tile_bits([&] { launch_tile<8, 8>(s, dA.ptr, dB.ptr, dC.ptr, dev_ep); }, "128");
  tile_bits([&] { launch_tile<8, 4>(s, dA.ptr, dB.ptr, dC.ptr, dev_ep); }, "128x64");
  tile_bits([&] { launch_tile<4, 4>(s, dA.ptr, dB.ptr, dC.ptr, dev_ep); }, "64");
  // Where the layout takes asynchronous copies, the register-staged loads too.
  using gptc::cuda::detail::Loads;
  const bool async = gptc::cuda::detail::takes_async_copies(s, dA.ptr, dB.ptr);
  if (async) {
    tile_bits([&] { launch_tile<8, 8, Loads::Staged>(s, dA.ptr, dB.ptr, dC.ptr, dev_ep); },
              "128, staged loads");
    tile_bits([&] { launch_tile<4, 4, Loads::Staged>(s, dA.ptr, dB.ptr, dC.ptr, dev_ep); },
              "64, staged loads");
  }
  char line[512];
  std::snprintf(line, sizeof line, "matmul %-21s %10zu outputs  %s", c.name, where.size(),
                bad ? "DIFFERENT" : "same bits");
  std::string entry = "{\"family\": \"matmul\", \"case\": \"" + std::string(c.name) +
                      "\", \"batch\": " + std::to_string(s.batch) + ", \"M\": " +
                      std::to_string(s.M) + ", \"N\": " + std::to_string(s.N) +
                      ", \"K\": " + std::to_string(s.K) + ", \"checked\": " +
                      std::to_string(where.size()) + ", \"mismatches\": " + std::to_string(bad);
  if (c.timed) {
    const double flop = 2.0 * s.batch * s.M * s.N * s.K;
    const double ms = time_ms([&] { gptc::cuda::matmul(nullptr, s, dA.ptr, dB.ptr, dC.ptr); });
    // cuBLAS, column-major: C^T[N, M] = B^T[N, K] * A^T[K, M] with the same layouts.
    const float one = 1.0f, zero = 0.0f;
    const bool ak = s.sak == 1, bn = s.sbn == 1;
    const double blas_ms = time_ms([&] {
      cublasStatus_t st = cublasSgemm(
          blas, bn ? CUBLAS_OP_N : CUBLAS_OP_T, ak ? CUBLAS_OP_N : CUBLAS_OP_T, (int)s.N,
          (int)s.M, (int)s.K, &one, dB.ptr, bn ? (int)s.N : (int)s.K, dA.ptr,
          ak ? (int)s.K : (int)s.M, &zero, dC.ptr, (int)s.N);
      if (st != CUBLAS_STATUS_SUCCESS) {
        std::fprintf(stderr, "gptc: error: cublasSgemm: status %d\n", (int)st);
        std::exit(1);
      }
    });
    // Each tile on its own too (gptc::cuda::matmul picks 128 x 128 or 64 x 64 by the
    // shape; 128 x 64 is a candidate): the data for that choice.
    const double t128 = time_ms([&] { launch_tile<8, 8>(s, dA.ptr, dB.ptr, dC.ptr, {}); });
    const double t128x64 = time_ms([&] { launch_tile<8, 4>(s, dA.ptr, dB.ptr, dC.ptr, {}); });
    const double t64 = time_ms([&] { launch_tile<4, 4>(s, dA.ptr, dB.ptr, dC.ptr, {}); });
    // And the register-staged loads where the tiles above took asynchronous copies.
    const double t128s =
        async ? time_ms([&] { launch_tile<8, 8, Loads::Staged>(s, dA.ptr, dB.ptr, dC.ptr, {}); })
              : t128;
    const double t64s =
        async ? time_ms([&] { launch_tile<4, 4, Loads::Staged>(s, dA.ptr, dB.ptr, dC.ptr, {}); })
              : t64;
    std::snprintf(line + std::strlen(line), sizeof line - std::strlen(line),
                  "   %.3f ms %.1f TFLOP/s (cuBLAS %.3f ms %.1f; tiles 128: %.1f, 128x64: %.1f, "
                  "64: %.1f%s)",
                  ms, flop / ms / 1e9, blas_ms, flop / blas_ms / 1e9, flop / t128 / 1e9,
                  flop / t128x64 / 1e9, flop / t64 / 1e9, async ? ", async copies" : "");
    if (async)
      std::snprintf(line + std::strlen(line), sizeof line - std::strlen(line),
                    " (staged loads: 128: %.1f, 64: %.1f)", flop / t128s / 1e9, flop / t64s / 1e9);
    entry += ", \"ms\": " + std::to_string(ms) + ", \"tflops\": " +
             std::to_string(flop / ms / 1e9) + ", \"cublas_ms\": " + std::to_string(blas_ms) +
             ", \"cublas_tflops\": " + std::to_string(flop / blas_ms / 1e9) +
             ", \"tile128_tflops\": " + std::to_string(flop / t128 / 1e9) +
             ", \"tile128x64_tflops\": " + std::to_string(flop / t128x64 / 1e9) +
             ", \"tile64_tflops\": " + std::to_string(flop / t64 / 1e9) +
             ", \"async_copies\": " + (async ? "true" : "false") +
             ", \"tile128_staged_tflops\": " + std::to_string(flop / t128s / 1e9) +
             ", \"tile64_staged_tflops\": " + std::to_string(flop / t64s / 1e9);
  }
  std::printf("%s\n", line);
  record(entry + "}");
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  const char* json_path = nullptr;
  const char* only = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else json_path = argv[i];
  }
  // No GPU: one line, and the exit status ctest reads as "skipped".
  int count = 0;
  const cudaError_t found = cudaGetDeviceCount(&count);
  if (found != cudaSuccess || count == 0) {
    std::printf("skipped: %s\n",
                gptc::cuda::describe(found == cudaSuccess ? cudaErrorNoDevice : found,
                                     "cudaGetDeviceCount")
                    .c_str());
    return 77;
  }
  int device = 0;
  GPTC_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop;
  GPTC_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf("%s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount);
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "gptc: error: cublasCreate failed\n");
    return 1;
  }
  cublasSetMathMode(blas, CUBLAS_PEDANTIC_MATH);  // fp32 throughout: no TF32

  std::mt19937_64 rng(42);
  if (!only) {
    check_math(quick ? (1 << 16) : (1 << 22), rng);
    check_dropout(quick ? (1 << 16) : (1 << 22));
    check_reductions(rng);
    check_column_sums(rng);
    check_layer_norm(rng);
    check_cross_entropy(rng);
    check_embedding_grad(rng);
    check_attention(rng, quick);
  }

  // Test GPT (B 8, T 64, C 64, vocab 65) and shakespeare_char (B 64, T 256, C 384).
  std::vector<MatmulCase> cases = {
      {"odd, all layouts TT", shape(3, 100, 77, 33, true, true)},
      {"odd, all layouts TF", shape(3, 100, 77, 33, true, false)},
      {"odd, all layouts FT", shape(3, 100, 77, 33, false, true)},
      {"odd, all layouts FF", shape(3, 100, 77, 33, false, false)},
      {"odd, epilogue", shape(2, 130, 129, 47, true, false), true},
      {"K tail underflow", shape(1, 64, 64, 33, true, true), false, true},
      {"tiny qkv", shape(1, 512, 192, 64, true, false)},
      {"tiny lm_head", shape(1, 512, 65, 64, true, false)},
      {"tiny dW", shape(1, 64, 192, 512, false, true)},
      // Rows contiguous and aligned (asynchronous copies) with a batch, a K tail, epilogue.
      {"odd dW, rows contiguous", shape(2, 100, 76, 37, false, true), true},
      {"K tail underflow, dW", shape(1, 64, 64, 33, false, true), false, true},
  };
  if (!quick) {
    const int64_t bt = 64 * 256, c = 384;
    const MatmulCase big[] = {
        {"shakespeare qkv", shape(1, bt, 3 * c, c, true, false), false, false, true},
        {"shakespeare proj", shape(1, bt, c, c, true, false), true, false, true},
        {"shakespeare fc", shape(1, bt, 4 * c, c, true, false), false, false, true},
        {"shakespeare fc2", shape(1, bt, c, 4 * c, true, false), false, false, true},
        {"shakespeare lm_head", shape(1, bt, 65, c, true, false), false, false, true},
        {"shakespeare dx fc", shape(1, bt, c, 4 * c, true, true), false, false, true},
        {"shakespeare dW fc", shape(1, 4 * c, c, bt, false, true), false, false, true},
    };
    cases.insert(cases.end(), std::begin(big), std::end(big));
  }
  for (const MatmulCase& c : cases)
    if (!only || std::strstr(c.name, only)) check_matmul(c, rng, blas);
  cublasDestroy(blas);

  std::printf("%s\n", g_failures ? "FAILED: the GPU's bits differ from the CPU's"
                                 : "all families: the GPU gives the CPU's bits");
  if (json_path) {
    FILE* f = std::fopen(json_path, "w");
    if (!f) {
      std::fprintf(stderr, "gptc: error: cannot write %s\n", json_path);
      return 1;
    }
    std::fprintf(f, "{\"device\": \"%s\", \"sm\": %d, \"failures\": %d, \"results\": [\n  %s\n]}\n",
                 prop.name, prop.major * 10 + prop.minor, g_failures, g_json.c_str());
    std::fclose(f);
  }
  return g_failures ? 1 : 0;
}
