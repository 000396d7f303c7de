/* generate.c — text from a model the main job trained, in C, linking only gptc's runtime.
 *
 *   ./run.sh                      # trains, and writes out/generate/ (the decode step)
 *   cc examples/generate.c $(pkg-config --cflags --libs gptc-runtime) -o generate
 *   ./generate out/generate "The " 200 1337 0.8 20
 *
 * Arguments: the folder gptc.Generator.save wrote (the decode step, its prefill/ and
 * tokens.bin), the prompt, how many tokens to write, the seed, and optionally the
 * temperature (default 1) and top-k (default -1: every token). It runs what
 * gptc.Generator.generate runs — the prompt through the prefill (its first half-context)
 * and decode steps, then a draw and a step per new token, the context shifting to its last
 * half when it reaches the compiled length — and draws with gptc_sample, so it prints
 * exactly the text examples/sample.py prints for the same arguments.
 *
 * The prompt is encoded by the longest token that matches at each point, which is the
 * encoding for a character vocabulary (the main job's); tokens.bin is not written for a
 * BPE, whose merges this does not reproduce. */
#include <gptc/runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint32_t len; unsigned char* bytes; } token;

static int die(const char* what) {
  fprintf(stderr, "generate: error: %s\n", what);
  return 1;
}

/* tokens.bin: a u32 count, then each token as a u32 length and its bytes (little-endian). */
static token* read_tokens(const char* dir, uint32_t* count) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tokens.bin", dir);
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  token* t = NULL;
  if (fread(count, 4, 1, f) == 1 && *count > 0 && *count < (1u << 24)) {
    t = calloc(*count, sizeof *t);
    for (uint32_t i = 0; t && i < *count; ++i) {
      if (fread(&t[i].len, 4, 1, f) != 1 || t[i].len > 64 ||
          !(t[i].bytes = malloc(t[i].len ? t[i].len : 1)) ||
          fread(t[i].bytes, 1, t[i].len, f) != t[i].len) {
        free(t);
        t = NULL;
      }
    }
  }
  fclose(f);
  return t;
}

int main(int argc, char** argv) {
  if (argc < 5)
    return die("usage: generate ARTIFACT PROMPT N SEED [TEMPERATURE [TOP_K]]");
  const char* dir = argv[1];
  const char* prompt = argv[2];
  long n = strtol(argv[3], NULL, 10);
  uint64_t seed = strtoull(argv[4], NULL, 10);
  float temperature = argc > 5 ? strtof(argv[5], NULL) : 1.0f;
  int64_t top_k = argc > 6 ? strtoll(argv[6], NULL, 10) : -1;

  uint32_t vocab = 0;
  token* tokens = read_tokens(dir, &vocab);
  if (!tokens) return die("cannot read ARTIFACT/tokens.bin");
  char prefill_dir[4096];
  snprintf(prefill_dir, sizeof prefill_dir, "%s/prefill", dir);
  gptc_model* m = gptc_model_load(dir);
  if (!m) return die(gptc_last_error());
  gptc_model* pre = gptc_model_load(prefill_dir);
  if (!pre) return die(gptc_last_error());
  gptc_tensor_info logits_info, k_info, v_info, prefill_info;
  const int inputs = gptc_model_num_inputs(m);
  const int layers = (inputs - 2) / 2;
  /* The prefill's results: the logits, then every layer's keys (transposed: [layers, 1,
   * heads, head size, T]) and values ([layers, 1, heads, T, head size]) stacked. */
  if (inputs < 4 || inputs % 2 || gptc_model_result_info(m, 0, &logits_info) != 0 ||
      gptc_model_num_inputs(pre) != 1 || gptc_model_input_info(pre, 0, &prefill_info) != 0 ||
      gptc_model_result_info(pre, 1, &k_info) != 0 || k_info.rank != 5 ||
      gptc_model_result_info(pre, 2, &v_info) != 0 || k_info.shape[0] != layers)
    return die("ARTIFACT is not gptc.Generator.save's decode step and prefill");
  const int64_t heads = k_info.shape[2], head = k_info.shape[3], max_len = k_info.shape[4];
  const int64_t prefill_len = prefill_info.shape[1];
  const size_t layer_floats = (size_t)(heads * head * max_len);
  if (vocab > logits_info.shape[1]) return die("tokens.bin has more tokens than the logits");
  gptc_model_set_num_threads(m, 0);
  gptc_model_set_num_threads(pre, 0);

  /* The text's ids: the prompt, longest match first, then the new tokens. */
  int64_t* ids = malloc(sizeof(int64_t) * (strlen(prompt) + (size_t)(n > 0 ? n : 0) + 1));
  size_t len = 0;
  for (const char* p = prompt; *p;) {
    int64_t best = -1;
    for (uint32_t i = 0; i < vocab; ++i)
      if (tokens[i].len && (best < 0 || tokens[i].len > tokens[best].len) &&
          strncmp(p, (const char*)tokens[i].bytes, tokens[i].len) == 0)
        best = i;
    if (best < 0) return die("the prompt holds a character outside the vocabulary");
    ids[len++] = best;
    p += tokens[best].len;
  }
  if (len == 0) return die("the prompt is empty");
  if ((int64_t)len > max_len) return die("the prompt is longer than the compiled maximum");

  float* logits = malloc(logits_info.nbytes);
  float* k = malloc(k_info.nbytes);
  float* v = malloc(v_info.nbytes);
  float* k_row = malloc(sizeof(float) * (size_t)(layers * heads * head));
  float* v_row = malloc(sizeof(float) * (size_t)(layers * heads * head));
  const void* in[2 + 2 * 64];
  if (layers > 64) return die("more than 64 layers");
  for (int l = 0; l < layers; ++l) { /* one input a layer: its slab of the caches */
    in[2 + l] = k + (size_t)l * layer_floats;
    in[2 + layers + l] = v + (size_t)l * layer_floats;
  }

  /* One decode step: token `tok` at position `at`; its keys and values stored at `at`. */
#define STEP(tok, at)                                                          \
  do {                                                                         \
    int64_t idx = (tok), pos = (at);                                           \
    in[0] = &idx;                                                              \
    in[1] = &pos;                                                              \
    void* out[3] = {logits, k_row, v_row};                                     \
    if (gptc_model_run(m, in, out) != 0) return die(gptc_last_error());        \
    for (int64_t r = 0; r < layers * heads; ++r)                               \
      for (int64_t d = 0; d < head; ++d) {                                     \
        k[(r * head + d) * max_len + pos] = k_row[r * head + d];               \
        v[(r * max_len + pos) * head + d] = v_row[r * head + d];               \
      }                                                                        \
  } while (0)
  /* ids[from .. from + count) into empty caches from position 0: the first prefill_len
   * through the prefill when there are that many, the rest a decode step each. */
#define FEED(from, count)                                                      \
  do {                                                                         \
    size_t start = 0;                                                          \
    if ((int64_t)(count) >= prefill_len) {                                     \
      const void* pin[1] = {ids + (from)};                                     \
      void* out[3] = {logits, k, v};                                           \
      if (gptc_model_run(pre, pin, out) != 0) return die(gptc_last_error());   \
      start = (size_t)prefill_len;                                             \
    } else {                                                                   \
      memset(k, 0, k_info.nbytes);                                             \
      memset(v, 0, v_info.nbytes);                                             \
    }                                                                          \
    for (size_t i = start; i < (size_t)(count); ++i)                           \
      STEP(ids[(from) + i], (int64_t)i);                                       \
  } while (0)

  FEED(0, len);
  int64_t at = (int64_t)len; /* the next token's position */
  fputs(prompt, stdout);
  for (long draw = 0; draw < n; ++draw) {
    int64_t tok = gptc_sample(logits, vocab, temperature, top_k, 1.0f, seed, (uint64_t)draw);
    if (tok < 0) return die(gptc_last_error());
    fwrite(tokens[tok].bytes, 1, tokens[tok].len, stdout);
    ids[len++] = tok;
    if (draw + 1 == n) break;
    if (at == max_len) { /* the context shifts: its last half again from position 0 */
      FEED(len - (size_t)prefill_len, prefill_len);
      at = prefill_len;
    } else {
      STEP(tok, at);
      at += 1;
    }
  }
  fputs("\n", stdout);
  gptc_model_free(pre);
  gptc_model_free(m);
  return 0;
}
