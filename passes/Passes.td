#ifndef GPTC_PASSES_TD
#define GPTC_PASSES_TD

include "mlir/Pass/PassBase.td"

def PlanMemory : Pass<"gpt-plan-memory", "mlir::func::FuncOp"> {
  let summary = "Assign every intermediate tensor a slot in one arena, reusing by liveness";
  let description = [{
    Each op result that needs storage gets a 64-byte-aligned byte offset in a
    single arena (`gpt.offsets`, one per result); the function gets
    `gpt.arena_bytes`. Function arguments live outside the arena, constants
    are emitted as static data, and gpt.reshape aliases its input (all tensors
    are dense row-major). A slot is reused once every reader of the value
    (and of its reshape aliases) has run; an op's results never overlap its
    own operands, with one exception: a result that updates an argument
    (`gpt.updates`, a parameter or optimizer moment) is written into that
    argument in place (`gpt.in_place`, offset -1) when an elementwise kernel
    computes it from the argument at the same index and nothing reads the old
    value afterwards.

    Views (`gpt.view`, no kernel): a split along the last dim of a [B, T, C]
    result whose pieces only attention and attention_grad read (as q, k, v in
    the [B, T, H, D] layout, through a reshape) leaves the pieces in their
    columns of the operand's slot, which lives as long as they are read; a
    concat along the last dim of attention_grad results that nothing else
    reads takes its slot when they are computed, and they are written into
    their columns of it. Attention's kernels read and write such operands with
    their rows the wider buffer's last dim apart. `views=false` (gptc compile
    -O0) keeps them copies, one kernel each; the bits are the same.

    `redzone=N` (gptc compile --sanitize) reuses no slot and leaves N bytes
    (rounded up to 64) before, between and after the buffers; the function gets
    `gpt.redzone`, and the code generator poisons those bytes for
    AddressSanitizer, so that a kernel reading or writing past its buffer is
    reported instead of touching a neighbour's.

    Before:
    ```mlir
    %0 = gpt.exp %a : tensor<16xf32>
    %1 = gpt.exp %0 : tensor<16xf32>
    %2 = gpt.exp %1 : tensor<16xf32>
    ```
    After (%2 reuses %0's slot):
    ```mlir
    %0 = gpt.exp %a {gpt.offsets = array<i64: 0>} : tensor<16xf32>
    %1 = gpt.exp %0 {gpt.offsets = array<i64: 64>} : tensor<16xf32>
    %2 = gpt.exp %1 {gpt.offsets = array<i64: 0>} : tensor<16xf32>
    ```
  }];
  let options = [
    Option<"views", "views", "bool", "true",
           "the split and concat around attention as views (no copy, no kernel)">,
    Option<"redzone", "redzone", "int64_t", "0",
           "bytes left between buffers, and no slot reused (gptc compile --sanitize)">,
  ];
}

def RaiseAttention : Pass<"gpt-raise-attention", "mlir::func::FuncOp"> {
  let summary = "Make attention spelled out with a causal mask buffer one gpt.attention";
  let description = [{
    nanoGPT's attention without flash (minGPT's too): softmax of the scaled
    scores masked with -inf where a tril(ones) buffer is 0, perhaps dropped
    out, times v, at rank 4 ([B, H, T, D]) or, one head of a model whose heads
    are modules (Karpathy's lecture GPT), at rank 3 ([B, T, D]: attention on
    [B, 1, T, D] between reshapes). When the buffer's argument carries
    `gpt.tril_ones` (the capture checked its value) and no intermediate has
    another reader, the ops become one causal `gpt.attention` with the
    constant scale (1 / d for scores divided by a constant d), the dropout's
    p and id and its rng. The raised op sums in attention's own
    order, so the pass runs at every -O level, right after the conversion.

    Before:
    ```mlir
    %kt = gpt.transpose %k {perm = array<i64: 0, 1, 3, 2>}
    %s = gpt.matmul %q, %kt {...}
    %a = gpt.mul %s, %c              // %c = gpt.constant dense<0.125> : tensor<f32>
    %m = gpt.compare %bias, %zero {predicate = "eq"}
    %f = gpt.masked_fill %a, %m {value = 0xFFF0000000000000 : f64}
    %p = gpt.softmax %f {dim = 3 : i64, ...}
    %d = gpt.dropout %p, %rng {id = 1 : i64, p = 1.000000e-01 : f64, train = true}
    %y = gpt.matmul %d, %v {...}
    ```
    After:
    ```mlir
    %y, %stats = gpt.attention %q, %k, %v, %rng {dropout_p = 1.000000e-01 : f64, id = 1 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 1.250000e-01 : f64}
    ```
  }];
  let dependentDialects = ["mlir::gpt::GptDialect"];
}

def Autodiff : Pass<"gpt-autodiff", "mlir::func::FuncOp"> {
  let summary = "Append the gradient of the loss with respect to every parameter";
  let description = [{
    Reverse-mode differentiation over the gpt dialect. Seeds the loss result
    (`loss-index`, by default the last scalar result) with 1, visits the ops in
    reverse program order and asks each op for its vector-Jacobian product
    (VjpOpInterface); the backward ops are placed before the return. A value
    used several times (a tied weight) gets the sum of its uses' gradients in
    increasing program order of the uses: ((g1 + g2) + g3). Appends one result
    per `gpt.kind = "param"` argument, named `grad.<param>` with
    `gpt.grad_of = "<param>"`; a parameter no path reaches gets zeros.

    Before:
    ```mlir
    func.func @f(%w: tensor<4xf32> {gpt.kind = "param", gpt.name = "w"}, %x: tensor<4xf32>) -> tensor<f32> {
      %0 = gpt.mul %w, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %1 = gpt.reduce_sum %0 {...} : (tensor<4xf32>) -> tensor<f32>
      return %1 : tensor<f32>
    }
    ```
    After: the same, then the broadcast of the seed and `gpt.mul %g, %x`,
    returned as a second result `{gpt.grad_of = "w", gpt.name = "grad.w"}`.
  }];
  let options = [
    Option<"lossIndex", "loss-index", "int64_t", "-1",
           "Which result is the loss (-1: the last scalar floating-point result)">
  ];
}

def AdamW : Pass<"gpt-adamw", "mlir::func::FuncOp"> {
  let summary = "Replace gradients by a clipped AdamW update of the parameters";
  let description = [{
    Consumes the `gpt.grad_of` results of gpt-autodiff and builds, as gpt ops,
    torch.nn.utils.clip_grad_norm_ followed by torch.optim.AdamW's update:
    total = sqrt(sum_i ||g_i||^2) (each tensor's sum of squares a canonical
    reduction, then tensors in parameter order); g *= min(clip / (total +
    1e-6), 1); then per parameter, with decay only for tensors of rank >= 2:
    p *= 1 - lr wd; m += (g - m)(1 - b1); v = v b2 + (1 - b2) g g;
    p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
    Adds the inputs `lr` and `step` (f64 scalars, t = step), one `state`
    argument per moment (`exp_avg.<p>`, `exp_avg_sq.<p>`, zero at first), the
    results updating each parameter and moment in place (`gpt.updates`), and a
    `grad_norms` result: each parameter's gradient norm before clipping, for
    the gradient-flow check. With `accumulated`, the gradients come from the
    accumulation's states instead, and the forward is dropped.
  }];
  let options = [
    Option<"beta1", "beta1", "double", "0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", "0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", "1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0.01", "decoupled weight decay (rank >= 2 tensors)">,
    Option<"gradClip", "grad-clip", "double", "0.0", "max total gradient norm (0: no clipping)">,
    Option<"accumulated", "accumulated", "int64_t", "0",
           "0: the gradients are the gpt.grad_of results. N > 0: they are the `grad.<p>` "
           "states that gpt-accumulate-gradients summed over N micro-batches, each scaled "
           "by 1/N (as a loss divided by N); the function's other results, and whatever "
           "only they read, are dropped (no forward runs)">
  ];
}

def AccumulateGradients : Pass<"gpt-accumulate-gradients", "mlir::func::FuncOp"> {
  let summary = "Add a micro-batch's gradients into state that outlives the call";
  let description = [{
    Gradient accumulation's first program: consumes the `gpt.grad_of` results
    of gpt-autodiff and adds each into a `state` argument `grad.<p>` (zero at
    first) in place: g_acc = first ? g : g_acc + g, where `first` is a new
    i1 scalar input (true on a step's first micro-batch, so that no zeroing
    pass is needed and a NaN of an earlier step is not carried). The sums are
    in micro-batch order. A parameter no gradient reaches gets no state, and
    its zero gradient is dropped; the other results (the loss) stay.
    gpt-adamw{accumulated=N} is the second program, over the same states.
  }];
}

def PromoteF64 : Pass<"gpt-promote-f64", "mlir::func::FuncOp"> {
  let summary = "Compute a function in f64: every f32 tensor becomes f64";
  let description = [{
    Rewrites the types of arguments, results and every op result from f32 to
    f64, and widens f32 constants exactly. gptc check --gradcheck runs it so
    that any captured model has an f64 twin for central differences; the
    runtime widens f32 weights when it loads them into f64 parameters.

    Before: `%0 = gpt.exp %a : tensor<4xf32>`; after: `%0 = gpt.exp %a : tensor<4xf64>`.
  }];
}

def KeepGeluErf : Pass<"gpt-keep-gelu-erf", "mlir::func::FuncOp"> {
  let summary = "Have an exact GELU keep its erf for the gelu_grad of the same input";
  let description = [{
    An exact `gpt.gelu %x` whose result only matmuls read (a GPT's MLP: a
    kernel of its own anyway), followed by exact `gpt.gelu_grad %g, %x` (the
    backward autodiff builds), becomes `gpt.gelu_keep_erf %x`, whose second
    result, erf(x / sqrt 2), each such gelu_grad takes as its `erf` operand
    instead of evaluating erf again. The value is the one the gradient would
    compute, so the bits are unchanged; the cost is one buffer of x's size,
    live from the forward to the backward. Runs after autodiff, before
    gpt-fuse-elementwise; gptc compile -O0 skips it.

    Before (%y read by matmuls):
    ```mlir
    %y = gpt.gelu %x {approximate = "none"} : tensor<8x16xf32>
    %d = gpt.gelu_grad %g, %x {approximate = "none"} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    ```
    After:
    ```mlir
    %y, %e = gpt.gelu_keep_erf %x : tensor<8x16xf32>
    %d = gpt.gelu_grad %g, %x erf %e {approximate = "none"} : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    ```
  }];
  let dependentDialects = ["mlir::gpt::GptDialect"];
}

def PairWeightGradients : Pass<"gpt-pair-weight-gradients", "mlir::func::FuncOp"> {
  let summary = "Move each weight gradient beside the next input gradient";
  let description = [{
    A `gpt.matmul` with `transpose_lhs` (a weight gradient, X^T dY, read only by
    the optimizer) moves to right after the next matmul without it (the next
    layer's input gradient), when nothing in between reads its result, so that
    gpt-fuse-horizontal groups the two products and the GPU runs them as
    parallel branches. No op changes, so the bits are unchanged; the weight
    gradient's operands stay live until it. For the GPU targets; runs after
    gpt-fuse-elementwise, before gpt-fuse-horizontal; gptc compile -O0 skips it.
  }];
  let dependentDialects = ["mlir::gpt::GptDialect"];
}

def RecomputeActivations : Pass<"gpt-recompute-activations", "mlir::func::FuncOp"> {
  let summary = "Have the backward compute GELU and LayerNorm outputs again instead of keeping them";
  let description = [{
    A `gpt.gelu` or `gpt.layer_norm` before the loss (the function's last
    scalar floating-point result, as gpt-autodiff takes it) whose result ops
    after the loss read (a GPT's weight gradients: c_proj's reads the GELU's
    output, q/k/v's, the MLP's first and lm_head's a LayerNorm's) gets a second
    op of the same operands right before the first of those readers, which read
    it instead: the forward's output is free once the forward has read it. Only
    where each operand is live there anyway (an argument, or read at or after
    that point, as the gradients read the GELU's and the LayerNorm's inputs), so
    nothing is held longer. The same op of the same operands, so the bits are
    unchanged; the cost is one more kernel a recomputed op. For the GPU targets
    (the CPU keeps the outputs). Runs after autodiff, before fusion; gptc
    compile -O0 skips it.

    Before:
    ```mlir
    %y = gpt.gelu %x {approximate = "none"} : tensor<8x16xf32>
    %m = gpt.matmul %y, %w {...}
    %l = gpt.cross_entropy %m, %t {...}
    %d = gpt.matmul %g, %y {...}
    %e = gpt.gelu_grad %h, %x {...}
    ```
    After:
    ```mlir
    %y = gpt.gelu %x {approximate = "none"} : tensor<8x16xf32>
    %m = gpt.matmul %y, %w {...}
    %l = gpt.cross_entropy %m, %t {...}
    %y2 = gpt.gelu %x {approximate = "none"} : tensor<8x16xf32>
    %d = gpt.matmul %g, %y2 {...}
    %e = gpt.gelu_grad %h, %x {...}
    ```
  }];
  let dependentDialects = ["mlir::gpt::GptDialect"];
}

def FuseMatmulEpilogue : Pass<"gpt-fuse-matmul-epilogue", "mlir::func::FuncOp"> {
  let summary = "Fold a matmul's bias add, dropout and residual add into the matmul (its epilogue)";
  let description = [{
    A chain that follows a gpt.matmul, each op the only user of the one before,
    folds into the matmul, step by step and in this order only:
    `gpt.add` of a [N] vector (a linear layer's bias) becomes `bias`, a training
    `gpt.dropout` becomes `dropout` (its rng, p and id), `gpt.add` of a
    tensor of the result's type (a residual connection) becomes `plus`, and
    with gelu-grad a `gpt.gelu_grad` whose incoming gradient is the product
    becomes `gelu_grad` (its x, and erf where kept). The
    code generator applies them to each finished product before the store,
    with the ops' own expressions (the same dropout draw for element i;
    addition commutes exactly): one kernel, the unfused bits. Runs after
    autodiff, before gpt-fuse-elementwise; gptc compile -O0 skips it.

    Before:
    ```mlir
    %m = gpt.matmul %x, %w {...} : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
    %a = gpt.add %m, %b : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    %d = gpt.dropout %a, %rng {id = 3 : i64, p = 1.000000e-01 : f64, train = true} : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<8x4xf32>
    %y = gpt.add %r, %d : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    ```
    After:
    ```mlir
    %y = gpt.matmul %x, %w bias %b dropout %rng plus %r {dropout_id = 3 : i64, dropout_p = 1.000000e-01 : f64, ...} : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<2xi64>, tensor<8x4xf32>) -> tensor<8x4xf32>
    ```
  }];
  let options = [
    Option<"geluGrad", "gelu-grad", "bool", "false",
           "also fold a GELU's input gradient into the product that computes its incoming gradient (the GPU targets)">,
  ];
  let dependentDialects = ["mlir::gpt::GptDialect"];
}

def FuseElementwise : Pass<"gpt-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Fuse runs of elementwise ops of one shape into gpt.fused kernels";
  let description = [{
    Consecutive elementwise ops (arithmetic, comparisons, math functions,
    gelu and its gradient, convert, where, masked_fill, broadcast) whose results share a
    shape become one gpt.fused op: one kernel that computes every element
    through the same scalar expressions in the same order. Values used only
    inside the run stay in registers; the others are the kernel's results.
    A run whose last value only feeds a gpt.reduce_sum (and nothing else of the
    run is used elsewhere) takes the reduction in as the kernel's result: the
    body becomes the element the canonical sum adds, so the order of the sum is
    the unfused one. The ops right after a reduce_sum (fused or not) that have
    its shape join its kernel as its epilogue, computed from each finished sum
    (RMSNorm's rsqrt of the mean square); after a row's sum (trailing dims,
    kept), so do the ops of the row's shape that follow, computed per element
    from the row's sum (RMSNorm's scaling). The fused program is bitwise
    identical to the unfused one
    (gptc compile -O0 skips this pass). gpt.stop_gradient, which only
    gpt-autodiff reads, is dropped first (unless returned) so that it does not
    cut a run. Then an elementwise op whose first user is an elementwise op of
    its shape that starts a run (after a matmul, or after a sum it cannot join)
    moves down to just before it, so that the two share a kernel (SwiGLU's
    silu(a) * b, where b's matmul comes between; RMSNorm's gradient's dy * w,
    past the weight's column sum).

    Before:
    ```mlir
    %0 = gpt.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %1 = gpt.tanh %0 : tensor<4x8xf32>
    ```
    After: one `gpt.fused %x, %b` whose body holds the add and the tanh.
  }];
  let dependentDialects = ["mlir::gpt::GptDialect"];
}

def StridedViews : Pass<"gpt-strided-views", "mlir::func::FuncOp"> {
  let summary = "Transposes, splits, slices and concats that elementwise kernels read or write in place";
  let description = [{
    A gpt.transpose, gpt.split or gpt.slice whose results (through reshapes)
    only elementwise kernels read (a gpt.fused without a sum, or a lone
    elementwise op other than the exact GELU's and a dropout) becomes a strided
    view, marked `gpt.strided`: no kernel and no buffer; its readers index its
    operand's buffer through strides. A reader that needs a dense buffer (a
    matmul, attention, a copy, the function's return) keeps the op a kernel,
    and so does a reshape that merges dims the view does not space evenly.

    Then a gpt.concat or gpt.transpose each of whose operands (through
    reshapes) such an elementwise kernel, a transpose kernel or another such op
    computes for it alone is marked `gpt.gathered`: no kernel; the kernels that
    compute its operands store each element at its place in its result's
    buffer. Reading or writing the same elements in place changes no bit
    (gptc compile -O0 skips this pass).

    ```mlir
    %t = gpt.transpose %x {perm = array<i64: 0, 2, 1, 3>} : ...
    %a:2 = gpt.split %t {dim = 3 : i64} : ...
    %r:2 = gpt.fused %a#0, %a#1, %cos, %sin : ...
    %c = gpt.concat %r#0, %r#1 {dim = 3 : i64} : ...
    ```
    The transpose and the split get `gpt.strided`, the concat `gpt.gathered`:
    the fused kernel reads x and writes c.
  }];
  let dependentDialects = ["mlir::gpt::GptDialect"];
}

def FuseHorizontal : Pass<"gpt-fuse-horizontal", "mlir::func::FuncOp"> {
  let summary = "Group consecutive independent kernels into one gpt.horizontal kernel";
  let description = [{
    Horizontal fusion. Consecutive kernels none of which reads another's result
    (the two matmuls of a linear layer's backward, the optimizer's per-tensor
    norms and updates) become one gpt.horizontal op: one kernel whose single
    parallel region runs each member's loop in turn, without a join between
    them. Views and constants in between that do not depend on the group move
    above it; any other op ends the group. Where a kernel reads the group, the
    independent kernels right after it may join the group first (a LLaMA
    block's q and k/v products, with q's rotary between them); that is kept
    only where, tried on a copy of the function, it leaves fewer kernels. Each
    member computes exactly what it computed alone, so the program's bits do
    not change (gptc compile -O0 skips this pass).

    Before:
    ```mlir
    %0 = gpt.matmul %g, %w {transpose_rhs = true} : ...
    %1 = gpt.matmul %x, %g {transpose_lhs = true} : ...
    ```
    After: one `gpt.horizontal %g, %w, %x` whose body holds both matmuls.
  }];
  let dependentDialects = ["mlir::gpt::GptDialect"];
}

#endif
