//===- Emitter.h - the C++ emitter's shared pieces (private to codegen/) ---===//
//
// EmitCpp.cpp holds the emitter's driver and the generic kernels (elementwise,
// fused, data movement, matmul, reductions); EmitModelKernels.cpp the model
// kernels (layer_norm, softmax, attention, cross-entropy and their gradients).
//
//===----------------------------------------------------------------------===//
#ifndef GPTC_CODEGEN_EMITTER_H
#define GPTC_CODEGEN_EMITTER_H

#include "codegen/Codegen.h"

#include "ir/GptDialect.h"
#include "ir/GptScalar.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace mlir::gpt::emit {

/// The tensor type of a value.
RankedTensorType ttype(Value v);
SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape);
/// " (model.py:42)" for a file location, "" otherwise.
std::string describeLoc(Location loc);

/// An affine access: offset = base + sum_d index_d * strides[d].
struct Access {
  std::string buf;
  int64_t base = 0;
  SmallVector<int64_t> strides; // one per dim of the loop shape
};

/// Strides of an operand of shape `from` seen through numpy broadcasting to `to`.
SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> from, ArrayRef<int64_t> to);

/// Emits, inside a loop over linear index `i` of `shape`, the decoding of each access's
/// offset, and returns the offset expression per access.
SmallVector<std::string> emitOffsets(raw_ostream &os, ArrayRef<int64_t> shape,
                                     ArrayRef<Access> accesses, StringRef indent);

/// `$j` in `expr` replaced by names[j].
std::string substitute(std::string expr, ArrayRef<std::string> names);

/// What attention and its gradient kernels need to know of their shapes.
struct AttentionShape {
  std::string elem, scale;
  int64_t H, T, D, S, Dv;
  bool bthd; // operands laid out [B, T, H, D] rather than [B, H, T, D]
  bool causal, dropout;
  int64_t id;
  std::string dropP, dropScale;
  int64_t rngOperand; // index of the rng operand (in<rngOperand>)

  /// The distance between rows of q, k, v and of the gradient's dq, dk, dv: rowStride's,
  /// or wider where one is a view into the fused projection's buffer or the concat of the
  /// gradients (gpt-plan-memory's views, [B, T, H, D] only).
  int64_t qPitch, kPitch, vPitch, dqPitch, dkPitch, dvPitch;

  int64_t Sp() const { return (S + 31) / 32 * 32; } // keys padded to whole blocks
  /// Whether the kernel also carries the lane-block form (gptc::attention_rows and
  /// attention_grad_rows: 16 or 8 query rows at a time, each a lane), which AVX-512 and AVX2
  /// builds take: float only; other builds, and f64, the rows in blocks of 4. The same
  /// arithmetic in the same order.
  bool laneRows() const { return elem == "float"; }
  /// Where head `bh` (= b*H + h) of a tensor with `rows` rows of `width` starts, in either
  /// layout, its rows `pitch` apart (bthd; default: rowStride(width)).
  std::string headBase(int64_t rows, int64_t width, int64_t pitch = 0) const {
    if (!bthd)
      return "bh * " + std::to_string(rows * width);
    return "(bh / " + std::to_string(H) + ") * " +
           std::to_string(rows * (pitch ? pitch : rowStride(width))) + " + (bh % " +
           std::to_string(H) + ") * " + std::to_string(width);
  }
  /// The distance between rows of a tensor of its own of `width` columns.
  int64_t rowStride(int64_t width) const { return bthd ? H * width : width; }
  std::string keys() const {
    if (!causal)
      return std::to_string(S);
    return "(t + 1 < " + std::to_string(S) + " ? t + 1 : " + std::to_string(S) + ")";
  }
  /// Loads the [seed, step] pair the dropout draws are keyed by.
  std::string rngPrologue() const {
    if (!dropout)
      return "";
    return "  const uint64_t seed = (uint64_t)in" + std::to_string(rngOperand) +
           "[0], step = (uint64_t)in" + std::to_string(rngOperand) + "[1];\n";
  }
  /// out[j] = 1/(1-p) if element `first` + j of this op's dropout is kept, else 0, for
  /// j < n: the masks drawn 8 at a time (gptc::dropout_factors).
  std::string keepFactors(const std::string &first, const std::string &n,
                          const std::string &out) const {
    return "gptc::dropout_factors<" + elem + ">(seed, step, " + std::to_string(id) +
           ", (uint64_t)(" + first + "), " + n + ", " + dropP + ", " + dropScale + ", " + out +
           ");";
  }
};

/// A matmul's sizes and element strides: out[b, m, n] = sum_k lhs[b, m, k] * rhs[(b,) k, n]
/// with lhs's (batch, row, k) strides aBatch, aRow, aK and rhs's (batch, k, col) ones.
struct MatmulDims {
  int64_t batch, M, N, K;
  int64_t aBatch, aRow, aK, bBatch, bK, bCol;
};
MatmulDims matmulDims(MatmulOp op);

/// `grads`: attention_grad's dq, dk, dv (none for the forward).
AttentionShape attentionShape(Value q, Value k, Value v, bool causal, double scale, double p,
                              int64_t id, int64_t rngOperand, bool bthd,
                              ValueRange grads = {});

/// Writes one kernel per top-level op of a planned function, and the entry.
class Emitter {
public:
  Emitter(func::FuncOp fn, Target target) : fn(fn), target(target) {}
  FailureOr<EmittedSource> run();

private:
  bool cuda() const { return target != Target::Cpu; }
  /// The statement that reports `message` from a kernel: the CPU's error slot, or on
  /// CUDA the device's error word with the message's code (errorCode).
  std::string reportError(StringRef message);
  /// CUDA: the message's code, its 1-based index in the generated gptc_errors table.
  unsigned errorCode(StringRef message);
  /// The CUDA flavour: the call of the op's kernel family, as a host function's body;
  /// failure() for an op the family does not cover.
  LogicalResult emitCudaFamily(Operation *op, raw_ostream &os);
  std::string crossEntropyKept(int64_t n, int64_t ignore);
  std::string crossEntropyBad();
  std::string redzoneGuard(int64_t arenaBytes);
  void writeCudaSource(raw_ostream &os, StringRef kernels, StringRef calls);
  std::string bufferList();
  std::string inputIndexChecks();
  // Kernel bodies. Each writes a complete `static void kN(...) {...}` given
  // parameter names in0.. (operands) and out0.. (results).
  LogicalResult emitKernel(Operation *op, raw_ostream &os);
  LogicalResult emitElementwise(Operation *op, StringRef expr, raw_ostream &os);
  std::optional<std::string> scalarExpr(Operation *op);
  /// An elementwise kernel's loop over `n` elements with training dropouts (each with
  /// the name of its [seed, step] pointer): blocks of 256 elements, each block's masks
  /// drawn first, 8 at a time (gptc::dropout_keep_block), then a vectorisable loop over
  /// the block's elements `i` in which the dropouts read their masks. The caller prints
  /// the loop's body, indented by six, then closes it.
  void openDropoutBlocks(raw_ostream &os, int64_t n,
                         ArrayRef<std::pair<DropoutOp, std::string>> drops);
  void closeDropoutBlocks(raw_ostream &os);
  DenseMap<Operation *, std::string> dropoutMasks; // a dropout's mask array, in a block loop
  LogicalResult emitFused(FusedOp op, raw_ostream &os);
  LogicalResult emitFusedReduce(FusedOp op, ReduceSumOp red, raw_ostream &os);
  FailureOr<DenseMap<Value, std::string>>
  emitFusedBody(FusedOp op, ArrayRef<int64_t> shape, raw_ostream &os, StringRef indent,
                FusedOp::Phase phase = FusedOp::Phase::Prologue,
                DenseMap<Value, std::string> names = DenseMap<Value, std::string>(),
                StringRef argPrefix = "a", StringRef valPrefix = "v");
  void emitCopyLoop(raw_ostream &os, ArrayRef<int64_t> shape, const Access &dst,
                    const Access &src);
  LogicalResult emitMatmul(MatmulOp op, raw_ostream &os);
  LogicalResult emitLayerNorm(LayerNormOp op, raw_ostream &os);
  LogicalResult emitSoftmax(Operation *op, int64_t dim, bool log, raw_ostream &os);
  LogicalResult emitAttention(AttentionOp op, raw_ostream &os);
  LogicalResult emitCrossEntropy(CrossEntropyOp op, raw_ostream &os);
  LogicalResult emitReduce(Operation *op, ArrayRef<int64_t> dims, StringRef kind,
                           raw_ostream &os);
  LogicalResult emitLayerNormGrad(LayerNormGradOp op, raw_ostream &os);
  LogicalResult emitAttentionGrad(AttentionGradOp op, raw_ostream &os);
  void emitPieceCopy(raw_ostream &os, Type whole, int64_t dim, TypeRange pieceTypes,
                     StringRef wholeName, ArrayRef<std::string> pieceNames, bool toPieces);
  LogicalResult emitCrossEntropyGrad(CrossEntropyGradOp op, raw_ostream &os);
  LogicalResult emitEmbeddingGrad(EmbeddingGradOp op, raw_ostream &os);
  /// The forward's online-softmax pass over the keys of a block of query rows (the
  /// gradient reads the max and sum it leaves from the forward's `stats`).
  void emitOnlineBlock(raw_ostream &os, const AttentionShape &a);

  /// The head of a kernel's parallel loop of `n` iterations over `var`: GPTC_FOR alone,
  /// GPTC_FOR_WS(_DYNAMIC) inside a gpt.horizontal's parallel region.
  /// With `simd`, the loop is also vectorised (elementwise loops: each iteration alone).
  std::string loop(StringRef var, int64_t n, bool simd = false) const;
  /// CUDA: a loop of `n` iterations over `var` that gives each one a whole warp (its
  /// reductions through gptc::cuda::warp_sum / warp_max, the canonical order).
  std::string warpLoop(StringRef var, int64_t n) const;
  /// A reduction's loop over its `outN` outputs `i` and its opening brace; with
  /// `blocksOf16`, over blocks of 16 outputs (gptc::reduce_sum16), `i` each block's first.
  std::string outputLoop(int64_t outN, bool blocksOf16) const;
  /// `static void name(const T* in0.., T* out0..)`.
  std::string signature(const std::string &name, ValueRange ins, ValueRange outs);
  /// `static void name(in0.., out0..) {body}` for `op` (a kernel or a horizontal member).
  LogicalResult emitFunction(const std::string &name, Operation *op, raw_ostream &os);
  LogicalResult emitHorizontal(HorizontalOp op, const std::string &name, raw_ostream &os);

  std::string elemType(Value v) { return *cType(ttype(v).getElementType()); }
  /// The C pointer expression through which the entry reaches `v`.
  std::string pointerOf(Value v);

  func::FuncOp fn;
  Target target;
  bool familyCall = false;       // CUDA: the kernel being written is a host function
  mutable int64_t gridExtent = 0; // CUDA: the threads the kernel being written needs
  mutable bool warpKernel = false; // CUDA: it runs a warp an output (warpLoop)
  std::vector<std::string> errorMessages; // CUDA: the device error codes' lines
  bool inRegion = false; // emitting a member of a gpt.horizontal
  bool aliasing = false; // emitting a kernel that writes an argument in place
  DenseMap<Value, std::string> pointers; // for args, constants and aliases
  llvm::StringMap<int64_t> argByName;
  std::string constants;
  std::string constantAddresses, constantSetup; // CUDA: the entry's lines for constants
  int64_t numConstants = 0;
};

} // namespace mlir::gpt::emit

#endif
