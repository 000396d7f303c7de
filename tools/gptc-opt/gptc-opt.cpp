//===- gptc-opt.cpp - run gptc passes on a .mlir file ---------------------===//
//
// MLIR's opt driver with gptc's dialects and passes. With
// --verify-diagnostics (lit tests) it is exactly mlir-opt's driver; otherwise
// errors are printed one per line (tools/support/ToolSupport.h).
//
//===----------------------------------------------------------------------===//
#include "frontend/Passes.h"
#include "passes/Passes.h"
#include "tools/support/ToolSupport.h"

#include "mlir/Debug/CLOptionsSetup.h"
#include "mlir/IR/AsmState.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

static const char *kTool = "gptc-opt";

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  DialectRegistry registry;
  gptc::registerDialects(registry);
  registerCanonicalizerPass();
  registerCSEPass();
  gpt::registerGptPasses();
  gpt::registerFrontendPasses();

  static llvm::cl::opt<std::string> input(llvm::cl::Positional, llvm::cl::desc("<input .mlir>"),
                                          llvm::cl::init("-"));
  static llvm::cl::opt<std::string> output("o", llvm::cl::desc("output file"),
                                           llvm::cl::value_desc("file"), llvm::cl::init("-"));
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  tracing::DebugConfig::registerCLOptions();
  MlirOptMainConfig::registerCLOptions(registry);

  // Command-line errors: keep only the first line llvm::cl prints.
  std::string clErrors;
  llvm::raw_string_ostream clStream(clErrors);
  if (!llvm::cl::ParseCommandLineOptions(argc, argv, "gptc optimizer driver\n", &clStream)) {
    std::string first = clErrors.substr(0, clErrors.find('\n'));
    llvm::errs() << first << "\n";
    return 1;
  }
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();

  std::string errorMessage;
  auto mapped = openInputFile(input, &errorMessage);
  if (!mapped)
    return gptc::fail(kTool, "cannot read '" + input + "': " + errorMessage);
  // A copy, and the output opened only once the result is known: `-o` may name the input
  // (opening it truncated the mapped input under the parser: SIGBUS, and the file lost),
  // and a failed run left an existing output file deleted.
  auto file = llvm::MemoryBuffer::getMemBufferCopy(mapped->getBuffer(),
                                                   mapped->getBufferIdentifier());
  mapped.reset();
  if (std::string deep = gptc::tooDeeplyNested(file->getBuffer()); !deep.empty()) {
    llvm::errs() << kTool << ": " << input << ":" << deep << "\n";
    return 1;
  }
  std::string result;
  llvm::raw_string_ostream os(result);
  if (config.shouldVerifyDiagnostics() || !config.inputSplitMarker().empty()) {
    if (failed(MlirOptMain(os, std::move(file), registry, config)))
      return 1;
  } else {
    MLIRContext ctx(registry);
    ctx.allowUnregisteredDialects(config.shouldAllowUnregisteredDialects());
    ctx.loadAllAvailableDialects();
    auto diagnostics = gptc::installOneLineDiagnostics(ctx, kTool);
    llvm::SourceMgr sm;
    sm.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
    OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sm, &ctx);
    if (!module)
      return 1;
    PassManager pm(&ctx);
    if (failed(applyPassManagerCLOptions(pm)) || failed(config.setupPassPipeline(pm)) ||
        failed(pm.run(*module)))
      return 1;
    module->print(os);
    os << "\n";
  }
  auto out = openOutputFile(output, &errorMessage);
  if (!out)
    return gptc::fail(kTool, errorMessage);
  out->os() << result;
  return gptc::keepOutput(*out, output, kTool);
}
