//===- ToolSupport.h - what gptc and gptc-opt share -----------------------===//
//
// Both tools report every problem as one line, "tool: file:line:col: error:
// message", and exit non-zero; a user never sees a stack trace or a source
// snippet. Notes attached to a diagnostic are dropped.
//
//===----------------------------------------------------------------------===//
#ifndef GPTC_TOOLS_SUPPORT_TOOLSUPPORT_H
#define GPTC_TOOLS_SUPPORT_TOOLSUPPORT_H

#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/ToolOutputFile.h"

#include <string>

namespace gptc {

/// Registers the dialects a captured or compiled module may hold.
void registerDialects(mlir::DialectRegistry &registry);

/// Installs a handler printing each error as one line on stderr, prefixed
/// with `tool`. Lives as long as the returned object.
std::unique_ptr<mlir::ScopedDiagnosticHandler> installOneLineDiagnostics(mlir::MLIRContext &ctx,
                                                                         const char *tool);

/// Where `text` nests brackets ((, [, {, <) deeper than MLIR's recursive parser can go
/// without overflowing its stack, as "LINE:COL: error: ..."; "" where it does not. The
/// tools check this before parsing: 10,000 nested brackets crashed them.
std::string tooDeeplyNested(llvm::StringRef text);

/// Parses `path` ("-" for stdin); prints a one-line error and returns null on
/// a missing file, nesting too deep to parse, or malformed IR.
mlir::OwningOpRef<mlir::ModuleOp> parseModule(mlir::MLIRContext &ctx, const std::string &path,
                                              const char *tool);

/// Parses `path` into `module`, checks that it holds exactly one func.func and runs
/// the compile pipeline on it. Returns that function, or null after a one-line error.
mlir::func::FuncOp lowerModule(mlir::MLIRContext &ctx, mlir::OwningOpRef<mlir::ModuleOp> &module,
                               const std::string &path,
                               const mlir::gpt::PipelineOptions &options, const char *tool);

/// What a target asks of the pipeline, as gptc compile and the fuzzer both set it. The
/// CPU keeps the activations for the backward (memory for time); the GPU computes them
/// again, and has each weight gradient grouped with the next input gradient, which it runs
/// beside it (bench/NOTES.md, "Memory" and "GPU: the portable kernel families").
void setTargetPipeline(mlir::gpt::PipelineOptions &options, bool gpu);

/// Prints "tool: error: message" and returns 1.
int fail(const char *tool, const std::string &message);

/// `text` with every `from` replaced by `to` (a temporary folder's path in a message by the
/// one the user knows).
std::string replaceAll(std::string text, const std::string &from, const std::string &to);

/// Flushes `out` and keeps it, returning 0; or, if a write failed (a full disk), removes
/// it and returns fail()'s 1 with the path and the reason. Without the check the stream's
/// destructor would end the process with LLVM's fatal "IO failure on output stream".
int keepOutput(llvm::ToolOutputFile &out, const std::string &path, const char *tool);

} // namespace gptc

#endif
