"""A LLaMA-style relative of nanoGPT's GPT, for gptc's tests and bench: RMSNorm before
attention and MLP (no biases anywhere), rotary position embeddings (cos/sin tables as
buffers, applied by halves with chunk and cat), grouped-query attention
(F.scaled_dot_product_attention with enable_gqa), a SwiGLU MLP and an untied output head.
forward(idx, targets) returns (logits, loss) as nanoGPT's GPT does."""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class LlamaConfig:
    block_size: int = 64
    vocab_size: int = 65
    n_layer: int = 2
    n_head: int = 4
    n_kv_head: int = 2
    n_embd: int = 64
    rope_base: float = 10000.0


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head, self.n_kv_head = cfg.n_head, cfg.n_kv_head
        self.hs = cfg.n_embd // cfg.n_head
        self.attn_norm, self.mlp_norm = nn.RMSNorm(cfg.n_embd), nn.RMSNorm(cfg.n_embd)
        self.q = nn.Linear(cfg.n_embd, cfg.n_embd, bias=False)
        self.kv = nn.Linear(cfg.n_embd, 2 * cfg.n_kv_head * self.hs, bias=False)
        self.o = nn.Linear(cfg.n_embd, cfg.n_embd, bias=False)
        hidden = (8 * cfg.n_embd // 3 + 31) // 32 * 32  # LLaMA's 8/3 C, to a multiple of 32
        self.gate = nn.Linear(cfg.n_embd, hidden, bias=False)
        self.up = nn.Linear(cfg.n_embd, hidden, bias=False)
        self.down = nn.Linear(hidden, cfg.n_embd, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape

        def rotary(t):  # t [B, heads, T, hs]: rotate the two halves of each head
            t1, t2 = t.chunk(2, dim=-1)
            return torch.cat((t1 * cos - t2 * sin, t2 * cos + t1 * sin), dim=-1)

        h = self.attn_norm(x)
        q = rotary(self.q(h).view(B, T, self.n_head, self.hs).transpose(1, 2))
        k, v = (t.view(B, T, self.n_kv_head, self.hs).transpose(1, 2)
                for t in self.kv(h).split(self.n_kv_head * self.hs, dim=2))
        y = F.scaled_dot_product_attention(q, rotary(k), v, is_causal=True, enable_gqa=True)
        x = x + self.o(y.transpose(1, 2).reshape(B, T, C))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class LlamaStyle(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = nn.RMSNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        hs = cfg.n_embd // cfg.n_head
        inv_freq = 1.0 / (cfg.rope_base ** (torch.arange(0, hs, 2).float() / hs))
        angles = torch.outer(torch.arange(cfg.block_size).float(), inv_freq)
        self.register_buffer("cos", angles.cos()[None, None], persistent=False)
        self.register_buffer("sin", angles.sin()[None, None], persistent=False)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        x = self.wte(idx)
        cos, sin = self.cos[:, :, :T], self.sin[:, :, :T]
        for block in self.blocks:
            x = block(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
        return logits, loss
