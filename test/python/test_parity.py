"""gptc check --against-torch: the parity report, run as a user runs it (the gptc CLI, which
runs python -m gptc.parity), on gptc's test GPT and on model files written here."""
import os
import re
import subprocess
import textwrap

import pytest

import gptc
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig

ROW = re.compile(r"^\s*(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$")


def check(*args, cwd=None):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the CLI sets it
    return subprocess.run([gptc.find_tool("gptc"), "check", "--against-torch", *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


def rows(stdout):
    """(step, gptc loss, torch loss, loss rel diff, worst param diff, tensor) per step."""
    out = []
    for line in stdout.splitlines():
        m = ROW.match(line)
        if m and m.group(1).isdigit():
            n, a, b, rel, worst, name = m.groups()
            out.append((int(n), float(a), float(b), float(rel), float(worst), name))
    return out


def one_error_line(proc):
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("gptc: "), proc.stderr
    return lines[0]


def write_model(tmp_path, body):
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_test_gpt_agrees_with_pytorch_step_by_step(tmp_path):
    proc = check("--steps", 4, "--config", "bias=false", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    table = rows(proc.stdout)
    assert [r[0] for r in table] == [1, 2, 3, 4], proc.stdout
    names = set()
    for n, loss, ref, rel, worst, name in table:
        assert 3.5 < ref < 5.0  # ln(65) = 4.17: an untrained model's loss
        # The printed relative difference is the printed losses' (to their 7 decimals).
        assert rel == pytest.approx(abs(loss - ref) / ref, abs=3e-8)
        assert rel <= 1e-5 and 0 < worst <= 1e-4
        names.add(name)
    model = TinyGPT(TinyGPTConfig(bias=False))
    assert names <= {n for n, _ in model.named_parameters()}, names
    assert "bias=False" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("parity: within 1e-05")


def test_a_model_that_changes_after_capture_fails_the_report(tmp_path):
    # Eager PyTorch runs the Python each step; the capture froze it at the first call. A
    # model whose loss depends on a Python counter trains differently from step 2 on, the
    # silent divergence the report exists to catch.
    model = write_model(tmp_path, """
        from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig as GPTConfig


        class GPT(TinyGPT):
            calls = 0

            def forward(self, idx, targets=None):
                GPT.calls += 1
                logits, loss = super().forward(idx, targets)
                return logits, loss * (1.0 if GPT.calls == 1 else 1.01)
        """)
    proc = check(model, "--steps", 2)
    line = one_error_line(proc)
    assert line.startswith("gptc: error: parity failed: step 2's loss is"), line
    table = rows(proc.stdout)
    assert table[0][3] <= 1e-5 and table[1][3] == pytest.approx(0.01 / 1.01, rel=1e-3)


def test_a_parameter_tolerance_of_zero_fails_and_names_the_tensor(tmp_path):
    proc = check("--steps", 1, "--param-tolerance", 0, cwd=tmp_path)
    line = one_error_line(proc)
    worst = rows(proc.stdout)[0]
    assert line == (f"gptc: error: parity failed: after step 1, {worst[5]} is "
                    f"{worst[4]:.2e} from PyTorch's (tolerance 0)")


def test_an_unsupported_op_names_the_op_and_the_model_line(tmp_path):
    model = write_model(tmp_path, """
        import torch
        from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig as GPTConfig


        class GPT(TinyGPT):
            def forward(self, idx, targets=None):
                logits, loss = super().forward(idx, targets)
                return logits, loss + torch.flip(logits, dims=[-1]).mean() * 0
        """)
    line = one_error_line(check(model, "--steps", 1))
    assert line.startswith(f"gptc: {model}:9:") and "aten.flip" in line, line


@pytest.mark.parametrize("args, message", [
    (["{tmp}/absent.py"], "model file not found: {tmp}/absent.py"),
    (["{tmp}/model.py"], "{tmp}/model.py does not define GPT"),
    (["{tmp}/syntax.py"], "cannot load {tmp}/syntax.py: invalid syntax (line 1)"),
    (["--config", "n_layers=2"], "TinyGPTConfig has no field 'n_layers'"),
    (["--config", "bias=maybe"], "--config bias: 'maybe' is not a boolean"),
    (["--config", "dropout=0.1"], "the parity report needs dropout 0"),
    (["--steps", "0"], "--steps must be at least 1"),
    (["--steps", "x"], "argument --steps: invalid int value: 'x'"),
    # A model file that calls sys.exit(0) passed, having checked nothing.
    (["{tmp}/exits.py"], "cannot load {tmp}/exits.py: it exited while loading (SystemExit: 0)"),
    # Loaded whatever its suffix (an AttributeError on 'NoneType' before).
    (["{tmp}/model.txt"], "{tmp}/model.txt does not define GPT"),
    # Refused before torch is touched: torch.set_num_threads(huge) crashed the process.
    (["--threads", "1025"], "--threads must be at most 1024"),
    # A NaN or negative tolerance failed every step, an infinite one passed everything.
    (["--loss-tolerance", "nan"], "--loss-tolerance must be a finite number >= 0"),
    (["--param-tolerance", "-1"], "--param-tolerance must be a finite number >= 0"),
    (["--param-tolerance", "inf"], "--param-tolerance must be a finite number >= 0"),
    # These failed mid-run, or trained without a word.
    (["--min-lr", "nan"], "--min-lr must be a finite number >= 0"),
    (["--min-lr", "-1"], "--min-lr must be a finite number >= 0"),
    (["--warmup", "-3"], "--warmup must not be negative"),
    (["--beta2", "1"], "--beta2 must be in [0, 1)"),
    (["--seed", str(2**64)], "--seed must be from -9223372036854775808 to 18446744073709551614"),
])
def test_bad_input_is_one_line(tmp_path, args, message):
    (tmp_path / "model.py").write_text("class GPTConfig:\n    pass\n")
    (tmp_path / "model.txt").write_text("class GPTConfig:\n    pass\n")
    (tmp_path / "syntax.py").write_text("def f(:\n")
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(0)\n")
    line = one_error_line(check(*[a.format(tmp=tmp_path) for a in args]))
    assert message.format(tmp=tmp_path) in line, line


def test_both_checks_at_once_is_an_error():
    proc = subprocess.run([gptc.find_tool("gptc"), "check", "--gradcheck", "m.mlir",
                           "--against-torch"], capture_output=True, text=True)
    assert "run one at a time" in one_error_line(proc)


def test_report_and_verdict_refuse_no_batches():
    """An IndexError and a ValueError from max() before; no steps is no parity."""
    from gptc.parity import report, verdict
    with pytest.raises(gptc.GptcError, match="report needs at least one"):
        report(TinyGPT(TinyGPTConfig()), [])
    with pytest.raises(gptc.GptcError, match="verdict needs at least one"):
        verdict([], 1e-5, 1e-4)
