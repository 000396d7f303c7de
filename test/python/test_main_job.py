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


def test_main_job_names_characters_it_never_trains_on(tmp_path):
    """A character only the held-out tenth holds (here the last one) is never a training
    target: the main job says so, naming it, instead of leaving it to a loss curve."""
    corpus = tmp_path / "text.txt"
    corpus.write_text("abcab " * 300 + "\u00e9")
    proc = run_train(tmp_path / "out", "--data", str(corpus), "--iters", "2", "--n-layer", "1",
                     "--n-embd", "16", "--block-size", "8", "--batch", "2", "--threads", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "note: 1 of the 5 characters occur only in the held-out split, never in " \
           "training: '\u00e9'" in proc.stdout


def test_main_job_missing_data_file_is_one_line(tmp_path):
    proc = run_train(tmp_path, "--data", str(tmp_path / "nope.txt"))
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gptc: error:"), proc.stderr


def test_main_job_refuses_out_of_range_settings_and_unwritable_out(tmp_path):
    """Each of these trained without a word before (a beta of 2, a negative decay, a
    negative clip that meant no clipping, a negative warm-up), failed mid-run after the
    progress bar (a negative or NaN lr), or ended in a traceback (an --out that cannot be
    made): now one line and a non-zero exit before anything is trained."""
    for flag, value, said in (("--beta1", "2", "--beta1 must be in [0, 1)"),
                              ("--weight-decay", "-1", "--weight-decay must be a finite number >= 0"),
                              ("--grad-clip", "-1", "--grad-clip must be a finite number >= 0"),
                              ("--lr", "nan", "--lr must be a finite number >= 0"),
                              ("--warmup-iters", "-5", "--warmup-iters must not be negative"),
                              ("--temperature", "-1", "--temperature must be a finite number >= 0"),
                              # torch.set_num_threads(huge) crashed the process
                              ("--threads", "1025", "--threads must be at most 1024"),
                              # an OverflowError at the first step, after compiling
                              ("--seed", str(2**63), "--seed must be from -9223372036854775808 "
                                                     "to 9223372036854775807")):
        proc = run_train(tmp_path / "out", flag, value)
        assert proc.returncode == 2, (flag, proc.stderr[-2000:])
        assert proc.stderr.strip().splitlines()[-1] == f"train.py: error: {said}", proc.stderr
    (tmp_path / "file").write_text("")
    proc = run_train(tmp_path / "file" / "out")  # a folder inside a file
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        f"gptc: error: cannot create --out {tmp_path}/file/out: Not a directory"]
    assert not (tmp_path / "out").exists()


def test_main_job_resume_from_a_bad_meta_json_or_checkpoint_is_one_line(tmp_path):
    """A meta.json that is not JSON, or not an object, was a JSONDecodeError or
    AttributeError traceback; a checkpoint without a step was a KeyError traceback."""
    import numpy as np
    from safetensors.numpy import save_file
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    small = ("--data", str(text), "--n-layer", "1", "--n-embd", "16", "--block-size", "8",
             "--batch", "1")
    out = tmp_path / "out"
    out.mkdir()
    (out / "ckpt.safetensors").write_bytes(b"")  # never read: meta.json is checked first
    for content, said in (("{not json", f"cannot read {out}/meta.json: Expecting property name"),
                          ("[1, 2]", f"{out}/meta.json is not a JSON object")):
        (out / "meta.json").write_text(content)
        proc = run_train(out, *small, "--resume")
        assert proc.returncode == 1, proc.stderr[-2000:]
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"gptc: error: {said}"), proc.stderr
    ckpt = tmp_path / "ckpt" / "ckpt.safetensors"  # no meta.json beside it
    ckpt.parent.mkdir()
    save_file({"x": np.zeros(1, np.float32)}, str(ckpt),
              metadata={"format": "gptc-train-checkpoint", "seed": "1"})
    proc = run_train(tmp_path / "out2", *small, "--resume", str(ckpt))
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        f"gptc: error: {ckpt}: no 'step' in the checkpoint's metadata"], proc.stderr


def test_main_job_resume_refuses_a_corrupt_train_csv(tmp_path):
    """On --resume the earlier rows come from OUT/train.csv: one without an iter column,
    or with one that is not a number, was a KeyError or ValueError traceback."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "gptc_main_job", os.path.join(REPO, "examples", "train.py"))
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    path = tmp_path / "train.csv"
    head = "iter,lr,train_loss,val_loss\n"
    for content, said in (
            ("garbage\nx\n", "its header is 'garbage', expected 'iter,lr,train_loss,val_loss'"),
            ("", "its header is '', expected 'iter,lr,train_loss,val_loss'"),
            (head + "abc,1,2,3\n", "line 2: iter 'abc' is not a whole number"),
            (head + "1.5,1,2,3\n", "line 2: iter '1.5' is not a whole number"),
            (head + "1,1,x,3\n", "line 2: train_loss 'x' is not a number"),
            (head + "1,1,2,nan?\n", "line 2: val_loss 'nan?' is not a number"),
            # A short row came back with None for its missing fields, a long one with its
            # extra fields under the key None (the rewrite of the file then failed).
            (head + "0,1,2,3\n1,1,2\n", "line 3 has 3 fields, expected 4"),
            (head + "0,1,2,3,4\n", "line 2 has 5 fields, expected 4")):
        path.write_text(content)
        with pytest.raises(job.UsageError) as e:
            job.read_csv_rows(str(path), 5)
        assert str(e.value) == f"{path} is not this script's train.csv ({said})"
    path.write_text(head + "0,1,2,\n3,1,2,\n7,1,2,3\n")  # val_loss is empty between evals
    assert job.read_csv_rows(str(path), 5) == [
        dict(iter="0", lr="1", train_loss="2", val_loss=""),
        dict(iter="3", lr="1", train_loss="2", val_loss="")]


def test_forward_example_refuses_bad_sizes_with_one_line():
    """examples/forward.py: negative sizes and a huge seed were torch tracebacks, and
    --n-layer -1 ran as no layers."""
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    for flag, value, said in (("--batch", "-1", "--batch must be at least 1"),
                              ("--n-layer", "-1", "--n-layer must be at least 1"),
                              ("--n-head", "3", "--n-embd must be a multiple of --n-head"),
                              ("--seed", str(2**64), "--seed must be from")):
        proc = subprocess.run([sys.executable, os.path.join(REPO, "examples", "forward.py"),
                               flag, value], capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 2, (flag, proc.stderr[-2000:])
        assert proc.stderr.strip().splitlines()[-1].startswith(f"forward.py: error: {said}"), \
            proc.stderr
