"""gptc.gradcheck: the compiler's gradients against central differences, in f64.

The model is compiled in f64 with `--grad` (the loss and one gradient per parameter).
For each parameter tensor P with gradient G, a random unit direction D gives the
directional derivative <G, D>, compared with central differences
c(h) = (L(P + hD) - L(P - hD)) / 2h of the same compiled f64 forward, Richardson-
extrapolated as (4 c(h/2) - c(h)) / 3 (error O(h^4)). Each tensor's error is
|analytic - numeric| beyond the differences' resolution (what f64 rounding of the loss
alone can give them), relative to max(|analytic|, |numeric|): `gptc check --gradcheck`'s
gradcheckError (tools/gptc/Check.cpp).
"""
from __future__ import annotations

import copy
import math

import numpy as np
import torch

from .compiler import CompiledModel, capture_and_compile, check_int, draws_dropout
from .errors import GptcError
from .train import _has_loss


def resolution(loss: float, step: float) -> float:
    """The extrapolated differences' largest error from f64 rounding alone: each loss
    within 16 ulps of |loss|, three such errors over the step (gradcheckResolution)."""
    return 3 * 16 * np.finfo(np.float64).eps * abs(loss) / step


def relative_error(analytic: float, numeric: float, resolution: float) -> float:
    """|analytic - numeric| beyond `resolution`, relative to the larger of the two; 0
    where they differ by no more than that, NaN where either is NaN (gradcheckError)."""
    diff = abs(analytic - numeric)
    if math.isnan(diff) or math.isnan(resolution):
        return math.nan
    return max(diff - resolution, 0.0) / max(abs(analytic), abs(numeric), 1e-300)


def gradcheck(model: torch.nn.Module, example_inputs, *, step: float = 1e-3, seed: int = 0,
              workdir: str | None = None, verbose: bool = True) -> dict:
    """Return {parameter name: relative error beyond the differences' resolution}; prints
    one line per tensor. An error is NaN where a gradient or the loss is not finite:
    compare with `not err <= tol`."""
    if not (math.isfinite(step) and step > 0):  # 0 made every difference NaN
        raise GptcError(f"step must be a finite number > 0, got {step}")
    seed = check_int("seed", seed, 0, 2**63 - 1)  # numpy's message named no argument
    model64 = copy.deepcopy(model).double()
    compiled = CompiledModel(*capture_and_compile(model64, example_inputs, workdir,
                                                  "gptc-gradcheck-", "--grad",
                                                  check=_has_loss))
    # The compiler adds the masks' seed as an input; the capture does not show it.
    if draws_dropout(compiled):
        raise GptcError("gradcheck needs a deterministic model: call model.eval() or set "
                        "dropout to 0")
    captured = compiled.captured
    rt = compiled.runtime
    feeds = [compiled.input_array(a.name, captured.example_inputs[a.name])
             for a in compiled.inputs]
    names = [r[0] for r in rt.results]

    def run():
        try:
            return dict(zip(names, rt.run(feeds)))
        except (RuntimeError, ValueError) as e:  # e.g. a target out of range
            raise GptcError(str(e)) from None

    out = run()
    loss_name = next(n for n in names if not n.startswith("grad.") and np.ndim(out[n]) == 0)
    floor = resolution(float(out[loss_name]), step)
    rng = np.random.default_rng(seed)
    report = {}
    for a in captured.args:
        if not a.trainable:  # inputs, buffers, frozen parameters
            continue
        grad = np.asarray(out["grad." + a.name], dtype=np.float64)
        p0 = rt.param(a.name).astype(np.float64)
        d = rng.standard_normal(p0.shape)
        d /= np.linalg.norm(d)
        def central(h):
            rt.set_param(a.name, p0 + h * d)
            plus = float(run()[loss_name])
            rt.set_param(a.name, p0 - h * d)
            minus = float(run()[loss_name])
            rt.set_param(a.name, p0)
            return (plus - minus) / (2 * h)

        numeric = (4 * central(step / 2) - central(step)) / 3
        analytic = float(np.sum(grad * d))
        err = relative_error(analytic, numeric, floor)
        report[a.name] = err
        if verbose:
            print(f"gradcheck {a.name:42s} analytic {analytic:+.12e} numeric {numeric:+.12e} "
                  f"diff {abs(analytic - numeric):.1e} rel {err:.2e}")
    if verbose:
        print(f"differences under {floor:.1e} (the central differences' resolution) not counted")
    return report
