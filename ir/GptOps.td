//===- GptOps.td - gpt dialect operations ---------------------------------===//
//
// One op per operation of a nanoGPT-style forward pass. Shapes are static and
// checked by each op's verifier (GptOps.cpp). Binary elementwise ops broadcast
// their operands numpy-style to the result shape.
//
//===----------------------------------------------------------------------===//
#ifndef GPT_OPS_TD
#define GPT_OPS_TD

include "ir/GptDialect.td"
include "ir/GptInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

// Every op states its gradient (ir/GptVjp.cpp); backward ops say they have none.
class Gpt_Op<string mnemonic, list<Trait> traits = []>
    : Op<Gpt_Dialect, mnemonic, !listconcat(traits, [Pure,
        DeclareOpInterfaceMethods<Gpt_VjpOpInterface>])>;

// An elementwise op: its scalar meaning is said once, in ir/GptScalar.cpp.
def Gpt_Elementwise : DeclareOpInterfaceMethods<Gpt_ElementwiseOpInterface>;
// One that only moves or converts its element: no FLOPs.
def Gpt_ElementwiseMove
    : DeclareOpInterfaceMethods<Gpt_ElementwiseOpInterface, ["getFlopsPerElement"]>;

def Gpt_Tensor : RankedTensorOf<[F32, F64, BF16, I64, I1]>;
def Gpt_FloatTensor : RankedTensorOf<[F32, F64, BF16]>;
def Gpt_IndexTensor : RankedTensorOf<[I64]>;
def Gpt_BoolTensor : RankedTensorOf<[I1]>;



//===----------------------------------------------------------------------===//
// Constants and index generation
//===----------------------------------------------------------------------===//

def Gpt_ConstantOp : Gpt_Op<"constant", [ConstantLike,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "A tensor constant";
  let description = [{
    ```mlir
    %c = gpt.constant dense<0.5> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Gpt_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
  let hasVerifier = 1;
}

def Gpt_ArangeOp : Gpt_Op<"arange"> {
  let summary = "start, start+step, ... as a 1-D tensor";
  let description = [{
    The result has as many elements as its type says; element i is
    `start + i * step`.

    ```mlir
    %pos = gpt.arange {start = 0 : i64, step = 1 : i64} : tensor<32xi64>
    ```
  }];
  let arguments = (ins I64Attr:$start, I64Attr:$step);
  let results = (outs RankedTensorOf<[I64, F32, F64]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Gpt_BinaryOp<string mnemonic, string math> : Gpt_Op<mnemonic, [Gpt_Elementwise]> {
  let summary = "Elementwise " # math # " with numpy broadcasting";
  let description = [{
    Both operands broadcast (numpy rules) to the result shape; all three have
    the same element type.

    ```mlir
    %r = gpt.}] # mnemonic # [{ %a, %b : (tensor<2x32x64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins Gpt_Tensor:$lhs, Gpt_Tensor:$rhs);
  let results = (outs Gpt_Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Gpt_AddOp : Gpt_BinaryOp<"add", "lhs + rhs">;
def Gpt_SubOp : Gpt_BinaryOp<"sub", "lhs - rhs">;
def Gpt_MulOp : Gpt_BinaryOp<"mul", "lhs * rhs">;
def Gpt_DivOp : Gpt_BinaryOp<"div", "lhs / rhs (IEEE division)">;
def Gpt_PowOp : Gpt_BinaryOp<"pow", "lhs ** rhs">;
def Gpt_MaxOp : Gpt_BinaryOp<"max", "maximum(lhs, rhs), NaN-propagating">;
def Gpt_MinOp : Gpt_BinaryOp<"min", "minimum(lhs, rhs), NaN-propagating">;

def Gpt_CompareOp : Gpt_Op<"compare", [Gpt_Elementwise]> {
  let summary = "Elementwise comparison with numpy broadcasting, to a bool tensor";
  let description = [{
    `predicate` is one of lt, le, gt, ge, eq, ne, with IEEE semantics: a
    comparison involving NaN is false, except ne, which is true. Both operands
    broadcast (numpy rules) to the result shape and share an element type; the
    result is i1. No gradient flows through it.

    ```mlir
    %m = gpt.compare %x, %zero {predicate = #gpt.predicate<le>} : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xi1>
    ```
  }];
  let arguments = (ins Gpt_Tensor:$lhs, Gpt_Tensor:$rhs, Gpt_ComparePredicateAttr:$predicate);
  let results = (outs RankedTensorOf<[I1]>:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let builders = [
    // The result shaped by broadcasting (lhs's shape where they do not broadcast, which
    // the verifier then reports).
    OpBuilder<(ins "Value":$lhs, "Value":$rhs, "ComparePredicate":$predicate), [{
      auto l = cast<RankedTensorType>(lhs.getType()), r = cast<RankedTensorType>(rhs.getType());
      auto shape = broadcastShapes(l.getShape(), r.getShape());
      build($_builder, $_state,
            RankedTensorType::get(succeeded(shape) ? ArrayRef<int64_t>(*shape) : l.getShape(),
                                  $_builder.getI1Type()),
            lhs, rhs, ComparePredicateAttr::get($_builder.getContext(), predicate));
    }]>];
  let hasVerifier = 1;
}

class Gpt_UnaryOp<string mnemonic, string math>
    : Gpt_Op<mnemonic, [SameOperandsAndResultType, Gpt_Elementwise]> {
  let summary = "Elementwise " # math;
  let description = [{
    Uses gptc's own implementation (runtime prelude), the same on every target.

    ```mlir
    %r = gpt.}] # mnemonic # [{ %x : tensor<2x64xf32>
    ```
  }];
  let arguments = (ins Gpt_FloatTensor:$x);
  let results = (outs Gpt_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
}

def Gpt_NegOp : Gpt_UnaryOp<"neg", "-x">;
def Gpt_ExpOp : Gpt_UnaryOp<"exp", "e ** x">;
def Gpt_LogOp : Gpt_UnaryOp<"log", "natural logarithm">;
def Gpt_TanhOp : Gpt_UnaryOp<"tanh", "hyperbolic tangent">;
def Gpt_ErfOp : Gpt_UnaryOp<"erf", "error function">;
def Gpt_SqrtOp : Gpt_UnaryOp<"sqrt", "square root (IEEE)">;
def Gpt_RsqrtOp : Gpt_UnaryOp<"rsqrt", "1 / sqrt(x)">;
def Gpt_AbsOp : Gpt_UnaryOp<"abs", "|x| (the sign bit cleared)">;
def Gpt_SigmoidOp : Gpt_UnaryOp<"sigmoid", "1 / (1 + e ** -x)">;
def Gpt_SinOp : Gpt_UnaryOp<"sin", "sine (|x| < 2^28; NaN beyond)">;
def Gpt_CosOp : Gpt_UnaryOp<"cos", "cosine (|x| < 2^28; NaN beyond)">;

def Gpt_GeluOp : Gpt_Op<"gelu", [SameOperandsAndResultType, Gpt_Elementwise]> {
  let summary = "GELU, exact (erf) or tanh-approximated";
  let description = [{
    `approximate = #gpt.approximate<none>`: 0.5 x (1 + erf(x / sqrt 2));
    `<tanh>`: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

    ```mlir
    %g = gpt.gelu %x {approximate = #gpt.approximate<none>} : tensor<2x32x256xf32>
    ```
  }];
  let arguments = (ins Gpt_FloatTensor:$x, Gpt_GeluApproximationAttr:$approximate);
  let results = (outs Gpt_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
}

def Gpt_WhereOp : Gpt_Op<"where", [Gpt_Elementwise]> {
  let summary = "cond ? a : b, elementwise with broadcasting";
  let description = [{
    ```mlir
    %r = gpt.where %m, %a, %b : (tensor<32x32xi1>, tensor<2x32x32xf32>, tensor<f32>) -> tensor<2x32x32xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I1]>:$cond, Gpt_Tensor:$a, Gpt_Tensor:$b);
  let results = (outs Gpt_Tensor:$result);
  let assemblyFormat = "$cond `,` $a `,` $b attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Gpt_MaskedFillOp : Gpt_Op<"masked_fill", [Gpt_Elementwise]> {
  let summary = "x where mask is false, value where it is true";
  let description = [{
    ```mlir
    %r = gpt.masked_fill %x, %m {value = 0xFFF0000000000000 : f64} : (tensor<2x32x32xf32>, tensor<32x32xi1>) -> tensor<2x32x32xf32>
    ```
  }];
  let arguments = (ins Gpt_Tensor:$x, RankedTensorOf<[I1]>:$mask, F64Attr:$value);
  let results = (outs Gpt_Tensor:$result);
  let assemblyFormat = "$x `,` $mask attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Gpt_ConvertOp : Gpt_Op<"convert", [Gpt_ElementwiseMove]> {
  let summary = "Element type conversion (round to nearest even)";
  let description = [{
    ```mlir
    %h = gpt.convert %x : tensor<4x64xf32> -> tensor<4x64xbf16>
    ```
  }];
  let arguments = (ins Gpt_Tensor:$x);
  let results = (outs Gpt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

def Gpt_DropoutOp : Gpt_Op<"dropout",
    [DeclareOpInterfaceMethods<Gpt_ElementwiseOpInterface, ["isFusible"]>]> {
  let summary = "Inverted dropout with a counter-based (Philox) mask";
  let description = [{
    In training mode with p > 0, element i is zeroed when the Philox-4x32-10
    draw for key = seed and counter = (i, id, step) falls below p, and kept
    elements are scaled by 1/(1-p). `rng` holds [seed, step]; `id` numbers the
    random ops of a function, so the mask is a pure function of
    (seed, step, id, i) on every target and thread count. The backward of a
    dropout is the same dropout (same rng and id) applied to the gradient.
    Otherwise it is the identity and folds away.

    ```mlir
    %y = gpt.dropout %x, %rng {id = 0 : i64, p = 1.000000e-01 : f64, train = true} : (tensor<2x32x64xf32>, tensor<2xi64>) -> tensor<2x32x64xf32>
    %z = gpt.dropout %x {id = 0 : i64, p = 1.000000e-01 : f64, train = false} : (tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins Gpt_FloatTensor:$x, Optional<Gpt_IndexTensor>:$rng, F64Attr:$p,
                   BoolAttr:$train, I64Attr:$id);
  let results = (outs Gpt_FloatTensor:$result);
  let assemblyFormat = "$x (`,` $rng^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Gpt_StopGradientOp : Gpt_Op<"stop_gradient", [SameOperandsAndResultType]> {
  let summary = "The identity whose gradient is zero (torch's detach)";
  let description = [{
    ```mlir
    %y = gpt.stop_gradient %x : tensor<4x64xf32>
    ```
  }];
  let arguments = (ins Gpt_Tensor:$x);
  let results = (outs Gpt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Linear algebra and the fused model ops
//===----------------------------------------------------------------------===//

def Gpt_EmbeddingOp : Gpt_Op<"embedding"> {
  let summary = "Row lookup: result[..., :] = weight[indices[...], :]";
  let description = [{
    Canonicalization: the rows of a gpt.arange with step 1 within the weight
    (nanoGPT's position embedding, `wpe(arange(t))`) are a gpt.slice of it.

    ```mlir
    %e = gpt.embedding %wte, %idx : (tensor<65x64xf32>, tensor<2x32xi64>) -> tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins Gpt_FloatTensor:$weight, Gpt_IndexTensor:$indices);
  let results = (outs Gpt_FloatTensor:$result);
  let assemblyFormat = "$weight `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Gpt_MatmulOp : Gpt_Op<"matmul", [AttrSizedOperandSegments]> {
  let summary = "Batched matrix product with optional transposes and a fused epilogue";
  let description = [{
    lhs is [batch..., M, K] ([batch..., K, M] with transpose_lhs); rhs is
    [K, N] shared by every batch, or [batch..., K, N] ([.., N, K] with
    transpose_rhs). Each output element sums k = 0..K-1 in increasing order
    with fma into one accumulator (`order = #gpt.order<sequential>`).

    The epilogue (gpt-fuse-matmul-epilogue makes it from the elementwise ops
    that follow the product, after autodiff) is applied to each finished
    product, in this order, with the bits of those ops:
    - `bias %b` ([N]): product + b[n], a linear layer's bias add;
    - `dropout %rng` (with `dropout_p` and `dropout_id`): gpt.dropout of that
      value, element i of the result drawing as gpt.dropout's element i;
    - `plus %addend` (the result's type): addend + that value, a residual add;
    - `gelu_grad %x` (the result's type; `erf %e` where gpt-keep-gelu-erf kept
      it; with `gelu_approximate`): gpt.gelu_grad of that value as its
      incoming gradient, at x (a GELU's input gradient, whose incoming
      gradient is this product).

    ```mlir
    %y = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<2x32x64xf32>, tensor<192x64xf32>) -> tensor<2x32x192xf32>
    %z = gpt.matmul %x, %w bias %b dropout %rng plus %r {dropout_id = 2 : i64, dropout_p = 1.000000e-01 : f64, order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<2x32x64xf32>, tensor<192x64xf32>, tensor<192xf32>, tensor<2xi64>, tensor<2x32x192xf32>) -> tensor<2x32x192xf32>
    ```
  }];
  let arguments = (ins Gpt_FloatTensor:$lhs, Gpt_FloatTensor:$rhs,
                   Optional<Gpt_FloatTensor>:$bias, Optional<Gpt_IndexTensor>:$rng,
                   Optional<Gpt_FloatTensor>:$addend, Optional<Gpt_FloatTensor>:$gelu_x,
                   Optional<Gpt_FloatTensor>:$gelu_erf,
                   BoolAttr:$transpose_lhs, BoolAttr:$transpose_rhs, Gpt_ReductionOrderAttr:$order,
                   OptionalAttr<F64Attr>:$dropout_p, OptionalAttr<I64Attr>:$dropout_id,
                   OptionalAttr<Gpt_GeluApproximationAttr>:$gelu_approximate);
  let results = (outs Gpt_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs (`bias` $bias^)? (`dropout` $rng^)? (`plus` $addend^)? (`gelu_grad` $gelu_x^)? (`erf` $gelu_erf^)? attr-dict `:` functional-type(operands, results)";
  let builders = [
    // A plain product (no epilogue).
    OpBuilder<(ins "Type":$type, "Value":$lhs, "Value":$rhs, "bool":$transposeLhs,
                   "bool":$transposeRhs), [{
      build($_builder, $_state, type, lhs, rhs, Value(), Value(), Value(), Value(), Value(),
            $_builder.getBoolAttr(transposeLhs), $_builder.getBoolAttr(transposeRhs),
            ReductionOrderAttr::get($_builder.getContext(), ReductionOrder::Sequential),
            FloatAttr(), IntegerAttr(), GeluApproximationAttr());
    }]>
  ];
  let extraClassDeclaration = [{
    /// Whether an epilogue follows the product (bias, dropout, addend or GELU gradient).
    bool hasEpilogue() { return getBias() || getRng() || getAddend() || getGeluX(); }
  }];
  let hasVerifier = 1;
}

def Gpt_LayerNormOp : Gpt_Op<"layer_norm", [AttrSizedOperandSegments]> {
  let summary = "LayerNorm over the last dimension, optional weight and bias";
  let description = [{
    mean and variance (biased) over the last dimension, each a canonical row
    reduction; y = (x - mean) * rsqrt(var + eps) * weight + bias.

    ```mlir
    %y = gpt.layer_norm %x, %w, %b {eps = 1.000000e-05 : f64, order = #gpt.order<canonical>} : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
    %z = gpt.layer_norm %x {eps = 1.000000e-05 : f64, order = #gpt.order<canonical>} : (tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins Gpt_FloatTensor:$x, Optional<Gpt_FloatTensor>:$weight,
                   Optional<Gpt_FloatTensor>:$bias, F64Attr:$eps, Gpt_ReductionOrderAttr:$order);
  let results = (outs Gpt_FloatTensor:$result);
  let assemblyFormat = "$x (`,` $weight^)? (`,` `bias` $bias^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

class Gpt_SoftmaxLikeOp<string mnemonic, string what> : Gpt_Op<mnemonic, [SameOperandsAndResultType]> {
  let summary = what # " along one dimension";
  let description = [{
    Max and sum along `dim` are canonical row reductions.

    ```mlir
    %p = gpt.}] # mnemonic # [{ %s {dim = 1 : i64, order = #gpt.order<canonical>} : tensor<64x65xf32>
    ```
  }];
  let arguments = (ins Gpt_FloatTensor:$x, I64Attr:$dim, Gpt_ReductionOrderAttr:$order);
  let results = (outs Gpt_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Gpt_SoftmaxOp : Gpt_SoftmaxLikeOp<"softmax", "exp(x - max) / sum(exp(x - max))">;
def Gpt_LogSoftmaxOp : Gpt_SoftmaxLikeOp<"log_softmax", "x - max - log(sum(exp(x - max)))">;

def Gpt_AttentionOp : Gpt_Op<"attention", [AttrSizedOperandSegments]> {
  let summary = "Scaled dot-product attention, optionally causal, with dropout";
  let description = [{
    q [B, H, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv] -> [B, H, T, Dv], where
    Hkv divides H: query head h reads key/value head h / (H / Hkv) (grouped-query
    attention, PyTorch's enable_gqa; Hkv = H is plain multi-head attention).
    Defined as the online-softmax algorithm over key blocks of 32
    (`order = #gpt.order<online_block32>`): for each query row, blocks of keys
    in increasing order update a running max, a running sum and the output
    accumulator. With is_causal, key j is visible to query i iff j <= i.
    With dropout_p > 0 (and `rng` = [seed, step]) the probability of query i
    for key j is dropped by the Philox draw for element ((b*H + h)*T + i)*S + j
    of random op `id`, as gpt.dropout does.

    `bthd` (q, k, v, result) says which of them are laid out [B, T, H, D]
    instead (the layout of nanoGPT's q, k, v before their transpose(1, 2));
    absent, none is. The values, the order of every sum and the dropout draws
    are the same in any layout. The canonicalizer folds a transpose(1, 2) into
    or out of attention into this form, one operand at a time.

    `key_mask` [B, S] (i1), when present, hides key j from every query of batch
    row b where key_mask[b, j] is false, as well as the causal mask does
    (PyTorch's padding mask, `attn_mask` [B, 1, 1, S]): a hidden key's score
    is -inf in its block. A row's max stays -inf, its sum and output 0, while
    every key it has seen is hidden (the exps are then taken against 0, not
    -inf, so no NaN arises); a query that sees no key at all gives zeros, as
    PyTorch's SDPA does, and no gradient.

    `stats` [B, H, T, 2] (whatever the layout) holds each query row's final
    running max and running sum, which gpt.attention_grad reads instead of
    recomputing them.

    ```mlir
    %y, %stats = gpt.attention %q, %k, %v {dropout_p = 0.000000e+00 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.17677669529663687 : f64} : (tensor<2x2x32x32xf32>, tensor<2x2x32x32xf32>, tensor<2x2x32x32xf32>) -> (tensor<2x2x32x32xf32>, tensor<2x2x32x2xf32>)
    ```
  }];
  let arguments = (ins Gpt_FloatTensor:$q, Gpt_FloatTensor:$k, Gpt_FloatTensor:$v,
                   Optional<Gpt_IndexTensor>:$rng, Optional<Gpt_BoolTensor>:$key_mask,
                   BoolAttr:$is_causal, F64Attr:$dropout_p,
                   F64Attr:$scale, I64Attr:$id, Gpt_ReductionOrderAttr:$order,
                   OptionalAttr<DenseBoolArrayAttr>:$bthd);
  let results = (outs Gpt_FloatTensor:$result, Gpt_FloatTensor:$stats);
  let assemblyFormat = "$q `,` $k `,` $v (`,` $rng^)? (`key_mask` $key_mask^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = [{
    /// The type of `stats` for q laid out heads outer ([B, H, T, D]): [B, H, T, 2].
    static ::mlir::RankedTensorType statsType(::mlir::RankedTensorType qHeadsOuter);
    /// Whether q (0), k (1), v (2) or the result (3) is laid out [B, T, H, D].
    bool bthdAt(unsigned i) { return getBthd() && (*getBthd())[i]; }
  }];
}

def Gpt_CrossEntropyOp : Gpt_Op<"cross_entropy"> {
  let summary = "Mean cross-entropy of logits [N, V] against targets [N]";
  let description = [{
    Per row: logsumexp(logits) - logits[target], rows whose target equals
    ignore_index skipped; the mean over the kept rows (a canonical reduction
    over rows, in row order). Result is a scalar tensor.

    ```mlir
    %l = gpt.cross_entropy %logits, %t {ignore_index = -1 : i64, order = #gpt.order<canonical>} : (tensor<64x65xf32>, tensor<64xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Gpt_FloatTensor:$logits, Gpt_IndexTensor:$targets,
                   I64Attr:$ignore_index, Gpt_ReductionOrderAttr:$order);
  let results = (outs Gpt_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Gpt_ReduceOp<string mnemonic, string what> : Gpt_Op<mnemonic> {
  let summary = what # " over the given dimensions";
  let description = [{
    The reduced elements are visited in row-major order of the reduced
    dimensions and combined in the canonical order.

    ```mlir
    %s = gpt.}] # mnemonic # [{ %x {dims = array<i64: 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x64xf32>) -> tensor<4xf32>
    ```
  }];
  let arguments = (ins Gpt_FloatTensor:$x, DenseI64ArrayAttr:$dims, BoolAttr:$keepdim,
                   Gpt_ReductionOrderAttr:$order);
  let results = (outs Gpt_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Gpt_ReduceSumOp : Gpt_ReduceOp<"reduce_sum", "Sum">;
def Gpt_ReduceMaxOp : Gpt_ReduceOp<"reduce_max", "Maximum">;
def Gpt_ReduceMeanOp : Gpt_ReduceOp<"reduce_mean", "Mean (sum, then one division)"> {
  // Canonicalized to gpt.div(gpt.reduce_sum, n): the same bits, and the fusion passes
  // then see one kind of sum.
  let hasCanonicalizer = 1;
}

def Gpt_CumsumOp : Gpt_Op<"cumsum", [SameOperandsAndResultType]> {
  let summary = "Running sums along one dimension";
  let description = [{
    Element i along `dim` is x[0] + x[1] + ... + x[i]; with `reverse`, x[i] +
    x[i + 1] + ... + x[n - 1] (the gradient of a cumsum). Each line along `dim`
    has one accumulator that takes the elements in that order
    (`order = #gpt.order<sequential>`). Floating-point sums accumulate in f64 and
    each running sum is rounded to the element type, as PyTorch's CPU cumsum
    does (so the bits are its bits); i64 sums are exact.

    ```mlir
    %pos = gpt.cumsum %mask {dim = 1 : i64, order = #gpt.order<sequential>, reverse = false} : tensor<2x32xi64>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32, F64, I64]>:$x, I64Attr:$dim, BoolAttr:$reverse,
                   Gpt_ReductionOrderAttr:$order);
  let results = (outs RankedTensorOf<[F32, F64, I64]>:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Gpt_ReshapeOp : Gpt_Op<"reshape"> {
  let summary = "Same elements in row-major order, another shape";
  let description = [{
    ```mlir
    %r = gpt.reshape %x : (tensor<2x32x64xf32>) -> tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Gpt_Tensor:$x);
  let results = (outs Gpt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Gpt_TransposeOp : Gpt_Op<"transpose"> {
  let summary = "Permute dimensions: result dim i is input dim perm[i]";
  let description = [{
    ```mlir
    %t = gpt.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x32x2x32xf32>) -> tensor<2x2x32x32xf32>
    ```
    The identity permutation folds to its operand; a transpose of a transpose to one
    transpose of the first's operand (or to that operand, where the two undo each other).
  }];
  let arguments = (ins Gpt_Tensor:$x, DenseI64ArrayAttr:$perm);
  let results = (outs Gpt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Gpt_SliceOp : Gpt_Op<"slice"> {
  let summary = "Elements start, start+step, ... below end along one dim";
  let description = [{
    ```mlir
    %s = gpt.slice %x {dim = 2 : i64, start = 64 : i64, end = 128 : i64, step = 1 : i64} : (tensor<2x32x192xf32>) -> tensor<2x32x64xf32>
    ```
    A slice of every element folds to its operand.
  }];
  let arguments = (ins Gpt_Tensor:$x, I64Attr:$dim, I64Attr:$start, I64Attr:$end, I64Attr:$step);
  let results = (outs Gpt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Gpt_SplitOp : Gpt_Op<"split"> {
  let summary = "Consecutive pieces along one dim, sizes given by the result types";
  let description = [{
    ```mlir
    %q, %k, %v = gpt.split %x {dim = 2 : i64} : (tensor<2x32x192xf32>) -> (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<2x32x64xf32>)
    ```
  }];
  let arguments = (ins Gpt_Tensor:$x, I64Attr:$dim);
  let results = (outs Variadic<Gpt_Tensor>:$results);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Gpt_ConcatOp : Gpt_Op<"concat"> {
  let summary = "Join tensors along one dim";
  let description = [{
    ```mlir
    %c = gpt.concat %a, %b {dim = 0 : i64} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<5x4xf32>
    ```
  }];
  let arguments = (ins Variadic<Gpt_Tensor>:$inputs, I64Attr:$dim);
  let results = (outs Gpt_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Gpt_BroadcastOp : Gpt_Op<"broadcast", [Gpt_ElementwiseMove]> {
  let summary = "Broadcast to a larger shape (numpy rules)";
  let description = [{
    ```mlir
    %b = gpt.broadcast %x : (tensor<64xf32>) -> tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins Gpt_Tensor:$x);
  let results = (outs Gpt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Backward ops: the gradients the autodiff pass builds that are not simple
// compositions of forward ops. Each fixes its reduction order like the
// forward op it differentiates.
//===----------------------------------------------------------------------===//

def Gpt_GeluGradOp : Gpt_Op<"gelu_grad", [Gpt_Elementwise]> {
  let summary = "dx = g * gelu'(x)";
  let description = [{
    ```mlir
    %dx = gpt.gelu_grad %g, %x {approximate = #gpt.approximate<none>} : (tensor<4x256xf32>, tensor<4x256xf32>) -> tensor<4x256xf32>
    ```
  }];
  let arguments = (ins Gpt_FloatTensor:$g, Gpt_FloatTensor:$x, Optional<Gpt_FloatTensor>:$erf,
                       Gpt_GeluApproximationAttr:$approximate);
  let results = (outs Gpt_FloatTensor:$result);
  let assemblyFormat = "$g `,` $x (`erf` $erf^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Gpt_GeluKeepErfOp : Gpt_Op<"gelu_keep_erf", [AllTypesMatch<["x", "result", "erf"]>]> {
  let summary = "Exact GELU that also returns its erf, for the gradient to reuse";
  let description = [{
    `result` is `gpt.gelu %x {approximate = #gpt.approximate<none>}`, bit for bit; `erf` holds
    erf(x * (1 / sqrt 2)), the value that GELU and its gradient both compute.
    gpt-keep-gelu-erf puts it where a gelu_grad of the same x follows, and
    gives that gelu_grad the `erf` operand, so the backward does not evaluate
    erf again (the same bits: the same function of the same argument).

    ```mlir
    %g, %e = gpt.gelu_keep_erf %x : tensor<4x256xf32>
    %dx = gpt.gelu_grad %dg, %x erf %e {approximate = #gpt.approximate<none>} : (tensor<4x256xf32>, tensor<4x256xf32>, tensor<4x256xf32>) -> tensor<4x256xf32>
    ```
  }];
  let arguments = (ins Gpt_FloatTensor:$x);
  let results = (outs Gpt_FloatTensor:$result, Gpt_FloatTensor:$erf);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Gpt_LayerNormGradOp : Gpt_Op<"layer_norm_grad"> {
  let summary = "Input gradient of layer_norm over the last dimension";
  let description = [{
    With xhat = (x - mean) * rstd (recomputed with layer_norm's order) and
    dxhat = g * weight (or g): dx = rstd * (dxhat - mean(dxhat) - xhat *
    mean(dxhat * xhat)); both means are canonical row reductions.

    ```mlir
    %dx = gpt.layer_norm_grad %g, %x, %w {eps = 1.000000e-05 : f64, order = #gpt.order<canonical>} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Gpt_FloatTensor:$g, Gpt_FloatTensor:$x, Optional<Gpt_FloatTensor>:$weight,
                   F64Attr:$eps, Gpt_ReductionOrderAttr:$order);
  let results = (outs Gpt_FloatTensor:$result);
  let assemblyFormat = "$g `,` $x (`,` $weight^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Gpt_AttentionGradOp : Gpt_Op<"attention_grad", [AttrSizedOperandSegments]> {
  let summary = "dq, dk, dv of gpt.attention";
  let description = [{
    Recomputes each query row's probabilities p_ij = exp(s_ij - m_i) / l_i
    from the forward's running max m_i and sum l_i (`stats`, the forward's
    second result), then: dv_j = sum_i p_ij g_i (queries in increasing order),
    dp_ij = g_i . v_j, D_i = g_i . o_i, ds_ij = p_ij (dp_ij - D_i),
    dq_i = scale * sum_j ds_ij k_j (keys in increasing order),
    dk_j = scale * sum_i ds_ij q_i (queries in increasing order); each sum
    sequential with fma. Dropout masks are regenerated from rng and id.
    `bthd` as for gpt.attention (g in the result's layout, dq, dk and dv in
    q's, k's and v's). With grouped heads (Hkv < H), a kv head's dk and dv sum
    its group's H / Hkv query heads' parts (each as above) in the canonical
    order: the sums the gradient of repeating the heads takes. `key_mask` as
    for gpt.attention: a hidden key's p_ij is exp(-inf) = 0, and a row that
    sees no key (sum 0) takes max 0 and sum 1, so that its p, ds and dq are 0.

    ```mlir
    %dq, %dk, %dv = gpt.attention_grad %q, %k, %v, %g, %stats {dropout_p = 0.000000e+00 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.17677669529663687 : f64} : (tensor<2x2x32x32xf32>, tensor<2x2x32x32xf32>, tensor<2x2x32x32xf32>, tensor<2x2x32x32xf32>, tensor<2x2x32x2xf32>) -> (tensor<2x2x32x32xf32>, tensor<2x2x32x32xf32>, tensor<2x2x32x32xf32>)
    ```
  }];
  let arguments = (ins Gpt_FloatTensor:$q, Gpt_FloatTensor:$k, Gpt_FloatTensor:$v,
                   Gpt_FloatTensor:$g, Gpt_FloatTensor:$stats, Optional<Gpt_IndexTensor>:$rng,
                   Optional<Gpt_BoolTensor>:$key_mask, BoolAttr:$is_causal, F64Attr:$dropout_p, F64Attr:$scale, I64Attr:$id,
                   Gpt_ReductionOrderAttr:$order, OptionalAttr<DenseBoolArrayAttr>:$bthd);
  let results = (outs Gpt_FloatTensor:$dq, Gpt_FloatTensor:$dk, Gpt_FloatTensor:$dv);
  let assemblyFormat = "$q `,` $k `,` $v `,` $g `,` $stats (`,` $rng^)? (`key_mask` $key_mask^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether q and dq (0), k and dk (1), v and dv (2) or g (3) are laid out [B, T, H, D].
    bool bthdAt(unsigned i) { return getBthd() && (*getBthd())[i]; }
  }];
}

def Gpt_CrossEntropyGradOp : Gpt_Op<"cross_entropy_grad"> {
  let summary = "dlogits of the mean cross-entropy";
  let description = [{
    Row r: (softmax(logits_r) - onehot(target_r)) * g / kept, zero for rows
    whose target is ignore_index; softmax with the forward's orders.

    ```mlir
    %d = gpt.cross_entropy_grad %logits, %t, %g {ignore_index = -1 : i64, order = #gpt.order<canonical>} : (tensor<64x65xf32>, tensor<64xi64>, tensor<f32>) -> tensor<64x65xf32>
    ```
  }];
  let arguments = (ins Gpt_FloatTensor:$logits, Gpt_IndexTensor:$targets, Gpt_FloatTensor:$g,
                   I64Attr:$ignore_index, Gpt_ReductionOrderAttr:$order);
  let results = (outs Gpt_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $targets `,` $g attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Gpt_EmbeddingGradOp : Gpt_Op<"embedding_grad"> {
  let summary = "Scatter-add of row gradients into the embedding table";
  let description = [{
    dweight[v, :] = sum of g[p, :] over positions p with indices[p] == v, in
    increasing position order (never atomics), so the result does not
    depend on how the work is split.

    ```mlir
    %dw = gpt.embedding_grad %g, %idx : (tensor<2x32x64xf32>, tensor<2x32xi64>) -> tensor<65x64xf32>
    ```
  }];
  let arguments = (ins Gpt_FloatTensor:$g, Gpt_IndexTensor:$indices);
  let results = (outs Gpt_FloatTensor:$result);
  let assemblyFormat = "$g `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Kernel-level ops: what fusion builds. One gpt.fused is one kernel.
//===----------------------------------------------------------------------===//

def Gpt_FusedOp : Gpt_Op<"fused", [IsolatedFromAbove]> {
  let summary = "Elementwise ops computed in one kernel, one element at a time";
  let description = [{
    The body's ops all produce tensors of one shape; block arguments are the
    operands, read with numpy broadcasting; the yielded values are the
    results. A body may hold one gpt.reduce_sum: the ops before it (its
    prologue, of the reduced operand's shape) are the element the (canonical)
    sum adds, and the ops after it (its epilogue, of the sum's shape) are
    computed from each finished sum; the results then have the sum's shape. A
    sum over the trailing dims that keeps them (a row's sum) may be followed,
    after its epilogue, by ops of the summed operand's shape (computed for each
    element of the row from the row's finished sum and epilogue: a
    normalisation's scaling), whose results have that shape.
    Each element is computed by the same scalar expressions, in the same
    order, as the unfused ops, so fusion never changes a bit.

    ```mlir
    %r = gpt.fused %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
      %0 = gpt.add %a, %c : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      %1 = gpt.tanh %0 : tensor<4x8xf32>
      gpt.yield %1 : tensor<4x8xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Gpt_Tensor>:$inputs);
  let results = (outs Variadic<Gpt_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $results) $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The body's gpt.reduce_sum, if it has one.
    ReduceSumOp getReduction();
    /// Where a body op is computed: before the sum (every op of a body without one),
    /// after it at the sum's shape (from each finished sum), or after it at the summed
    /// operand's shape (each element of a summed row, from that row's finished sum).
    enum class Phase { Prologue, Epilogue, Post };
    Phase phaseOf(Operation *op);
    /// Whether `red` sums its operand's trailing dims and keeps them as 1: each sum is a
    /// contiguous row of the operand (a body may then end in ops of the row's shape).
    static bool sumsRows(ReduceSumOp red);
  }];
}

def Gpt_HorizontalOp : Gpt_Op<"horizontal", [IsolatedFromAbove]> {
  let summary = "Independent kernels run as one kernel (one parallel region)";
  let description = [{
    Horizontal fusion: the body's ops are kernels that do not read one
    another's results; the kernel runs each one's parallel loop in turn inside
    a single parallel region (no join between them), so the ops cost one
    launch. Each op computes exactly what it computes alone, so grouping never
    changes a bit. Block arguments are the operands; the yield lists every
    body op's results, in order.

    ```mlir
    %dx, %dw = gpt.horizontal %g, %w, %x : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<4x16xf32>) {
    ^bb0(%a: tensor<8x16xf32>, %b: tensor<4x16xf32>, %c: tensor<8x4xf32>):
      %0 = gpt.matmul %a, %b {transpose_rhs = true} : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
      %1 = gpt.matmul %c, %a {transpose_lhs = true} : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
      gpt.yield %0, %1 : tensor<8x4xf32>, tensor<4x16xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Gpt_Tensor>:$inputs);
  let results = (outs Variadic<Gpt_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $results) $body";
  let hasVerifier = 1;
}

def Gpt_YieldOp : Op<Gpt_Dialect, "yield",
                     [Pure, Terminator, ParentOneOf<["FusedOp", "HorizontalOp"]>]> {
  let summary = "The results of a gpt.fused or gpt.horizontal body";
  let arguments = (ins Variadic<Gpt_Tensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

#endif // GPT_OPS_TD
