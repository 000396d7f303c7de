"""Random programs of transposes, splits, slices, concats and reshapes around exact
elementwise ops (add, sub, mul, neg), the data movement that gpt-strided-views reads and
writes in place, through strides, instead of copying.

Two oracles: the forward gives torch's bits (each element is one IEEE operation on the
same operands, in the same order, on both), and a training step through the program (its
gradient runs the views backwards: concats for splits, slices for concats) gives -O0's
bits at -O3: loss, gradients' effect and AdamW's update. Programs are drawn from a seeded
generator, so a failure reproduces from its seed."""
import copy
import random

import pytest
import torch

import gptc

ADAMW = dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)


def draw_program(rng: random.Random, shape: tuple) -> list:
    """Steps of (op, args) applied to a tensor of `shape`, each legal at the shape it meets
    (every dim even, so that halves exist)."""
    steps, shape = [], list(shape)
    for _ in range(rng.randint(3, 6)):
        kind = rng.choice(["transpose", "permute", "halves", "halves_cat", "narrow",
                           "split_dim", "merge_dims", "scale"])
        rank = len(shape)
        if kind == "transpose":
            a, b = rng.sample(range(rank), 2)
            steps.append(("transpose", (a, b)))
            shape[a], shape[b] = shape[b], shape[a]
        elif kind == "permute":  # any order, not only a swap of two dims
            perm = tuple(rng.sample(range(rank), rank))
            steps.append(("permute", perm))
            shape = [shape[p] for p in perm]
        elif kind in ("halves", "halves_cat"):
            even = [d for d in range(rank) if shape[d] % 2 == 0]
            if not even:
                continue
            d = rng.choice(even)
            if kind == "halves":  # a - 2 b: the halves read in place
                steps.append(("halves", (d,)))
                shape[d] //= 2
            else:  # cat((a * 3, b - a), dim e): written in place into the concat
                e = rng.randrange(rank)
                steps.append(("halves_cat", (d, e)))
                shape[d] //= 2
                shape[e] *= 2
        elif kind == "narrow":
            d = rng.choice([d for d in range(rank)])
            if shape[d] < 2:
                continue
            length = rng.randint(1, shape[d] - 1)
            start = rng.randint(0, shape[d] - length)
            steps.append(("narrow", (d, start, length)))
            shape[d] = length
        elif kind == "split_dim":
            d = rng.choice([d for d in range(rank) if shape[d] % 2 == 0] or [None])
            if d is None or rank >= 5:
                continue
            steps.append(("reshape", tuple(shape[:d] + [2, shape[d] // 2] + shape[d + 1:])))
            shape = shape[:d] + [2, shape[d] // 2] + shape[d + 1:]
        elif kind == "merge_dims":
            if rank <= 2:
                continue
            d = rng.randrange(rank - 1)
            steps.append(("reshape", tuple(shape[:d] + [shape[d] * shape[d + 1]] + shape[d + 2:])))
            shape = shape[:d] + [shape[d] * shape[d + 1]] + shape[d + 2:]
        else:
            steps.append(("scale", (rng.choice([0.5, -1.5, 3.0]),)))
    return steps


def run_program(x: torch.Tensor, steps: list) -> torch.Tensor:
    for op, args in steps:
        if op == "transpose":
            x = x.transpose(*args)
        elif op == "permute":
            x = x.permute(*args)
        elif op == "halves":
            a, b = x.chunk(2, dim=args[0])
            x = a - b * 2.0
        elif op == "halves_cat":
            a, b = x.chunk(2, dim=args[0])
            x = torch.cat((a * 3.0, b - a), dim=args[1])
        elif op == "narrow":
            x = x.narrow(*args)
        elif op == "reshape":
            x = x.reshape(args)
        else:
            x = -(x * args[0])
    return x


class Program(torch.nn.Module):
    def __init__(self, shape, steps, train: bool):
        super().__init__()
        self.steps = steps
        self.w = torch.nn.Parameter(torch.randn(shape)) if train else None

    def forward(self, x, target=None):
        y = run_program(x * self.w if self.w is not None else x + 0.25, self.steps)
        if target is None:
            return y
        return ((y - target) * (y - target)).mean()


SHAPE = (2, 4, 6, 4)


@pytest.mark.parametrize("seed", range(10))
def test_forward_through_views_gives_torchs_bits(seed):
    rng = random.Random(seed)
    steps = draw_program(rng, SHAPE)
    torch.manual_seed(seed)
    model, x = Program(SHAPE, steps, train=False), torch.randn(SHAPE)
    want = model(x)
    got = gptc.compile(model, (x,))(x)
    assert got.shape == want.shape, steps
    assert torch.equal(got, want), f"seed {seed}: {steps}"


@pytest.mark.parametrize("seed", range(100, 106))
def test_a_training_step_through_views_gives_the_unfused_bits(seed, tmp_path):
    rng = random.Random(seed)
    steps = draw_program(rng, SHAPE)
    torch.manual_seed(seed)
    model, x = Program(SHAPE, steps, train=True), torch.randn(SHAPE)
    target = torch.randn(run_program(x, steps).shape)
    ref = copy.deepcopy(model)
    fused = gptc.compile_train_step(model, (x, target), optimizer=gptc.AdamW(**ADAMW),
                                    workdir=str(tmp_path / "o3"))
    unfused = gptc.compile_train_step(model, (x, target), optimizer=gptc.AdamW(**ADAMW),
                                      fuse=False, workdir=str(tmp_path / "o0"))
    assert fused.num_kernels <= unfused.num_kernels
    for _ in range(2):
        assert torch.equal(fused(x, target, lr=1e-2), unfused(x, target, lr=1e-2)), steps
    assert torch.equal(fused.state_dict()["w"], unfused.state_dict()["w"]), f"seed {seed}: {steps}"
    # And the step is the right one: eager's AdamW, within rounding.
    opt = torch.optim.AdamW(ref.parameters(), **ADAMW)
    for _ in range(2):
        opt.zero_grad()
        ref(x, target).backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
        opt.step()
    assert torch.allclose(fused.state_dict()["w"], ref.w.detach(), atol=1e-5), steps
