"""A C program that links only the runtime library (no Python, no libgomp of its own), as a
deployment binary does."""
import os
import subprocess

from conftest import REPO, capture_one_layer, runtime_library
from gptc.locate import find_tool

LOAD_FREE = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <gptc/runtime.h>

static const char* dir;

/* Loads the artifact, runs it once on 2 threads, frees it; `rounds` times. */
static void* cycle(void* rounds) {
  for (long r = 0; r < (long)rounds; ++r) {
    gptc_model* m = gptc_model_load(dir);
    if (!m) { fprintf(stderr, "%s\n", gptc_last_error()); exit(1); }
    gptc_model_set_num_threads(m, 2);
    const void* in[8];
    void* out[8];
    for (int i = 0; i < gptc_model_num_inputs(m); ++i) {
      gptc_tensor_info t;
      gptc_model_input_info(m, i, &t);
      in[i] = calloc(1, t.nbytes);
    }
    for (int i = 0; i < gptc_model_num_results(m); ++i) {
      gptc_tensor_info t;
      gptc_model_result_info(m, i, &t);
      out[i] = calloc(1, t.nbytes);
    }
    if (gptc_model_run(m, in, out) != 0) { fprintf(stderr, "%s\n", gptc_last_error()); exit(1); }
    for (int i = 0; i < gptc_model_num_inputs(m); ++i) free((void*)in[i]);
    for (int i = 0; i < gptc_model_num_results(m); ++i) free(out[i]);
    gptc_model_free(m);
  }
  return NULL;
}

int main(int argc, char** argv) {
  dir = argv[1];
  cycle((void*)10);
  pthread_t t[3];
  for (int i = 0; i < 3; ++i) pthread_create(&t[i], NULL, cycle, (void*)10);
  for (int i = 0; i < 3; ++i) pthread_join(t[i], NULL);
  cycle((void*)10);
  printf("ok\n");
  return 0;
}
"""


def test_a_program_without_openmp_loads_and_frees_models_on_many_threads(tmp_path):
    """Loading, running (2 threads) and freeing a model again and again, from several threads
    at once, in a program that does not link libgomp: freeing the last model must not unload
    the kernels' OpenMP runtime from under its idle workers (it did: SIGSEGV)."""
    library = runtime_library()
    mlir = capture_one_layer(tmp_path)
    artifact = tmp_path / "artifact"
    subprocess.run([find_tool("gptc"), "compile", str(mlir), "-o", str(artifact)], check=True,
                   capture_output=True)
    (tmp_path / "load_free.c").write_text(LOAD_FREE)
    include = os.path.join(REPO, "runtime", "include")
    subprocess.run(["cc", "-I", include, "-c", str(tmp_path / "load_free.c"), "-o",
                    str(tmp_path / "load_free.o")], check=True)
    subprocess.run(["c++", str(tmp_path / "load_free.o"), library, "-ldl", "-pthread", "-o",
                    str(tmp_path / "load_free")], check=True)
    libs = subprocess.run(["ldd", str(tmp_path / "load_free")], capture_output=True, text=True)
    assert "gomp" not in libs.stdout  # the program itself has no OpenMP runtime
    run = subprocess.run([str(tmp_path / "load_free"), str(artifact)], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, (run.returncode, run.stderr)
    assert run.stdout == "ok\n"
