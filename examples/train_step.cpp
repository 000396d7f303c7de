// train_step.cpp — training steps from C++, linking only gptc's runtime (gptc/model.hpp).
//
//   c++ -std=c++17 examples/train_step.cpp $(pkg-config --cflags --libs gptc-runtime) -o train_step
//   ./train_step STEP_ARTIFACT BATCHES.bin STEPS SEED LR OUT.safetensors
//
// STEP_ARTIFACT is a training step (gptc compile --train, or the artifact/ folder that
// gptc.compile_train_step(..., workdir=W) writes in W). BATCHES.bin holds, for each step,
// the model's integer inputs in order (idx, then targets), little-endian int64, each of its
// input's shape. Each step feeds what gptc.TrainStep feeds (docs/artifact.md, "A training
// step's arguments"): the batch, rng = {seed, step}, the learning rate and the step number
// from 1; the runtime keeps the parameters and AdamW's moments between runs. It prints each
// step's loss as a hexadecimal float (every bit), then writes the parameters and moments to
// OUT.safetensors. The same artifact, batches, seed and rates give the bits gptc.TrainStep
// gives, on any number of threads.
#include <gptc/model.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: train_step STEP_ARTIFACT BATCHES.bin STEPS SEED LR OUT\n");
    return 2;
  }
  try {
    auto m = gptc::rt::Model::load(argv[1]);
    const long steps = std::strtol(argv[3], nullptr, 10);
    const int64_t seed = std::strtoll(argv[4], nullptr, 10);
    const double lr = std::strtod(argv[5], nullptr);
    m->set_num_threads(0);  // one per core: never changes a bit

    // The inputs by name: the batch's integer tensors in order, then rng, lr and step.
    std::vector<std::vector<char>> buffers;
    std::vector<const void*> in;
    int64_t* rng = nullptr;
    double *lr_in = nullptr, *step_in = nullptr;
    std::vector<size_t> batch;  // indices into `in` the batch file fills
    for (const gptc::rt::TensorSpec& s : m->inputs()) {
      buffers.emplace_back(s.nbytes);
      void* p = buffers.back().data();
      in.push_back(p);
      if (s.name == "rng") rng = static_cast<int64_t*>(p);
      else if (s.name == "lr") lr_in = static_cast<double*>(p);
      else if (s.name == "step") step_in = static_cast<double*>(p);
      else if (s.dtype == "i64") batch.push_back(in.size() - 1);
      else throw gptc::rt::Error("input '" + s.name + "' is not a training step's");
    }
    if (!lr_in || !step_in) throw gptc::rt::Error(std::string(argv[1]) + " is not a training step");
    std::vector<std::vector<char>> out_buffers;
    std::vector<void*> out;
    size_t loss_index = 0;
    for (size_t i = 0; i < m->results().size(); ++i) {
      out_buffers.emplace_back(m->results()[i].nbytes);
      out.push_back(out_buffers.back().data());
      if (m->results()[i].shape.empty()) loss_index = i;  // the loss: the last scalar
    }

    std::ifstream batches(argv[2], std::ios::binary);
    for (long step = 1; step <= steps; ++step) {
      for (size_t i : batch)
        if (!batches.read(static_cast<char*>(const_cast<void*>(in[i])),
                          (std::streamsize)m->inputs()[i].nbytes))
          throw gptc::rt::Error(std::string(argv[2]) + " holds fewer batches than STEPS");
      if (rng) rng[0] = seed, rng[1] = step;
      *lr_in = lr;
      *step_in = (double)step;
      m->run(in, out);
      std::printf("%a\n", (double)*static_cast<float*>(out[loss_index]));
    }
    m->save_weights(argv[6]);
  } catch (const gptc::rt::Error& e) {
    std::fprintf(stderr, "train_step: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
