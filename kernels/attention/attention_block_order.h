// The order in which a launch's CTAs take their query blocks.
//
// A launch of grid (m_blocks, heads, sequences) is dispatched in linear block order, m_block
// fastest, and the SMs take CTAs as slots free. Where a sequence has saturated key tiles, its query
// blocks differ in cost: a block near either end of the sequence has fewer band tiles (at most 8 on
// its outer side instead of 8 + 8), and a band tile costs about 2.6 saturated ones (HISTORY.md
// v9.6). In linear order the last CTAs to start are a mix of heavy and light blocks, and the SMs
// that drew heavy ones finish last. So the CTAs of the last (head, sequence) groups, about three
// quarters of a wave of resident CTAs (the launch's choice: kAttentionVariants' tail_ctas_per_sm),
// run rank-major instead: rank r of every such group before rank r + 1, and rank r is the r-th
// block counted from the sequence's middle outward, the heaviest first (longest-processing-time
// order). Only the tail is reordered: the groups before it keep their blocks together in time,
// which keeps each sequence's K / V rows in L2 while its blocks read them (the whole batch's K and
// V, 50 MB at 16k tokens x 768, is L2's size).
#pragma once

#ifndef DFLASH_HOST_DEVICE
#if defined(__CUDACC__)
#define DFLASH_HOST_DEVICE __host__ __device__
#else
#define DFLASH_HOST_DEVICE
#endif
#endif

namespace dflash::kernels {

// A CTA's work, from its block index. rank < 0: the block is query block m_block of its group
// (linear order). rank >= 0: the block's group is in the tail and the CTA runs its rank-th block
// in CenterOutBlock order, if the sequence has that many (the CTA exits otherwise).
struct LaunchBlock {
  int m_block;
  int head;
  int sequence;  // In the launch (blockIdx.z's range).
  int rank;
};

// The tail's size in groups (a group is one head of one sequence: grid_x CTAs) for about
// tail_ctas CTAs of a launch of `groups` groups: whole groups, at most all of them.
inline int TailGroups(int tail_ctas, int grid_x, int groups) {
  if (tail_ctas <= 0) return 0;
  const int wanted = (tail_ctas + grid_x - 1) / grid_x;
  return wanted < groups ? wanted : groups;
}

// CTA (x, y, z) of grid (grid_x, grid_y, grid_z) = (m_blocks, heads, sequences), whose last
// tail_groups groups (numbered y + grid_y z) are dealt rank-major: the t-th CTA of the tail in
// linear order takes rank t / tail_groups of tail group t % tail_groups. tail_groups 0: linear.
DFLASH_HOST_DEVICE inline LaunchBlock OrderLaunchBlock(int x, int y, int z, int grid_x, int grid_y,
                                                       int grid_z, int tail_groups) {
  LaunchBlock block{x, y, z, -1};
  if (tail_groups <= 0) return block;
  const int first_tail_group = grid_y * grid_z - tail_groups;
  const int group = y + grid_y * z;
  if (group < first_tail_group) return block;
  const int t = (group - first_tail_group) * grid_x + x;
  const int tail_group = first_tail_group + t % tail_groups;
  block.rank = t / tail_groups;
  block.head = tail_group % grid_y;
  block.sequence = tail_group / grid_y;
  return block;
}

// The query block of rank `rank` (< blocks) of a sequence of `blocks` query blocks: the middle
// block first, then alternately one below and one above it (blocks 2, 1, 3, 0 of four): blocks in
// order of their distance to the nearer end, farthest first.
DFLASH_HOST_DEVICE inline int CenterOutBlock(int rank, int blocks) {
  const int center = blocks / 2;
  return rank % 2 == 1 ? center - (rank + 1) / 2 : center + rank / 2;
}

}  // namespace dflash::kernels
