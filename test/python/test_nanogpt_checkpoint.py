"""Loading nanoGPT's ckpt.pt (train.py's checkpoint) into a compiled model and a training step."""
import gptc
import pytest
import torch
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig


class Hook:
    """An object whose unpickling would run this module's code: weights_only refuses it."""


def nanogpt_checkpoint(path, model, cfg, compiled_names: bool):
    """What nanoGPT's train.py saves: the state_dict (of a torch.compile'd model, "_orig_mod."
    before each name, if asked), model_args, an optimizer's state, iteration and config."""
    state = model.state_dict()
    if compiled_names:
        state = {"_orig_mod." + k: v for k, v in state.items()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    args = {k: getattr(cfg, k) for k in
            ("n_layer", "n_head", "n_embd", "block_size", "bias", "vocab_size", "dropout")}
    torch.save({"model": state, "optimizer": opt.state_dict(), "model_args": args,
                "iter_num": 250, "best_val_loss": torch.tensor(1.47),
                "config": {"batch_size": 12, "learning_rate": 6e-4}}, path)
    return args


@pytest.mark.parametrize("compiled_names", [False, True])
def test_a_nanogpt_checkpoint_loads_into_a_compiled_model_and_a_step(tmp_path, compiled_names):
    cfg = TinyGPTConfig(n_layer=1)
    torch.manual_seed(1)
    trained = TinyGPT(cfg)  # the weights in the checkpoint
    args = nanogpt_checkpoint(tmp_path / "ckpt.pt", trained, cfg, compiled_names)
    torch.manual_seed(2)
    fresh = TinyGPT(cfg)  # other weights
    x = torch.randint(0, cfg.vocab_size, (2, cfg.block_size))
    y = torch.randint(0, cfg.vocab_size, (2, cfg.block_size))

    compiled = gptc.compile(fresh.eval(), (x, y))
    assert gptc.load_nanogpt_checkpoint(compiled, str(tmp_path / "ckpt.pt")) == args
    reference = gptc.compile(trained.eval(), (x, y))  # the same program, the trained weights
    for got, want in zip(compiled(x, y), reference(x, y)):
        assert torch.equal(got, want)

    step = gptc.compile_train_step(fresh.train(), (x, y), optimizer=gptc.AdamW(lr=1e-3))
    gptc.load_nanogpt_checkpoint(step, str(tmp_path / "ckpt.pt"))
    for name, value in trained.state_dict().items():
        if name in step.state_dict():
            assert torch.equal(step.state_dict()[name], value), name


def test_what_is_not_a_nanogpt_checkpoint_is_one_error_line(tmp_path):
    cfg = TinyGPTConfig(n_layer=1)
    model = TinyGPT(cfg).eval()
    x = torch.randint(0, cfg.vocab_size, (1, cfg.block_size))
    compiled = gptc.compile(model, (x, x.clone()))
    cases = {"missing.pt": None,
             "garbage.pt": b"not a torch file",
             "no_model.pt": {"iter_num": 3},
             "code.pt": {"model": {}, "hook": Hook()}}
    messages = {"missing.pt": "no such checkpoint file",
                "garbage.pt": "cannot read as a nanoGPT checkpoint",
                "no_model.pt": "not a nanoGPT checkpoint (no 'model' state_dict in it)",
                "code.pt": "cannot read as a nanoGPT checkpoint"}
    for name, content in cases.items():
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif content is not None:
            torch.save(content, path)
        with pytest.raises(gptc.GptcError) as e:
            gptc.load_nanogpt_checkpoint(compiled, str(path))
        assert messages[name] in str(e.value) and "\n" not in str(e.value), str(e.value)
    # Another model's weights: refused by name and shape before anything is written.
    other = TinyGPTConfig(n_layer=1, n_embd=32)
    nanogpt_checkpoint(tmp_path / "other.pt", TinyGPT(other), other, True)
    with pytest.raises(gptc.GptcError, match="has shape"):
        gptc.load_nanogpt_checkpoint(compiled, str(tmp_path / "other.pt"))
