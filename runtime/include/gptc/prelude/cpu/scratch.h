// gptc/prelude/cpu/scratch.h — per-thread scratch buffers (host only). Part of
// gptc/prelude.h.
#ifndef GPTC_PRELUDE_CPU_SCRATCH_H
#define GPTC_PRELUDE_CPU_SCRATCH_H

#include "gptc/prelude/base.h"
#include "gptc/prelude/cpu/pages.h"

namespace gptc {

// ---------------------------------------------------------------------------------------
// Scratch: a per-thread buffer per slot, 64-byte aligned (alloc_pages: in huge pages from
// 2 MB), grown once to the largest size a kernel asked for (packing panels, transposed keys,
// a matmul's transposed operand copied to rows, which the whole team reads). No allocation
// in steady state.
// ---------------------------------------------------------------------------------------
namespace detail {
// A thread's buffers, freed when the thread ends (an OpenMP team that shrinks ends threads;
// without this their buffers leaked).
struct ScratchSlots {
  void* bufs[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  int64_t sizes[5] = {0, 0, 0, 0, 0};
  ~ScratchSlots() {
    for (void* b : bufs) std::free(b);
  }
};
}  // namespace detail
template <class T>
inline T* scratch(int slot, int64_t count) {
  static thread_local detail::ScratchSlots s;
  const int64_t bytes = count * (int64_t)sizeof(T);
  if (s.sizes[slot] < bytes) {
    std::free(s.bufs[slot]);
    s.bufs[slot] = alloc_pages(size_t(bytes));
    if (!s.bufs[slot]) throw std::bad_alloc();
    s.sizes[slot] = bytes;
  }
  return static_cast<T*>(s.bufs[slot]);
}

}  // namespace gptc

#endif  // GPTC_PRELUDE_CPU_SCRATCH_H
