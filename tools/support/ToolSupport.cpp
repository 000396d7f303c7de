//===- ToolSupport.cpp - one-line diagnostics and module loading ----------===//
#include "tools/support/ToolSupport.h"

#include "frontend/TorchDialect.h"
#include "ir/GptDialect.h"
#include "ir/Signature.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

void gptc::registerDialects(DialectRegistry &registry) {
  registry.insert<gpt::GptDialect, gpt::TorchDialect, func::FuncDialect>();
}

static std::string describeLocation(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return describeLocation(name.getChildLoc());
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location inner : fused.getLocations())
      if (std::string s = describeLocation(inner); !s.empty())
        return s;
    return "";
  }
  if (auto callsite = dyn_cast<CallSiteLoc>(loc))
    return describeLocation(callsite.getCallee());
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().str() + ":" + std::to_string(file.getLine()) + ":" +
            std::to_string(file.getColumn()));
  return "";
}

std::unique_ptr<ScopedDiagnosticHandler> gptc::installOneLineDiagnostics(MLIRContext &ctx,
                                                                         const char *tool) {
  return std::make_unique<ScopedDiagnosticHandler>(&ctx, [tool](Diagnostic &diag) {
    if (diag.getSeverity() != DiagnosticSeverity::Error)
      return success();
    std::string where = describeLocation(diag.getLocation());
    std::string message = diag.str();
    for (char &c : message)
      if (c == '\n')
        c = ' ';
    llvm::errs() << tool << ": " << (where.empty() ? "" : where + ": ") << "error: " << message
                 << "\n";
    return success();
  });
}

std::string gptc::tooDeeplyNested(StringRef text) {
  // Far beyond any model's IR (a few levels), far below what the parser's recursion takes.
  constexpr int kMaxDepth = 512;
  int depth = 0, line = 1, col = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    ++col;
    if (c == '\n') {
      ++line, col = 0;
      continue;
    }
    if (inString) {
      if (c == '\\')
        ++i, ++col;  // an escaped character
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;  // a comment, to the end of the line
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > kMaxDepth)
        return std::to_string(line) + ":" + std::to_string(col) +
               ": error: brackets nested deeper than " + std::to_string(kMaxDepth) +
               " levels; no model's IR nests so deep";
    } else if ((c == ')' || c == ']' || c == '}' || (c == '>' && (i == 0 || text[i - 1] != '-'))) &&
               depth > 0) {
      --depth;
    }
  }
  return "";
}

OwningOpRef<ModuleOp> gptc::parseModule(MLIRContext &ctx, const std::string &path,
                                        const char *tool) {
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(path);
  if (!buffer) {
    fail(tool, "cannot read '" + path + "': " + buffer.getError().message());
    return nullptr;
  }
  if (std::string deep = tooDeeplyNested((*buffer)->getBuffer()); !deep.empty()) {
    llvm::errs() << tool << ": " << path << ":" << deep << "\n";
    return nullptr;
  }
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  auto module = parseSourceFile<ModuleOp>(sm, &ctx);
  if (!module)
    return nullptr; // the diagnostic handler has printed the one-line error
  return module;
}

/// `name` with its control characters and backslashes escaped (\n, \xNN): an error
/// message stays one line whatever a model's names hold.
static std::string printable(StringRef name) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os.write_escaped(name);
  return out;
}

/// Why `t` cannot be a value of a model gptc compiles, or "" where it can: every value is
/// a ranked tensor of static shape, with no dimension of size 0 (the kernels divide by
/// element counts) and at most 1 TiB, so that no size or offset computed later overflows.
static std::string unsupportedType(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (!rt)
    return "is not a ranked tensor";
  if (!rt.hasStaticShape())
    return "has a dynamic dimension: gptc takes static shapes";
  if (llvm::is_contained(rt.getShape(), 0))
    return "has a dimension of size 0: gptc does not support them";
  Type e = rt.getElementType();
  uint64_t bytes = e.isIntOrFloat() ? std::max(1u, e.getIntOrFloatBitWidth() / 8) : 16;
  constexpr uint64_t kMaxBytes = uint64_t(1) << 40;
  for (int64_t d : rt.getShape()) {
    if ((uint64_t)d > kMaxBytes / bytes)
      return "is larger than 1 TiB";
    bytes *= d;
  }
  return "";
}

/// What the passes and the code generator take for granted of their input, checked before
/// any of them runs; each failure is one line naming the op or the argument.
static LogicalResult checkInput(func::FuncOp fn, const std::string &path, const char *tool) {
  const std::string where = path + ": function @" + fn.getSymName().str();
  if (fn.isExternal())
    return gptc::fail(tool, where + " has no body"), failure();
  if (!fn.getBody().hasOneBlock())
    return gptc::fail(tool, where + " has " + std::to_string(fn.getBlocks().size()) +
                                " blocks; gptc takes a function of one block"),
           failure();
  auto describe = [](Type t) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << t;
    return s;
  };
  // Ops first: a value an op uses or makes is named by the op's model.py line.
  LogicalResult result = success();
  fn.walk([&](Operation *op) {
    for (auto [role, types] : {std::pair{"operand", TypeRange(op->getOperandTypes())},
                               std::pair{"result", TypeRange(op->getResultTypes())}})
      for (auto [i, t] : llvm::enumerate(types))
        if (std::string why = unsupportedType(t); !why.empty()) {
          op->emitError() << "'" << op->getName() << "' " << role << " #" << i << " of type "
                          << t << " " << why;
          result = failure();
          return WalkResult::interrupt();
        }
    return WalkResult::advance();
  });
  if (failed(result))
    return failure();
  llvm::StringSet<> names;
  for (auto [i, arg] : llvm::enumerate(fn.getArguments())) {
    auto name = gpt::argName(fn, i);
    auto kind = gpt::argKind(fn, i);
    const std::string what = where + ": argument #" + std::to_string(i) +
                             (name ? " '" + printable(name.getValue()) + "'" : std::string());
    if (std::string why = unsupportedType(arg.getType()); !why.empty())
      return gptc::fail(tool, what + " of type " + describe(arg.getType()) + " " + why), failure();
    if (name && !names.insert(name.getValue()).second)
      return gptc::fail(tool, what + ": two arguments have this name"), failure();
    if (kind && !llvm::is_contained({"input", "param", "state"}, kind.getValue()))
      return gptc::fail(tool, what + " has gpt.kind '" + printable(kind.getValue()) +
                                  "'; the kinds are input, param and state"),
             failure();
    if (kind && kind.getValue() != "input" &&
        !isa<FloatType>(cast<RankedTensorType>(arg.getType()).getElementType()))
      return gptc::fail(tool, what + " is a " + kind.getValue().str() + " of type " +
                                  describe(arg.getType()) + ": parameters are floating-point"),
             failure();
  }
  for (auto [i, t] : llvm::enumerate(fn.getResultTypes()))
    if (std::string why = unsupportedType(t); !why.empty())
      return gptc::fail(tool, where + ": result #" + std::to_string(i) + " of type " +
                                  describe(t) + " " + why),
             failure();
  return success();
}

func::FuncOp gptc::lowerModule(MLIRContext &ctx, OwningOpRef<ModuleOp> &module,
                               const std::string &path, const gpt::PipelineOptions &options,
                               const char *tool) {
  module = parseModule(ctx, path, tool);
  if (!module)
    return nullptr;
  auto fns = llvm::to_vector(module->getOps<func::FuncOp>());
  if (fns.size() != 1) {
    fail(tool, path + ": expected exactly one func.func, found " + std::to_string(fns.size()));
    return nullptr;
  }
  if (failed(checkInput(fns.front(), path, tool)))
    return nullptr;
  PassManager pm(&ctx);
  gpt::buildPipeline(pm, options);
  if (failed(pm.run(*module)))
    return nullptr;
  // The passes add arguments and results of their own (lr, step, rng, exp_avg.NAME,
  // grad.NAME, ...): a model's own one of the same name would be fed twice.
  func::FuncOp fn = fns.front();
  llvm::StringSet<> argNames, resultNames;
  auto clash = [&](llvm::StringSet<> &seen, DictionaryAttr attrs, const char *what) {
    auto name = attrs ? attrs.getAs<StringAttr>(gpt::kNameAttr) : StringAttr();
    if (!name || seen.insert(name.getValue()).second)
      return false;
    fail(tool, path + ": two " + what + " named '" + printable(name.getValue()) +
                   "' after the compile's passes: the model has one whose name is that of one "
                   "the compiler adds (lr, step, rng, grad.*, exp_avg.*, ...); rename it");
    return true;
  };
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (clash(argNames, fn.getArgAttrDict(i), "arguments"))
      return nullptr;
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (clash(resultNames, fn.getResultAttrDict(i), "results"))
      return nullptr;
  return fn;
}

std::string gptc::replaceAll(std::string text, const std::string &from, const std::string &to) {
  for (size_t at = 0; !from.empty() && (at = text.find(from, at)) != std::string::npos;
       at += to.size())
    text.replace(at, from.size(), to);
  return text;
}

void gptc::setTargetPipeline(mlir::gpt::PipelineOptions &options, bool gpu) {
  using Activations = mlir::gpt::PipelineOptions::Activations;
  options.activations = gpu ? Activations::Recompute : Activations::Keep;
  options.pairWeightGradients = gpu;
  options.geluGradEpilogue = gpu;
}

int gptc::fail(const char *tool, const std::string &message) {
  llvm::errs() << tool << ": error: " << message << "\n";
  return 1;
}

int gptc::keepOutput(llvm::ToolOutputFile &out, const std::string &path, const char *tool) {
  out.os().flush();  // (not close(): OUT may be "-", stdout)
  if (out.os().has_error()) {
    std::string reason = out.os().error().message();
    out.os().clear_error();
    return fail(tool, "cannot write '" + path + "': " + reason);
  }
  out.keep();
  return 0;
}
