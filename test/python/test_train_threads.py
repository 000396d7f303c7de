"""One training step object used from several threads: steps, saves and reads serialize, so
no step number is used twice and every checkpoint is one step's state under its label."""
import threading

import gptc
import torch
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig


def make_step():
    torch.manual_seed(0)
    cfg = TinyGPTConfig(n_layer=1, dropout=0.1)  # dropout: the step number picks the masks
    model = TinyGPT(cfg).train()
    x = torch.randint(0, cfg.vocab_size, (2, cfg.block_size))
    y = torch.randint(0, cfg.vocab_size, (2, cfg.block_size))
    return gptc.compile_train_step(model, (x, y), optimizer=gptc.AdamW(lr=1e-3), seed=3), x, y


def test_steps_from_two_threads_number_every_step_once():
    """40 calls from two threads on one batch: 40 steps, the bits of 40 calls on one thread
    (each step's number, and so its dropout masks and bias correction, used once)."""
    step, x, y = make_step()
    reference, _, _ = make_step()
    for _ in range(40):
        reference(x, y)

    def work():
        for _ in range(20):
            step(x, y)
    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert step.num_steps == 40
    got, want = step.state_dict(), reference.state_dict()
    for name in want:
        assert torch.equal(got[name], want[name]), name


def test_saves_while_another_thread_steps_are_each_one_step(tmp_path):
    """A thread saves while another steps: each checkpoint holds exactly the parameters and
    moments after the step its label names."""
    step, x, y = make_step()
    reference, _, _ = make_step()
    after = {0: reference.state_dict()}
    for k in range(1, 31):
        reference(x, y)
        after[k] = reference.state_dict()

    done = threading.Event()

    def stepping():
        for _ in range(30):
            step(x, y)
        done.set()

    runner = threading.Thread(target=stepping)
    runner.start()
    paths = []
    while not done.is_set() or not paths:
        path = tmp_path / f"ckpt{len(paths)}.safetensors"
        step.save(str(path))
        paths.append(path)
    runner.join()
    for path in paths:
        restored, _, _ = make_step()
        restored.load(str(path))
        state = restored.state_dict()
        for name, value in after[restored.num_steps].items():
            assert torch.equal(state[name], value), (path.name, restored.num_steps, name)


def test_a_compiled_forward_from_four_threads_gives_each_call_its_own_results():
    """One compiled forward called from four threads, each with its own batch: every call's
    logits and loss are those of the same call made alone (the runtime runs one call at a
    time on the model's arena; results are copied out before the next starts)."""
    torch.manual_seed(1)
    cfg = TinyGPTConfig(n_layer=1)
    model = TinyGPT(cfg).eval()
    batches = [(torch.randint(0, cfg.vocab_size, (2, cfg.block_size)),
                torch.randint(0, cfg.vocab_size, (2, cfg.block_size))) for _ in range(4)]
    forward = gptc.compile(model, batches[0])
    alone = [forward(x, y) for x, y in batches]
    failures = []

    def work(k):
        x, y = batches[k]
        for _ in range(15):
            logits, loss = forward(x, y)
            if not (torch.equal(logits, alone[k][0]) and torch.equal(loss, alone[k][1])):
                failures.append(k)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
