//===- Artifact.cpp - write an artifact folder and build its library ------===//
#include "codegen/Codegen.h"

#include "ir/KernelLevel.h"
#include "ir/Signature.h"

#include "gptc/checksum.h"
#include "gptc/signature.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::gpt;

namespace {

std::string dtypeName(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isF64())
    return "f64";
  if (t.isBF16())
    return "bf16";
  if (t.isInteger(64))
    return "i64";
  if (t.isInteger(1))
    return "i1";
  return "unknown";
}

llvm::json::Object tensorSpec(std::string name, Type type) {
  auto t = cast<RankedTensorType>(type);
  llvm::json::Array shape;
  for (int64_t d : t.getShape())
    shape.push_back(d);
  return llvm::json::Object{{"name", std::move(name)}, {"dtype", dtypeName(t.getElementType())},
                            {"shape", std::move(shape)}};
}

LogicalResult writeFile(StringRef path, StringRef contents, std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    error = "cannot write " + path.str() + ": " + ec.message();
    return failure();
  }
  os << contents;
  os.close();
  if (os.has_error()) {  // a full disk, say: an error, not raw_fd_ostream's fatal one
    error = "cannot write " + path.str() + ": " + os.error().message();
    os.clear_error();
    return failure();
  }
  return success();
}

/// The compile cache: $GPTC_CACHE_DIR, else $XDG_CACHE_HOME/gptc, else ~/.cache/gptc;
/// empty when GPTC_NO_CACHE is set or no folder can be made.
std::string cacheDir() {
  if (const char *off = std::getenv("GPTC_NO_CACHE"); off && *off)
    return "";
  SmallString<256> dir;
  if (const char *d = std::getenv("GPTC_CACHE_DIR"); d && *d)
    dir = d;
  else if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    llvm::sys::path::append(dir, x, "gptc");
  else if (const char *h = std::getenv("HOME"); h && *h)
    llvm::sys::path::append(dir, h, ".cache", "gptc");
  if (dir.empty() || llvm::sys::fs::create_directories(dir))
    return "";
  return dir.str().str();
}

/// A compile cache entry is two files: KEY.so, the library, and KEY.sum, written after it,
/// the hex xxh3 of "KEY:" and the hex xxh3 of its bytes: the sum binds the library to its
/// key, so another entry's pair copied under this key does not pass. Each file is written
/// aside and renamed into place, so a concurrent compile never sees half of one.
std::string hexHash(StringRef bytes) { return llvm::utohexstr(llvm::xxh3_64bits(bytes)); }

std::string entrySum(StringRef cached, StringRef bytes) {
  return hexHash(llvm::sys::path::stem(cached).str() + ":" + hexHash(bytes));
}

/// The temporary name `path` is written under before it is renamed into place.
std::string asideOf(StringRef path) {
  return path.str() + ".tmp" + std::to_string(llvm::sys::Process::getProcessId());
}

/// Renames the file `fresh` over `path`, or removes it and fails with the reason.
LogicalResult renameOver(StringRef fresh, StringRef path, std::string &error) {
  if (auto ec = llvm::sys::fs::rename(fresh, path)) {
    (void)llvm::sys::fs::remove(fresh);
    error = "cannot write " + path.str() + ": " + ec.message();
    return failure();
  }
  return success();
}

/// Writes `contents` beside `path` and renames it over `path`: a reader never sees half of
/// the file, and a process that mapped the previous one keeps it.
LogicalResult replaceFile(StringRef path, StringRef contents, std::string &error) {
  std::string tmp = asideOf(path);
  if (failed(writeFile(tmp, contents, error))) {
    (void)llvm::sys::fs::remove(tmp);
    return failure();
  }
  return renameOver(tmp, path, error);
}

void storeCached(StringRef lib, StringRef cached, StringRef sum) {
  auto buf = llvm::MemoryBuffer::getFile(lib);
  std::string ignored;  // a cache that cannot be written costs only the entry
  if (buf && succeeded(replaceFile(cached, (*buf)->getBuffer(), ignored)))
    (void)replaceFile(sum, entrySum(cached, (*buf)->getBuffer()), ignored);
}

/// Whether `bytes` is a library gptc built: an ELF shared object whose dynamic symbols
/// define the entry points the runtime looks up (runtime/src/model.cpp).
bool isKernelsLibrary(llvm::MemoryBufferRef bytes) {
  auto obj = llvm::object::ObjectFile::createObjectFile(bytes);
  if (!obj) {
    llvm::consumeError(obj.takeError());
    return false;
  }
  auto *elf = dyn_cast<llvm::object::ELFObjectFileBase>(obj->get());
  if (!elf || elf->getEType() != llvm::ELF::ET_DYN)
    return false;
  const StringRef wanted[] = {"gptc_entry", "gptc_entry_abi", "gptc_signature"};
  unsigned found = 0;
  for (const llvm::object::ELFSymbolRef &sym : elf->getDynamicSymbolIterators()) {
    auto name = sym.getName();
    auto flags = sym.getFlags();
    if (!name || !flags) {
      llvm::consumeError(name.takeError());
      llvm::consumeError(flags.takeError());
      continue;
    }
    for (unsigned i = 0; i < std::size(wanted); ++i)
      if (*name == wanted[i] && !(*flags & llvm::object::SymbolRef::SF_Undefined))
        found |= 1u << i;
  }
  return found == (1u << std::size(wanted)) - 1;
}

/// The cached library, if the entry is whole (else null). One whose bytes do not match its
/// sum (a disk error, an edit, a copy cut short), or that is not a library gptc built
/// though its sum matches (a file put there by hand or by another tool), is removed, with
/// a warning, and the library rebuilt: otherwise every later compile would publish the
/// same broken library. An entry without a sum (being written, or from an older gptc) is
/// a miss.
std::unique_ptr<llvm::MemoryBuffer> readCached(StringRef cached, StringRef sum) {
  if (!llvm::sys::fs::exists(cached))
    return nullptr;
  auto lib = llvm::MemoryBuffer::getFile(cached);
  auto want = llvm::MemoryBuffer::getFile(sum);
  if (!lib || !want)
    return nullptr;
  const char *why = "does not match its checksum";
  if (entrySum(cached, (*lib)->getBuffer()) == (*want)->getBuffer().trim()) {
    if (isKernelsLibrary((*lib)->getMemBufferRef()))
      return std::move(*lib);
    why = "is not a kernels library gptc built";
  }
  llvm::errs() << "gptc: warning: compile cache entry " << cached << " " << why
               << "; removed, rebuilding\n";
  (void)llvm::sys::fs::remove(cached);
  (void)llvm::sys::fs::remove(sum);
  return nullptr;
}

// Appends the headers under gptc/<folder> whose names end in `suffix` (the prelude's
// families, the CUDA families), sorted, to `files`: each is part of what a kernels.so was
// built from.
LogicalResult listPreludeHeaders(StringRef runtimeInclude, StringRef folder, StringRef suffix,
                                 std::vector<std::string> &files, std::string &error) {
  SmallString<256> dir(runtimeInclude);
  llvm::sys::path::append(dir, "gptc", folder);
  std::vector<std::string> found;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    if (StringRef(it->path()).ends_with(suffix))
      found.push_back(it->path());
  if (ec) {
    error = "cannot list " + dir.str().str() + ": " + ec.message();
    return failure();
  }
  llvm::sort(found);
  files.insert(files.end(), found.begin(), found.end());
  return success();
}

/// The generated source's file name for `target`.
StringRef sourceName(Target target) {
  return target == Target::Cpu ? "kernels.cpp" : "kernels.cu";
}

/// The GPU architecture of --target=cuda: $GPTC_CUDA_ARCH, default sm_90 (Hopper).
std::string cudaArch() {
  const char *arch = std::getenv("GPTC_CUDA_ARCH");
  return arch && *arch ? arch : "sm_90";
}

/// gptc compile --sanitize: any out-of-bounds access or undefined behaviour stops the run
/// with the sanitizer's report (-g1: its lines name the generated source's lines).
const std::vector<std::string> &sanitizerFlags() {
  static const std::vector<std::string> flags = {
      "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
      "-g1"};
  return flags;
}

/// nvcc with the portable flags (scripts/cuda-portable-flags.txt, compiled in: no fma the
/// source did not write, IEEE division and square root, no flush to zero) for the GPU
/// architecture $GPTC_CUDA_ARCH (default sm_90), as a shared library.
std::vector<std::string> cudaCompilerFlags() {
  std::vector<std::string> flags;
  SmallVector<StringRef> words;
  StringRef(GPTC_CUDA_PORTABLE_FLAGS).split(words, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef w : words)
    flags.push_back(w.str());
  flags.push_back("-arch=" + cudaArch());
  flags.insert(flags.end(), {"-Xcompiler=-fPIC,-fvisibility=hidden", "-shared"});
  return flags;
}

/// The CUDA source built by the host compiler over gptc/cuda/emulate.hpp (Target::
/// CudaEmulated): the determinism contract's flags, as C++.
std::vector<std::string> emulatedCudaFlags(bool sanitize) {
  std::vector<std::string> flags = {
      "-std=c++17",         "-O2",           "-ffp-contract=off",
      "-fno-fast-math",     "-fno-math-errno", "-fno-strict-aliasing",
      "-fvisibility=hidden", "-fPIC",        "-shared",
      "-pthread",           "-DGPTC_CUDA_EMULATE", "-DGPTC_CUDA_EMULATE_CHECK_POINTERS"};
  if (sanitize)
    flags.insert(flags.end(), sanitizerFlags().begin(), sanitizerFlags().end());
  flags.insert(flags.end(), {"-x", "c++"});
  return flags;
}

/// Runs the compiler for `target` on the generated source: the host C++ compiler on
/// kernels.cpp (no fast-math, no FMA contraction: the determinism contract,
/// docs/numerics.md), nvcc on kernels.cu, or the host compiler on kernels.cu over the
/// emulation. The library is cached by a hash of the source, the compiler and its flags,
/// so an unchanged model is not rebuilt.
LogicalResult compileLibrary(StringRef dir, StringRef runtimeInclude, Target target,
                             bool sanitize, std::string &error) {
  const bool nvcc = target == Target::Cuda;
  const char *env = std::getenv(nvcc ? "GPTC_NVCC" : "GPTC_CXX");
  std::string cxx = env && *env ? env : nvcc ? "nvcc" : "c++";
  auto program = nvcc ? llvm::sys::findProgramByName(cxx, {"/usr/local/cuda/bin"})
                      : llvm::sys::findProgramByName(cxx);
  if (nvcc && !program)
    program = llvm::sys::findProgramByName(cxx);
  if (!program) {
    error = nvcc ? "CUDA compiler '" + cxx + "' not found (install the CUDA toolkit or set GPTC_NVCC)"
                 : "host C++ compiler '" + cxx + "' not found (set GPTC_CXX)";
    return failure();
  }
  SmallString<256> src(dir), lib(dir), log(dir);
  llvm::sys::path::append(src, sourceName(target));
  llvm::sys::path::append(lib, "kernels.so");
  llvm::sys::path::append(log, "compile.log");
  // The library is written beside kernels.so and renamed over it: a process running the
  // previous kernels.so from this folder keeps its file, and a load never sees half of one.
  const std::string fresh = asideOf(lib);
  std::string include = "-I" + runtimeInclude.str();
  const std::vector<std::string> flags = target == Target::Cpu  ? hostCompilerFlags(sanitize)
                                         : nvcc                  ? cudaCompilerFlags()
                                                                 : emulatedCudaFlags(sanitize);
  SmallVector<StringRef> args = {*program};
  args.append(flags.begin(), flags.end());
  args.append({include, src, "-o", fresh});
  // The key: the generated source, the prelude it includes (gptc/prelude.h and every
  // header of its families), the compiler, the flags (the target among them) and the host
  // CPU (for -march=native).
  std::string key = llvm::sys::getHostCPUName().str() + "\n";
  for (StringRef a : args)
    if (a != src && a != fresh)
      key += a.str() + "\n";
  std::vector<std::string> files = {src.str().str(), runtimeInclude.str() + "/gptc/prelude.h"};
  if (failed(listPreludeHeaders(runtimeInclude, "prelude", ".h", files, error)) ||
      (target != Target::Cpu &&
       failed(listPreludeHeaders(runtimeInclude, "cuda", "", files, error))))
    return failure();
  for (const std::string &file : files) {
    auto buf = llvm::MemoryBuffer::getFile(file);
    if (!buf) {
      error = "cannot read " + file + ": " + buf.getError().message();
      return failure();
    }
    key += (*buf)->getBuffer().str();
  }
  std::string cache = cacheDir(), cached, sum;
  if (!cache.empty()) {
    SmallString<256> p(cache);
    llvm::sys::path::append(p, hexHash(key));
    cached = (p + ".so").str();
    sum = (p + ".sum").str();
    if (auto hit = readCached(cached, sum))
      return replaceFile(lib, hit->getBuffer(), error);
  }
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(log), StringRef(log)};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(*program, args, std::nullopt, redirects, 0, 0, &execError);
  if (rc != 0) {
    (void)llvm::sys::fs::remove(fresh);
    error = (nvcc ? "nvcc failed on " : "host compiler failed on ") + src.str().str() + " (see " + log.str().str() + ")" +
            (execError.empty() ? "" : ": " + execError);
    return failure();
  }
  if (!cached.empty())
    storeCached(fresh, cached, sum);
  return renameOver(fresh, lib, error);
}

} // namespace

std::vector<std::string> mlir::gpt::hostCompilerFlags(bool sanitize) {
  // The target: the host's vector extensions, or GPTC_MARCH's (x86-64-v3 to build for any
  // AVX2 machine, say). The prelude's vector forms give the same bits at every width.
  const char *marchEnv = std::getenv("GPTC_MARCH");
  std::string march = std::string("-march=") + (marchEnv && *marchEnv ? marchEnv : "native");
  // -fno-math-errno: sqrt need not set errno, so loops that take it (AdamW) vectorise;
  // it changes no result. -fvisibility=hidden: the library exports its GPTC_EXPORT entry
  // points only. Otherwise the prelude's function-local statics (the thread count, the
  // error slot, the scratch) are GNU unique symbols, one per process for every library
  // loaded: models would share them, and a kernel error of one model could fail another's
  // concurrent run.
  std::vector<std::string> flags = {"-std=c++17",     "-O2",       march,
                                    "-ffp-contract=off", "-fno-fast-math", "-fno-math-errno",
                                    "-fvisibility=hidden", "-fopenmp", "-fPIC", "-shared"};
  // GPTC_EMULATE_AVX512=1 (tests only): the prelude's AVX-512 forms on a CPU without
  // AVX-512, their intrinsics emulated by SIMDe (libsimde-dev) on AVX2 and FMA, so that a
  // machine without AVX-512 can check that they give the same bits (slower; it needs an
  // AVX2 target, GPTC_MARCH=x86-64-v3 say).
  const char *emulate = std::getenv("GPTC_EMULATE_AVX512");
  if (emulate && std::string(emulate) == "1")
    flags.insert(flags.end(), {"-DGPTC_EMULATE_AVX512", "-Wno-psabi"});
  if (sanitize)
    flags.insert(flags.end(), sanitizerFlags().begin(), sanitizerFlags().end());
  return flags;
}

LogicalResult mlir::gpt::writeArtifact(func::FuncOp fn, const EmittedSource &src,
                                       StringRef outDir, StringRef weightsPath,
                                       StringRef runtimeInclude, std::string &error) {
  if (auto ec = llvm::sys::fs::create_directories(outDir)) {
    error = "cannot create " + outDir.str() + ": " + ec.message();
    return failure();
  }
  auto path = [&](StringRef name) {
    SmallString<256> p(outDir);
    llvm::sys::path::append(p, name);
    return p.str().str();
  };

  llvm::json::Array args, results;
  // The manifest's arena, arguments and results as gptc/signature.h's lines, which the
  // library returns from gptc_signature and the runtime checks the manifest against.
  std::vector<std::string> signature = {gptc::signature_arena(src.arenaBytes)};
  auto signatureLine = [&](const std::string &role, const std::string &name, Type type) {
    auto t = cast<RankedTensorType>(type);
    signature.push_back(gptc::signature_tensor(role, dtypeName(t.getElementType()),
                                               std::vector<int64_t>(t.getShape()), name));
  };
  for (auto [i, arg] : llvm::enumerate(fn.getArguments())) {
    auto nameAttr = argName(fn, i);
    auto kindAttr = argKind(fn, i);
    std::string name = nameAttr ? nameAttr.getValue().str() : "arg" + std::to_string(i);
    std::string kind = kindAttr ? kindAttr.getValue().str() : std::string("input");
    // A causal mask that gpt-raise-attention compiled into attention: the kernels no longer
    // read it, so the runtime checks that it still holds tril(ones) (docs/artifact.md).
    const bool trilOnes = kind == "param" && fn.getArgAttr(i, kTrilOnesAttr);
    signatureLine(gptc::signature_kind(kind, trilOnes), name, arg.getType());
    llvm::json::Object spec = tensorSpec(name, arg.getType());
    spec["kind"] = kind;
    if (trilOnes)
      spec["tril_ones"] = true;
    // A parameter no gradient reaches (gpt-autodiff): a training step never moves it, and
    // gptc's gradient-flow check names it at the first step.
    if (fn.getArgAttr(i, kNoGradientAttr))
      spec["no_gradient"] = true;
    args.push_back(std::move(spec));
  }
  for (auto [i, type] : llvm::enumerate(fn.getResultTypes())) {
    if (fn.getResultAttr(i, kUpdatesAttr))
      continue; // written back into its argument by the entry, not returned
    auto nameAttr = resultName(fn, i);
    std::string name = nameAttr ? nameAttr.getValue().str() : "result" + std::to_string(i);
    signatureLine("result", name, type);
    results.push_back(tensorSpec(name, type));
  }
  // target and numerics: what the library runs on and which numerics contract it keeps (a
  // runtime refuses an artifact for a target it was not built for).
  llvm::json::Object manifest{{"format", "gptc-artifact"},     {"version", 1},
                              {"target", targetName(src.target)}, {"numerics", "portable"},
                              {"library", "kernels.so"},       {"source", sourceName(src.target)},
                              {"weights", "weights.safetensors"}, {"arena_bytes", src.arenaBytes},
                              {"kernels", src.numKernels},     {"args", std::move(args)},
                              {"results", std::move(results)}};
  // A plan with redzones (gptc compile --sanitize) is built with the sanitizers, and the
  // runtime loads it only where their runtimes are.
  const bool sanitize = fn->hasAttr(kRedzoneAttr);
  if (sanitize)
    manifest["sanitize"] = true;
  if (src.target == Target::Cuda)  // the GPU architecture nvcc built the kernels for
    manifest["cuda_arch"] = cudaArch();

  const std::string code = src.code + "\n// What this library was built for (gptc/signature.h).\n" +
                           "GPTC_EXPORT const char* gptc_signature(void) {\n  return " +
                           gptc::signature_literal(signature) + ";\n}\n";
  if (failed(writeFile(path(sourceName(src.target)), code, error)) ||
      failed(compileLibrary(outDir, runtimeInclude, src.target, sanitize, error)))
    return failure();
  // The library's size and checksum, which the runtime checks before it loads the library:
  // a truncated, corrupt or swapped kernels.so is then an error, not a crash in dlopen.
  auto lib = llvm::MemoryBuffer::getFile(path("kernels.so"));
  if (!lib) {
    error = "cannot read " + path("kernels.so") + ": " + lib.getError().message();
    return failure();
  }
  const std::string libBytes = (*lib)->getBuffer().str();
  manifest["library_bytes"] = static_cast<int64_t>(libBytes.size());
  manifest["library_fnv1a64"] = gptc::fnv1a64_hex(libBytes);
  if (!weightsPath.empty()) {
    if (auto ec = llvm::sys::fs::copy_file(weightsPath, path("weights.safetensors"))) {
      error = "cannot copy weights " + weightsPath.str() + ": " + ec.message();
      (void)llvm::sys::fs::remove(path("weights.safetensors"));  // no half-copied weights
      return failure();
    }
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest))) << "\n";
  return writeFile(path("manifest.json"), text, error);
}
