// Transducer loss ops: the schemas of every op (TORCH_LIBRARY: RNN-T here, TDT in tdt.cpp) and the RNN-T CPU
// kernels. The CUDA kernels (cuda/*.cu) implement the same ops with the same math (transducer.h, tdt.h); they
// live in a separately built library so CPU users never need nvcc.
//
// The RNN-T ops score the first `vocab` columns of each (N, Tc, U1, W) logits row; the other W - vocab (a TDT
// joint's duration scores, when the TDT loss falls back to the RNN-T loss) get a zero gradient.
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <torch/types.h>

#include <algorithm>
#include <cstring>
#include <tuple>

#include "cpu_math.h"
#include "transducer.h"
#include "transducer_checks.h"

namespace asr_plugin {
namespace {

using cpu::exp_nonpositive;
using cpu::kRowGrain;
using cpu::row_denominator;
using cpu::for_each_grad_row;
using cpu::token_row_grad;

// (N, Tc, U1, W) logits -> log_probs (N, Tc, U1, 2) and denominators (N, Tc, U1); flags samples with a
// non-finite valid row in `bad` (N,).
std::tuple<at::Tensor, at::Tensor> log_probs_cpu(const at::Tensor& logits, const at::Tensor& targets,
                                                 const at::Tensor& logit_lengths,
                                                 const at::Tensor& target_lengths, int64_t blank, int64_t vocab,
                                                 int64_t t_offset, const at::Tensor& bad) {
  check_log_probs_args(logits, targets, logit_lengths, target_lengths, t_offset, bad);
  check_vocab(logits, blank, vocab);
  const int64_t N = logits.size(0), Tc = logits.size(1), U1 = logits.size(2), W = logits.size(3), V = vocab;
  const auto acc_dtype = logits.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  auto log_probs = at::empty({N, Tc, U1, 2}, logits.options().dtype(acc_dtype));
  auto denominators = at::empty({N, Tc, U1}, logits.options().dtype(acc_dtype));
  const int64_t* tgt = targets.data_ptr<int64_t>();
  const int64_t* T_len = logit_lengths.data_ptr<int64_t>();
  const int64_t* U_len = target_lengths.data_ptr<int64_t>();
  const int64_t U = targets.size(1);
  bool* bad_all = bad.data_ptr<bool>();

  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, logits.scalar_type(), "transducer_log_probs", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* x_all = logits.data_ptr<scalar_t>();
    acc_t* lp_all = log_probs.data_ptr<acc_t>();
    acc_t* den_all = denominators.data_ptr<acc_t>();
    at::parallel_for(0, N * Tc * U1, kRowGrain, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const RowIndex r = row_index(row, Tc, U1, t_offset);
        acc_t* lp = lp_all + 2 * row;
        if (r.t >= T_len[r.n] || r.u > U_len[r.n]) {
          lp[0] = lp[1] = den_all[row] = acc_t(0);
          continue;
        }
        const scalar_t* x = x_all + row * W;
        const acc_t den = row_denominator<scalar_t, acc_t>(x, V);
        den_all[row] = den;
        lp[0] = static_cast<acc_t>(x[blank]) - den;
        lp[1] = r.u < U_len[r.n] ? static_cast<acc_t>(x[tgt[r.n * U + r.u]]) - den : neg_inf<acc_t>();
        // Several tasks may flag one sample; they only ever store `true`.
        if (row_is_bad(den, lp[0], lp[1])) __atomic_store_n(bad_all + r.n, true, __ATOMIC_RELAXED);
      }
    });
  });
  return {log_probs, denominators};
}

// Forward (alphas) and backward (betas) recursions over each sample's lattice, one sample per task.
std::tuple<at::Tensor, at::Tensor, at::Tensor> alphas_betas_cpu(const at::Tensor& log_probs,
                                                                const at::Tensor& logit_lengths,
                                                                const at::Tensor& target_lengths) {
  check_alphas_betas_args(log_probs, logit_lengths, target_lengths, 2);
  const int64_t N = log_probs.size(0), T = log_probs.size(1), U1 = log_probs.size(2);
  auto alphas = at::zeros({N, T, U1}, log_probs.options());
  auto betas = at::zeros({N, T, U1}, log_probs.options());
  auto nll = at::empty({N}, log_probs.options());
  const int64_t* T_len = logit_lengths.data_ptr<int64_t>();
  const int64_t* U_len = target_lengths.data_ptr<int64_t>();

  AT_DISPATCH_FLOATING_TYPES(log_probs.scalar_type(), "transducer_alphas_betas", [&] {
    using acc_t = scalar_t;
    at::parallel_for(0, N, 1, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        const int64_t T_n = T_len[n], U_n = U_len[n];
        const acc_t* lp = log_probs.data_ptr<acc_t>() + n * T * U1 * 2;
        acc_t* alpha = alphas.data_ptr<acc_t>() + n * T * U1;
        acc_t* beta = betas.data_ptr<acc_t>() + n * T * U1;
        for (int64_t t = 0; t < T_n; ++t) {
          for (int64_t u = 0; u <= U_n; ++u) {
            const int64_t c = t * U1 + u;
            acc_t value = (t == 0 && u == 0) ? acc_t(0) : neg_inf<acc_t>();
            if (t > 0) value = log_add(value, alpha[c - U1] + lp[2 * (c - U1)]);
            if (u > 0) value = log_add(value, alpha[c - 1] + lp[2 * (c - 1) + 1]);
            alpha[c] = value;
          }
        }
        for (int64_t t = T_n - 1; t >= 0; --t) {
          for (int64_t u = U_n; u >= 0; --u) {
            const int64_t c = t * U1 + u;
            acc_t value = (t == T_n - 1 && u == U_n) ? lp[2 * c] : neg_inf<acc_t>();
            if (t + 1 < T_n) value = log_add(value, beta[c + U1] + lp[2 * c]);
            if (u < U_n) value = log_add(value, beta[c + 1] + lp[2 * c + 1]);
            beta[c] = value;
          }
        }
        nll.data_ptr<acc_t>()[n] = -beta[0];
      }
    });
  });
  return {alphas, betas, nll};
}

// grad[n, t, u, v] = weights[n] * clamp(d nll[n] / d logits[n, t, u, v]); writes `grad` (may alias logits:
// each element is read once before it is written, and the row constants come from the other inputs).
void logits_grad_cpu(const at::Tensor& logits, const at::Tensor& denominators, const at::Tensor& log_probs,
                     const at::Tensor& alphas, const at::Tensor& betas, const at::Tensor& nll,
                     const at::Tensor& targets, const at::Tensor& logit_lengths,
                     const at::Tensor& target_lengths, int64_t blank, int64_t vocab, int64_t t_offset,
                     const at::Tensor& weights, double clamp, const at::Tensor& grad, double fastemit_lambda) {
  check_logits_grad_args(logits, denominators, log_probs, alphas, betas, nll, targets, logit_lengths, target_lengths,
                         t_offset, weights, grad);
  check_vocab(logits, blank, vocab);
  check_fastemit(fastemit_lambda);
  TORCH_CHECK(denominators.dim() == 3 && log_probs.size(3) == 2,
              "transducer op: denominators must be (N, T, U+1) and log_probs (N, T, U+1, 2)");
  const int64_t U1 = logits.size(2), W = logits.size(3), V = vocab;

  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, logits.scalar_type(), "transducer_logits_grad", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t* lp_all = log_probs.data_ptr<acc_t>();
    const acc_t* den_all = denominators.data_ptr<acc_t>();
    const acc_t* alpha_all = alphas.data_ptr<acc_t>();
    const acc_t* beta_all = betas.data_ptr<acc_t>();
    const acc_t* nll_all = nll.data_ptr<acc_t>();
    const acc_t clamp_value = static_cast<acc_t>(clamp);
    const acc_t fastemit = static_cast<acc_t>(fastemit_lambda);
    for_each_grad_row<scalar_t, acc_t>(
        logits, grad, alphas, nll, targets, logit_lengths, target_lengths, weights, t_offset,
        [&](const cpu::GradRow<scalar_t, acc_t>& row) {
          std::fill(row.g + V, row.g + W, scalar_t(0));  // columns the lattice does not score
          const int64_t c = row.cell;
          const CellFlows<acc_t> flows = with_fastemit(
              cell_flows(lp_all + 2 * c, alpha_all + c, beta_all + c, U1, row.r.t, row.r.u, row.T_n, row.U_n,
                         -nll_all[row.r.n]),
              fastemit);
          token_row_grad(row.x, row.g, V, blank, row.label, den_all[c], flows.occupancy, flows.blank_flow,
                         flows.label_flow, clamp_value, row.weight);
        });
  });
}

}  // namespace

TORCH_LIBRARY(asr_plugin, m) {
  // The fake (meta) kernels for torch.compile / FakeTensor live in Python, in this module.
  m.set_python_module("asr_plugin.losses._fake");
  m.def(
      "transducer_log_probs(Tensor logits, Tensor targets, Tensor logit_lengths, Tensor target_lengths, "
      "int blank, int vocab, int t_offset, Tensor(a!) bad) -> (Tensor, Tensor)");
  m.def(
      "transducer_alphas_betas(Tensor log_probs, Tensor logit_lengths, Tensor target_lengths) "
      "-> (Tensor, Tensor, Tensor)");
  m.def(
      "transducer_logits_grad(Tensor logits, Tensor denominators, Tensor log_probs, Tensor alphas, "
      "Tensor betas, Tensor nll, Tensor targets, Tensor logit_lengths, Tensor target_lengths, int blank, "
      "int vocab, int t_offset, Tensor weights, float clamp, Tensor(a!) grad, float fastemit_lambda) -> ()");
  m.def(
      "tdt_log_probs(Tensor logits, Tensor targets, Tensor logit_lengths, Tensor target_lengths, int blank, "
      "int num_durations, float sigma, int t_offset, Tensor(a!) bad) -> (Tensor, Tensor)");
  m.def(
      "tdt_alphas_betas(Tensor log_probs, Tensor logit_lengths, Tensor target_lengths, int[] durations) "
      "-> (Tensor, Tensor, Tensor)");
  m.def(
      "tdt_logits_grad(Tensor logits, Tensor denominators, Tensor log_probs, Tensor alphas, Tensor betas, "
      "Tensor nll, Tensor targets, Tensor logit_lengths, Tensor target_lengths, int blank, int[] durations, "
      "int t_offset, Tensor weights, float clamp, Tensor(a!) grad) -> ()");
}

TORCH_LIBRARY_IMPL(asr_plugin, CPU, m) {
  m.impl("transducer_log_probs", &log_probs_cpu);
  m.impl("transducer_alphas_betas", &alphas_betas_cpu);
  m.impl("transducer_logits_grad", &logits_grad_cpu);
}

}  // namespace asr_plugin
