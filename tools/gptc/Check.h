//===- Check.h - gptc check ------------------------------------------------===//
#ifndef GPTC_TOOLS_GPTC_CHECK_H
#define GPTC_TOOLS_GPTC_CHECK_H

#include <string>
#include <vector>

namespace gptc {

struct CheckOptions {
  std::string input, weights, inputs, runtimeInclude;
  bool gradcheck = false;
  double step = 1e-3, tolerance = 1e-6;
  unsigned seed = 0;
};

/// `gptc check`: returns the process exit code; errors are one line on stderr.
int runCheck(const CheckOptions &opts, const char *tool);

/// The gradient check's resolution: the largest error of its extrapolated central
/// differences from f64 rounding alone, for a loss of |`loss`| and a step of `step`.
double gradcheckResolution(double loss, double step);

/// A tensor's gradient check error: |analytic - numeric| beyond `resolution`, relative to
/// the larger of the two; 0 where they differ by no more than the differences resolve, NaN
/// where either is NaN.
double gradcheckError(double analytic, double numeric, double resolution);

/// `python -m MODULE ARGS` with gptc's package first on PYTHONPATH and this gptc for its
/// compiles: `gptc check --against-torch` (gptc.parity) and `gptc sample`
/// (gptc.apps.sample); returns its exit code. `what` names the command in an error;
/// `argv0` locates this binary's build folder.
int runPythonModule(const char *module, const char *what, const std::vector<std::string> &args,
                    const char *tool, const char *argv0);

} // namespace gptc

#endif
