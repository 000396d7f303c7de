// core_latency — how long two of this process's CPUs take to pass a cache line back and
// forth: the first two CPUs it may run on, a thread pinned to each, one flag written in turn.
// Prints one JSON object: {"cpus": [a, b], "round_trip_ns": best of 5 timings of 20000
// round trips}, or a null round trip where the process may run on one CPU only.
//   c++ -std=c++17 -O2 -pthread bench/core_latency.cpp
//
// On a virtual machine the host places the two virtual CPUs, and may place them far apart,
// where a round trip takes many times what it takes between two cores sharing an L3.
// Every cache line one thread writes and the other then reads or writes crosses between
// them, which slows a step of small kernels (bench/NOTES.md, "The two CPUs' round trip",
// has the measurements). bench/run.py records this before each round, next to the step
// times.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

namespace {

alignas(64) std::atomic<long> flag{0};
constexpr long kTrips = 20000;

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

}  // namespace

int main() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  int cpus[2], found = 0;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE && found < 2; ++c)
      if (CPU_ISSET(c, &allowed)) cpus[found++] = c;
  if (found < 2) {
    std::printf("{\"cpus\": [], \"round_trip_ns\": null}\n");
    return 0;
  }
  double best = 1e30;
  for (int timing = 0; timing < 5; ++timing) {
    flag.store(0);
    bool pinned = true;
    // The other CPU answers each odd value with the next even one.
    std::thread other([&] {
      pinned &= pin(cpus[1]);
      for (long i = 0; i < kTrips; ++i) {
        while (flag.load(std::memory_order_acquire) != 2 * i + 1) {
        }
        flag.store(2 * i + 2, std::memory_order_release);
      }
    });
    pinned &= pin(cpus[0]);
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < kTrips; ++i) {
      flag.store(2 * i + 1, std::memory_order_release);
      while (flag.load(std::memory_order_acquire) != 2 * i + 2) {
      }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    other.join();
    if (!pinned) {
      std::fprintf(stderr, "core_latency: cannot pin a thread to CPU %d or %d\n", cpus[0], cpus[1]);
      return 1;
    }
    best = std::min(best, s / kTrips * 1e9);
  }
  std::printf("{\"cpus\": [%d, %d], \"round_trip_ns\": %.1f}\n", cpus[0], cpus[1], best);
  return 0;
}
