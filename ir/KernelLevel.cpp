//===- KernelLevel.cpp - buffer sizes and views of the kernel-level IR ----===//
#include "ir/KernelLevel.h"

#include "ir/GptDialect.h"

#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::gpt;

int64_t mlir::gpt::byteSize(Value v) {
  return std::max<int64_t>(
      cast<RankedTensorType>(v.getType()).getNumElements() * elementBytes(v), 1);
}

int64_t mlir::gpt::elementBytes(Value v) {
  Type e = cast<RankedTensorType>(v.getType()).getElementType();
  return e.isInteger(1) ? 1 : (int64_t)(e.getIntOrFloatBitWidth() / 8);
}

SmallVector<int64_t> mlir::gpt::rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t d = (int64_t)shape.size() - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

/// The strides of `to`, the same elements as `from` (with `strides`) in another shape, or
/// nullopt. Walking both shapes from the innermost dim, `from` splits into runs of dims
/// each evenly spaced (a dim's stride is the size times the stride of the one after it);
/// `to`'s dims must tile those runs exactly, each run's dims spaced from its innermost
/// stride. Dims of size 1 go anywhere.
static std::optional<SmallVector<int64_t>> reshapeStrides(ArrayRef<int64_t> from,
                                                         ArrayRef<int64_t> strides,
                                                         ArrayRef<int64_t> to) {
  SmallVector<int64_t> out(to.size(), 0);
  int64_t t = (int64_t)to.size() - 1;
  int64_t f = (int64_t)from.size() - 1;
  while (f >= 0) {
    if (from[f] == 1) {
      --f;
      continue;
    }
    // A run: from[f] down to from[g], evenly spaced.
    int64_t step = strides[f], run = from[f];
    int64_t g = f;
    while (g > 0 && (from[g - 1] == 1 || strides[g - 1] == run * step)) {
      --g;
      run *= from[g];
    }
    int64_t made = 1;
    while (t >= 0 && (made < run || to[t] == 1)) {
      out[t] = made * step;
      made *= to[t];
      --t;
    }
    if (made != run)
      return std::nullopt;
    f = g - 1;
  }
  for (; t >= 0; --t) {
    if (to[t] != 1)
      return std::nullopt;
    out[t] = 1;
  }
  return out;
}

/// Where `piece`, one of `pieces` along `dim`, starts along it: the sizes of those before.
static int64_t startOf(ValueRange pieces, Value piece, int64_t dim) {
  int64_t start = 0;
  for (Value p : pieces) {
    if (p == piece)
      break;
    start += cast<RankedTensorType>(p.getType()).getDimSize(dim);
  }
  return start;
}

std::optional<StridedView> mlir::gpt::stridedView(Value v) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(v.getType()).getShape();
  Operation *def = v.getDefiningOp();
  bool through = def && (isa<ReshapeOp, StopGradientOp>(def) || def->hasAttr(kStridedAttr));
  if (!through)
    return StridedView{v, 0, rowMajorStrides(shape)};
  Value x = def->getOperand(0);
  std::optional<StridedView> view = stridedView(x);
  if (!view)
    return std::nullopt;
  ArrayRef<int64_t> from = cast<RankedTensorType>(x.getType()).getShape();
  SmallVector<int64_t> &s = view->strides;
  bool ok = llvm::TypeSwitch<Operation *, bool>(def)
                .Case([&](ReshapeOp) {
                  std::optional<SmallVector<int64_t>> r = reshapeStrides(from, s, shape);
                  if (r)
                    s = *r;
                  return r.has_value();
                })
                .Case([&](TransposeOp t) {
                  SmallVector<int64_t> permuted;
                  for (int64_t p : t.getPerm())
                    permuted.push_back(s[p]);
                  s = permuted;
                  return true;
                })
                .Case([&](SplitOp split) {
                  int64_t dim = split.getDim();
                  view->base += startOf(split.getResults(), v, dim) * s[dim];
                  return true;
                })
                .Case([&](SliceOp slice) {
                  int64_t dim = slice.getDim();
                  view->base += (int64_t)slice.getStart() * s[dim];
                  s[dim] *= (int64_t)slice.getStep();
                  return true;
                })
                .Default([](Operation *) { return true; }); // stop_gradient
  if (!ok)
    return std::nullopt;
  return view;
}

Value mlir::gpt::beneathReshapes(Value v) {
  while (isa_and_nonnull<ReshapeOp, StopGradientOp>(v.getDefiningOp()))
    v = v.getDefiningOp()->getOperand(0);
  return v;
}

Value mlir::gpt::vectorConcatPiece(ConcatOp concat, Value v) {
  if (concat.getType().getRank() != 1 || !v.hasOneUse())
    return nullptr;
  Value root = v;
  if (auto reshape = v.getDefiningOp<ReshapeOp>()) {
    root = reshape.getX();
    if (!root.hasOneUse())
      return nullptr;
  }
  Operation *producer = root.getDefiningOp();
  if (!producer || producer->getBlock() != concat->getBlock() ||
      isa<ConstantOp, ReshapeOp, StopGradientOp, SplitOp, ConcatOp>(producer))
    return nullptr;
  return root;
}

bool mlir::gpt::concatsVectorsInPlace(ConcatOp concat) {
  return llvm::all_of(concat.getInputs(),
                      [&](Value v) { return (bool)vectorConcatPiece(concat, v); });
}

bool mlir::gpt::isStrided(Value v) {
  Operation *def = beneathReshapes(v).getDefiningOp();
  return def && def->hasAttr(kStridedAttr);
}

bool mlir::gpt::readsOperandThroughStrides(Operation *op, unsigned i) {
  return readsThroughStrides(op) || (isa<AttentionOp, AttentionGradOp>(op) && i < 3);
}

bool mlir::gpt::readsThroughStrides(Operation *op) {
  if (auto fused = dyn_cast<FusedOp>(op))
    return !fused.getReduction();
  return isa<ElementwiseOpInterface>(op) &&
         !isa<DropoutOp, GeluOp, GeluGradOp, GeluKeepErfOp>(op);
}

std::optional<StridedView> mlir::gpt::writtenView(Value v) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(v.getType()).getShape();
  StridedView dense{v, 0, rowMajorStrides(shape)};
  if (!v.hasOneUse())
    return dense;
  Operation *user = *v.getUsers().begin();
  bool reshape = isa<ReshapeOp, StopGradientOp>(user);
  if (!reshape && !user->hasAttr(kGatheredAttr))
    return dense;
  Value whole = user->getResult(0);
  std::optional<StridedView> view = writtenView(whole);
  if (!view)
    return std::nullopt;
  if (reshape && view->root == whole)
    return dense; // the reshape aliases v's own buffer
  ArrayRef<int64_t> to = cast<RankedTensorType>(whole.getType()).getShape();
  SmallVector<int64_t> &s = view->strides;
  if (reshape) {
    std::optional<SmallVector<int64_t>> r = reshapeStrides(to, s, shape);
    if (!r)
      return std::nullopt;
    s = *r;
  } else if (auto t = dyn_cast<TransposeOp>(user)) {
    SmallVector<int64_t> in(s.size());
    for (auto [i, p] : llvm::enumerate(t.getPerm()))
      in[p] = s[i];
    s = in;
  } else {
    auto concat = cast<ConcatOp>(user);
    int64_t dim = concat.getDim();
    view->base += startOf(concat.getInputs(), v, dim) * s[dim];
  }
  return view;
}

bool mlir::gpt::isGathered(Value v) {
  std::optional<StridedView> view = writtenView(v);
  return !view || view->root != v;
}

bool mlir::gpt::writesThroughStrides(Operation *op) {
  return isa<TransposeOp>(op) || writesRowsOnly(op) || readsThroughStrides(op);
}

bool mlir::gpt::writesRowsOnly(Operation *op) { return isa<AttentionGradOp>(op); }
