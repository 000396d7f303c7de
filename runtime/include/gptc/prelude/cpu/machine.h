// gptc/prelude/cpu/machine.h — the machine the kernels run on: its data caches, read once at
// run time (host only). Part of gptc/prelude.h. The matmul chooses its blocking from them
// (gptc/prelude/matmul.h, matmul_blocking; docs/architecture.md, "Blocking from the
// machine"). Which sizes a kernel picks never changes a bit of its results.
#ifndef GPTC_PRELUDE_CPU_MACHINE_H
#define GPTC_PRELUDE_CPU_MACHINE_H

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "gptc/prelude/base.h"
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__CUDACC__)
#include <cpuid.h>
#endif

namespace gptc {

// One level of data cache as one core sees it: its size, associativity, line and how many
// logical CPUs share it (a core's own L1 and L2: 1 or its SMT siblings; the L3: many).
struct CacheLevel {
  int64_t bytes = 0;
  int ways = 0;
  int line = 64;
  int sharing = 1;
};
struct Caches {
  CacheLevel l1d, l2, l3;
  const char* source = "default";  // "sysfs", "cpuid", "GPTC_CPU_CACHES" or "default"
};

namespace detail {
// "32K", "1024K", "32M", "48" (bytes): sysfs's sizes and GPTC_CPU_CACHES's; 0 if not one.
inline int64_t parse_bytes(const char* s, const char** end = nullptr) {
  char* e = nullptr;
  const long long v = std::strtoll(s, &e, 10);
  if (e == s || v <= 0) return 0;
  int64_t scale = 1;
  if (*e == 'K' || *e == 'k') scale = 1024, ++e;
  else if (*e == 'M' || *e == 'm') scale = 1024 * 1024, ++e;
  if (end) *end = e;
  return int64_t(v) * scale;
}

// CPU 0's caches from /sys/devices/system/cpu/cpu0/cache/index*/ (Linux). A level counts
// once, its data or unified cache (not the instruction one).
inline bool read_sysfs_caches(Caches& c) {
  bool any = false;
  for (int i = 0; i < 8; ++i) {
    char dir[96], path[128], text[128];
    std::snprintf(dir, sizeof dir, "/sys/devices/system/cpu/cpu0/cache/index%d/", i);
    auto read = [&](const char* name) -> const char* {
      std::snprintf(path, sizeof path, "%s%s", dir, name);
      std::FILE* f = std::fopen(path, "r");
      if (!f) return nullptr;
      const bool ok = std::fgets(text, sizeof text, f) != nullptr;
      std::fclose(f);
      if (!ok) return nullptr;
      text[std::strcspn(text, "\n")] = 0;
      return text;
    };
    const char* type = read("type");
    if (!type) continue;
    if (std::strcmp(type, "Instruction") == 0) continue;
    const char* lv = read("level");
    if (!lv) continue;
    const int level = std::atoi(lv);
    CacheLevel* l = level == 1 ? &c.l1d : level == 2 ? &c.l2 : level == 3 ? &c.l3 : nullptr;
    if (!l) continue;
    const char* size = read("size");
    if (!size || !(l->bytes = parse_bytes(size))) continue;
    if (const char* w = read("ways_of_associativity")) l->ways = std::atoi(w);
    if (const char* ln = read("coherency_line_size")) l->line = std::atoi(ln) > 0 ? std::atoi(ln) : 64;
    if (const char* list = read("shared_cpu_list")) {  // "0-1", "0,8", "0-7,64-71"
      int n = 0;
      for (const char* p = list; *p;) {
        char* e = nullptr;
        const long a = std::strtol(p, &e, 10);
        if (e == p) break;
        long b = a;
        if (*e == '-') p = e + 1, b = std::strtol(p, &e, 10);
        n += int(b - a + 1);
        p = *e == ',' ? e + 1 : e;
      }
      l->sharing = n > 0 ? n : 1;
    }
    any = true;
  }
  return any;
}

// The same from cpuid's deterministic cache parameters: leaf 4 (Intel) or 0x8000001D (AMD
// with topology extensions). Where /sys is not mounted.
inline bool read_cpuid_caches(Caches& c) {
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__CUDACC__)
  unsigned a, b, cx, d;
  if (!__get_cpuid(0, &a, &b, &cx, &d)) return false;
  const bool amd = b == 0x68747541;  // "Auth"enticAMD
  const unsigned leaf = amd ? 0x8000001D : 4;
  if (amd && (!__get_cpuid(0x80000001, &a, &b, &cx, &d) || !(cx & (1u << 22)))) return false;
  if (!amd && a < 4) return false;
  bool any = false;
  for (unsigned i = 0; i < 16; ++i) {
    __cpuid_count(leaf, i, a, b, cx, d);
    const unsigned type = a & 31;
    if (type == 0) break;
    if (type == 2) continue;  // instruction cache
    const int level = int((a >> 5) & 7);
    CacheLevel* l = level == 1 ? &c.l1d : level == 2 ? &c.l2 : level == 3 ? &c.l3 : nullptr;
    if (!l) continue;
    l->ways = int((b >> 22) & 0x3ff) + 1;
    l->line = int(b & 0xfff) + 1;
    const int64_t partitions = int64_t((b >> 12) & 0x3ff) + 1, sets = int64_t(cx) + 1;
    l->bytes = int64_t(l->ways) * partitions * l->line * sets;
    l->sharing = int((a >> 14) & 0xfff) + 1;
    any = true;
  }
  return any;
#else
  (void)c;
  return false;
#endif
}

// GPTC_CPU_CACHES="L1D,L2,L3[,WAYS1,WAYS2]" in bytes or with K or M: a machine to plan for
// instead of this one's (experiments, and tests of the rule). Sharing is taken as 1.
inline bool parse_caches(const char* s, Caches& c) {
  int64_t v[5] = {0, 0, 0, 8, 8};
  int n = 0;
  for (const char* p = s; n < 5;) {
    const char* e = p;
    v[n] = parse_bytes(p, &e);
    if (!v[n]) return false;
    ++n;
    if (*e == 0) break;
    if (*e != ',') return false;
    p = e + 1;
  }
  if (n != 3 && n != 5) return false;
  c.l1d = {v[0], int(v[3]), 64, 1};
  c.l2 = {v[1], int(v[4]), 64, 1};
  c.l3 = {v[2], 16, 64, 1};
  return true;
}

// What is missing filled from a common machine's: 32 KB 8-way L1d, 512 KB 8-way L2, 8 MB L3.
inline void complete_caches(Caches& c) {
  if (c.l1d.bytes <= 0) c.l1d = {32 << 10, 8, 64, 1};
  if (c.l2.bytes <= 0) c.l2 = {512 << 10, 8, 64, 1};
  if (c.l3.bytes <= 0) c.l3 = {8 << 20, 16, 64, 1};
  for (CacheLevel* l : {&c.l1d, &c.l2, &c.l3}) {
    if (l->ways <= 0) l->ways = 8;
    if (l->line <= 0) l->line = 64;
    if (l->sharing <= 0) l->sharing = 1;
  }
}

inline Caches detect_caches() {
  Caches c;
  const char* env = std::getenv("GPTC_CPU_CACHES");
  if (env && *env && parse_caches(env, c)) {
    c.source = "GPTC_CPU_CACHES";
  } else if (read_sysfs_caches(c)) {
    c.source = "sysfs";
  } else {
    c = Caches();
    if (read_cpuid_caches(c)) c.source = "cpuid";
  }
  complete_caches(c);
  return c;
}
}  // namespace detail

// This machine's caches, read on first use.
inline const Caches& caches() {
  static const Caches c = detail::detect_caches();
  return c;
}

}  // namespace gptc

#endif  // GPTC_PRELUDE_CPU_MACHINE_H
