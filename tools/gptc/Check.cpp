//===- Check.cpp - gptc check --gradcheck | --against-torch ---------------===//
//
// --gradcheck compiles the captured model's f64 twin with its gradients (gpt-promote-f64,
// gpt-autodiff), runs it through the runtime on the example inputs, and for
// every parameter tensor P compares the directional derivative <dL/dP, D>
// along a random unit direction D with central differences
// c(h) = (L(P + hD) - L(P - hD)) / 2h, Richardson-extrapolated: (4c(h/2) - c(h))/3.
// A tensor's error is its difference beyond what the differences resolve, relative to
// the larger of the two (gptc::gradcheckError; docs/design.md, "Checks"). Prints one line
// per tensor; fails when the worst error exceeds the tolerance.
//
// --against-torch needs PyTorch, so it runs Python: gptc's package (python/gptc/apps/parity.py)
// trains the model with this gptc and with eager PyTorch and prints the report.
//
//===----------------------------------------------------------------------===//
#include "tools/gptc/Check.h"

#include "codegen/Codegen.h"
#include "ir/Signature.h"
#include "passes/Passes.h"
#include "tools/support/ToolSupport.h"

#include "gptc/model.hpp"
#include "gptc/safetensors.hpp"

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <unistd.h>

using namespace mlir;

namespace {

std::string beside(const std::string &input, StringRef suffix) {
  llvm::SmallString<256> path(input);
  llvm::sys::path::replace_extension(path, "");
  return (path + suffix).str();
}

int gradcheck(const gptc::CheckOptions &opts, const char *tool) {
  DialectRegistry registry;
  gptc::registerDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  auto diagnostics = gptc::installOneLineDiagnostics(ctx, tool);
  gpt::PipelineOptions pipeline;
  pipeline.mode = gpt::PipelineOptions::Mode::Gradients;
  pipeline.promoteF64 = true;
  OwningOpRef<ModuleOp> module;
  func::FuncOp fn = gptc::lowerModule(ctx, module, opts.input, pipeline, tool);
  if (!fn)
    return 1;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (auto name = gpt::argName(fn, i); name && name == "rng")
      return gptc::fail(tool, "gradcheck needs a deterministic model: capture it with dropout 0");
  auto source = gpt::emitSource(fn, gpt::Target::Cpu);
  if (failed(source))
    return 1;

  std::string weights = opts.weights.empty() ? beside(opts.input, ".safetensors") : opts.weights;
  std::string inputs = opts.inputs.empty() ? beside(opts.input, ".inputs.safetensors") : opts.inputs;
  for (const std::string &f : {weights, inputs})
    if (!llvm::sys::fs::exists(f))
      return gptc::fail(tool, "'" + f + "' does not exist (gptc.capture_save writes it)");
  llvm::SmallString<128> dir;
  if (auto ec = llvm::sys::fs::createUniqueDirectory("gptc-gradcheck", dir))
    return gptc::fail(tool, "cannot create a temporary folder: " + ec.message());
  // The artifact is this check's own: gone however the check ends.
  llvm::scope_exit removeDir([&] { llvm::sys::fs::remove_directories(dir); });
  // Messages name the user's weights file, not the artifact's copy of it.
  const std::string copied = (dir + "/weights.safetensors").str();
  auto userPaths = [&](const std::string &message) {
    return gptc::replaceAll(message, copied, weights);
  };
  std::string error;
  if (failed(gpt::writeArtifact(fn, *source, dir, weights, opts.runtimeInclude, error)))
    return gptc::fail(tool, userPaths(error));

  try {
    auto model = gptc::rt::Model::load(dir.str().str());
    // Example inputs by name, as the capture saved them.
    gptc::rt::safetensors::Reader reader(inputs);
    std::vector<std::vector<char>> inputData;
    std::vector<const void *> inputPtrs;
    for (const auto &spec : model->inputs()) {
      const auto *t = reader.find(spec.name);
      if (!t)
        throw gptc::rt::Error(inputs + ": no tensor '" + spec.name + "'");
      // The check runs in f64; a capture in f32 saved its float inputs in f32, which
      // widen exactly (they were an error before).
      const bool widen = spec.dtype == "f64" && t->dtype == "F32" && t->shape == spec.shape;
      if (!widen && (t->shape != spec.shape ||
                     gptc::rt::safetensors::to_manifest_dtype(t->dtype) != spec.dtype))
        throw gptc::rt::Error(inputs + ": tensor '" + spec.name + "' is " + t->dtype + " " +
                              gptc::rt::shape_str(t->shape) + ", the model takes " + spec.dtype + " " +
                              gptc::rt::shape_str(spec.shape));
      std::vector<char> bytes(t->nbytes());
      reader.read(*t, bytes.data());
      if (widen) {
        std::vector<char> wide(spec.nbytes);
        for (int64_t k = 0; k < spec.numel; ++k) {
          float f;
          std::memcpy(&f, bytes.data() + 4 * k, 4);
          const double d = f;
          std::memcpy(wide.data() + 8 * k, &d, 8);
        }
        bytes.swap(wide);
      }
      inputData.push_back(std::move(bytes));
      inputPtrs.push_back(inputData.back().data());
    }
    const auto &results = model->results();
    std::vector<std::vector<char>> out(results.size());
    std::vector<void *> outPtrs;
    for (size_t j = 0; j < results.size(); ++j) {
      out[j].resize(results[j].nbytes);
      outPtrs.push_back(out[j].data());
    }
    size_t lossIndex = results.size();
    for (size_t j = 0; j < results.size(); ++j)
      if (results[j].shape.empty() && results[j].name.rfind("grad.", 0) != 0)
        lossIndex = j;
    if (lossIndex == results.size())
      throw gptc::rt::Error("the model has no scalar loss result");
    auto loss = [&] {
      model->run(inputPtrs, outPtrs);
      return *reinterpret_cast<const double *>(out[lossIndex].data());
    };
    const double loss0 = loss();
    const double resolution = gptc::gradcheckResolution(loss0, opts.step);
    std::map<std::string, std::vector<double>> grads;
    for (size_t j = 0; j < results.size(); ++j)
      if (results[j].name.rfind("grad.", 0) == 0) {
        const double *g = reinterpret_cast<const double *>(out[j].data());
        grads[results[j].name.substr(5)].assign(g, g + results[j].numel);
      }

    std::mt19937_64 rng(opts.seed);
    std::normal_distribution<double> normal;
    double worst = 0;
    std::string worstName;
    for (const auto &p : model->params()) {
      auto it = grads.find(p.name);
      if (it == grads.end())
        continue;
      double *data = static_cast<double *>(model->param_data(p.name));
      std::vector<double> saved(data, data + p.numel), dir(p.numel);
      double norm = 0;
      for (double &d : dir) {
        d = normal(rng);
        norm += d * d;
      }
      double analytic = 0;
      for (int64_t k = 0; k < p.numel; ++k) {
        dir[k] /= std::sqrt(norm);
        analytic += it->second[k] * dir[k];
      }
      auto central = [&](double h) {
        for (int64_t k = 0; k < p.numel; ++k)
          data[k] = saved[k] + h * dir[k];
        double plus = loss();
        for (int64_t k = 0; k < p.numel; ++k)
          data[k] = saved[k] - h * dir[k];
        double minus = loss();
        std::copy(saved.begin(), saved.end(), data);
        return (plus - minus) / (2 * h);
      };
      // Richardson extrapolation of two central differences: error O(h^4).
      double numeric = (4 * central(opts.step / 2) - central(opts.step)) / 3;
      double err = gptc::gradcheckError(analytic, numeric, resolution);
      llvm::outs() << llvm::format(
          "gradcheck %-42s analytic %+.12e numeric %+.12e diff %.1e rel %.2e\n", p.name.c_str(),
          analytic, numeric, std::abs(analytic - numeric), err);
      // A NaN error (a NaN gradient, say) is the worst there is and stays it: compared
      // with >, it was never the worst after a finite one, and a first one hid the rest.
      if (worstName.empty() || std::isnan(err) || (!std::isnan(worst) && err > worst)) {
        worst = err;
        worstName = p.name;
      }
    }
    llvm::outs() << llvm::format(
        "worst relative error %.2e (%s), tolerance %.1e, differences under %.1e not counted\n",
        worst, worstName.c_str(), opts.tolerance, resolution);
    if (!(worst <= opts.tolerance))  // NaN fails
      return gptc::fail(tool, "gradcheck failed: " + worstName + " off by " + std::to_string(worst));
    return 0;
  } catch (const gptc::rt::Error &e) {
    return gptc::fail(tool, userPaths(e.what()));
  }
}

} // namespace

double gptc::gradcheckResolution(double loss, double step) {
  // Each f64 loss evaluation is taken to be within 16 ulps of |L| (a mean of per-token
  // losses through canonical reductions is within a few). With that error e, c(h/2) is
  // off by up to 2e/h and c(h) by e/h, so (4 c(h/2) - c(h)) / 3 by 3e/h.
  return 3 * 16 * std::numeric_limits<double>::epsilon() * std::abs(loss) / step;
}

double gptc::gradcheckError(double analytic, double numeric, double resolution) {
  const double diff = std::abs(analytic - numeric);
  if (std::isnan(diff))
    return diff;
  return std::max(diff - resolution, 0.0) /
         std::max({std::abs(analytic), std::abs(numeric), 1e-300});
}

int gptc::runCheck(const CheckOptions &opts, const char *tool) {
  return gradcheck(opts, tool);
}

int gptc::runPythonModule(const char *module, const char *what,
                          const std::vector<std::string> &args, const char *tool,
                          const char *argv0) {
  // The interpreter: $GPTC_PYTHON, else the one the build was configured with (setup.sh
  // installs torch into it).
  const char *envPython = std::getenv("GPTC_PYTHON");
  std::string python = envPython && *envPython ? envPython : GPTC_PYTHON_EXECUTABLE;
  auto program = llvm::sys::findProgramByName(python);  // a path is taken as it is
  if (!program || !llvm::sys::fs::can_execute(*program))
    return fail(tool, std::string(what) + " runs Python with PyTorch, and '" + python +
                          "' was not found (set GPTC_PYTHON)");
  // gptc's package first on PYTHONPATH (unless this gptc was installed inside the package
  // by pip); and the package compiles with this gptc unless GPTC_BUILD_DIR says otherwise
  // (this binary is <build>/bin/gptc).
  std::vector<std::string> env;
  std::string pythonPath = GPTC_PYTHON_DIR;
  bool buildDirSet = false;
  for (char **e = environ; *e; ++e) {
    llvm::StringRef kv(*e);
    if (kv.consume_front("PYTHONPATH=")) {
      if (!kv.empty())
        pythonPath += (pythonPath.empty() ? "" : ":") + kv.str();
      continue;
    }
    buildDirSet |= kv.starts_with("GPTC_BUILD_DIR=");
    env.push_back(*e);
  }
  if (!pythonPath.empty())
    env.push_back("PYTHONPATH=" + pythonPath);
  if (!buildDirSet) {
    std::string exe = llvm::sys::fs::getMainExecutable(argv0, (void *)&gptc::runPythonModule);
    if (!exe.empty())
      env.push_back("GPTC_BUILD_DIR=" +
                    llvm::sys::path::parent_path(llvm::sys::path::parent_path(exe)).str());
  }
  std::vector<llvm::StringRef> argv = {python, "-m", module};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<llvm::StringRef> envRefs(env.begin(), env.end());
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(*program, argv, envRefs, {}, 0, 0, &error);
  if (rc < 0)
    return fail(tool, "running " + *program + " failed" + (error.empty() ? "" : ": " + error));
  return rc;
}
