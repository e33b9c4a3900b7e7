#include "engine/cpu/disentangled_attention.h"

#include <algorithm>
#include <vector>

#include "engine/cpu/elementwise.h"
#include "engine/cpu/gemm.h"

namespace dflash::cpu {
namespace {

// Query rows per block: bounds the score buffer to kBlockRows x L floats per head.
constexpr int64_t kBlockRows = 128;

}  // namespace

void DisentangledAttention(const DisentangledAttentionArgs& args) {
  const int64_t d = args.head_dim;
  const bool relative =
      args.index != nullptr && (args.pos_key != nullptr || args.pos_query != nullptr);
  std::vector<float> c2p;
  std::vector<float> p2c;
  std::vector<float> scores;
  std::vector<int32_t> local_slot;

  for (int s = 0; s < args.num_sequences; ++s) {
    const int64_t base = args.cu_seqlens[s];
    const int64_t length = args.cu_seqlens[s + 1] - base;
    // idx is non-decreasing in delta, so the slots of this sequence form [lo, hi].
    int32_t lo = 0;
    int64_t slots = 0;
    if (relative) {
      lo = (*args.index)(-(length - 1));
      slots = (*args.index)(length - 1) - lo + 1;
      local_slot.resize(static_cast<size_t>(2 * length - 1));
      for (int64_t delta = -(length - 1); delta <= length - 1; ++delta) {
        local_slot[static_cast<size_t>(delta + length - 1)] = (*args.index)(delta)-lo;
      }
    }
    for (int h = 0; h < args.num_heads; ++h) {
      const float* q = args.q + base * args.ld_q + h * d;
      const float* k = args.k + base * args.ld_k + h * d;
      const float* v = args.v + base * args.ld_v + h * d;
      const bool use_c2p = relative && args.pos_key != nullptr;
      const bool use_p2c = relative && args.pos_query != nullptr;
      // C2P[i, slot] = Q_i . PosK[lo + slot] and P2C[j, slot] = K_j . PosQ[lo + slot]: [L, slots].
      if (use_c2p) {
        c2p.resize(static_cast<size_t>(length * slots));
        Gemm(length, slots, d, 1.0f, {q, args.ld_q, false},
             {args.pos_key + lo * args.ld_pos + h * d, args.ld_pos, true}, 0.0f, c2p.data(), slots);
      }
      if (use_p2c) {
        p2c.resize(static_cast<size_t>(length * slots));
        Gemm(length, slots, d, 1.0f, {k, args.ld_k, false},
             {args.pos_query + lo * args.ld_pos + h * d, args.ld_pos, true}, 0.0f, p2c.data(),
             slots);
      }
      for (int64_t i0 = 0; i0 < length; i0 += kBlockRows) {
        const int64_t rows = std::min(kBlockRows, length - i0);
        scores.resize(static_cast<size_t>(rows * length));
        Gemm(rows, length, d, 1.0f, {q + i0 * args.ld_q, args.ld_q, false}, {k, args.ld_k, true},
             0.0f, scores.data(), length);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = i0 + r;
          float* row = scores.data() + r * length;
          if (relative) {
            // local_slot[i - j + L - 1] for j = 0.. runs backwards from i + L - 1.
            const int32_t* slot_of_j = local_slot.data() + i + length - 1;
            const float* c2p_row = use_c2p ? c2p.data() + i * slots : nullptr;
            for (int64_t j = 0; j < length; ++j) {
              const int32_t slot = slot_of_j[-j];
              float bias = 0.0f;
              if (use_c2p) bias += c2p_row[slot];
              if (use_p2c) bias += p2c[static_cast<size_t>(j * slots + slot)];
              row[j] = (row[j] + bias) * args.scale;
            }
          } else {
            for (int64_t j = 0; j < length; ++j) row[j] *= args.scale;
          }
          SoftmaxRow(row, length);
        }
        Gemm(rows, d, length, 1.0f, {scores.data(), length, false}, {v, args.ld_v, false}, 0.0f,
             args.out + (base + i0) * args.ld_out + h * d, args.ld_out);
      }
    }
  }
}

}  // namespace dflash::cpu
