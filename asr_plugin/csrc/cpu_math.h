// Row math of the CPU kernels (RNN-T and TDT): a vectorisable exp, the log-sum-exp of a row of scores, the
// token scores' gradient of a row, and the row loop of the gradient ops.
#pragma once

#include <ATen/Parallel.h>
#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "transducer.h"

namespace asr_plugin {
namespace cpu {

// Rows of the (N, Tc, U1) grid handed to one task of at::parallel_for.
constexpr int64_t kRowGrain = 64;
// exp(x) for x <= 0 (every softmax argument here is x - max or x - log-sum-exp), branch-free so the row
// loops vectorise: Cephes' degree-6 polynomial on x - n ln2, scaled by 2^n (~2 ulp). Results below
// exp(-87) are flushed to ~1.6e-38 instead of 0; NaN propagates.
inline float exp_nonpositive(float x) {
  x = std::max(x, -87.0f);
  const float n = static_cast<float>(static_cast<int32_t>(x * 1.44269504088896341f - 0.5f));
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float power;
  std::memcpy(&power, &bits, sizeof(power));
  return p * power;
}

inline double exp_nonpositive(double x) { return std::exp(x); }

// log-sum-exp of one row in the accumulation type. NaN or +inf anywhere make it NaN (via x - max).
template <typename scalar_t, typename acc_t>
acc_t row_denominator(const scalar_t* x, int64_t V) {
  acc_t max_x = neg_inf<acc_t>();
#pragma omp simd reduction(max : max_x)
  for (int64_t v = 0; v < V; ++v) max_x = std::max(max_x, static_cast<acc_t>(x[v]));
  acc_t sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t v = 0; v < V; ++v) sum += exp_nonpositive(static_cast<acc_t>(x[v]) - max_x);
  return max_x + log(sum);
}

// The token scores' gradient of one valid row: g[v] = weight * clamp(softmax_v * occupancy - [v == blank] *
// blank_flow - [v == label] * label_flow) for v < V (label < 0: none). `g` may alias `x`: the blank and label
// entries are read before the loop overwrites them.
template <typename scalar_t, typename acc_t>
inline void token_row_grad(const scalar_t* x, scalar_t* g, int64_t V, int64_t blank, int64_t label, acc_t den,
                           acc_t occupancy, acc_t blank_flow, acc_t label_flow, acc_t clamp, acc_t weight) {
  const acc_t softmax_blank = exp_nonpositive(static_cast<acc_t>(x[blank]) - den);
  const acc_t softmax_label = label >= 0 ? exp_nonpositive(static_cast<acc_t>(x[label]) - den) : acc_t(0);
  _Pragma("omp simd") for (int64_t v = 0; v < V; ++v) {
    const acc_t value = exp_nonpositive(static_cast<acc_t>(x[v]) - den) * occupancy;
    g[v] = static_cast<scalar_t>(clamp_and_weight(value, clamp, weight));
  }
  g[blank] = static_cast<scalar_t>(clamp_and_weight(softmax_blank * occupancy - blank_flow, clamp, weight));
  if (label >= 0) g[label] = static_cast<scalar_t>(clamp_and_weight(softmax_label * occupancy - label_flow, clamp, weight));
}

// A valid row (t, u) of a gradient op's T-chunk: its scores, their gradient and the sample's constants.
template <typename scalar_t, typename acc_t>
struct GradRow {
  const scalar_t* x;  // the row's W scores
  scalar_t* g;        // their gradient (may alias x)
  int64_t cell;       // (n, t, u) in the whole-lattice (N, T, U1) statistics
  RowIndex r;
  int64_t T_n, U_n;
  int64_t label;            // y_u, or -1 at u == U_n
  acc_t alpha_minus_ll;     // alpha(t, u) - log P
  acc_t weight;             // the sample's upstream gradient
};

// Calls `body(GradRow)` for every valid row of the chunk `logits` (N, Tc, U1, W) whose first frame is
// `t_offset` of the (N, T, U1) lattice of `alphas`; zero-fills the gradient of the other rows.
template <typename scalar_t, typename acc_t, typename Body>
void for_each_grad_row(const at::Tensor& logits, const at::Tensor& grad, const at::Tensor& alphas,
                       const at::Tensor& nll, const at::Tensor& targets, const at::Tensor& logit_lengths,
                       const at::Tensor& target_lengths, const at::Tensor& weights, int64_t t_offset, Body body) {
  const int64_t N = logits.size(0), Tc = logits.size(1), U1 = logits.size(2), W = logits.size(3);
  const int64_t T = alphas.size(1), U = targets.size(1);
  const int64_t* tgt = targets.data_ptr<int64_t>();
  const int64_t* T_len = logit_lengths.data_ptr<int64_t>();
  const int64_t* U_len = target_lengths.data_ptr<int64_t>();
  const scalar_t* x_all = logits.data_ptr<scalar_t>();
  scalar_t* g_all = grad.data_ptr<scalar_t>();
  const acc_t* alpha_all = alphas.data_ptr<acc_t>();
  const acc_t* nll_all = nll.data_ptr<acc_t>();
  const acc_t* weight_all = weights.data_ptr<acc_t>();
  at::parallel_for(0, N * Tc * U1, kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const RowIndex r = row_index(row, Tc, U1, t_offset);
      scalar_t* g = g_all + row * W;
      const int64_t T_n = T_len[r.n], U_n = U_len[r.n];
      if (r.t >= T_n || r.u > U_n) {
        std::fill(g, g + W, scalar_t(0));
        continue;
      }
      const int64_t cell = (r.n * T + r.t) * U1 + r.u;
      body(GradRow<scalar_t, acc_t>{x_all + row * W, g, cell, r, T_n, U_n, r.u < U_n ? tgt[r.n * U + r.u] : -1,
                                    alpha_all[cell] + nll_all[r.n], weight_all[r.n]});
    }
  });
}

}  // namespace cpu
}  // namespace asr_plugin
