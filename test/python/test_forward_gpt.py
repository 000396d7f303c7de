"""The compiled forward of the test GPT against PyTorch eager on the CPU."""
import gc
import os
import subprocess
import tempfile

import pytest
import torch

import gptc
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig


def make_batch(cfg, batch=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, cfg.vocab_size, (batch, cfg.block_size), generator=g)
    targets = torch.randint(0, cfg.vocab_size, (batch, cfg.block_size), generator=g)
    targets[0, :5] = -1  # ignore_index rows must be skipped
    return idx, targets


@pytest.mark.parametrize("bias", [True, False])
def test_forward_matches_eager(bias, tmp_path):
    torch.manual_seed(1234)
    cfg = TinyGPTConfig(n_layer=2, n_head=2, n_embd=64, block_size=32, vocab_size=65,
                        bias=bias, dropout=0.1)
    model = TinyGPT(cfg).eval()
    idx, targets = make_batch(cfg)
    with torch.no_grad():
        ref_logits, ref_loss = model(idx, targets)
    compiled = gptc.compile(model, (idx, targets), workdir=str(tmp_path))
    logits, loss = compiled(idx, targets)

    logit_err = (logits - ref_logits).abs().max().item()
    loss_rel = abs(loss.item() - ref_loss.item()) / abs(ref_loss.item())
    print(f"\nbias={bias}: loss gptc={loss.item():.8f} torch={ref_loss.item():.8f} "
          f"rel={loss_rel:.3e}; worst logit diff={logit_err:.3e}; "
          f"kernels={compiled.num_kernels}")
    assert logits.shape == ref_logits.shape
    assert loss_rel <= 1e-5
    assert logit_err <= 1e-4

    # A second batch through the same artifact: nothing is baked in.
    idx2, targets2 = make_batch(cfg, seed=7)
    with torch.no_grad():
        ref2 = model(idx2, targets2)[1].item()
    assert abs(compiled(idx2, targets2)[1].item() - ref2) <= 1e-5 * abs(ref2)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The default test GPT (eval), one batch, and its compiled forward, shared by the
    tests below that only run it."""
    torch.manual_seed(0)
    cfg = TinyGPTConfig()
    model = TinyGPT(cfg).eval()
    idx, targets = make_batch(cfg)
    compiled = gptc.compile(model, (idx, targets), workdir=str(tmp_path_factory.mktemp("tiny")))
    return model, cfg, idx, targets, compiled


def test_runs_are_bitwise_identical(tiny):
    model, cfg, idx, targets, compiled = tiny
    a_logits, a_loss = compiled(idx, targets)
    b_logits, b_loss = compiled(idx, targets)
    assert torch.equal(a_logits, b_logits) and torch.equal(a_loss, b_loss)


def test_tied_weight_is_one_parameter():
    torch.manual_seed(0)
    cfg = TinyGPTConfig()
    model = TinyGPT(cfg).eval()
    captured = gptc.capture(model, make_batch(cfg))
    names = [a.name for a in captured.args if a.kind == "param"]
    assert "transformer.wte.weight" in names
    assert "lm_head.weight" not in names
    assert len(names) == len({id(p) for p in model.parameters()})


def test_emit_gpt_round_trips_through_gptc_opt(tmp_path):
    torch.manual_seed(0)
    cfg = TinyGPTConfig()
    model = TinyGPT(cfg).eval()
    captured = gptc.capture(model, make_batch(cfg))
    mlir = tmp_path / "model.mlir"
    gptc.capture_save(captured, str(mlir))
    printed = subprocess.run([gptc.find_tool("gptc"), "compile", str(mlir), "--emit=gpt",
                              "-o", "-"], capture_output=True, text=True, check=True).stdout
    assert "gpt.attention" in printed and "torch.aten" not in printed
    again = subprocess.run([gptc.find_tool("gptc-opt"), "-"], input=printed,
                           capture_output=True, text=True, check=True).stdout
    assert again == printed


class FlipModel(torch.nn.Module):
    def forward(self, x):
        y = x * 2.0
        return torch.flip(y, dims=[1])  # gptc has no flip: must be named with this line


def test_unsupported_op_names_op_and_line(tmp_path):
    x = torch.randn(2, 8)
    with pytest.raises(gptc.GptcError) as info:
        gptc.compile(FlipModel(), (x,), workdir=str(tmp_path))
    msg = str(info.value)
    print("\n" + msg)
    line = FlipModel.forward.__code__.co_firstlineno + 2
    assert "unsupported PyTorch op 'aten.flip.default'" in msg
    assert f"test_forward_gpt.py:{line}:" in msg
    assert "[2x8]f32" in msg


def test_not_a_module_is_a_clear_error():
    """A function instead of a module: GptcError, not torch.export's AttributeError."""
    with pytest.raises(gptc.GptcError, match="gptc compiles a torch.nn.Module, got function"):
        gptc.compile(lambda x: x * 2, (torch.randn(2, 8),))
    with pytest.raises(gptc.GptcError, match="got function"):
        gptc.compile_train_step(lambda x, y: (x, y), (torch.randn(2, 8), torch.randn(2, 8)))


def test_wrong_input_shape_is_a_clear_error(tiny):
    model, cfg, idx, targets, compiled = tiny
    with pytest.raises(gptc.GptcError, match="input 'idx' has shape"):
        compiled(idx[:, :16], targets)


def test_generation_path_without_targets(tmp_path):
    """nanoGPT's forward(idx) keeps the last position only: x[:, [-1], :], loss None."""
    torch.manual_seed(5)
    cfg = TinyGPTConfig()
    model = TinyGPT(cfg).eval()
    idx, _ = make_batch(cfg, batch=2)
    with torch.no_grad():
        ref_logits, ref_loss = model(idx)
    compiled = gptc.compile(model, (idx,), workdir=str(tmp_path))
    logits, loss = compiled(idx)
    assert ref_loss is None and loss is None
    assert logits.shape == ref_logits.shape == (2, 1, cfg.vocab_size)
    assert (logits - ref_logits).abs().max().item() <= 1e-4


def test_bad_inputs_are_clear_errors(tiny):
    """Out-of-range token ids and targets, and float token ids: one clear error each."""
    model, cfg, idx, targets, compiled = tiny
    bad_idx = idx.clone()
    bad_idx[1, 3] = cfg.vocab_size  # one past the table
    with pytest.raises(gptc.GptcError, match="embedding index out of range"):
        compiled(bad_idx, targets)
    bad_targets = targets.clone()
    bad_targets[2, 0] = 1000
    with pytest.raises(gptc.GptcError, match="cross_entropy target out of range"):
        compiled(idx, bad_targets)
    with pytest.raises(gptc.GptcError, match="input 'idx' has dtype torch.float32"):
        compiled(idx.float(), targets)
    # Torch's embedding refuses these; gptc converted them (a complex id lost its
    # imaginary part).
    for bad in (idx.bool(), idx.to(torch.uint8), idx + 0.5j):
        with pytest.raises(gptc.GptcError, match=f"^input 'idx' has dtype {bad.dtype}, "
                                                 "compiled for i64$"):
            compiled(bad, targets)
    with pytest.raises(gptc.GptcError, match="^input 'targets' is a meta tensor: it holds "
                                             "no values$"):
        compiled(idx, targets.to("meta"))
    assert torch.equal(compiled(idx.int(), targets)[1], compiled(idx, targets)[1])
    # The model still works after the errors.
    with torch.no_grad():
        ref = model(idx, targets)[1].item()
    assert abs(compiled(idx, targets)[1].item() - ref) <= 1e-5 * abs(ref)


def test_a_dropout_model_in_training_mode_is_refused():
    """The compiler gives such a model an rng input (the masks' seed) that only a training
    step feeds: it compiled, then every call failed with 'got 2 inputs, the model takes 3'."""
    torch.manual_seed(0)
    cfg = TinyGPTConfig(n_layer=1, n_embd=16, dropout=0.1)
    with pytest.raises(gptc.GptcError, match=r"^the model draws dropout masks \(training mode "
                       r"with dropout > 0\): call model.eval\(\) or set dropout to 0 to "
                       r"compile it for inference; compile_train_step trains with dropout$"):
        gptc.compile(TinyGPT(cfg).train(), make_batch(cfg))


class NoOutput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        self.lin(x)  # the result is dropped


def test_a_model_returning_no_tensor_is_a_clear_error():
    """Its empty return was the compiler's 'expected operation name in quotes'. A capture
    error is a GptcError, as every refusal of the API is (it was not)."""
    with pytest.raises(gptc.CaptureError, match="^the model's forward returns no tensor$"):
        gptc.compile(NoOutput(), (torch.randn(2, 4),))
    with pytest.raises(gptc.GptcError):
        gptc.compile(NoOutput(), (torch.randn(2, 4),))


class AutocastRegion(torch.nn.Module):
    """A torch.autocast region inside forward: torch.export keeps it as the higher-order op
    wrap_with_autocast. (A torch.no_grad() region, as Hugging Face's rotary embeddings have,
    is printed in place: test_hf.py.)"""

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            s = torch.sin(x) * 2  # the line the error names
        return (x + s).sum()


def test_an_autocast_region_is_one_line_naming_the_model_line():
    """It was 'unsupported call wrap_with_autocast in node mul': no model line and no way
    forward."""
    import inspect
    lines, first = inspect.getsourcelines(AutocastRegion.forward)
    line = first + next(i for i, text in enumerate(lines) if "the line the error names" in text)
    with pytest.raises(gptc.CaptureError) as e:
        gptc.compile(AutocastRegion(), (torch.randn(2, 4),))
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("a torch.autocast region ('wrap_with_autocast') at ")
    assert f"test_forward_gpt.py:{line} is not supported" in message
    assert "compute it outside forward(), or without the context manager" in message


class DoubleModel(torch.nn.Module):
    def forward(self, x):
        return x * 2.0


def test_a_temporary_artifact_folder_goes_with_its_model(tmp_path, monkeypatch):
    """Without a workdir, gptc compiles into a temporary folder: removed when the compiled
    model is collected, and at once when the compile fails (none pile up in /tmp)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    x = torch.randn(2, 8)
    compiled = gptc.compile(DoubleModel(), (x,))
    folder = os.path.dirname(compiled.artifact_dir)
    assert os.path.dirname(folder) == str(tmp_path)
    assert torch.equal(compiled(x), x * 2.0)
    del compiled
    gc.collect()
    assert not os.path.exists(folder)
    with pytest.raises(gptc.GptcError, match="aten.flip"):
        gptc.compile(FlipModel(), (x,))
    # (torch's own cache folder, torchinductor_<user>, may appear here too: the capture's
    # child process reads the patched tempdir when torch first asks for it.)
    assert [f for f in os.listdir(tmp_path) if f.startswith("gptc")] == []


def test_a_bare_tensor_is_one_example_input(tmp_path):
    """tuple(x) split a tensor along its first dimension into several inputs."""
    x = torch.randn(2, 8)
    compiled = gptc.compile(DoubleModel(), x, workdir=str(tmp_path))
    assert [a.shape for a in compiled.inputs] == [(2, 8)]
    assert torch.equal(compiled(x), x * 2.0)
    with pytest.raises(gptc.GptcError, match="^example_inputs must be a tuple of the model's "
                                             "inputs, got int$"):
        gptc.compile(DoubleModel(), 5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_model_is_one_line_saying_what_to_do(dtype):
    """A bf16 or f16 model (transformers' torch_dtype=torch.bfloat16, say) is refused before
    its capture by each way in, naming the first such parameter and the fix. It was
    'unsupported argument type' from the compiler, or torch.export's own failure."""
    torch.manual_seed(0)
    model = TinyGPT(TinyGPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=16,
                                  vocab_size=23)).to(dtype)
    x = torch.randint(0, 23, (2, 16))
    for compile_it in (lambda: gptc.compile(model.eval(), (x, x)),
                       lambda: gptc.compile_train_step(model.train(), (x, x)),
                       lambda: gptc.compile_train_step(model.train(), (x, x),
                                                       accumulation_steps=2),
                       lambda: gptc.compile_generate(model.eval())):
        with pytest.raises(gptc.GptcError) as e:
            compile_it()
        assert "\n" not in str(e.value)
        assert (f"parameter 'transformer.wte.weight' is {dtype}; gptc's kernels are float32"
                in str(e.value)) and "convert the model with .float() first" in str(e.value)
