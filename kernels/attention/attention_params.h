// Kernel-side parameters of the disentangled attention forward, derived on the host from an
// AttentionProblem (disentangled_attention.cu).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace dflash::kernels {

// Slots staged per band tile: a 64 x 64 tile spans 127 deltas, so at most 127 slots, plus up to
// 7 for aligning the window start down to an 8-slot boundary: 134, rounded up to 136.
inline constexpr int kSlotWindow = 136;
// Slots computed per band tile when the kernel makes the windows itself: the window starts at
// the tile's first slot (no alignment), and 127 deltas reach at most 127 slots when idx grows by
// at most one slot per delta (the host checks).
inline constexpr int kComputedWindow = 128;
inline constexpr int kTableSlack = kSlotWindow;
// Slot tables with |delta| <= this many entries each side are kept in shared memory as int16
// (DeBERTa-v3 needs 512).
inline constexpr int kSharedLutBand = 1024;
// Longest sequence the short-sequence kernel (attention_short_kernel.cuh) runs: its CTA holds all
// of a sequence's keys, 32 per key warp.
inline constexpr int kShortMaxKeys = 128;

template <typename Element>
struct AttentionParams {
  const Element* q;
  const Element* k;
  const Element* v;
  int64_t q_row_stride;
  int64_t k_row_stride;
  int64_t v_row_stride;
  Element* out;
  int64_t out_row_stride;
  // C2P / P2C tables [H, total_tokens, slot_stride] for slots slot_base .. slot_base + slots - 1
  // (slot_stride: slots rounded up to 8, so every 8-slot group is a 16-byte aligned load), or
  // null. Each table is followed by kTableSlack elements so window loads may run past its end.
  const Element* c2p;
  const Element* p2c;
  // Instead of the tables (kernel built with kComputeWindows): PosK / PosQ [pos_rows, H, d] (row
  // stride pos_row_stride elements); band tiles compute their C2P / P2C windows with MMAs.
  const Element* pos_key;
  const Element* pos_query;
  int64_t pos_row_stride;
  int pos_rows;
  int slots;
  int slot_stride;
  int slot_base;
  // Sequences: cu_seqlens, or the padded layout (key_padding_mask != null).
  const int32_t* cu_seqlens;
  const uint8_t* key_padding_mask;
  int padded_length;
  int sequence_offset;  // Added to blockIdx.z: launches cover at most 65535 sequences each.
  // The launch's last tail_groups (head, sequence) groups are dealt rank-major, heaviest query
  // blocks first (attention_block_order.h; 0: linear order).
  int tail_groups;
  int num_heads;
  int total_tokens;
  float scale_log2;  // scale * log2(e): scores live in the exp2 domain.
  // idx(delta) over [-band, band] (device); saturation: every delta >= hi_threshold reads slot_hi,
  // every delta <= lo_threshold reads slot_lo.
  const int32_t* lut;
  int band;
  int lo_threshold;
  int hi_threshold;
  int slot_lo;
  int slot_hi;
  // idx(delta) = slot_zero + delta for every |delta| <= linear_band (v3: 128, the exact region of
  // the log buckets): band tiles inside it compute slots arithmetically instead of reading the
  // table (-1: no such region).
  int linear_band;
  int slot_zero;
  float* lse;
};

// The warpgroup kernels' TMA descriptions (tma_sm90.h): Q, K, V as 2-D tensors [tokens, H * d]
// (their row strides) read in [64, 64] boxes, 128-byte swizzled (the wgmma tile layout); and the
// C2P / P2C tables as [H * total_tokens rows, slot_stride] read in [64, kSlotWindow] boxes (the
// table kernel's band-tile windows) or, for the computed-window kernel, PosK / PosQ [pos_rows,
// H * d] read in [kComputedWindow, 64] boxes, 128-byte swizzled; unused elsewhere.
// A kernel parameter of its own (__grid_constant__: TMA reads it at its parameter address): taking
// the address of AttentionParams instead cost the kernel 50 registers (ptxas), its fields no
// longer being constant-bank operands.
struct AttentionTensorMaps {
  CUtensorMap c2p;
  CUtensorMap p2c;
  CUtensorMap q;
  CUtensorMap k;
  CUtensorMap v;
};

}  // namespace dflash::kernels
