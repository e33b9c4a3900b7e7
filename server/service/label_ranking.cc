#include "server/service/label_ranking.h"

#include <algorithm>
#include <numeric>

namespace dflash::serving {

std::vector<int> RankByScore(std::span<const float> scores, size_t k) {
  std::vector<int> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  // stable_sort keeps ascending index order among equal scores. NaN (a raw logit of a broken
  // model) compares false both ways and so stays in index order rather than corrupting the sort.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  if (k > 0 && k < order.size()) order.resize(k);
  return order;
}

}  // namespace dflash::serving
