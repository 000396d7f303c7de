// c_api.cpp — the C API of gptc/runtime.h over gptc::rt::Model. No exception crosses it:
// failures return NULL / -1 and leave a one-line message in a thread-local string.
#include "gptc/runtime.h"
#include "gptc/generate.hpp"
#include "gptc/sample.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "gptc/model.hpp"

struct gptc_model {
  std::unique_ptr<gptc::rt::Model> model;
};

namespace {

thread_local std::string g_last_error;

int fail(const std::string& msg) {
  g_last_error = msg;
  return -1;
}

// Runs f(); converts any exception into -1 + gptc_last_error().
template <class F>
int guarded(F f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  } catch (...) {
    return fail("unknown error");
  }
}

int fill_info(const std::vector<gptc::rt::TensorSpec>& specs, int i, gptc_tensor_info* info) {
  if (!info) return fail("gptc: info is NULL");
  if (i < 0 || (size_t)i >= specs.size())
    return fail("gptc: tensor index " + std::to_string(i) + " out of range");
  const gptc::rt::TensorSpec& s = specs[(size_t)i];
  info->name = s.name.c_str();
  info->dtype = s.dtype.c_str();
  info->rank = (int32_t)s.shape.size();
  info->shape = s.shape.empty() ? nullptr : s.shape.data();
  info->nbytes = s.nbytes;
  return 0;
}

// The index of the tensor named `name` in `specs`, or -1 with an error naming the kind
// and, when there are few, the names there are.
int find_index(const std::vector<gptc::rt::TensorSpec>& specs, const char* name,
               const char* kind) {
  if (!name) return fail(std::string("gptc: the ") + kind + " name is NULL");
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].name == name) return (int)i;
  std::string known;
  for (size_t i = 0; i < specs.size() && i < 8; ++i)
    known += (i ? ", " : "") + specs[i].name;
  if (specs.size() > 8) known += ", ...";
  return fail(std::string("gptc: no ") + kind + " named '" + name + "' (the model has " +
              (known.empty() ? "none" : known) + ")");
}

// Model::load's model, or null with its error.
gptc_model* load_model(const char* dir, const gptc::rt::Model* weights_of) {
  gptc_model* out = nullptr;
  guarded([&] { out = new gptc_model{gptc::rt::Model::load(dir, weights_of)}; });
  return out;
}

}  // namespace

extern "C" {

gptc_model* gptc_model_load(const char* dir) {
  if (!dir) {
    fail("gptc_model_load: dir is NULL");
    return nullptr;
  }
  return load_model(dir, nullptr);
}

gptc_model* gptc_model_load_sharing(const char* dir, const gptc_model* weights_of) {
  if (!dir || !weights_of) {
    fail(std::string("gptc_model_load_sharing: ") + (dir ? "weights_of" : "dir") + " is NULL");
    return nullptr;
  }
  return load_model(dir, weights_of->model.get());
}

void gptc_model_free(gptc_model* model) { delete model; }

const char* gptc_last_error(void) { return g_last_error.c_str(); }

int gptc_model_num_inputs(const gptc_model* m) {
  return m ? (int)m->model->inputs().size() : fail("gptc_model_num_inputs: model is NULL");
}
int gptc_model_num_results(const gptc_model* m) {
  return m ? (int)m->model->results().size() : fail("gptc_model_num_results: model is NULL");
}
int gptc_model_num_params(const gptc_model* m) {
  return m ? (int)m->model->params().size() : fail("gptc_model_num_params: model is NULL");
}

int gptc_model_input_info(const gptc_model* m, int i, gptc_tensor_info* info) {
  return m ? fill_info(m->model->inputs(), i, info) : fail("gptc: model is NULL");
}
int gptc_model_result_info(const gptc_model* m, int i, gptc_tensor_info* info) {
  return m ? fill_info(m->model->results(), i, info) : fail("gptc: model is NULL");
}
int gptc_model_param_info(const gptc_model* m, int i, gptc_tensor_info* info) {
  return m ? fill_info(m->model->params(), i, info) : fail("gptc: model is NULL");
}

const char* gptc_version(void) { return GPTC_VERSION; }

int gptc_model_input_index(const gptc_model* m, const char* name) {
  return m ? find_index(m->model->inputs(), name, "input")
           : fail("gptc_model_input_index: model is NULL");
}
int gptc_model_result_index(const gptc_model* m, const char* name) {
  return m ? find_index(m->model->results(), name, "result")
           : fail("gptc_model_result_index: model is NULL");
}
int gptc_model_param_index(const gptc_model* m, const char* name) {
  return m ? find_index(m->model->params(), name, "parameter")
           : fail("gptc_model_param_index: model is NULL");
}

void* gptc_model_param_data(gptc_model* m, int i) {
  if (!m || i < 0 || (size_t)i >= m->model->params().size()) {
    fail("gptc_model_param_data: bad model or index");
    return nullptr;
  }
  return m->model->param_data(m->model->params()[(size_t)i].name);
}

int gptc_model_run(gptc_model* m, const void* const* inputs, void* const* results) {
  if (!m) return fail("gptc_model_run: model is NULL");
  return guarded([&] {
    size_t ni = m->model->inputs().size(), nr = m->model->results().size();
    if ((ni && !inputs) || (nr && !results)) throw gptc::rt::Error("gptc_model_run: inputs or results array is NULL");
    std::vector<const void*> in(inputs, inputs + ni);
    std::vector<void*> out(results, results + nr);
    m->model->run(in, out);
  });
}

int gptc_model_set_num_threads(gptc_model* m, int n) {
  if (!m) return fail("gptc_model_set_num_threads: model is NULL");
  return guarded([&] { m->model->set_num_threads(n); });
}

int gptc_model_save_weights(const gptc_model* m, const char* path) {
  if (!m || !path) return fail("gptc_model_save_weights: model or path is NULL");
  return guarded([&] { m->model->save_weights(path); });
}

struct gptc_generator {
  std::unique_ptr<gptc::rt::Generator> g;
};

gptc_generator* gptc_generator_load(const char* dir) {
  if (!dir) {
    fail("gptc_generator_load: dir is NULL");
    return nullptr;
  }
  gptc_generator* out = nullptr;
  guarded([&] { out = new gptc_generator{gptc::rt::Generator::load(dir)}; });
  return out;
}

void gptc_generator_free(gptc_generator* g) { delete g; }

int gptc_generator_set_num_threads(gptc_generator* g, int n) {
  if (!g) return fail("gptc_generator_set_num_threads: generator is NULL");
  return guarded([&] { g->g->set_num_threads(n); });
}

int64_t gptc_generator_max_len(const gptc_generator* g) {
  return g ? g->g->max_len() : fail("gptc_generator_max_len: generator is NULL");
}

int64_t gptc_generator_batch(const gptc_generator* g) {
  return g ? g->g->batch() : fail("gptc_generator_batch: generator is NULL");
}

int64_t gptc_generator_vocab(const gptc_generator* g) {
  return g ? g->g->vocab() : fail("gptc_generator_vocab: generator is NULL");
}

int64_t gptc_generate(gptc_generator* g, const int64_t* prompt, int64_t prompt_len, int64_t n,
                      float temperature, int64_t top_k, float top_p, uint64_t seed,
                      int64_t* out) {
  if (!g || (prompt_len > 0 && !prompt) || (n > 0 && !out))
    return fail("gptc_generate: generator, prompt or out is NULL");
  if (prompt_len < 0) return fail("gptc_generate: prompt_len is negative");
  if (guarded([&] {
        std::vector<int64_t> ids = g->g->generate(
            std::vector<int64_t>(prompt, prompt + prompt_len), n,
            gptc::rt::SampleSettings{temperature, top_k, top_p, seed});
        std::copy(ids.begin(), ids.end(), out);
      }) != 0)
    return -1;
  return n;
}

int64_t gptc_generate_batch(gptc_generator* g, const int64_t* const* prompts,
                            const int64_t* prompt_lens, int64_t n, float temperature,
                            int64_t top_k, float top_p, uint64_t seed, int64_t* out) {
  if (!g || !prompts || !prompt_lens || (n > 0 && !out))
    return fail("gptc_generate_batch: generator, prompts, prompt_lens or out is NULL");
  if (guarded([&] {
        const int64_t batch = g->g->batch();
        std::vector<std::vector<int64_t>> rows;
        for (int64_t b = 0; b < batch; ++b) {
          if (prompt_lens[b] < 0 || (prompt_lens[b] > 0 && !prompts[b]))
            throw gptc::rt::Error("gptc_generate_batch: prompt " + std::to_string(b) +
                                  (prompt_lens[b] < 0 ? "'s length is negative" : " is NULL"));
          rows.emplace_back(prompts[b], prompts[b] + prompt_lens[b]);
        }
        std::vector<std::vector<int64_t>> ids = g->g->generate_batch(
            rows, n, gptc::rt::SampleSettings{temperature, top_k, top_p, seed});
        for (int64_t b = 0; b < batch; ++b)
          std::copy(ids[(size_t)b].begin(), ids[(size_t)b].end(), out + b * n);
      }) != 0)
    return -1;
  return n;
}

int64_t gptc_generator_encode(const gptc_generator* g, const char* text, int64_t* ids,
                              int64_t capacity) {
  if (!g || !text || (capacity > 0 && !ids))
    return fail("gptc_generator_encode: generator, text or ids is NULL");
  int64_t count = -1;
  if (guarded([&] {
        std::vector<int64_t> v = g->g->encode(text);
        if ((int64_t)v.size() > capacity)
          throw gptc::rt::Error("gptc_generator_encode: the text is " +
                                std::to_string(v.size()) + " tokens, more than capacity " +
                                std::to_string(capacity));
        std::copy(v.begin(), v.end(), ids);
        count = (int64_t)v.size();
      }) != 0)
    return -1;
  return count;
}

const char* gptc_generator_token(const gptc_generator* g, int64_t id, size_t* len) {
  static thread_local std::string bytes;
  if (!g || !len) {
    fail("gptc_generator_token: generator or len is NULL");
    return nullptr;
  }
  if (guarded([&] { bytes = g->g->decode({id}); }) != 0) return nullptr;
  *len = bytes.size();
  return bytes.data();
}

int64_t gptc_sample(const float* logits, int64_t vocab, float temperature, int64_t top_k,
                    float top_p, uint64_t seed, uint64_t draw) {
  int64_t token = -1;
  if (guarded([&] {
        token = gptc::rt::sample(logits, vocab, temperature, top_k, top_p, seed, draw);
      }) != 0)
    return -1;
  return token;
}

}  // extern "C"
