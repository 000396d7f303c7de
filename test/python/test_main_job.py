"""The main job (examples/train.py) end to end, a few iterations on the default corpus."""
import csv
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# A small model, so that a test compiles in seconds (the default is nanoGPT's CPU recipe).
SMALL = ("--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "16",
         "--batch", "4", "--threads", "2")
ENV = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), PYTHONUNBUFFERED="1")


def run_train(out, *extra, config=()):
    return subprocess.run([sys.executable, os.path.join(REPO, "examples", "train.py"),
                           *config, "--out", str(out), "--iters", "6", "--eval-interval", "3",
                           "--eval-batches", "2", "--sample-chars", "40", *SMALL, *extra],
                          capture_output=True, text=True, env=ENV, timeout=600)


def run_sample(run, *extra):
    return subprocess.run([sys.executable, os.path.join(REPO, "examples", "sample.py"),
                           str(run), *extra], capture_output=True, text=True, env=ENV,
                          timeout=600)


def load_job():
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "gptc_main_job", os.path.join(REPO, "examples", "train.py"))
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    return job


needs_fortunes = pytest.mark.skipif(
    not os.path.isdir("/usr/share/games/fortunes"),
    reason="the default corpus needs the fortunes packages (scripts/setup.sh)")


@needs_fortunes
def test_main_job_trains_evaluates_plots_and_samples(tmp_path):
    proc = run_train(tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(tmp_path / "train.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["iter"]) for r in rows] == list(range(6))
    assert all(float(r["train_loss"]) > 0 for r in rows)
    evals = [r for r in rows if r["val_loss"]]
    assert [int(r["iter"]) for r in evals] == [2, 5]
    # The untrained twin: the initial weights' loss on the same batches, at every evaluation.
    with open(tmp_path / "eval.csv") as f:
        evals = list(csv.DictReader(f))
    val = [r for r in evals if r["split"] == "val"]
    assert [int(r["iter"]) for r in val] == [0, 3, 6]
    assert val[0]["loss"] == val[0]["twin_loss"]
    assert len({r["twin_loss"] for r in val}) == 1
    assert float(val[-1]["loss"]) < float(val[-1]["twin_loss"])
    assert rows[-1]["twin_val_loss"] == val[0]["twin_loss"]
    assert f"(untrained twin {float(val[0]['twin_loss']):.4f})" in proc.stdout
    assert (tmp_path / "loss.png").stat().st_size > 1000
    assert (tmp_path / "ckpt.safetensors").exists()
    print("\n" + proc.stdout[-600:])


def test_main_job_names_characters_it_never_trains_on(tmp_path):
    """A character only the held-out tenth holds (here the last one) is never a training
    target: the main job says so, naming it, instead of leaving it to a loss curve."""
    corpus = tmp_path / "text.txt"
    corpus.write_text("abcab " * 300 + "\u00e9")
    proc = run_train(tmp_path / "out", "--data", str(corpus), "--iters", "2", "--n-layer", "1",
                     "--n-embd", "16", "--block-size", "8", "--batch", "2", "--threads", "1",
                     "--prompt", "a")
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
    job = load_job()
    path = tmp_path / "train.csv"
    fields = "iter,lr,train_loss,val_loss,twin_val_loss"
    head = fields + "\n"
    for content, said in (
            ("garbage\nx\n", f"its header is 'garbage', expected '{fields}'"),
            ("", f"its header is '', expected '{fields}'"),
            (head + "abc,1,2,3,4\n", "line 2: iter 'abc' is not a whole number"),
            (head + "1.5,1,2,3,4\n", "line 2: iter '1.5' is not a whole number"),
            (head + "1,1,x,3,4\n", "line 2: train_loss 'x' is not a number"),
            (head + "1,1,2,nan?,4\n", "line 2: val_loss 'nan?' is not a number"),
            # A short row came back with None for its missing fields, a long one with its
            # extra fields under the key None (the rewrite of the file then failed).
            (head + "0,1,2,3,4\n1,1,2\n", "line 3 has 3 fields, expected 5"),
            (head + "0,1,2,3,4,5\n", "line 2 has 6 fields, expected 5")):
        path.write_text(content)
        with pytest.raises(job.UsageError) as e:
            job.read_csv_rows(str(path), 5)
        assert str(e.value) == f"{path} is not this script's train.csv ({said})"
    path.write_text(head + "0,1,2,,\n3,1,2,,\n7,1,2,3,4\n")  # empty between evals
    assert job.read_csv_rows(str(path), 5) == [
        dict(iter="0", lr="1", train_loss="2", val_loss="", twin_val_loss=""),
        dict(iter="3", lr="1", train_loss="2", val_loss="", twin_val_loss="")]


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


# -- nanoGPT-style configuration ----------------------------------------------------------

def test_config_files_and_overrides_as_nanogpt(tmp_path):
    """A nanoGPT config file (its own key names, wandb and device keys included) sets the
    defaults; --key=value overrides it, in either spelling; an unknown key, a value of the
    wrong type or a broken file is one line before anything runs."""
    job = load_job()
    cfg = tmp_path / "train_shakespeare_char.py"
    cfg.write_text("out_dir = 'out-shakespeare-char'\neval_interval = 250\neval_iters = 20\n"
                   "log_interval = 10\nalways_save_checkpoint = False\nwandb_log = False\n"
                   "wandb_project = 'shakespeare-char'\ndataset = 'shakespeare_char'\n"
                   "gradient_accumulation_steps = 1\nbatch_size = 64\nblock_size = 256\n"
                   "n_layer = 6\nn_head = 6\nn_embd = 384\ndropout = 0.2\n"
                   "learning_rate = 1e-3\nmax_iters = 5000\nlr_decay_iters = 5000\n"
                   "min_lr = 1e-4\nbeta2 = 0.99\nwarmup_iters = 100\n# device = 'cpu'\n")
    args = job.parse_args([str(cfg), "--n_layer=2", "--block-size", "64", "--max_iters=300"])
    assert (args.out, args.eval_interval, args.eval_batches, args.batch) == \
        ("out-shakespeare-char", 250, 20, 64)
    assert (args.n_layer, args.n_head, args.n_embd, args.block_size, args.dropout) == \
        (2, 6, 384, 64, 0.2)
    assert (args.iters, args.lr_decay_iters, args.lr, args.warmup_iters) == (300, 5000, 1e-3, 100)
    assert "note: wandb_log = False is ignored (no wandb logging)" in args.notes
    assert any(n.startswith("note: dataset 'shakespeare_char' has no data/shakespeare_char/")
               for n in args.notes)
    # nanoGPT's layout: config/ beside data/DATASET/input.txt
    (tmp_path / "config").mkdir()
    (tmp_path / "data" / "tiny").mkdir(parents=True)
    (tmp_path / "data" / "tiny" / "input.txt").write_text("hello world\n" * 50)
    (tmp_path / "config" / "c.py").write_text("dataset = 'tiny'\nbias = True\n")
    args = job.parse_args([str(tmp_path / "config" / "c.py")])
    assert args.data == str(tmp_path / "data" / "tiny" / "input.txt") and args.bias is True
    assert job.parse_args(["--bias=false"]).bias is False

    for content, said in (("n_layers = 2\n", "unknown config key 'n_layers'"),
                          ("n_layer = '2'\n", "n_layer = '2' must be an int"),
                          ("dropout = 'high'\n", "dropout = 'high' must be a number"),
                          ("bias = 1\n", "bias = 1 must be True or False"),
                          ("n_layer = = 2\n", "c.py:1: invalid syntax"),
                          ("import missing_module_xyz\n", "ModuleNotFoundError")):
        (tmp_path / "c.py").write_text(content)
        proc = run_train(tmp_path / "out", config=[str(tmp_path / "c.py")])
        assert proc.returncode == 2, (content, proc.stderr[-2000:])
        assert said in proc.stderr.strip().splitlines()[-1], (content, proc.stderr)
    proc = run_train(tmp_path / "out", "--n_layers=2")
    assert proc.returncode == 2 and "unrecognized arguments: --n_layers=2" in proc.stderr
    proc = run_train(tmp_path / "out", config=[str(tmp_path / "absent.py")])
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == \
        f"train.py: error: config file not found: {tmp_path / 'absent.py'}"
    proc = run_train(tmp_path / "out", "--gradient_accumulation_steps=0")
    assert proc.returncode == 2 and "--gradient-accumulation-steps must be at least 1" in \
        proc.stderr


def test_shipped_config_files_are_the_recipe_and_nanogpts():
    """examples/config/cpu_recipe.py spells out the defaults exactly; the shakespeare_char
    file (nanoGPT's keys and values) parses with its ignored keys noted."""
    job = load_job()
    config = os.path.join(REPO, "examples", "config")
    assert vars(job.parse_args([os.path.join(config, "cpu_recipe.py")])) == \
        vars(job.parse_args([]))
    args = job.parse_args([os.path.join(config, "train_shakespeare_char.py"), "--max_iters=500"])
    assert (args.n_layer, args.n_embd, args.block_size, args.batch, args.iters,
            args.lr_decay_iters, args.dropout) == (6, 384, 256, 64, 500, 5000, 0.2)
    assert "note: wandb_log = False is ignored (no wandb logging)" in args.notes


# -- your own model.py ------------------------------------------------------------------------

NANOGPT_STYLE = '''
from dataclasses import asdict, dataclass
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig

@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True

class GPT(TinyGPT):
    def __init__(self, config):
        super().__init__(TinyGPTConfig(**asdict(config)))
'''


def test_model_file_trains_and_samples(tmp_path):
    """--model: a nanoGPT-style file's GPT is built from the job's settings, trained and
    sampled from; the run's meta.json names it so that sample.py rebuilds it."""
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog.\n" * 60)
    model = tmp_path / "model.py"
    model.write_text(NANOGPT_STYLE)
    proc = run_train(tmp_path / "out", "--model", str(model), "--data", str(text))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"model: {model}, 1 layers" in proc.stdout
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["model"] == str(model)
    sample = run_sample(tmp_path / "out", "--length", "20", "--prompt", "the ")
    assert sample.returncode == 0, sample.stderr[-2000:]
    assert sample.stdout.startswith("the ") and len(sample.stdout) == len("the ") + 20 + 1

    for content, said in (
            ("class GPTConfig:\n    pass\n", f"{model} does not define GPT"),
            (NANOGPT_STYLE + "    def forward(self, idx, targets=None):\n"
                             "        return super().forward(idx, targets)[0]\n",
             "GPT(idx, targets) must return (logits, loss) with a scalar loss, as nanoGPT's; "
             "it returned a Tensor"),
            ("raise RuntimeError('broken')\n", "cannot load"),
            (NANOGPT_STYLE.replace("bias: bool = True", ""),
             "GPTConfig(...) failed: TypeError")):
        model.write_text(content)
        proc = run_train(tmp_path / "out2", "--model", str(model), "--data", str(text))
        assert proc.returncode == 1, (said, proc.stderr[-2000:])
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gptc: error: ") and said in lines[0], \
            (said, proc.stderr)


# -- Ctrl-C, resume, sampling ----------------------------------------------------------------

def assert_same_runs(a, b):
    """Two runs' checkpoints are equal bit for bit, and so are their CSVs."""
    from safetensors.numpy import load_file
    ca, cb = load_file(str(a / "ckpt.safetensors")), load_file(str(b / "ckpt.safetensors"))
    assert ca.keys() == cb.keys() and len(ca) > 10
    for name in ca:
        assert ca[name].tobytes() == cb[name].tobytes(), name
    for name in ("train.csv", "eval.csv"):
        assert (a / name).read_text() == (b / name).read_text(), name


def test_sigint_keeps_a_checkpoint_and_resume_is_bitwise(tmp_path):
    """Ctrl-C stops after the current step and saves it; --resume from there gives, bit
    for bit, the parameters, moments, losses and evaluations of an uninterrupted run."""
    import signal
    from safetensors.numpy import load_file
    text = tmp_path / "text.txt"
    text.write_text("".join(f"line {i}: the {i % 7} quick foxes.\n" for i in range(400)))
    common = [*SMALL, "--data", str(text), "--eval-interval", "20", "--eval-batches", "2",
              "--sample-chars", "0", "--lr-decay-iters", "400", "--dropout", "0.1"]
    cmd = [sys.executable, os.path.join(REPO, "examples", "train.py"), *common]
    proc = subprocess.Popen(cmd + ["--out", str(tmp_path / "a"), "--iters", "100000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    for line in proc.stdout:
        if line.startswith("after 40 steps"):
            proc.send_signal(signal.SIGINT)
            break
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-2000:]
    stopped = load_file(str(tmp_path / "a" / "ckpt.safetensors"))
    from safetensors import safe_open
    with safe_open(str(tmp_path / "a" / "ckpt.safetensors"), "numpy") as f:
        k = int(f.metadata()["step"])
    assert 40 <= k < 100000 and stopped
    assert err.strip().splitlines()[-1] == (
        f"interrupted: saved iteration {k} to {tmp_path / 'a' / 'ckpt.safetensors'}; "
        "continue with --resume")
    n = k + 25
    resumed = subprocess.run(cmd + ["--out", str(tmp_path / "a"), "--iters", str(n), "--resume"],
                             capture_output=True, text=True, env=ENV, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resumed from {tmp_path / 'a' / 'ckpt.safetensors'} at iteration {k}" in resumed.stdout
    whole = subprocess.run(cmd + ["--out", str(tmp_path / "b"), "--iters", str(n)],
                           capture_output=True, text=True, env=ENV, timeout=300)
    assert whole.returncode == 0, whole.stderr[-2000:]
    assert_same_runs(tmp_path / "a", tmp_path / "b")


def test_gradient_accumulation_trains_and_resumes_bitwise_on_either_device(tmp_path):
    """--gradient-accumulation-steps 2 (nanoGPT's): each iteration takes two batches in
    turn (the train.csv counts iterations) and the run learns. --device cuda-emulated (the
    GPU's kernels and device layer, on the CPU) ends with the CPU run's checkpoint, losses
    and evaluations bit for bit, and so does a run stopped on the GPU after 2 iterations
    and resumed on the CPU to 4. A device gptc has no kernels for is one line."""
    text = tmp_path / "text.txt"
    text.write_text("".join(f"line {i}: the {i % 7} quick foxes.\n" for i in range(400)))
    cmd = [sys.executable, os.path.join(REPO, "examples", "train.py"), *SMALL, "--data",
           str(text), "--eval-interval", "2", "--eval-batches", "2", "--sample-chars", "0",
           "--gradient-accumulation-steps", "2", "--dropout", "0.1"]
    run = lambda out, *extra: subprocess.run(  # noqa: E731
        cmd + ["--out", str(tmp_path / out), *extra], capture_output=True, text=True, env=ENV,
        timeout=600)
    said = {}
    for out, extra in (("cpu", ["--iters", "4"]),
                       ("gpu", ["--iters", "4", "--device", "cuda-emulated"]),
                       ("moved", ["--iters", "2", "--device", "cuda-emulated"]),
                       ("moved", ["--iters", "4", "--resume"])):
        proc = run(out, *extra)
        assert proc.returncode == 0, proc.stderr[-2000:]
        said.setdefault(out, proc.stdout)
    assert "device cuda-emulated" in said["gpu"] and "2 threads" in said["cpu"]
    with open(tmp_path / "cpu" / "train.csv") as f:
        assert len(list(csv.DictReader(f))) == 4
    with open(tmp_path / "cpu" / "eval.csv") as f:
        val = [r for r in csv.DictReader(f) if r["split"] == "val"]
    assert float(val[-1]["loss"]) < float(val[-1]["twin_loss"])
    assert_same_runs(tmp_path / "gpu", tmp_path / "cpu")
    assert_same_runs(tmp_path / "moved", tmp_path / "cpu")
    proc = run("mps", "--iters", "1", "--device", "mps")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
        "train.py: error: --device must be one of cpu, cuda, cuda-emulated, got 'mps'")


@needs_fortunes
def test_sample_script_is_stable_for_a_seed(tmp_path):
    """The same seed gives the same text, on one thread or two; another seed, other text.
    A missing run, an empty prompt or one outside the vocabulary is one line."""
    proc = run_train(tmp_path / "out", "--iters", "20", "--eval-interval", "10")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (tmp_path / "prompt.txt").write_text("The ")
    texts = []
    for extra in (("--threads", "1"), ("--threads", "2"), ("--prompt-file",
                                                           str(tmp_path / "prompt.txt"))):
        p = run_sample(tmp_path / "out", "--prompt", "The ", "--length", "60", "--seed", "5",
                       "--top-k", "10", *extra) if extra[0] == "--threads" else \
            run_sample(tmp_path / "out" / "ckpt.safetensors", *extra, "--length", "60",
                       "--seed", "5", "--top-k", "10")
        assert p.returncode == 0, p.stderr[-2000:]
        texts.append(p.stdout)
    assert texts[0] == texts[1] == texts[2] and texts[0].startswith("The ")
    from gptc.locate import find_tool  # `gptc sample`: the same program, from the CLI
    cli = subprocess.run([find_tool("gptc"), "sample", str(tmp_path / "out"), "--prompt", "The ",
                          "--length", "60", "--seed", "5", "--top-k", "10"],
                         capture_output=True, text=True, timeout=600)
    assert cli.returncode == 0 and cli.stdout == texts[0], cli.stderr[-2000:]
    other = run_sample(tmp_path / "out", "--prompt", "The ", "--length", "60", "--seed", "6",
                       "--top-k", "10")
    assert other.returncode == 0 and other.stdout != texts[0]
    for args, said in (((tmp_path / "nope",), f"no checkpoint at {tmp_path / 'nope'}"),
                       ((tmp_path / "out", "--prompt", ""), "the prompt is empty"),
                       ((tmp_path / "out", "--prompt", "\u00e9"),
                        "the prompt: character '\u00e9' is not in the vocabulary")):
        p = run_sample(*args)
        assert p.returncode == 1, p.stderr[-2000:]
        assert p.stderr.strip().splitlines() == [f"gptc: error: {said}"], p.stderr


# -- the multilingual corpus -----------------------------------------------------------------

def test_multilingual_run_reports_fertility_and_losses_per_language(tmp_path):
    from gptc.apps import data
    try:
        data.load_multilingual(max_chars=1000)
    except FileNotFoundError as e:
        pytest.skip(str(e))
    proc = run_train(tmp_path, "--corpus", "multilingual", "--lang-chars", "20000",
                     "--vocab-size", "512", "--iters", "2", "--eval-interval", "2",
                     "--eval-batches", "12", "--sample-chars", "10")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "tokenizer: byte-level BPE, 512 tokens" in proc.stdout
    with open(tmp_path / "fertility.csv") as f:
        rows = {r["code"]: r for r in csv.DictReader(f)}
    assert list(rows) == [code for code, *_ in data.LANGUAGES]
    # Chinese costs three bytes a character: a small byte-level vocabulary gives it more
    # tokens a character than any alphabetic language.
    per_char = {c: 1 / float(r["chars_per_token"]) for c, r in rows.items()}
    assert max(per_char, key=per_char.get) == "zh"
    assert abs(sum(float(r["token_share"]) for r in rows.values()) - 1) < 1e-3
    assert "val by language, nats a character (untrained twin): en " in proc.stdout
    assert " zh " in proc.stdout
    with open(tmp_path / "eval.csv") as f:
        splits = {r["split"] for r in csv.DictReader(f)}
    assert {"train", "val", "val:en", "val:ru", "val:zh"} <= splits


def test_resume_from_another_model_is_one_line(tmp_path):
    """A checkpoint trained with another configuration (or another model file) is refused
    before anything is trained, its run's meta.json named; the checkpoint stays."""
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog.\n" * 60)
    out = tmp_path / "out"
    assert run_train(out, "--data", str(text), "--iters", "2", "--sample-chars", "0") \
        .returncode == 0
    before = (out / "ckpt.safetensors").read_bytes()
    proc = run_train(out, "--data", str(text), "--n-layer", "2", "--resume")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        f"gptc: error: checkpoint {out}/ckpt.safetensors was trained with another model or "
        "model configuration (see its meta.json)"]
    assert (out / "ckpt.safetensors").read_bytes() == before
