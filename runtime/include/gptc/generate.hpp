// gptc/generate.hpp — text generation in the runtime: the folder gptc.Generator.save writes
// (a decode step, its prefill/ and tokens.bin) run as gptc.Generator.generate runs it, so
// that a C or C++ program writes the text Python writes for the same prompt and seed.
//
//   auto g = gptc::rt::Generator::load("out/generate");
//   std::vector<int64_t> ids = g->generate(g->encode("The "), 200, {0.8f, 40, 1.0f, 7});
//   std::string text = g->decode(ids);
//
// A generator compiled for a batch of B texts (gptc.compile_generate(model, batch=B))
// writes B at once: generate_batch, row b drawn with seed + b, exactly the tokens a batch-1
// generator writes for that row's prompt with seed + b. The prompts may differ in length:
// the texts advance a position a step together, a shorter prompt's text drawing while a
// longer one is still fed.
#ifndef GPTC_GENERATE_HPP
#define GPTC_GENERATE_HPP

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gptc/model.hpp"
#include "gptc/sample.hpp"

namespace gptc::rt {

struct SampleSettings {
  float temperature = 1.0f;
  int64_t top_k = kAllTokens;
  float top_p = 1.0f;
  uint64_t seed = 0;
  int64_t vocab = 0;  // draw from the first `vocab` logits; 0: the generator's vocab()
};

class Generator {
 public:
  // Loads DIR (the decode step), DIR/prefill, the shorter decode steps in DIR/steps/*/ and
  // DIR/tokens.bin (when present); throws Error.
  static std::unique_ptr<Generator> load(const std::string& dir);
  // The loop over a decode step and prefill already loaded (Python's gptc.Generator runs
  // its programs through this), with no tokens.bin. `shorter`: decode steps of the same
  // model over caches of fewer positions, which the texts run through while they are that
  // short: a step reads its caches' every position, written or not. They give the same
  // bits as the full step (a length of max_len less a multiple of 32: the softmax's
  // partials then hold the same terms, the masked positions' being zeros).
  static std::unique_ptr<Generator> from_models(
      std::shared_ptr<Model> decode, std::shared_ptr<Model> prefill,
      std::vector<std::shared_ptr<Model>> shorter = {});
  ~Generator();

  int64_t max_len() const { return max_len_; }
  int64_t batch() const { return batch_; }  // the texts it writes at once
  int64_t vocab() const { return vocab_; }  // tokens.bin's count, else the logits' width
  void set_num_threads(int n);

  // n new token ids after `prompt`: the prompt through the prefill (its first max_len / 2
  // tokens, when it has that many) and decode steps, then per new token a draw (draw
  // number = its index) and a step; at max_len the context shifts to its last max_len / 2
  // tokens, through the prefill again. Throws Error (one line) for an empty prompt, one
  // longer than max_len, a token outside the vocabulary, or bad settings.
  // A batch-1 generator only (else Error).
  std::vector<int64_t> generate(const std::vector<int64_t>& prompt, int64_t n,
                                const SampleSettings& s);
  // batch() prompts, of any lengths, side by side: row b's n tokens, drawn with seed + b,
  // exactly what generate writes for prompt b with seed + b on a batch-1 generator.
  // Throws Error as generate does, and for another count of prompts.
  std::vector<std::vector<int64_t>> generate_batch(
      const std::vector<std::vector<int64_t>>& prompts, int64_t n, const SampleSettings& s);

  // The vocabulary of tokens.bin: text to ids by the longest token at each point (the
  // encoding for a character vocabulary), ids to their bytes. Throw Error without one, or
  // for text it cannot encode.
  std::vector<int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  Generator() = default;
  // texts[b][from .. from + max_len / 2) through the prefill (0 past a text's end).
  void prefill(const std::vector<std::vector<int64_t>>& texts, size_t from);
  // One token a text at `pos`; its keys and values stored for the texts `store` marks.
  // Runs the shortest step whose caches hold position `pos`, moving the caches to it.
  void step(const int64_t* tokens, int64_t pos, const std::vector<char>& store);
  void clear_caches(int64_t b);  // text b's keys and values, every layer's, to zero
  // The caches of the first `pos` positions into step s's layout (-1: the full one's, k_
  // and v_), zero past them.
  void move_caches(int64_t s, int64_t pos);
  int64_t length(int64_t s) const { return s < 0 ? max_len_ : lengths_[(size_t)s]; }
  Model& program(int64_t s) const { return s < 0 ? *decode_ : *shorter_[(size_t)s]; }
  // The caches' copies are queued on the stream of `on`, the program that runs next, so that
  // a token waits once, for its logits (on a GPU each program has a stream of its own).
  // settle waits for the queued ones unless `next` is the program they are queued on.
  void rows(Model& on, void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
            size_t width, size_t rows);
  void settle(const Model* next = nullptr);
  Model* queued_ = nullptr;  // the program with copies queued and not waited for
  std::shared_ptr<Model> decode_, prefill_;
  std::vector<std::shared_ptr<Model>> shorter_;  // by length, shortest first
  std::vector<int64_t> lengths_;
  int64_t cur_ = -1;  // the step whose layout the caches are in: shorter_'s, or -1
  std::vector<std::string> tokens_;
  int64_t max_len_ = 0, prefill_len_ = 0, vocab_ = 0, width_ = 0;
  int64_t layers_ = 0, batch_ = 1, heads_ = 0, head_ = 0;
  std::vector<float> logits_;  // [batch, width]
  // The caches and a step's key and value rows live where the programs run (the device's
  // memory for a GPU target: Model::alloc_resident), so that a step moves only its tokens
  // and logits: the caches in the full step's layout (k_, v_) and in a shorter one's (step
  // s: ks_[s % 2], vs_[s % 2], sized for the longest, so that a move to the next never
  // overlaps itself), each left unwritten until a text reaches it.
  struct Free {
    std::shared_ptr<Model> owner;
    void operator()(float* p) const noexcept;
  };
  using Resident = std::unique_ptr<float, Free>;
  Resident resident(size_t numel);  // decode_'s, shared with the other programs
  float* short_k(int64_t s) const { return ks_[s % 2].get(); }
  float* short_v(int64_t s) const { return vs_[s % 2].get(); }
  Resident k_, v_, ks_[2], vs_[2], k_row_, v_row_;
  size_t cache_numel_ = 0, short_numel_ = 0;  // k_'s, and each of ks_'s
  std::vector<int64_t> tokens_in_;            // a step's or prefill's tokens
};

}  // namespace gptc::rt

#endif  // GPTC_GENERATE_HPP
