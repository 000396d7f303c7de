//===- Codegen.h - kernel-level gpt IR -> C++ source and an artifact ------===//
//
// Input: a func.func in the gpt dialect after gpt-plan-memory (every op with
// storage carries gpt.offsets). Output: the source of one C++ file with one
// kernel per op and an entry function (docs/artifact.md), and the artifact
// folder around it.
//
// One emitter, a flavour per target: a kernel body is written once, as a loop over its
// independent outputs (GPTC_FOR on the CPU, a CUDA grid-stride loop, GPTC_CUDA_FOR,
// on the GPU); the flavour decides how a kernel is declared and launched, and the ops
// with a kernel family of their own on the GPU (matmul, layer_norm, attention,
// cross_entropy) call it there (docs/architecture.md, "Targets").
//
//===----------------------------------------------------------------------===//
#ifndef GPTC_CODEGEN_CODEGEN_H
#define GPTC_CODEGEN_CODEGEN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace mlir::gpt {

/// What kernels.so runs on. CudaEmulated is the CUDA source built by the host compiler
/// over gptc/cuda/emulate.hpp and run on the CPU: the GPU's code path, checked where there
/// is no GPU (docs/architecture.md, "Targets").
enum class Target { Cpu, Cuda, CudaEmulated };

/// "cpu", "cuda", "cuda-emulated": the manifest's and `gptc compile --target`'s names.
StringRef targetName(Target target);

struct EmittedSource {
  std::string code;
  int64_t numKernels = 0;
  int64_t arenaBytes = 0;
  Target target = Target::Cpu;
};

/// Emits the kernels and the entry of `fn`; emits a located error and fails on
/// an op the code generator cannot lower.
FailureOr<EmittedSource> emitSource(func::FuncOp fn, Target target);

/// Writes manifest.json, kernels.cpp (kernels.cu for the CUDA targets) and kernels.so
/// into `outDir` (created if needed) and copies `weightsPath` (if not empty) to weights.safetensors. A function
/// planned with redzones (gpt.redzone) is built with the sanitizers.
/// `runtimeInclude` is the folder holding gptc/prelude.h. On failure returns
/// a one-line message.
LogicalResult writeArtifact(func::FuncOp fn, const EmittedSource &src, StringRef outDir,
                            StringRef weightsPath, StringRef runtimeInclude,
                            std::string &error);

/// The host C++ compiler's flags for kernels.so (no fast-math, no FMA contraction: the
/// determinism contract; the target from $GPTC_MARCH, else -march=native; with
/// $GPTC_EMULATE_AVX512=1, the prelude's AVX-512 forms emulated, for tests), without the
/// include folder, the source and the output. `gptc cxxflags` prints them for the bench
/// tools that build the prelude themselves. `sanitize` (gptc compile --sanitize) adds
/// AddressSanitizer and UndefinedBehaviorSanitizer.
std::vector<std::string> hostCompilerFlags(bool sanitize = false);

/// `gptc compile --stats`: one line per kernel (op, FLOPs, bytes moved, source line)
/// and the totals (kernels per call, arena peak, persistent bytes).
void printStats(func::FuncOp fn, raw_ostream &os);

} // namespace mlir::gpt

#endif
