"""Every supported op alone, on random shapes, against PyTorch eager.

Each case builds a one-op module, compiles it with gptc and compares the
result; shapes are drawn from a seeded generator so a failure reproduces.
"""
import os
import random
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import gptc


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def rand_shape(rng, rank, lo=1, hi=37):
    return tuple(rng.randint(lo, hi) for _ in range(rank))


def positive(shape):
    return torch.rand(shape) + 0.1


# name -> (fn, inputs(rng) -> tuple of tensors)
CASES = {
    "add_broadcast": (lambda a, b: a + b,
                      lambda r: (lambda s: (torch.randn(s), torch.randn(s[-1])))(rand_shape(r, 3))),
    "sub_scalar_alpha": (lambda a, b: torch.sub(a, b, alpha=2) - 1.5,
                         lambda r: (lambda s: (torch.randn(s), torch.randn(s)))(rand_shape(r, 2))),
    "mul_div": (lambda a, b: a * b / (b * b + 1.0),
                lambda r: (lambda s: (torch.randn(s), torch.randn(1, s[1])))(rand_shape(r, 2))),
    "pow_scalar": (lambda a: a ** 3 + a ** 0.5 + a ** 2 + a ** -0.5,
                   lambda r: (positive(rand_shape(r, 2)),)),
    "pow_inexact_scalar": (lambda a: a ** 0.3 + 0.1 ** a + a ** (1 / 3),
                           lambda r: (positive(rand_shape(r, 2)) * 10.0 ** r.randint(-30, 30),)),
    "pow_tensor": (lambda a, b: torch.pow(a, b),
                   lambda r: (lambda s: (positive(s), torch.randn(s)))(rand_shape(r, 2))),
    "reciprocal": (lambda a: 2 / a + 1 / a, lambda r: (positive(rand_shape(r, 2)),)),
    "pow_scalar_base": (lambda a: 2 ** a + 0.5 ** a, lambda r: (torch.randn(rand_shape(r, 2)) * 4,)),
    "maximum": (lambda a, b: torch.maximum(a, b),
                lambda r: (lambda s: (torch.randn(s), torch.randn(s)))(rand_shape(r, 2))),
    "neg_exp": (lambda a: torch.exp(-a), lambda r: (torch.randn(rand_shape(r, 2)) * 5,)),
    "log": (lambda a: torch.log(a), lambda r: (positive(rand_shape(r, 2)) * 100,)),
    "tanh": (torch.tanh, lambda r: (torch.randn(rand_shape(r, 2)) * 4,)),
    "erf": (torch.erf, lambda r: (torch.randn(rand_shape(r, 2)) * 3,)),
    "sqrt_rsqrt": (lambda a: torch.sqrt(a) + torch.rsqrt(a), lambda r: (positive(rand_shape(r, 2)),)),
    "gelu_erf": (F.gelu, lambda r: (torch.randn(rand_shape(r, 3)) * 3,)),
    "gelu_tanh": (lambda a: F.gelu(a, approximate="tanh"), lambda r: (torch.randn(rand_shape(r, 3)) * 3,)),
    "matmul_2d": (lambda a, b: a @ b,
                  lambda r: (lambda m, k, n: (torch.randn(m, k), torch.randn(k, n)))(*rand_shape(r, 3))),
    "matmul_batched": (lambda a, b: a @ b,
                       lambda r: (lambda b, m, k, n: (torch.randn(b, m, k), torch.randn(b, k, n)))(
                           *rand_shape(r, 4, hi=20))),
    "matmul_shared_rhs": (lambda a, b: torch.matmul(a, b),
                          lambda r: (lambda b, m, k, n: (torch.randn(b, m, k), torch.randn(k, n)))(
                              *rand_shape(r, 4, hi=20))),
    "linear_bias": (lambda x, w, b: F.linear(x, w, b),
                    lambda r: (lambda b, k, n: (torch.randn(b, 3, k), torch.randn(n, k), torch.randn(n)))(
                        *rand_shape(r, 3))),
    "bmm_transposed": (lambda a, b: torch.bmm(a, b.transpose(1, 2)),
                       lambda r: (lambda b, m, k: (torch.randn(b, m, k), torch.randn(b, m, k)))(
                           *rand_shape(r, 3, hi=20))),
    "layer_norm_affine": (lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b),
                          lambda r: (lambda s: (torch.randn(s) * 3 + 1, torch.randn(s[-1]), torch.randn(s[-1])))(
                              rand_shape(r, 3))),
    "layer_norm_plain": (lambda x: F.layer_norm(x, (x.shape[-1],)),
                         lambda r: (torch.randn(rand_shape(r, 2, hi=100)),)),
    "softmax_last": (lambda x: F.softmax(x, dim=-1), lambda r: (torch.randn(rand_shape(r, 3)) * 4,)),
    "softmax_first": (lambda x: F.softmax(x, dim=0), lambda r: (torch.randn(rand_shape(r, 3)) * 4,)),
    "log_softmax": (lambda x: F.log_softmax(x, dim=1), lambda r: (torch.randn(rand_shape(r, 2, hi=80)) * 4,)),
    "sdpa_causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                    lambda r: (lambda b, h, t, d: tuple(torch.randn(b, h, t, d) for _ in range(3)))(
                        r.randint(1, 3), r.randint(1, 4), r.randint(1, 80), r.randint(1, 40))),
    "sdpa_full_scaled": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3),
                         lambda r: (lambda b, h, t, s, d: (torch.randn(b, h, t, d), torch.randn(b, h, s, d),
                                                           torch.randn(b, h, s, d + 3)))(
                             r.randint(1, 3), r.randint(1, 3), r.randint(1, 40), r.randint(1, 70),
                             r.randint(1, 20))),
    "cross_entropy_ignore": (lambda x, t: F.cross_entropy(x, t, ignore_index=-1),
                             lambda r: (lambda n, v: (torch.randn(n, v) * 3,
                                                      torch.where(torch.rand(n) < 0.2, -1,
                                                                  torch.randint(0, v, (n,)))))(
                                 r.randint(2, 90), r.randint(1, 70))),
    "embedding": (lambda w, i: F.embedding(i, w),
                  lambda r: (lambda v, c: (torch.randn(v, c), torch.randint(0, v, rand_shape(r, 2, hi=9))))(
                      *rand_shape(r, 2))),
    "view_transpose_permute": (lambda x: x.view(x.shape[0], -1).t().reshape(-1, x.shape[0]).permute(1, 0) * 1.0,
                               lambda r: (torch.randn(rand_shape(r, 3, hi=9)),)),
    "transpose_contiguous": (lambda x: x.transpose(1, 2).contiguous() + 0.0,
                             lambda r: (torch.randn(rand_shape(r, 4, hi=7)),)),
    "slice_select": (lambda x: x[:, 1::2] + x[0, 1::2] + x[:, -1:],
                     lambda r: (torch.randn(r.randint(1, 9), r.randint(2, 30)),)),
    "narrow": (lambda x: x.narrow(1, 1, x.shape[1] - 2) * 2.0 + x.narrow(-1, -2, 2).sum(),
               lambda r: (torch.randn(r.randint(1, 9), r.randint(3, 30), r.randint(2, 9)),)),
    "tril_triu": (lambda x: (x.tril() + 2 * x.triu(1) + 3 * x.tril(-2) + torch.ones(x.shape[-2:]).tril()
                             + x.triu(-2**63) + x.tril(-2**63) + x.tril(2**63 - 1)),
                  lambda r: (torch.randn(rand_shape(r, 3, hi=12)),)),
    "mask_in_forward": (lambda x: x.masked_fill(
                            ~(torch.arange(x.shape[-2])[:, None] >= torch.arange(x.shape[-1])[None, :]),
                            float("-inf")).softmax(-1),
                        lambda r: (lambda t: (torch.randn(2, t, t),))(r.randint(1, 20))),
    "sin_cos": (lambda x: torch.sin(x) + 2 * torch.cos(x),
                lambda r: (torch.randn(rand_shape(r, 2)) * 10 ** r.randint(0, 6),)),
    "rotary_in_forward": (lambda x, inv: (lambda f, x1, x2: torch.cat(
                              (x1 * f.cos() + x2 * f.sin(), x2 * f.cos() - x1 * f.sin()), -1))(
                              torch.outer(torch.arange(x.shape[1], dtype=torch.float32), inv)[None, :, None, :],
                              *x.chunk(2, dim=-1)),
                          lambda r: (lambda t, d: (torch.randn(2, t, 3, 2 * d),
                                                   1.0 / 10000 ** (torch.arange(d) / d)))(
                              r.randint(1, 300), r.randint(1, 8))),
    "stack": (lambda a, b: torch.stack([a, b * 2, a + b], dim=1) + torch.stack([a, b], dim=-1).sum(-1).unsqueeze(1),
              lambda r: (lambda s: (torch.randn(s), torch.randn(s)))(rand_shape(r, 2))),
    "split_cat": (lambda x: torch.cat(list(reversed(x.split(3, dim=1))), dim=1),
                  lambda r: (torch.randn(r.randint(1, 9), r.randint(1, 20)),)),
    "expand_unsqueeze": (lambda x: x.unsqueeze(0).expand(3, -1, -1) + 0.0,
                         lambda r: (torch.randn(rand_shape(r, 2)),)),
    "sum_mean_amax": (lambda x: x.sum(dim=1, keepdim=True) + x.mean(dim=(0, 1)) + x.amax(dim=-1, keepdim=True),
                      lambda r: (torch.randn(rand_shape(r, 3)),)),
    "sum_all": (lambda x: x.sum() + x.mean(), lambda r: (torch.randn(rand_shape(r, 2, hi=300)),)),
    "where_masked_fill": (lambda x, y, m, n: torch.where(m, x, y).masked_fill(n, float("-inf")),
                          lambda r: (lambda s: (torch.randn(s), torch.randn(s), torch.rand(s) < 0.5,
                                                torch.rand(s[-1]) < 0.3))(rand_shape(r, 2))),
    "where_scalars": (lambda x, m: torch.where(m, x, 0.0) + torch.where(m, 1.5, x) + torch.where(m, 2.0, -1.0),
                      lambda r: (lambda s: (torch.randn(s), torch.rand(s) < 0.5))(rand_shape(r, 2))),
    "arange_add": (lambda x: x + torch.arange(x.shape[-1]),
                   lambda r: (torch.randn(rand_shape(r, 2)),)),
    "compare": (lambda a, b: ((a < 0).float() + 2 * (a <= b).float() + 4 * (a > 0.25).float()
                              + 8 * (a >= b).float() + 16 * (a == b).float() + 32 * (a != 0).float()),
                lambda r: (lambda s: (torch.randn(s).round(), torch.randn(s[-1]).round()))(rand_shape(r, 2))),
    "compare_int_float": (lambda x: x + (torch.arange(x.shape[-1]) < 2.5).float() + (torch.arange(x.shape[-1]) == 1),
                          lambda r: (torch.randn(rand_shape(r, 2)),)),
    "bool_logic": (lambda a, b: torch.where(((a > 0) & (b > 0)) | ~(a < b), a, b) + torch.logical_or(a > 1, b < -1),
                   lambda r: (lambda s: (torch.randn(s), torch.randn(s)))(rand_shape(r, 2))),
    "activations": (lambda x: F.relu(x) + 2 * F.leaky_relu(x, 0.2) + 3 * torch.sigmoid(x) + 4 * F.silu(x),
                    lambda r: (torch.randn(rand_shape(r, 3)) * 5,)),
    "abs_sign_square": (lambda x: x.abs() + 3 * x.sign() + x.square(),
                        lambda r: (torch.randn(rand_shape(r, 2)).round(),)),
    "minimum_clamp": (lambda a, b: torch.minimum(a, b) + a.clamp(-0.5, 0.7) + a.clamp(min=0.1) + b.clamp(max=0.2),
                      lambda r: (lambda s: (torch.randn(s), torch.randn(s[-1])))(rand_shape(r, 2))),
    "zeros_ones_full": (lambda x: (x + torch.zeros(x.shape) + 2 * torch.ones_like(x) + torch.full((x.shape[-1],), 3.0)
                                   + x.new_ones(x.shape[0], 1) + torch.full_like(x, 0.5)),
                        lambda r: (torch.randn(rand_shape(r, 2)),)),
    "mT": (lambda x: x.mT @ x, lambda r: (torch.randn(rand_shape(r, 3, hi=20)),)),
    "rms_norm": (lambda x, w: F.rms_norm(x, (x.shape[-1],), w) + F.rms_norm(x, x.shape[1:], eps=1e-3),
                 lambda r: (lambda s: (torch.randn(s) * 3, torch.randn(s[-1])))(rand_shape(r, 3))),
    "logsumexp": (lambda x: torch.logsumexp(x, -1) + torch.logsumexp(x, (0, 2), keepdim=True).sum(),
                  lambda r: (torch.randn(rand_shape(r, 3)) * 10,)),
    "sdpa_gqa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
                 lambda r: (lambda b, g, t, d: (torch.randn(b, 2 * g, t, d), torch.randn(b, 2, t, d),
                                                torch.randn(b, 2, t, d)))(
                     r.randint(1, 3), r.randint(1, 4), r.randint(1, 40), r.randint(1, 20))),
    "repeat_interleave": (lambda x: x.repeat_interleave(3, dim=1) + x.repeat_interleave(2).sum(),
                          lambda r: (torch.randn(rand_shape(r, 3, hi=9)),)),
    "rotary_cached": (lambda x, cos, sin: (lambda x1, x2: torch.cat((x1 * cos + x2 * sin, x2 * cos - x1 * sin), -1))(
                          *x.chunk(2, dim=-1)),
                      lambda r: (lambda b, t, h, d: (torch.randn(b, t, h, 2 * d), torch.randn(1, t, 1, d).cos(),
                                                     torch.randn(1, t, 1, d).sin()))(*rand_shape(r, 4, hi=9))),
    "var_std": (lambda x: (x.var(-1, keepdim=True, unbiased=False) + x.std(-1, keepdim=True) + x.var(unbiased=False)
                           + torch.var(x, dim=(0, 2), correction=0).sum() + x.std(dim=1).mean()),
                lambda r: (torch.randn(rand_shape(r, 3)) * 3 + 1,)),
    "cumsum": (lambda x, m: (x.cumsum(0) + x.cumsum(-1, dtype=torch.float64) * m.cumsum(-1)
                             + (m.cumsum(1) * m - 1).float()),
               lambda r: (lambda s: (torch.randn(s) * 3, torch.rand(s) < 0.7))(rand_shape(r, 3))),
    "repeat": (lambda x: torch.cat([x.repeat(2, 1, 3).flatten(), x.repeat(1, 2, 1, 1).flatten(),
                                    x.broadcast_to(2, *x.shape).flatten()]),
               lambda r: (torch.randn(rand_shape(r, 3, hi=9)),)),
    "numpy_T": (lambda x, y: x.T @ y.mT.T, lambda r: (lambda m, k, n: (torch.randn(k, m), torch.randn(k, n)))(
        *rand_shape(r, 3))),
    "baddbmm_addmm": (lambda c, a, b: (torch.baddbmm(c, a, b, beta=0.5, alpha=0.25) + torch.baddbmm(c, a, b)
                                       + torch.addmm(c[0], a[0], b[0], beta=0.0, alpha=3.0)),
                      lambda r: (lambda n, m, k, p: (torch.randn(n, m, p), torch.randn(n, m, k), torch.randn(n, k, p)))(
                          *rand_shape(r, 4, hi=20))),
    "sdpa_one_kv_head": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                         lambda r: (lambda b, h, t, d: (torch.randn(b, h, t, d), torch.randn(b, 1, t, d),
                                                        torch.randn(b, 1, t, d)))(*rand_shape(r, 4, hi=12))),
    "sdpa_mask_gqa": (lambda q, k, v, m: (F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
                                          + F.scaled_dot_product_attention(q, k[:, :1], v[:, :1], attn_mask=m)),
                      lambda r: (lambda b, t, d: (torch.randn(b, 4, t, d), torch.randn(b, 2, t, d), torch.randn(b, 2, t, d),
                                                  torch.rand(b, 1, t, t) < 0.7))(*rand_shape(r, 3, hi=12))),
    "index_rows": (lambda x, i: x[i] * 2.0 + x[i[0]].sum(), lambda r: (lambda n: (
        torch.randn(n, r.randint(1, 5), 3), torch.randint(0, n, (r.randint(1, 4), 5))))(r.randint(1, 9))),
    "gather_rows": (lambda t, p: torch.gather(t.repeat(p.shape[0], 1, 1), 1,
                                              p.unsqueeze(-1).repeat(1, 1, t.shape[1])) * 3.0,
                    lambda r: (lambda n: (torch.randn(n, r.randint(1, 6)),
                                          torch.randint(0, n, (r.randint(1, 3), r.randint(1, 5)))))(
                        r.randint(1, 9))),
    "float64": (lambda x: torch.tanh(x.double()) * 2.0, lambda r: (torch.randn(rand_shape(r, 2)),)),
    "softmax_f64": (lambda x: F.softmax(x, dim=-1), lambda r: (torch.randn(rand_shape(r, 2)).double(),)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("draw", [0, 1])
def test_op_matches_eager(case, draw, tmp_path):
    fn, make_inputs = CASES[case]
    rng = random.Random(f"{case}-{draw}")
    torch.manual_seed(rng.randint(0, 2**31))
    inputs = make_inputs(rng)
    model = Fn(fn)
    with torch.no_grad():
        expected = model(*inputs)
    compiled = gptc.compile(model, inputs, workdir=str(tmp_path))
    got = compiled(*inputs)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    tol = 1e-12 if expected.dtype == torch.float64 else 2e-5
    finite = torch.isfinite(expected)
    assert torch.equal(finite, torch.isfinite(got))
    assert torch.equal(expected[~finite], got[~finite])
    err = ((got - expected).abs() / (expected.abs() + 1)).where(finite, 0).max().item()
    print(f"\n{case}[{draw}] shapes={[tuple(i.shape) for i in inputs]} worst={err:.2e}")
    assert err <= tol, f"{case}: worst relative difference {err}"


@pytest.mark.parametrize("causal", [True, False])
def test_attention_on_bthd_layout_is_bitwise_the_same(causal, tmp_path):
    """nanoGPT's q/k/v.transpose(1, 2) -> sdpa -> transpose(1, 2) compiles to one attention
    kernel reading and writing [B, T, H, D] in place; its bits equal the [B, H, T, D] kernel's."""
    torch.manual_seed(3)
    b, t, s, h, d, dv = 2, 37, (37 if causal else 45), 3, 8, (8 if causal else 11)
    q, k, v = torch.randn(b, t, h, d), torch.randn(b, s, h, d), torch.randn(b, s, h, dv)

    def bthd(q, k, v):
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=causal)
        return y.transpose(1, 2)

    def bhtd(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    folded = gptc.compile(Fn(bthd), (q, k, v), workdir=str(tmp_path / "bthd"))
    plain_inputs = tuple(x.transpose(1, 2).contiguous() for x in (q, k, v))
    plain = gptc.compile(Fn(bhtd), plain_inputs, workdir=str(tmp_path / "bhtd"))
    assert folded.num_kernels == 1  # the four transposes are gone
    got = folded(q, k, v)
    assert torch.equal(got, plain(*plain_inputs).transpose(1, 2))
    assert torch.allclose(got, bthd(q, k, v), rtol=2e-5, atol=2e-6)


class AttentionLayouts(torch.nn.Module):
    """sdpa on q, k, v parameters and a weighted sum of its output. `mixed`: q heads outer
    (as a LLaMA block's rotary embeddings leave it), k and v [B, T, H, D] transposed in,
    the output transposed out (each folded on its own into attention's layout); else all
    heads outer, no transposes."""

    def __init__(self, mixed, q, k, v, c):
        super().__init__()
        self.mixed = mixed
        t = (lambda x: x) if mixed else (lambda x: x.transpose(1, 2).contiguous())
        self.q, self.k, self.v = (torch.nn.Parameter(x.clone()) for x in (q, t(k), t(v)))
        self.register_buffer("c", t(c))

    def forward(self, x):
        if self.mixed:
            y = F.scaled_dot_product_attention(self.q, self.k.transpose(1, 2), self.v.transpose(1, 2),
                                               is_causal=True)
            return (y.transpose(1, 2) * self.c).sum() + x.sum()
        return (F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=True) * self.c).sum() + x.sum()


@pytest.mark.parametrize("target", ["cpu", "cuda-emulated"])
def test_attention_layouts_fold_one_operand_at_a_time_with_the_same_bits(target, tmp_path):
    """With q heads outer and only k, v and the output transposed, each transpose folds
    into attention's layout on its own (no copy kernel), and the gradients of q, k and v
    are the all-heads-outer kernels' bit for bit, on the CPU and the emulated GPU."""
    from gptc.compiler import CompiledModel, capture_and_compile
    torch.manual_seed(4)
    b, t, h, d = 2, 37, 3, 8
    q, k, v, c = torch.randn(b, h, t, d), torch.randn(b, t, h, d), torch.randn(b, t, h, d), torch.randn(b, t, h, d)
    runs = {}
    for mixed in (True, False):
        model, x = AttentionLayouts(mixed, q, k, v, c), torch.zeros(1)
        cm = CompiledModel(*capture_and_compile(model, (x,), str(tmp_path / str(mixed)), "layouts-", "--grad",
                                                f"--target={target}"))
        runs[mixed] = cm.num_kernels, dict(zip([r[0] for r in cm.runtime.results],
                                               cm.runtime.run([cm.input_array("x", x)])))
    (k_mixed, mixed), (k_plain, plain) = runs[True], runs[False]
    assert k_mixed == k_plain  # no transpose left a kernel
    assert np.array_equal(mixed["grad.q"], plain["grad.q"])
    for name in ("grad.k", "grad.v"):
        assert np.array_equal(mixed[name], plain[name].transpose(0, 2, 1, 3)), name
    model = AttentionLayouts(True, q, k, v, c)
    model(torch.zeros(1)).backward()
    assert torch.allclose(torch.from_numpy(mixed["grad.k"]), model.k.grad, rtol=1e-4, atol=1e-5)


class GroupedHeads(torch.nn.Module):
    """sdpa with 6 query heads on 2 key/value heads: enable_gqa ("gqa"), or k and v repeated
    by repeat_interleave first ("repeat": torch.export writes it as transformers' repeat_kv
    does, unsqueeze, expand, reshape, which gptc reads as the grouped heads themselves), or
    repeated and multiplied by ones ("copy": the same values, but a computed tensor, so the
    heads are copied and their gradients summed back). Heads of 20 values: the gradient's
    group sums take 16 columns at once and a tail of 4."""

    def __init__(self, mode):
        super().__init__()
        self.mode = mode
        self.q = torch.nn.Parameter(torch.randn(2, 6, 19, 20))
        self.k, self.v = (torch.nn.Parameter(torch.randn(2, 2, 19, 20)) for _ in range(2))
        self.register_buffer("c", torch.randn(2, 6, 19, 20))
        self.register_buffer("one", torch.ones(2, 6, 19, 20))

    def forward(self, x):
        k, v = self.k, self.v
        if self.mode != "gqa":
            k, v = (t.repeat_interleave(3, dim=1) for t in (k, v))
        if self.mode == "copy":
            k, v = k * self.one, v * self.one
        y = F.scaled_dot_product_attention(self.q, k, v, is_causal=True,
                                           enable_gqa=self.mode == "gqa")
        return (y * self.c).sum() + x.sum()


@pytest.mark.parametrize("target", ["cpu", "cuda-emulated"])
def test_grouped_heads_read_in_place_give_the_repeated_heads_bits(target, tmp_path):
    """Grouped-query attention reads each key/value head for its query heads in place: the
    loss and the gradients of q, k and v are those of k and v copied per query head first,
    bit for bit, with fewer kernels, on the CPU and the emulated GPU; k and v repeated by
    repeat_interleave (repeat_kv's form) are read in place as enable_gqa's are."""
    from gptc.compiler import CompiledModel, capture_and_compile
    runs = {}
    for mode in ("gqa", "repeat", "copy"):
        torch.manual_seed(6)
        model, x = GroupedHeads(mode), torch.zeros(1)
        cm = CompiledModel(*capture_and_compile(model, (x,), str(tmp_path / mode), "gqa-",
                                                "--grad", f"--target={target}"))
        runs[mode] = cm.num_kernels, dict(zip([r[0] for r in cm.runtime.results],
                                              cm.runtime.run([cm.input_array("x", x)])))
    (k_gqa, gqa), (k_rep, rep), (k_copy, copy) = runs["gqa"], runs["repeat"], runs["copy"]
    assert k_gqa == k_rep < k_copy and "grad.k" in gqa
    for other in (rep, copy):
        assert set(other) - {"grad.one"} == set(gqa)
        for name, value in gqa.items():
            assert np.array_equal(value, other[name]), name
    torch.manual_seed(6)
    model = GroupedHeads("gqa")
    model(torch.zeros(1)).backward()
    assert torch.allclose(torch.from_numpy(gqa["grad.v"]), model.v.grad, rtol=1e-4, atol=1e-5)


class ScalarForms(torch.nn.Module):
    """`2 / w` (aten.reciprocal), `2 ** w` (aten.pow.Scalar) and torch.where with scalar
    branches (where.ScalarOther, where.ScalarSelf): their gradients, by gradcheck in f64."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 5))

    def forward(self, m):
        w = self.w
        return (2 / (w * w + 1) + 2 ** w + torch.where(m, w, 0.0) + torch.where(m, 1.5, w)).sum()


class RunningSums(torch.nn.Module):
    """cumsum along each dim of a parameter (its gradient a running sum the other way),
    and OPT's position ids from a padding mask, `cumsum(mask) * mask - 1`, as embedding
    rows."""

    def __init__(self):
        super().__init__()
        self.ws = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(3, 300, 7) * 10) for _ in range(3)])
        self.e = torch.nn.Embedding(12, 7)
        self.register_buffer("c", torch.randn(3, 300, 7))

    def forward(self, mask):
        pos = (torch.cumsum(mask, dim=1) * mask - 1).long() + 1
        rows = self.e(pos[:, :10])
        return sum((torch.cumsum(w, d) * self.c).sum() for d, w in enumerate(self.ws)) + (rows * rows).sum()


@pytest.mark.parametrize("target", ["cpu", "cuda-emulated"])
def test_cumsum_is_pytorchs_bits_forward_and_backward(target, tmp_path):
    """A running sum accumulates in f64 and rounds each prefix, as PyTorch's CPU kernel does,
    so the sums and their gradient (the running sums of g from the other end) are eager's bits,
    on the CPU and the emulated GPU; with f32 accumulation 300 terms would be off in the last
    bits. Position ids from a mask left-padded by 0 to 9 are exact, and only the embedding
    rows they select get a gradient."""
    from gptc.compiler import CompiledModel, capture_and_compile
    torch.manual_seed(8)
    model = RunningSums()
    mask = torch.ones(3, 300, dtype=torch.long)
    for b, pad in enumerate((0, 4, 9)):
        mask[b, :pad] = 0
    cm = CompiledModel(*capture_and_compile(model, (mask,), str(tmp_path), "cumsum-", "--grad",
                                            f"--target={target}"))
    out = dict(zip([r[0] for r in cm.runtime.results], cm.runtime.run([cm.input_array("mask", mask)])))
    loss = model(mask)
    loss.backward()
    for d, w in enumerate(model.ws):
        assert np.array_equal(out[f"grad.ws.{d}"], w.grad.numpy()), d
    assert np.array_equal(out["grad.e.weight"], model.e.weight.grad.numpy())
    assert (model.e.weight.grad.abs().sum(1) > 0).tolist() == [True] * 11 + [False]
    x = model.ws[0].detach()
    sums = Fn(lambda x: torch.stack([x.cumsum(d) for d in range(3)]))
    cm = CompiledModel(*capture_and_compile(sums, (x,), str(tmp_path / "fwd"), "sums-", f"--target={target}"))
    assert torch.equal(cm(x), sums(x))


class PaddedAttention(torch.nn.Module):
    """Causal attention of a padded batch, its mask built as transformers builds it: the
    causal mask of two aranges (input-independent) `&` the padding mask [B, 1, 1, T] (the
    input's). Row 0 is left-padded past its first key block (its first 35 queries see no
    key), row 1 right-padded, row 2 has a hole; the loss weights every output."""

    def __init__(self, t=70, c=16, heads=2, dropout=0.0):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.w = torch.nn.Parameter(torch.randn(c, 3 * c) / c ** 0.5)
        self.register_buffer("c", torch.randn(t, c))

    def forward(self, x, pad):
        b, t, c = x.shape
        q, k, v = (y.view(b, t, self.heads, -1).transpose(1, 2) for y in (x @ self.w).split(c, -1))
        i = torch.arange(t)
        causal = (i[None, :] <= i[:, None])[None, None]
        mask = causal & pad.bool()[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                           dropout_p=self.dropout if self.training else 0.0)
        return (y.transpose(1, 2).reshape(b, t, c) * self.c).sum()


def padded_attention_inputs(t=70, c=16):
    pad = torch.ones(3, t, dtype=torch.long)
    pad[0, :35] = 0
    pad[1, -9:] = 0
    pad[2, 20:30] = 0
    return torch.randn(3, t, c), pad


def test_padded_attention_is_one_kernel_with_a_key_mask_and_trains_as_eager(tmp_path):
    """The causal-and-padding mask reaches gpt.attention as is_causal and a key mask [B, S]:
    no scores are spelled out. Its gradient matches eager's (queries that see no key: zeros,
    as PyTorch's), and so does the f64 gradient check's, which runs the 4-row kernels."""
    torch.manual_seed(11)
    model, (x, pad) = PaddedAttention(), padded_attention_inputs()
    captured = gptc.capture(model, (x, pad))
    assert re.search(r'scaled_dot_product_attention.*"attn_mask".*is_causal = true.*tensor<3x1x1x70xi1>',
                     captured.mlir)
    assert "aten.__and__" not in captured.mlir
    compiled = gptc.compile(model, (x, pad), workdir=str(tmp_path / "fwd"))
    assert compiled.num_kernels <= 4  # the projection, attention, the weighted sum
    got = compiled(x, pad)
    with torch.no_grad():
        expected = model(x, pad)
    assert abs(got.item() - expected.item()) <= 2e-5 * abs(expected.item())
    x, pad = padded_attention_inputs(t=40, c=8)
    worst = gptc.gradcheck(PaddedAttention(t=40, c=8), (x.double(), pad),
                           workdir=str(tmp_path / "gradcheck"))
    assert set(worst) == {"w"} and worst["w"] < 1e-8, worst


def test_key_masked_attention_gradient_is_eagers_and_the_same_bits_on_both_targets(tmp_path):
    """The key-masked attention's gradient (AVX lane blocks on the CPU, a warp a row on the
    emulated GPU) is eager's within 2e-5, and the two targets give the same bits; two AdamW
    steps with attention dropout 0.1 (masks drawn by element index) give the same losses
    and weights on both."""
    from gptc.compiler import CompiledModel, capture_and_compile
    torch.manual_seed(12)
    x, pad = padded_attention_inputs()
    model, grads = PaddedAttention(), {}
    for t in ("cpu", "cuda-emulated"):
        cm = CompiledModel(*capture_and_compile(model, (x, pad), str(tmp_path / t), "padded-",
                                                "--grad", f"--target={t}"))
        feeds = [cm.input_array(n, v) for n, v in (("x", x), ("pad", pad))]
        grads[t] = dict(zip([r[0] for r in cm.runtime.results], cm.runtime.run(feeds)))["grad.w"]
    model(x, pad).backward()
    expected = model.w.grad.numpy()
    assert np.abs(grads["cpu"] - expected).max() <= 2e-5 * (np.abs(expected).max() + 1)
    assert np.array_equal(grads["cuda-emulated"], grads["cpu"])
    dropped = PaddedAttention(dropout=0.1).train()
    trained = {}
    for t in ("cpu", "cuda-emulated"):
        step = gptc.compile_train_step(dropped, (x, pad), optimizer=gptc.AdamW(lr=1e-2), seed=7,
                                       device=t, workdir=str(tmp_path / f"dropout-{t}"))
        losses = [step(x, pad).item() for _ in range(2)]
        trained[t] = (losses, step.state_dict()["w"])
    assert trained["cpu"][0] == trained["cuda-emulated"][0]
    assert torch.equal(trained["cpu"][1], trained["cuda-emulated"][1])


class InPlace(torch.nn.Module):
    """`y += x` and `y.mul_(2)` on a tensor a linear layer made (Falcon's `mlp_output +=
    attention_output`); `write` picks a write gptc cannot take as the functional op: into a
    view, into the input, or into a tensor a view read before the write shares."""

    def __init__(self, write=None):
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)
        self.write = write

    def forward(self, x):
        y = self.lin(x)
        if self.write == "view":
            y[:, :2] += 1.0
            return y
        if self.write == "input":
            x += 1.0
            return x * y
        if self.write == "shared":
            t = y.t()
            y += 1.0
            return t * 2.0
        y += x
        y.mul_(2.0)
        return (y * y + y).sum()


def test_in_place_writes_on_fresh_tensors_are_the_functional_ops(tmp_path):
    """A write into a tensor no one else sees compiles as its functional op and trains as
    eager; the other writes are one line naming the in-place op."""
    torch.manual_seed(3)
    model, x = InPlace(), torch.randn(5, 6)
    got = gptc.compile(model, (x,), workdir=str(tmp_path / "fresh"))(x.clone())
    assert torch.allclose(got, model(x.clone()), rtol=1e-5, atol=1e-6)
    assert "add_" not in gptc.capture(model, (x,)).mlir
    worst = gptc.gradcheck(model, (x.double(),))
    assert max(worst.values()) < 1e-8, worst
    for write in ("view", "input", "shared"):
        with pytest.raises(gptc.GptcError, match=r"^[^\n]*unsupported PyTorch op 'aten.add_.Tensor'"):
            gptc.compile(InPlace(write), (x,), workdir=str(tmp_path / write))


def test_scalar_forms_have_gradients():
    torch.manual_seed(0)
    worst = gptc.gradcheck(ScalarForms(), (torch.rand(3, 5) < 0.5,))
    assert set(worst) == {"w"} and worst["w"] < 1e-8, worst


class Kinks(torch.nn.Module):
    """One parameter per rule, each at its kinks: relu and abs at +0 and -0, clamp at its
    bounds, maximum, minimum and amax at ties (the gradient shared), sign's zero gradient;
    and the smooth ones beside them."""

    RULES = [F.relu, torch.abs, lambda p: p.clamp(-0.5, 0.5), lambda p: p.clamp(min=0.0),
             lambda p: torch.maximum(p, Kinks.other(p)), lambda p: torch.minimum(p, Kinks.other(p)),
             lambda p: F.leaky_relu(p, 0.1), torch.sigmoid, F.silu,
             lambda p: F.rms_norm(p, (p.shape[-1],), eps=1e-6), lambda p: p * p.sign(),
             lambda p: torch.cat([p, p], -1).amax(-1, keepdim=True),  # every maximum a tie
             lambda p: torch.logsumexp(p, -1, keepdim=True),
             lambda p: p.var(-1, keepdim=True) + p.std(0, unbiased=False)
             + (p - p.detach() + 0.5).std(0),  # std 0: gradient 0, as eager's (was NaN)
             lambda p: p.tril(1) + p.triu(3),
             lambda p: torch.sin(3 * p) * torch.cos(p)]

    @staticmethod
    def other(p):  # equal to p in row 1, to 0 in row 2 (where p has a zero too)
        q = torch.arange(p.numel(), dtype=p.dtype).view(p.shape) / p.numel() - 0.5
        return torch.cat([q[:1], p[1:2], torch.zeros_like(q[2:3]), q[3:]])

    def __init__(self, kinks=True):
        super().__init__()
        p = torch.randn(6, 8)
        if kinks:
            p[0, :4] = torch.tensor([0.0, -0.0, 0.5, -0.5])
            p[2, :2] = 0.0
        self.ps = torch.nn.ParameterList([torch.nn.Parameter(p.clone()) for _ in self.RULES])
        self.register_buffer("c", torch.randn(len(self.RULES), 6, 8))

    def forward(self, x):
        return sum((rule(p) * self.c[i] * x).sum() for i, (rule, p) in enumerate(zip(self.RULES, self.ps)))


def test_gradients_at_kinks_and_ties_are_pytorchs(tmp_path):
    """Each rule's f32 gradient from `--grad` against autograd's: at a kink a wrong rule is
    off by a whole coefficient (~1), not by rounding."""
    from gptc.compiler import CompiledModel, capture_and_compile
    torch.manual_seed(0)
    model = Kinks()
    x = torch.ones(6, 8)
    compiled = CompiledModel(*capture_and_compile(model, (x,), str(tmp_path), "kinks-", "--grad"))
    rt = compiled.runtime
    out = dict(zip([r[0] for r in rt.results], rt.run([compiled.input_array("x", x)])))
    model(x).backward()
    for i, p in enumerate(model.ps):
        got = torch.from_numpy(out[f"grad.ps.{i}"])
        assert torch.allclose(got, p.grad, rtol=1e-5, atol=1e-6), (i, got - p.grad)


def test_activations_have_gradients():
    torch.manual_seed(1)
    worst = gptc.gradcheck(Kinks(kinks=False), (torch.rand(6, 8) + 0.5,))
    assert len(worst) == len(Kinks.RULES) and max(worst.values()) < 1e-8, worst


class Strided(torch.nn.Module):
    """Every other element, every third from the second, every other row (GPT-J's
    rotate_every_two), and a gather of a table's rows 0..T-1 at arange positions."""

    def __init__(self):
        super().__init__()
        self.p = torch.nn.Parameter(torch.randn(7, 9))
        self.table = torch.nn.Parameter(torch.randn(12, 9))

    def forward(self, x):
        p = self.p
        index = torch.arange(7).view(1, 7, 1).expand(2, 7, 9)
        rows = torch.gather(self.table.repeat(2, 1, 1), 1, index)
        return ((p[:, ::2] * x[:, ::2]).sum() + (p[:, 1::3] ** 2).sum() + (p[1::2] * x[1::2]).sum()
                + (rows * x).sum())


def test_strided_slices_and_gathered_runs_have_gradients(tmp_path):
    torch.manual_seed(5)
    x = torch.randn(7, 9, dtype=torch.float64)
    assert "aten.gather" not in gptc.capture(Strided().double(), (x,)).mlir
    worst = gptc.gradcheck(Strided(), (x,))
    assert set(worst) == {"p", "table"} and max(worst.values()) < 1e-8, worst


def test_pow_of_a_half_is_sqrt_at_special_values(tmp_path):
    """x ** 0.5 and x ** -0.5 are PyTorch's sqrt and rsqrt: NaN at -inf (C's pow gives +inf),
    -0.0 at -0.0, and eager's bits at these values. (Elsewhere gptc's sqrt is IEEE's, correctly
    rounded; this machine's eager sqrt is 1 ulp off in about 15 % of random floats.) Other
    non-integer powers of -inf are +inf or +0, as in C and eager (they were NaN)."""
    x = torch.tensor([float("-inf"), -0.0, 0.0, -1.0, 4.0, 2.0, 1e-30, float("inf")])
    model = Fn(lambda a: torch.cat([a ** 0.5, a ** -0.5, a[:1] ** 1.5, a[:1] ** -1.5, a[:1] ** 0.3]))
    got, expected = gptc.compile(model, (x,), workdir=str(tmp_path))(x), model(x)
    assert got[-3:].tolist() == [float("inf"), 0.0, float("inf")]
    # An exponent not exact in f32 stays in double, as in PyTorch (0.3 rounded to f32 gave
    # 1e-30 ** 0.3 7 ulp off); a scalar base is rounded to f32 in both.
    y = torch.tensor([1e-30, 2.0, 12345.678, 0.5, 3e20, 7.0])
    inexact = Fn(lambda a: torch.cat([a ** 0.3, 0.1 ** a, a ** (1 / 3)]))
    got_y = gptc.compile(inexact, (y,), workdir=str(tmp_path / "inexact"))(y)
    assert torch.equal(got_y.view(torch.int32), inexact(y).view(torch.int32)), (got_y, inexact(y))
    assert torch.equal(got.isnan(), expected.isnan())
    ok = ~expected.isnan()
    assert torch.equal(got[ok].view(torch.int32), expected[ok].view(torch.int32)), (got, expected)


def test_squares_and_cubes_are_eagers_products(tmp_path):
    """x ** 2 and x ** 3 are PyTorch's x * x and (x * x) * x, bit for bit (the cube was
    computed in double and rounded once: a bit apart for about a quarter of these floats)."""
    torch.manual_seed(0)
    x = torch.randn(4096) * 10.0 ** torch.randint(-10, 10, (4096,))
    model = Fn(lambda a: torch.cat([a ** 2, a ** 3, a ** 3.0]))
    got, expected = gptc.compile(model, (x,), workdir=str(tmp_path))(x), model(x)
    assert torch.equal(got.view(torch.int32), expected.view(torch.int32))


def test_comparisons_promote_as_pytorch_does(tmp_path):
    """Each side's type as PyTorch promotes it (found by a probe): an integer or bool tensor
    against a non-integer Python float compares in f32, not f64; an f32 tensor against a
    rank-0 f64 tensor in f32; an integer tensor against a rank-0 f64 tensor in f64."""
    i = torch.tensor([1, 16777217, -3])
    b = torch.tensor([True, False, True])
    x = torch.tensor([0.1, 1.0, -0.0])
    s = torch.tensor([0.1], dtype=torch.float64)

    def fn(i, b, x, s):
        s0 = s.reshape(())
        return torch.stack([i < 1.00000001, i <= 16777216.5, b < 1.00000001, b == 2,
                            x == s0, s0 >= x, i > s0 * 10, i == s0])

    model = Fn(fn)
    inputs = (i, b, x, s)
    got = gptc.compile(model, inputs, workdir=str(tmp_path))(*inputs)
    assert torch.equal(got, fn(*inputs)), (got, fn(*inputs))


def test_relu_and_clamp_at_signed_zeros_and_nan_bounds(tmp_path):
    """relu(-0.0) is -0.0 (it was +0.0) and a NaN clamp bound gives NaN everywhere (it gave
    x), as in eager; the bits of the rest are eager's too."""
    x = torch.tensor([-0.0, 0.0, -1.0, 2.0, float("nan"), float("-inf")])

    def fn(x):
        return torch.stack([F.relu(x), x.clamp(min=float("nan")), x.clamp(max=float("nan")),
                            x.clamp(-0.0, 1.0)])

    got, expected = gptc.compile(Fn(fn), (x,), workdir=str(tmp_path))(x), fn(x)
    assert torch.equal(got.isnan(), expected.isnan())
    ok = ~expected.isnan()
    assert torch.equal(got[ok].view(torch.int32), expected[ok].view(torch.int32)), (got, expected)


def test_rank0_inputs_and_integer_sums(tmp_path):
    """A rank-0 input runs (numpy's ascontiguousarray had made it 1-D, and the runtime refused
    it), and reduces over its dim 0 or -1 as PyTorch allows; an integer sum is one line
    naming the op, not a verifier's message."""
    x = torch.tensor(0.3)
    fn = lambda a: a * 2 + 1 + a.sum(0) + a.amax(-1) + torch.logsumexp(a, 0)  # noqa: E731
    compiled = gptc.compile(Fn(fn), (x,), workdir=str(tmp_path / "r0"))
    assert torch.allclose(compiled(x), fn(x))
    with pytest.raises(gptc.GptcError, match=r"^.*unsupported PyTorch op 'aten.sum.dim_IntList' "
                                             r"\(integer and bool reductions are not supported\)"):
        gptc.compile(Fn(lambda i: i.sum(0)), (torch.ones(3, 2, dtype=torch.long),),
                     workdir=str(tmp_path / "int"))


def test_a_data_dependent_shape_is_one_line(tmp_path):
    """repeat_interleave with tensor repeats has a shape torch.export leaves symbolic; the
    capture raised torch's own GuardOnDataDependentSymNode, with an empty message."""
    with pytest.raises(gptc.GptcError, match=r"^a tensor whose shape depends on the data .* "
                                             r"gptc compiles static shapes only$"):
        gptc.compile(Fn(lambda x: x.repeat_interleave(torch.tensor([1, 2]), dim=0)),
                     (torch.randn(2, 3),), workdir=str(tmp_path))


class SumEpilogues(torch.nn.Module):
    """RMSNorm (a row sum of squares, its rsqrt, the scaling of the row), a column sum's
    tanh (16 sums per call), the epilogue of a sum whose operand is read elsewhere, and a
    softmax by hand (the exponentials the sum adds computed again for the division)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(48))

    def forward(self, x):
        rms = F.rms_norm(x, (x.shape[-1],), self.w)
        y = x * 2
        col = torch.tanh(y.sum(0, keepdim=True) * 0.25 + 1)
        e = torch.exp(x * self.w - (x * self.w).amax(-1, keepdim=True))
        soft = e / e.sum(-1, keepdim=True)
        return ((rms + y + col + soft) ** 2).sum()


def test_sums_with_an_epilogue_are_bitwise_the_unfused_ones(tmp_path):
    """gpt-fuse-elementwise puts the ops computed from a finished sum into the sum's
    kernel; -O3 gives -O0's bits, the loss alone (where the softmax's exponentials are
    computed again after its sum) and with the gradient, with fewer kernels."""
    from gptc.compiler import CompiledModel, capture_and_compile
    torch.manual_seed(0)
    model, x = SumEpilogues(), torch.randn(5, 48) * 3
    for grad in ((), ("--grad",)):
        runs = {}
        for opt in ("-O0", "-O3"):
            c = CompiledModel(*capture_and_compile(model, (x,), str(tmp_path / (opt + ("-grad" if grad else ""))),
                                                   "epi-", opt, *grad))
            rt = c.runtime
            runs[opt] = c.num_kernels, dict(zip([r[0] for r in rt.results],
                                                rt.run([c.input_array("x", x)])))
        (k0, out0), (k3, out3) = runs["-O0"], runs["-O3"]
        assert k3 < k0 and set(out0) == set(out3) and ("grad.w" in out3) == bool(grad)
        for name, value in out0.items():
            assert np.array_equal(value, out3[name]), name
    loss = model(x)
    loss.backward()
    assert torch.allclose(torch.from_numpy(out3["grad.w"]), model.w.grad, rtol=1e-4, atol=1e-4)


class GeluMlp(torch.nn.Module):
    """Linear -> GELU -> linear: the GELU's input gradient takes the second layer's input
    gradient (a product) as its incoming gradient."""

    def __init__(self, approximate):
        super().__init__()
        self.approximate = approximate
        self.fc, self.proj = torch.nn.Linear(24, 40), torch.nn.Linear(40, 24)

    def forward(self, x):
        return (self.proj(F.gelu(self.fc(x), approximate=self.approximate)) ** 2).sum()


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("target", ["cpu", "cuda-emulated"])
def test_gelu_gradient_as_a_product_epilogue_is_bitwise_the_unfused_one(approximate, target, tmp_path):
    """On the GPU targets gpt-fuse-matmul-epilogue makes a GELU's input gradient the
    epilogue of the product that computes its incoming gradient (a kernel less); the CPU
    keeps it a kernel of its own (reading the forward's kept erf). Either way -O3 gives
    -O0's gradients bit for bit, and they are PyTorch's to rounding."""
    from gptc.compiler import CompiledModel, capture_and_compile
    torch.manual_seed(0)
    model, x = GeluMlp(approximate), torch.randn(3, 7, 24) * 2
    runs = {}
    for opt in ("-O0", "-O3"):
        c = CompiledModel(*capture_and_compile(model, (x,), str(tmp_path / opt), "gelu-mm-", opt,
                                               "--grad", f"--target={target}"))
        source = open(os.path.join(c.artifact_dir, "kernels.cu" if "cuda" in target else "kernels.cpp")).read()
        runs[opt] = (c.num_kernels, "// gpt.gelu_grad " in source,
                     dict(zip([r[0] for r in c.runtime.results], c.runtime.run([c.input_array("x", x)]))))
    (k0, lone0, out0), (k3, lone3, out3) = runs["-O0"], runs["-O3"]
    assert lone0 and lone3 == (target == "cpu") and k3 < k0
    for name, value in out0.items():
        assert np.array_equal(value, out3[name]), name
    model(x).backward()
    assert torch.allclose(torch.from_numpy(out3["grad.fc.weight"]), model.fc.weight.grad, rtol=1e-4, atol=1e-3)
