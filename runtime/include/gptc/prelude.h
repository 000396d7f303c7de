// gptc/prelude.h — the hand-written header every generated kernel file includes.
//
// It holds everything the generated kernels.cpp (and later kernels.cu) may call that is part
// of gptc's numerics contract (docs/artifact.md, docs/design.md, the determinism
// contract):
//   * GPTC_FOR(i, n)            a loop of int64_t i over [0, n)
//   * GPTC_FOR_SIMD(i, n)       the same, also vectorised (elementwise loops)
//   * exp/log/tanh/erf/sin/cos  gptc's own elementary functions, float and double, written
//                               with plain IEEE arithmetic only, so that one source gives the
//                               same bits on the CPU (-ffp-contract=off) and on CUDA
//                               (nvcc -fmad=false)
//   * sqrt/rsqrt/abs/pow/       built on the above (sqrt and abs are IEEE on both targets)
//     sigmoid/gelu_*
//   * reduce_sum/reduce_max     the canonical 32-partial + butterfly reduction order
//   * dot_seq                   the canonical matmul order: sequential explicit fma
//   * bf16                      storage type with round-to-nearest-even conversion
//
// It is split by family into gptc/prelude/*.h (included below, in order). Rules for the
// portable ones (math, reduce, bf16, rng, matmul's epilogue): header-only C++17, valid CUDA
// (every function GPTC_HD), no std:: containers. gptc/prelude/cpu/ holds the CPU's vector
// forms, scratch buffers, error slot and the machine's caches (host only).

#ifndef GPTC_PRELUDE_H
#define GPTC_PRELUDE_H

// The families, in the order each builds on the ones before. The portable ones (math,
// reduce, bf16, rng, and matmul's epilogue and reference path) are valid host and device
// code (test/cuda/portable_prelude.cu fails to build when they are not); cpu/ is host only.
#include "gptc/prelude/base.h"
#include "gptc/prelude/math.h"
#include "gptc/prelude/cpu/errors.h"
#include "gptc/prelude/reduce.h"
#include "gptc/prelude/bf16.h"
#include "gptc/prelude/cpu/math_arrays.h"
#include "gptc/prelude/rng.h"
#include "gptc/prelude/cpu/scratch.h"
#include "gptc/prelude/cpu/machine.h"
#include "gptc/prelude/cpu/vector.h"
#include "gptc/prelude/cpu/attention.h"
#include "gptc/prelude/matmul.h"

#endif  // GPTC_PRELUDE_H
