// gptc/prelude/cpu/scratch.h — per-thread scratch buffers (host only). Part of
// gptc/prelude.h.
#ifndef GPTC_PRELUDE_CPU_SCRATCH_H
#define GPTC_PRELUDE_CPU_SCRATCH_H

#include "gptc/prelude/base.h"

namespace gptc {

// ---------------------------------------------------------------------------------------
// Scratch: a per-thread buffer per slot, 64-byte aligned, grown once to the largest size a
// kernel asked for (packing panels, transposed keys, a matmul's transposed operand copied to
// rows, which the whole team reads). No allocation in steady state.
// ---------------------------------------------------------------------------------------
template <class T>
inline T* scratch(int slot, int64_t count) {
  static thread_local void* bufs[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  static thread_local int64_t sizes[5] = {0, 0, 0, 0, 0};
  const int64_t bytes = count * (int64_t)sizeof(T);
  if (sizes[slot] < bytes) {
    ::operator delete[](bufs[slot], std::align_val_t(64));
    bufs[slot] = ::operator new[](bytes, std::align_val_t(64));
    sizes[slot] = bytes;
  }
  return static_cast<T*>(bufs[slot]);
}

}  // namespace gptc

#endif  // GPTC_PRELUDE_CPU_SCRATCH_H
