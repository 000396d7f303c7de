// gptc/safetensors.hpp — reader and writer of the safetensors format (the runtime's C++ API).
//
// Layout: u64 little-endian N | N bytes of JSON header | raw data. The header maps
// name -> {"dtype": "F32"|"F64"|"I64"|"BF16"|"BOOL", "shape": [...],
// "data_offsets": [begin, end]} (offsets relative to the data section), plus an optional
// "__metadata__": {string: string}. Reading validates everything and throws
// gptc::rt::Error("<path>: <problem>"); tensor bytes are read on demand, straight into the
// caller's buffer, so a large file is never held in memory twice.
#ifndef GPTC_SAFETENSORS_HPP
#define GPTC_SAFETENSORS_HPP

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gptc/model.hpp"  // gptc::rt::Error

namespace gptc::rt::safetensors {

struct TensorInfo {
  std::string name;
  std::string dtype;           // safetensors spelling: "F32", "F64", "I64", "BF16", "BOOL"
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data section
  uint64_t nbytes() const { return end - begin; }
};

// Bytes per element of a safetensors dtype, 0 if unsupported.
size_t dtype_size(const std::string& st_dtype);
// Manifest dtype ("f32", "i1", ...) <-> safetensors dtype ("F32", "BOOL", ...); "" if none.
std::string from_manifest_dtype(const std::string& dtype);
std::string to_manifest_dtype(const std::string& st_dtype);

// The metadata entry that holds every tensor's CRC-32 (zlib's CRC-32 of its bytes, 8
// lowercase hex digits) as a JSON object {name: digits}. write() records it; Reader::read checks a tensor
// against it when the file has it (a file from another writer may not).
inline constexpr const char* kChecksums = "gptc.crc32";
std::string crc32_hex(const void* data, uint64_t nbytes);

class Reader {
 public:
  // Opens and validates the header (sizes, offsets, dtypes, shapes, overlaps).
  explicit Reader(const std::string& path);
  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in offset order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* find(const std::string& name) const;  // nullptr if absent
  // Copies the tensor's bytes (t.nbytes() of them) into dst; throws if they do not match
  // the tensor's recorded CRC-32.
  void read(const TensorInfo& t, void* dst) const;
  const std::string* checksum(const std::string& name) const;  // nullptr if none recorded

 private:
  std::string path_;
  uint64_t data_start_ = 0;  // 8 + N
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, std::string> checksums_;
};

// A tensor to write: `data` points at nbytes = numel * dtype_size bytes.
struct TensorView {
  std::string name;
  std::string dtype;  // safetensors spelling
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

// Writes the tensors (data in the given order, header padded to 8 bytes) to `path`
// atomically: a temp file in the same folder, fsync, rename, fsync of the folder. The
// metadata gets kChecksums, every tensor's CRC-32.
void write(const std::string& path, const std::vector<TensorView>& tensors,
           const std::map<std::string, std::string>& metadata = {});

}  // namespace gptc::rt::safetensors

#endif  // GPTC_SAFETENSORS_HPP
