//===- gptc-fuzz.cpp - mutated models through gptc's compiler -------------===//
//
//   gptc-fuzz SEED.mlir... [--runs N] [--seconds S] [--seed X] [--work DIR]
//
// Each run mutates the text of one of the seed models (flipped bytes, cut or copied
// spans, swapped or repeated lines, MLIR tokens and odd numbers inserted) and puts it
// through what `gptc compile` does before the host compiler: the nesting check, the
// parser, the input checks, the pipeline (a forward, its gradients or a training step,
// in turn) and the emitter (the CPU's and the CUDA flavour's in turn). Each input must
// come out as source or be refused with diagnostics; a crash or a hang is a bug, and the
// input that caused it is left in WORK/current.mlir. The diagnostics are silenced; the counts are printed at the end.
//
// Built with -DGPTC_LIBFUZZER (cmake -DGPTC_LIBFUZZER=ON with clang: test/CMakeLists.txt),
// the same compile of one input is a libFuzzer target instead, coverage-guided, under
// ASan and UBSan: gptc-libfuzzer [libFuzzer flags] NEW_DIR test/lit/Inputs.
//
//===----------------------------------------------------------------------===//
#include "codegen/Codegen.h"
#include "tools/support/ToolSupport.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace cl = llvm::cl;
using namespace mlir;

static cl::list<std::string> seedFiles(cl::Positional, cl::OneOrMore, cl::desc("<seed.mlir>..."));
static cl::opt<uint64_t> runs("runs", cl::desc("mutated inputs to try"), cl::init(1000));
static cl::opt<double> seconds("seconds", cl::desc("stop after this long instead (0: --runs)"),
                               cl::init(0));
static cl::opt<uint64_t> seed("seed", cl::desc("the mutations' random seed"), cl::init(1));
static cl::opt<std::string> work("work", cl::desc("where current.mlir is written"),
                                 cl::init("."));

namespace {
/// Text that a mutation inserts: MLIR's punctuation and keywords, gptc's attribute names,
/// op names of both dialects, and numbers at the edges of their types.
const char *const kTokens[] = {
    "<", ">", "(", ")", "{", "}", "[", "]", ",", ":", "->", "=", "%0", "%arg0", "x",
    "tensor<", "f32", "f64", "i64", "bf16", "i1", "0", "1", "-1", "2147483648",
    "9223372036854775807", "18446744073709551616", "1e40", "nan", "inf", "0x7FC00000",
    "\"", "\\", "loc(", "#loc", "gpt.kind = \"param\"", "gpt.kind = \"input\"",
    "gpt.name = \"x\"", "\"torch.aten.add.Tensor\"", "\"torch.aten.mm.default\"",
    "\"torch.aten.sum.dim_IntList\"", "\"torch.aten.view.default\"", "gpt.matmul", "gpt.add",
    "torch.operands = [\"self\"]", "dense<1.0>", "dense<>", "return", "func.func"};

class Mutator {
public:
  explicit Mutator(uint64_t seed) : rng(seed) {}
  uint64_t pick(uint64_t n) { return n ? rng() % n : 0; }

  std::string mutate(std::string s) {
    // One edit half the time: most edits break the parse, and an input that still parses
    // is what reaches the verifiers, the passes and the emitter.
    for (int edits = pick(2) ? 1 : 2 + (int)pick(3); edits > 0 && !s.empty(); --edits) {
      const size_t at = pick(s.size());
      switch (pick(7)) {
      case 0:  // a flipped bit
        s[at] ^= (char)(1 << pick(8));
        break;
      case 1:  // a span cut out
        s.erase(at, 1 + pick(64));
        break;
      case 2: {  // a span copied elsewhere
        std::string span = s.substr(pick(s.size()), 1 + pick(128));
        s.insert(pick(s.size()), span);
        break;
      }
      case 3:  // a token inserted
        s.insert(at, kTokens[pick(std::size(kTokens))]);
        break;
      case 4: {  // a digit run replaced by another number
        size_t d = s.find_first_of("0123456789", at);
        if (d == std::string::npos)
          break;
        size_t e = s.find_first_not_of("0123456789", d);
        const size_t len = (e == std::string::npos ? s.size() : e) - d;
        const int64_t was = std::strtoll(s.substr(d, std::min<size_t>(len, 18)).c_str(), nullptr, 10);
        // A near value (a shape off by one, doubled, 0 or 1) more often than a far one.
        const int64_t near[] = {was + 1, was - 1, was * 2, 0, 1, (int64_t)pick(70000) - 1000};
        s.replace(d, len, std::to_string(near[pick(std::size(near))]));
        break;
      }
      case 5:  // two lines swapped, or one repeated
        swapOrRepeatLines(s);
        break;
      default:  // a byte of any value
        s[at] = (char)pick(256);
        break;
      }
    }
    return s;
  }

private:
  void swapOrRepeatLines(std::string &s) {
    std::vector<std::string> lines;
    for (size_t p = 0; p <= s.size();) {
      size_t n = s.find('\n', p);
      if (n == std::string::npos)
        n = s.size();
      lines.push_back(s.substr(p, n - p));
      p = n + 1;
    }
    const size_t a = pick(lines.size()), b = pick(lines.size());
    if (pick(2))
      std::swap(lines[a], lines[b]);
    else
      lines.insert(lines.begin() + a, lines[b]);
    s.clear();
    for (size_t i = 0; i < lines.size(); ++i)
      s += lines[i] + (i + 1 < lines.size() ? "\n" : "");
  }
  std::mt19937_64 rng;
};
} // namespace

/// One input (the model text in file `path`) through the nesting check, the parser, the
/// input checks, the pipeline of `mode` and `target`'s emitter: whether it came out as
/// source (else it was refused, with diagnostics).
static bool compileOne(const DialectRegistry &registry, const std::string &path,
                       gpt::PipelineOptions::Mode mode, gpt::Target target) {
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  auto diagnostics = gptc::installOneLineDiagnostics(ctx, "gptc-fuzz");
  gpt::PipelineOptions options;
  options.mode = mode;
  options.stopAfter = gpt::Stage::Kernels;
  gptc::setTargetPipeline(options, target != gpt::Target::Cpu);  // as gptc compile sets it
  OwningOpRef<ModuleOp> module;
  func::FuncOp fn = gptc::lowerModule(ctx, module, path, options, "gptc-fuzz");
  return fn && succeeded(gpt::emitSource(fn, target));
}

using Mode = gpt::PipelineOptions::Mode;
static const Mode kModes[] = {Mode::Forward, Mode::Gradients, Mode::Accumulate, Mode::Train};

#if defined(GPTC_LIBFUZZER)
// gptc's code and the LLVM templates it instantiates are instrumented, libMLIR is not: a
// slab that an instrumented BumpPtrAllocator poisons is then handed out by libMLIR's
// uninstrumented copy without being unpoisoned, and its first write is reported (found by
// the first long run). So ASan ignores manual poisoning; reads and writes past any
// allocation are still reported.
extern "C" const char *__asan_default_options() { return "allow_user_poisoning=0"; }

static DialectRegistry *fuzzRegistry;
static std::string fuzzPath;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzzRegistry = new DialectRegistry;
  gptc::registerDialects(*fuzzRegistry);
  char tmpl[] = "/tmp/gptc_libfuzzXXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0)
    return 1;
  ::close(fd);
  fuzzPath = tmpl;
  return 0;
}

// The mode and the emitter from the input's bytes (FNV-1a), so that an input always takes
// the same path.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i)
    h = (h ^ data[i]) * 1099511628211ull;
  {
    std::ofstream out(fuzzPath, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(data), (std::streamsize)size);
  }
  compileOne(*fuzzRegistry, fuzzPath, kModes[h % std::size(kModes)],
             (h >> 8) % 2 ? gpt::Target::Cuda : gpt::Target::Cpu);
  return 0;
}
#else
int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "gptc-fuzz: mutated models through gptc's compiler\n");
  std::vector<std::string> seeds;
  for (const std::string &file : seedFiles) {
    auto text = llvm::MemoryBuffer::getFile(file);
    if (!text)
      return gptc::fail("gptc-fuzz", "cannot read '" + file + "': " + text.getError().message());
    seeds.push_back((*text)->getBuffer().str());
  }
  llvm::SmallString<256> current(work.getValue());
  llvm::sys::path::append(current, "current.mlir");

  DialectRegistry registry;
  gptc::registerDialects(registry);
  Mutator mutator(seed);
  uint64_t compiled = 0, refused = 0, done = 0;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  // The tools' one-line errors go to stderr: quiet while the inputs run.
  llvm::errs().flush();
  const int savedStderr = ::dup(STDERR_FILENO), devNull = ::open("/dev/null", O_WRONLY);
  ::dup2(devNull, STDERR_FILENO);
  for (; seconds > 0 ? elapsed() < seconds : done < runs; ++done) {
    const std::string text = mutator.mutate(seeds[mutator.pick(seeds.size())]);
    {
      std::ofstream out(current.c_str(), std::ios::binary | std::ios::trunc);
      out << text;
    }
    // Each mode's inputs go to the CPU's emitter and the CUDA flavour's in turn.
    const gpt::Target target =
        (done / std::size(kModes)) % 2 ? gpt::Target::Cuda : gpt::Target::Cpu;
    if (compileOne(registry, current.str().str(), kModes[done % std::size(kModes)], target))
      ++compiled;
    else
      ++refused;
  }
  llvm::errs().flush();
  ::dup2(savedStderr, STDERR_FILENO);
  llvm::outs() << "gptc-fuzz: " << done << " inputs from " << seeds.size() << " seeds in "
               << llvm::format("%.1f", elapsed()) << " s: " << compiled << " compiled, "
               << refused << " refused, no crash\n";
  // Both outcomes, or the mutations test nothing: all refused is a parser-only test.
  return compiled > 0 && refused > 0 ? 0 : 1;
}
#endif
