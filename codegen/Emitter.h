//===- Emitter.h - the C++ emitter's shared pieces (private to codegen/) ---===//
//
// EmitKernels.cpp holds the emitter's driver and the shared kernel bodies
// (elementwise, fused, data movement, matmul, reductions); EmitModelKernels.cpp the
// model kernels (layer_norm, softmax, attention, cross-entropy and their gradients).
// What differs between targets is a Flavour: cpu/CpuFlavour.cpp, cuda/CudaFlavour.cpp
// (with cuda/Families.cpp, the ops that call a CUDA kernel family).
//
//===----------------------------------------------------------------------===//
#ifndef GPTC_CODEGEN_EMITTER_H
#define GPTC_CODEGEN_EMITTER_H

#include "codegen/Codegen.h"

#include "ir/GptDialect.h"
#include "ir/GptScalar.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlir::gpt::emit {

/// The tensor type of a value.
RankedTensorType ttype(Value v);
/// " (model.py:42)" for a file location, "" otherwise.
std::string describeLoc(Location loc);

/// An affine access: offset = base + sum_d index_d * strides[d].
struct Access {
  std::string buf;
  int64_t base = 0;
  SmallVector<int64_t> strides; // one per dim of the loop shape
};

/// A constant's elements as C literals, comma-separated (the flavours' array initialisers).
std::string elementList(DenseElementsAttr value, Type elem);

/// Where a loop's linear index `i` is known as a row `row` of `shape`'s last dim and a
/// column `col` in it (a row's sum: i = base + col): the names of the two.
struct RowSplit {
  std::string row, col;
};

/// Emits, inside a loop over linear index `i` of `shape`, the decoding of each access's
/// offset, and returns the offset expression per access. With `split`, the last dim is
/// its `col` and the others decode from its `row` (no division by the row's length, and
/// the row's part the same for each of its elements).
SmallVector<std::string> emitOffsets(raw_ostream &os, ArrayRef<int64_t> shape,
                                     ArrayRef<Access> accesses, StringRef indent,
                                     const RowSplit *split = nullptr);

/// `$j` in `expr` replaced by names[j].
std::string substitute(std::string expr, ArrayRef<std::string> names);

/// The value that `v` stands for: itself, or for a block argument of a gpt.horizontal the
/// group's operand.
Value outerValue(Value v);
/// The value that `r`, a result computed inside a gpt.horizontal, is outside it.
Value outerResult(Value r);

/// What attention and its gradient kernels need to know of their shapes.
struct AttentionShape {
  std::string elem, scale;
  int64_t H, T, D, S, Dv;
  /// Query heads a key/value head serves (grouped-query attention): query head h reads
  /// k's and v's head h / G, of H / G.
  int64_t G = 1;
  /// An operand's element strides (batch, head, row; its D or Dv columns contiguous) and
  /// where its first element is, in the buffer the kernel is given.
  struct Strides {
    int64_t b, h, t, base = 0;
  };
  /// q, k and v as read, the output (the gradient's g), and the gradient's dq, dk and dv
  /// as written (dk and dv of H / G heads, as k and v).
  enum Operand { Q, K, V, Y, DQ, DK, DV };
  Strides at[7];
  bool causal, dropout;
  int64_t id;
  std::string dropP, dropScale;
  int64_t rngOperand; // index of the rng operand (in<rngOperand>)
  int64_t maskOperand = -1; // index of the key_mask operand, -1 without one

  /// The distance between rows of operand `o`.
  int64_t pitch(Operand o) const { return at[o].t; }

  int64_t Sp() const { return (S + 31) / 32 * 32; } // keys padded to whole blocks
  /// Whether the kernel also carries the lane-block form (gptc::attention_rows and
  /// attention_grad_rows: 16 or 8 query rows at a time, each a lane), which AVX-512 and AVX2
  /// builds take: float only; other builds, and f64, the rows in blocks of 4. The same
  /// arithmetic in the same order.
  bool laneRows() const { return elem == "float"; }
  /// Where head `bh` (= b*H + h) of operand `o` starts (k's, v's, dk's and dv's: head h / G).
  std::string headBase(Operand o) const {
    const Strides &s = at[o];
    bool shared = (o == K || o == V || o == DK || o == DV) && G > 1;
    std::string text;
    if (!shared && s.b == H * s.h)
      text = "bh * " + std::to_string(s.h); // one head after another
    else
      text = "(bh / " + std::to_string(H) + ") * " + std::to_string(s.b) + " + (bh % " +
             std::to_string(H) + (shared ? " / " + std::to_string(G) : "") + ") * " +
             std::to_string(s.h);
    return s.base ? text + " + " + std::to_string(s.base) : text;
  }
  std::string keys() const {
    if (!causal)
      return std::to_string(S);
    return "(t + 1 < " + std::to_string(S) + " ? t + 1 : " + std::to_string(S) + ")";
  }
  bool masked() const { return maskOperand >= 0; }
  /// Declares `km`, head bh's row of the key mask (batch bh / H), where the op has one.
  std::string keyMaskDecl(const std::string &indent) const {
    if (!masked())
      return "";
    return indent + "const bool* km = in" + std::to_string(maskOperand) + " + (bh / " +
           std::to_string(H) + ") * " + std::to_string(S) + ";\n";
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

/// Where attention's (or its gradient's) key mask is among `op`'s operands (in<N>), -1
/// without one.
inline int64_t keyMaskOperand(Operation *op, Value mask) {
  return mask ? llvm::find(op->getOperands(), mask) - op->operand_begin() : -1;
}

/// `grads`: attention_grad's dq, dk, dv (none for the forward).
AttentionShape attentionShape(Value q, Value k, Value v, bool causal, double scale, double p,
                              int64_t id, int64_t rngOperand,
                              std::optional<ArrayRef<bool>> bthd, ValueRange grads = {});

class Emitter;

/// A member of a gpt.horizontal: its kernel's name and its call's arguments (the group's
/// parameter names).
struct GroupMember {
  Operation *op;
  std::string name;
  SmallVector<std::string> args;
};

/// A caller's id tensor checked at the entry before any kernel runs (embedding indices,
/// cross-entropy targets): argument `arg` of `n` ids, each in [0, bound) or `ignore`.
struct IdCheck {
  unsigned arg;
  int64_t n, bound;
  std::optional<int64_t> ignore;
  std::string what;  // "embedding index", ...
};

/// What a target decides in code generation (codegen/cpu/, codegen/cuda/): how a kernel's
/// loops are headed and what forms its sums and dropouts take, how a kernel is declared and
/// launched, which ops call a kernel family of the target's, and the file around the
/// kernels (constants, the entry). The kernel bodies themselves, the memory plan and the
/// fusion decisions are the Emitter's, shared by every target; a new target is a new
/// Flavour.
class Flavour {
public:
  explicit Flavour(Emitter &e) : e(e) {}
  virtual ~Flavour() = default;
  Flavour(const Flavour &) = delete;
  Flavour &operator=(const Flavour &) = delete;

  // -- inside kernel bodies --
  /// The head of a loop of `n` independent iterations over `var` (`simd`: elementwise,
  /// each iteration alone; inside a gpt.horizontal's region when e.inRegion).
  virtual std::string loop(StringRef var, int64_t n, bool simd) = 0;
  /// How a body forms the canonical sum of a reduction with several outputs, besides the
  /// prelude's reduce_sum by one thread.
  enum class Sums {
    Vector16, // the CPU: gptc::reduce_sum16, 16 neighbouring outputs at once
    Warp,     // CUDA: a warp (or block) an output, 32 lanes the partials (sumGroup)
  };
  virtual Sums sums() const = 0;
  /// Sums::Warp: the threads that form each of `outN` sums of `redN` elements, in the
  /// canonical order: a warp an output, its lanes the 32 partials (gptc::cuda::warp_sum),
  /// or for a long sum a block an output (gptc::cuda::block_sum: the block's threads make
  /// the elements, its first warp's lanes add them as the 32 partials); or, where
  /// `columns` (neighbouring outputs sum neighbouring elements: a sum over outer
  /// dimensions), 8 outputs a block, a thread a partial of one (gptc::cuda::column_sum).
  struct SumGroup {
    std::string loop;        // the head of the loop over the outputs, `var`
    std::string reduce;      // + "_sum" or "_max": the function all of them call
    std::string first;       // the condition of the one thread that stores an output
    std::string start, step; // a row's elements shared out: j = start; j += step
  };
  virtual SumGroup sumGroup(StringRef var, int64_t outN, int64_t redN, bool columns) = 0;
  /// Whether a lone exact GELU may take the prelude's array form (the CPU's).
  virtual bool arrayForms() const = 0;
  /// Whether an elementwise loop that reads or writes through strides or a broadcast may
  /// run a row at a time, a vector loop over the row's columns (the CPU's; Emitter::
  /// openElementLoop). The GPU keeps a thread an element: neighbouring threads,
  /// neighbouring elements.
  virtual bool rowLoops() const { return false; }
  /// Into how many blocks of rows the embedding gradient of a `v` by `c` table splits each
  /// column, so that the parallel loop has enough iterations (1: a column an iteration).
  virtual int64_t embeddingRowBlocks(int64_t v, int64_t c) const = 0;
  /// Opens an elementwise loop over `i` < `n` whose training dropouts (each with the name
  /// of its [seed, step] pointer) have their masks drawn; sets e.dropoutMasks[d] to the
  /// expression of d's mask for element i. The caller prints the body, indented by six,
  /// then calls closeDropout.
  virtual void openDropout(raw_ostream &os, int64_t n,
                           ArrayRef<std::pair<DropoutOp, std::string>> drops) = 0;
  virtual void closeDropout(raw_ostream &os) = 0;
  /// The statement that reports `message` from inside a kernel.
  virtual std::string reportError(StringRef message) = 0;

  // -- kernels --
  /// Writes kernel `name` of `op` (a top-level op or a horizontal member) as a host
  /// function of that name taking in0.., out0..: its body from e.emitKernel, declared and
  /// launched as the target does, or a call of one of the target's kernel families.
  virtual LogicalResult function(const std::string &name, Operation *op, raw_ostream &os) = 0;
  /// Whether a gpt.horizontal's members share one parallel region (else they run in turn).
  virtual bool parallelRegions() const = 0;
  /// Where members do not share a parallel region: writes the kernels of gpt.horizontal
  /// `op`'s `members` and a host function `name` taking the group's in0.., out0.. that
  /// runs them (`names`: the parameter name of each value of the group's body).
  virtual LogicalResult group(HorizontalOp op, const std::string &name,
                              ArrayRef<GroupMember> members,
                              const DenseMap<Value, std::string> &names, raw_ostream &os) {
    (void)members, (void)names, (void)os, (void)name;
    return op.emitError("internal: this target runs groups as parallel regions");
  }
  /// The entry's call of kernel `name` with `args` for `op`.
  virtual std::string call(const std::string &name, StringRef args, Operation *op) = 0;

  // -- the file --
  /// Declares constant `name` of `c`'s value; returns the pointer the entry passes.
  virtual std::string constant(ConstantOp c, const std::string &name) = 0;
  /// The entry's copy of a result: `n` elements of C type `type` from `src` to `dst`.
  virtual std::string resultCopy(StringRef dst, StringRef src, int64_t n, StringRef type) = 0;
  /// The arena the kernels written so far need, given the memory plan's `planned` bytes
  /// (the CUDA families' scratch goes after the planned buffers).
  virtual int64_t arenaBytes(int64_t planned) { return planned; }
  /// The whole source: the constants, `kernels` and the entry, which checks `ids` and
  /// then runs `calls` over an arena of `arenaBytes` (arenaBytes(planned)).
  virtual void file(raw_ostream &os, StringRef kernels, StringRef calls,
                    ArrayRef<IdCheck> ids, int64_t arenaBytes) = 0;

protected:
  /// With gpt.redzone (gptc compile --sanitize): a guard that poisons the arena's bytes no
  /// buffer holds (nor `alsoHeld`'s ranges, [begin, end)) while the entry runs; else "".
  std::string redzoneGuard(int64_t arenaBytes,
                           ArrayRef<std::pair<int64_t, int64_t>> alsoHeld = {});

  Emitter &e;
};

std::unique_ptr<Flavour> makeCpuFlavour(Emitter &e);
std::unique_ptr<Flavour> makeCudaFlavour(Emitter &e);

/// Writes one kernel per top-level op of a planned function, and the entry. (Private to
/// codegen/: its members are open to the flavours.)
class Emitter {
public:
  Emitter(func::FuncOp fn, Target target);
  FailureOr<EmittedSource> run();

  std::vector<IdCheck> idChecks();
  /// Whether `ids` are among the ids the entry checks (idChecks): an argument of the
  /// function, through views and groups.
  bool checkedAtEntry(Value ids);
  // Kernel bodies. Each writes the body of a kernel given parameter names in0..
  // (operands) and out0.. (results).
  LogicalResult emitKernel(Operation *op, raw_ostream &os);
  LogicalResult emitElementwise(Operation *op, StringRef expr, raw_ostream &os);
  /// Opens an elementwise loop over `shape` whose offsets are `accesses`, defining `i`, the
  /// element's linear index, for a body indented by the returned string. Where the flavour
  /// takes rows (Flavour::rowLoops), some access is neither the dense buffer nor one
  /// element, and the rows are at least 8 long and at least 64 of them (enough to share
  /// over the threads): a loop over rows, `gptc_row`, and in it a vector loop over the
  /// columns, `gptc_col`, with rowSplit set, so that each offset's row part is decoded
  /// once a row (hoisted out of the column loop) and not by a division an element.
  /// closeElementLoop closes either and clears rowSplit.
  std::string openElementLoop(raw_ostream &os, ArrayRef<int64_t> shape,
                              ArrayRef<Access> accesses);
  void closeElementLoop(raw_ostream &os);
  std::optional<std::string> scalarExpr(Operation *op);
  /// How a kernel over `shape` reads operand `v` (named `buf` in it): numpy broadcasting
  /// over its dense buffer, or over the buffer a strided view reads in place.
  Access operandAccess(Value v, StringRef buf, ArrayRef<int64_t> shape);
  /// Where a kernel writes its result `r` (named `buf` in it): its dense buffer, or its
  /// place in a gathered op's buffer (writtenView).
  Access resultAccess(Value r, StringRef buf);
  DenseMap<Operation *, std::string> dropoutMasks; // a dropout's mask for element i
  /// Set while a row's sum emits its element and its row's elements (emitFusedBody).
  const RowSplit *rowSplit = nullptr;
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

  /// The flavour's loop head (Flavour::loop).
  std::string loop(StringRef var, int64_t n, bool simd = false) const {
    return flavour->loop(var, n, simd);
  }
  std::string reportError(StringRef message) const { return flavour->reportError(message); }
  /// A reduction's loop over its `outN` outputs `i` and its opening brace; with
  /// `blocksOf16`, over blocks of 16 outputs (gptc::reduce_sum16), `i` each block's first.
  std::string outputLoop(int64_t outN, bool blocksOf16) const;
  /// `static void name(const T* in0.., T* out0..)`.
  std::string signature(const std::string &name, ValueRange ins, ValueRange outs);
  LogicalResult emitHorizontal(HorizontalOp op, const std::string &name, raw_ostream &os);

  std::string elemType(Value v) { return *cType(ttype(v).getElementType()); }
  /// The C pointer expression through which the entry reaches `v`.
  std::string pointerOf(Value v);

  func::FuncOp fn;
  Target target;
  std::unique_ptr<Flavour> flavour;
  bool inRegion = false; // emitting a member of a gpt.horizontal
  bool aliasing = false; // emitting a kernel that writes an argument in place
  DenseMap<Value, std::string> pointers; // for args, constants and aliases
  llvm::StringMap<int64_t> argByName;
  int64_t numConstants = 0;
};

} // namespace mlir::gpt::emit

#endif
