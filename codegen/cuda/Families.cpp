//===- Families.cpp - the CUDA flavour's kernel-family calls --------------===//
//
// On the CUDA targets most kernels are the shared body as a grid-stride loop
// (CudaFlavour.cpp). The ops below have a kernel family of their own on the GPU
// (runtime/include/gptc/cuda/), built to give the CPU kernel's bits: here each becomes a
// host function that fills the family's arguments and launches it on the entry's stream.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/CudaFlavour.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::gpt;

namespace mlir::gpt::emit {

namespace {
/// The families take f32 operands only.
LogicalResult needF32(Operation *op) {
  for (Value v : op->getResults())
    if (!ttype(v).getElementType().isF32())
      return op->emitError("the CUDA target runs '")
             << op->getName().getStringRef() << "' on f32 only, not " << ttype(v).getElementType();
  return success();
}

/// Pointer `ptr` to operand or result `o`'s first element: its view's base added.
std::string attentionPointer(const AttentionShape &a, const std::string &ptr,
                             AttentionShape::Operand o) {
  return ptr + (a.at[o].base ? " + " + std::to_string(a.at[o].base) : "");
}

/// `gptc::cuda::AttentionArgs` for q, k, v = in0, in1, in2, the output out0 and the
/// statistics `stats` (the forward's out1, the gradient's input), as `f`.
std::string attentionArgs(const AttentionShape &a, int64_t B, const std::string &stats,
                          const std::string &out, const std::string &rng) {
  auto operand = [&](const std::string &ptr, AttentionShape::Operand o) {
    const AttentionShape::Strides &s = a.at[o];
    return attentionPointer(a, ptr, o) + ", " + std::to_string(s.b) + ", " +
           std::to_string(s.h) + ", " + std::to_string(s.t);
  };
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "  gptc::cuda::AttentionArgs f{" << B << ", " << a.H << ", " << a.T << ", " << a.S
     << ", " << a.D << ", " << a.Dv << ", " << (a.causal ? "true" : "false") << ", " << a.scale
     << ",\n      " << operand("in0", a.Q) << ", " << operand("in1", a.K) << ", "
     << operand("in2", a.V) << ",\n      " << operand(out, a.Y) << ", " << stats;
  if (a.dropout)
    os << ", (const int64_t*)" << rng << ", " << a.id << ", " << a.dropP << ", " << a.dropScale;
  os << "};\n";
  if (a.G > 1)
    os << "  f.kv_group = " << a.G << ";\n";
  if (a.masked())
    os << "  f.key_mask = in" << a.maskOperand << ";\n";
  return text;
}

/// The gradient's dq, dk and dv strides where they are not q's, k's and v's (a gradient
/// written into a gathered op's buffer).
std::string gradientStrides(const AttentionShape &a) {
  std::string text;
  const char *names[] = {"dq", "dk", "dv"}, *rows[] = {"t", "s", "s"};
  for (int i = 0; i < 3; ++i) {
    const AttentionShape::Strides &in = a.at[a.Q + i], &d = a.at[a.DQ + i];
    if (d.b == in.b && d.h == in.h && d.t == in.t)
      continue;
    text += "  ga." + std::string(names[i]) + "_b = " + std::to_string(d.b) + ", ga." +
            names[i] + "_h = " + std::to_string(d.h) + ", ga." + names[i] + "_" + rows[i] +
            " = " + std::to_string(d.t) + ";\n";
  }
  return text;
}
} // namespace

/// Cross-entropy's error word for a target out of range, `bad`, cleared, in the step's
/// scratch at byte `at`; none (a null `bad`) where the entry checked the targets before
/// any kernel ran (Emitter::idChecks: then none can be out of range).
std::string CudaFlavour::crossEntropyBad(Value targets, int64_t at) {
  if (e.checkedAtEntry(targets))
    return "  unsigned* const bad = nullptr;  // (the targets were checked at the entry)\n";
  needScratch(at + 8);
  return "  unsigned* const bad = (unsigned*)(gptc_scratch + " + std::to_string(at) + ");\n"
         "  GPTC_CUDA_TRY(cudaMemsetAsync(bad, 0, sizeof(unsigned), gptc::cuda::stream()));\n";
}

/// The step's error when `bad` is set (nothing where it is null).
std::string CudaFlavour::crossEntropyReport(Value targets) {
  if (e.checkedAtEntry(targets))
    return "";
  return "  GPTC_CUDA_LOOP_LAUNCH(gptc::cuda::error_from_word, 1)(bad, " +
         std::to_string(errorCode("cross_entropy target out of range")) + "u);\n";
}

/// The ops whose families use the step's scratch (needScratch below): they share it, so
/// they run one after another (CudaFlavour::group keeps them on one branch).
bool CudaFlavour::usesScratch(Operation *op) {
  return isa<AttentionGradOp, CrossEntropyOp, CrossEntropyGradOp>(op);
}

LogicalResult CudaFlavour::familyCall(Operation *op, raw_ostream &os) {
  if (failed(needF32(op)))
    return failure();
  scratchTaken = false;
  LogicalResult written = familyCallOf(op, os);
  if (succeeded(written) && scratchTaken && !usesScratch(op))
    return op->emitError("internal: the CUDA family of '")
           << op->getName().getStringRef() << "' uses the scratch but is not in usesScratch";
  return written;
}

LogicalResult CudaFlavour::familyCallOf(Operation *op, raw_ostream &os) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](MatmulOp m) -> LogicalResult {
        MatmulDims d = matmulDims(m);
        os << "  const gptc::cuda::MatmulShape s{" << d.batch << ", " << d.M << ", " << d.N
           << ", " << d.K << ", " << d.aBatch << ", " << d.aRow << ", " << d.aK << ", "
           << d.bBatch << ", " << d.bK << ", " << d.bCol
           << "};\n  gptc::MatmulEpilogue<float> ep;\n";
        unsigned next = 2;  // the epilogue's operands follow lhs and rhs
        if (m.getBias())
          os << "  ep.bias = in" << next++ << ";\n";
        if (m.getRng()) {
          DropoutLiterals lit =
              dropoutLiterals(m.getDropoutP()->convertToDouble(), m.getType().getElementType());
          os << "  ep.rng = (const int64_t*)in" << next++ << ";\n  ep.dropout_id = "
             << *m.getDropoutId() << ";\n  ep.dropout_p = " << lit.p
             << ";\n  ep.dropout_scale = " << lit.scale << ";\n";
        }
        if (m.getAddend())
          os << "  ep.addend = in" << next++ << ";\n";
        if (m.getGeluX())
          os << "  ep.gelu_x = in" << next++ << ";\n";
        if (m.getGeluErf())
          os << "  ep.gelu_erf = in" << next++ << ";\n";
        if (m.getGeluX() && *m.getGeluApproximate() == GeluApproximation::tanh)
          os << "  ep.gelu_tanh = true;\n";
        os << "  gptc::cuda::matmul(gptc::cuda::stream(), s, in0, in1, out0, ep);\n";
        return success();
      })
      .Case([&](LayerNormOp l) -> LogicalResult {
        int64_t c = l.getType().getShape().back(), rows = l.getType().getNumElements() / c;
        bool hasW = (bool)l.getWeight(), hasB = (bool)l.getBias();
        std::string w = hasW ? "in1" : "nullptr", bias = hasB ? (hasW ? "in2" : "in1") : "nullptr";
        // One warp a row, eight rows a block.
        os << "  GPTC_LAUNCH(gptc::cuda::layer_norm_kernel, " << (rows + 7) / 8
           << ", 256, gptc::cuda::stream())(" << rows << ", " << c << ", "
           << literal(l.getEps().convertToDouble(), l.getType().getElementType()) << ", in0, "
           << w << ", " << bias << ", out0);\n";
        return success();
      })
      .Case([&](AttentionOp at) -> LogicalResult {
        AttentionShape a = attentionShape(at.getQ(), at.getK(), at.getV(), at.getIsCausal(),
                                          at.getScale().convertToDouble(),
                                          at.getDropoutP().convertToDouble(), at.getId(), 3,
                                          at.getBthd());
        a.maskOperand = keyMaskOperand(at, at.getKeyMask());
        if (a.Dv > 256)
          return at.emitError("the CUDA target's attention takes heads of up to 256 values, not ")
                 << a.Dv;
        int64_t B = at.getResult().getType().getNumElements() / (a.H * a.T * a.Dv);
        os << attentionArgs(a, B, "out1", "out0", "in3")
           << "  gptc::cuda::attention(gptc::cuda::stream(), f);\n";
        return success();
      })
      .Case([&](AttentionGradOp at) -> LogicalResult {
        AttentionShape a = attentionShape(at.getQ(), at.getK(), at.getV(), at.getIsCausal(),
                                          at.getScale().convertToDouble(),
                                          at.getDropoutP().convertToDouble(), at.getId(), 5,
                                          at.getBthd(), at.getResults());
        a.maskOperand = keyMaskOperand(at, at.getKeyMask());
        if (a.D > 256 || a.Dv > 256)
          return at.emitError("the CUDA target's attention takes heads of up to 256 values, not ")
                 << std::max(a.D, a.Dv);
        int64_t B = at.getDq().getType().getNumElements() / (a.H * a.T * a.D);
        // The family's scratch, 2 T S floats a head, for runs of heads of at most 32 MiB
        // (one kv head's G query heads at least): every head at once took 192 MiB at
        // shakespeare_char size, on top of the step's peak (bench/NOTES.md, "Memory").
        const int64_t perGroup = 2 * a.T * a.S * a.G, groups = B * a.H / a.G;
        const int64_t floats =
            std::clamp<int64_t>((int64_t(8) << 20) / perGroup, 1, groups) * perGroup;
        needScratch(floats * (int64_t)sizeof(float));
        // (g, the output's gradient, is laid out as the forward's output: y's strides)
        os << attentionArgs(a, B, "(float*)in4", "nullptr", "in5")
           << "  gptc::cuda::AttentionGradArgs ga{f, in3, " << attentionPointer(a, "out0", a.DQ)
           << ", " << attentionPointer(a, "out1", a.DK) << ", "
           << attentionPointer(a, "out2", a.DV) << ", (float*)gptc_scratch, "
           << floats << "};\n"
           << gradientStrides(a)
           << "  gptc::cuda::attention_grad(gptc::cuda::stream(), ga);\n";
        return success();
      })
      .Case([&](LayerNormGradOp l) -> LogicalResult {
        int64_t c = l.getType().getShape().back(), rows = l.getType().getNumElements() / c;
        os << "  GPTC_LAUNCH(gptc::cuda::layer_norm_grad_kernel, " << (rows + 7) / 8
           << ", 256, gptc::cuda::stream())(" << rows << ", " << c << ", "
           << literal(l.getEps().convertToDouble(), l.getType().getElementType())
           << ", in0, in1, " << (l.getWeight() ? "in2" : "nullptr") << ", out0);\n";
        return success();
      })
      .Case([&](CrossEntropyOp ce) -> LogicalResult {
        auto l = ce.getLogits().getType();
        int64_t n = l.getDimSize(0), v = l.getDimSize(1), ignore = (int64_t)ce.getIgnoreIndex();
        // Each row's loss (one warp a row), then their canonical sum over the rows that
        // count: cross-entropy's CPU kernel, step by step.
        const int64_t rowBytes = (n * (int64_t)sizeof(float) + 255) / 256 * 256;
        needScratch(rowBytes);
        os << "  float* const rowLoss = (float*)gptc_scratch;\n"
           << crossEntropyBad(ce.getTargets(), rowBytes)
           << "  GPTC_LAUNCH(gptc::cuda::cross_entropy_rows_kernel, " << (n + 7) / 8
           << ", 256, gptc::cuda::stream())(" << n << ", " << v << ", " << ignore
           << "LL, in0, in1, rowLoss, bad);\n"
           << "  GPTC_LAUNCH(gptc::cuda::cross_entropy_total_kernel, 1, 32, "
              "gptc::cuda::stream())("
           << n << ", " << ignore << "LL, in1, rowLoss, out0);\n"
           << crossEntropyReport(ce.getTargets());
        return success();
      })
      .Case([&](CrossEntropyGradOp ce) -> LogicalResult {
        auto l = ce.getLogits().getType();
        int64_t n = l.getDimSize(0), v = l.getDimSize(1), ignore = (int64_t)ce.getIgnoreIndex();
        // The rows that count, then each row's gradient scaled by their count.
        needScratch(8);
        os << "  int64_t* const kept = (int64_t*)gptc_scratch;\n"
           << crossEntropyBad(ce.getTargets(), 8)
           << "  GPTC_LAUNCH(gptc::cuda::cross_entropy_kept_kernel, 1, 256, gptc::cuda::stream())("
           << n << ", " << ignore << "LL, in1, kept);\n"
           << "  GPTC_LAUNCH(gptc::cuda::cross_entropy_grad_kernel, " << (n + 7) / 8
           << ", 256, gptc::cuda::stream())(" << n << ", " << v << ", " << ignore
           << "LL, in0, in1, in2, kept, out0, bad);\n"
           << crossEntropyReport(ce.getTargets());
        return success();
      })
      .Default([&](Operation *o) -> LogicalResult {
        return o->emitError("internal: no CUDA kernel family for '")
               << o->getName().getStringRef() << "'";
      });
}

} // namespace mlir::gpt::emit
