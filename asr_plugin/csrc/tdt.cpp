// TDT loss ops (schemas in transducer.cpp): CPU kernels. The lattice and its recursions are described in
// tdt.h, shared with the CUDA kernels (cuda/tdt_cuda.cu).
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <torch/types.h>

#include <algorithm>
#include <tuple>

#include "cpu_math.h"
#include "tdt.h"
#include "transducer.h"
#include "transducer_checks.h"

namespace asr_plugin {
namespace {

using cpu::exp_nonpositive;
using cpu::kRowGrain;
using cpu::row_denominator;
using cpu::for_each_grad_row;
using cpu::token_row_grad;

// (N, Tc, U1, V + D) logits -> log_probs (N, Tc, U1, 2 + D) [blank - sigma, label - sigma, durations...] and
// denominators (N, Tc, U1, 2) [tokens, durations]; flags samples with a non-finite valid row in `bad` (N,).
std::tuple<at::Tensor, at::Tensor> tdt_log_probs_cpu(const at::Tensor& logits, const at::Tensor& targets,
                                                     const at::Tensor& logit_lengths,
                                                     const at::Tensor& target_lengths, int64_t blank,
                                                     int64_t num_durations, double sigma, int64_t t_offset,
                                                     const at::Tensor& bad) {
  check_log_probs_args(logits, targets, logit_lengths, target_lengths, t_offset, bad);
  TORCH_CHECK(2 <= num_durations && num_durations <= kMaxDurations, "transducer op: num_durations must be in [2, ",
              kMaxDurations, "]");
  const int64_t D = num_durations, W = logits.size(3), V = W - D;
  check_vocab(logits, blank, V);
  const int64_t N = logits.size(0), Tc = logits.size(1), U1 = logits.size(2), S = 2 + D;
  const auto acc_dtype = accumulation_dtype(logits.scalar_type());
  auto log_probs = at::empty({N, Tc, U1, S}, logits.options().dtype(acc_dtype));
  auto denominators = at::empty({N, Tc, U1, 2}, logits.options().dtype(acc_dtype));
  const int64_t* tgt = targets.data_ptr<int64_t>();
  const int64_t* T_len = logit_lengths.data_ptr<int64_t>();
  const int64_t* U_len = target_lengths.data_ptr<int64_t>();
  const int64_t U = targets.size(1);
  bool* bad_all = bad.data_ptr<bool>();

  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, logits.scalar_type(), "tdt_log_probs", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* x_all = logits.data_ptr<scalar_t>();
    acc_t* lp_all = log_probs.data_ptr<acc_t>();
    acc_t* den_all = denominators.data_ptr<acc_t>();
    const acc_t shift = static_cast<acc_t>(sigma);
    at::parallel_for(0, N * Tc * U1, kRowGrain, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const RowIndex r = row_index(row, Tc, U1, t_offset);
        acc_t* lp = lp_all + S * row;
        acc_t* den = den_all + 2 * row;
        if (r.t >= T_len[r.n] || r.u > U_len[r.n]) {
          std::fill(lp, lp + S, acc_t(0));
          den[0] = den[1] = acc_t(0);
          continue;
        }
        const scalar_t* x = x_all + row * W;
        den[0] = row_denominator<scalar_t, acc_t>(x, V);
        den[1] = row_denominator<scalar_t, acc_t>(x + V, D);
        lp[0] = static_cast<acc_t>(x[blank]) - den[0] - shift;
        lp[1] = r.u < U_len[r.n] ? static_cast<acc_t>(x[tgt[r.n * U + r.u]]) - den[0] - shift : neg_inf<acc_t>();
        for (int64_t i = 0; i < D; ++i) lp[2 + i] = static_cast<acc_t>(x[V + i]) - den[1];
        // Several tasks may flag one sample; they only ever store `true`.
        if (tdt_row_is_bad(den, lp, D)) __atomic_store_n(bad_all + r.n, true, __ATOMIC_RELAXED);
      }
    });
  });
  return {log_probs, denominators};
}

// Forward (alphas) and backward (betas) recursions over each sample's lattice, one sample per task.
std::tuple<at::Tensor, at::Tensor, at::Tensor> tdt_alphas_betas_cpu(const at::Tensor& log_probs,
                                                                    const at::Tensor& logit_lengths,
                                                                    const at::Tensor& target_lengths,
                                                                    c10::IntArrayRef duration_values) {
  const Durations durations = tdt_durations(duration_values);
  check_alphas_betas_args(log_probs, logit_lengths, target_lengths, 2 + durations.count);
  const int64_t N = log_probs.size(0), T = log_probs.size(1), U1 = log_probs.size(2), S = log_probs.size(3);
  auto alphas = at::zeros({N, T, U1}, log_probs.options());
  auto betas = at::zeros({N, T, U1}, log_probs.options());
  auto nll = at::empty({N}, log_probs.options());
  const int64_t* T_len = logit_lengths.data_ptr<int64_t>();
  const int64_t* U_len = target_lengths.data_ptr<int64_t>();

  AT_DISPATCH_FLOATING_TYPES(log_probs.scalar_type(), "tdt_alphas_betas", [&] {
    using acc_t = scalar_t;
    at::parallel_for(0, N, 1, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        const int64_t T_n = T_len[n], U_n = U_len[n];
        const acc_t* lp = log_probs.data_ptr<acc_t>() + n * T * U1 * S;
        acc_t* alpha = alphas.data_ptr<acc_t>() + n * T * U1;
        acc_t* beta = betas.data_ptr<acc_t>() + n * T * U1;
        for (int64_t t = 0; t < T_n; ++t) {
          for (int64_t u = 0; u <= U_n; ++u) alpha[t * U1 + u] = tdt_alpha(lp, alpha, durations, t, u, U1);
        }
        for (int64_t t = T_n - 1; t >= 0; --t) {
          for (int64_t u = U_n; u >= 0; --u) beta[t * U1 + u] = tdt_beta(lp, beta, durations, t, u, U1, T_n, U_n);
        }
        nll.data_ptr<acc_t>()[n] = -beta[0];
      }
    });
  });
  return {alphas, betas, nll};
}

// grad[n, t, u, :V] = weights[n] * clamp(d nll[n] / d token scores), grad[n, t, u, V:] = weights[n] * d nll[n] / d
// duration scores (not clamped, as NeMo's TDT loss); writes `grad` (may alias logits: each element is read
// once before it is written, and the row constants come from the other inputs). For valid cell (t, u):
//   token v:     softmax_v * occupancy - [v == blank] * sum_i blank_i - [v == y_u] * sum_i label_i
//   duration i:  softmax_i * occupancy - blank_i - label_i
// with occupancy = exp(alpha + beta + log P) and blank_i / label_i the arcs' flows (tdt_arc_flows).
void tdt_logits_grad_cpu(const at::Tensor& logits, const at::Tensor& denominators, const at::Tensor& log_probs,
                         const at::Tensor& alphas, const at::Tensor& betas, const at::Tensor& nll,
                         const at::Tensor& targets, const at::Tensor& logit_lengths,
                         const at::Tensor& target_lengths, int64_t blank, c10::IntArrayRef duration_values,
                         int64_t t_offset, const at::Tensor& weights, double clamp, const at::Tensor& grad) {
  const Durations durations = tdt_durations(duration_values);
  check_logits_grad_args(logits, denominators, log_probs, alphas, betas, nll, targets, logit_lengths, target_lengths,
                         t_offset, weights, grad);
  const int64_t D = durations.count;
  check_tdt_layout(logits, log_probs, denominators, blank, D);
  const int64_t U1 = logits.size(2), V = logits.size(3) - D, S = 2 + D;

  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, logits.scalar_type(), "tdt_logits_grad", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t* lp_all = log_probs.data_ptr<acc_t>();
    const acc_t* den_all = denominators.data_ptr<acc_t>();
    const acc_t* beta_all = betas.data_ptr<acc_t>();
    const acc_t clamp_value = static_cast<acc_t>(clamp);
    for_each_grad_row<scalar_t, acc_t>(
        logits, grad, alphas, nll, targets, logit_lengths, target_lengths, weights, t_offset,
        [&](const cpu::GradRow<scalar_t, acc_t>& row) {
          const int64_t c = row.cell;
          const acc_t* lp = lp_all + S * c;
          const acc_t occupancy = exp(row.alpha_minus_ll + beta_all[c]);
          acc_t blank_flow = 0, label_flow = 0, duration_flow[kMaxDurations];
          for (int64_t i = 0; i < D; ++i) {
            const ArcFlows<acc_t> flows = tdt_arc_flows(lp, beta_all + c, row.alpha_minus_ll, durations.value[i], i,
                                                        U1, row.r.t, row.r.u, row.T_n, row.U_n);
            blank_flow += flows.blank;
            label_flow += flows.label;
            duration_flow[i] = flows.blank + flows.label;
          }
          token_row_grad(row.x, row.g, V, blank, row.label, den_all[2 * c], occupancy, blank_flow, label_flow,
                         clamp_value, row.weight);
          for (int64_t i = 0; i < D; ++i) {
            const acc_t softmax = exp_nonpositive(static_cast<acc_t>(row.x[V + i]) - den_all[2 * c + 1]);
            row.g[V + i] = static_cast<scalar_t>((softmax * occupancy - duration_flow[i]) * row.weight);
          }
        });
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(asr_plugin, CPU, m) {
  m.impl("tdt_log_probs", &tdt_log_probs_cpu);
  m.impl("tdt_alphas_betas", &tdt_alphas_betas_cpu);
  m.impl("tdt_logits_grad", &tdt_logits_grad_cpu);
}

}  // namespace asr_plugin
