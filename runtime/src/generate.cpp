// generate.cpp — gptc::rt::Generator (gptc/generate.hpp): the loop of
// gptc.Generator.generate (python/gptc/generate.py) over the saved decode step and prefill.
#include "gptc/generate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace gptc::rt {

std::unique_ptr<Generator> Generator::from_models(std::shared_ptr<Model> decode,
                                                  std::shared_ptr<Model> prefill,
                                                  std::vector<std::shared_ptr<Model>> shorter) {
  std::unique_ptr<Generator> g(new Generator());
  g->decode_ = std::move(decode);
  g->prefill_ = std::move(prefill);
  const std::string& dir = g->decode_->dir();
  const Model& d = *g->decode_;
  const Model& p = *g->prefill_;
  // The decode step: idx [batch, 1], pos, a key cache and a value cache a layer; logits,
  // key and value rows. The prefill: idx [batch, P]; logits, keys [layers, batch, heads,
  // head, T] and values.
  if (d.inputs().size() < 4 || d.inputs().size() % 2 || d.results().size() != 3 ||
      p.inputs().size() != 1 || p.results().size() != 3 || p.results()[1].shape.size() != 5 ||
      d.results()[0].shape.size() != 2 || p.inputs()[0].shape.size() != 2 ||
      d.inputs()[0].shape.size() != 2)
    throw Error(dir + ": not gptc.Generator.save's decode step and prefill");
  const std::vector<int64_t>& ks = p.results()[1].shape;
  g->layers_ = ks[0];
  g->batch_ = ks[1];
  g->heads_ = ks[2];
  g->head_ = ks[3];
  g->max_len_ = ks[4];
  g->prefill_len_ = p.inputs()[0].shape.back();
  g->width_ = d.results()[0].shape[1];
  if ((int64_t)d.inputs().size() != 2 + 2 * g->layers_)
    throw Error(dir + ": the decode step and the prefill disagree on the layers");
  if (d.inputs()[0].shape[0] != g->batch_ || p.inputs()[0].shape[0] != g->batch_)
    throw Error(dir + ": the decode step and the prefill disagree on the batch");
  // One target for all: the caches live in the decode step's memory, which the others read.
  std::vector<const Model*> others = {&p};
  for (const std::shared_ptr<Model>& m : shorter) others.push_back(m.get());
  for (const Model* m : others)
    if (m->target() != d.target())
      throw Error(m->dir() + ": a program for target \"" + m->target() + "\" beside a decode "
                  "step for \"" + d.target() + "\" (" + dir + ")");
  // A shorter step: the full one's inputs and results but for the caches' length.
  std::sort(shorter.begin(), shorter.end(), [](const auto& a, const auto& b) {
    return a->inputs()[2].shape.back() < b->inputs()[2].shape.back();
  });
  for (const std::shared_ptr<Model>& m : shorter) {
    const int64_t len = m->inputs().size() > 2 ? m->inputs()[2].shape.back() : 0;
    bool alike = m->inputs().size() == d.inputs().size() &&
                 m->results().size() == d.results().size() && len >= 1 && len < g->max_len_ &&
                 (g->max_len_ - len) % 32 == 0 &&
                 (g->lengths_.empty() || len > g->lengths_.back());
    for (size_t i = 0; alike && i < d.results().size(); ++i)
      alike = m->results()[i].shape == d.results()[i].shape;
    for (size_t i = 0; alike && i < d.inputs().size(); ++i) {  // keys [B, H, hs, T], values
      std::vector<int64_t> want = d.inputs()[i].shape;              // [B, H, T, hs]
      if (i >= 2) want[i < 2 + (size_t)g->layers_ ? 3 : 2] = len;
      alike = m->inputs()[i].shape == want;
    }
    if (!alike)
      throw Error(m->dir() + ": not a shorter decode step of " + dir + " (its caches' length "
                  "must be under " + std::to_string(g->max_len_) + " by a multiple of 32)");
    g->shorter_.push_back(m);
    g->lengths_.push_back(len);
  }
  g->logits_.resize((size_t)(g->batch_ * g->width_));
  g->cache_numel_ = (size_t)p.results()[1].numel;
  g->k_ = g->resident(g->cache_numel_);
  g->v_ = g->resident(g->cache_numel_);
  if (!g->lengths_.empty()) {
    g->short_numel_ = g->cache_numel_ / (size_t)g->max_len_ * (size_t)g->lengths_.back();
    for (int i = 0; i < (g->lengths_.size() > 1 ? 2 : 1); ++i) {
      g->ks_[i] = g->resident(g->short_numel_);
      g->vs_[i] = g->resident(g->short_numel_);
    }
  }
  g->k_row_ = g->resident((size_t)d.results()[1].numel);
  g->v_row_ = g->resident((size_t)d.results()[2].numel);
  g->vocab_ = g->width_;
  return g;
}

void Generator::Free::operator()(float* p) const noexcept {
  try {
    owner->free_resident(p);
  } catch (const Error&) {  // (a device that failed already said so)
  }
}

Generator::Resident Generator::resident(size_t numel) {
  Resident r(static_cast<float*>(decode_->alloc_resident(numel * sizeof(float))), Free{decode_});
  prefill_->share_resident(r.get(), numel * sizeof(float));
  for (const std::shared_ptr<Model>& m : shorter_) m->share_resident(r.get(), numel * sizeof(float));
  return r;
}

std::unique_ptr<Generator> Generator::load(const std::string& dir) {
  // The two programs are one model's: its weights held once (a GPT-2 small's 500 MB).
  std::shared_ptr<Model> decode = Model::load(dir);
  std::vector<std::shared_ptr<Model>> shorter;
  std::error_code ec;
  if (std::filesystem::is_directory(dir + "/steps", ec)) {
    std::vector<std::string> dirs;
    for (const auto& e : std::filesystem::directory_iterator(dir + "/steps", ec))
      if (e.is_directory()) dirs.push_back(e.path().string());
    std::sort(dirs.begin(), dirs.end());
    for (const std::string& s : dirs) shorter.push_back(Model::load(s, decode.get()));
  }
  std::unique_ptr<Generator> g =
      from_models(decode, Model::load(dir + "/prefill", decode.get()), std::move(shorter));
  std::ifstream f(dir + "/tokens.bin", std::ios::binary);
  if (f) {  // a u32 count, then each token as a u32 length and its bytes (little-endian)
    uint32_t count = 0;
    if (!f.read(reinterpret_cast<char*>(&count), 4) || count == 0 || count > g->width_)
      throw Error(dir + "/tokens.bin: not a vocabulary of at most " +
                  std::to_string(g->width_) + " tokens");
    for (uint32_t i = 0; i < count; ++i) {
      uint32_t len = 0;
      std::string t;
      if (!f.read(reinterpret_cast<char*>(&len), 4) || len > 1024 ||
          !(t.resize(len), f.read(t.data(), len)))
        throw Error(dir + "/tokens.bin: token " + std::to_string(i) + " is cut short");
      g->tokens_.push_back(std::move(t));
    }
    g->vocab_ = count;
  }
  return g;
}

void Generator::set_num_threads(int n) {
  decode_->set_num_threads(n);
  prefill_->set_num_threads(n);
  for (const std::shared_ptr<Model>& m : shorter_) m->set_num_threads(n);
}

void Generator::move_caches(int64_t s, int64_t pos) {
  // From a shorter step's layout (cur_) to a longer one's, in the other of ks_ (or k_):
  // rows of keys a head dimension (transposed), of values a head.
  const size_t from = (size_t)length(cur_), to = (size_t)length(s), p = (size_t)pos;
  const size_t rows = (size_t)(layers_ * batch_ * heads_), hs = (size_t)head_, f = sizeof(float);
  float *k = short_k(cur_), *v = short_v(cur_);
  float *dk = s < 0 ? k_.get() : short_k(s), *dv = s < 0 ? v_.get() : short_v(s);
  Model& next = program(s);
  this->rows(next, dk, to * f, k, from * f, p * f, rows * hs);
  this->rows(next, dk + p, to * f, nullptr, 0, (to - p) * f, rows * hs);
  this->rows(next, dv, to * hs * f, v, from * hs * f, p * hs * f, rows);
  this->rows(next, dv + p * hs, to * hs * f, nullptr, 0, (to - p) * hs * f, rows);
  cur_ = s;
}

void Generator::rows(Model& on, void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                     size_t width, size_t rows) {
  settle(&on);
  on.queue_rows(dst, dst_pitch, src, src_pitch, width, rows);
  queued_ = &on;
}

void Generator::settle(const Model* next) {
  if (queued_ && queued_ != next) {
    Model* q = queued_;
    queued_ = nullptr;
    q->wait();
  }
}

Generator::~Generator() {
  try {  // copies queued by a generate that failed are done before the caches are freed
    settle();
  } catch (const Error&) {  // (a device that failed already said so)
  }
}

void Generator::step(const int64_t* tokens, int64_t pos, const std::vector<char>& store) {
  // The caches move to the next step when they are full: pos grows a position a step, so
  // it is the next one's length, and that step holds it.
  if (cur_ >= 0 && pos == length(cur_))
    move_caches(cur_ + 1 < (int64_t)lengths_.size() ? cur_ + 1 : -1, pos);
  Model& m = program(cur_);
  const int64_t T = length(cur_);
  float* k = cur_ < 0 ? k_.get() : short_k(cur_);
  float* v = cur_ < 0 ? v_.get() : short_v(cur_);
  std::vector<const void*> in = {tokens, &pos};
  const size_t slab = (size_t)(batch_ * heads_ * head_ * T);
  for (int64_t l = 0; l < layers_; ++l) in.push_back(k + l * slab);
  for (int64_t l = 0; l < layers_; ++l) in.push_back(v + l * slab);
  std::vector<bool> resident(in.size(), true);
  resident[0] = resident[1] = false;
  settle(&m);
  m.run(in, {logits_.data(), k_row_.get(), v_row_.get()}, resident, {false, true, true});
  queued_ = nullptr;  // (the run waited for its stream)
  // The step's keys and values into the caches at `pos` (keys transposed: a row a head
  // dimension; values a row a head), for each run of (layer, text) the texts `store` marks.
  const size_t f = sizeof(float), t = (size_t)T, p = (size_t)pos, hs = (size_t)head_;
  const size_t per = (size_t)heads_ * hs, n = (size_t)(layers_ * batch_);  // a (layer, text)'s
  for (size_t a = 0; a < n;) {
    if (!store[a % (size_t)batch_]) {
      ++a;
      continue;
    }
    size_t e = a + 1;
    while (e < n && store[e % (size_t)batch_]) ++e;
    rows(m, k + a * per * t + p, t * f, k_row_.get() + a * per, f, f, (e - a) * per);
    rows(m, v + (a * per * t + p * hs), t * hs * f, v_row_.get() + a * per, hs * f, hs * f,
         (e - a) * (size_t)heads_);
    a = e;
  }
}

void Generator::prefill(const std::vector<std::vector<int64_t>>& texts, size_t from) {
  tokens_in_.clear();
  for (const std::vector<int64_t>& t : texts)
    for (size_t i = from; i < from + (size_t)prefill_len_; ++i)
      tokens_in_.push_back(i < t.size() ? t[i] : 0);  // a finished text's: any token
  settle();
  prefill_->run({tokens_in_.data()}, {logits_.data(), k_.get(), v_.get()}, {false},
                {false, true, true});
  cur_ = -1;
}

void Generator::clear_caches(int64_t b) {
  const size_t slab = (size_t)(heads_ * head_ * max_len_) * sizeof(float);  // a layer's
  for (float* c : {k_.get(), v_.get()})  // (the full step's layout, after a prefill)
    rows(program(cur_), c + b * (int64_t)(slab / sizeof(float)), (size_t)batch_ * slab, nullptr,
         0, slab, (size_t)layers_);
}

std::vector<int64_t> Generator::generate(const std::vector<int64_t>& prompt, int64_t n,
                                         const SampleSettings& s) {
  if (batch_ != 1)
    throw Error("generate: the generator writes " + std::to_string(batch_) +
                " texts at once; give it that many prompts (generate_batch)");
  return generate_batch({prompt}, n, s)[0];
}

std::vector<std::vector<int64_t>> Generator::generate_batch(
    const std::vector<std::vector<int64_t>>& prompts, int64_t n, const SampleSettings& s) {
  if ((int64_t)prompts.size() != batch_)
    throw Error("generate: " + std::to_string(prompts.size()) + " prompts for a generator "
                "compiled for a batch of " + std::to_string(batch_));
  if (s.vocab < 0 || s.vocab > width_)
    throw Error("generate: vocab must be from 1 to " + std::to_string(width_) +
                " (0: the generator's)");
  const int64_t vocab = s.vocab ? s.vocab : vocab_;
  size_t shortest = SIZE_MAX, longest = 0;
  for (size_t b = 0; b < prompts.size(); ++b) {
    const std::string which = batch_ == 1 ? "the prompt" : "prompt " + std::to_string(b);
    const std::vector<int64_t>& p = prompts[b];
    if (p.empty()) throw Error("generate: " + which + " is empty");
    if ((int64_t)p.size() > max_len_)
      throw Error("generate: " + which + " has " + std::to_string(p.size()) +
                  " tokens, more than the compiled maximum length " + std::to_string(max_len_));
    for (int64_t t : p)
      if (t < 0 || t >= vocab)
        throw Error("generate: token " + std::to_string(t) + " of " + which +
                    " is outside the vocabulary (0 to " + std::to_string(vocab - 1) + ")");
    shortest = std::min(shortest, p.size());
    longest = std::max(longest, p.size());
  }
  if (n < 0) throw Error("generate: n must not be negative");

  // The texts advance together, a position a step: at step `fed` each text feeds its token
  // at that position, a prompt's or one drawn, so a shorter prompt's text starts drawing
  // while a longer one is still fed, and every text reaches max_len at the same step. A
  // text runs as batch 1 runs it: through the prefill when its prompt fills it, and from
  // zeroed caches through decode steps when not.
  const size_t P = (size_t)prefill_len_;
  std::vector<std::vector<int64_t>> texts = prompts, out((size_t)batch_);
  std::vector<char> store((size_t)batch_, 1);  // the texts a decode step stores keys for
  std::vector<float> prefilled;                // their logits after the prefill
  int64_t pos = 0;                             // the positions the caches hold
  size_t fed = 0;                              // the tokens of each text fed
  if (longest >= P) {
    prefill(texts, 0);
    if (shortest >= P) {
      pos = (int64_t)P;
      fed = P;
    } else {  // the others feed their first P tokens through decode steps, these wait
      prefilled = logits_;
      for (int64_t b = 0; b < batch_; ++b)
        if (texts[(size_t)b].size() < P) clear_caches(b);
        else store[(size_t)b] = 0;
    }
  } else if (!shorter_.empty()) {  // from empty caches in the shortest step's layout
    cur_ = 0;
    const size_t bytes =
        short_numel_ / (size_t)lengths_.back() * (size_t)lengths_[0] * sizeof(float);
    rows(program(cur_), short_k(0), bytes, nullptr, 0, bytes, 1);
    rows(program(cur_), short_v(0), bytes, nullptr, 0, bytes, 1);
  } else {
    cur_ = -1;
    rows(program(cur_), k_.get(), 0, nullptr, 0, cache_numel_ * sizeof(float), 1);
    rows(program(cur_), v_.get(), 0, nullptr, 0, cache_numel_ * sizeof(float), 1);
  }
  for (;;) {
    bool done = true;
    for (int64_t b = 0; b < batch_; ++b) {
      std::vector<int64_t>& o = out[(size_t)b];
      if (fed >= prompts[(size_t)b].size() && (int64_t)o.size() < n) {
        const int64_t tok = sample(logits_.data() + b * width_, vocab, s.temperature, s.top_k,
                                   s.top_p, s.seed + (uint64_t)b, (uint64_t)o.size());
        o.push_back(tok);
        texts[(size_t)b].push_back(tok);
      }
      done = done && (int64_t)o.size() == n;
    }
    if (done) break;
    if (pos == max_len_) {  // the context shifts: its last half again from position 0
      prefill(texts, fed + 1 - P);
      pos = (int64_t)P;
    } else {
      tokens_in_.clear();
      for (const std::vector<int64_t>& t : texts) tokens_in_.push_back(fed < t.size() ? t[fed] : 0);
      step(tokens_in_.data(), pos, store);
      pos += 1;
      if (pos == (int64_t)P && !prefilled.empty()) {  // the waiting texts' turn
        for (int64_t b = 0; b < batch_; ++b)
          if (!store[(size_t)b])
            std::copy_n(prefilled.begin() + b * width_, width_, logits_.begin() + b * width_);
        std::fill(store.begin(), store.end(), 1);
        prefilled.clear();
      }
    }
    fed += 1;
  }
  settle();  // (nothing left in flight when it returns)
  return out;
}

std::vector<int64_t> Generator::encode(const std::string& text) const {
  if (tokens_.empty()) throw Error("encode: the generator has no tokens.bin");
  std::vector<int64_t> ids;
  for (size_t at = 0; at < text.size();) {
    int64_t best = -1;
    for (size_t i = 0; i < tokens_.size(); ++i)
      if (!tokens_[i].empty() && (best < 0 || tokens_[i].size() > tokens_[(size_t)best].size()) &&
          text.compare(at, tokens_[i].size(), tokens_[i]) == 0)
        best = (int64_t)i;
    if (best < 0)
      throw Error("encode: the text holds a character outside the vocabulary (byte " +
                  std::to_string(at) + ")");
    ids.push_back(best);
    at += tokens_[(size_t)best].size();
  }
  return ids;
}

std::string Generator::decode(const std::vector<int64_t>& ids) const {
  if (tokens_.empty()) throw Error("decode: the generator has no tokens.bin");
  std::string text;
  for (int64_t t : ids) {
    if (t < 0 || t >= (int64_t)tokens_.size())
      throw Error("decode: token " + std::to_string(t) + " is outside the vocabulary");
    text += tokens_[(size_t)t];
  }
  return text;
}

}  // namespace gptc::rt
