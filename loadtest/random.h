// Seeded random draws for the load generator. The algorithms are written out here instead of using
// <random>'s distributions, whose output is implementation-defined: a workload run with the same
// --seed must produce the same requests and the same arrival times on every standard library.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace dflash::loadtest {

// SplitMix64 finalizer: turns (seed, stream index) pairs into well-mixed, independent RNG seeds.
inline uint64_t MixSeed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// mt19937_64's output sequence is fixed by the standard, unlike the distributions.
using Rng = std::mt19937_64;

// Uniform in [0, 1) with 53 random bits.
inline double UniformDouble(Rng& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Uniform integer in [lo, hi] (lo <= hi). The modulo bias is below 2^-40 for the small ranges used
// here, far under what a load test can notice.
inline int64_t UniformInt(Rng& rng, int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(rng() % span);
}

// Standard normal by Box-Muller (one value per call; the second is discarded for simplicity).
inline double StandardNormal(Rng& rng) {
  const double u1 = 1.0 - UniformDouble(rng);  // (0, 1]: log(u1) is finite.
  const double u2 = UniformDouble(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// Exponential with the given rate (mean 1 / rate), by inversion.
inline double Exponential(Rng& rng, double rate) {
  return -std::log(1.0 - UniformDouble(rng)) / rate;
}

}  // namespace dflash::loadtest
