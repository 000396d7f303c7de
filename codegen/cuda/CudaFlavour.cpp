//===- CudaFlavour.cpp - kernels.cu for an NVIDIA GPU ---------------------===//
//
// See CudaFlavour.h. Every kernel keeps the CPU kernel's arithmetic and order: the
// bodies are the shared ones, each loop iteration computes its outputs alone, sums are the
// canonical 32 partials and butterfly (a warp's lanes), dropout masks are drawn by element
// index.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/CudaFlavour.h"

#include "ir/GptDialect.h"
#include "ir/Signature.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::gpt;

namespace mlir::gpt::emit {

std::string CudaFlavour::loop(StringRef var, int64_t n, bool) {
  // A grid-stride loop; the launch sizes the grid for the kernel's longest loop.
  gridExtent = std::max(gridExtent, n);
  return "GPTC_CUDA_FOR(" + var.str() + ", " + std::to_string(n) + ")";
}

/// A sum of 4,096 elements or more takes a block: one warp would wait on its loads (its 32
/// chains are the sum's whole parallelism), where a block's 256 threads fetch a tile of the
/// elements at once and its first warp only adds them. A sum over outer dimensions (a
/// bias's gradient: each output a column of a row-major array) takes 8 neighbouring
/// outputs a block, so that a load of the block's threads reads whole 32-byte sectors, not
/// one element a row's stride from the next.
CudaFlavour::SumGroup CudaFlavour::sumGroup(StringRef var, int64_t outN, int64_t redN,
                                            bool columns) {
  warpKernel = true;
  const std::string n = std::to_string(outN);
  if (columns) {
    gridExtent = std::max(gridExtent, (outN + 7) / 8 * 256);  // a block of 256 an 8
    return {"GPTC_CUDA_FOR_COLUMNS(" + var.str() + ", " + n + ")", "gptc::cuda::column",
            "GPTC_CUDA_COLUMN_OWNER", "", ""};
  }
  if (redN >= 4096) {
    gridExtent = std::max(gridExtent, outN * 256);  // a block of 256 an output
    return {"GPTC_CUDA_FOR_BLOCKS(" + var.str() + ", " + n + ")", "gptc::cuda::block",
            "threadIdx.x == 0", "threadIdx.x", "blockDim.x"};
  }
  gridExtent = std::max(gridExtent, outN * 32);
  return {"GPTC_CUDA_FOR_WARPS(" + var.str() + ", " + n + ")", "gptc::cuda::warp",
          "threadIdx.x % 32 == 0", "threadIdx.x % 32", "32"};
}

/// Each element's mask drawn on its own (gptc::dropout_keep: the same draw as the CPU's
/// blocks).
void CudaFlavour::openDropout(raw_ostream &os, int64_t n,
                              ArrayRef<std::pair<DropoutOp, std::string>> drops) {
  os << "  " << loop("i", n, true) << " {\n";
  for (auto [q, drop] : llvm::enumerate(drops)) {
    auto [d, rng] = drop;
    std::string mask = "keep" + std::to_string(q);
    os << "    const bool " << mask << " = gptc::dropout_keep((uint64_t)" << rng
       << "[0], (uint64_t)" << rng << "[1], " << d.getId() << ", (uint64_t)i, "
       << dropoutLiterals(d.getP().convertToDouble(), d.getType().getElementType()).p
       << ");\n";
    e.dropoutMasks[d] = mask;
  }
  os << "    {\n";
}

void CudaFlavour::closeDropout(raw_ostream &os) {
  os << "    }\n  }\n";
  e.dropoutMasks.clear();
}

unsigned CudaFlavour::errorCode(StringRef message) {
  auto it = llvm::find(errorMessages, message.str());
  if (it == errorMessages.end())
    it = errorMessages.insert(errorMessages.end(), message.str());
  return (unsigned)(it - errorMessages.begin()) + 1;
}

std::string CudaFlavour::reportError(StringRef message) {
  return "gptc::cuda::report_error(" + std::to_string(errorCode(message)) + "u);";
}

bool CudaFlavour::isFamily(Operation *op) {
  return isa<MatmulOp, LayerNormOp, LayerNormGradOp, AttentionOp, AttentionGradOp,
             CrossEntropyOp, CrossEntropyGradOp>(op);
}

/// The shared body as `name`_body, a __device__ function whose loops run over the blocks
/// gptc_block of gptc_blocks it is given (a launch's, or its range of them).
FailureOr<CudaFlavour::Segment> CudaFlavour::segment(const std::string &name, Operation *op,
                                                     raw_ostream &os) {
  std::string body;
  llvm::raw_string_ostream bs(body);
  warpKernel = false;
  gridExtent = 0;
  if (failed(e.emitKernel(op, bs)))
    return failure();
  std::string device = e.signature(name + "_body", op->getOperands(), op->getResults());
  device.replace(0, std::string("static void").size(), "__device__ __forceinline__ void");
  device.insert(device.find('(') + 1,
                std::string("const int64_t gptc_block, const int64_t gptc_blocks") +
                    (op->getNumOperands() + op->getNumResults() ? ", " : ""));
  os << "// " << op->getName().getStringRef() << describeLoc(op->getLoc()) << "\n"
     << device << " {\n" << body << "}\n";
  return Segment{name + "_body", gridExtent, warpKernel, {}};
}

/// __global__ `kernel`(`params`): each segment on a range of its blocks, in turn (one
/// segment: all of them). Returns the launch, to be followed by its arguments.
std::string CudaFlavour::launch(const std::string &kernel, ArrayRef<Segment> segments,
                                StringRef params, raw_ostream &os) {
  os << "__global__ void " << kernel << "(" << params << ") {\n  GPTC_CUDA_KERNEL_BEGIN();\n";
  if (segments.size() == 1) {
    os << "  " << segments[0].body << "(blockIdx.x, gridDim.x, "
       << llvm::join(segments[0].args, ", ") << ");\n";
  } else {
    os << "  // Each member on a range of the blocks, in turn.\n"
       << "  int64_t block = blockIdx.x, blocks;\n";
    for (auto [k, s] : llvm::enumerate(segments)) {
      if (k)
        os << "  block -= blocks;\n";
      os << "  if (block < (blocks = gptc::cuda::loop_blocks(" << s.extent << ")))\n    return "
         << s.body << "(block, blocks, " << llvm::join(s.args, ", ") << ");\n";
    }
  }
  os << "}\n";
  SmallVector<std::string> blocks;
  for (const Segment &s : segments)
    blocks.push_back("gptc::cuda::loop_blocks(" + std::to_string(s.extent) + ")");
  const bool exchange = llvm::any_of(segments, [](const Segment &s) { return s.exchange; });
  return std::string(exchange ? "GPTC_CUDA_BLOCK_LAUNCH(" : "GPTC_CUDA_GRID_LAUNCH(") +
         kernel + ", " + llvm::join(blocks, " +\n      ") + ")";
}

/// A family's call is a host function; any other body is a __global__ kernel of its own,
/// launched over its longest loop by a host function of the kernel's name.
LogicalResult CudaFlavour::function(const std::string &name, Operation *op, raw_ostream &os) {
  std::string host = e.signature(name, op->getOperands(), op->getResults());
  if (isFamily(op)) {
    std::string body;
    llvm::raw_string_ostream bs(body);
    if (failed(familyCall(op, bs)))
      return failure();
    os << "// " << op->getName().getStringRef() << describeLoc(op->getLoc()) << "\n"
       << host << " {\n" << body << "}\n\n";
    return success();
  }
  FailureOr<Segment> s = segment(name, op, os);
  if (failed(s))
    return failure();
  for (size_t j = 0; j < op->getNumOperands(); ++j)
    s->args.push_back("in" + std::to_string(j));
  for (size_t j = 0; j < op->getNumResults(); ++j)
    s->args.push_back("out" + std::to_string(j));
  std::string params = host.substr(host.find('(') + 1);
  params.pop_back();  // the host function's parameters alone
  const std::string call = launch(name + "_grid", *s, params, os);
  os << host << " {\n  " << call << "(" << llvm::join(s->args, ", ") << ");\n}\n\n";
  return success();
}

/// A group's members without a kernel family share launches, each on a range of a
/// launch's blocks (as on the CPU they share a parallel region): a small model's step is
/// dozens of such kernels, each a few microseconds however little it does, and AdamW's
/// updates alone are one a parameter. A launch's parameters stay within CUDA's 32,764
/// bytes (sm_70 and later, CUDA 12.1 and later); past them a member starts another launch.
/// The launches and the members with a family run on streams of their own, joined at the
/// group's end (gptc::cuda::Branches): a weight gradient's few long blocks beside an input
/// gradient's many (gpt-pair-weight-gradients groups them). Round robin over 8 branches,
/// except the members that use the families' scratch (attention's gradient,
/// cross-entropy), which share it and so stay on branch 0, one after another.
LogicalResult CudaFlavour::group(HorizontalOp op, const std::string &name,
                                 ArrayRef<GroupMember> members,
                                 const DenseMap<Value, std::string> &names, raw_ostream &os) {
  constexpr size_t kParameterBytes = 32764;
  struct Launch {
    std::string call;
    bool scratch;
  };
  SmallVector<Launch> launches;
  SmallVector<SmallVector<Segment>> merged;
  SmallVector<llvm::SetVector<Value>> used;  // each merged launch's parameters
  for (const GroupMember &m : members) {
    Operation *member = m.op;
    if (isFamily(member)) {
      if (failed(function(m.name, member, os)))
        return failure();
      launches.push_back({m.name + "(" + llvm::join(m.args, ", ") + ")", usesScratch(member)});
      continue;
    }
    FailureOr<Segment> s = segment(m.name, member, os);
    if (failed(s))
      return failure();
    s->args = m.args;
    SmallVector<Value> values(member->getOperands());
    llvm::append_range(values, member->getResults());
    const size_t fresh =
        used.empty() ? values.size() : llvm::count_if(values, [&](Value v) {
          return !used.back().contains(v);
        });
    if (merged.empty() || (used.back().size() + fresh) * sizeof(void *) > kParameterBytes) {
      merged.emplace_back();
      used.emplace_back();
    }
    merged.back().push_back(*s);
    used.back().insert(values.begin(), values.end());
  }
  // A merged launch's parameters: the group's that its members use, in the group's order.
  const std::string pointer = e.aliasing ? "* " : "* __restrict ";
  Block &body = op.getBody().front();
  for (auto [k, segments] : llvm::enumerate(merged)) {
    SmallVector<std::string> params, args;
    for (Value v : body.getArguments())
      if (used[k].contains(v)) {
        params.push_back("const " + e.elemType(v) + pointer + names.lookup(v));
        args.push_back(names.lookup(v));
      }
    for (Value v : body.getTerminator()->getOperands())
      if (used[k].contains(v)) {
        params.push_back(e.elemType(v) + pointer + names.lookup(v));
        args.push_back(names.lookup(v));
      }
    std::string kernel = name + "_grid" + (merged.size() > 1 ? std::to_string(k) : "");
    launches.push_back({launch(kernel, segments, llvm::join(params, ", "), os) + "(" +
                            llvm::join(args, ", ") + ")",
                        false});
  }
  os << "// gpt.horizontal" << describeLoc(op.getLoc()) << ": its members in "
     << launches.size() << (launches.size() == 1 ? " launch" : " launches, parallel branches")
     << "\n"
     << e.signature(name, op.getInputs(), op.getResults()) << " {\n";
  constexpr unsigned kBranches = 8;  // gptc::cuda::Branches::kBranches
  if (launches.size() > 1)
    os << "  gptc::cuda::Branches branches(gptc_step_error);\n";
  unsigned onBranch = 0;
  for (auto [k, l] : llvm::enumerate(launches)) {
    const unsigned branch = l.scratch ? 0 : (unsigned)k % kBranches;
    if (launches.size() > 1 && branch != onBranch)
      os << "  branches.to(" << (onBranch = branch) << ");\n";
    os << "  " << l.call << ";\n";
  }
  os << "}\n\n";
  return success();
}

/// (GPTC_CUDA_DEBUG=1 checks each kernel, and names it with its line.)
std::string CudaFlavour::call(const std::string &name, StringRef args, Operation *op) {
  return "    GPTC_CUDA_KERNEL(\"" + name + describeLoc(op->getLoc()) + "\", " + name + "(" +
         args.str() + "));\n";
}

/// A device array; the entry finds its address once, and fills a splat on the device.
std::string CudaFlavour::constant(ConstantOp c, const std::string &name) {
  auto value = cast<DenseElementsAttr>(c.getValue());
  Type et = c.getType().getElementType();
  std::string T = *cType(et);
  const int64_t count = std::max<int64_t>(c.getType().getNumElements(), 1);
  llvm::raw_string_ostream cos(constants);
  cos << "__device__ " << T << " " << name << "[" << count << "]";
  if (value.isSplat() && count > 1) {
    cos << ";\n";
    constantSetup += "    GPTC_CUDA_LOOP_LAUNCH(gptc::cuda::fill_kernel<" + T + ">, " +
                     std::to_string(count) + ")(" + name + "_p, (int64_t)" +
                     std::to_string(count) + ", (" + T + ")" +
                     elementLiteral(value.getSplatValue<Attribute>(), et) + ");\n";
  } else {
    cos << " = {" << elementList(value, et) << "};\n";
  }
  // Looked up once (the address never changes), not on every step.
  constantAddresses += "  static " + T + "* " + name + "_p = nullptr;\n  if (!" + name +
                       "_p) " + name + "_p = gptc::cuda::symbol_address(" + name +
                       ", \"cudaGetSymbolAddress(" + name + ")\", gptc_step_error);\n";
  return name + "_p";
}

std::string CudaFlavour::resultCopy(StringRef dst, StringRef src, int64_t n, StringRef type) {
  return ("    GPTC_CUDA_TRY(cudaMemcpyAsync(" + dst + ", " + src + ", " + Twine(n) +
          " * sizeof(" + type + "), cudaMemcpyDeviceToDevice, gptc::cuda::stream()));\n")
      .str();
}

/// On the device, before the step's kernels, each of which returns at once if a check
/// failed (GPTC_CUDA_KERNEL_BEGIN): the host does not wait for the verdict.
std::string CudaFlavour::idChecks(ArrayRef<IdCheck> ids) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (!ids.empty())
    os << "  // The caller's ids: a bad one stops every kernel after these.\n";
  for (const IdCheck &c : ids)
    os << "  GPTC_CUDA_LOOP_LAUNCH(gptc::cuda::ids_check_kernel, " << c.n
       << ")((const int64_t*)args[" << c.arg << "], " << c.n << ", " << c.bound << ", "
       << (c.ignore ? *c.ignore : 0) << "LL, " << (c.ignore ? "true" : "false") << ", "
       << errorCode(c.what + " out of range") << "u);\n";
  return text;
}

std::string CudaFlavour::bufferList() {
  std::string list;
  for (unsigned i = 0; i < e.fn.getNumArguments(); ++i)
    list += "args[" + std::to_string(i) + "], ";
  int64_t results = 0;
  for (unsigned j = 0; j < e.fn.getNumResults(); ++j)
    if (!resultUpdates(e.fn, j))
      list += "results[" + std::to_string(results++) + "], ";
  return list + "arena";
}

/// The families' scratch (attention's gradient, cross-entropy's row losses) after the
/// planned buffers, aligned: one region for every call, as they run one after another.
int64_t CudaFlavour::arenaBytes(int64_t planned) {
  if (!scratchBytes)
    return planned;
  scratchAt = (planned + 255) / 256 * 256;
  return scratchAt + scratchBytes;
}

/// The kernels, the error table and the entry, whose pointers are device pointers and
/// whose kernels run on the artifact's stream in order.
void CudaFlavour::file(raw_ostream &os, StringRef kernels, StringRef calls,
                       ArrayRef<IdCheck> ids, int64_t arenaBytes) {
  std::string checks = idChecks(ids);  // (adds its messages to the table)
  std::string table;
  for (const std::string &m : errorMessages)
    table += "    \"" + m + "\",\n";
  os << "// Generated by gptc for " << targetName(e.target)
     << ". One kernel per op, written once for ops with the same code; see "
        "docs/artifact.md.\n"
     << "#include \"gptc/cuda/generated.cuh\"\n#include <cstring>\n\n"
     << "namespace {\n\n"
     << "// The first failed CUDA call of the step, as one line (GPTC_CUDA_TRY).\n"
     << "std::string gptc_step_error;\n"
     << "// The kernel families' scratch: the arena's last " << scratchBytes
     << " bytes, set by the entry.\n"
     << "char* gptc_scratch = nullptr;\n\n"
     << constants << (constants.empty() ? "" : "\n") << kernels << "} // namespace\n\n"
     << "GPTC_EXPORT int gptc_entry_abi(void) { return 1; }\n\n"
     << "// The GPU's kernels take no host thread count.\n"
     << "GPTC_EXPORT void gptc_set_num_threads(int n) { (void)n; }\n\n"
     << "// The lines of the device's error codes (gptc::cuda::report_error).\n"
     << "static const char* const gptc_errors[] = {\n    \"\",\n" << table << "};\n\n"
     << "// The last step's error line, or null, once the stream has been waited for.\n"
     << "GPTC_EXPORT const char* gptc_device_step_status(void) {\n"
     << "  if (gptc::cuda::profile_path()) gptc::cuda::profile_collect();\n"
     << "  if (!gptc_step_error.empty()) return gptc_step_error.c_str();\n"
     << "  const unsigned* word = gptc::cuda::status_word(gptc_step_error);\n"
     << "  if (!word) return gptc_step_error.c_str();\n"
     << "  const unsigned code = *word;\n"
     << "  return code ? gptc_errors[code < sizeof(gptc_errors) / sizeof(gptc_errors[0]) ? code : 0] "
        ": nullptr;\n}\n\n"
     << "GPTC_EXPORT const char* gptc_entry(void* const* args, void* const* results, "
        "void* arena_) {\n"
     << "  char* arena = static_cast<char*>(arena_);\n  (void)arena; (void)args;\n"
     << "  gptc_step_error.clear();\n"
     << "  gptc_scratch = arena + " << scratchAt << ";\n"
     // (gptc compile --sanitize, on the emulation only: AddressSanitizer sees host memory)
     << (e.target == Target::CudaEmulated
             ? redzoneGuard(arenaBytes, {{scratchAt, scratchAt + scratchBytes}})
             : "")
     << "  static unsigned* error_word = nullptr;\n"
     << "  if (!error_word)\n    error_word = gptc::cuda::symbol_address(gptc::cuda::error_word, "
        "\"cudaGetSymbolAddress(error_word)\", gptc_step_error);\n"
     << "  if (!gptc_step_error.empty()) return gptc_step_error.c_str();\n"
     << "  GPTC_CUDA_TRY(cudaMemsetAsync(error_word, 0, sizeof(unsigned), "
        "gptc::cuda::stream()));\n"
     << constantAddresses << checks
     << "  // The kernels: captured once as a CUDA graph and replayed (gptc::cuda::run_step).\n"
     << "  const void* const buffers[] = {" << bufferList() << "};\n"
     << "  gptc::cuda::run_step(gptc_step_error, buffers, sizeof(buffers) / sizeof(buffers[0]), "
        "[&] {\n"
     << constantSetup << calls << "  });\n"
     << "  // The error code comes down with the results; one wait a step (the caller's when\n"
     << "  // deferred: gptc::cuda::wait_deferred).\n"
     << "  unsigned* code = gptc::cuda::status_word(gptc_step_error);\n"
     << "  if (code)\n"
     << "    GPTC_CUDA_TRY(cudaMemcpyAsync(code, error_word, sizeof(unsigned), "
        "cudaMemcpyDeviceToHost, gptc::cuda::stream()));\n"
     << "  if (gptc::cuda::wait_deferred())\n"
     << "    return gptc_step_error.empty() ? nullptr : gptc_step_error.c_str();\n"
     << "  GPTC_CUDA_TRY(cudaStreamSynchronize(gptc::cuda::stream()));\n"
     << "  return gptc_device_step_status();\n}\n";
}

std::unique_ptr<Flavour> makeCudaFlavour(Emitter &e) { return std::make_unique<CudaFlavour>(e); }

} // namespace mlir::gpt::emit
