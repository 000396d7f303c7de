// model.cpp — gptc::rt::Model: manifest parsing, dlopen of kernels.so, parameter loading,
// the arena, and the call into gptc_entry (docs/artifact.md).
#include "gptc/model.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <type_traits>
#include <nlohmann/json.hpp>

#include "gptc/checksum.h"
#include "gptc/prelude/cpu/pages.h"
#include "gptc/signature.h"
#include "gptc/safetensors.hpp"

namespace gptc::rt {

using nlohmann::json;

size_t dtype_size(const std::string& d) {
  if (d == "f32") return 4;
  if (d == "f64" || d == "i64") return 8;
  if (d == "bf16") return 2;
  if (d == "i1") return 1;
  throw Error("unknown dtype '" + d + "'");
}

std::string shape_str(const std::vector<int64_t>& shape) { return gptc::shape_text(shape); }

namespace {

using EntryAbiFn = int (*)();
// Returns null on success, else a message from a kernel that found bad data.
using EntryFn = const char* (*)(void* const*, void* const*, void*);

constexpr size_t kAlign = 64;

// Frees what aligned_buffer gave: a mapping of `mapped` bytes, or (0) a heap block.
struct PagesDeleter {
  size_t mapped = 0;
  void operator()(void* p) const {
#if defined(__linux__)
    if (mapped) {
      munmap(p, mapped);
      return;
    }
#endif
    std::free(p);
  }
};
using AlignedBuf = std::unique_ptr<void, PagesDeleter>;

// 64-byte-aligned, in huge pages from 2 MB (gptc/prelude/cpu/pages.h), zero-filled, never
// null (even for 0 bytes). From 2 MB on Linux, an anonymous mapping on a huge page's
// boundary: its pages read as zero and take memory only once written, so an arena that
// never runs (a generator's prefill, where every prompt is shorter than it) is not
// resident, where zero-filling a heap block made it so.
AlignedBuf aligned_buffer(size_t nbytes, const std::string& what) {
  if (nbytes > SIZE_MAX - 2 * gptc::kHugePage)
    throw Error("out of memory allocating " + std::to_string(nbytes) + " bytes for " + what);
  size_t size = (nbytes + kAlign - 1) / kAlign * kAlign;
  if (size == 0) size = kAlign;
#if defined(__linux__)
  if (size >= gptc::kHugePage) {
    const size_t huge = gptc::kHugePage, len = (size + huge - 1) / huge * huge;
    void* raw = mmap(nullptr, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (raw == MAP_FAILED)
      throw Error("out of memory allocating " + std::to_string(size) + " bytes for " + what);
    const uintptr_t start = (reinterpret_cast<uintptr_t>(raw) + huge - 1) / huge * huge;
    const size_t head = start - reinterpret_cast<uintptr_t>(raw);
    if (head) munmap(raw, head);
    if (huge - head) munmap(reinterpret_cast<char*>(start) + len, huge - head);
#if defined(MADV_HUGEPAGE)
    if (gptc::huge_pages_on()) madvise(reinterpret_cast<void*>(start), len, MADV_HUGEPAGE);
#endif
    return AlignedBuf(reinterpret_cast<void*>(start), PagesDeleter{len});
  }
#endif
  void* p = gptc::alloc_pages(size);
  if (!p) throw Error("out of memory allocating " + std::to_string(size) + " bytes for " + what);
  std::memset(p, 0, size);
  return AlignedBuf(p, PagesDeleter{});
}

// Parses {"name", "dtype", "shape"} of one manifest tensor entry.
TensorSpec parse_spec(const json& j, const std::string& where, const std::string& file) {
  auto bad = [&](const std::string& what) { return Error(file + ": " + where + ": " + what); };
  if (!j.is_object()) throw bad("not an object");
  if (!j.contains("name") || !j["name"].is_string()) throw bad("missing \"name\"");
  if (!j.contains("dtype") || !j["dtype"].is_string()) throw bad("missing \"dtype\"");
  if (!j.contains("shape") || !j["shape"].is_array()) throw bad("missing \"shape\"");
  TensorSpec s;
  s.name = j["name"].get<std::string>();
  for (unsigned char c : s.name)
    if (c < 0x20 || c == 0x7f) throw bad("a tensor name holds a control character");
  s.dtype = j["dtype"].get<std::string>();
  if (safetensors::from_manifest_dtype(s.dtype).empty())
    throw bad("tensor '" + s.name + "' has unknown dtype '" + s.dtype + "'");
  const uint64_t esize = dtype_size(s.dtype);
  uint64_t numel = 1;
  for (const json& d : j["shape"]) {
    if (!d.is_number_unsigned()) throw bad("tensor '" + s.name + "': shape entries must be integers >= 0");
    const uint64_t dim = d.get<uint64_t>();
    // Every count, and its bytes, fits an int64_t: the kernels index with them.
    if (dim > uint64_t(INT64_MAX) || (dim && numel > uint64_t(INT64_MAX) / dim / esize))
      throw bad("tensor '" + s.name + "': shape is too large");
    s.shape.push_back(int64_t(dim));
    numel *= dim;
  }
  s.numel = int64_t(numel);
  s.nbytes = size_t(numel * esize);
  return s;
}

// Whether `bytes` is a whole ELF file: its program headers, the segments they map and its
// section headers all lie within it. dlopen maps segments past the end of a truncated file
// and the process dies of SIGBUS when the loader touches them; this says so instead.
// Returns an empty string, or what is wrong.
std::string elf_not_whole(const std::string& bytes) {
  const size_t size = bytes.size();
  if (size < sizeof(Elf64_Ehdr) || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0)
    return "not an ELF file";
  if (bytes[EI_CLASS] != ELFCLASS64) return "not a 64-bit ELF file";
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  auto within = [size](uint64_t offset, uint64_t length) {
    return offset <= size && length <= size - offset;
  };
  if (!within(eh.e_phoff, uint64_t(eh.e_phnum) * eh.e_phentsize) ||
      (eh.e_phnum && eh.e_phentsize < sizeof(Elf64_Phdr)))
    return "its program headers run past the end of the file";
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + uint64_t(i) * eh.e_phentsize, sizeof ph);
    if (!within(ph.p_offset, ph.p_filesz))
      return "segment " + std::to_string(i) + " runs past the end of the file";
  }
  if (!within(eh.e_shoff, uint64_t(eh.e_shnum) * eh.e_shentsize))
    return "its section headers run past the end of the file";
  return "";
}

// Keeps the OpenMP runtime the kernels `lib` were linked with (libgomp) loaded until the
// process ends. Its worker threads outlive every parallel region, idle inside it; when the
// last kernels.so that needed it is unloaded in a program that does not link it itself (a
// C or C++ deployment binary), dlclose would unmap it under them: a SIGSEGV at the next
// load or at exit. The kernels themselves are still unloaded with their Model. Found by
// asking the library for an OpenMP symbol and pinning the file that defines it (no-op for
// kernels built without OpenMP, or a runtime that is already the program's own).
void pin_openmp_runtime(void* lib) {
  void* sym = dlsym(lib, "omp_get_max_threads");
  Dl_info info;
  if (sym && dladdr(sym, &info) && info.dli_fname)
    dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

// Opens the library `bytes` (read from `path`) through a private copy: a temporary file
// with a name this process has not used before, dlopened and then unlinked. dlopen hands
// back a library that is already loaded under the same name without reading the file
// again, and a mapped file that is rewritten changes under the code running from it: a
// model compiled again into the same artifact directory while an earlier Model of it was
// alive (a notebook cell run twice) crashed the process, or would have run the earlier
// kernels. With the copy, each Model's kernels are its own whatever later happens to the
// artifact. Where no temporary file can be made or run (no writable TMPDIR, /tmp mounted
// noexec), the library is opened in place (`st`: its file), and `inPlace` says so; a second
// Model of the same file would then share the first's library, its thread count and its
// error slot, so that one model's kernel error could fail the other's run: refused.
// Returns null with the reason in `error`.
std::mutex g_in_place_mutex;
std::set<std::pair<dev_t, ino_t>> g_in_place;  // files loaded in place by live Models

void* dlopen_private(const std::string& bytes, const std::string& path, const struct stat& st,
                     bool& inPlace, std::string& error) {
  static std::atomic<unsigned long> serial{0};
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string base = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/gptc-kernels-" +
                           std::to_string((long)getpid()) + "-";
  for (int attempt = 0; attempt < 16; ++attempt) {
    const std::string copy = base + std::to_string(serial++) + ".so";
    int fd = ::open(copy.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
    if (fd < 0) {
      if (errno == EEXIST) continue;  // another process's (a pid reused): the next name
      break;
    }
    bool written = ::write(fd, bytes.data(), bytes.size()) == (ssize_t)bytes.size();
    written = ::close(fd) == 0 && written;
    void* lib = written ? dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
    ::unlink(copy.c_str());
    if (lib) return lib;
    break;
  }
  std::lock_guard<std::mutex> lock(g_in_place_mutex);
  if (g_in_place.count({st.st_dev, st.st_ino})) {
    error = "no private copy could be made in " + base.substr(0, base.rfind('/')) +
            " and another Model of this process already runs this file in place; two Models "
            "cannot share one library: point TMPDIR at a writable directory that allows "
            "executing files";
    return nullptr;
  }
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    error = e ? e : "unknown dlopen error";
    return nullptr;
  }
  g_in_place.insert({st.st_dev, st.st_ino});
  inPlace = true;
  return lib;
}

// Where `data` (a tensor of `spec`) is not tril(ones) over its last two dims, which a
// tril_ones param must hold: "element [i, j] is not 1"; empty where it is that.
std::string not_tril_ones(const TensorSpec& spec, const void* data) {
  if (spec.shape.size() < 2) return "it has rank " + std::to_string(spec.shape.size());
  const int64_t rows = spec.shape[spec.shape.size() - 2], cols = spec.shape.back();
  const int64_t mats = rows > 0 && cols > 0 ? spec.numel / (rows * cols) : 0;
  // Index of the first element that is not what tril(ones) holds there, or -1.
  auto first_wrong = [&](auto at) -> int64_t {
    for (int64_t m = 0, k = 0; m < mats; ++m)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j, ++k)
          if (at(k) != (j <= i ? 1.0 : 0.0)) return k;
    return -1;
  };
  int64_t k = -1;
  if (spec.dtype == "f32") {
    k = first_wrong([p = static_cast<const float*>(data)](int64_t e) { return double(p[e]); });
  } else if (spec.dtype == "f64") {
    k = first_wrong([p = static_cast<const double*>(data)](int64_t e) { return p[e]; });
  } else if (spec.dtype == "bf16") {  // the upper half of an f32
    k = first_wrong([p = static_cast<const uint16_t*>(data)](int64_t e) {
      const uint32_t bits = uint32_t(p[e]) << 16;
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return double(f);
    });
  } else if (spec.dtype == "i64") {
    k = first_wrong([p = static_cast<const int64_t*>(data)](int64_t e) { return double(p[e]); });
  } else {  // i1: one byte
    k = first_wrong([p = static_cast<const uint8_t*>(data)](int64_t e) { return double(p[e]); });
  }
  if (k < 0) return "";
  std::vector<int64_t> index(spec.shape.size());
  for (size_t d = index.size(), rest = size_t(k); d-- > 0; rest /= size_t(spec.shape[d]))
    index[d] = int64_t(rest % size_t(spec.shape[d]));
  const bool one = index.back() <= index[index.size() - 2];
  return "element " + shape_str(index) + " is not " + (one ? "1" : "0");
}

// The manifest's arena, arguments and results (gptc/signature.h's lines) against those the
// library was built for, where it says (gptc_signature; libraries from before it existed
// do not): the first line that differs is the error.
void check_signature(const Model& model, const std::vector<std::string>& kinds, void* lib,
                     const std::string& mpath, const std::string& lpath) {
  using SignatureFn = const char* (*)();
  auto fn = (SignatureFn)dlsym(lib, "gptc_signature");
  if (!fn) return;
  std::vector<std::string> built;
  const std::string text = fn();
  for (size_t start = 0;;) {
    const size_t end = text.find('\n', start);
    built.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  std::vector<std::string> said = {gptc::signature_arena(model.arena_bytes())};
  size_t p = 0, i = 0;
  for (const std::string& kind : kinds) {
    const TensorSpec& t = kind == "input" ? model.inputs()[i++] : model.params()[p++];
    said.push_back(gptc::signature_tensor(kind, t.dtype, t.shape, t.name));
  }
  for (const TensorSpec& t : model.results())
    said.push_back(gptc::signature_tensor("result", t.dtype, t.shape, t.name));
  auto quoted = [](const std::vector<std::string>& lines, size_t k) {
    return k < lines.size() ? "'" + lines[k] + "'" : std::string("nothing more");
  };
  for (size_t k = 0; k < std::max(built.size(), said.size()); ++k)
    if (k >= built.size() || k >= said.size() || built[k] != said[k])
      throw Error(mpath + ": says " + quoted(said, k) + " where " + lpath + " was built for " +
                  quoted(built, k) + "; the manifest was edited or is another build's: compile "
                  "the model again");
}

}  // namespace

// The device layer of a CUDA artifact, exported by its kernels.so (gptc/cuda/generated.cuh):
// the runtime includes no CUDA header and links no CUDA library. Each returns null or one
// line naming the CUDA call that failed.
struct DeviceFns {
  const char* (*init)() = nullptr;
  const char* (*alloc)(void**, size_t) = nullptr;
  const char* (*release)(void*) = nullptr;
  const char* (*host_alloc)(void**, size_t) = nullptr;  // page-locked: copies are async
  const char* (*host_release)(void*) = nullptr;
  const char* (*copy_async)(void*, const void*, size_t, int) = nullptr;  // done by sync
  const char* (*sync)() = nullptr;
  // Device memory another artifact's layer allocated in this process (a param shared
  // through weights_of) that this layer's kernels will be given.
  const char* (*adopt)(void*, size_t) = nullptr;
  // Rows of bytes from one place in device memory to another (null source: zeros), queued.
  const char* (*copy_rows)(void*, size_t, const void*, size_t, size_t, size_t) = nullptr;
  // The entry returns once its step is queued; after the sync, step_status gives the step's
  // error (generated in kernels.cu, with the artifact's error lines). So the results'
  // downloads are queued behind the step and a run waits once.
  const char* (*defer_wait)() = nullptr;
  const char* (*step_status)() = nullptr;
};

// A param's storage: the callers' host copy and, for a CUDA artifact, its device buffer,
// synchronised lazily (host_stale: the device holds a newer value, since a run;
// device_stale: the caller may have written the host copy). The Models that share the
// param (load's weights_of) share this, so a run of either and a write through either
// are seen by both. The last Model that holds a device buffer releases it.
struct ParamBuffer {
  std::shared_ptr<void> host;
  void* dev = nullptr;
  bool host_stale = false, device_stale = false;
};

struct Model::Impl {
  void* lib = nullptr;           // dlopen handle
  EntryFn entry = nullptr;
  // A CUDA artifact's (target "cuda", or "cuda-emulated": the same code path, its "device"
  // memory the host's): every param (ParamBuffer::dev), input, result and the arena has a
  // device buffer.
  std::string target;  // the manifest's: "cpu", "cuda" or "cuda-emulated"
  bool device = false;
  DeviceFns dev;
  std::vector<void*> dev_inputs, dev_results;
  void* dev_arena = nullptr;
  // A run's inputs and results pass through page-locked staging, so that their copies are
  // queued on the step's stream without waiting: one wait a run, for its results.
  void* staging = nullptr;
  std::vector<char*> staged_inputs, staged_results;
  std::vector<char> host_stale, device_stale;
  void* device_alloc(size_t bytes, const std::string& what) {
    void* p = nullptr;
    if (const char* e = dev.alloc(&p, bytes)) throw Error("device memory for " + what + ": " + e);
    return p;
  }
  void copy_async(void* dst, const void* src, size_t bytes, bool to_device) {
    if (bytes == 0) return;
    if (const char* e = dev.copy_async(dst, src, bytes, to_device ? 1 : 0)) throw Error(e);
    (to_device ? moved.to_device : moved.to_host) += bytes;
  }
  Model::Transfers moved;
  // alloc_resident's buffers: device memory, or (a CPU artifact) host memory.
  std::map<void*, AlignedBuf> resident_host;
  std::set<void*> resident_device;
  // Waits for what is queued on this artifact's stream, counted (Transfers::waits).
  const char* sync() {
    ++moved.waits;
    return dev.sync();
  }
  void wait() {
    if (const char* e = sync()) throw Error(e);
  }
  // A copy that is done when it returns.
  void copy(void* dst, const void* src, size_t bytes, bool to_device) {
    copy_async(dst, src, bytes, to_device);
    wait();
  }
  // The host copy of param i, current.
  void download_param(size_t i, size_t bytes) {
    ParamBuffer& b = *params[i];
    if (device && b.host_stale) {
      copy(b.host.get(), b.dev, bytes, false);
      b.host_stale = false;
    }
  }
  // Parallel to Model::params_; shared where load's weights_of gave another Model's (those
  // marked in param_shared).
  std::vector<std::shared_ptr<ParamBuffer>> params;
  std::vector<bool> param_shared;
  std::vector<bool> arg_is_param;       // manifest args order
  std::vector<bool> param_is_state;     // parallel to Model::params_
  std::vector<size_t> arg_index;        // index into params_ or inputs_
  AlignedBuf arena;
  std::mutex run_mutex;                 // one run at a time: the arena is shared
  bool inPlace = false;                 // the library is the artifact's file (dlopen_private)
  struct stat libStat {};
  ~Impl() {
    if (device) {
      for (const std::shared_ptr<ParamBuffer>& b : params)
        if (b->dev && b.use_count() == 1) dev.release(b->dev);
      for (void* p : dev_inputs) dev.release(p);
      for (void* p : resident_device) dev.release(p);
      for (void* p : dev_results) dev.release(p);
      if (dev_arena) dev.release(dev_arena);
      if (staging) dev.host_release(staging);
    }
    if (lib) dlclose(lib);
    if (inPlace) {
      std::lock_guard<std::mutex> lock(g_in_place_mutex);
      g_in_place.erase({libStat.st_dev, libStat.st_ino});
    }
  }
};

Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& dir, const Model* weights_of) {
  return open(dir, Open::Load, weights_of);
}

void Model::verify(const std::string& dir, const std::string& weights_of) {
  if (weights_of.empty()) {
    (void)open(dir, Open::Verify);
    return;
  }
  const std::unique_ptr<Model> holder = open(weights_of, Open::Manifest);
  (void)open(dir, Open::Verify, nullptr, &holder->params_);
}

std::unique_ptr<Model> Model::open(const std::string& dir, Open how, const Model* weights_of,
                                   const std::vector<TensorSpec>* held_elsewhere) {
  const bool verifyOnly = how != Open::Load;
  if (dir.find('\0') != std::string::npos)
    throw Error("artifact path '" + dir.substr(0, dir.find('\0')) + "...' holds a NUL byte");
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    throw Error("artifact directory '" + dir + "' does not exist (" + std::strerror(errno) + ")");
  if (!S_ISDIR(st.st_mode)) throw Error("artifact path '" + dir + "' is not a directory");

  // --- manifest.json -------------------------------------------------------------------
  const std::string mpath = dir + "/manifest.json";
  if (::stat(mpath.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw Error(mpath + ": cannot open (not a regular file)");
  std::ifstream mf(mpath);
  if (!mf) throw Error(mpath + ": cannot open (" + std::strerror(errno) + ")");
  json m;
  try {
    m = json::parse(mf);
  } catch (const std::exception& e) {
    throw Error(mpath + ": not valid JSON (" + e.what() + ")");
  }
  auto bad = [&](const std::string& what) { return Error(mpath + ": " + what); };
  if (!m.is_object()) throw bad("not a JSON object");
  if (!m.contains("format") || m["format"] != "gptc-artifact")
    throw bad("\"format\" is not \"gptc-artifact\"");
  if (!m.contains("version") || !m["version"].is_number_unsigned() || m["version"].get<uint64_t>() != 1)
    throw bad("unsupported \"version\" (this runtime reads version 1)");
  std::string library = "kernels.so", weights = "weights.safetensors";
  if (m.contains("library")) {
    if (!m["library"].is_string() || m["library"] == "") throw bad("\"library\" is not a file name");
    library = m["library"].get<std::string>();
  }
  if (m.contains("weights")) {
    if (!m["weights"].is_string() || m["weights"] == "") throw bad("\"weights\" is not a file name");
    weights = m["weights"].get<std::string>();
  }
  if (m.contains("sanitize") && !m["sanitize"].is_boolean())
    throw bad("\"sanitize\" is not a boolean");
  // What the library runs on and its numerics (absent in artifacts from before they were
  // recorded: the CPU's, portable). A CUDA artifact ("cuda", or "cuda-emulated": the CUDA
  // kernels under the GPU's emulation, whose device memory is the host's) brings its device
  // layer in its kernels.so; this runtime moves the tensors through it.
  if (m.contains("target") &&
      (!m["target"].is_string() ||
       (m["target"] != "cpu" && m["target"] != "cuda" && m["target"] != "cuda-emulated")))
    throw bad("an artifact for target " + m["target"].dump() +
              "; this runtime runs \"cpu\", \"cuda\" and \"cuda-emulated\" artifacts");
  if (m.contains("numerics") && (!m["numerics"].is_string() || m["numerics"] != "portable"))
    throw bad("numerics " + m["numerics"].dump() + " is not one this runtime knows (\"portable\")");
  if (!m.contains("arena_bytes") || !m["arena_bytes"].is_number_unsigned())
    throw bad("missing or invalid \"arena_bytes\"");
  if (!m.contains("args") || !m["args"].is_array()) throw bad("missing \"args\" array");
  if (!m.contains("results") || !m["results"].is_array()) throw bad("missing \"results\" array");

  std::unique_ptr<Model> model(new Model());
  model->dir_ = dir;
  model->impl_ = std::make_unique<Impl>();
  Impl& impl = *model->impl_;
  model->arena_bytes_ = m["arena_bytes"].get<size_t>();
  for (size_t i = 0; i < m["args"].size(); ++i) {
    const json& a = m["args"][i];
    std::string where = "args[" + std::to_string(i) + "]";
    TensorSpec s = parse_spec(a, where, mpath);
    const bool hasKind = a.is_object() && a.contains("kind") && a["kind"].is_string();
    const std::string kind = hasKind ? a["kind"].get<std::string>() : "";
    if (a.is_object() && a.contains("tril_ones")) {
      if (!a["tril_ones"].is_boolean() || kind != "param")
        throw bad(where + ": \"tril_ones\" must be a boolean of a \"param\"");
      s.tril_ones = a["tril_ones"].get<bool>();
    }
    if (kind == "param" || kind == "state") {
      // Both persist between runs; "state" (optimizer moments) starts at zero when the
      // weights file does not hold it.
      impl.arg_is_param.push_back(true);
      impl.arg_index.push_back(model->params_.size());
      impl.param_is_state.push_back(kind == "state");
      model->params_.push_back(std::move(s));
    } else if (kind == "input") {
      impl.arg_is_param.push_back(false);
      impl.arg_index.push_back(model->inputs_.size());
      model->inputs_.push_back(std::move(s));
    } else {
      throw bad(where + ": \"kind\" must be \"param\", \"state\" or \"input\"");
    }
  }
  for (size_t j = 0; j < m["results"].size(); ++j)
    model->results_.push_back(parse_spec(m["results"][j], "results[" + std::to_string(j) + "]", mpath));
  // Names find parameters (weights, param_data) and tell inputs apart: one of each.
  auto unique = [&](const std::vector<const std::vector<TensorSpec>*>& lists, const char* what) {
    std::set<std::string> seen;
    for (const auto* list : lists)
      for (const TensorSpec& t : *list)
        if (!seen.insert(t.name).second) throw bad(std::string("two ") + what + " named '" + t.name + "'");
  };
  unique({&model->params_, &model->inputs_}, "arguments");
  unique({&model->results_}, "results");
  if (how == Open::Manifest) return model;

  // --- kernels.so ----------------------------------------------------------------------
  const std::string lpath = dir + "/" + library;
  // Kernels run their parallel loops on OpenMP. Between two kernels of a step, idle
  // workers spin briefly (waking a sleeping thread costs more than a small kernel); after
  // ~20k spins they sleep, so they do not steal the cores from whatever else the process
  // runs between steps (PyTorch). The user's GOMP_SPINCOUNT / OMP_WAIT_POLICY win.
  setenv("GOMP_SPINCOUNT", "20000", /*overwrite=*/0);
  // An artifact of gptc compile --sanitize: its library needs AddressSanitizer's runtime
  // loaded first, or loading it ends the process.
  if (m.value("sanitize", false) && !dlsym(RTLD_DEFAULT, "__asan_init"))
    throw Error(dir + ": built with gptc compile --sanitize; run it with the sanitizers' "
                "runtimes preloaded: LD_PRELOAD=\"$(c++ -print-file-name=libasan.so) "
                "$(c++ -print-file-name=libubsan.so)\"");
  struct stat lst;
  if (::stat(lpath.c_str(), &lst) != 0)
    throw Error(lpath + ": cannot load (" + std::strerror(errno) + ")");
  if (!S_ISREG(lst.st_mode)) throw Error(lpath + ": cannot load (not a regular file)");
  std::ifstream lin(lpath, std::ios::binary);
  if (!lin) throw Error(lpath + ": cannot load (" + std::strerror(errno) + ")");
  const std::string lbytes((std::istreambuf_iterator<char>(lin)), std::istreambuf_iterator<char>());
  // The size and checksum gptc compile recorded (artifacts from before it did have neither).
  const std::string recompile = ": truncated, corrupt or not this artifact's library; compile "
                                "the model again";
  if (m.contains("library_bytes") && m["library_bytes"] != lbytes.size())
    throw Error(lpath + ": " + std::to_string(lbytes.size()) + " bytes where the manifest says " +
                m["library_bytes"].dump() + recompile);
  if (m.contains("library_fnv1a64") && m["library_fnv1a64"] != gptc::fnv1a64_hex(lbytes))
    throw Error(lpath + ": its checksum is not the manifest's" + recompile);
  if (std::string why = elf_not_whole(lbytes); !why.empty())
    throw Error(lpath + ": not a whole shared library (" + why + ")" + recompile);
  std::string loadError;
  impl.libStat = lst;
  impl.lib = dlopen_private(lbytes, lpath, lst, impl.inPlace, loadError);
  if (!impl.lib) {
    throw Error(lpath + ": cannot load (" + loadError + ")");
  }
  pin_openmp_runtime(impl.lib);
  auto abi = (EntryAbiFn)dlsym(impl.lib, "gptc_entry_abi");
  impl.entry = (EntryFn)dlsym(impl.lib, "gptc_entry");
  if (!abi || !impl.entry) throw Error(lpath + ": missing symbol gptc_entry_abi or gptc_entry");
  if (int v = abi(); v != 1)
    throw Error(lpath + ": entry ABI version " + std::to_string(v) + ", this runtime needs 1");
  std::vector<std::string> kinds;  // each argument's, in the manifest's order
  for (size_t a = 0; a < impl.arg_is_param.size(); ++a) {
    const size_t i = impl.arg_index[a];
    kinds.push_back(!impl.arg_is_param[a]    ? "input"
                    : impl.param_is_state[i] ? "state"
                                             : gptc::signature_kind("param", model->params_[i].tril_ones));
  }
  check_signature(*model, kinds, impl.lib, mpath, lpath);
  impl.target = m.value("target", "cpu");
  if (impl.target != "cpu") {
    DeviceFns& d = impl.dev;
    std::vector<std::string> missing;
    size_t wanted = 0;
    auto find = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(impl.lib, name));
      if (!fn) missing.push_back(name);
      ++wanted;
    };
    find(d.init, "gptc_device_init");
    find(d.alloc, "gptc_device_alloc");
    find(d.release, "gptc_device_free");
    find(d.host_alloc, "gptc_device_host_alloc");
    find(d.host_release, "gptc_device_host_free");
    find(d.copy_async, "gptc_device_copy_async");
    find(d.sync, "gptc_device_sync");
    find(d.adopt, "gptc_device_adopt");
    find(d.copy_rows, "gptc_device_copy_rows");
    find(d.defer_wait, "gptc_device_defer_wait");
    find(d.step_status, "gptc_device_step_status");
    if (missing.size() == wanted)
      throw Error(lpath + ": missing the device layer (gptc_device_*) of a " + impl.target +
                  " artifact");
    if (!missing.empty())  // a library from a gptc whose device layer had less
      throw Error(lpath + ": its device layer lacks " + missing[0] +
                  (missing.size() > 1 ? " and more" : "") +
                  " (built by another version of gptc): compile the model again");
    if (!verifyOnly) {  // (a compile checks its artifact on a machine that may have no GPU)
      if (const char* e = d.init()) throw Error(lpath + ": " + e);
      d.defer_wait();
      impl.device = true;
    }
  }

  // --- weights.safetensors -------------------------------------------------------------
  if (weights_of && weights_of->impl_->target != impl.target)
    throw Error(dir + ": an artifact for target \"" + impl.target + "\" cannot share the weights "
                "of one for \"" + weights_of->impl_->target + "\" (" + weights_of->dir_ + ")");
  // The index of a param like p (the same name, dtype and shape) in `among`, or -1.
  auto like = [](const TensorSpec& p, const std::vector<TensorSpec>& among) -> ptrdiff_t {
    for (size_t j = 0; j < among.size(); ++j)
      if (among[j].name == p.name && among[j].dtype == p.dtype && among[j].shape == p.shape)
        return static_cast<ptrdiff_t>(j);
    return -1;
  };
  // The file may lack a state (zeros) and a param that weights_of holds (its buffer), or,
  // verifying, one that the artifact it will load beside holds (held_elsewhere).
  std::vector<std::shared_ptr<ParamBuffer>> shared;
  std::vector<bool> elsewhere;
  bool needWeights = false;
  for (size_t i = 0; i < model->params_.size(); ++i) {
    const ptrdiff_t j = weights_of ? like(model->params_[i], weights_of->params_) : -1;
    shared.push_back(j >= 0 ? weights_of->impl_->params[j] : nullptr);
    elsewhere.push_back(held_elsewhere && like(model->params_[i], *held_elsewhere) >= 0);
    needWeights |= !impl.param_is_state[i] && !shared.back() && !elsewhere.back();
  }
  std::unique_ptr<safetensors::Reader> readerPtr;
  if (needWeights || std::ifstream(dir + "/" + weights).good())
    readerPtr = std::make_unique<safetensors::Reader>(dir + "/" + weights);
  for (size_t i = 0; i < model->params_.size(); ++i) {
    const TensorSpec& p = model->params_[i];
    const safetensors::TensorInfo* t = readerPtr ? readerPtr->find(p.name) : nullptr;
    impl.param_shared.push_back(false);
    if (!t && !verifyOnly && shared[i]) {
      impl.params.push_back(shared[i]);
      impl.param_shared.back() = true;
      continue;
    }
    if (!t && (impl.param_is_state[i] || elsewhere[i])) {
      if (verifyOnly) continue;
      impl.params.push_back(std::make_shared<ParamBuffer>());
      impl.params.back()->host = aligned_buffer(p.nbytes, "state '" + p.name + "'");  // zeros
      continue;
    }
    safetensors::Reader& reader = *readerPtr;
    if (!t) throw Error(reader.path() + ": missing tensor '" + p.name + "' (a param of the manifest)");
    if (t->shape != p.shape)
      throw Error(reader.path() + ": tensor '" + p.name + "' has shape " + shape_str(t->shape) +
                  " but the manifest says " + shape_str(p.shape));
    std::string want = safetensors::from_manifest_dtype(p.dtype);
    if (verifyOnly) {  // a check only: the bytes are read where there is a sum to check
      if (reader.checksum(p.name)) {
        std::vector<char> bytes(t->nbytes());
        reader.read(*t, bytes.data());
      }
      if (t->dtype != want && !(t->dtype == "F32" && want == "F64"))
        throw Error(reader.path() + ": tensor '" + p.name + "' has dtype " + t->dtype +
                    " but the manifest says " + p.dtype + " (" + want + ")");
      continue;
    }
    if (shared[i]) {
      if (t->dtype != want && !(t->dtype == "F32" && want == "F64"))
        throw Error(reader.path() + ": tensor '" + p.name + "' has dtype " + t->dtype +
                    " but the manifest says " + p.dtype + " (" + want + ")");
      impl.params.push_back(shared[i]);
      impl.param_shared.back() = true;
    } else if (t->dtype == "F32" && want == "F64") {
      // An f64 compile of an f32 model (gradient checks): widening is exact.
      std::vector<float> narrow(p.numel);
      reader.read(*t, narrow.data());
      impl.params.push_back(std::make_shared<ParamBuffer>());
      impl.params.back()->host = aligned_buffer(p.nbytes, "param '" + p.name + "'");
      double* wide = static_cast<double*>(impl.params.back()->host.get());
      for (int64_t k = 0; k < p.numel; ++k) wide[k] = narrow[k];
    } else {
      if (t->dtype != want)
        throw Error(reader.path() + ": tensor '" + p.name + "' has dtype " + t->dtype +
                    " but the manifest says " + p.dtype + " (" + want + ")");
      impl.params.push_back(std::make_shared<ParamBuffer>());
      impl.params.back()->host = aligned_buffer(p.nbytes, "param '" + p.name + "'");
      reader.read(*t, impl.params.back()->host.get());
    }
    if (p.tril_ones)
      if (std::string why = not_tril_ones(p, impl.params.back()->host.get()); !why.empty())
        throw Error(reader.path() + ": tensor '" + p.name + "' is not the causal mask "
                    "tril(ones) the model's attention was compiled for (" + why +
                    "); compile the model again with these weights");
  }

  if (verifyOnly) return model;
  if (!impl.device) {
    impl.arena = aligned_buffer(model->arena_bytes_, "the arena");
    return model;
  }
  // On the device: every param (uploaded now, but a shared one, which weights_of's layer
  // holds already), the arena, and a buffer per input and result.
  for (size_t i = 0; i < model->params_.size(); ++i) {
    const TensorSpec& p = model->params_[i];
    ParamBuffer& b = *impl.params[i];
    if (impl.param_shared[i]) {
      if (const char* e = impl.dev.adopt(b.dev, p.nbytes)) throw Error(e);
      continue;
    }
    b.dev = impl.device_alloc(p.nbytes, "param '" + p.name + "'");
    impl.copy(b.dev, b.host.get(), p.nbytes, true);
  }
  for (const TensorSpec& t : model->inputs_)
    impl.dev_inputs.push_back(impl.device_alloc(t.nbytes, "input '" + t.name + "'"));
  for (const TensorSpec& t : model->results_)
    impl.dev_results.push_back(impl.device_alloc(t.nbytes, "result '" + t.name + "'"));
  impl.dev_arena = impl.device_alloc(model->arena_bytes_, "the arena");
  // The staging: each input's and result's place (64-byte aligned) in one page-locked block.
  std::vector<size_t> offsets;
  size_t staged = 0;
  for (const auto* specs : {&model->inputs_, &model->results_})
    for (const TensorSpec& t : *specs) {
      offsets.push_back(staged);
      staged += (t.nbytes + 63) / 64 * 64;
    }
  if (const char* e = impl.dev.host_alloc(&impl.staging, staged))
    throw Error("page-locked staging of the inputs and results: " + std::string(e));
  char* base = static_cast<char*>(impl.staging);
  for (size_t k = 0; k < offsets.size(); ++k)
    (k < model->inputs_.size() ? impl.staged_inputs : impl.staged_results)
        .push_back(base + offsets[k]);
  return model;
}

void Model::run(const std::vector<const void*>& inputs, const std::vector<void*>& results) {
  run(inputs, results, {}, {});
}

void Model::run(const std::vector<const void*>& inputs, const std::vector<void*>& results,
                const std::vector<bool>& input_resident,
                const std::vector<bool>& result_resident) {
  if ((!input_resident.empty() && input_resident.size() != inputs_.size()) ||
      (!result_resident.empty() && result_resident.size() != results_.size()))
    throw Error(dir_ + ": run: a resident flag for each input and each result, or none");
  auto resident = [](const std::vector<bool>& flags, size_t i) {
    return !flags.empty() && flags[i];
  };
  if (inputs.size() != inputs_.size())
    throw Error(dir_ + ": run: got " + std::to_string(inputs.size()) + " inputs, the model takes " +
                std::to_string(inputs_.size()));
  if (results.size() != results_.size())
    throw Error(dir_ + ": run: got " + std::to_string(results.size()) +
                " result buffers, the model has " + std::to_string(results_.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i] && inputs_[i].nbytes) throw Error(dir_ + ": run: input '" + inputs_[i].name + "' is null");
  for (size_t j = 0; j < results.size(); ++j)
    if (!results[j] && results_[j].nbytes) throw Error(dir_ + ": run: result '" + results_[j].name + "' is null");

  Impl& impl = *impl_;
  // args in manifest order; the entry only reads inputs (const is cast away for the ABI).
  std::vector<void*> args(impl.arg_is_param.size());
  for (size_t a = 0; a < args.size(); ++a)
    args[a] = impl.arg_is_param[a] ? impl.params[impl.arg_index[a]]->host.get()
                                   : const_cast<void*>(inputs[impl.arg_index[a]]);
  std::lock_guard<std::mutex> lock(impl.run_mutex);
  // The attention kernels assume a tril_ones param's value and do not read it: one that a
  // caller has overwritten since the load is refused, not silently ignored.
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].tril_ones)
      if (std::string why = not_tril_ones(params_[i], impl.params[i]->host.get()); !why.empty())
        throw Error(dir_ + ": run: param '" + params_[i].name + "' no longer holds the causal "
                    "mask tril(ones) the model's attention was compiled for (" + why +
                    "); restore it, or compile the model again with the new mask");
  if (!impl.device) {
    if (const char* problem = impl.entry(args.data(), results.data(), impl.arena.get()))
      throw Error(std::string("run failed: ") + problem);
    return;
  }
  // On the device: params the caller may have written go up, the inputs go up (queued from
  // the staging), the step runs, the results and its error code come down (queued into the
  // staging), and the run waits once; the params the step updated stay on the device until
  // read.
  for (size_t i = 0; i < params_.size(); ++i)
    if (ParamBuffer& b = *impl.params[i]; b.device_stale) {
      impl.copy(b.dev, b.host.get(), params_[i].nbytes, true);
      b.device_stale = false;
    }
  try {
    for (size_t a = 0; a < args.size(); ++a) {
      const size_t k = impl.arg_index[a];
      if (impl.arg_is_param[a]) {
        args[a] = impl.params[k]->dev;
      } else if (resident(input_resident, k)) {
        args[a] = const_cast<void*>(inputs[k]);
      } else {
        std::memcpy(impl.staged_inputs[k], inputs[k], inputs_[k].nbytes);
        impl.copy_async(impl.dev_inputs[k], impl.staged_inputs[k], inputs_[k].nbytes, true);
        args[a] = impl.dev_inputs[k];
      }
    }
    std::vector<void*> out = impl.dev_results;
    for (size_t j = 0; j < results.size(); ++j)
      if (resident(result_resident, j)) out[j] = results[j];
    const char* problem = impl.entry(args.data(), out.data(), impl.dev_arena);
    for (size_t i = 0; i < params_.size(); ++i)  // a training step updates them in place
      if (!params_[i].tril_ones) impl.params[i]->host_stale = true;
    if (problem) throw Error(std::string("run failed: ") + problem);
    for (size_t j = 0; j < results.size(); ++j)
      if (!resident(result_resident, j))
        impl.copy_async(impl.staged_results[j], impl.dev_results[j], results_[j].nbytes, false);
    impl.wait();
    if (const char* e = impl.dev.step_status()) throw Error(std::string("run failed: ") + e);
  } catch (...) {
    impl.sync();  // a failed run's queued copies are done before the staging is reused
    throw;
  }
  for (size_t j = 0; j < results.size(); ++j)
    if (!resident(result_resident, j))
      std::memcpy(results[j], impl.staged_results[j], results_[j].nbytes);
}

void* Model::alloc_resident(size_t bytes) {
  Impl& impl = *impl_;
  std::lock_guard<std::mutex> lock(impl.run_mutex);
  if (impl.device) {
    void* p = impl.device_alloc(bytes, "resident memory");
    impl.resident_device.insert(p);
    return p;
  }
  AlignedBuf b = aligned_buffer(bytes, "resident memory");
  void* p = b.get();
  impl.resident_host.emplace(p, std::move(b));
  return p;
}

void Model::free_resident(void* p) {
  Impl& impl = *impl_;
  std::lock_guard<std::mutex> lock(impl.run_mutex);
  if (impl.resident_device.erase(p)) {
    if (const char* e = impl.dev.release(p)) throw Error(e);
  } else if (!impl.resident_host.erase(p)) {
    throw Error(dir_ + ": free_resident: not this Model's resident memory");
  }
}

void Model::share_resident(const void* p, size_t bytes) {
  if (impl_->device)
    if (const char* e = impl_->dev.adopt(const_cast<void*>(p), bytes)) throw Error(e);
}

void Model::copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                      size_t width, size_t rows) {
  queue_rows(dst, dst_pitch, src, src_pitch, width, rows);
  wait();
}

void Model::queue_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                       size_t width, size_t rows) {
  Impl& impl = *impl_;
  if ((dst_pitch | src_pitch | width | (uintptr_t)dst | (uintptr_t)src) % 4)
    throw Error(dir_ + ": copy_rows: a width, pitch or address not a multiple of 4 bytes");
  std::lock_guard<std::mutex> lock(impl.run_mutex);
  if (impl.device) {
    if (const char* e = impl.dev.copy_rows(dst, dst_pitch, src, src_pitch, width, rows))
      throw Error(e);
    return;
  }
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  for (size_t r = 0; r < rows; ++r, d += dst_pitch, s += s ? src_pitch : 0) {
    if (width == 4 && s) std::memcpy(d, s, 4);  // (a key cache's column: one float a row)
    else if (s) std::memcpy(d, s, width);
    else std::memset(d, 0, width);
  }
}

void Model::wait() {
  Impl& impl = *impl_;
  std::lock_guard<std::mutex> lock(impl.run_mutex);
  if (impl.device) impl.wait();
}

Model::Transfers Model::transfers() const { return impl_->moved; }

const std::string& Model::target() const { return impl_->target; }

void Model::set_num_threads(int n) {
  if (n < 0 || n > kMaxThreads)
    throw Error(dir_ + ": thread count must be from 0 to " + std::to_string(kMaxThreads) +
                ", got " + std::to_string(n));
  std::lock_guard<std::mutex> lock(impl_->run_mutex);  // not while a run uses the count
  using SetThreadsFn = void (*)(int);
  if (auto fn = (SetThreadsFn)symbol("gptc_set_num_threads")) fn(n);
}

void* Model::symbol(const std::string& name) const { return dlsym(impl_->lib, name.c_str()); }

// The index of param `name` in `params`, or an error naming the artifact.
static size_t param_index(const std::vector<TensorSpec>& params, const std::string& name,
                          const std::string& dir) {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name == name) return i;
  throw Error(dir + ": no param named '" + name + "'");
}

void* Model::param_data(const std::string& name) {
  const size_t i = param_index(params_, name, dir_);
  // On a device: the current value, and the caller may write it before the next run.
  impl_->download_param(i, params_[i].nbytes);
  if (impl_->device) impl_->params[i]->device_stale = true;
  return impl_->params[i]->host.get();
}

bool Model::param_shared(size_t i) const {
  if (i >= params_.size())
    throw Error(dir_ + ": param_shared: index " + std::to_string(i) + " of " +
                std::to_string(params_.size()) + " params");
  return impl_->param_shared[i];
}

const void* Model::param_data(const std::string& name) const {
  const size_t i = param_index(params_, name, dir_);
  impl_->download_param(i, params_[i].nbytes);  // read only: the device's copy stays current
  return impl_->params[i]->host.get();
}

void Model::save_weights(const std::string& path) const {
  if (path.empty()) throw Error(dir_ + ": save_weights: the path is empty");
  std::lock_guard<std::mutex> lock(impl_->run_mutex);  // whole parameters, not a run's half
  std::vector<safetensors::TensorView> views;
  for (size_t i = 0; i < params_.size(); ++i) impl_->download_param(i, params_[i].nbytes);
  for (size_t i = 0; i < params_.size(); ++i)
    if (!impl_->param_shared[i])
      views.push_back({params_[i].name, safetensors::from_manifest_dtype(params_[i].dtype),
                     params_[i].shape, impl_->params[i]->host.get()});
  safetensors::write(path, views, {{"format", "pt"}});
}

}  // namespace gptc::rt
