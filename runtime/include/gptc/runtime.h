/* gptc/runtime.h — C API of the gptc runtime (a thin wrapper of gptc::rt::Model).
 *
 *   gptc_model* m = gptc_model_load("out/tiny");
 *   if (!m) { fprintf(stderr, "%s\n", gptc_last_error()); return 1; }
 *   const void* in[] = {idx};  void* out[] = {logits, loss};
 *   if (gptc_model_run(m, in, out) != 0) fprintf(stderr, "%s\n", gptc_last_error());
 *   gptc_model_free(m);
 *
 * Functions returning int give 0 on success and -1 on failure; on failure (and on a NULL
 * from gptc_model_load) gptc_last_error() holds a one-line message for this thread.
 * Pointers in gptc_tensor_info stay valid while the model lives. */
#ifndef GPTC_RUNTIME_H
#define GPTC_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gptc_model gptc_model;

typedef struct gptc_tensor_info {
  const char* name;
  const char* dtype;    /* "f32", "f64", "bf16", "i64", "i1" */
  int32_t rank;
  const int64_t* shape; /* rank entries (NULL when rank == 0) */
  uint64_t nbytes;      /* dense row-major size in bytes */
} gptc_tensor_info;

/* The runtime's version, "MAJOR.MINOR.PATCH" (gptc --version and gptc.__version__ say the
 * same). */
const char* gptc_version(void);

gptc_model* gptc_model_load(const char* dir);
/* Loads dir beside weights_of, a model already loaded for the same target: each parameter
 * (and state) it holds under the same name, dtype and shape is that buffer, shared rather
 * than read, so a write or a training step through either is seen by both (gradient
 * accumulation's update beside its micro-batch program, a generator's prefill beside its
 * decode step: artifacts of `gptc compile --weights-of`). Either may be freed first. */
gptc_model* gptc_model_load_sharing(const char* dir, const gptc_model* weights_of);
void gptc_model_free(gptc_model* model); /* NULL is fine */
const char* gptc_last_error(void);       /* "" when there was none */

int gptc_model_num_inputs(const gptc_model* model);
int gptc_model_num_results(const gptc_model* model);
int gptc_model_num_params(const gptc_model* model);
int gptc_model_input_info(const gptc_model* model, int i, gptc_tensor_info* info);
int gptc_model_result_info(const gptc_model* model, int i, gptc_tensor_info* info);
int gptc_model_param_info(const gptc_model* model, int i, gptc_tensor_info* info);
/* The index of the input, result or parameter of that name (gptc_model_input_info's i),
 * or -1 when there is none (gptc_last_error() names the ones there are). */
int gptc_model_input_index(const gptc_model* model, const char* name);
int gptc_model_result_index(const gptc_model* model, const char* name);
int gptc_model_param_index(const gptc_model* model, const char* name);
/* The runtime-owned buffer of parameter i (NULL if out of range); read or write it between
 * runs, not while another thread runs the model. */
void* gptc_model_param_data(gptc_model* model, int i);

/* inputs[i]: buffer of input i (num_inputs entries); results[j]: caller-owned buffer of
 * result j, filled by the call. */
int gptc_model_run(gptc_model* model, const void* const* inputs, void* const* results);
/* Waits for a run of the model on another thread to finish. */
int gptc_model_save_weights(const gptc_model* model, const char* path);
/* Threads for the kernels' parallel loops (default 1; 0: one per core; at most 1024).
 * Never changes bits. */
int gptc_model_set_num_threads(gptc_model* model, int n);

/* The token drawn from logits[0 .. vocab) as gptc's generation draws it (gptc/sample.hpp;
 * gptc.generate in Python calls the same function): temperature 0 takes the likeliest;
 * top_k is 1 .. vocab, or -1 for every token; top_p in (0, 1] keeps the likeliest tokens
 * whose probability reaches it (1: all); seed and draw (the token's number in the text)
 * pick the random number. The same arguments give the same token on any machine.
 * Returns the token id, or -1 with gptc_last_error() set. */
int64_t gptc_sample(const float* logits, int64_t vocab, float temperature, int64_t top_k,
                    float top_p, uint64_t seed, uint64_t draw);

/* Generation (gptc/generate.hpp): the folder gptc.Generator.save writes (the main job's
 * out/generate/), run as gptc.Generator.generate runs it: the same prompt, settings and
 * seed give the same tokens as Python.
 *
 *   gptc_generator* g = gptc_generator_load("out/generate");
 *   int64_t ids[64], out[200];
 *   int64_t n = gptc_generator_encode(g, "The ", ids, 64);
 *   gptc_generate(g, ids, n, 200, 0.8f, 40, 1.0f, 7, out);
 *   for (int i = 0; i < 200; ++i) { size_t len; fwrite(gptc_generator_token(g, out[i], &len), 1, len, stdout); }
 */
typedef struct gptc_generator gptc_generator;
gptc_generator* gptc_generator_load(const char* dir);
void gptc_generator_free(gptc_generator* g); /* NULL is fine */
int gptc_generator_set_num_threads(gptc_generator* g, int n);
int64_t gptc_generator_max_len(const gptc_generator* g);
int64_t gptc_generator_vocab(const gptc_generator* g);
/* The texts it writes at once (gptc.compile_generate's batch; 1 by default). */
int64_t gptc_generator_batch(const gptc_generator* g);
/* n token ids after prompt[0 .. prompt_len) into out[0 .. n) (top_k -1: every token;
 * top_p 1: no cut); returns n, or -1 with gptc_last_error() set (an empty prompt, one longer
 * than the compiled maximum, a token outside the vocabulary, bad settings, a generator
 * compiled for a batch of more than one). */
int64_t gptc_generate(gptc_generator* g, const int64_t* prompt, int64_t prompt_len, int64_t n,
                      float temperature, int64_t top_k, float top_p, uint64_t seed,
                      int64_t* out);
/* A batch of B = gptc_generator_batch(g) texts at once: prompts[b] holds prompt b's
 * prompt_lens[b] ids (the lengths may differ); out gets B rows of n ids, row b drawn with
 * seed + b (exactly what a batch-1 generator writes for that prompt with seed + b). Returns
 * n or -1, as gptc_generate. */
int64_t gptc_generate_batch(gptc_generator* g, const int64_t* const* prompts,
                            const int64_t* prompt_lens, int64_t n, float temperature,
                            int64_t top_k, float top_p, uint64_t seed, int64_t* out);
/* With a tokens.bin: text (NUL-terminated) to ids, the longest token at each point (a
 * character vocabulary's encoding), at most `capacity` of them; returns their count or -1.
 * A token's bytes and their count (NULL for an id outside the vocabulary). */
int64_t gptc_generator_encode(const gptc_generator* g, const char* text, int64_t* ids,
                              int64_t capacity);
const char* gptc_generator_token(const gptc_generator* g, int64_t id, size_t* len);

#ifdef __cplusplus
}
#endif

#endif /* GPTC_RUNTIME_H */
