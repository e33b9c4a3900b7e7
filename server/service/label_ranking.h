// Ordering of scored labels and documents in responses: highest score first, ties broken by the
// lower id / index, optionally cut to the best k.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace dflash::serving {

// Indices of `scores`, best first (ties: lower index first); at most `k` of them (0: all).
std::vector<int> RankByScore(std::span<const float> scores, size_t k);

}  // namespace dflash::serving
