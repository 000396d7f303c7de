//===- CudaFlavour.h - kernels.cu for an NVIDIA GPU (private to codegen/) --===//
//
// The CUDA flavour (Target::Cuda and CudaEmulated): a kernel is the shared body as a
// __device__ function over GPTC_CUDA_FOR, a grid-stride loop (or GPTC_CUDA_FOR_WARPS, a
// warp an output, for sums), run by a __global__ kernel that a host function of the
// kernel's name launches; a group's members share such launches, each on a range of its
// blocks; or, for the ops with a CUDA kernel family, a host function that launches the
// family (Families.cpp).
// Constants are __device__ arrays; errors found on the device set one word whose codes the
// file's table turns into lines; the entry checks the caller's ids on the device and runs
// the kernels as one CUDA graph (gptc/cuda/generated.cuh).
//
//===----------------------------------------------------------------------===//
#ifndef GPTC_CODEGEN_CUDA_CUDAFLAVOUR_H
#define GPTC_CODEGEN_CUDA_CUDAFLAVOUR_H

#include "codegen/Emitter.h"

namespace mlir::gpt::emit {

class CudaFlavour : public Flavour {
public:
  using Flavour::Flavour;

  std::string loop(StringRef var, int64_t n, bool simd) override;
  Sums sums() const override { return Sums::Warp; }
  SumGroup sumGroup(StringRef var, int64_t outN, int64_t redN, bool columns) override;
  bool arrayForms() const override { return false; }
  // Enough (column, rows) iterations to fill the GPU (a table's columns alone are a few
  // hundred threads, each reading every position): about 64K threads, at most a row each.
  int64_t embeddingRowBlocks(int64_t v, int64_t c) const override {
    return std::min<int64_t>(v, (65536 + c - 1) / c);
  }
  void openDropout(raw_ostream &os, int64_t n,
                   ArrayRef<std::pair<DropoutOp, std::string>> drops) override;
  void closeDropout(raw_ostream &os) override;
  std::string reportError(StringRef message) override;

  LogicalResult function(const std::string &name, Operation *op, raw_ostream &os) override;
  bool parallelRegions() const override { return false; }
  LogicalResult group(HorizontalOp op, const std::string &name, ArrayRef<GroupMember> members,
                      const DenseMap<Value, std::string> &names, raw_ostream &os) override;
  std::string call(const std::string &name, StringRef args, Operation *op) override;

  std::string constant(ConstantOp c, const std::string &name) override;
  std::string resultCopy(StringRef dst, StringRef src, int64_t n, StringRef type) override;
  int64_t arenaBytes(int64_t planned) override;
  void file(raw_ostream &os, StringRef kernels, StringRef calls, ArrayRef<IdCheck> ids,
            int64_t arenaBytes) override;

private:
  /// A kernel body on its own or on a range of a launch's blocks: its __device__ function,
  /// the threads its longest loop needs, whether its threads exchange values (sums), and
  /// its arguments (the launch's parameter names).
  struct Segment {
    std::string body;
    int64_t extent;
    bool exchange;
    SmallVector<std::string> args;
  };
  FailureOr<Segment> segment(const std::string &name, Operation *op, raw_ostream &os);
  std::string launch(const std::string &kernel, ArrayRef<Segment> segments, StringRef params,
                     raw_ostream &os);
  /// Whether the op calls a kernel family (Families.cpp) rather than a body of its own.
  static bool isFamily(Operation *op);
  /// The message's code: its 1-based index in the file's gptc_errors table.
  unsigned errorCode(StringRef message);
  /// Families.cpp: the call of the op's kernel family, as a host function's body.
  LogicalResult familyCall(Operation *op, raw_ostream &os);
  LogicalResult familyCallOf(Operation *op, raw_ostream &os);
  /// Families.cpp: whether the op's family uses the step's scratch.
  static bool usesScratch(Operation *op);
  /// Reserves `bytes` of the step's scratch for one family call (every call's starts at
  /// the scratch's start: the calls run in turn, on one branch of a group).
  void needScratch(int64_t bytes) {
    scratchBytes = std::max(scratchBytes, bytes);
    scratchTaken = true;
  }
  std::string crossEntropyBad(Value targets, int64_t at);
  std::string crossEntropyReport(Value targets);
  std::string idChecks(ArrayRef<IdCheck> ids);
  /// The buffers a captured step's kernels read and write: the arguments, the results and
  /// the arena (the graph replays only while they stay where they were).
  std::string bufferList();

  // The kernel being written.
  int64_t gridExtent = 0;  // the threads it needs
  bool warpKernel = false; // its threads exchange values (sumGroup): launched as whole blocks
  // The file.
  std::vector<std::string> errorMessages;
  int64_t scratchBytes = 0, scratchAt = 0;  // the families' scratch, and where in the arena
  bool scratchTaken = false;                // by the family call being written
  std::string constants, constantAddresses, constantSetup;
};

} // namespace mlir::gpt::emit

#endif
