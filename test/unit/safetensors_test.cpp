// safetensors_test.cpp — round trip of runtime/src/safetensors.{h,cpp} and rejection of
// corrupt files with a clear one-line message.
#include "gptc/safetensors.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace st = gptc::rt::safetensors;

namespace {

fs::path temp_dir() {
  char tmpl[] = "/tmp/gptc_st_testXXXXXX";
  return fs::path(mkdtemp(tmpl));
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void spit(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(s.data(), (std::streamsize)s.size());
}
// A file with the given JSON header and `data_bytes` zero bytes of data.
std::string make_file(const std::string& header, size_t data_bytes) {
  std::string s(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) s[i] = (char)(n >> (8 * i));
  return s + header + std::string(data_bytes, '\0');
}

// Expects Reader(path) to throw a message containing `needle` and the path.
void expect_reject(const fs::path& p, const std::string& needle) {
  try {
    st::Reader r(p.string());
    FAIL() << "accepted a corrupt file, expected: " << needle;
  } catch (const gptc::rt::Error& e) {
    std::string msg = e.what();
    std::printf("  rejected: %s\n", msg.c_str());
    EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message should be one line";
  }
}

}  // namespace

TEST(Safetensors, RoundTrip) {
  fs::path dir = temp_dir();
  std::vector<float> w = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, 7.0f};
  std::vector<int64_t> idx = {0, 1, -5, 1LL << 40};
  double scalar = 3.141592653589793;
  std::vector<uint16_t> half = {0x3f80, 0xbf80, 0x7f80};
  std::vector<uint8_t> mask = {1, 0, 1};
  std::vector<st::TensorView> ts = {
      {"w", "F32", {2, 3}, w.data()},   {"idx", "I64", {4}, idx.data()},
      {"pi", "F64", {}, &scalar},       {"h", "BF16", {3}, half.data()},
      {"mask", "BOOL", {3, 1}, mask.data()}, {"empty", "F32", {0, 5}, nullptr},
  };
  fs::path p = dir / "w.safetensors";
  st::write(p.string(), ts, {{"format", "pt"}});
  EXPECT_FALSE(fs::exists(p.string() + ".tmp." + std::to_string(getpid())));
  std::string bytes = slurp(p);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | (unsigned char)bytes[i];
  EXPECT_EQ((8 + n) % 8, 0u) << "data section should be 8-byte aligned";

  st::Reader r(p.string());
  EXPECT_EQ(r.tensors().size(), ts.size());
  EXPECT_EQ(r.metadata().at("format"), "pt");
  for (const st::TensorView& t : ts) {
    const st::TensorInfo* info = r.find(t.name);
    ASSERT_NE(info, nullptr) << t.name;
    EXPECT_EQ(info->dtype, t.dtype);
    EXPECT_EQ(info->shape, t.shape);
    std::vector<char> buf(info->nbytes() + 1);
    r.read(*info, buf.data());
    if (info->nbytes()) EXPECT_EQ(std::memcmp(buf.data(), t.data, info->nbytes()), 0) << t.name;
  }
  EXPECT_EQ(r.find("nope"), nullptr);
  fs::remove_all(dir);
}

TEST(Safetensors, Crc32IsZlibs) {
  using gptc::rt::safetensors::crc32_hex;
  EXPECT_EQ(crc32_hex("123456789", 9), "cbf43926");  // the CRC-32 check value
  EXPECT_EQ(crc32_hex("", 0), "00000000");
  // Eight bytes a step and the tail: every length against the byte-at-a-time definition.
  std::string bytes;
  for (int i = 0; i < 70; ++i) bytes.push_back((char)(i * 37 + 11));
  for (size_t n = 0; n <= bytes.size(); ++n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) {
      c ^= (unsigned char)bytes[i];
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    char want[9];
    std::snprintf(want, sizeof want, "%08x", c ^ 0xFFFFFFFFu);
    EXPECT_EQ(crc32_hex(bytes.data(), n), want) << n;
  }
}

TEST(Safetensors, RejectsCorruptFiles) {
  fs::path dir = temp_dir();
  std::vector<float> w(16, 1.0f);
  fs::path good = dir / "good.safetensors";
  st::write(good.string(), {{"w", "F32", {4, 4}, w.data()}});
  std::string bytes = slurp(good);
  fs::path p = dir / "bad.safetensors";

  spit(p, bytes.substr(0, bytes.size() - 4));  // truncated data
  expect_reject(p, "out of range");
  spit(p, bytes.substr(0, 5));  // shorter than the length field
  expect_reject(p, "too short");
  std::string huge = bytes;
  huge[6] = 0x01;  // header length ~2^48
  spit(p, huge);
  expect_reject(p, "bad header length");
  spit(p, make_file("{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]", 8));
  expect_reject(p, "not valid JSON");
  spit(p, make_file("{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 16]}}", 8));
  expect_reject(p, "out of range");
  spit(p, make_file("{\"w\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8));
  expect_reject(p, "needs 12");
  spit(p, make_file("{\"w\": {\"dtype\": \"F16\", \"shape\": [4], \"data_offsets\": [0, 8]}}", 8));
  expect_reject(p, "unsupported dtype 'F16'");
  spit(p, make_file("{\"w\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]}}", 8));
  expect_reject(p, "shape");
  spit(p, make_file("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                    " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12));
  expect_reject(p, "overlap");
  spit(p, make_file("[1, 2]", 0));
  expect_reject(p, "not a JSON object");
  expect_reject(dir / "missing.safetensors", "cannot open");
  fs::remove_all(dir);
}
