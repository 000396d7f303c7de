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
#include "frontend/Passes.h"
#include "tools/gptc/Check.h"
#include "passes/Passes.h"
#include "tools/support/ToolSupport.h"

#include "gptc/model.hpp"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include "mlir/Support/FileUtilities.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

using namespace mlir;

static const char *kTool = "gptc";

static const char *kUsage =
    "usage: gptc compile MODEL.mlir -o OUT [-O0|-O3] [--stats] [--emit=gpt|kernels|source]\n"
    "                    [--weights FILE] [--sanitize]\n"
    "                    [--grad | --train [--beta1 B] [--beta2 B] [--eps E]\n"
    "                                      [--weight-decay W] [--grad-clip C]]\n"
    "       gptc check --gradcheck MODEL.mlir [--weights FILE] [--inputs FILE]\n"
    "                  [--step H] [--tolerance T] [--seed S]\n"
    "       gptc check --against-torch [MODEL.py] [--steps N] [--config KEY=VALUE]...\n"
    "                  (gptc check --against-torch --help lists its options)\n"
    "       gptc ops\n"
    "       gptc cxxflags\n"
    "       gptc sample [RUN] [--prompt TEXT] [--length N] [--seed S] ...\n"
    "                  (text from a run of the main job; gptc sample --help)\n"
    "       gptc --version\n"
    "\n"
    "  compile   lower a captured model (python: gptc.capture) to an artifact folder:\n"
    "            kernels.cpp, kernels.so, weights.safetensors, manifest.json\n"
    "  --emit    stop after a stage and write its text to OUT (- for stdout):\n"
    "            gpt (the gpt dialect), kernels (one kernel per op, arena slots),\n"
    "            source (the generated C++)\n"
    "  -O0, -O3  without / with fusion and views (default -O3); both give the same bits\n"
    "  --stats   print each kernel's FLOPs and bytes moved, the kernels per call, the\n"
    "            arena peak and the compile time per stage\n"
    "  --weights the parameters (default: MODEL.safetensors beside MODEL.mlir)\n"
    "  --sanitize build kernels.so with AddressSanitizer and UBSan, every buffer its own\n"
    "            arena bytes with poisoned redzones between them: a kernel that reads or\n"
    "            writes out of bounds stops the run with a report. Slower; run with the\n"
    "            sanitizers' runtimes preloaded (docs/artifact.md)\n"
    "  --grad    also return the loss's gradient for every parameter (gpt-autodiff)\n"
    "  --train   compile one training step: gradients, clipping, AdamW (inputs lr and\n"
    "            step; parameters and moments are updated in place)\n"
    "  check     --gradcheck: compile the model's f64 twin with its gradients and compare\n"
    "            each parameter's with central differences (inputs default to\n"
    "            MODEL.inputs.safetensors, written by gptc.capture_save)\n"
    "            --against-torch: train a nanoGPT-style MODEL.py (GPT, GPTConfig; default\n"
    "            gptc's test GPT) N steps with gptc and with eager PyTorch from the same\n"
    "            weights and batches; print per step both losses and the worst parameter\n"
    "            difference; fail past 1e-5 (loss, relative) or 1e-4 (parameters)\n"
    "  ops       list the aten overloads the frontend converts, one per line\n"
    "  cxxflags  print the host C++ compiler flags kernels.so is built with\n";

namespace {
struct CompileOptions {
  std::string input, output, emit, weights;
  bool stats = false;
  mlir::gpt::PipelineOptions pipeline;
};

/// Walks a subcommand's arguments: each call matches the current one (`--flag`,
/// `--flag VALUE` or `--flag=VALUE`) and records the first error.
class ArgCursor {
public:
  explicit ArgCursor(const std::vector<std::string> &args) : args(args) {}
  bool next() { return error.empty() && ++i < args.size(); }
  const std::string &current() const { return args[i]; }
  bool flag(const std::string &f) const { return args[i] == f; }
  /// The flag `f`, noted as given (a second time is an error).
  bool once(const std::string &f) {
    if (args[i] != f)
      return false;
    note(f);
    return true;
  }
  bool given(const std::string &f) const { return seen.count(f) != 0; }
  bool value(const std::string &f, std::string &into) {
    const std::string &a = args[i];
    if (a.rfind(f + "=", 0) == 0) {
      note(f);
      into = a.substr(f.size() + 1);
      return true;
    }
    if (a != f)
      return false;
    note(f);
    if (i + 1 >= args.size())
      error = "option '" + f + "' needs a value";
    else
      into = args[++i];
    return true;
  }
  template <typename Number> bool number(const std::string &f, Number &into) {
    std::string text;
    if (!value(f, text))
      return false;
    char *end = nullptr;
    if constexpr (std::is_integral_v<Number>) {
      // A whole number in the type's range (--seed): 1.7, 1e30 and -1 were cast silently.
      errno = 0;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      using Limits = std::numeric_limits<Number>;
      if (error.empty() && (text.empty() || *end != '\0' || errno != 0 ||
                            v < (long long)Limits::min() || v > (long long)Limits::max()))
        error = "option '" + f + "' needs a whole number from " + std::to_string(Limits::min()) +
                " to " + std::to_string(Limits::max()) + ", got '" + text + "'";
      into = static_cast<Number>(v);
    } else {
      double v = std::strtod(text.c_str(), &end);
      if (error.empty() && (text.empty() || *end != '\0'))
        error = "option '" + f + "' needs a number, got '" + text + "'";
      into = static_cast<Number>(v);
    }
    return true;
  }
  /// A positional argument into `into` (once), or an error for anything else.
  void positional(std::string &into) {
    const std::string &a = args[i];
    if (a.size() > 1 && a[0] == '-')
      error = "unknown option '" + a + "' (see gptc --help)";
    else if (into.empty())
      into = a;
    else
      error = "unexpected argument '" + a + "'";
  }
  std::string error;

private:
  // An option given twice (-o A -o B, -O3 -O3) was taken silently, the last one winning.
  void note(const std::string &f) {
    if (!seen.insert(f).second && error.empty())
      error = "option '" + f + "' given twice";
  }
  const std::vector<std::string> &args;
  size_t i = (size_t)-1;
  std::set<std::string> seen;
};

/// A flag's number as a message quotes it: "2", "-1e-09", "nan".
std::string numberText(double value) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%g", value);
  return text;
}

/// Parses `compile`'s arguments; returns an error message or "".
std::string parseCompile(const std::vector<std::string> &args, CompileOptions &opts) {
  ArgCursor c(args);
  auto &adamw = opts.pipeline.adamw;
  using Mode = mlir::gpt::PipelineOptions::Mode;
  while (c.next()) {
    if (c.once("--train"))
      opts.pipeline.mode = Mode::Train;
    else if (c.once("--grad"))
      opts.pipeline.mode = Mode::Gradients;
    else if (c.once("--stats"))
      opts.stats = true;
    else if (c.once("-O0"))
      opts.pipeline.fuse = false;
    else if (c.once("-O3"))
      opts.pipeline.fuse = true;
    else if (c.once("--sanitize"))
      opts.pipeline.redzone = 128;
    else if (!(c.number("--beta1", adamw.beta1) || c.number("--beta2", adamw.beta2) ||
               c.number("--eps", adamw.eps) || c.number("--weight-decay", adamw.weightDecay) ||
               c.number("--grad-clip", adamw.gradClip) || c.value("-o", opts.output) ||
               c.value("--emit", opts.emit) || c.value("--weights", opts.weights)))
      c.positional(opts.input);
  }
  if (!c.error.empty())
    return c.error;
  // Combinations that meant nothing, or one thing silently: the last flag won.
  if (c.given("--train") && c.given("--grad"))
    return "--train and --grad exclude each other (a training step computes the gradients)";
  if (c.given("-O0") && c.given("-O3"))
    return "-O0 and -O3 exclude each other";
  if (!c.given("--train"))
    for (const char *f : {"--beta1", "--beta2", "--eps", "--weight-decay", "--grad-clip"})
      if (c.given(f))
        return std::string(f) + " applies to a training step only (add --train)";
  // The ranges torch.optim.AdamW accepts, and finite (a NaN fails every comparison). 0
  // for --grad-clip means no clipping; a negative one silently meant the same.
  for (auto [name, value, below1] :
       {std::tuple{"--beta1", adamw.beta1, true}, std::tuple{"--beta2", adamw.beta2, true},
        std::tuple{"--eps", adamw.eps, false}, std::tuple{"--weight-decay", adamw.weightDecay, false},
        std::tuple{"--grad-clip", adamw.gradClip, false}})
    if (!(value >= 0 && (below1 ? value < 1 : std::isfinite(value))))
      return std::string(name) + (below1 ? " must be in [0, 1)" : " must be a finite number >= 0") +
             ", got " + numberText(value);
  if (opts.input.empty())
    return "no input file (usage: gptc compile MODEL.mlir -o OUT)";
  if (opts.output.empty())
    return "no output given (-o OUT)";
  const bool emitEmpty = std::find(args.begin(), args.end(), "--emit=") != args.end() ||
                         std::adjacent_find(args.begin(), args.end(), [](auto &a, auto &b) {
                           return a == "--emit" && b.empty();
                         }) != args.end();
  if (emitEmpty || (!opts.emit.empty() && opts.emit != "gpt" && opts.emit != "kernels" &&
                    opts.emit != "source"))
    return "unknown stage '" + opts.emit + "' for --emit (gpt, kernels or source)";
  if (opts.emit.empty() && opts.output == "-")  // it made a folder named '-'
    return "an artifact is a folder: give one with -o (standard output takes --emit's text)";
  bool same = false;  // -o the input: the input was overwritten
  if (opts.output == opts.input ||
      (!llvm::sys::fs::equivalent(opts.output, opts.input, same) && same))
    return "the output '" + opts.output + "' is the input file";
  return "";
}

/// Parses `check`'s arguments; returns an error message or "".
std::string parseCheck(const std::vector<std::string> &args, gptc::CheckOptions &opts) {
  ArgCursor c(args);
  while (c.next()) {
    if (c.flag("--gradcheck"))
      opts.gradcheck = true;
    else if (!(c.value("--weights", opts.weights) || c.value("--inputs", opts.inputs) ||
               c.number("--step", opts.step) || c.number("--tolerance", opts.tolerance) ||
               c.number("--seed", opts.seed)))
      c.positional(opts.input);
  }
  if (!c.error.empty())
    return c.error;
  // A step of 0 made every difference NaN and the check pass; a NaN tolerance passed any.
  for (auto [name, value] : {std::pair{"--step", opts.step}, std::pair{"--tolerance", opts.tolerance}})
    if (!(value > 0 && std::isfinite(value)))
      return std::string(name) + " must be a finite number > 0, got " + numberText(value);
  if (opts.input.empty())
    return "no input file (usage: gptc check --gradcheck MODEL.mlir, or gptc check "
           "--against-torch [MODEL.py])";
  return "";
}

/// The folder holding gptc/prelude.h: $GPTC_RUNTIME_INCLUDE; else, for an installed gptc,
/// <prefix>/include beside <prefix>/bin/gptc; else the source tree it was built from.
std::string runtimeInclude() {
  const char *include = std::getenv("GPTC_RUNTIME_INCLUDE");
  if (include && *include)
    return include;
  std::string exe = llvm::sys::fs::getMainExecutable(nullptr, (void *)&runtimeInclude);
  if (!exe.empty()) {
    llvm::SmallString<256> installed(llvm::sys::path::parent_path(llvm::sys::path::parent_path(exe)));
    llvm::sys::path::append(installed, "include");
    llvm::SmallString<256> prelude(installed);
    llvm::sys::path::append(prelude, "gptc", "prelude.h");
    if (llvm::sys::fs::exists(prelude))
      return installed.str().str();
  }
  return GPTC_RUNTIME_INCLUDE_DIR;
}

int writeText(const std::string &path, const std::string &text) {
  std::string error;
  auto out = openOutputFile(path, &error);
  if (!out)
    return gptc::fail(kTool, error);
  out->os() << text;
  return gptc::keepOutput(*out, path, kTool);
}

constexpr const char *kStagePrefix = ".gptc-staging";

/// Removes the staging folders in `output` that no running compile holds (a compile killed
/// before it renamed its files into place left its folder behind). Called with the
/// folder's lock held, under which every compile makes and locks its staging folder.
void removeAbandonedStages(const std::string &output) {
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(output, ec), end; !ec && it != end; it.increment(ec)) {
    StringRef name = llvm::sys::path::filename(it->path());
    if (!name.starts_with(std::string(kStagePrefix) + "-"))
      continue;
    const int fd = ::open(it->path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
      continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0)
      (void)llvm::sys::fs::remove_directories(it->path());
    ::close(fd);
  }
}

int compile(const CompileOptions &opts) {
  DialectRegistry registry;
  gptc::registerDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  auto diagnostics = gptc::installOneLineDiagnostics(ctx, kTool);

  gpt::PipelineOptions pipeline = opts.pipeline;
  pipeline.stopAfter = opts.emit == "gpt" ? gpt::Stage::Gpt : gpt::Stage::Kernels;
  OwningOpRef<ModuleOp> module;
  auto start = std::chrono::steady_clock::now();
  func::FuncOp fn = gptc::lowerModule(ctx, module, opts.input, pipeline, kTool);
  if (!fn)
    return 1;
  auto lowered = std::chrono::steady_clock::now();

  if (opts.emit == "gpt" || opts.emit == "kernels") {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    os << "\n";
    return writeText(opts.output, text);
  }
  auto source = gpt::emitSource(fn, gpt::Target::Cpu);
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
  auto emitted = std::chrono::steady_clock::now();
  // The artifact is written into a folder of its own inside OUT and its files renamed into
  // OUT once it is whole and loads, the manifest last: a compile that fails (the host
  // compiler, a weights file of another model) leaves OUT's previous artifact as it was.
  if (auto ec = llvm::sys::fs::create_directories(opts.output))
    return gptc::fail(kTool, "cannot create " + opts.output + ": " + ec.message());
  // A lock on OUT is held while the staging folder is made and while files are renamed
  // into OUT. Each compile holds a lock on its own staging folder for as long as it runs,
  // so a staging folder whose lock can be taken belongs to a compile that was killed.
  const int lockFd = ::open(opts.output.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lockFd < 0 || ::flock(lockFd, LOCK_EX) != 0)
    return gptc::fail(kTool, "cannot lock " + opts.output + ": " + std::strerror(errno));
  llvm::scope_exit unlock([&] { ::close(lockFd); });
  removeAbandonedStages(opts.output);
  llvm::SmallString<256> stage, prefix(opts.output);  // (absolute: else under $TMPDIR)
  llvm::sys::path::append(prefix, kStagePrefix);
  (void)llvm::sys::fs::make_absolute(prefix);
  if (auto ec = llvm::sys::fs::createUniqueDirectory(prefix, stage))
    return gptc::fail(kTool, "cannot create a folder in " + opts.output + ": " + ec.message());
  const int stageFd = ::open(stage.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  llvm::scope_exit unlockStage([&] { ::close(stageFd); });
  if (stageFd < 0 || ::flock(stageFd, LOCK_EX) != 0 || ::flock(lockFd, LOCK_UN) != 0) {
    (void)llvm::sys::fs::remove_directories(stage);
    return gptc::fail(kTool, "cannot lock " + stage.str().str() + ": " + std::strerror(errno));
  }
  llvm::scope_exit removeStage([&] { (void)llvm::sys::fs::remove_directories(stage); });
  auto inOutput = [&](StringRef name) {
    llvm::SmallString<256> p(opts.output);
    llvm::sys::path::append(p, name);
    return p.str().str();
  };
  auto staged = [&](StringRef name) { return (stage + "/" + name).str(); };
  auto outputPaths = [&](const std::string &message) {  // messages name OUT's files
    return gptc::replaceAll(message, stage.str().str(), opts.output);
  };
  std::string error;
  if (failed(gpt::writeArtifact(fn, *source, stage, weights, runtimeInclude(), error))) {
    // The host compiler failed: its source and log stay, as OUT/.gptc-failed, where the
    // message points (moved over OUT's own files, they stood beside the previous artifact).
    const std::string failedDir = inOutput(".gptc-failed");
    if (llvm::sys::fs::exists(staged("compile.log"))) {
      (void)llvm::sys::fs::remove_directories(failedDir);
      if (!llvm::sys::fs::rename(stage, failedDir)) {
        removeStage.release();
        error = gptc::replaceAll(error, stage.str().str(), failedDir);
      }
    }
    return gptc::fail(kTool, outputPaths(error));
  }
  // With weights, the artifact must load: a corrupt weights file, or one of another model,
  // is this command's error rather than a later load's. (Without, it is compiled for
  // inspection: --stats, the source.)
  if (!weights.empty()) {
    try {
      gptc::rt::Model::verify(stage.str().str());
    } catch (const gptc::rt::Error &e) {
      return gptc::fail(kTool, outputPaths("the artifact does not load (weights from '" +
                                           weights + "'): " + e.what()));
    }
  }
  // One compile at a time renames into OUT (the lock on the folder), so that two at once
  // leave one whole artifact, not a mix. A file this artifact lacks goes: the previous
  // model's weights beside new kernels loaded silently (or failed on a shape), and an old
  // compile.log outlived a compile from the cache.
  if (::flock(lockFd, LOCK_EX) != 0)
    return gptc::fail(kTool, "cannot lock " + opts.output + ": " + std::strerror(errno));
  for (StringRef name : {"kernels.cpp", "compile.log", "weights.safetensors", "kernels.so",
                         "manifest.json"}) {
    std::error_code ec = llvm::sys::fs::exists(staged(name))
                             ? llvm::sys::fs::rename(staged(name), inOutput(name))
                             : llvm::sys::fs::remove(inOutput(name));  // ok if absent
    if (ec)
      return gptc::fail(kTool, "cannot move " + name.str() + " into " + opts.output + ": " +
                                   ec.message());
  }
  (void)llvm::sys::fs::remove_directories(inOutput(".gptc-failed"));  // an earlier failure's
  if (opts.stats) {
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    gpt::printStats(fn, llvm::outs());
    llvm::outs() << llvm::format("compile time: parse + passes %.0f ms, codegen %.0f ms, host "
                                 "compiler (or cache) %.0f ms\n",
                                 ms(start, lowered), ms(lowered, emitted),
                                 ms(emitted, std::chrono::steady_clock::now()));
  }
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
  if (args[0] == "sample")  // text from the main job's run: gptc.apps.sample
    return gptc::runPythonModule("gptc.apps.sample", "gptc sample", {args.begin() + 1, args.end()},
                                 kTool, argv[0]);
  if (args[0] == "--version") {
    llvm::outs() << "gptc " << GPTC_VERSION << " (LLVM " << LLVM_VERSION_STRING << ")\n";
    return 0;
  }
  if (args[0] == "ops") {
    for (const std::string &n : mlir::gpt::supportedAtenOps())
      llvm::outs() << n << "\n";
    return 0;
  }
  if (args[0] == "cxxflags") {
    llvm::outs() << llvm::join(mlir::gpt::hostCompilerFlags(), " ") << "\n";
    return 0;
  }
  if (args[0] == "check") {
    auto against = std::find(args.begin() + 1, args.end(), "--against-torch");
    if (against != args.end()) {
      std::vector<std::string> rest(args.begin() + 1, against);
      rest.insert(rest.end(), against + 1, args.end());
      if (std::find(rest.begin(), rest.end(), "--gradcheck") != rest.end())
        return gptc::fail(kTool, "--gradcheck and --against-torch are two checks: run one at a time");
      return gptc::runPythonModule("gptc.parity", "--against-torch", rest, kTool, argv[0]);
    }
    gptc::CheckOptions opts;
    opts.runtimeInclude = runtimeInclude();
    std::string err = parseCheck({args.begin() + 1, args.end()}, opts);
    if (!err.empty())
      return gptc::fail(kTool, err);
    return gptc::runCheck(opts, kTool);
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
