// gptc/model.hpp — C++ API of the gptc runtime: load an artifact folder (docs/artifact.md)
// and run it.
//
//   auto m = gptc::rt::Model::load("out/tiny");        // throws gptc::rt::Error
//   std::vector<int64_t> idx(2 * 32);                   // inputs()[0]: i64 [2, 32]
//   std::vector<float> logits(2 * 32 * 65), loss(1);    // results(): f32 [2,32,65], f32 []
//   m->run({idx.data()}, {logits.data(), loss.data()});
//
// The runtime owns the parameter buffers (loaded from weights.safetensors by name) and a
// 64-byte-aligned scratch arena; callers own input and result buffers. No MLIR/LLVM here.
#ifndef GPTC_MODEL_HPP
#define GPTC_MODEL_HPP

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace gptc::rt {

// Every runtime failure; what() is one line naming the file and the problem. A name read
// from a file (a manifest's file names, a tensor's) may hold any byte: control characters
// are written as \n or \xNN, so that what() stays one line.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(one_line(what)) {}

 private:
  static std::string one_line(const std::string& s) {
    static const char hex[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : s) {
      if (c == '\n') out += "\\n";
      else if (c < 0x20 || c == 0x7f) out += {'\\', 'x', hex[c >> 4], hex[c & 15]};
      else out += (char)c;
    }
    return out;
  }
};

// One dense row-major tensor of the manifest.
struct TensorSpec {
  std::string name;
  std::string dtype;           // "f32", "f64", "bf16", "i64", "i1"
  std::vector<int64_t> shape;  // [] for a scalar
  int64_t numel = 1;           // product of shape (1 for a scalar)
  size_t nbytes = 0;           // numel * dtype_size(dtype)
  // A param the kernels assume holds tril(ones) over its last two dims: a causal mask that
  // gpt-raise-attention compiled into attention, which no longer reads it. The runtime
  // refuses weights, and runs, where it holds anything else.
  bool tril_ones = false;
};

// Bytes per element of a manifest dtype; throws Error for an unknown one.
size_t dtype_size(const std::string& dtype);
// A shape as the runtime's messages print it: "[2, 3]", "[]" for a scalar.
std::string shape_str(const std::vector<int64_t>& shape);

class Model {
 public:
  // Loads <dir>/manifest.json, dlopens the library, reads the weights, allocates the arena.
  // With `weights_of`, each param it holds under the same name, dtype and shape is its
  // buffer, shared rather than read (the weights file need not hold it; where it does, its
  // header is still checked): a generator's decode step and prefill hold the model's
  // weights once, and a write through either is seen by both. States are shared alike
  // (gradient accumulation's two programs share the params and the summed gradients).
  // Both must be for one target (Error otherwise); on a GPU the buffers shared are device
  // memory, with their host copies.
  static std::unique_ptr<Model> load(const std::string& dir, const Model* weights_of = nullptr);
  // Checks what load() checks (the manifest, that the library loads, the weights file's
  // header and every parameter's name, dtype and shape) without reading the tensors or
  // allocating the arena; throws Error with load()'s message. gptc compile runs it on
  // the artifact it wrote. With `weights_of` (another artifact's folder: what load() will
  // be given), a param the weights file lacks may be one of that artifact's params, the
  // same name, dtype and shape: its manifest is read, not its library or weights.
  static void verify(const std::string& dir, const std::string& weights_of = "");
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& dir() const { return dir_; }
  // What the kernels run on: the manifest's "target" ("cpu", "cuda" or "cuda-emulated").
  const std::string& target() const;
  // Persistent tensors: kind "param" (from the weights) and "state" (optimizer moments,
  // zero unless the weights file holds them), in manifest order.
  const std::vector<TensorSpec>& params() const { return params_; }
  const std::vector<TensorSpec>& inputs() const { return inputs_; }    // kind "input", in order
  const std::vector<TensorSpec>& results() const { return results_; }
  size_t arena_bytes() const { return arena_bytes_; }

  // inputs[i] -> inputs()[i] (read only), results[j] -> results()[j] (filled). Calls on one
  // Model are serialized (they share the arena); different Models run concurrently.
  void run(const std::vector<const void*>& inputs, const std::vector<void*>& results);

  // Memory where this Model's kernels run, for a loop that keeps tensors there between runs
  // (gptc::rt::Generator's caches): device memory for a CUDA artifact, host memory for a
  // CPU one. run() given a resident input or result (its `resident` flags) reads or writes
  // it in place, with no copy; copy_rows moves bytes about within it.
  //   alloc_resident: `bytes` (64-byte aligned), freed by free_resident or with the Model.
  //   share_resident: another Model's resident memory (one of this Model's target: a
  //     program loaded with weights_of, say) that this Model's runs will be given.
  //   copy_rows: `rows` rows of `width` bytes from src (rows src_pitch apart; null: zeros)
  //     to dst (dst_pitch apart), both resident and not overlapping; width, pitches and
  //     addresses multiples of 4. Done when it returns (after this Model's runs before it).
  //   queue_rows: the same, queued on this Model's stream, without waiting: done before
  //     this Model's next run or copy starts, and by wait(). Another Model's runs and copies
  //     may overtake it (each CUDA artifact has a stream of its own), so a caller that hands
  //     the rows to another Model calls wait() first. A CPU artifact's is done at once.
  //   wait: waits for what this Model has queued (nothing to wait for on the CPU).
  void* alloc_resident(size_t bytes);
  void free_resident(void* p);
  void share_resident(const void* p, size_t bytes);
  void copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
                 size_t rows);
  void queue_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
                  size_t rows);
  void wait();
  void run(const std::vector<const void*>& inputs, const std::vector<void*>& results,
           const std::vector<bool>& input_resident, const std::vector<bool>& result_resident);

  // Bytes a CUDA artifact's runs and parameter reads and writes have moved between the host
  // and the device since the load, and the times it waited for the device (a run waits
  // once, for its results); all 0 for a CPU artifact.
  struct Transfers {
    uint64_t to_device = 0, to_host = 0, waits = 0;
  };
  Transfers transfers() const;

  // Threads for the kernels' parallel loops (default 1; 0: one per core; at most
  // kMaxThreads, past which OpenMP fails to start them and ends the process). Results never
  // depend on it. Waits for a run of this Model on another thread to finish.
  static constexpr int kMaxThreads = 1024;
  void set_num_threads(int n);

  // The runtime-owned buffer of a parameter (64-byte aligned, params()[i].nbytes long);
  // read or overwrite it between runs (not while another thread runs this Model; a
  // tril_ones param must keep its value, or run() refuses). Throws Error for an unknown
  // name.
  void* param_data(const std::string& name);
  const void* param_data(const std::string& name) const;

  // The address of `name` in this Model's kernels.so, or null: each Model runs a private
  // copy of the library, so tools that read the kernels' own counters (a profile) find
  // them here, not by opening the artifact's file again.
  void* symbol(const std::string& name) const;

  // Whether params()[i]'s buffer is weights_of's (load); throws Error past the last param.
  bool param_shared(size_t i) const;

  // Writes the params (manifest names, dtypes, shapes) as safetensors to `path`, but for the
  // shared ones, which are weights_of's to write (a generator's prefill/ holds only what
  // its decode step does not, and loads beside it); atomically
  // (temp file in the same folder, fsync, rename). Waits for a run of this Model on another
  // thread to finish, so that the file never holds half of a training step's update.
  void save_weights(const std::string& path) const;

 private:
  Model() = default;
  // How far open() goes: the manifest only, everything load() checks, or the whole load.
  enum class Open { Manifest, Verify, Load };
  static std::unique_ptr<Model> open(const std::string& dir, Open how,
                                     const Model* weights_of = nullptr,
                                     const std::vector<TensorSpec>* held_elsewhere = nullptr);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string dir_;
  std::vector<TensorSpec> params_, inputs_, results_;
  size_t arena_bytes_ = 0;
};

}  // namespace gptc::rt

#endif  // GPTC_MODEL_HPP
