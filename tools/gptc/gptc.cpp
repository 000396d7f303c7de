//===- gptc.cpp - the gptc command-line compiler --------------------------===//
//
//   gptc compile MODEL.mlir -o OUT [--emit=gpt|kernels|source] [--weights W]
//
// Without --emit, OUT is an artifact folder (docs/artifact.md); the weights
// default to MODEL.safetensors beside the input. With --emit, the stage's
// text goes to OUT (a file, or - for stdout). Every error is one line on
// stderr and a non-zero exit.
//
//===----------------------------------------------------------------------===//
#include "codegen/Codegen.h"
#include "frontend/AtenToGpt.h"
#include "passes/Passes.h"
#include "tools/support/ToolSupport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include "mlir/Support/FileUtilities.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

using namespace mlir;

static const char *kTool = "gptc";

static const char *kUsage =
    "usage: gptc compile MODEL.mlir -o OUT [--emit=gpt|kernels|source] [--weights FILE]\n"
    "                    [--grad | --train [--beta1 B] [--beta2 B] [--eps E]\n"
    "                                      [--weight-decay W] [--grad-clip C]]\n"
    "       gptc ops\n"
    "\n"
    "  compile   lower a captured model (python: gptc.capture) to an artifact folder:\n"
    "            kernels.cpp, kernels.so, weights.safetensors, manifest.json\n"
    "  --emit    stop after a stage and write its text to OUT (- for stdout):\n"
    "            gpt (the gpt dialect), kernels (one kernel per op, arena slots),\n"
    "            source (the generated C++)\n"
    "  --weights the parameters (default: MODEL.safetensors beside MODEL.mlir)\n"
    "  --grad    also return the loss's gradient for every parameter (gpt-autodiff)\n"
    "  --train   compile one training step: gradients, clipping, AdamW (inputs lr and\n"
    "            step; parameters and moments are updated in place)\n"
    "  ops       list the aten overloads the frontend converts, one per line\n";

namespace {
struct CompileOptions {
  std::string input, output, emit, weights;
  mlir::gpt::PipelineOptions pipeline;
};

/// A floating-point option value, or an error message.
std::string parseDouble(const std::string &flag, const std::string &text, double &into) {
  char *end = nullptr;
  into = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0')
    return "option '" + flag + "' needs a number, got '" + text + "'";
  return "";
}

/// Parses `compile`'s arguments; returns an error message or "".
std::string parseCompile(const std::vector<std::string> &args, CompileOptions &opts) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    auto value = [&](const std::string &flag, std::string &into) -> std::string {
      if (a.rfind(flag + "=", 0) == 0) {
        into = a.substr(flag.size() + 1);
        return "";
      }
      if (i + 1 >= args.size())
        return "option '" + flag + "' needs a value";
      into = args[++i];
      return "";
    };
    std::string err, text;
    auto number = [&](const std::string &flag, double &into) {
      std::string e = value(flag, text);
      return e.empty() ? parseDouble(flag, text, into) : e;
    };
    auto is = [&](const std::string &flag) { return a == flag || a.rfind(flag + "=", 0) == 0; };
    auto &adamw = opts.pipeline.adamw;
    using Mode = mlir::gpt::PipelineOptions::Mode;
    if (a == "--train")
      opts.pipeline.mode = Mode::Train;
    else if (a == "--grad")
      opts.pipeline.mode = Mode::Gradients;
    else if (is("--beta1"))
      err = number("--beta1", adamw.beta1);
    else if (is("--beta2"))
      err = number("--beta2", adamw.beta2);
    else if (is("--eps"))
      err = number("--eps", adamw.eps);
    else if (is("--weight-decay"))
      err = number("--weight-decay", adamw.weightDecay);
    else if (is("--grad-clip"))
      err = number("--grad-clip", adamw.gradClip);
    else if (a == "-o" || a.rfind("-o=", 0) == 0)
      err = value("-o", opts.output);
    else if (a == "--emit" || a.rfind("--emit=", 0) == 0)
      err = value("--emit", opts.emit);
    else if (a == "--weights" || a.rfind("--weights=", 0) == 0)
      err = value("--weights", opts.weights);
    else if (a.size() > 1 && a[0] == '-')
      return "unknown option '" + a + "' (see gptc --help)";
    else if (opts.input.empty())
      opts.input = a;
    else
      return "unexpected argument '" + a + "'";
    if (!err.empty())
      return err;
  }
  if (opts.input.empty())
    return "no input file (usage: gptc compile MODEL.mlir -o OUT)";
  if (opts.output.empty())
    return "no output given (-o OUT)";
  if (!opts.emit.empty() && opts.emit != "gpt" && opts.emit != "kernels" && opts.emit != "source")
    return "unknown stage '" + opts.emit + "' for --emit (gpt, kernels or source)";
  return "";
}

int writeText(const std::string &path, const std::string &text) {
  std::string error;
  auto out = openOutputFile(path, &error);
  if (!out)
    return gptc::fail(kTool, error);
  out->os() << text;
  out->keep();
  return 0;
}

int compile(const CompileOptions &opts) {
  DialectRegistry registry;
  gptc::registerDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  auto diagnostics = gptc::installOneLineDiagnostics(ctx, kTool);

  OwningOpRef<ModuleOp> module = gptc::parseModule(ctx, opts.input, kTool);
  if (!module)
    return 1;
  auto fns = llvm::to_vector(module->getOps<func::FuncOp>());
  if (fns.size() != 1)
    return gptc::fail(kTool, opts.input + ": expected exactly one func.func, found " +
                                 std::to_string(fns.size()));

  gpt::PipelineOptions pipeline = opts.pipeline;
  pipeline.stopAfter = opts.emit == "gpt" ? gpt::Stage::Gpt : gpt::Stage::Kernels;
  PassManager pm(&ctx);
  gpt::buildPipeline(pm, pipeline);
  if (failed(pm.run(*module)))
    return 1;

  if (opts.emit == "gpt" || opts.emit == "kernels") {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    os << "\n";
    return writeText(opts.output, text);
  }
  auto source = gpt::emitSource(fns.front(), gpt::Target::Cpu);
  if (failed(source))
    return 1;
  if (opts.emit == "source")
    return writeText(opts.output, source->code);

  std::string weights = opts.weights;
  if (weights.empty()) {
    llvm::SmallString<256> beside(opts.input);
    llvm::sys::path::replace_extension(beside, "safetensors");
    if (llvm::sys::fs::exists(beside))
      weights = beside.str().str();
  } else if (!llvm::sys::fs::exists(weights)) {
    return gptc::fail(kTool, "weights file '" + weights + "' does not exist");
  }
  const char *include = std::getenv("GPTC_RUNTIME_INCLUDE");
  std::string error;
  if (failed(gpt::writeArtifact(fns.front(), *source, opts.output, weights,
                                include && *include ? include : GPTC_RUNTIME_INCLUDE_DIR, error)))
    return gptc::fail(kTool, error);
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    llvm::errs() << kUsage;
    return 1;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    llvm::outs() << kUsage;
    return 0;
  }
  if (args[0] == "ops") {
    std::vector<std::string> names;
    for (const auto &entry : mlir::gpt::atenConverters())
      names.push_back(entry.getKey().str());
    std::sort(names.begin(), names.end());
    for (const std::string &n : names)
      llvm::outs() << n << "\n";
    return 0;
  }
  if (args[0] == "compile") {
    CompileOptions opts;
    std::string err = parseCompile({args.begin() + 1, args.end()}, opts);
    if (!err.empty())
      return gptc::fail(kTool, err);
    return compile(opts);
  }
  return gptc::fail(kTool, "unknown command '" + args[0] + "' (see gptc --help)");
}
