// gptc/prelude/cpu/pages.h — host buffers in transparent huge pages (host only). Part of
// gptc/prelude.h; the runtime allocates the arena and the parameters with it too.
#ifndef GPTC_PRELUDE_CPU_PAGES_H
#define GPTC_PRELUDE_CPU_PAGES_H

#include <cstddef>
#include <cstdlib>
#include <cstring>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace gptc {

// ---------------------------------------------------------------------------------------
// A buffer of at least one huge page (2 MB) starts on one and asks Linux for transparent
// huge pages (where THP is "madvise", Debian's default, only a buffer that asks gets them).
// The products read their operands a row apart, and rows kilobytes long put each on its
// own 4 KB page: a TLB miss a row once the pages outnumber the TLB's entries (a
// 2,048-row operand 6 KB a row spans 3,072). Which page holds a value changes no bit.
// The size is not rounded up: a tail past the last whole huge page stays in 4 KB pages.
// GPTC_HUGE_PAGES=0 keeps every buffer in 4 KB pages (to time the difference;
// bench/NOTES.md, "matmul: huge pages").
// ---------------------------------------------------------------------------------------
constexpr size_t kHugePage = size_t(2) << 20;
inline bool huge_pages_on() {
  static const bool on = [] {
    const char* v = std::getenv("GPTC_HUGE_PAGES");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}
// `bytes` (at least 1) 64-byte aligned, or null when out of memory; freed with std::free.
inline void* alloc_pages(size_t bytes) {
  bool huge = false;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  huge = bytes >= kHugePage && huge_pages_on();
#endif
  void* p = nullptr;
  if (posix_memalign(&p, huge ? kHugePage : 64, bytes ? bytes : 1) != 0) return nullptr;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (huge) madvise(p, bytes, MADV_HUGEPAGE);  // advice: if refused, the pages stay 4 KB
#endif
  return p;
}

}  // namespace gptc

#endif  // GPTC_PRELUDE_CPU_PAGES_H
