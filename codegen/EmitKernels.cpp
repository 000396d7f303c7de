//===- EmitKernels.cpp - gpt ops -> kernels, shared by every target -------===//
//
// One kernel per op. A kernel is a function of typed pointers (in0.., out0..)
// whose body is a GPTC_FOR loop over independent outputs; reductions inside a
// body go through the prelude's canonical helpers (gptc::reduce_sum,
// gptc::reduce_max, gptc::dot_seq), so the order of every floating-point sum
// is the one the op's `order` attribute names.
//
//===----------------------------------------------------------------------===//
#include "codegen/Emitter.h"

#include "ir/GptDialect.h"
#include "ir/KernelLevel.h"
#include "ir/Signature.h"

#include "llvm/ADT/SmallVectorExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

using namespace mlir;
using namespace mlir::gpt;

namespace mlir::gpt::emit {

//===----------------------------------------------------------------------===//
// Types, shapes and literals
//===----------------------------------------------------------------------===//

RankedTensorType ttype(Value v) { return cast<RankedTensorType>(v.getType()); }

/// " (model.py:42)" for a file location, "" otherwise; it goes into a // comment of the
/// generated source, so the file name keeps only characters that cannot end the comment
/// or continue it (a newline in a location's name pasted code into kernels.cpp).
std::string describeLoc(Location loc) {
  if (auto f = dyn_cast<FileLineColLoc>(loc)) {
    std::string file = llvm::sys::path::filename(f.getFilename()).str();
    for (char &c : file)
      if (!llvm::isAlnum(c) && !StringRef("._+-").contains(c))
        c = '_';
    return " (" + file + ":" + std::to_string(f.getLine()) + ")";
  }
  if (auto n = dyn_cast<NameLoc>(loc))
    return describeLoc(n.getChildLoc());
  return "";
}

//===----------------------------------------------------------------------===//
// Affine accesses: offset = base + sum_d index_d * strides[d]
//===----------------------------------------------------------------------===//


std::string elementList(DenseElementsAttr value, Type elem) {
  std::string list;
  for (Attribute a : value.getValues<Attribute>())
    list += (list.empty() ? "" : ", ") + elementLiteral(a, elem);
  return list;
}

/// Strides `own` of an operand of shape `from` seen through numpy broadcasting to `to`.
static SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> from, ArrayRef<int64_t> own,
                                             ArrayRef<int64_t> to) {
  SmallVector<int64_t> out(to.size(), 0);
  size_t lead = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    out[lead + d] = from[d] == 1 && to[lead + d] != 1 ? 0 : own[d];
  return out;
}

/// The value that `v` stands for: itself, or for a block argument of a gpt.horizontal the
/// group's operand.
Value outerValue(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    if (auto h = dyn_cast<HorizontalOp>(arg.getOwner()->getParentOp()))
      return h->getOperand(arg.getArgNumber());
  return v;
}

/// The value that `r`, a result computed inside a gpt.horizontal, is outside it.
Value outerResult(Value r) {
  for (OpOperand &use : r.getUses())
    if (isa<YieldOp>(use.getOwner()))
      if (auto h = dyn_cast<HorizontalOp>(use.getOwner()->getParentOp()))
        return h->getResult(use.getOperandNumber());
  return r;
}

Access Emitter::resultAccess(Value r, StringRef buf) {
  ArrayRef<int64_t> shape = ttype(r).getShape();
  std::optional<StridedView> view = writtenView(outerResult(r));
  if (!view) // gpt-strided-views gathers no op whose operands have no strides
    view = StridedView{r, 0, rowMajorStrides(shape)};
  return {buf.str(), view->base, view->strides};
}

Access Emitter::operandAccess(Value v, StringRef buf, ArrayRef<int64_t> shape) {
  ArrayRef<int64_t> from = ttype(v).getShape();
  std::optional<StridedView> view = stridedView(outerValue(v));
  if (!view) // gpt-strided-views marks no view that has no strides
    view = StridedView{v, 0, rowMajorStrides(from)};
  return {buf.str(), view->base, broadcastStrides(from, view->strides, shape)};
}

/// Row and column of an element of a row's sum or of a row loop (openElementLoop).
static const RowSplit kRowColumn{"gptc_row", "gptc_col"};

/// Whether `a` reads or writes the dense buffer of the loop's shape, whose row-major
/// strides are `dense`: its offset is the element's linear index.
static bool isDense(const Access &a, ArrayRef<int64_t> dense) {
  return a.base == 0 && ArrayRef<int64_t>(a.strides) == dense;
}

/// Emits, inside a loop over linear index `i` of `shape`, the offsets
/// `<name>_off` of each access, and returns the offset expression per access.
SmallVector<std::string> emitOffsets(raw_ostream &os, ArrayRef<int64_t> shape,
                                     ArrayRef<Access> accesses, StringRef indent,
                                     const RowSplit *split) {
  SmallVector<int64_t> contiguous = rowMajorStrides(shape);
  SmallVector<std::string> exprs;
  SmallVector<size_t> decoded;
  for (auto [n, a] : llvm::enumerate(accesses)) {
    if (isDense(a, contiguous)) {
      exprs.push_back("i");
    } else {
      exprs.push_back("o" + std::to_string(n));
      decoded.push_back(n);
    }
  }
  if (decoded.empty())
    return exprs;
  const int64_t last = (int64_t)shape.size() - 1;
  const int64_t innermost = split ? last - 1 : last; // the first dim decoded from r
  auto moves = [&](int64_t d) {
    return llvm::any_of(decoded, [&](size_t n) { return accesses[n].strides[d] != 0; });
  };
  // The outermost dim some access moves along: the decoding stops there.
  int64_t outermost = 0;
  while (outermost <= innermost && !moves(outermost))
    ++outermost;
  if (outermost <= innermost)
    os << indent << "int64_t r = " << (split ? split->row : "i") << ";\n";
  for (size_t n : decoded)
    os << indent << "int64_t o" << n << " = " << accesses[n].base << ";\n";
  if (split && last >= 0) {
    for (size_t n : decoded)
      if (accesses[n].strides[last] != 0)
        os << indent << "o" << n << " += " << split->col << " * " << accesses[n].strides[last]
           << ";\n";
  }
  for (int64_t d = innermost; d >= outermost; --d) {
    // A dim no access moves along is only divided out.
    if (!moves(d)) {
      os << indent << "r /= " << shape[d] << ";\n";
      continue;
    }
    os << indent << "{ int64_t c = r % " << shape[d] << "; r /= " << shape[d] << ";";
    for (size_t n : decoded)
      if (accesses[n].strides[d] != 0)
        os << " o" << n << " += c * " << accesses[n].strides[d] << ";";
    os << " }\n";
  }
  return exprs;
}


std::string Emitter::pointerOf(Value v) {
  auto it = pointers.find(v);
  if (it != pointers.end())
    return it->second;
  Operation *def = v.getDefiningOp();
  unsigned n = cast<OpResult>(v).getResultNumber();
  if (auto inPlace = def->getAttrOfType<DenseI64ArrayAttr>(kInPlaceAttr); inPlace && inPlace[n] >= 0)
    return "(" + elemType(v) + "*)args[" + std::to_string(inPlace[n]) + "]";
  auto offsets = def->getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttr);
  int64_t off = offsets[n];
  return "(" + elemType(v) + "*)(arena + " + std::to_string(off) + ")";
}

/// A kernel's text without its comments (source locations) and with its name replaced:
/// two kernels with the same such text compute the same thing.
static std::string kernelCode(StringRef text, StringRef name) {
  std::string code;
  SmallVector<StringRef> lines;
  text.split(lines, '\n');
  for (StringRef line : lines)
    if (!line.starts_with("//")) {
      std::string l = line.str();
      for (size_t at = 0; (at = l.find(name.str(), at)) != std::string::npos;)
        l.replace(at, name.size(), "$KERNEL");
      code += l + "\n";
    }
  return code;
}

/// A view's range lies within its whole buffer's, so every op's results count as written.
std::string Flavour::redzoneGuard(int64_t arenaBytes,
                                  ArrayRef<std::pair<int64_t, int64_t>> alsoHeld) {
  if (!e.fn->hasAttr(kRedzoneAttr))
    return "";
  std::vector<std::pair<int64_t, int64_t>> held(alsoHeld.begin(), alsoHeld.end());
  e.fn.walk([&](Operation *op) {
    auto offsets = op->getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttr);
    if (!offsets)
      return;
    for (auto [off, r] : llvm::zip(offsets.asArrayRef(), op->getResults()))
      if (off >= 0)
        held.push_back({off, off + byteSize(r)});
  });
  llvm::sort(held);
  std::string table;
  int64_t at = 0, gaps = 0;
  held.push_back({arenaBytes, arenaBytes});
  for (auto [begin, end] : held) {
    if (begin > at) {
      table += "{" + std::to_string(at) + ", " + std::to_string(begin - at) + "}, ";
      ++gaps;
    }
    at = std::max(at, end);
  }
  if (!gaps)
    return "";
  table.resize(table.size() - 2);
  return "  // gptc compile --sanitize: the bytes between buffers, poisoned while the step "
         "runs.\n"
         "  static const int64_t redzones[][2] = {" + table + "};\n"
         "  gptc::ArenaRedzones guard(arena, " + std::to_string(arenaBytes) + ", redzones, " +
         std::to_string(gaps) + ");\n";
}

Emitter::Emitter(func::FuncOp fn, Target target)
    : fn(fn), target(target),
      flavour(target == Target::Cpu ? makeCpuFlavour(*this) : makeCudaFlavour(*this)) {}

FailureOr<EmittedSource> Emitter::run() {
  EmittedSource result;
  result.target = target;
  auto arena = fn->getAttrOfType<IntegerAttr>(kArenaBytesAttr);
  if (!arena)
    return fn.emitError("internal: code generation needs gpt-plan-memory first"), failure();
  result.arenaBytes = arena.getInt();

  std::string kernels, calls;
  llvm::raw_string_ostream ks(kernels), cs(calls);
  llvm::StringMap<std::string> kernelsByCode;  // kernelCode -> the kernel's name
  Block &body = fn.getBody().front();
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (!t || failed(cType(t.getElementType())))
      return fn.emitError("unsupported argument type ") << arg.getType(), failure();
    pointers[arg] = "(" + elemType(arg) + "*)args[" + std::to_string(i) + "]";
    if (auto name = argName(fn, i))
      argByName[name.getValue()] = i;
  }

  for (Operation &op : body) {
    // (inside gpt.fused and gpt.horizontal bodies too)
    WalkResult types = op.walk([&](Operation *inner) {
      for (Value v : inner->getResults())
        if (failed(cType(ttype(v).getElementType()))) {
          inner->emitError("code generation does not support element type ")
              << ttype(v).getElementType() << " yet";
          return WalkResult::interrupt();
        }
      return WalkResult::advance();
    });
    if (types.wasInterrupted())
      return failure();
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      // Results that update a persistent argument (parameters, optimizer state) are
      // written back into it; the others go to the caller's result buffers.
      int64_t next = 0;
      for (auto [j, v] : llvm::enumerate(ret.getOperands())) {
        std::string dst = "results[" + std::to_string(next) + "]";
        if (auto target = resultUpdates(fn, j)) {
          auto it = argByName.find(target.getValue());
          if (it == argByName.end())
            return fn.emitError("result updates unknown argument '") << target.getValue() << "'",
                   failure();
          if (fn.getArgument(it->second).getType() != v.getType())
            return fn.emitError("result #") << j << " of type " << v.getType()
                                            << " updates argument '" << target.getValue()
                                            << "' of type " << fn.getArgument(it->second).getType(),
                   failure();
          dst = "args[" + std::to_string(it->second) + "]";
        } else {
          ++next;
        }
        std::string src = pointerOf(v);
        if (src == "(" + elemType(v) + "*)" + dst)
          continue; // updated in place
        cs << flavour->resultCopy(dst, src, ttype(v).getNumElements(), elemType(v));
      }
      continue;
    }
    if (isa<ReshapeOp, StopGradientOp>(op) || op.hasAttr(kStridedAttr)) {
      // Its readers index the operand's buffer (operandAccess).
      for (Value r : op.getResults())
        pointers[r] = pointerOf(op.getOperand(0));
      continue;
    }
    if (op.hasAttr(kViewAttr) || op.hasAttr(kGatheredAttr))
      continue; // a concat that attention's gradient writes in place, or a gather

    if (auto c = dyn_cast<ConstantOp>(op)) {
      pointers[c.getResult()] = flavour->constant(c, "c" + std::to_string(numConstants++));
      continue;
    }
    std::string name = "k" + std::to_string(result.numKernels++) + "_" +
                       op.getName().stripDialect().str();
    aliasing = op.hasAttr(kInPlaceAttr);
    std::string text;
    llvm::raw_string_ostream ts(text);
    if (auto h = dyn_cast<HorizontalOp>(op)) {
      if (failed(emitHorizontal(h, name, ts)))
        return failure();
    } else if (failed(flavour->function(name, &op, ts))) {
      return failure();
    }
    aliasing = false;
    // A kernel whose code is an earlier one's (each layer's, most often) calls that one:
    // the same text is the same computation, and the host compiler builds it once.
    auto [first, fresh] = kernelsByCode.try_emplace(kernelCode(text, name), name);
    if (fresh)
      ks << text;
    else
      name = first->second;
    SmallVector<std::string> callArgs;
    for (Value v : op.getOperands())
      callArgs.push_back(pointerOf(v));
    for (Value v : op.getResults())
      callArgs.push_back(pointerOf(v));
    cs << flavour->call(name, llvm::join(callArgs, ", "), &op);
  }

  result.arenaBytes = flavour->arenaBytes(result.arenaBytes);
  llvm::raw_string_ostream os(result.code);
  flavour->file(os, kernels, calls, idChecks(), result.arenaBytes);
  return result;
}

/// The function argument `v` is, through views (reshape, stop_gradient) and horizontal
/// groups' block arguments, or null.
static BlockArgument functionArgument(Value v) {
  while (true) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (isa<func::FuncOp>(arg.getOwner()->getParentOp()))
        return arg;
      Value outer = outerValue(arg);
      if (outer == v) // a block argument of neither the function nor a group
        return nullptr;
      v = outer;
    } else if (isa_and_nonnull<ReshapeOp, StopGradientOp>(v.getDefiningOp())) {
      v = v.getDefiningOp()->getOperand(0);
    } else {
      return nullptr;
    }
  }
}

bool Emitter::checkedAtEntry(Value ids) { return (bool)functionArgument(ids); }

/// The caller's embedding indices and cross-entropy targets, each checked once at the
/// entry before any kernel runs (each flavour says how).
std::vector<IdCheck> Emitter::idChecks() {
  std::vector<IdCheck> checks;
  auto check = [&](Value ids, int64_t bound, std::optional<int64_t> ignore, StringRef what) {
    BlockArgument arg = functionArgument(ids);
    if (!arg)
      return;
    auto same = [&](const IdCheck &c) {
      return c.arg == arg.getArgNumber() && c.bound == bound && c.ignore == ignore;
    };
    if (llvm::none_of(checks, same))
      checks.push_back({arg.getArgNumber(),
                        cast<RankedTensorType>(arg.getType()).getNumElements(), bound, ignore,
                        what.str()});
  };
  auto targets = [&](auto c) {  // cross_entropy and its gradient alike
    check(c.getTargets(), c.getLogits().getType().getDimSize(1), (int64_t)c.getIgnoreIndex(),
          "cross_entropy target");
  };
  fn.walk([&](Operation *op) {
    if (auto e = dyn_cast<EmbeddingOp>(op))
      check(e.getIndices(), e.getWeight().getType().getDimSize(0), std::nullopt, "embedding index");
    else if (auto g = dyn_cast<EmbeddingGradOp>(op))
      check(g.getIndices(), g.getType().getDimSize(0), std::nullopt, "embedding index");
    else if (auto c = dyn_cast<CrossEntropyOp>(op))
      targets(c);
    else if (auto c = dyn_cast<CrossEntropyGradOp>(op))
      targets(c);
  });
  return checks;
}

std::string Emitter::signature(const std::string &name, ValueRange ins, ValueRange outs) {
  // A kernel that updates an argument in place reads and writes the same buffer: no
  // __restrict on any of its pointers then.
  std::string restrict = aliasing ? "* " : "* __restrict ";
  SmallVector<std::string> params;
  for (auto [j, v] : llvm::enumerate(ins))
    params.push_back("const " + elemType(v) + restrict + "in" + std::to_string(j));
  for (auto [j, v] : llvm::enumerate(outs))
    params.push_back(elemType(v) + restrict + "out" + std::to_string(j));
  return "static void " + name + "(" + llvm::join(params, ", ") + ")";
}

/// Each member as a function whose loop shares the caller's parallel region, then the
/// kernel: one GPTC_PARALLEL region calling the members in order; or, for a target without
/// parallel regions, whatever its flavour makes of the group (Flavour::group).
LogicalResult Emitter::emitHorizontal(HorizontalOp op, const std::string &name,
                                      raw_ostream &os) {
  Block &body = op.getBody().front();
  DenseMap<Value, std::string> names;
  for (auto [j, arg] : llvm::enumerate(body.getArguments()))
    names[arg] = "in" + std::to_string(j);
  for (auto [j, v] : llvm::enumerate(body.getTerminator()->getOperands()))
    names[v] = "out" + std::to_string(j);
  SmallVector<GroupMember> members;
  for (auto [m, member] : llvm::enumerate(body.without_terminator())) {
    GroupMember g{&member, name + "_" + std::to_string(m) + "_" +
                               member.getName().stripDialect().str(), {}};
    for (Value v : member.getOperands())
      g.args.push_back(names.lookup(v));
    for (Value v : member.getResults())
      g.args.push_back(names.lookup(v));
    members.push_back(std::move(g));
  }
  if (!flavour->parallelRegions())
    return flavour->group(op, name, members, names, os);
  std::string calls;
  inRegion = true;
  for (const GroupMember &m : members) {
    if (failed(flavour->function(m.name, m.op, os)))
      return inRegion = false, failure();
    calls += "    " + m.name + "(" + llvm::join(m.args, ", ") + ");\n";
  }
  inRegion = false;
  os << "// gpt.horizontal" << describeLoc(op.getLoc()) << ": one parallel region\n";
  os << signature(name, op.getInputs(), op.getResults()) << " {\n  GPTC_PARALLEL {\n" << calls
     << "  }\n}\n\n";
  return success();
}

//===----------------------------------------------------------------------===//
// Kernel bodies
//===----------------------------------------------------------------------===//

/// Substitutes `$j` in `expr` by names[j].
std::string substitute(std::string expr, ArrayRef<std::string> names) {
  for (size_t j = names.size(); j-- > 0;) {
    std::string key = "$" + std::to_string(j);
    for (size_t p; (p = expr.find(key)) != std::string::npos;)
      expr.replace(p, key.size(), names[j]);
  }
  return expr;
}

std::string Emitter::openElementLoop(raw_ostream &os, ArrayRef<int64_t> shape,
                                     ArrayRef<Access> accesses) {
  const int64_t n = ShapedType::getNumElements(shape);
  SmallVector<int64_t> dense = rowMajorStrides(shape);
  auto decoded = [&](const Access &a) { // neither the dense buffer nor one element
    bool scalar = llvm::all_of(a.strides, [](int64_t s) { return s == 0; });
    return !scalar && !isDense(a, dense);
  };
  bool rows = flavour->rowLoops() && shape.size() >= 2 && shape.back() >= 8 &&
              n / shape.back() >= 64 && llvm::any_of(accesses, decoded);
  if (!rows) {
    os << "  " << loop("i", n, /*simd=*/true) << " {\n";
    return "    ";
  }
  const int64_t len = shape.back();
  os << "  " << loop(kRowColumn.row, n / len) << " {\n"
     << "    GPTC_SIMD for (int64_t " << kRowColumn.col << " = 0; " << kRowColumn.col
     << " < " << len << "; ++" << kRowColumn.col << ") {\n"
     << "      [[maybe_unused]] const int64_t i = " << kRowColumn.row << " * " << len
     << " + " << kRowColumn.col << ";\n";
  rowSplit = &kRowColumn;
  return "      ";
}

void Emitter::closeElementLoop(raw_ostream &os) {
  os << (rowSplit ? "    }\n  }\n" : "  }\n");
  rowSplit = nullptr;
}

/// out[i] = expr($0, $1, ...) over the result shape, operands broadcast.
LogicalResult Emitter::emitElementwise(Operation *op, StringRef expr, raw_ostream &os) {
  ArrayRef<int64_t> shape = ttype(op->getResult(0)).getShape();
  SmallVector<Access> accesses;
  for (auto [j, v] : llvm::enumerate(op->getOperands()))
    accesses.push_back(operandAccess(v, "in" + std::to_string(j), shape));
  accesses.push_back(resultAccess(op->getResult(0), "out0"));
  std::string indent = openElementLoop(os, shape, accesses);
  SmallVector<std::string> offs = emitOffsets(os, shape, accesses, indent, rowSplit);
  SmallVector<std::string> loads;
  for (size_t j = 0; j + 1 < accesses.size(); ++j)
    loads.push_back("in" + std::to_string(j) + "[" + offs[j] + "]");
  os << indent << "out0[" << offs.back() << "] = " << substitute(expr.str(), loads) << ";\n";
  closeElementLoop(os);
  return success();
}

/// Inside a loop whose linear index over `shape` is `i`: loads the inputs of `op` that
/// the body ops of `phase` read (broadcast) and evaluates those ops as scalars, in order;
/// `names` holds the C names of values computed before (the sum, the epilogue's). Names
/// loaded inputs `<argPrefix>j` and computed values `<valPrefix>n`. The prologue (every op
/// of a body without a sum) loads every input but those only later phases read. Returns
/// the C name of every body value known after it.
FailureOr<DenseMap<Value, std::string>> Emitter::emitFusedBody(FusedOp op, ArrayRef<int64_t> shape,
                                                               raw_ostream &os, StringRef indent,
                                                               FusedOp::Phase phase,
                                                               DenseMap<Value, std::string> names,
                                                               StringRef argPrefix,
                                                               StringRef valPrefix) {
  using Phase = FusedOp::Phase;
  Block &body = op.getBody().front();
  // The ops of the row's shape recompute the values of the sum's elements they read (the
  // same expressions of the same element: the same bits), and what those read in turn.
  llvm::SmallPtrSet<Operation *, 16> again;
  if (phase == Phase::Post)
    for (Operation &o : llvm::reverse(body.without_terminator()))
      if (!isa<ReduceSumOp>(o) && (op.phaseOf(&o) == Phase::Post || again.contains(&o)))
        for (Value v : o.getOperands())
          if (Operation *def = v.getDefiningOp();
              def && !isa<ReduceSumOp>(def) && op.phaseOf(def) == Phase::Prologue)
            again.insert(def);
  auto inPhase = [&](Operation *u) {
    return !isa<ReduceSumOp, YieldOp>(u) && (op.phaseOf(u) == phase || again.contains(u));
  };
  // A dropout's [seed, step] is read whole by the dropout, not element by element.
  auto isRng = [](BlockArgument arg) {
    return llvm::all_of(arg.getUsers(), [&](Operation *u) {
      auto d = dyn_cast<DropoutOp>(u);
      return d && d.getRng() == arg;
    });
  };
  SmallVector<Access> accesses;
  SmallVector<unsigned> loaded; // the inputs read element by element
  for (auto [j, v] : llvm::enumerate(op.getInputs())) {
    BlockArgument arg = body.getArgument(j);
    bool read = phase == Phase::Prologue
                    ? arg.use_empty() || llvm::any_of(arg.getUsers(), [&](Operation *u) {
                        return isa<ReduceSumOp>(u) || inPhase(u);
                      })
                    : llvm::any_of(arg.getUsers(), inPhase);
    if (isRng(arg) || !read)
      continue;
    loaded.push_back(j);
    accesses.push_back(operandAccess(v, "in" + std::to_string(j), shape));
  }
  SmallVector<std::string> offs = emitOffsets(os, shape, accesses, indent, rowSplit);
  for (BlockArgument arg : body.getArguments())
    if (!names.count(arg))
      names[arg] = "in" + std::to_string(arg.getArgNumber());
  for (auto [j, off] : llvm::zip(loaded, offs)) {
    BlockArgument arg = body.getArgument(j);
    std::string name = (argPrefix + Twine(j)).str();
    names[arg] = name;
    os << indent << "const " << elemType(arg) << " " << name << " = in" << j << "[" << off
       << "];\n";
  }
  int64_t next = 0;
  for (Operation &inner : body.without_terminator()) {
    if (!inPhase(&inner))
      continue;
    std::optional<std::string> expr = scalarExpr(&inner);
    if (!expr)
      return inner.emitError("internal: '") << inner.getName() << "' inside gpt.fused", failure();
    SmallVector<std::string> operands;
    for (Value v : inner.getOperands())
      operands.push_back(names.lookup(v));
    std::string name = (valPrefix + Twine(next++)).str();
    names[inner.getResult(0)] = name;
    os << indent << "const " << elemType(inner.getResult(0)) << " " << name << " = "
       << substitute(*expr, operands) << ";\n";
  }
  return names;
}

/// One loop over the elements, the body evaluated per element, the yielded values stored;
/// or, for a body with a gpt.reduce_sum, the reduction's loop with the ops before it as
/// the element it sums (the canonical order, as the unfused reduce_sum).
LogicalResult Emitter::emitFused(FusedOp op, raw_ostream &os) {
  Block &body = op.getBody().front();
  Operation *yield = body.getTerminator();
  if (ReduceSumOp red = op.getReduction())
    return emitFusedReduce(op, red, os);
  ArrayRef<int64_t> shape = ttype(op.getResult(0)).getShape();
  int64_t n = ttype(op.getResult(0)).getNumElements();
  SmallVector<std::pair<DropoutOp, std::string>> drops;
  for (Operation &inner : body.without_terminator())
    if (auto d = dyn_cast<DropoutOp>(inner); d && d.getRng())
      drops.push_back({d, "in" + std::to_string(cast<BlockArgument>(d.getRng()).getArgNumber())});
  // Results gathered into a wider buffer are stored at their offsets there, decoded in a
  // block of their own (emitOffsets writes nothing where every store is dense, at `i`).
  SmallVector<Access> stores;
  for (auto [j, r] : llvm::enumerate(op.getResults()))
    stores.push_back(resultAccess(r, "out" + std::to_string(j)));
  std::string indent = "      ";
  if (drops.empty()) {
    SmallVector<Access> accesses(stores);
    for (auto [j, v] : llvm::enumerate(op.getInputs()))
      accesses.push_back(operandAccess(v, "in" + std::to_string(j), shape));
    indent = openElementLoop(os, shape, accesses);
  } else {
    flavour->openDropout(os, n, drops);
  }
  auto names = emitFusedBody(op, shape, os, indent);
  if (failed(names))
    return failure();
  std::string decode;
  llvm::raw_string_ostream ds(decode);
  SmallVector<std::string> offs = emitOffsets(ds, shape, stores, indent + "  ", rowSplit);
  const bool gathered = !decode.empty();
  const std::string at = gathered ? indent + "  " : indent;
  if (gathered)
    os << indent << "{\n" << decode;
  for (auto [j, v] : llvm::enumerate(yield->getOperands()))
    os << at << "out" << j << "[" << offs[j] << "] = " << names->lookup(v) << ";\n";
  if (gathered)
    os << indent << "}\n";
  if (drops.empty())
    closeElementLoop(os);
  else
    flavour->closeDropout(os);
  return success();
}

namespace {
/// A reduction over `dims` of x: the kept and reduced dims (sizes, row-major strides in
/// x) and their element counts. `columns`: a sum can run 16 outputs per call of
/// gptc::reduce_sum16 (the innermost kept dim is x's innermost, so 16 neighbouring outputs
/// read neighbouring elements, and blocks of 16 never cross it).
struct ReduceSplit {
  SmallVector<int64_t> keptShape, keptStrides, redShape, redStrides;
  int64_t outN = 1, redN = 1;
  bool columns = false;
  /// The innermost dim is kept, and at least 8 long: neighbouring outputs sum neighbouring
  /// elements (a sum over outer dims; the GPU's column sums, Flavour::sumGroup).
  bool outer = false;
};

ReduceSplit splitReduce(RankedTensorType x, ArrayRef<int64_t> dims) {
  ReduceSplit r;
  SmallVector<int64_t> strides = rowMajorStrides(x.getShape());
  for (int64_t d = 0; d < x.getRank(); ++d) {
    bool reduced = llvm::is_contained(dims, d);
    (reduced ? r.redShape : r.keptShape).push_back(x.getDimSize(d));
    (reduced ? r.redStrides : r.keptStrides).push_back(strides[d]);
    (reduced ? r.redN : r.outN) *= x.getDimSize(d);
  }
  r.columns = !r.keptShape.empty() && r.keptStrides.back() == 1 && r.keptShape.back() % 16 == 0;
  r.outer = !r.keptShape.empty() && r.keptStrides.back() == 1 && r.keptShape.back() >= 8;
  return r;
}
} // namespace

std::string Emitter::outputLoop(int64_t outN, bool blocksOf16) const {
  return blocksOf16 ? loop("ib", outN / 16) + " {\n    const int64_t i = ib * 16;\n"
                    : loop("i", outN) + " {\n";
}

LogicalResult Emitter::emitFusedReduce(FusedOp op, ReduceSumOp red, raw_ostream &os) {
  using Phase = FusedOp::Phase;
  auto x = red.getX().getType();
  std::string T = elemType(red.getResult());
  ReduceSplit r = splitReduce(x, red.getDims());
  const bool warps = flavour->sums() == Flavour::Sums::Warp;
  bool lanes = r.columns && !warps;  // reduce_sum16, 16 outputs at once
  Block &body = op.getBody().front();
  Operation *yield = body.getTerminator();
  auto phaseOfValue = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def == red.getOperation() ? Phase::Epilogue : op.phaseOf(def);
  };
  // The sum is the kernel's one result, stored as it is; or the ops after it (its
  // epilogue) compute results from it, output by output; and after a row's sum, the ops
  // of the row's shape (post) compute results for each element of the row.
  bool post = llvm::any_of(body.without_terminator(), [&](Operation &o) {
    return !isa<ReduceSumOp>(o) && op.phaseOf(&o) == Phase::Post;
  });
  if (post && (lanes || !FusedOp::sumsRows(red)))
    return op.emitError("internal: ops after a sum that is not a row's"), failure();
  bool epilogue = post || yield->getNumOperands() != 1 || yield->getOperand(0) != red.getResult();
  std::string into = !epilogue ? "out0" : lanes ? "sum16" : "";
  // CUDA: a warp or a block an output (its threads form the sum's 32 partials); its first
  // thread stores the outputs of the sum's shape, its threads share a row's elements.
  Flavour::SumGroup group;
  if (warps)
    group = flavour->sumGroup("i", r.outN, r.redN, r.outer);
  const std::string lane0 = warps ? "if (" + group.first + ") " : "";
  if (warps)
    os << "  " << group.loop << " {\n";
  else
    os << "  " << outputLoop(r.outN, lanes);
  SmallVector<std::string> base = emitOffsets(os, r.keptShape, {{"", 0, r.keptStrides}}, "    ");
  os << "    const int64_t base = " << base[0] << ";\n";
  // A sum over the last dim: element i of x is column `i` of row `gptc_row` (the output's
  // index), so the body's operands decode the row once, not each element (RowSplit).
  const bool rows = !lanes && FusedOp::sumsRows(red) && red.getDims().size() == 1;
  if (rows)
    os << "    [[maybe_unused]] const int64_t gptc_row = i;\n";
  if (lanes && epilogue)
    os << "    alignas(64) " << T << " sum16[16];\n";
  if (lanes)
    os << "    gptc::reduce_sum16<" << T << ">(" << r.redN << ", [&](int64_t i, int64_t l) {\n";
  else if (warps)
    os << "    const " << T << " sum = " << group.reduce << "_sum<" << T << ">(" << r.redN
       << ", [&](int64_t i) {\n";
  else
    os << "    " << (epilogue ? "const " + T + " sum = " : "out0[i] = ") << "gptc::reduce_sum<"
       << T << ">(" << r.redN << ", [&](int64_t i) {\n";
  SmallVector<std::string> inner = emitOffsets(os, r.redShape, {{"", 0, r.redStrides}}, "      ");
  if (rows)
    os << "      [[maybe_unused]] const int64_t gptc_col = " << inner[0] << ";\n";
  os << "      const int64_t e = base + " << inner[0] << (lanes ? " + l" : "") << ";\n"
     << "      {\n        const int64_t i = e;\n";
  if (rows)
    rowSplit = &kRowColumn;
  auto names = emitFusedBody(op, x.getShape(), os, "        ");
  rowSplit = nullptr;
  if (failed(names))
    return failure();
  os << "        return " << names->lookup(red.getX()) << ";\n      }\n    }"
     << (lanes ? ", " + into + (epilogue ? "" : " + i") : "") << ");\n";
  if (warps && !epilogue)
    os << "    " << lane0 << "out0[i] = sum;\n";
  if (epilogue) {
    // Each output from its sum, in a block of its own (the loop's index names are reused).
    std::string indent = "      ";
    if (lanes)
      os << "    for (int64_t l = 0; l < 16; ++l) {\n      const int64_t i = ib * 16 + l;\n";
    else
      os << "    {\n";
    DenseMap<Value, std::string> sum;
    sum[red.getResult()] = lanes ? "sum16[l]" : "sum";
    auto after = emitFusedBody(op, ttype(red.getResult()).getShape(), os, indent,
                               Phase::Epilogue, sum);
    if (failed(after))
      return failure();
    for (auto [j, v] : llvm::enumerate(yield->getOperands()))
      if (phaseOfValue(v) == Phase::Epilogue)
        os << indent << lane0 << "out" << j << "[i] = " << after->lookup(v) << ";\n";
    if (post) {
      // The row's elements, base + j: each from the row's finished sum and epilogue.
      if (warps)
        os << indent << "for (int64_t j = " << group.start << "; j < " << r.redN
           << "; j += " << group.step << ") {\n";
      else
        os << indent << "GPTC_SIMD for (int64_t j = 0; j < " << r.redN << "; ++j) {\n";
      os << indent << "  const int64_t i = base + j;\n";
      std::string rowIndent = indent + "  ";
      RowSplit postOf{"gptc_row", "j"};
      if (rows)
        rowSplit = &postOf;
      auto row = emitFusedBody(op, x.getShape(), os, rowIndent, Phase::Post, *after, "b", "w");
      rowSplit = nullptr;
      if (failed(row))
        return failure();
      for (auto [j, v] : llvm::enumerate(yield->getOperands()))
        if (phaseOfValue(v) == Phase::Post)
          os << rowIndent << "out" << j << "[i] = " << row->lookup(v) << ";\n";
      os << indent << "}\n";
    }
    os << "    }\n";
  }
  os << "  }\n";
  return success();
}

void Emitter::emitCopyLoop(raw_ostream &os, ArrayRef<int64_t> shape, const Access &dst,
                           const Access &src) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  os << "  " << loop("i", n) << " {\n";
  SmallVector<std::string> offs = emitOffsets(os, shape, {dst, src}, "    ");
  os << "    " << dst.buf << "[" << offs[0] << "] = " << src.buf << "[" << offs[1] << "];\n  }\n";
}

/// An elementwise op's expression (ElementwiseOpInterface, ir/GptScalar.cpp): `$j`
/// stands for operand j's element. Shared by one-op kernels and gpt.fused bodies, so both
/// compute the same bits. Inside a block loop of openDropoutBlocks, a training dropout
/// reads its precomputed mask instead of drawing it: the same value, the scaled element
/// or +0.
std::optional<std::string> Emitter::scalarExpr(Operation *op) {
  auto elementwise = dyn_cast<ElementwiseOpInterface>(op);
  if (!elementwise)
    return std::nullopt;
  if (auto d = dyn_cast<DropoutOp>(op); d && d.getRng()) {
    auto it = dropoutMasks.find(d);
    if (it != dropoutMasks.end()) {
      DropoutLiterals lit =
          dropoutLiterals(d.getP().convertToDouble(), d.getType().getElementType());
      return "gptc::detail::sel(" + it->second + " != 0, $0 * " + lit.scale + ", " +
             elemType(d.getResult()) + "(0))";
    }
  }
  return elementwise.getScalarExpr();
}

/// Split (toPieces) or concat along `dim` of `whole`: for each index of the dims before
/// `dim` (one parallel loop), each piece's contiguous run of elements is one memcpy.
void Emitter::emitPieceCopy(raw_ostream &os, Type whole, int64_t dim, TypeRange pieceTypes,
                            StringRef wholeName, ArrayRef<std::string> pieceNames,
                            bool toPieces) {
  auto w = cast<RankedTensorType>(whole);
  ArrayRef<int64_t> shape = w.getShape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[d];
  for (int64_t d = dim + 1; d < w.getRank(); ++d)
    inner *= shape[d];
  std::string E = *cType(w.getElementType());
  os << "  " << loop("o", outer) << " {\n";
  int64_t start = 0;
  for (auto [t, name] : llvm::zip(pieceTypes, pieceNames)) {
    int64_t run = cast<RankedTensorType>(t).getDimSize(dim) * inner;
    std::string piece = name + " + o * " + std::to_string(run);
    std::string all = wholeName.str() + " + o * " + std::to_string(shape[dim] * inner) + " + " +
                      std::to_string(start * inner);
    os << "    std::memcpy(" << (toPieces ? piece : all) << ", " << (toPieces ? all : piece)
       << ", " << run << " * sizeof(" << E << "));\n";
    start += cast<RankedTensorType>(t).getDimSize(dim);
  }
  os << "  }\n";
}

/// The array form (gptc::gelu_erf_n, gelu_erf_keep_n, gelu_erf_grad_n,
/// gelu_erf_grad_given_n) of a lone exact GELU or its gradient over dense f32
/// operands, as a call on elements [i0, i0 + n); it evaluates erf's upper range only
/// where needed, with the bits of the per-element form.
static std::optional<std::string> geluArrayCall(Operation *op) {
  auto t = ttype(op->getResult(0));
  auto dense = [&](Value v) { return ttype(v).getShape() == t.getShape(); };
  if (!t.getElementType().isF32() || !llvm::all_of(op->getOperands(), dense))
    return std::nullopt;
  if (auto g = dyn_cast<GeluOp>(op); g && g.getApproximate() != GeluApproximation::tanh)
    return std::string("gptc::gelu_erf_n(n, in0 + i0, out0 + i0)");
  if (auto g = dyn_cast<GeluGradOp>(op); g && g.getErf())
    return std::string(
        "gptc::gelu_erf_grad_given_n(n, in0 + i0, in1 + i0, in2 + i0, out0 + i0)");
  if (auto g = dyn_cast<GeluGradOp>(op); g && g.getApproximate() != GeluApproximation::tanh)
    return std::string("gptc::gelu_erf_grad_n(n, in0 + i0, in1 + i0, out0 + i0)");
  if (isa<GeluKeepErfOp>(op))
    return std::string("gptc::gelu_erf_keep_n(n, in0 + i0, out0 + i0, out1 + i0)");
  return std::nullopt;
}

LogicalResult Emitter::emitKernel(Operation *op, raw_ostream &os) {
  for (OpOperand &use : op->getOpOperands())
    if (!readsOperandThroughStrides(op, use.getOperandNumber()) && isStrided(outerValue(use.get())))
      return op->emitError("internal: reads a strided view, but not through strides");
  if (!writesThroughStrides(op))
    for (Value r : op->getResults())
      if (isGathered(outerResult(r)))
        return op->emitError("internal: its result is gathered, but not written through strides");
  if (std::optional<std::string> call =
          flavour->arrayForms() ? geluArrayCall(op) : std::nullopt) {
    // Chunks of 2048 elements over the threads.
    int64_t n = ttype(op->getResult(0)).getNumElements(), chunk = 2048;
    os << "  " << loop("c", (n + chunk - 1) / chunk) << " {\n"
       << "    const int64_t i0 = c * " << chunk << ", n = " << n << " - i0 < " << chunk << " ? "
       << n << " - i0 : " << chunk << ";\n"
       << "    " << *call << ";\n  }\n";
    return success();
  }
  if (std::optional<std::string> expr = scalarExpr(op); expr && !isa<DropoutOp>(op))
    return emitElementwise(op, *expr, os);
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](FusedOp f) { return emitFused(f, os); })
      .Case([&](DropoutOp d) -> LogicalResult {
        if (!d.getRng())
          return emitElementwise(op, "$0", os);
        flavour->openDropout(os, d.getType().getNumElements(), {{d, "in1"}});
        os << "      out0[i] = " << substitute(*scalarExpr(d), {"in0[i]", "in1"}) << ";\n";
        flavour->closeDropout(os);
        return success();
      })
      .Case([&](GeluKeepErfOp) {  // off the array form: not f32
        os << "  " << loop("i", ttype(op->getResult(0)).getNumElements()) << " {\n"
           << "    out1[i] = gptc::gelu_erf_of(in0[i]);\n"
           << "    out0[i] = gptc::gelu_erf_given(in0[i], out1[i]);\n  }\n";
        return success();
      })
      .Case([&](LayerNormGradOp l) { return emitLayerNormGrad(l, os); })
      .Case([&](AttentionGradOp a) { return emitAttentionGrad(a, os); })
      .Case([&](CrossEntropyGradOp c) { return emitCrossEntropyGrad(c, os); })
      .Case([&](EmbeddingGradOp e) { return emitEmbeddingGrad(e, os); })
      .Case([&](ArangeOp a) {
        os << "  " << loop("i", a.getType().getNumElements()) << " out0[i] = static_cast<"
           << elemType(a) << ">(" << (int64_t)a.getStart() << "LL + i * " << (int64_t)a.getStep()
           << "LL);\n";
        return success();
      })
      .Case([&](CumsumOp c) {
        // A line along dim an iteration, its elements in order (reversed: from the last).
        ArrayRef<int64_t> shape = c.getType().getShape();
        int64_t n = shape[c.getDim()], inner = 1;
        for (int64_t d = c.getDim() + 1; d < (int64_t)shape.size(); ++d)
          inner *= shape[d];
        bool floating = isa<FloatType>(c.getType().getElementType());
        std::string base = inner == 1 ? "l * " + std::to_string(n)
                                      : "l / " + std::to_string(inner) + " * " +
                                            std::to_string(n * inner) + " + l % " +
                                            std::to_string(inner);
        std::string t = c.getReverse() ? "(" + std::to_string(n - 1) + " - t)" : "t";
        os << "  " << loop("l", c.getType().getNumElements() / std::max<int64_t>(n, 1)) << " {\n"
           << "    const int64_t base = " << base << ";\n"
           << "    " << (floating ? "double" : "int64_t") << " acc = 0;\n"
           << "    for (int64_t t = 0; t < " << n << "; ++t) {\n"
           << "      const int64_t at = base + " << t
           << (inner == 1 ? "" : " * " + std::to_string(inner)) << ";\n"
           << "      acc += in0[at];\n"
           << "      out0[at] = static_cast<" << elemType(c) << ">(acc);\n    }\n  }\n";
        return success();
      })
      .Case([&](EmbeddingOp e) {
        int64_t v = e.getWeight().getType().getDimSize(0), c = e.getWeight().getType().getDimSize(1);
        os << "  " << loop("i", e.getIndices().getType().getNumElements()) << " {\n"
           << "    int64_t row = in1[i];\n"
           << "    if (row < 0 || row >= " << v << ") { " << reportError("embedding index out of range")
           << " row = 0; }\n"
           << "    for (int64_t c = 0; c < " << c << "; ++c) out0[i * " << c << " + c] = in0[row * "
           << c << " + c];\n  }\n";
        return success();
      })
      .Case([&](TransposeOp t) {
        ArrayRef<int64_t> shape = t.getType().getShape();
        SmallVector<int64_t> in = rowMajorStrides(t.getX().getType().getShape()), src;
        for (int64_t p : t.getPerm())
          src.push_back(in[p]);
        emitCopyLoop(os, shape, resultAccess(t.getResult(), "out0"), {"in0", 0, src});
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
        SmallVector<std::string> pieces;
        for (size_t j = 0; j < s.getNumResults(); ++j)
          pieces.push_back("out" + std::to_string(j));
        emitPieceCopy(os, s.getX().getType(), s.getDim(), s.getResultTypes(), "in0", pieces,
                      /*toPieces=*/true);
        return success();
      })
      .Case([&](ConcatOp c) {
        SmallVector<std::string> pieces;
        for (size_t j = 0; j < c.getInputs().size(); ++j)
          pieces.push_back("in" + std::to_string(j));
        emitPieceCopy(os, c.getType(), c.getDim(), c.getInputs().getTypes(), "out0", pieces,
                      /*toPieces=*/false);
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

MatmulDims matmulDims(MatmulOp op) {
  auto a = op.getLhs().getType(), b = op.getRhs().getType(), r = op.getType();
  int64_t ra = a.getRank();
  MatmulDims d;
  d.M = r.getDimSize(ra - 2);
  d.N = r.getDimSize(ra - 1);
  d.K = op.getTransposeLhs() ? a.getDimSize(ra - 2) : a.getDimSize(ra - 1);
  d.batch = r.getNumElements() / (d.M * d.N);
  d.aBatch = d.M * d.K;
  d.aRow = op.getTransposeLhs() ? 1 : d.K;
  d.aK = op.getTransposeLhs() ? d.M : 1;
  d.bBatch = b.getRank() == 2 ? 0 : d.K * d.N;  // a 2-d rhs is shared by the batch
  d.bK = op.getTransposeRhs() ? 1 : d.N;
  d.bCol = op.getTransposeRhs() ? d.K : 1;
  return d;
}

/// out[b, m, n] = sum_k lhs[b, m, k] * rhs[(b,) k, n], k increasing, with fma.
LogicalResult Emitter::emitMatmul(MatmulOp op, raw_ostream &os) {
  MatmulDims d = matmulDims(op);
  os << "  gptc::matmul" << (inRegion ? "_ws" : "") << "(" << d.batch << ", " << d.M << ", "
     << d.N << ", " << d.K << ", in0, " << d.aBatch << ", " << d.aRow << ", " << d.aK
     << ", in1, " << d.bBatch << ", " << d.bK << ", " << d.bCol << ", out0";
  if (op.hasEpilogue()) {
    // The epilogue's operands follow lhs and rhs (in0, in1) in operand order.
    unsigned next = 2;
    auto operand = [&](Value v) {
      return v ? "in" + std::to_string(next++) : std::string("nullptr");
    };
    std::string bias = operand(op.getBias()), rng = operand(op.getRng());
    std::string addend = operand(op.getAddend());
    std::string geluX = operand(op.getGeluX()), geluErf = operand(op.getGeluErf());
    std::string T = elemType(op.getResult());
    os << ", gptc::MatmulEpilogue<" << T << ">{" << addend << ", " << bias << ", " << rng;
    if (op.getRng()) {
      // gpt.dropout's literals, so that the draw and the scaling are the same.
      DropoutLiterals lit = dropoutLiterals(op.getDropoutP()->convertToDouble(),
                                            op.getType().getElementType());
      os << ", " << *op.getDropoutId() << ", " << lit.p << ", " << lit.scale;
    } else if (op.getGeluX()) {
      os << ", 0, 0, 1";
    }
    if (op.getGeluX())
      os << ", " << geluX << ", " << geluErf << ", "
         << (*op.getGeluApproximate() == GeluApproximation::tanh ? "true" : "false");
    os << "}";
  }
  os << ");\n";
  return success();
}

/// Reduces `dims` of in0; elements visited in row-major order of those dims.
LogicalResult Emitter::emitReduce(Operation *op, ArrayRef<int64_t> dims, StringRef kind,
                                  raw_ostream &os) {
  auto x = ttype(op->getOperand(0));
  std::string T = elemType(op->getResult(0));
  ReduceSplit r = splitReduce(x, dims);
  const bool warps = flavour->sums() == Flavour::Sums::Warp;
  // Sums: 16 outputs per reduce_sum16 call (the CPU's vector form).
  bool lanes = r.columns && kind != "max" && !warps;
  std::string div = kind == "mean" ? " / " + T + "(" + std::to_string(r.redN) + ")" : "";
  if (warps) {
    // A warp or a block an output: partial j formed by lane j (of the first warp), then the
    // butterfly (the canonical order).
    Flavour::SumGroup group = flavour->sumGroup("i", r.outN, r.redN, r.outer && kind != "max");
    os << "  " << group.loop << " {\n";
    SmallVector<std::string> base =
        emitOffsets(os, r.keptShape, {{"in0", 0, r.keptStrides}}, "    ");
    os << "    const " << T << "* x = in0 + " << base[0] << ";\n"
       << "    " << T << " v = " << group.reduce << "_" << (kind == "max" ? "max" : "sum") << "<"
       << T << ">(" << r.redN << ", [&](int64_t i) {\n";
    SmallVector<std::string> inner =
        emitOffsets(os, r.redShape, {{"x", 0, r.redStrides}}, "      ");
    os << "      return x[" << inner[0] << "];\n    });\n";
    if (!div.empty())
      os << "    v = v" << div << ";\n";
    os << "    if (" << group.first << ") out0[i] = v;\n  }\n";
    return success();
  }
  os << "  " << outputLoop(r.outN, lanes);
  SmallVector<std::string> base = emitOffsets(os, r.keptShape, {{"in0", 0, r.keptStrides}}, "    ");
  os << "    const " << T << "* x = in0 + " << base[0] << ";\n";
  if (lanes)
    os << "    gptc::reduce_sum16<" << T << ">(" << r.redN << ", [&](int64_t i, int64_t l) {\n";
  else
    os << "    " << T << " v = gptc::reduce_" << (kind == "max" ? "max" : "sum") << "<" << T
       << ">(" << r.redN << ", [&](int64_t i) {\n";
  SmallVector<std::string> inner = emitOffsets(os, r.redShape, {{"x", 0, r.redStrides}}, "      ");
  os << "      return x[" << inner[0] << (lanes ? " + l" : "") << "];\n    }";
  if (lanes) {
    os << ", out0 + i);\n";
    if (!div.empty())
      os << "    GPTC_SIMD for (int64_t l = 0; l < 16; ++l) out0[i + l] = out0[i + l]" << div
         << ";\n";
  } else {
    os << ");\n";
    if (!div.empty())
      os << "    v = v" << div << ";\n";
    os << "    out0[i] = v;\n";
  }
  os << "  }\n";
  return success();
}

} // namespace mlir::gpt::emit

StringRef mlir::gpt::targetName(Target target) {
  switch (target) {
  case Target::Cpu:
    return "cpu";
  case Target::Cuda:
    return "cuda";
  case Target::CudaEmulated:
    return "cuda-emulated";
  }
  return "cpu";
}

FailureOr<EmittedSource> mlir::gpt::emitSource(func::FuncOp fn, Target target) {
  return emit::Emitter(fn, target).run();
}
