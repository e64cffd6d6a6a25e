// Launch shapes and warp-level row math shared by the CUDA kernels of both lattices (RNN-T, TDT): one warp per
// lattice row (t, u) for the row kernels, one block per sample for the recursions.
#pragma once

#include <torch/types.h>

#include "../transducer.h"

namespace asr_plugin {
namespace gpu {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 8;
constexpr int kRowThreads = kWarp * kRowsPerBlock;
constexpr int kDiagonalThreads = 256;

// CUDA caps gridDim.x at 2^31 - 1 blocks.
constexpr int64_t kMaxGridX = 2147483647;

inline dim3 row_blocks(int64_t rows) {
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  TORCH_CHECK(blocks <= kMaxGridX, "transducer op: ", rows, " lattice rows need ", blocks,
              " blocks, over CUDA's grid limit; split the batch or lower the memory budget");
  return dim3(static_cast<unsigned int>(blocks));
}

// Merge two partial (max, sum of exp(x - max)) pairs; exact when a side is empty (max = -inf).
template <typename acc_t>
__device__ __forceinline__ void merge_max_sum(acc_t& m, acc_t& s, acc_t other_m, acc_t other_s) {
  const acc_t new_m = m > other_m ? m : other_m;
  const acc_t mine = m == neg_inf<acc_t>() ? acc_t(0) : s * exp(m - new_m);
  const acc_t theirs = other_m == neg_inf<acc_t>() ? acc_t(0) : other_s * exp(other_m - new_m);
  m = new_m;
  s = mine + theirs;
}

// log-sum-exp of x[begin, end) over the 32 lanes of a warp (each lane reads begin + lane, begin + lane + 32,
// ...); every lane returns the result. NaN or +inf anywhere make it NaN or +inf.
template <typename scalar_t, typename acc_t>
__device__ __forceinline__ acc_t warp_log_sum_exp(const scalar_t* x, int64_t begin, int64_t end, int lane) {
  acc_t m = neg_inf<acc_t>(), s = acc_t(0);
  for (int64_t v = begin + lane; v < end; v += kWarp) merge_max_sum(m, s, static_cast<acc_t>(x[v]), acc_t(1));
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    merge_max_sum(m, s, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, s, offset));
  }
  return m + log(s);
}

// Sum of `value` over the 32 lanes of a warp; every lane returns it.
template <typename acc_t>
__device__ __forceinline__ acc_t warp_sum(acc_t value) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

}  // namespace gpu
}  // namespace asr_plugin
