// gptc/prelude/cpu/errors.h — errors found in data, the entry's index checks and the
// sanitizer's redzones (host only). Part of gptc/prelude.h.
#ifndef GPTC_PRELUDE_CPU_ERRORS_H
#define GPTC_PRELUDE_CPU_ERRORS_H

#include "gptc/prelude/base.h"

namespace gptc {

// ---------------------------------------------------------------------------------------
// Errors found in data (an index out of range). A kernel reports and carries on with a
// safe value, so nothing reads out of bounds; the entry returns the first message to the
// runtime, which fails the run with it. (CPU only; CUDA gets a device flag later.)
// ---------------------------------------------------------------------------------------
// One slot per kernels.so, shared by the threads of a GPTC_FOR: the first report wins.
inline const char*& error_slot() {
  static const char* slot = nullptr;
  return slot;
}
inline void report_error(const char* message) {
  const char* expected = nullptr;
  __atomic_compare_exchange_n(&error_slot(), &expected, message, false, __ATOMIC_SEQ_CST,
                              __ATOMIC_SEQ_CST);
}
inline const char* take_error() { return __atomic_exchange_n(&error_slot(), nullptr, __ATOMIC_SEQ_CST); }
// Whether every id of ids[0, n) lies in [0, bound) or, with `ignore` (cross_entropy's
// ignore_index), equals it. The entry checks the indices its caller gave this way before
// any kernel runs, so that a step with a bad one fails whole: the kernels' own checks come
// after parameters and optimizer state may have been updated.
inline bool ids_in_range(const int64_t* ids, int64_t n, int64_t bound, const int64_t* ignore) {
  bool ok = true;
  for (int64_t i = 0; i < n; ++i)
    ok &= (ids[i] >= 0 && ids[i] < bound) || (ignore && ids[i] == *ignore);
  return ok;
}

// gptc compile --sanitize: while a step runs, the arena's bytes that no buffer holds (the
// redzones gpt-plan-memory left between buffers) are poisoned, so that AddressSanitizer
// reports a kernel that reads or writes past its buffer instead of letting it touch the
// next one. Without -fsanitize=address it does nothing.
struct ArenaRedzones {
  ArenaRedzones(char* arena, int64_t bytes, const int64_t (*gaps)[2], int64_t n)
      : arena(arena), bytes(bytes) {
#if defined(__SANITIZE_ADDRESS__)
    for (int64_t i = 0; i < n; ++i) __asan_poison_memory_region(arena + gaps[i][0], gaps[i][1]);
#else
    (void)gaps, (void)n;
#endif
  }
  ~ArenaRedzones() {
#if defined(__SANITIZE_ADDRESS__)
    __asan_unpoison_memory_region(arena, bytes);
#endif
  }
  ArenaRedzones(const ArenaRedzones&) = delete;
  ArenaRedzones& operator=(const ArenaRedzones&) = delete;
  char* arena;
  int64_t bytes;
};

}  // namespace gptc

#endif  // GPTC_PRELUDE_CPU_ERRORS_H
