// Shared declarations and per-cell math of the transducer (RNN-T) loss ops.
//
// Lattice conventions used by every kernel (CPU and CUDA):
//   logits        (N, Tc, U1, V)  raw scores of a T-chunk starting at global frame t_offset
//   log_probs     (N, T, U1, 2)   [blank, label] log-probabilities, accumulation dtype
//   denominators  (N, T, U1)      log-sum-exp of each logits row, accumulation dtype
//   alphas, betas (N, T, U1)      forward / backward log-variables, accumulation dtype
//   nll           (N,)            -log P(y | x) = -betas[n, 0, 0]
//   bad           (N,) bool       set (never cleared) for a sample with a non-finite valid row
// A cell (t, u) of sample n is valid when t < logit_lengths[n] and u <= target_lengths[n];
// every op writes zeros outside the valid region so padding never leaks into gradients.
// The accumulation dtype is float32 for float32/float16/bfloat16 logits and float64 for float64.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#ifdef __CUDACC__
#define ASR_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ASR_HOST_DEVICE inline
#endif

namespace asr_plugin {

// Float overloads on the host too (the unqualified C functions are double-only).
using std::exp;
using std::log;
using std::log1p;

template <typename acc_t>
ASR_HOST_DEVICE acc_t neg_inf() {
  return -std::numeric_limits<acc_t>::infinity();
}

struct RowIndex {
  int64_t n, t, u;  // sample, global frame, label position
};

// Row `row` of an (N, Tc, U1) grid whose first frame is global frame `t_offset`.
ASR_HOST_DEVICE RowIndex row_index(int64_t row, int64_t Tc, int64_t U1, int64_t t_offset) {
  const int64_t u = row % U1;
  const int64_t t = (row / U1) % Tc;
  return {row / (U1 * Tc), t + t_offset, u};
}

// A valid row is bad when its log-sum-exp is not finite or a log-prob is NaN or +inf (-inf is a legitimately
// masked token). Written without std::isfinite so host and device share it.
template <typename acc_t>
ASR_HOST_DEVICE bool row_is_bad(acc_t denominator, acc_t blank_lp, acc_t label_lp) {
  const acc_t inf = std::numeric_limits<acc_t>::infinity();
  const bool finite_den = denominator == denominator && denominator != inf && denominator != -inf;
  const bool bad_blank = blank_lp != blank_lp || blank_lp == inf;
  const bool bad_label = label_lp != label_lp || label_lp == inf;
  return !finite_den || bad_blank || bad_label;
}

// log(exp(a) + exp(b)) that is exact when one side is -inf.
template <typename acc_t>
ASR_HOST_DEVICE acc_t log_add(acc_t a, acc_t b) {
  if (a == neg_inf<acc_t>()) return b;
  if (b == neg_inf<acc_t>()) return a;
  const acc_t hi = a > b ? a : b;
  const acc_t lo = a > b ? b : a;
  return hi + log1p(exp(lo - hi));
}

// Posterior weights of one valid cell (t, u): the occupancy and the probability mass that leaves the
// cell by emitting blank (to t+1) or the next label (to u+1). grad_v = softmax_v * occupancy
// - [v == blank] * blank_flow - [v == y_u] * label_flow.
template <typename acc_t>
struct CellFlows {
  acc_t occupancy;
  acc_t blank_flow;
  acc_t label_flow;
};

// `lp`, `alpha`, `beta` point at cell (t, u) of the sample; `beta_stride_t` is U1.
template <typename acc_t>
ASR_HOST_DEVICE CellFlows<acc_t> cell_flows(const acc_t* lp, const acc_t* alpha, const acc_t* beta,
                                            int64_t beta_stride_t, int64_t t, int64_t u, int64_t T_n,
                                            int64_t U_n, acc_t log_likelihood) {
  const acc_t a = *alpha - log_likelihood;
  CellFlows<acc_t> flows;
  flows.occupancy = exp(a + *beta);
  if (t + 1 < T_n) {
    flows.blank_flow = exp(a + lp[0] + beta[beta_stride_t]);
  } else {
    flows.blank_flow = (u == U_n) ? exp(a + lp[0]) : acc_t(0);
  }
  flows.label_flow = (u < U_n) ? exp(a + lp[1] + beta[1]) : acc_t(0);
  return flows;
}

// FastEmit (Yu et al. 2021), as NeMo's numba loss and warp-transducer define it: the gradient w.r.t. the label
// log-prob of every arc is scaled by (1 + lambda), the blank arcs' is not. Through the log-softmax that adds
// lambda * label_flow to the occupancy (the softmax term) and scales the label term by (1 + lambda). The loss
// value is scaled by (1 + lambda) outside the kernels (lattices.RNNT.loss_values).
template <typename acc_t>
ASR_HOST_DEVICE CellFlows<acc_t> with_fastemit(CellFlows<acc_t> flows, acc_t fastemit_lambda) {
  flows.occupancy += fastemit_lambda * flows.label_flow;
  flows.label_flow *= acc_t(1) + fastemit_lambda;
  return flows;
}

// Clamp like torchaudio (before the upstream weight), then weight.
template <typename acc_t>
ASR_HOST_DEVICE acc_t clamp_and_weight(acc_t g, acc_t clamp, acc_t weight) {
  if (clamp > acc_t(0)) {
    g = g > clamp ? clamp : g;
    g = g < -clamp ? -clamp : g;
  }
  return g * weight;
}

}  // namespace asr_plugin
