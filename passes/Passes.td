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
    own operands.

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
}

#endif
