//===- CpuFlavour.cpp - kernels.cpp for the CPU ---------------------------===//
//
// The CPU flavour (Target::Cpu): each kernel a `static void` function whose loops are
// GPTC_FOR (OpenMP; GPTC_FOR_WS inside a gpt.horizontal's one parallel region), with the
// prelude's vector forms (reduce_sum16, the GELU array form, dropout masks drawn 256 at a
// time); constants as static arrays; the entry checks the caller's ids, then calls the
// kernels in order on host pointers.
//
//===----------------------------------------------------------------------===//
#include "codegen/Emitter.h"

#include "ir/GptDialect.h"
#include "ir/KernelLevel.h"

using namespace mlir;
using namespace mlir::gpt;

namespace mlir::gpt::emit {
namespace {

class CpuFlavour : public Flavour {
public:
  using Flavour::Flavour;

  std::string loop(StringRef var, int64_t n, bool simd) override {
    // Inside a region, a loop too short to split over the threads is shared dynamically,
    // so that one-iteration members (a full reduction) spread over the threads.
    const char *head = !e.inRegion ? (simd ? "GPTC_FOR_SIMD" : "GPTC_FOR")
                       : n < 64    ? "GPTC_FOR_WS_DYNAMIC"
                       : simd      ? "GPTC_FOR_WS_SIMD"
                                   : "GPTC_FOR_WS";
    return std::string(head) + "(" + var.str() + ", " + std::to_string(n) + ")";
  }
  Sums sums() const override { return Sums::Vector16; }
  SumGroup sumGroup(StringRef, int64_t, int64_t, bool) override {
    llvm_unreachable("the CPU forms sums without warps");
  }
  bool arrayForms() const override { return true; }
  bool rowLoops() const override { return true; }
  // A column an iteration: a thread's columns are cache lines of its own.
  int64_t embeddingRowBlocks(int64_t, int64_t) const override { return 1; }

  /// Blocks of 256 elements, each block's masks drawn first, 8 at a time
  /// (gptc::dropout_keep_block), then a vectorisable loop over the block's elements `i`
  /// in which the dropouts read their masks.
  void openDropout(raw_ostream &os, int64_t n,
                   ArrayRef<std::pair<DropoutOp, std::string>> drops) override {
    constexpr int64_t kBlock = 256;
    os << "  " << loop("blk", (n + kBlock - 1) / kBlock, false) << " {\n"
       << "    const int64_t i0 = blk * " << kBlock << ", n = " << n << " - i0 < " << kBlock
       << " ? " << n << " - i0 : " << kBlock << ";\n";
    for (auto [q, drop] : llvm::enumerate(drops)) {
      auto [d, rng] = drop;
      std::string mask = "keep" + std::to_string(q);
      os << "    alignas(64) uint32_t " << mask << "[" << kBlock << "];\n"
         << "    gptc::dropout_keep_block((uint64_t)" << rng << "[0], (uint64_t)" << rng
         << "[1], " << d.getId() << ", (uint64_t)i0, n, "
         << dropoutLiterals(d.getP().convertToDouble(), d.getType().getElementType()).p << ", "
         << mask << ");\n";
      e.dropoutMasks[d] = mask + "[i - i0]";
    }
    os << "    GPTC_SIMD for (int64_t i = i0; i < i0 + n; ++i) {\n";
  }
  void closeDropout(raw_ostream &os) override {
    os << "    }\n  }\n";
    e.dropoutMasks.clear();
  }
  std::string reportError(StringRef message) override {
    return "gptc::report_error(\"" + message.str() + "\");";
  }

  LogicalResult function(const std::string &name, Operation *op, raw_ostream &os) override {
    os << "// " << op->getName().getStringRef() << describeLoc(op->getLoc()) << "\n"
       << e.signature(name, op->getOperands(), op->getResults()) << " {\n";
    if (failed(e.emitKernel(op, os)))
      return failure();
    os << "}\n\n";
    return success();
  }
  bool parallelRegions() const override { return true; }
  std::string call(const std::string &name, StringRef args, Operation *) override {
    return "  " + name + "(" + args.str() + ");\n";
  }

  std::string constant(ConstantOp c, const std::string &name) override {
    auto value = cast<DenseElementsAttr>(c.getValue());
    Type et = c.getType().getElementType();
    std::string T = *cType(et);
    llvm::raw_string_ostream cos(constants);
    const int64_t count = std::max<int64_t>(c.getType().getNumElements(), 1);
    if (value.isSplat() && count > 1) {
      // One value: filled when the library loads, not written out element by element
      // (a 20M-element splat made a 220 MB kernels.cpp).
      cos << "static " << T << " " << name << "[" << count << "];\n"
          << "static const bool " << name << "_filled = [] {\n  for (int64_t i = 0; i < "
          << count << "; ++i)\n    " << name << "[i] = "
          << elementLiteral(value.getSplatValue<Attribute>(), et) << ";\n  return true;\n}();\n";
    } else {
      cos << "static const " << T << " " << name << "[" << count << "] = {"
          << elementList(value, et) << "};\n";
    }
    return "(" + T + "*)" + name;
  }
  std::string resultCopy(StringRef dst, StringRef src, int64_t n, StringRef type) override {
    return ("  std::memmove(" + dst + ", " + src + ", " + Twine(n) + " * sizeof(" + type +
            "));\n")
        .str();
  }

  void file(raw_ostream &os, StringRef kernels, StringRef calls, ArrayRef<IdCheck> ids,
            int64_t arenaBytes) override {
    os << "// Generated by gptc. One kernel per op, written once for ops with the same code; "
          "see docs/artifact.md.\n"
       << "#include \"gptc/prelude.h\"\n#include <cstring>\n\n"
       << "namespace {\n\n" << constants << (constants.empty() ? "" : "\n") << kernels
       << "} // namespace\n\n"
       << "GPTC_EXPORT int gptc_entry_abi(void) { return 1; }\n\n"
       << "// Threads for the GPTC_FOR loops (0: one per core); results never depend on it.\n"
       << "GPTC_EXPORT void gptc_set_num_threads(int n) {\n"
       << "#ifdef _OPENMP\n  gptc::thread_count() = n;\n#else\n  (void)n;\n#endif\n}\n\n"
       << "GPTC_EXPORT const char* gptc_entry(void* const* args, void* const* results, "
          "void* arena_) {\n"
       << "  char* arena = static_cast<char*>(arena_);\n  (void)arena; (void)args;\n"
       << "  gptc::take_error();\n"
       << idChecks(ids) << redzoneGuard(arenaBytes) << calls
       << "  return gptc::take_error();\n}\n";
  }

private:
  /// The caller's ids, checked before any kernel runs (gptc::ids_in_range): a training
  /// step given a bad one used to update the parameters and the optimizer's state (the
  /// kernels read row 0 instead) and only then fail. The kernels keep their own checks for
  /// indices computed inside the program.
  std::string idChecks(ArrayRef<IdCheck> ids) {
    std::string text;
    llvm::raw_string_ostream os(text);
    for (const IdCheck &c : ids) {
      os << "  {  // the caller's, checked before any kernel runs\n";
      if (c.ignore)
        os << "    static const int64_t ignore = " << *c.ignore << "LL;\n";
      os << "    if (!gptc::ids_in_range((const int64_t*)args[" << c.arg << "], " << c.n << ", "
         << c.bound << ", " << (c.ignore ? "&ignore" : "nullptr") << ")) return \"" << c.what
         << " out of range\";\n  }\n";
    }
    return text;
  }

  std::string constants;  // their declarations
};

} // namespace

std::unique_ptr<Flavour> makeCpuFlavour(Emitter &e) { return std::make_unique<CpuFlavour>(e); }

} // namespace mlir::gpt::emit
