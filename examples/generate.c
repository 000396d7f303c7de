/* generate.c — text from a model the main job trained, in C, linking only gptc's runtime.
 *
 *   ./run.sh                      # trains, and writes out/generate/ (the decode step)
 *   cc examples/generate.c $(pkg-config --cflags --libs gptc-runtime) -o generate
 *   ./generate out/generate "The " 200 1337 0.8 20
 *
 * Arguments: the folder gptc.Generator.save wrote (the decode step, its prefill/ and
 * tokens.bin), the prompt, how many tokens to write, the seed, and optionally the
 * temperature (default 1) and top-k (default -1: every token). The runtime's generator
 * (gptc_generate) runs what gptc.Generator.generate runs and draws with the same sampler, so
 * this prints exactly the text `gptc sample` prints for the same arguments. Prompts are
 * encoded by the longest token at each point: a character vocabulary's encoding (the main
 * job's); tokens.bin is not written for a BPE. A generator saved from
 * gptc.compile_generate(model, batch=B) writes B samples of the prompt at once (seeds
 * SEED to SEED + B - 1), each followed by a line of dashes, as nanoGPT's sample.py prints
 * its samples. */
#include <gptc/runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int die(const char* what) {
  fprintf(stderr, "generate: error: %s\n", what);
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 5) return die("usage: generate ARTIFACT PROMPT N SEED [TEMPERATURE [TOP_K]]");
  const long n = strtol(argv[3], NULL, 10);
  const uint64_t seed = strtoull(argv[4], NULL, 10);
  const float temperature = argc > 5 ? strtof(argv[5], NULL) : 1.0f;
  const int64_t top_k = argc > 6 ? strtoll(argv[6], NULL, 10) : -1;
  if (n < 0) return die("N must not be negative");

  gptc_generator* g = gptc_generator_load(argv[1]);
  if (!g) return die(gptc_last_error());
  gptc_generator_set_num_threads(g, 0); /* one per core: never changes a token */
  const int64_t batch = gptc_generator_batch(g);
  const size_t cap = strlen(argv[2]) + 1;
  int64_t* prompt = malloc(sizeof(int64_t) * cap);
  int64_t* out = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1) * (size_t)batch);
  const int64_t** rows = malloc(sizeof(int64_t*) * (size_t)batch);
  int64_t* lens = malloc(sizeof(int64_t) * (size_t)batch);
  const int64_t len = gptc_generator_encode(g, argv[2], prompt, (int64_t)cap);
  if (len < 0) return die(gptc_last_error());
  for (int64_t b = 0; b < batch; ++b) { /* the same prompt in every row */
    rows[b] = prompt;
    lens[b] = len;
  }
  if ((batch == 1 ? gptc_generate(g, prompt, len, n, temperature, top_k, 1.0f, seed, out)
                  : gptc_generate_batch(g, rows, lens, n, temperature, top_k, 1.0f, seed,
                                        out)) < 0)
    return die(gptc_last_error());
  for (int64_t b = 0; b < batch; ++b) {
    fputs(argv[2], stdout);
    for (long i = 0; i < n; ++i) {
      size_t bytes = 0;
      const char* t = gptc_generator_token(g, out[b * n + i], &bytes);
      fwrite(t, 1, bytes, stdout);
    }
    fputs(batch == 1 ? "\n" : "\n---------------\n", stdout);
  }
  gptc_generator_free(g);
  free(prompt);
  free(out);
  free(rows);
  free(lens);
  return 0;
}
