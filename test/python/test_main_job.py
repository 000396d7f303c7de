"""The main job (examples/train.py) end to end, a few iterations on the default corpus."""
import csv
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_train(out, *extra):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    return subprocess.run([sys.executable, os.path.join(REPO, "examples", "train.py"),
                           "--out", str(out), "--iters", "6", "--eval-interval", "3",
                           "--eval-batches", "2", "--sample-chars", "40", *extra],
                          capture_output=True, text=True, env=env, timeout=600)


def test_main_job_trains_evaluates_plots_and_samples(tmp_path):
    if not os.path.isdir("/usr/share/games/fortunes"):
        pytest.skip("the default corpus needs the fortunes packages (scripts/setup.sh)")
    proc = run_train(tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(tmp_path / "train.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["iter"]) for r in rows] == list(range(6))
    assert all(float(r["train_loss"]) > 0 for r in rows)
    assert sum(1 for r in rows if r["val_loss"]) >= 2
    assert (tmp_path / "loss.png").stat().st_size > 1000
    assert (tmp_path / "ckpt.safetensors").exists()
    print("\n" + proc.stdout[-600:])


def test_main_job_missing_data_file_is_one_line(tmp_path):
    proc = run_train(tmp_path, "--data", str(tmp_path / "nope.txt"))
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gptc: error:"), proc.stderr
