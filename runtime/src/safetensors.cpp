// safetensors.cpp — validating reader and atomic writer of safetensors files.
#include "gptc/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace gptc::rt::safetensors {

using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(path + ": " + what);
}

// Largest header we accept (the format's reference implementation uses 100 MB).
constexpr uint64_t kMaxHeader = 100ull << 20;

}  // namespace

size_t dtype_size(const std::string& d) {
  if (d == "F32") return 4;
  if (d == "F64" || d == "I64") return 8;
  if (d == "BF16") return 2;
  if (d == "BOOL") return 1;
  return 0;
}

std::string from_manifest_dtype(const std::string& d) {
  if (d == "f32") return "F32";
  if (d == "f64") return "F64";
  if (d == "i64") return "I64";
  if (d == "bf16") return "BF16";
  if (d == "i1") return "BOOL";
  return "";
}

std::string to_manifest_dtype(const std::string& d) {
  if (d == "F32") return "f32";
  if (d == "F64") return "f64";
  if (d == "I64") return "i64";
  if (d == "BF16") return "bf16";
  if (d == "BOOL") return "i1";
  return "";
}

Reader::Reader(const std::string& path) : path_(path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
  if (!S_ISREG(st.st_mode)) fail(path, "cannot open (not a regular file)");
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
  f.seekg(0, std::ios::end);
  const std::streamoff end = f.tellg();
  if (!f || end < 0) fail(path, "cannot read its size");
  const uint64_t file_size = (uint64_t)end;
  f.seekg(0);
  if (file_size < 8) fail(path, "file is " + std::to_string(file_size) +
                                    " bytes, too short for the 8-byte header length");
  unsigned char len_bytes[8];
  if (!f.read((char*)len_bytes, 8)) fail(path, "cannot read the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];  // little endian
  if (n == 0 || n > kMaxHeader || n > file_size - 8)
    fail(path, "bad header length " + std::to_string(n) + " (file is " +
                   std::to_string(file_size) + " bytes)");
  std::string text(n, '\0');
  if (!f.read(text.data(), (std::streamsize)n)) fail(path, "cannot read the header");
  data_start_ = 8 + n;
  const uint64_t data_size = file_size - data_start_;

  json h;
  try {
    h = json::parse(text);
  } catch (const std::exception& e) {
    fail(path, std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (!h.is_object()) fail(path, "header is not a JSON object");
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail(path, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) fail(path, "__metadata__." + m.key() + " is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "': ";
    if (!v.is_object()) fail(path, where + "entry is not an object");
    TensorInfo t;
    t.name = name;
    if (!v.contains("dtype") || !v["dtype"].is_string()) fail(path, where + "missing dtype");
    t.dtype = v["dtype"].get<std::string>();
    size_t esize = dtype_size(t.dtype);
    if (esize == 0) fail(path, where + "unsupported dtype '" + t.dtype + "'");
    if (!v.contains("shape") || !v["shape"].is_array()) fail(path, where + "missing shape");
    uint64_t numel = 1;
    for (const json& d : v["shape"]) {
      if (!d.is_number_unsigned()) fail(path, where + "shape entries must be integers >= 0");
      uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / dim / esize)
        fail(path, where + "shape is too large");
      numel *= dim;
      t.shape.push_back((int64_t)dim);
    }
    const json& off = v.contains("data_offsets") ? v["data_offsets"] : json();
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      fail(path, where + "data_offsets must be [begin, end]");
    t.begin = off[0].get<uint64_t>();
    t.end = off[1].get<uint64_t>();
    if (t.begin > t.end || t.end > data_size)
      fail(path, where + "data_offsets [" + std::to_string(t.begin) + ", " +
                     std::to_string(t.end) + "] out of range (data section is " +
                     std::to_string(data_size) + " bytes; file truncated?)");
    if (t.nbytes() != numel * esize)
      fail(path, where + "data_offsets span " + std::to_string(t.nbytes()) + " bytes but " +
                     t.dtype + " " + shape_str(t.shape) + " needs " +
                     std::to_string(numel * esize));
    tensors_.push_back(std::move(t));
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < tensors_.size(); ++i)
    if (tensors_[i].begin < tensors_[i - 1].end)
      fail(path, "tensors '" + tensors_[i - 1].name + "' and '" + tensors_[i].name +
                     "' overlap");
  // The tensors' CRC-32s, when the writer recorded them (gptc's writers do).
  if (auto it = metadata_.find(kChecksums); it != metadata_.end()) {
    json sums;
    try {
      sums = json::parse(it->second);
    } catch (const std::exception&) {
      fail(path, std::string("__metadata__.") + kChecksums + " is not JSON");
    }
    if (!sums.is_object()) fail(path, std::string("__metadata__.") + kChecksums + " is not an object");
    for (auto e = sums.begin(); e != sums.end(); ++e)
      if (e.value().is_string()) checksums_[e.key()] = e.value().get<std::string>();
  }
}

const TensorInfo* Reader::find(const std::string& name) const {
  for (const TensorInfo& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320: zlib's and Python's zlib.crc32),
// eight bytes a step with eight tables ("slicing by 8"). Written here rather than taken
// from zlib so that a program linking the runtime links nothing more (docs/design.md).
namespace {
struct Crc32Tables {
  uint32_t t[8][256];
  Crc32Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int j = 1; j < 8; ++j) t[j][i] = (t[j - 1][i] >> 8) ^ t[0][t[j - 1][i] & 0xFF];
  }
};
}  // namespace

std::string crc32_hex(const void* data, uint64_t n) {
  static const Crc32Tables tables;
  const auto& t = tables.t;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;  // little-endian: the first byte is the lowest
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
        t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) c = (c >> 8) ^ t[0][(c ^ *p) & 0xFF];
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", (unsigned)(c ^ 0xFFFFFFFFu));
  return hex;
}

const std::string* Reader::checksum(const std::string& name) const {
  auto it = checksums_.find(name);
  return it == checksums_.end() ? nullptr : &it->second;
}

void Reader::read(const TensorInfo& t, void* dst) const {
  if (t.nbytes() != 0) {
    std::ifstream f(path_, std::ios::binary);
    if (!f) fail(path_, std::string("cannot open (") + std::strerror(errno) + ")");
    f.seekg((std::streamoff)(data_start_ + t.begin));
    if (!f.read((char*)dst, (std::streamsize)t.nbytes()))
      fail(path_, "tensor '" + t.name + "': short read (file changed or truncated?)");
  }
  if (const std::string* want = checksum(t.name); want && crc32_hex(dst, t.nbytes()) != *want)
    fail(path_, "tensor '" + t.name + "' does not match its checksum (the file is corrupt)");
}

namespace {

// write(2) all of buf or throw.
void write_all(int fd, const void* buf, size_t n, const std::string& path) {
  const char* p = (const char*)buf;
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail(path, std::string("write failed (") + std::strerror(errno) + ")");
    }
    p += w;
    n -= (size_t)w;
  }
}

}  // namespace

void write(const std::string& path, const std::vector<TensorView>& tensors,
           const std::map<std::string, std::string>& metadata) {
  // Header: offsets follow the order given; the metadata with every tensor's CRC-32.
  json h = json::object();
  std::map<std::string, std::string> meta = metadata;
  json sums = json::object();
  for (const TensorView& t : tensors) {
    uint64_t nbytes = dtype_size(t.dtype);
    for (int64_t d : t.shape) nbytes *= d < 0 ? 0 : (uint64_t)d;
    sums[t.name] = crc32_hex(t.data, nbytes);
  }
  meta[kChecksums] = sums.dump();
  h["__metadata__"] = meta;
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const TensorView& t : tensors) {
    size_t esize = dtype_size(t.dtype);
    if (esize == 0) fail(path, "tensor '" + t.name + "': unsupported dtype '" + t.dtype + "'");
    if (t.name == "__metadata__" || h.contains(t.name))
      fail(path, "tensor '" + t.name + "': duplicate or reserved name");
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) fail(path, "tensor '" + t.name + "': negative dimension");
      numel *= (uint64_t)d;
    }
    uint64_t nbytes = numel * esize;
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + nbytes}}};
    sizes.push_back(nbytes);
    offset += nbytes;
  }
  std::string text = h.dump();
  while (text.size() % 8) text.push_back(' ');  // keep the data section 8-byte aligned
  unsigned char len_bytes[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len_bytes[i] = (unsigned char)(n >> (8 * i));

  // Temp file next to the target, so rename() is atomic (same filesystem).
  std::string dir = ".";
  size_t slash = path.rfind('/');
  if (slash != std::string::npos) dir = slash == 0 ? "/" : path.substr(0, slash);
  std::string tmp = path + ".tmp." + std::to_string((long)::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(tmp, std::string("cannot create (") + std::strerror(errno) + ")");
  try {
    write_all(fd, len_bytes, 8, tmp);
    write_all(fd, text.data(), text.size(), tmp);
    for (size_t i = 0; i < tensors.size(); ++i)
      if (sizes[i]) write_all(fd, tensors[i].data, sizes[i], tmp);
    if (::fsync(fd) != 0) fail(tmp, std::string("fsync failed (") + std::strerror(errno) + ")");
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    fail(tmp, std::string("close failed (") + std::strerror(errno) + ")");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    fail(path, std::string("cannot rename the temp file into place (") + std::strerror(e) + ")");
  }
  // Make the rename itself durable (best effort).
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace gptc::rt::safetensors
