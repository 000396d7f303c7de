/* generate.c — text from a model the main job trained, in C, linking only gptc's runtime.
 *
 *   ./run.sh                      # trains, and writes out/generate/ (the decode step)
 *   cc examples/generate.c $(pkg-config --cflags --libs gptc-runtime) -o generate
 *   ./generate out/generate "The " 200 1337 0.8 20
 *
 * Arguments: the decode-step artifact (gptc.compile_generate's, saved with its tokens.bin),
 * the prompt, how many tokens to write, the seed, and optionally the temperature (default
 * 1) and top-k (default -1: every token). It runs what gptc.Generator.generate runs — the
 * prompt fed a token at a time, then a draw and a step per new token, the context shifting
 * to its last half when it reaches the compiled length — and draws with gptc_sample, so it
 * prints exactly the text examples/sample.py prints for the same arguments.
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
  gptc_model* m = gptc_model_load(dir);
  if (!m) return die(gptc_last_error());
  gptc_tensor_info logits_info, cache_info;
  if (gptc_model_num_inputs(m) != 4 || gptc_model_result_info(m, 0, &logits_info) != 0 ||
      gptc_model_input_info(m, 2, &cache_info) != 0 || cache_info.rank != 5)
    return die("ARTIFACT is not a decode step (idx, pos, k_cache, v_cache)");
  const int64_t max_len = cache_info.shape[3];
  const int64_t width = logits_info.shape[1];
  if (vocab > width) return die("tokens.bin has more tokens than the model's logits");
  gptc_model_set_num_threads(m, 0);

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
  void* k[2] = {calloc(1, cache_info.nbytes), calloc(1, cache_info.nbytes)};
  void* v[2] = {calloc(1, cache_info.nbytes), calloc(1, cache_info.nbytes)};
  int cur = 0;  /* k[cur], v[cur]: the caches the next step reads */
  int64_t idx, pos;
  /* One step: token `tok` at position `at`. */
#define STEP(tok, at)                                                          \
  do {                                                                         \
    idx = (tok);                                                               \
    pos = (at);                                                                \
    const void* in[4] = {&idx, &pos, k[cur], v[cur]};                          \
    void* out[3] = {logits, k[1 - cur], v[1 - cur]};                           \
    if (gptc_model_run(m, in, out) != 0) return die(gptc_last_error());        \
    cur = 1 - cur;                                                             \
  } while (0)
  for (size_t i = 0; i < len; ++i) STEP(ids[i], (int64_t)i);
  pos = (int64_t)len;

  fputs(prompt, stdout);
  int64_t at = pos;
  for (long draw = 0; draw < n; ++draw) {
    int64_t tok = gptc_sample(logits, vocab, temperature, top_k, 1.0f, seed, (uint64_t)draw);
    if (tok < 0) return die(gptc_last_error());
    fwrite(tokens[tok].bytes, 1, tokens[tok].len, stdout);
    ids[len++] = tok;
    if (draw + 1 == n) break;
    if (at == max_len) {  /* the context shifts: its last half again from position 0 */
      memset(k[cur], 0, cache_info.nbytes);
      memset(v[cur], 0, cache_info.nbytes);
      const size_t keep = (size_t)(max_len / 2);
      for (size_t i = 0; i < keep; ++i) STEP(ids[len - keep + i], (int64_t)i);
      at = (int64_t)keep;
    } else {
      STEP(tok, at);
      at += 1;
    }
  }
  fputs("\n", stdout);
  gptc_model_free(m);
  return 0;
}
