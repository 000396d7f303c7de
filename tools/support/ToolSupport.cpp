//===- ToolSupport.cpp - one-line diagnostics and module loading ----------===//
#include "tools/support/ToolSupport.h"

#include "frontend/TorchDialect.h"
#include "ir/GptDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
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

OwningOpRef<ModuleOp> gptc::parseModule(MLIRContext &ctx, const std::string &path,
                                        const char *tool) {
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(path);
  if (!buffer) {
    fail(tool, "cannot read '" + path + "': " + buffer.getError().message());
    return nullptr;
  }
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  auto module = parseSourceFile<ModuleOp>(sm, &ctx);
  if (!module)
    return nullptr; // the diagnostic handler has printed the one-line error
  return module;
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
  // A dimension of size 0 (block_size=0, an empty batch): the kernels divide by element
  // counts, so such a model is refused here, at the op that first holds one.
  Operation *zeroSized = nullptr;
  Type zeroType;
  module->walk([&](Operation *op) {
    auto check = [&](Type t) {
      auto rt = dyn_cast<RankedTensorType>(t);
      if (!zeroSized && rt && rt.hasStaticShape() && rt.getNumElements() == 0 && rt.getRank() > 0)
        zeroSized = op, zeroType = t;
    };
    for (Type t : op->getOperandTypes())
      check(t);
    for (Type t : op->getResultTypes())
      check(t);
    return zeroSized ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (zeroSized) {
    zeroSized->emitError() << "'" << zeroSized->getName() << "' on a zero-size tensor ("
                           << zeroType << "): gptc does not support dimensions of size 0";
    return nullptr;
  }
  PassManager pm(&ctx);
  gpt::buildPipeline(pm, options);
  if (failed(pm.run(*module)))
    return nullptr;
  return fns.front();
}

std::string gptc::replaceAll(std::string text, const std::string &from, const std::string &to) {
  for (size_t at = 0; !from.empty() && (at = text.find(from, at)) != std::string::npos;
       at += to.size())
    text.replace(at, from.size(), to);
  return text;
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
