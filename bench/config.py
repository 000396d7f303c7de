"""What the bench's tools share: the sizes they time, AdamW's settings, the frameworks, and
the targets (issue 4) a run is judged against. Imports nothing from bench/, so every tool
can import it."""

# The two sizes the bench times (train_step.py builds them) and AdamW's settings for all.
SIZES = {
    "tiny": dict(n_layer=2, n_head=2, n_embd=64, block_size=64, vocab_size=65, batch=8),
    "shakespeare": dict(n_layer=6, n_head=6, n_embd=384, block_size=256, vocab_size=65, batch=4),
}
HYPER = dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1, eps=1e-8)
# Per size, the timed and warm-up steps of a round.
STEPS = {"tiny": (200, 50), "shakespeare": (10, 3)}
FRAMEWORKS = ("gptc", "eager", "compile")

# The targets: gptc's median step at least this many times faster than eager's, per size;
# the matmul micro-kernel at this fraction of the measured FMA peak; at most
# KERNELS_PER_LAYER kernels a layer plus KERNELS_EXTRA a step.
SPEEDUP = {"tiny": 2.0, "shakespeare": 1.3}
MICRO_KERNEL = 0.85
KERNELS_PER_LAYER, KERNELS_EXTRA = 25, 15


# The moonshot (issue 40): the whole Shakespeare-size step at this fraction of the cores'
# FMA peak (the micro-kernel's measured peak of one core, times the threads).
STEP_PEAK_MOONSHOT = 0.60


def step_flops(params: int, n_layer: int, n_head: int, n_embd: int, block_size: int,
               tokens: int) -> int:
    """A training step's floating-point operations as nanoGPT's estimate_mfu counts them
    (PaLM's appendix B): 6 a parameter a token for the products (2 forward, 4 backward),
    `params` counting each weight once (a tied embedding once, as lm_head's weight) and not
    the position embedding, which is looked up rather than multiplied; and 12 L H Q T a
    token for attention's scores and weighted sums over the whole T x T (the causal half
    that is masked counts too). Normalisation, activations and AdamW are left out."""
    head = n_embd // n_head
    return tokens * (6 * params + 12 * n_layer * n_head * head * block_size)


def kernel_budget(size: str) -> int:
    """The most kernels a step of `size` may launch."""
    return KERNELS_PER_LAYER * SIZES[size]["n_layer"] + KERNELS_EXTRA


def hf_model(kind: str, n_layer: int, n_head: int, n_embd: int, vocab_size: int,
             positions: int, dropout: float = 0.0):
    """transformers' GPT2LMHeadModel ("hf-gpt2"), LlamaForCausalLM ("hf-llama") or
    FalconForCausalLM ("hf-falcon", generation only: one key/value head, its own attention
    code) at these sizes, from the current torch seed. LLaMA at gptc.testing.llama_style's
    sizes: 2 key/value heads, SwiGLU 8/3 wide rounded up to a multiple of 32."""
    import transformers
    transformers.logging.set_verbosity_error()
    ids = dict(vocab_size=vocab_size, bos_token_id=0, eos_token_id=0)
    if kind == "hf-gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_layer=n_layer, n_head=n_head, n_embd=n_embd, n_positions=positions,
            resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout, **ids))
    if kind == "hf-falcon":
        return transformers.FalconForCausalLM(transformers.FalconConfig(
            hidden_size=n_embd, num_hidden_layers=n_layer, num_attention_heads=n_head,
            max_position_embeddings=positions, hidden_dropout=dropout,
            attention_dropout=dropout, **ids))
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=n_embd, intermediate_size=(8 * n_embd // 3 + 31) // 32 * 32,
        num_hidden_layers=n_layer, num_attention_heads=n_head, num_key_value_heads=2,
        max_position_embeddings=positions, **ids))
