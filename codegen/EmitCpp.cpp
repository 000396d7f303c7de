//===- EmitCpp.cpp - gpt ops -> C++ kernels --------------------------------===//
//
// One kernel per op. A kernel is a function of typed pointers (in0.., out0..)
// whose body is a GPTC_FOR loop over independent outputs; reductions inside a
// body go through the prelude's canonical helpers (gptc::reduce_sum,
// gptc::reduce_max, gptc::dot_seq), so the order of every floating-point sum
// is the one the op's `order` attribute names.
//
//===----------------------------------------------------------------------===//
#include "codegen/Codegen.h"

#include "ir/GptDialect.h"
#include "passes/Passes.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

using namespace mlir;
using namespace mlir::gpt;

namespace {

//===----------------------------------------------------------------------===//
// Types, shapes and literals
//===----------------------------------------------------------------------===//

RankedTensorType ttype(Value v) { return cast<RankedTensorType>(v.getType()); }

FailureOr<std::string> cType(Type t) {
  if (t.isF32())
    return std::string("float");
  if (t.isF64())
    return std::string("double");
  if (t.isInteger(64))
    return std::string("int64_t");
  if (t.isInteger(1))
    return std::string("bool");
  return failure();
}

SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t d = (int64_t)shape.size() - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

/// An exact C++ literal for `v` as element type `t` (hex floats keep every bit).
std::string literal(double v, Type t) {
  bool f32 = t.isF32();
  if (std::isnan(v))
    return f32 ? "NAN" : "(double)NAN";
  if (std::isinf(v))
    return std::string(v < 0 ? "-" : "") + (f32 ? "INFINITY" : "(double)INFINITY");
  if (t.isInteger(64))
    return std::to_string((int64_t)v) + "LL";
  if (t.isInteger(1))
    return v != 0 ? "true" : "false";
  char buf[64];
  if (f32)
    std::snprintf(buf, sizeof buf, "%af", (double)(float)v);
  else
    std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::string elementLiteral(Attribute a, Type t) {
  if (auto f = dyn_cast<FloatAttr>(a))
    return literal(f.getValueAsDouble(), t);
  if (auto i = dyn_cast<IntegerAttr>(a))
    return literal((double)i.getValue().getSExtValue(), t) ;
  return "0";
}

/// " (model.py:42)" for a file location, "" otherwise.
std::string describeLoc(Location loc) {
  if (auto f = dyn_cast<FileLineColLoc>(loc))
    return " (" + llvm::sys::path::filename(f.getFilename()).str() + ":" +
           std::to_string(f.getLine()) + ")";
  if (auto n = dyn_cast<NameLoc>(loc))
    return describeLoc(n.getChildLoc());
  return "";
}

//===----------------------------------------------------------------------===//
// Affine accesses: offset = base + sum_d index_d * strides[d]
//===----------------------------------------------------------------------===//

struct Access {
  std::string buf;
  int64_t base = 0;
  SmallVector<int64_t> strides; // one per dim of the loop shape
};

/// Strides of `operand` (shape `from`) seen through numpy broadcasting to `to`.
SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  SmallVector<int64_t> own = rowMajorStrides(from), out(to.size(), 0);
  size_t lead = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    out[lead + d] = from[d] == 1 && to[lead + d] != 1 ? 0 : own[d];
  return out;
}

/// Emits, inside a loop over linear index `i` of `shape`, the offsets
/// `<name>_off` of each access, and returns the offset expression per access.
SmallVector<std::string> emitOffsets(raw_ostream &os, ArrayRef<int64_t> shape,
                                     ArrayRef<Access> accesses, StringRef indent) {
  SmallVector<int64_t> contiguous = rowMajorStrides(shape);
  SmallVector<std::string> exprs;
  SmallVector<size_t> decoded;
  for (auto [n, a] : llvm::enumerate(accesses)) {
    if (a.base == 0 && ArrayRef<int64_t>(a.strides) == ArrayRef<int64_t>(contiguous)) {
      exprs.push_back("i");
    } else {
      exprs.push_back("o" + std::to_string(n));
      decoded.push_back(n);
    }
  }
  if (decoded.empty())
    return exprs;
  os << indent << "int64_t r = i;\n";
  for (size_t n : decoded)
    os << indent << "int64_t o" << n << " = " << accesses[n].base << ";\n";
  for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
    os << indent << "{ int64_t c = r % " << shape[d] << "; r /= " << shape[d] << ";";
    for (size_t n : decoded)
      if (accesses[n].strides[d] != 0)
        os << " o" << n << " += c * " << accesses[n].strides[d] << ";";
    os << " }\n";
  }
  return exprs;
}

//===----------------------------------------------------------------------===//
// The emitter
//===----------------------------------------------------------------------===//

class Emitter {
public:
  explicit Emitter(func::FuncOp fn) : fn(fn) {}
  FailureOr<EmittedSource> run();

private:
  // Kernel bodies. Each writes a complete `static void kN(...) {...}` given
  // parameter names in0.. (operands) and out0.. (results).
  LogicalResult emitKernel(Operation *op, raw_ostream &os);
  LogicalResult emitElementwise(Operation *op, StringRef expr, raw_ostream &os);
  void emitCopyLoop(raw_ostream &os, ArrayRef<int64_t> shape, const Access &dst,
                    const Access &src);
  LogicalResult emitMatmul(MatmulOp op, raw_ostream &os);
  LogicalResult emitLayerNorm(LayerNormOp op, raw_ostream &os);
  LogicalResult emitSoftmax(Operation *op, int64_t dim, bool log, raw_ostream &os);
  LogicalResult emitAttention(AttentionOp op, raw_ostream &os);
  LogicalResult emitCrossEntropy(CrossEntropyOp op, raw_ostream &os);
  LogicalResult emitReduce(Operation *op, ArrayRef<int64_t> dims, StringRef kind,
                           raw_ostream &os);

  std::string elemType(Value v) { return *cType(ttype(v).getElementType()); }
  /// The C pointer expression through which the entry reaches `v`.
  std::string pointerOf(Value v);

  func::FuncOp fn;
  DenseMap<Value, std::string> pointers; // for args, constants and aliases
  std::string constants;
  int64_t numConstants = 0;
};

std::string Emitter::pointerOf(Value v) {
  auto it = pointers.find(v);
  if (it != pointers.end())
    return it->second;
  Operation *def = v.getDefiningOp();
  auto offsets = def->getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttr);
  int64_t off = offsets[cast<OpResult>(v).getResultNumber()];
  return "(" + elemType(v) + "*)(arena + " + std::to_string(off) + ")";
}

FailureOr<EmittedSource> Emitter::run() {
  EmittedSource result;
  auto arena = fn->getAttrOfType<IntegerAttr>(kArenaBytesAttr);
  if (!arena)
    return fn.emitError("internal: code generation needs gpt-plan-memory first"), failure();
  result.arenaBytes = arena.getInt();

  std::string kernels, calls;
  llvm::raw_string_ostream ks(kernels), cs(calls);
  Block &body = fn.getBody().front();
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (!t || failed(cType(t.getElementType())))
      return fn.emitError("unsupported argument type ") << arg.getType(), failure();
    pointers[arg] = "(" + elemType(arg) + "*)args[" + std::to_string(i) + "]";
  }

  for (Operation &op : body) {
    for (Value v : op.getResults())
      if (failed(cType(ttype(v).getElementType())))
        return op.emitError("code generation does not support element type ")
                   << ttype(v).getElementType() << " yet",
               failure();
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [j, v] : llvm::enumerate(ret.getOperands()))
        cs << "  std::memcpy(results[" << j << "], " << pointerOf(v) << ", "
           << ttype(v).getNumElements() << " * sizeof(" << elemType(v) << "));\n";
      continue;
    }
    if (auto r = dyn_cast<ReshapeOp>(op)) {
      pointers[r.getResult()] = pointerOf(r.getX());
      continue;
    }
    if (auto c = dyn_cast<ConstantOp>(op)) {
      auto value = cast<DenseElementsAttr>(c.getValue());
      std::string name = "c" + std::to_string(numConstants++);
      Type et = c.getType().getElementType();
      llvm::raw_string_ostream cos(constants);
      cos << "static const " << elemType(c) << " " << name << "["
          << std::max<int64_t>(c.getType().getNumElements(), 1) << "] = {";
      int64_t n = 0;
      for (Attribute a : value.getValues<Attribute>())
        cos << (n++ ? ", " : "") << elementLiteral(a, et);
      cos << "};\n";
      pointers[c.getResult()] = "(" + elemType(c) + "*)" + name;
      continue;
    }
    std::string name = "k" + std::to_string(result.numKernels++) + "_" +
                       op.getName().stripDialect().str();
    ks << "// " << op.getName().getStringRef() << describeLoc(op.getLoc()) << "\n";
    ks << "static void " << name << "(";
    SmallVector<std::string> params;
    for (auto [j, v] : llvm::enumerate(op.getOperands()))
      params.push_back("const " + elemType(v) + "* __restrict in" + std::to_string(j));
    for (auto [j, v] : llvm::enumerate(op.getResults()))
      params.push_back(elemType(v) + "* __restrict out" + std::to_string(j));
    ks << llvm::join(params, ", ") << ") {\n";
    if (failed(emitKernel(&op, ks)))
      return failure();
    ks << "}\n\n";
    SmallVector<std::string> callArgs;
    for (Value v : op.getOperands())
      callArgs.push_back(pointerOf(v));
    for (Value v : op.getResults())
      callArgs.push_back(pointerOf(v));
    cs << "  " << name << "(" << llvm::join(callArgs, ", ") << ");\n";
  }

  llvm::raw_string_ostream os(result.code);
  os << "// Generated by gptc. One kernel per op; see docs/artifact.md.\n"
     << "#include \"gptc/prelude.h\"\n#include <cstring>\n\n"
     << "namespace {\n\n" << constants << (constants.empty() ? "" : "\n") << kernels
     << "} // namespace\n\n"
     << "GPTC_EXPORT int gptc_entry_abi(void) { return 1; }\n\n"
     << "GPTC_EXPORT const char* gptc_entry(void* const* args, void* const* results, "
        "void* arena_) {\n"
     << "  char* arena = static_cast<char*>(arena_);\n  (void)arena; (void)args;\n"
     << "  gptc::take_error();\n"
     << calls << "  return gptc::take_error();\n}\n";
  return result;
}

//===----------------------------------------------------------------------===//
// Kernel bodies
//===----------------------------------------------------------------------===//

/// out[i] = expr($0, $1, ...) over the result shape, operands broadcast.
LogicalResult Emitter::emitElementwise(Operation *op, StringRef expr, raw_ostream &os) {
  ArrayRef<int64_t> shape = ttype(op->getResult(0)).getShape();
  SmallVector<Access> accesses;
  for (auto [j, v] : llvm::enumerate(op->getOperands()))
    accesses.push_back({"in" + std::to_string(j), 0, broadcastStrides(ttype(v).getShape(), shape)});
  os << "  GPTC_FOR(i, " << ttype(op->getResult(0)).getNumElements() << ") {\n";
  SmallVector<std::string> offs = emitOffsets(os, shape, accesses, "    ");
  std::string body = expr.str();
  for (size_t j = 0; j < accesses.size(); ++j) {
    std::string load = "in" + std::to_string(j) + "[" + offs[j] + "]", key = "$" + std::to_string(j);
    for (size_t p; (p = body.find(key)) != std::string::npos;)
      body.replace(p, key.size(), load);
  }
  os << "    out0[i] = " << body << ";\n  }\n";
  return success();
}

void Emitter::emitCopyLoop(raw_ostream &os, ArrayRef<int64_t> shape, const Access &dst,
                           const Access &src) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  os << "  GPTC_FOR(i, " << n << ") {\n";
  SmallVector<std::string> offs = emitOffsets(os, shape, {dst, src}, "    ");
  os << "    " << dst.buf << "[" << offs[0] << "] = " << src.buf << "[" << offs[1] << "];\n  }\n";
}

LogicalResult Emitter::emitKernel(Operation *op, raw_ostream &os) {
  auto ew = [&](StringRef e) { return emitElementwise(op, e, os); };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](AddOp) { return ew("($0 + $1)"); })
      .Case([&](SubOp) { return ew("($0 - $1)"); })
      .Case([&](MulOp) { return ew("($0 * $1)"); })
      .Case([&](DivOp) { return ew("($0 / $1)"); })
      .Case([&](PowOp) { return ew("gptc::pow($0, $1)"); })
      .Case([&](MaxOp) { return ew("gptc::maximum($0, $1)"); })
      .Case([&](NegOp) { return ew("(-$0)"); })
      .Case([&](ExpOp) { return ew("gptc::exp($0)"); })
      .Case([&](LogOp) { return ew("gptc::log($0)"); })
      .Case([&](TanhOp) { return ew("gptc::tanh($0)"); })
      .Case([&](ErfOp) { return ew("gptc::erf($0)"); })
      .Case([&](SqrtOp) { return ew("gptc::sqrt($0)"); })
      .Case([&](RsqrtOp) { return ew("gptc::rsqrt($0)"); })
      .Case([&](GeluOp g) {
        return ew(g.getApproximate() == "tanh" ? "gptc::gelu_tanh($0)" : "gptc::gelu_erf($0)");
      })
      .Case([&](BroadcastOp) { return ew("$0"); })
      .Case([&](WhereOp) { return ew("($0 ? $1 : $2)"); })
      .Case([&](MaskedFillOp m) {
        return ew("($1 ? " + literal(m.getValue().convertToDouble(), m.getType().getElementType()) +
                  " : $0)");
      })
      .Case([&](ConvertOp c) {
        std::string t = elemType(c.getResult());
        return ew(t == "bool" ? "($0 != 0)" : "static_cast<" + t + ">($0)");
      })
      .Case([&](DropoutOp d) -> LogicalResult {
        return d.emitError("training-mode dropout (p > 0) is not supported by the code "
                           "generator yet; compile the model in eval mode or with dropout 0");
      })
      .Case([&](ArangeOp a) {
        os << "  GPTC_FOR(i, " << a.getType().getNumElements() << ") out0[i] = static_cast<"
           << elemType(a) << ">(" << (int64_t)a.getStart() << "LL + i * " << (int64_t)a.getStep()
           << "LL);\n";
        return success();
      })
      .Case([&](EmbeddingOp e) {
        int64_t v = e.getWeight().getType().getDimSize(0), c = e.getWeight().getType().getDimSize(1);
        os << "  GPTC_FOR(i, " << e.getIndices().getType().getNumElements() << ") {\n"
           << "    int64_t row = in1[i];\n"
           << "    if (row < 0 || row >= " << v << ") { gptc::report_error(\"embedding index "
           << "out of range\"); row = 0; }\n"
           << "    for (int64_t c = 0; c < " << c << "; ++c) out0[i * " << c << " + c] = in0[row * "
           << c << " + c];\n  }\n";
        return success();
      })
      .Case([&](TransposeOp t) {
        ArrayRef<int64_t> shape = t.getType().getShape();
        SmallVector<int64_t> in = rowMajorStrides(t.getX().getType().getShape()), src;
        for (int64_t p : t.getPerm())
          src.push_back(in[p]);
        emitCopyLoop(os, shape, {"out0", 0, rowMajorStrides(shape)}, {"in0", 0, src});
        return success();
      })
      .Case([&](SliceOp s) {
        ArrayRef<int64_t> shape = s.getType().getShape();
        SmallVector<int64_t> src = rowMajorStrides(s.getX().getType().getShape());
        int64_t dim = s.getDim(), base = (int64_t)s.getStart() * src[dim];
        src[dim] *= (int64_t)s.getStep();
        emitCopyLoop(os, shape, {"out0", 0, rowMajorStrides(shape)}, {"in0", base, src});
        return success();
      })
      .Case([&](SplitOp s) {
        SmallVector<int64_t> src = rowMajorStrides(s.getX().getType().getShape());
        int64_t dim = s.getDim(), start = 0;
        for (auto [j, r] : llvm::enumerate(s.getResults())) {
          ArrayRef<int64_t> shape = ttype(r).getShape();
          emitCopyLoop(os, shape, {"out" + std::to_string(j), 0, rowMajorStrides(shape)},
                       {"in0", start * src[dim], src});
          start += shape[dim];
        }
        return success();
      })
      .Case([&](ConcatOp c) {
        SmallVector<int64_t> dst = rowMajorStrides(c.getType().getShape());
        int64_t dim = c.getDim(), start = 0;
        for (auto [j, v] : llvm::enumerate(c.getInputs())) {
          ArrayRef<int64_t> shape = ttype(v).getShape();
          emitCopyLoop(os, shape, {"out0", start * dst[dim], dst},
                       {"in" + std::to_string(j), 0, rowMajorStrides(shape)});
          start += shape[dim];
        }
        return success();
      })
      .Case([&](MatmulOp m) { return emitMatmul(m, os); })
      .Case([&](LayerNormOp l) { return emitLayerNorm(l, os); })
      .Case([&](SoftmaxOp s) { return emitSoftmax(s, s.getDim(), false, os); })
      .Case([&](LogSoftmaxOp s) { return emitSoftmax(s, s.getDim(), true, os); })
      .Case([&](AttentionOp a) { return emitAttention(a, os); })
      .Case([&](CrossEntropyOp c) { return emitCrossEntropy(c, os); })
      .Case([&](ReduceSumOp r) { return emitReduce(r, r.getDims(), "sum", os); })
      .Case([&](ReduceMaxOp r) { return emitReduce(r, r.getDims(), "max", os); })
      .Case([&](ReduceMeanOp r) { return emitReduce(r, r.getDims(), "mean", os); })
      .Default([&](Operation *o) -> LogicalResult {
        return o->emitError("code generation does not support '")
               << o->getName().getStringRef() << "' yet";
      });
}

/// out[b, m, n] = sum_k lhs[b, m, k] * rhs[(b,) k, n], k increasing, with fma.
LogicalResult Emitter::emitMatmul(MatmulOp op, raw_ostream &os) {
  auto a = op.getLhs().getType(), b = op.getRhs().getType(), r = op.getType();
  int64_t ra = a.getRank(), rb = b.getRank();
  int64_t m = r.getDimSize(ra - 2), n = r.getDimSize(ra - 1);
  int64_t k = op.getTransposeLhs() ? a.getDimSize(ra - 2) : a.getDimSize(ra - 1);
  int64_t batch = r.getNumElements() / (m * n);
  // Element strides of (row, k) in lhs and (k, col) in rhs.
  int64_t aRow = op.getTransposeLhs() ? 1 : k, aK = op.getTransposeLhs() ? m : 1;
  int64_t bK = op.getTransposeRhs() ? 1 : n, bCol = op.getTransposeRhs() ? k : 1;
  int64_t bBatch = rb == 2 ? 0 : k * n;
  os << "  GPTC_FOR(i, " << r.getNumElements() << ") {\n"
     << "    int64_t col = i % " << n << ", row = (i / " << n << ") % " << m << ", bat = i / "
     << m * n << ";\n"
     << "    const " << elemType(op.getLhs()) << "* a = in0 + bat * " << m * k << " + row * "
     << aRow << ";\n"
     << "    const " << elemType(op.getRhs()) << "* b = in1 + bat * " << bBatch << " + col * "
     << bCol << ";\n"
     << "    out0[i] = gptc::dot_seq<" << elemType(op.getResult()) << ">(" << k
     << ", [&](int64_t kk) { return a[kk * " << aK << "]; }, [&](int64_t kk) { return b[kk * "
     << bK << "]; });\n  }\n";
  (void)batch;
  return success();
}

/// Per row of C: mean, biased variance (canonical sums), normalize, affine.
LogicalResult Emitter::emitLayerNorm(LayerNormOp op, raw_ostream &os) {
  auto t = op.getType();
  int64_t c = t.getShape().back(), rows = t.getNumElements() / c;
  std::string T = elemType(op.getResult());
  bool hasW = (bool)op.getWeight(), hasB = (bool)op.getBias();
  std::string w = hasW ? "in1" : "", bias = hasB ? (hasW ? "in2" : "in1") : "";
  os << "  GPTC_FOR(row, " << rows << ") {\n"
     << "    const " << T << "* x = in0 + row * " << c << ";\n"
     << "    " << T << "* y = out0 + row * " << c << ";\n"
     << "    " << T << " mean = gptc::reduce_sum<" << T << ">(" << c
     << ", [&](int64_t k) { return x[k]; }) / " << T << "(" << c << ");\n"
     << "    " << T << " var = gptc::reduce_sum<" << T << ">(" << c
     << ", [&](int64_t k) { " << T << " d = x[k] - mean; return d * d; }) / " << T << "(" << c
     << ");\n"
     << "    " << T << " rstd = " << T << "(1) / gptc::sqrt(var + "
     << literal(op.getEps().convertToDouble(), t.getElementType()) << ");\n"
     << "    for (int64_t k = 0; k < " << c << "; ++k) {\n"
     << "      " << T << " v = (x[k] - mean) * rstd;\n";
  if (hasW)
    os << "      v = v * " << w << "[k];\n";
  if (hasB)
    os << "      v = v + " << bias << "[k];\n";
  os << "      y[k] = v;\n    }\n  }\n";
  return success();
}

/// Along `dim` (size D, inner stride I): max, sum of exp(x - max), normalize.
LogicalResult Emitter::emitSoftmax(Operation *op, int64_t dim, bool log, raw_ostream &os) {
  auto t = ttype(op->getResult(0));
  std::string T = elemType(op->getResult(0));
  int64_t d = t.getDimSize(dim), inner = rowMajorStrides(t.getShape())[dim];
  int64_t rows = t.getNumElements() / d;
  os << "  GPTC_FOR(r, " << rows << ") {\n"
     << "    int64_t base = (r / " << inner << ") * " << d * inner << " + r % " << inner << ";\n"
     << "    const " << T << "* x = in0 + base;\n    " << T << "* y = out0 + base;\n"
     << "    " << T << " m = gptc::reduce_max<" << T << ">(" << d << ", [&](int64_t k) { return x[k * "
     << inner << "]; });\n"
     << "    " << T << " s = gptc::reduce_sum<" << T << ">(" << d
     << ", [&](int64_t k) { return gptc::exp(x[k * " << inner << "] - m); });\n";
  if (log)
    os << "    " << T << " ls = gptc::log(s);\n"
       << "    for (int64_t k = 0; k < " << d << "; ++k) y[k * " << inner << "] = x[k * " << inner
       << "] - m - ls;\n";
  else
    os << "    for (int64_t k = 0; k < " << d << "; ++k) y[k * " << inner
       << "] = gptc::exp(x[k * " << inner << "] - m) / s;\n";
  os << "  }\n";
  return success();
}

/// Online softmax over key blocks of 32 (order online_block32), per query row.
LogicalResult Emitter::emitAttention(AttentionOp op, raw_ostream &os) {
  if (op.getDropoutP().convertToDouble() != 0.0)
    return op.emitError("attention dropout (dropout_p > 0) is not supported by the code "
                        "generator yet; compile the model in eval mode");
  auto q = op.getQ().getType(), k = op.getK().getType(), v = op.getV().getType();
  int64_t T = q.getDimSize(2), D = q.getDimSize(3), S = k.getDimSize(2), Dv = v.getDimSize(3);
  std::string E = elemType(op.getResult());
  std::string keys = op.getIsCausal() ? "(t + 1 < " + std::to_string(S) + " ? t + 1 : " +
                                            std::to_string(S) + ")"
                                      : std::to_string(S);
  os << "  GPTC_FOR(r, " << op.getType().getNumElements() / Dv << ") {\n"
     << "    int64_t t = r % " << T << ", bh = r / " << T << ";\n"
     << "    const " << E << "* qr = in0 + r * " << D << ";\n"
     << "    const " << E << "* kb = in1 + bh * " << S * D << ";\n"
     << "    const " << E << "* vb = in2 + bh * " << S * Dv << ";\n"
     << "    " << E << "* y = out0 + r * " << Dv << ";\n"
     << "    " << E << " m = -INFINITY, l = 0, acc[" << Dv << "], p[32];\n"
     << "    for (int64_t c = 0; c < " << Dv << "; ++c) acc[c] = 0;\n"
     << "    const int64_t keys = " << keys << ";\n"
     << "    for (int64_t j0 = 0; j0 < keys; j0 += 32) {\n"
     << "      const int64_t nb = keys - j0 < 32 ? keys - j0 : 32;\n"
     << "      " << E << " mb = -INFINITY;\n"
     << "      for (int64_t j = 0; j < nb; ++j) {\n"
     << "        const " << E << "* kr = kb + (j0 + j) * " << D << ";\n"
     << "        p[j] = gptc::dot_seq<" << E << ">(" << D
     << ", [&](int64_t c) { return qr[c]; }, [&](int64_t c) { return kr[c]; }) * "
     << literal(op.getScale().convertToDouble(), q.getElementType()) << ";\n"
     << "        mb = gptc::maximum(mb, p[j]);\n      }\n"
     << "      " << E << " mn = gptc::maximum(m, mb);\n"
     << "      " << E << " corr = gptc::exp(m - mn);\n"
     << "      " << E << " bsum = 0;\n"
     << "      for (int64_t j = 0; j < nb; ++j) { p[j] = gptc::exp(p[j] - mn); bsum = bsum + p[j]; }\n"
     << "      l = l * corr + bsum;\n"
     << "      for (int64_t c = 0; c < " << Dv << "; ++c) {\n"
     << "        " << E << " s = 0;\n"
     << "        for (int64_t j = 0; j < nb; ++j) s = gptc::fma(p[j], vb[(j0 + j) * " << Dv
     << " + c], s);\n"
     << "        acc[c] = acc[c] * corr + s;\n      }\n"
     << "      m = mn;\n    }\n"
     << "    for (int64_t c = 0; c < " << Dv << "; ++c) y[c] = acc[c] / l;\n  }\n";
  return success();
}

/// loss = sum over kept rows of (logsumexp(row) - row[target]) / kept rows.
LogicalResult Emitter::emitCrossEntropy(CrossEntropyOp op, raw_ostream &os) {
  auto l = op.getLogits().getType();
  int64_t n = l.getDimSize(0), v = l.getDimSize(1), ignore = (int64_t)op.getIgnoreIndex();
  std::string T = elemType(op.getResult());
  os << "  int64_t kept = 0;\n"
     << "  for (int64_t r = 0; r < " << n << "; ++r) {\n"
     << "    int64_t t = in1[r];\n"
     << "    if (t == " << ignore << "LL) continue;\n"
     << "    if (t < 0 || t >= " << v << ") gptc::report_error(\"cross_entropy target out of range\");\n"
     << "    ++kept;\n  }\n"
     << "  " << T << " total = gptc::reduce_sum<" << T << ">(" << n << ", [&](int64_t r) -> " << T
     << " {\n"
     << "    int64_t t = in1[r];\n"
     << "    if (t == " << ignore << "LL || t < 0 || t >= " << v << ") return 0;\n"
     << "    const " << T << "* x = in0 + r * " << v << ";\n"
     << "    " << T << " m = gptc::reduce_max<" << T << ">(" << v
     << ", [&](int64_t k) { return x[k]; });\n"
     << "    " << T << " s = gptc::reduce_sum<" << T << ">(" << v
     << ", [&](int64_t k) { return gptc::exp(x[k] - m); });\n"
     << "    return gptc::log(s) + m - x[t];\n  });\n"
     << "  out0[0] = total / " << T << "(kept);\n";
  return success();
}

/// Reduces `dims` of in0; elements visited in row-major order of those dims.
LogicalResult Emitter::emitReduce(Operation *op, ArrayRef<int64_t> dims, StringRef kind,
                                  raw_ostream &os) {
  auto x = ttype(op->getOperand(0));
  std::string T = elemType(op->getResult(0));
  SmallVector<int64_t> strides = rowMajorStrides(x.getShape());
  SmallVector<int64_t> keptShape, keptStrides, redShape, redStrides;
  for (int64_t d = 0; d < x.getRank(); ++d) {
    bool reduced = llvm::is_contained(dims, d);
    (reduced ? redShape : keptShape).push_back(x.getDimSize(d));
    (reduced ? redStrides : keptStrides).push_back(strides[d]);
  }
  int64_t outN = 1, redN = 1;
  for (int64_t s : keptShape)
    outN *= s;
  for (int64_t s : redShape)
    redN *= s;
  os << "  GPTC_FOR(i, " << outN << ") {\n";
  SmallVector<std::string> base = emitOffsets(os, keptShape, {{"in0", 0, keptStrides}}, "    ");
  os << "    const " << T << "* x = in0 + " << base[0] << ";\n"
     << "    " << T << " v = gptc::reduce_" << (kind == "max" ? "max" : "sum") << "<" << T << ">("
     << redN << ", [&](int64_t i) {\n";
  SmallVector<std::string> inner = emitOffsets(os, redShape, {{"x", 0, redStrides}}, "      ");
  os << "      return x[" << inner[0] << "];\n    });\n";
  if (kind == "mean")
    os << "    v = v / " << T << "(" << redN << ");\n";
  os << "    out0[i] = v;\n  }\n";
  return success();
}

} // namespace

FailureOr<EmittedSource> mlir::gpt::emitSource(func::FuncOp fn, Target) {
  return Emitter(fn).run();
}
