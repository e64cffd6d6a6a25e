// Per-cell math of the TDT (token-and-duration transducer) loss ops, shared by the CPU and CUDA kernels.
//
// Xu et al., "Efficient Sequence Transduction by Jointly Predicting Tokens and Durations", ICML 2023. A row
// of the joint output holds V token scores followed by D duration scores; both heads are log-softmax-
// normalised separately, and sigma (logit under-normalisation) is subtracted from the token log-probs:
//   b(t, u)    = log softmax(tokens)[blank] - sigma      y(t, u) = log softmax(tokens)[y_u] - sigma
//   q_i(t, u)  = log softmax(durations)[i]                d_i = durations[i], sorted, distinct, d_0 = 0, d_1 = 1
// Arcs leaving cell (t, u) with duration index i: a blank to (t + d_i, u) for d_i >= 1 (a blank always
// advances), a label to (t + d_i, u + 1) for u < U_n. An arc must land inside the lattice (t + d_i < T_n),
// except the final blank from (t, U_n) with t + d_i == T_n, which ends the path. So
//   alpha(0, 0) = 0
//   alpha(t, u) = logsumexp_i [ alpha(t - d_i, u)     + b(t - d_i, u)     + q_i(t - d_i, u)     (d_i >= 1),
//                               alpha(t - d_i, u - 1) + y(t - d_i, u - 1) + q_i(t - d_i, u - 1) (u >= 1) ]
//   beta(t, u)  = logsumexp_i [ beta(t + d_i, u)     + b(t, u) + q_i(t, u)  (d_i >= 1, t + d_i < T_n),
//                               b(t, u) + q_i(t, u)                         (d_i >= 1, t + d_i == T_n, u == U_n),
//                               beta(t + d_i, u + 1) + y(t, u) + q_i(t, u)  (u < U_n, t + d_i < T_n) ]
//   -log P(y | x) = -beta(0, 0) = -logsumexp_{i: d_i >= 1, T_n - d_i >= 0} [alpha(T_n - d_i, U_n) + b + q_i].
// The label arc of duration 0 stays in frame t: alpha(t, u) needs alpha(t, u - 1), so the recursions run
// u-ascending (beta: descending) inside a frame, or along anti-diagonals t + u (every arc increases t + u).
//
// Tensors (accumulation dtype acc_t, S = 2 + D values per cell):
//   log_probs     (N, T, U1, S)  [b, y, q_0, ..., q_{D-1}]
//   denominators  (N, T, U1, 2)  log-sum-exp of the token scores and of the duration scores
#pragma once

#include "transducer.h"

namespace asr_plugin {

// One CUDA gradient-kernel lane per duration.
constexpr int64_t kMaxDurations = 32;

// The duration values d_i, passed by value to kernels (no device upload).
struct Durations {
  int64_t value[kMaxDurations];
  int64_t count;
};

// alpha(t, u) from the alphas of earlier cells. `lp` and `alpha` point at the sample's (0, 0).
template <typename acc_t>
ASR_HOST_DEVICE acc_t tdt_alpha(const acc_t* lp, const acc_t* alpha, const Durations& durations, int64_t t,
                                int64_t u, int64_t U1) {
  const int64_t S = 2 + durations.count;
  acc_t value = (t == 0 && u == 0) ? acc_t(0) : neg_inf<acc_t>();
  for (int64_t i = 0; i < durations.count; ++i) {
    const int64_t d = durations.value[i];
    if (d > t) break;  // sorted: every later duration starts before frame 0 too
    const int64_t from = (t - d) * U1 + u;
    if (d >= 1) value = log_add(value, alpha[from] + lp[S * from] + lp[S * from + 2 + i]);
    if (u >= 1) value = log_add(value, alpha[from - 1] + lp[S * (from - 1) + 1] + lp[S * (from - 1) + 2 + i]);
  }
  return value;
}

// beta(t, u) from the betas of later cells. `lp` and `beta` point at the sample's (0, 0).
template <typename acc_t>
ASR_HOST_DEVICE acc_t tdt_beta(const acc_t* lp, const acc_t* beta, const Durations& durations, int64_t t, int64_t u,
                               int64_t U1, int64_t T_n, int64_t U_n) {
  const int64_t S = 2 + durations.count;
  const int64_t c = t * U1 + u;
  acc_t value = neg_inf<acc_t>();
  for (int64_t i = 0; i < durations.count; ++i) {
    const int64_t d = durations.value[i];
    const acc_t q = lp[S * c + 2 + i];
    if (t + d < T_n) {
      if (d >= 1) value = log_add(value, beta[c + d * U1] + lp[S * c] + q);
      if (u < U_n) value = log_add(value, beta[c + d * U1 + 1] + lp[S * c + 1] + q);
    } else {
      if (t + d == T_n && u == U_n && d >= 1) value = log_add(value, lp[S * c] + q);
      break;  // sorted: every later duration leaves the lattice
    }
  }
  return value;
}

// Posterior mass through the blank and the label arc of duration index i leaving valid cell (t, u).
// `lp` points at the cell's S values, `beta` at beta(t, u); `a` = alpha(t, u) + log P.
template <typename acc_t>
struct ArcFlows {
  acc_t blank;
  acc_t label;
};

template <typename acc_t>
ASR_HOST_DEVICE ArcFlows<acc_t> tdt_arc_flows(const acc_t* lp, const acc_t* beta, acc_t a, int64_t d, int64_t i,
                                              int64_t U1, int64_t t, int64_t u, int64_t T_n, int64_t U_n) {
  ArcFlows<acc_t> flows{acc_t(0), acc_t(0)};
  const acc_t q = lp[2 + i];
  if (t + d < T_n) {
    if (d >= 1) flows.blank = exp(a + lp[0] + q + beta[d * U1]);
    if (u < U_n) flows.label = exp(a + lp[1] + q + beta[d * U1 + 1]);
  } else if (t + d == T_n && u == U_n && d >= 1) {
    flows.blank = exp(a + lp[0] + q);
  }
  return flows;
}

// A valid row is bad when a denominator is not finite or a log-prob is NaN or +inf.
template <typename acc_t>
ASR_HOST_DEVICE bool tdt_row_is_bad(const acc_t* den, const acc_t* lp, int64_t D) {
  bool bad = row_is_bad(den[0], lp[0], lp[1]) || row_is_bad(den[1], acc_t(0), acc_t(0));
  for (int64_t i = 0; i < D; ++i) bad = bad || row_is_bad(den[1], lp[2 + i], acc_t(0));
  return bad;
}

}  // namespace asr_plugin
