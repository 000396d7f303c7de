// train_step.cpp — training steps from C++, linking only gptc's runtime (gptc/model.hpp).
//
//   c++ -std=c++17 examples/train_step.cpp $(pkg-config --cflags --libs gptc-runtime) -o train_step
//   ./train_step STEP_ARTIFACT BATCHES.bin STEPS SEED LR OUT.safetensors [MICRO_ARTIFACT N]
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
//
// With MICRO_ARTIFACT and N (gradient accumulation: gptc compile --accumulate, and
// STEP_ARTIFACT --train --accumulated N; the micro/ and step/ folders of
// compile_train_step(..., accumulation_steps=N, workdir=W)), STEP_ARTIFACT loads beside
// MICRO_ARTIFACT, sharing its params and gradient sums, and each step runs MICRO_ARTIFACT
// on the next N batches of the file (first = the first of them; micro-batch i draws rng
// {seed, (step - 1) N + i + 1}), then STEP_ARTIFACT; the loss printed is their losses'
// mean (the float sum in order, over N), and OUT holds the gradient sums too.
#include <gptc/model.hpp>
#include <gptc/safetensors.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

// A Model's input and result buffers, and where the step's inputs go.
struct Feed {
  std::vector<std::vector<char>> buffers, out_buffers;
  std::vector<const void*> in;
  std::vector<void*> out;
  int64_t* rng = nullptr;
  double *lr = nullptr, *step = nullptr;
  bool* first = nullptr;
  std::vector<size_t> batch;  // indices into `in` the batch file fills
  size_t loss = 0;            // the loss: the last scalar result

  explicit Feed(const gptc::rt::Model& m) {
    for (const gptc::rt::TensorSpec& s : m.inputs()) {
      buffers.emplace_back(s.nbytes);
      void* p = buffers.back().data();
      in.push_back(p);
      if (s.name == "rng") rng = static_cast<int64_t*>(p);
      else if (s.name == "lr") lr = static_cast<double*>(p);
      else if (s.name == "step") step = static_cast<double*>(p);
      else if (s.name == "first") first = static_cast<bool*>(p);
      else if (s.dtype == "i64") batch.push_back(in.size() - 1);
      else throw gptc::rt::Error("input '" + s.name + "' is not a training step's");
    }
    for (size_t i = 0; i < m.results().size(); ++i) {
      out_buffers.emplace_back(m.results()[i].nbytes);
      out.push_back(out_buffers.back().data());
      if (m.results()[i].shape.empty()) loss = i;
    }
  }
  // The next batch from the file, or an error naming it.
  void read_batch(const gptc::rt::Model& m, std::ifstream& file, const char* path) {
    for (size_t i : batch)
      if (!file.read(static_cast<char*>(const_cast<void*>(in[i])),
                     (std::streamsize)m.inputs()[i].nbytes))
        throw gptc::rt::Error(std::string(path) + " holds fewer batches than STEPS");
  }
  float run(gptc::rt::Model& m) {
    m.run(in, out);
    return *static_cast<float*>(out[loss]);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7 && argc != 9) {
    std::fprintf(stderr, "usage: train_step STEP_ARTIFACT BATCHES.bin STEPS SEED LR OUT "
                         "[MICRO_ARTIFACT N]\n");
    return 2;
  }
  try {
    std::unique_ptr<gptc::rt::Model> micro;
    const long n = argc == 9 ? std::strtol(argv[8], nullptr, 10) : 0;
    if (argc == 9) {
      if (n < 1) throw gptc::rt::Error(std::string("N must be at least 1, got ") + argv[8]);
      micro = gptc::rt::Model::load(argv[7]);
      micro->set_num_threads(0);
    }
    auto m = gptc::rt::Model::load(argv[1], micro.get());
    const long steps = std::strtol(argv[3], nullptr, 10);
    const int64_t seed = std::strtoll(argv[4], nullptr, 10);
    const double lr = std::strtod(argv[5], nullptr);
    m->set_num_threads(0);  // one per core: never changes a bit

    Feed feed(*m);
    if (!feed.lr || !feed.step) throw gptc::rt::Error(std::string(argv[1]) + " is not a training step");
    std::unique_ptr<Feed> micro_feed;
    if (micro) {
      micro_feed = std::make_unique<Feed>(*micro);
      if (!micro_feed->first || micro_feed->batch.empty() || !feed.batch.empty())
        throw gptc::rt::Error(std::string(argv[7]) + " and " + argv[1] + " are not an "
                              "accumulation's micro-batch program and update");
    }
    std::ifstream batches(argv[2], std::ios::binary);
    for (long step = 1; step <= steps; ++step) {
      float loss = 0.0f;
      if (micro) {
        for (long i = 0; i < n; ++i) {
          micro_feed->read_batch(*micro, batches, argv[2]);
          if (micro_feed->rng) micro_feed->rng[0] = seed, micro_feed->rng[1] = (step - 1) * n + i + 1;
          *micro_feed->first = i == 0;
          loss += micro_feed->run(*micro);
        }
        loss /= (float)n;
      } else {
        feed.read_batch(*m, batches, argv[2]);
      }
      if (feed.rng) feed.rng[0] = seed, feed.rng[1] = step;
      *feed.lr = lr;
      *feed.step = (double)step;
      const float step_loss = feed.run(*m);
      std::printf("%a\n", (double)(micro ? loss : step_loss));
    }
    if (!micro) {
      m->save_weights(argv[6]);
      return 0;
    }
    // The micro-batch program's tensors (the params and the sums), then the update's own.
    std::vector<gptc::rt::safetensors::TensorView> views;
    for (const gptc::rt::Model* model : {micro.get(), m.get()})
      for (size_t i = 0; i < model->params().size(); ++i) {
        const gptc::rt::TensorSpec& p = model->params()[i];
        if (model == m.get() && m->param_shared(i)) continue;
        views.push_back({p.name, gptc::rt::safetensors::from_manifest_dtype(p.dtype), p.shape,
                         model->param_data(p.name)});
      }
    gptc::rt::safetensors::write(argv[6], views, {{"format", "pt"}});
  } catch (const gptc::rt::Error& e) {
    std::fprintf(stderr, "train_step: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
