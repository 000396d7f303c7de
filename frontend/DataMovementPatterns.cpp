//===- DataMovementPatterns.cpp - aten view/shape/index ops -> gpt --------===//
//
// Views become value-semantics ops: view/reshape/unsqueeze/squeeze/flatten
// are gpt.reshape to the traced type, transpose/permute/t are gpt.transpose,
// split/chunk are gpt.split, slice/select are gpt.slice (+ reshape), expand is
// gpt.broadcast. Also arange, cat, dtype conversions and identity copies.
//
//===----------------------------------------------------------------------===//
#include "frontend/AtenToGpt.h"

#include <algorithm>

#include <limits>

using namespace mlir;
using namespace mlir::gpt;

namespace {

LogicalResult convertReshape(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  Value x = op.operand("self");
  if (!x)
    x = op.operand("input");
  if (!x)
    return op.unsupported("needs an operand 'self' (or 'input')");
  out.push_back(ReshapeOp::create(b, op.loc(), op.resultType(), x));
  return success();
}

LogicalResult identity(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  Value x = op.operand("self");
  out.push_back(convertElementType(b, op.loc(), x, op.resultType().getElementType()));
  return success();
}

Value buildTranspose(OpBuilder &b, Location loc, RankedTensorType type, Value x,
                     ArrayRef<int64_t> perm) {
  return TransposeOp::create(b, loc, type, x, b.getDenseI64ArrayAttr(perm));
}

LogicalResult convertDetach(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  out.push_back(StopGradientOp::create(b, op.loc(), op.resultType(), op.operand("self")));
  return success();
}

LogicalResult convertTransposeInt(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  Value x = op.operand("self");
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  auto d0 = op.getInt("dim0"), d1 = op.getInt("dim1");
  if (!d0 || !d1)
    return op.unsupported("missing dims");
  auto perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  auto i0 = op.dimIndex(*d0, rank), i1 = op.dimIndex(*d1, rank);
  if (failed(i0) || failed(i1))
    return failure();
  std::swap(perm[*i0], perm[*i1]);
  out.push_back(buildTranspose(b, op.loc(), op.resultType(), x, perm));
  return success();
}

LogicalResult convertPermute(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  Value x = op.operand("self");
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  SmallVector<int64_t> perm = op.getInts("dims").value_or(SmallVector<int64_t>{});
  for (int64_t &p : perm) {
    auto d = op.dimIndex(p, rank);
    if (failed(d))
      return failure();
    p = *d;
  }
  out.push_back(buildTranspose(b, op.loc(), op.resultType(), x, perm));
  return success();
}

LogicalResult convertT(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  Value x = op.operand("self");
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  if (rank < 2) {
    out.push_back(x);
    return success();
  }
  out.push_back(buildTranspose(b, op.loc(), op.resultType(), x, {1, 0}));
  return success();
}

/// x.T (numpy's): every dimension reversed.
LogicalResult convertNumpyT(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  Value x = op.operand("self");
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  auto perm = llvm::to_vector(llvm::reverse(llvm::seq<int64_t>(0, rank)));
  out.push_back(rank < 2 ? x : buildTranspose(b, op.loc(), op.resultType(), x, perm));
  return success();
}

/// x.mT: the last two dimensions swapped.
LogicalResult convertMT(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  Value x = op.operand("self");
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  if (rank < 2)
    return op.unsupported("needs at least 2 dimensions");
  auto perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 2], perm[rank - 1]);
  out.push_back(buildTranspose(b, op.loc(), op.resultType(), x, perm));
  return success();
}

/// zeros/ones/full and their _like and new_ forms: a constant of the traced result type
/// (filled when the artifact loads). `Fill` is the value, or -1 for the fill_value argument.
template <int Fill> LogicalResult convertFilled(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  RankedTensorType type = op.resultType();
  Type elem = type.getElementType();
  if (Fill >= 0) {
    out.push_back(splat(b, op.loc(), type, Fill));
    return success();
  }
  Attribute value;
  if (isa<FloatType>(elem)) {
    if (auto f = op.getFloat("fill_value"))
      value = b.getFloatAttr(elem, *f);
  } else if (auto i = op.getInt("fill_value")) { // exact for every int64
    value = b.getIntegerAttr(elem, elem.isInteger(1) ? *i != 0 : *i);
  }
  if (!value)
    return op.unsupported("fill_value must be a number of the tensor's type");
  out.push_back(ConstantOp::create(b, op.loc(), type, DenseElementsAttr::get(type, value)));
  return success();
}

/// tril(x, k) keeps x[..., i, j] where j - i <= k, triu where j - i >= k, else 0: a mask
/// compared from two aranges (j - k against i) and gpt.where.
template <bool Lower> LogicalResult convertTriangle(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  RankedTensorType type = op.resultType();
  if (type.getRank() < 2)
    return op.unsupported("needs at least 2 dimensions");
  int64_t n = type.getDimSize(type.getRank() - 2), m = type.getDimSize(type.getRank() - 1);
  // Beyond +-(n + m) every element is kept or none is: clamped, j - k cannot overflow.
  int64_t k = std::clamp<int64_t>(op.getInt("diagonal").value_or(0), -(n + m), n + m);
  Location loc = op.loc();
  auto i64 = b.getI64Type();
  auto arange = [&](int64_t count, int64_t start, ArrayRef<int64_t> shape) {
    Value r = ArangeOp::create(b, loc, RankedTensorType::get({count}, i64),
                               b.getI64IntegerAttr(start), b.getI64IntegerAttr(1));
    return ReshapeOp::create(b, loc, RankedTensorType::get(shape, i64), r);
  };
  Value rows = arange(n, 0, {n, 1}), shifted = arange(m, -k, {1, m}); // i, and j - k
  Value keep = CompareOp::create(b, loc, shifted, rows, Lower ? ComparePredicate::le : ComparePredicate::ge);
  Value x = convertElementType(b, loc, op.operand("self"), type.getElementType());
  out.push_back(WhereOp::create(b, loc, type, keep, x, scalarOf(b, loc, type.getElementType(), 0.0)));
  return success();
}

/// The `self` operand and the `dim` it is taken along (split, slice, narrow, select).
FailureOr<std::pair<Value, int64_t>> selfAlongDim(AtenOp &op) {
  if (failed(op.require({"self"})))
    return failure();
  Value x = op.operand("self");
  auto dimOr = op.dimIndex(op.getInt("dim").value_or(0),
                           cast<RankedTensorType>(x.getType()).getRank());
  if (failed(dimOr))
    return failure();
  return std::make_pair(x, *dimOr);
}

/// split/split_with_sizes/chunk: the traced result types give the pieces.
LogicalResult convertSplit(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  auto selfDim = selfAlongDim(op);
  if (failed(selfDim))
    return failure();
  auto [x, dim] = *selfDim;
  SmallVector<Type> types(op.raw()->getResultTypes());
  auto split = SplitOp::create(b, op.loc(), types, x, b.getI64IntegerAttr(dim));
  llvm::append_range(out, split.getResults());
  return success();
}

Value buildSlice(OpBuilder &b, Location loc, RankedTensorType type, Value x, int64_t dim,
                 int64_t start, int64_t end, int64_t step) {
  return SliceOp::create(b, loc, type, x, b.getI64IntegerAttr(dim), b.getI64IntegerAttr(start),
                         b.getI64IntegerAttr(end), b.getI64IntegerAttr(step));
}

LogicalResult convertSlice(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  auto selfDim = selfAlongDim(op);
  if (failed(selfDim))
    return failure();
  auto [x, dim] = *selfDim;
  auto xt = cast<RankedTensorType>(x.getType());
  int64_t size = xt.getDimSize(dim);
  auto clampIndex = [&](int64_t i) {
    if (i < 0)
      i += size;
    return std::clamp<int64_t>(i, 0, size);
  };
  int64_t start = clampIndex(op.getInt("start").value_or(0));
  int64_t end = clampIndex(op.getInt("end").value_or(std::numeric_limits<int64_t>::max()));
  int64_t step = op.getInt("step").value_or(1);
  if (step <= 0)
    return op.unsupported("slice step must be positive");
  out.push_back(buildSlice(b, op.loc(), op.resultType(), x, dim, start, std::max(start, end), step));
  return success();
}

/// narrow(self, dim, start, length) = slice(self, dim, start, start + length).
LogicalResult convertNarrow(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  auto selfDim = selfAlongDim(op);
  if (failed(selfDim))
    return failure();
  auto [x, dim] = *selfDim;
  int64_t size = cast<RankedTensorType>(x.getType()).getDimSize(dim);
  int64_t start = op.getInt("start").value_or(0), length = op.getInt("length").value_or(0);
  if (start < 0)
    start += size;
  if (start < 0 || length < 0 || start + length > size)
    return op.unsupported("narrow of " + Twine(length) + " from " + Twine(start) +
                          " out of range for a dim of " + Twine(size));
  out.push_back(buildSlice(b, op.loc(), op.resultType(), x, dim, start, start + length, 1));
  return success();
}

/// select(self, dim, index) = reshape(slice(self, dim, index, index + 1)).
LogicalResult convertSelect(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  auto selfDim = selfAlongDim(op);
  if (failed(selfDim))
    return failure();
  auto [x, dim] = *selfDim;
  auto xt = cast<RankedTensorType>(x.getType());
  int64_t index = op.getInt("index").value_or(0);
  if (index < -xt.getDimSize(dim) || index >= xt.getDimSize(dim))
    return op.unsupported("index " + Twine(index) + " out of range for a dim of " +
                          Twine(xt.getDimSize(dim)));
  if (index < 0)
    index += xt.getDimSize(dim);
  SmallVector<int64_t> shape(xt.getShape());
  shape[dim] = 1;
  Value s = buildSlice(b, op.loc(), xt.clone(shape), x, dim, index, index + 1, 1);
  out.push_back(ReshapeOp::create(b, op.loc(), op.resultType(), s));
  return success();
}

/// x[idx] with an index tensor computed from the input, on x's first dimension: the rows of
/// x (as a table [N, the rest]) at the indices, gpt.embedding's lookup (CodeGen's rotary
/// table at its position ids). An index out of [0, N) is refused when the step runs, as
/// the embedding's are; PyTorch would wrap a negative one.
LogicalResult convertIndexRows(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out,
                               Value x, Value idx) {
  auto xt = cast<RankedTensorType>(x.getType());
  auto it = cast<RankedTensorType>(idx.getType());
  if (!isa<FloatType>(xt.getElementType()) || xt.getRank() < 1 ||
      !it.getElementType().isInteger(64))
    return op.unsupported("an index tensor computed from the input takes rows of a float "
                          "tensor by int64 indices");
  int64_t rest = 1;
  for (int64_t d : xt.getShape().drop_front())
    rest *= d;
  Location loc = op.loc();
  Value table = ReshapeOp::create(b, loc, xt.clone({xt.getDimSize(0), rest}), x);
  SmallVector<int64_t> rows(it.getShape());
  rows.push_back(rest);
  Value picked = EmbeddingOp::create(b, loc, xt.clone(rows), table, idx);
  out.push_back(ReshapeOp::create(b, loc, op.resultType(), picked));
  return success();
}

/// index(self, [None.., idx]) with one constant 1-D index tensor: the selected
/// slices along that dimension, concatenated (nanoGPT's `x[:, [-1], :]`); an index
/// tensor computed from the input on the first dimension: convertIndexRows.
LogicalResult convertIndex(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  Value x = op.operand("self");
  SmallVector<Value> indices = op.operands("indices");
  auto positions = op.getInts("indices_positions").value_or(SmallVector<int64_t>{0});
  if (indices.size() != 1 || positions.size() != 1)
    return op.unsupported("only one index tensor is supported");
  auto cst = indices[0].getDefiningOp<ConstantOp>();
  auto dense = cst ? dyn_cast<DenseIntElementsAttr>(cst.getValue()) : nullptr;
  if (!cst && positions[0] == 0)
    return convertIndexRows(op, b, out, x, indices[0]);
  if (!dense || cast<RankedTensorType>(dense.getType()).getRank() != 1)
    return op.unsupported("only a constant 1-D index tensor, or one on the first dimension, "
                          "is supported");
  auto xt = cast<RankedTensorType>(x.getType());
  auto dimOr = op.dimIndex(positions[0], xt.getRank());
  if (failed(dimOr))
    return failure();
  int64_t dim = *dimOr, size = xt.getDimSize(dim);
  SmallVector<Value> pieces;
  SmallVector<int64_t> shape(xt.getShape());
  shape[dim] = 1;
  for (APInt v : dense.getValues<APInt>()) {
    int64_t i = v.getSExtValue();
    if (i < 0)
      i += size;
    if (i < 0 || i >= size)
      return op.unsupported("index out of range");
    pieces.push_back(buildSlice(b, op.loc(), xt.clone(shape), x, dim, i, i + 1, 1));
  }
  if (pieces.size() == 1)
    out.push_back(pieces.front());
  else
    out.push_back(ConcatOp::create(b, op.loc(), op.resultType(), pieces, b.getI64IntegerAttr(dim)));
  return success();
}

/// cat, and stack as a cat of the tensors each given a dimension of 1 at `dim`.
template <bool Stack> LogicalResult convertCat(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  SmallVector<Value> inputs = op.operands("tensors");
  RankedTensorType type = op.resultType();
  if (inputs.empty())
    return op.unsupported("needs at least one tensor");
  auto dimOr = op.dimIndex(op.getInt("dim").value_or(0), type.getRank());
  if (failed(dimOr))
    return failure();
  int64_t dim = *dimOr;
  for (Value &v : inputs) {
    v = convertElementType(b, op.loc(), v, type.getElementType());
    if (Stack) {
      SmallVector<int64_t> shape(cast<RankedTensorType>(v.getType()).getShape());
      shape.insert(shape.begin() + dim, 1);
      v = ReshapeOp::create(b, op.loc(), type.clone(shape), v);
    }
  }
  out.push_back(ConcatOp::create(b, op.loc(), type, inputs, b.getI64IntegerAttr(dim)));
  return success();
}

/// pad(self, pad, "constant", value): pad = [before, after] pairs from the last dimension
/// back; each padded dimension becomes a concat of filled pieces around self (transformers'
/// causal-LM loss pads its labels with ignore_index).
LogicalResult convertPad(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  if (op.getString("mode").value_or("constant") != "constant")
    return op.unsupported("only mode='constant'");
  Value x = op.operand("self");
  auto xt = cast<RankedTensorType>(x.getType());
  auto pad = op.getInts("pad");
  if (!pad || pad->size() % 2 || (int64_t)pad->size() > 2 * xt.getRank())
    return op.unsupported("pad needs pairs, at most two a dimension");
  double value = op.getFloat("value").value_or(0.0);
  if (!isa<FloatType>(xt.getElementType()) && value != (double)(int64_t)value)
    return op.unsupported("an integer tensor's pad value must be an integer");
  for (size_t i = 0; i < pad->size(); i += 2) {
    int64_t dim = xt.getRank() - 1 - i / 2, before = (*pad)[i], after = (*pad)[i + 1];
    if (before < 0 || after < 0)
      return op.unsupported("negative padding (cropping) is not supported");
    SmallVector<Value> pieces;
    for (int64_t n : {before, int64_t(-1), after}) {
      if (n < 0) {
        pieces.push_back(x);
      } else if (n > 0) {
        SmallVector<int64_t> shape(xt.getShape());
        shape[dim] = n;
        pieces.push_back(splat(b, op.loc(), xt.clone(shape), value));
      }
    }
    if (pieces.size() == 1)
      continue;
    SmallVector<int64_t> shape(xt.getShape());
    shape[dim] += before + after;
    xt = xt.clone(shape);
    x = ConcatOp::create(b, op.loc(), xt, pieces, b.getI64IntegerAttr(dim));
  }
  out.push_back(x);
  return success();
}

/// repeat_interleave(self, repeats, dim): each element repeated `repeats` times in place
/// along dim (all of self flattened first where dim is absent).
LogicalResult convertRepeatInterleave(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  Value x = op.operand("self");
  auto repeats = op.getInt("repeats");
  if (!repeats || *repeats < 1)
    return op.unsupported("repeats must be an integer >= 1");
  auto xt = cast<RankedTensorType>(x.getType());
  int64_t dim = 0;
  if (auto d = op.getInt("dim")) {
    auto i = op.dimIndex(*d, xt.getRank());
    if (failed(i))
      return failure();
    dim = *i;
  } else {
    xt = xt.clone({xt.getNumElements()});
    x = ReshapeOp::create(b, op.loc(), xt, x);
  }
  out.push_back(repeatInterleave(b, op.loc(), x, dim, *repeats));
  return success();
}

/// repeat(self, repeats): self tiled repeats[d] times along each dim d (repeats longer than
/// self's rank add leading dims): self reshaped to [1, s0, 1, s1, ...], broadcast to [r0, s0,
/// r1, s1, ...], reshaped to the result (the gradient: broadcast's, the tiles summed).
LogicalResult convertRepeat(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  Value x = op.operand("self");
  auto xt = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> repeats = op.getInts("repeats").value_or(SmallVector<int64_t>{});
  if ((int64_t)repeats.size() < xt.getRank() || llvm::any_of(repeats, [](int64_t r) { return r < 1; }))
    return op.unsupported("repeats must be >= 1, one for each dimension at least");
  SmallVector<int64_t> shape(repeats.size() - xt.getRank(), 1);
  llvm::append_range(shape, xt.getShape());
  SmallVector<int64_t> single, tiled;
  for (size_t d = 0; d < repeats.size(); ++d) {
    single.append({1, shape[d]});
    tiled.append({repeats[d], shape[d]});
  }
  Location loc = op.loc();
  Value r = ReshapeOp::create(b, loc, xt.clone(single), x);
  r = BroadcastOp::create(b, loc, xt.clone(tiled), r);
  out.push_back(ReshapeOp::create(b, loc, op.resultType(), r));
  return success();
}

LogicalResult convertExpand(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  out.push_back(BroadcastOp::create(b, op.loc(), op.resultType(), op.operand("self")));
  return success();
}

LogicalResult convertArange(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  auto start = op.getFloat("start").value_or(0.0), step = op.getFloat("step").value_or(1.0);
  if (start != (double)(int64_t)start || step != (double)(int64_t)step)
    return op.unsupported("only integer start and step");
  out.push_back(ArangeOp::create(b, op.loc(), op.resultType(), b.getI64IntegerAttr((int64_t)start),
                                 b.getI64IntegerAttr((int64_t)step)));
  return success();
}

} // namespace

Value mlir::gpt::repeatInterleave(OpBuilder &b, Location loc, Value x, int64_t dim,
                                  int64_t repeats) {
  auto xt = cast<RankedTensorType>(x.getType());
  if (repeats == 1)
    return x;
  SmallVector<int64_t> one(xt.getShape()), wide, out(xt.getShape());
  one.insert(one.begin() + dim + 1, 1);
  wide = one;
  wide[dim + 1] = repeats;
  out[dim] *= repeats;
  Value r = ReshapeOp::create(b, loc, xt.clone(one), x);
  r = BroadcastOp::create(b, loc, xt.clone(wide), r);
  return ReshapeOp::create(b, loc, xt.clone(out), r);
}

void mlir::gpt::populateDataMovementPatterns(AtenConverterTable &t) {
  for (StringRef n : {"aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
                      "aten.unsqueeze.default", "aten.squeeze.dim", "aten.squeeze.dims",
                      "aten.squeeze.default", "aten.flatten.using_ints"})
    t[n] = convertReshape;
  for (StringRef n : {"aten.contiguous.default", "aten.clone.default", "aten.alias.default",
                      "aten.lift_fresh_copy.default"})
    t[n] = identity;
  for (StringRef n : {"aten.to.dtype", "aten.to.dtype_layout", "aten.to.device",
                      "aten._to_copy.default", "aten.type_as.default"})
    t[n] = identity; // a dtype change becomes gpt.convert
  t["aten.detach.default"] = convertDetach;
  t["aten.transpose.int"] = convertTransposeInt;
  t["aten.permute.default"] = convertPermute;
  t["aten.t.default"] = convertT;
  t["aten.mT.default"] = convertMT;
  t["aten.numpy_T.default"] = convertNumpyT;
  t["aten.tril.default"] = convertTriangle<true>;
  t["aten.triu.default"] = convertTriangle<false>;
  for (StringRef n : {"aten.zeros.default", "aten.zeros_like.default", "aten.new_zeros.default"})
    t[n] = convertFilled<0>;
  for (StringRef n : {"aten.ones.default", "aten.ones_like.default", "aten.new_ones.default"})
    t[n] = convertFilled<1>;
  for (StringRef n : {"aten.full.default", "aten.full_like.default", "aten.new_full.default"})
    t[n] = convertFilled<-1>;
  for (StringRef n : {"aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default"})
    t[n] = convertSplit;
  t["aten.slice.Tensor"] = convertSlice;
  t["aten.narrow.default"] = convertNarrow;
  t["aten.select.int"] = convertSelect;
  t["aten.cat.default"] = convertCat<false>;
  t["aten.pad.default"] = convertPad;
  t["aten.stack.default"] = convertCat<true>;
  t["aten.index.Tensor"] = convertIndex;
  t["aten.expand.default"] = convertExpand;
  t["aten.broadcast_to.default"] = convertExpand;
  t["aten.repeat_interleave.self_int"] = convertRepeatInterleave;
  t["aten.repeat.default"] = convertRepeat;
  for (StringRef n : {"aten.arange.default", "aten.arange.start", "aten.arange.start_step"})
    t[n] = convertArange;
}
