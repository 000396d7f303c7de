//===- gptc.cpp - the gptc command-line compiler --------------------------===//
//
//   gptc compile MODEL.mlir -o OUT [--emit=gpt|kernels|source] [--weights W]
//   gptc check | sample | ops | cxxflags   (gptc --help, gptc SUBCOMMAND --help)
//
// Without --emit, OUT is an artifact folder (docs/artifact.md); the weights
// default to MODEL.safetensors beside the input. With --emit, the stage's
// text goes to OUT (a file, or - for stdout). Every error is one line on
// stderr; a command line gptc cannot take exits with 2, any other failure 1.
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
#include "llvm/Support/CommandLine.h"
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
#include <cstdio>
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

namespace cl = llvm::cl;

/// Exit code of a command line gptc cannot take (argparse's, as gptc's Python commands use);
/// any other failure is 1.
constexpr int kUsageError = 2;

namespace {
struct CompileOptions {
  std::string input, output, emit, weights, weightsOf;
  bool stats = false;
  mlir::gpt::PipelineOptions pipeline;
  mlir::gpt::Target target = mlir::gpt::Target::Cpu;
};

/// The command line (LLVM's option parser): one subcommand per job, each with its options.
/// `gptc --help` lists the subcommands, `gptc SUBCOMMAND --help` their options. `sample`
/// and `check --against-torch` / `--against-cpu` run Python (gptc.apps.sample,
/// gptc.parity, gptc.apps.against_cpu), which parses
/// their options itself.
struct CommandLine {
  cl::OptionCategory category{"gptc options"};

  cl::SubCommand compileCmd{
      "compile", "lower a captured model (python: gptc.capture) to an artifact folder: "
                 "kernels.cpp, kernels.so, weights.safetensors, manifest.json"};
  cl::SubCommand checkCmd{
      "check", "--gradcheck MODEL.mlir: compare the f64 twin's gradients with central "
               "differences; --against-torch [MODEL.py]: train beside eager PyTorch; "
               "--against-cpu [MODEL.py]: train on the CPU and a GPU target, bit for bit"};
  cl::SubCommand sampleCmd{"sample", "text from a run of the main job (gptc sample --help)"};
  cl::SubCommand opsCmd{"ops", "list the aten overloads the frontend converts, one per line"};
  cl::SubCommand cxxflagsCmd{"cxxflags",
                             "print the host C++ compiler flags kernels.so is built with"};

  // compile and check
  cl::opt<std::string> input{cl::Positional, cl::desc("<MODEL.mlir>"), cl::sub(compileCmd),
                             cl::sub(checkCmd), cl::cat(category)};
  cl::opt<std::string> weights{
      "weights", cl::desc("the parameters (default: MODEL.safetensors beside MODEL.mlir)"),
      cl::value_desc("FILE"), cl::Optional, cl::sub(compileCmd), cl::sub(checkCmd),
      cl::cat(category)};
  // compile
  cl::opt<std::string> weightsOf{
      "weights-of",
      cl::desc("an artifact this one loads beside (the runtime's weights_of: a generator's "
               "decode step): the weights file may leave out its params, which are shared"),
      cl::value_desc("DIR"), cl::Optional, cl::sub(compileCmd), cl::cat(category)};
  cl::opt<std::string> output{
      "o", cl::desc("the artifact folder; with --emit, the stage's text file (- for stdout)"),
      cl::value_desc("OUT"), cl::Optional, cl::sub(compileCmd), cl::cat(category)};
  cl::opt<std::string> emit{
      "emit",
      cl::desc("stop after a stage and write its text to OUT: gpt (the gpt dialect), kernels "
               "(one kernel per op, arena slots), source (the generated C++)"),
      cl::value_desc("gpt|kernels|source"), cl::Optional, cl::sub(compileCmd), cl::cat(category)};
  cl::opt<mlir::gpt::Target> target{
      "target", cl::desc("what kernels.so runs on"), cl::init(mlir::gpt::Target::Cpu),
      cl::values(clEnumValN(mlir::gpt::Target::Cpu, "cpu", "the CPU (the default)"),
                 clEnumValN(mlir::gpt::Target::Cuda, "cuda",
                            "an NVIDIA GPU: kernels.cu built by nvcc ($GPTC_CUDA_ARCH, default sm_90)"),
                 clEnumValN(mlir::gpt::Target::CudaEmulated, "cuda-emulated",
                            "the CUDA kernels run on the CPU by an emulation of the GPU (tests)")),
      cl::Optional, cl::sub(compileCmd), cl::cat(category)};
  cl::opt<bool> o0{"O0", cl::desc("without fusion and views (the same bits as -O3)"),
                   cl::Optional, cl::sub(compileCmd), cl::cat(category)};
  cl::opt<bool> o3{"O3", cl::desc("with fusion and views (the default)"), cl::Optional,
                   cl::sub(compileCmd), cl::cat(category)};
  cl::opt<bool> stats{"stats",
                      cl::desc("print each kernel's FLOPs and bytes moved, the kernels per "
                               "call, the arena peak and the compile time per stage"),
                      cl::Optional, cl::sub(compileCmd), cl::cat(category)};
  cl::opt<bool> sanitize{
      "sanitize",
      cl::desc("build kernels.so with AddressSanitizer and UBSan, each buffer between poisoned "
               "redzones (slower; run with the sanitizers' runtimes preloaded, "
               "docs/artifact.md)"),
      cl::Optional, cl::sub(compileCmd), cl::cat(category)};
  cl::opt<bool> grad{"grad",
                     cl::desc("also return the loss's gradient for every parameter"),
                     cl::Optional, cl::sub(compileCmd), cl::cat(category)};
  cl::opt<bool> train{"train",
                      cl::desc("compile one training step: gradients, clipping, AdamW (inputs "
                               "lr and step; parameters and moments updated in place)"),
                      cl::Optional, cl::sub(compileCmd), cl::cat(category)};
  cl::opt<bool> accumulate{
      "accumulate",
      cl::desc("gradient accumulation's micro-batch program: the loss's gradients added into "
               "states grad.<param> (input first: true on a step's first micro-batch)"),
      cl::Optional, cl::sub(compileCmd), cl::cat(category)};
  cl::opt<std::string> accumulated{
      "accumulated",
      cl::desc("(--train) a step that applies the gradients N micro-batches of an "
               "--accumulate program summed into its grad.<param> states, each over N"),
      cl::value_desc("N"), cl::Optional, cl::sub(compileCmd), cl::cat(category)};
  cl::opt<std::string> beta1{"beta1", cl::desc("AdamW's beta1 (--train)"), cl::value_desc("B"), cl::Optional, cl::sub(compileCmd),
                        cl::cat(category)};
  cl::opt<std::string> beta2{"beta2", cl::desc("AdamW's beta2 (--train)"), cl::value_desc("B"), cl::Optional, cl::sub(compileCmd),
                        cl::cat(category)};
  cl::opt<std::string> eps{"eps", cl::desc("AdamW's epsilon (--train)"), cl::value_desc("E"), cl::Optional, cl::sub(compileCmd),
                      cl::cat(category)};
  cl::opt<std::string> weightDecay{"weight-decay", cl::desc("AdamW's weight decay (--train)"),
                              cl::value_desc("W"),
                              cl::Optional, cl::sub(compileCmd), cl::cat(category)};
  cl::opt<std::string> gradClip{"grad-clip",
                           cl::desc("clip the gradients' global norm to C, 0 for none (--train)"),
                           cl::value_desc("C"), cl::Optional,
                           cl::sub(compileCmd), cl::cat(category)};
  // check
  cl::opt<bool> gradcheck{"gradcheck",
                          cl::desc("compile the model's f64 twin with its gradients and compare "
                                   "each parameter's with central differences"),
                          cl::Optional, cl::sub(checkCmd), cl::cat(category)};
  cl::opt<bool> againstTorch{
      "against-torch",
      cl::desc("[MODEL.py] train a nanoGPT-style model (GPT, GPTConfig; default gptc's test "
               "GPT) with gptc and eager PyTorch from the same weights and batches and compare "
               "each step (its options: gptc check --against-torch --help)"),
      cl::Optional, cl::sub(checkCmd), cl::cat(category)};
  cl::opt<bool> againstCpu{
      "against-cpu",
      cl::desc("[MODEL.py] the same training steps on the CPU and on --device cuda (or "
               "cuda-emulated), compared bit for bit after each step; names the first tensor "
               "and step that differ (its options: gptc check --against-cpu --help)"),
      cl::Optional, cl::sub(checkCmd), cl::cat(category)};
  cl::opt<std::string> inputs{
      "inputs", cl::desc("the inputs (default: MODEL.inputs.safetensors, from gptc.capture_save)"),
      cl::value_desc("FILE"), cl::Optional, cl::sub(checkCmd), cl::cat(category)};
  cl::opt<std::string> step{"step", cl::desc("the central differences' step"), cl::value_desc("H"), cl::Optional, cl::sub(checkCmd), cl::cat(category)};
  cl::opt<std::string> tolerance{"tolerance",
                            cl::desc("the largest relative error passed (the difference "
                                     "beyond the central differences' resolution)"),
                            cl::value_desc("T"), cl::Optional,
                            cl::sub(checkCmd), cl::cat(category)};
  cl::opt<std::string> seed{"seed", cl::desc("the seed of the check's random directions"),
                         cl::value_desc("S"), cl::Optional, cl::sub(checkCmd),
                         cl::cat(category)};

  CommandLine() {
    for (cl::SubCommand *sub : cl::getRegisteredSubcommands())
      cl::HideUnrelatedOptions(category, *sub);  // not the options of the libraries linked
  }
};

/// A flag's number as a message quotes it: "2", "-1e-09", "nan".
std::string numberText(double value) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%g", value);
  return text;
}

/// A number option's value into `into` (left as it is when the option is not given); returns
/// an error message or "". The options are text to LLVM's parser, which would print its own
/// complaint about a bad number on stderr, besides gptc's one line.
template <typename Number>
std::string readNumber(const cl::opt<std::string> &option, Number &into) {
  if (!option.getNumOccurrences())
    return "";
  const std::string flag = "--" + option.ArgStr.str(), &text = option;
  char *end = nullptr;
  if constexpr (std::is_integral_v<Number>) {
    // A whole number in the type's range (--seed): 1.7, 1e30 and -1 were cast silently.
    errno = 0;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    using Limits = std::numeric_limits<Number>;
    if (text.empty() || *end != '\0' || errno != 0 || v < (long long)Limits::min() ||
        v > (long long)Limits::max())
      return "option '" + flag + "' needs a whole number from " +
             std::to_string(Limits::min()) + " to " + std::to_string(Limits::max()) +
             ", got '" + text + "'";
    into = static_cast<Number>(v);
  } else {
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0')
      return "option '" + flag + "' needs a number, got '" + text + "'";
    into = static_cast<Number>(v);
  }
  return "";
}

/// The first of gptc's options given more than once to the subcommand that ran (LLVM's
/// parser lets the last one win), as an error message, or "". (Two input files are the
/// parser's own error.)
std::string givenTwice(const CommandLine &c) {
  for (cl::SubCommand *sub : cl::getRegisteredSubcommands()) {
    if (!*sub)
      continue;
    for (const auto &entry : sub->OptionsMap) {
      const cl::Option *o = entry.second;
      if (o->getNumOccurrences() > 1 && llvm::is_contained(o->Categories, &c.category))
        return "option '" + std::string(o->ArgStr.size() <= 2 ? "-" : "--") + o->ArgStr.str() +
               "' given twice";  // -o, -O3; --train
    }
  }
  return "";
}

/// LLVM's parser's complaint as one line: its lines joined, each without the program's name.
std::string oneLine(llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n', -1, false);
  std::string joined;
  for (llvm::StringRef line : lines) {
    line = line.trim();
    for (const char *prefix : {"gptc compile: ", "gptc check: ", "gptc: "})
      if (line.consume_front(prefix))
        break;
    if (line.starts_with("Did you mean"))  // after "Unknown command line argument '--x'."
      joined += ";";
    joined += (joined.empty() ? "" : " ") + line.str();
  }
  return joined;
}

/// LLVM's parser over the command line, with every complaint it makes caught in `errors`:
/// those it writes to the stream it is given and those an option writes straight to stderr
/// (a value that does not parse), so that gptc can say them in one line.
bool parseCommandLine(int argc, const char *const *argv, std::string &errors) {
  llvm::raw_string_ostream stream(errors);
  std::FILE *caught = std::tmpfile();
  const int saved = caught ? ::dup(STDERR_FILENO) : -1;
  if (saved >= 0)
    ::dup2(::fileno(caught), STDERR_FILENO);
  const bool ok = cl::ParseCommandLineOptions(
      argc, argv, "gptc: a GPT compiler with bitwise-reproducible results\n", &stream);
  if (saved >= 0) {
    llvm::errs().flush();
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
    std::rewind(caught);
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, caught)) > 0;)
      errors.append(buffer, n);
  }
  if (caught)
    std::fclose(caught);
  return ok;
}

/// compile's options, checked; returns an error message or "".
std::string compileOptions(const CommandLine &c, CompileOptions &opts) {
  using Mode = mlir::gpt::PipelineOptions::Mode;
  opts.input = c.input, opts.output = c.output, opts.emit = c.emit, opts.weights = c.weights;
  opts.weightsOf = c.weightsOf;
  opts.stats = c.stats;
  opts.target = c.target;
  // The GPU recomputes GELU's erf in the gradient rather than keep it: a few more operations
  // an element in a kernel bound by memory, which then reads one array fewer; kept, the
  // erfs were 604 MB of the shakespeare_char step's peak. It computes the GELU's and the
  // LayerNorms' outputs again for the weight gradients too (bench/NOTES.md, "Memory"), and
  // runs each weight gradient beside the next input gradient.
  gptc::setTargetPipeline(opts.pipeline, c.target != mlir::gpt::Target::Cpu);
  if (c.sanitize && c.target == mlir::gpt::Target::Cuda)
    return "--sanitize builds kernels.so for the CPU or the GPU's emulation "
           "(--target=cuda-emulated), not for a GPU: run compute-sanitizer there";
  if (c.train)
    opts.pipeline.mode = Mode::Train;
  else if (c.grad)
    opts.pipeline.mode = Mode::Gradients;
  else if (c.accumulate)
    opts.pipeline.mode = Mode::Accumulate;
  opts.pipeline.fuse = !c.o0;
  if (c.sanitize)
    opts.pipeline.redzone = 128;
  auto &adamw = opts.pipeline.adamw;
  for (auto [option, into] : {std::pair{&c.beta1, &adamw.beta1}, std::pair{&c.beta2, &adamw.beta2},
                              std::pair{&c.eps, &adamw.eps},
                              std::pair{&c.weightDecay, &adamw.weightDecay},
                              std::pair{&c.gradClip, &adamw.gradClip}})
    if (std::string err = readNumber(*option, *into); !err.empty())
      return err;
  if (std::string err = readNumber(c.accumulated, adamw.accumulated); !err.empty())
    return err;
  // Combinations that meant nothing, or one thing silently: the last flag won.
  if (c.train && c.grad)
    return "--train and --grad exclude each other (a training step computes the gradients)";
  if (c.accumulate && (c.train || c.grad))
    return "--accumulate excludes --train and --grad (its step is --train --accumulated N)";
  if (c.accumulated.getNumOccurrences() && !c.train)
    return "--accumulated applies to a training step only (add --train)";
  if (c.accumulated.getNumOccurrences() && adamw.accumulated < 1)
    return "--accumulated must be at least 1, got " + c.accumulated.getValue();
  if (c.o0 && c.o3)
    return "-O0 and -O3 exclude each other";
  if (!c.train)
    for (const cl::opt<std::string> *f : {&c.beta1, &c.beta2, &c.eps, &c.weightDecay, &c.gradClip})
      if (f->getNumOccurrences())
        return "--" + f->ArgStr.str() + " applies to a training step only (add --train)";
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
  if ((c.emit.getNumOccurrences() && opts.emit.empty()) ||
      (!opts.emit.empty() && opts.emit != "gpt" && opts.emit != "kernels" && opts.emit != "source"))
    return "unknown stage '" + opts.emit + "' for --emit (gpt, kernels or source)";
  if (opts.emit.empty() && opts.output == "-")  // it made a folder named '-'
    return "an artifact is a folder: give one with -o (standard output takes --emit's text)";
  if (c.weightsOf.getNumOccurrences() && (opts.weightsOf.empty() || !opts.emit.empty()))
    return opts.weightsOf.empty() ? "--weights-of needs an artifact folder"
                                  : "--weights-of applies to an artifact, not to --emit";
  bool same = false;  // -o the input: the input was overwritten
  if (opts.output == opts.input ||
      (!llvm::sys::fs::equivalent(opts.output, opts.input, same) && same))
    return "the output '" + opts.output + "' is the input file";
  return "";
}

/// check's options (--gradcheck), checked; returns an error message or "".
std::string checkOptions(const CommandLine &c, gptc::CheckOptions &opts) {
  opts.gradcheck = c.gradcheck;
  opts.input = c.input, opts.weights = c.weights, opts.inputs = c.inputs;
  for (std::string err : {readNumber(c.step, opts.step), readNumber(c.tolerance, opts.tolerance),
                          readNumber(c.seed, opts.seed)})
    if (!err.empty())
      return err;
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
  auto source = gpt::emitSource(fn, opts.target);
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
  // inspection: --stats, the source.) With --weights-of, the params the file leaves out
  // must be that artifact's.
  if (!weights.empty() || !opts.weightsOf.empty()) {
    try {
      gptc::rt::Model::verify(stage.str().str(), opts.weightsOf);
    } catch (const gptc::rt::Error &e) {
      std::string from = weights.empty() ? "" : "weights from '" + weights + "'";
      if (!opts.weightsOf.empty())
        from += (from.empty() ? "" : ", ") + std::string("beside '") + opts.weightsOf + "'";
      return gptc::fail(kTool, outputPaths("the artifact does not load (" + from + "): " +
                                           e.what()));
    }
  }
  // One compile at a time renames into OUT (the lock on the folder), so that two at once
  // leave one whole artifact, not a mix. A file this artifact lacks goes: the previous
  // model's weights beside new kernels loaded silently (or failed on a shape), and an old
  // compile.log outlived a compile from the cache.
  if (::flock(lockFd, LOCK_EX) != 0)
    return gptc::fail(kTool, "cannot lock " + opts.output + ": " + std::strerror(errno));
  for (StringRef name : {"kernels.cpp", "kernels.cu", "compile.log", "weights.safetensors",
                         "kernels.so", "manifest.json"}) {
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
  auto usageError = [](const std::string &message) {
    gptc::fail(kTool, message);
    return kUsageError;
  };
  // The commands that run Python take their arguments as they are.
  if (!args.empty() && args[0] == "sample")
    return gptc::runPythonModule("gptc.apps.sample", "gptc sample", {args.begin() + 1, args.end()},
                                 kTool, argv[0]);
  if (!args.empty() && args[0] == "check") {
    for (auto [flag, module] : {std::pair{"--against-torch", "gptc.parity"},
                                std::pair{"--against-cpu", "gptc.apps.against_cpu"}}) {
      auto against = std::find(args.begin() + 1, args.end(), flag);
      if (against == args.end())
        continue;
      std::vector<std::string> rest(args.begin() + 1, against);
      rest.insert(rest.end(), against + 1, args.end());
      for (const char *other : {"--gradcheck", "--against-torch", "--against-cpu"})
        if (std::find(rest.begin(), rest.end(), other) != rest.end())
          return usageError(std::string(other) + " and " + flag +
                            " are two checks: run one at a time");
      return gptc::runPythonModule(module, flag, rest, kTool, argv[0]);
    }
  }
  CommandLine c;
  // LLVM's parser takes a word that names no subcommand as a positional argument.
  if (!args.empty() && args[0][0] != '-' &&
      llvm::none_of(cl::getRegisteredSubcommands(),
                    [&](cl::SubCommand *sub) { return sub->getName() == args[0]; }))
    return usageError("unknown command '" + args[0] + "' (see gptc --help)");
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "gptc " << GPTC_VERSION << " (LLVM " << LLVM_VERSION_STRING << ")\n";
  });
  std::vector<const char *> named(argv, argv + argc);
  named[0] = kTool;  // the parser's messages say "gptc --help", not the path run
  std::string errors;
  if (!parseCommandLine(argc, named.data(), errors))
    return usageError(oneLine(errors));
  if (std::string err = givenTwice(c); !err.empty())
    return usageError(err);
  if (c.opsCmd) {
    for (const std::string &n : mlir::gpt::supportedAtenOps())
      llvm::outs() << n << "\n";
    return 0;
  }
  if (c.cxxflagsCmd) {
    llvm::outs() << llvm::join(mlir::gpt::hostCompilerFlags(), " ") << "\n";
    return 0;
  }
  if (c.checkCmd) {
    gptc::CheckOptions opts;
    opts.runtimeInclude = runtimeInclude();
    std::string err = checkOptions(c, opts);
    if (err.empty() && !opts.gradcheck)
      err = "nothing to check (try gptc check --gradcheck MODEL.mlir, or gptc check "
            "--against-torch [MODEL.py])";
    if (!err.empty())
      return usageError(err);
    return gptc::runCheck(opts, kTool);
  }
  if (c.compileCmd) {
    CompileOptions opts;
    std::string err = compileOptions(c, opts);
    if (!err.empty())
      return usageError(err);
    return compile(opts);
  }
  return usageError("no command (gptc --help lists them)");
}
