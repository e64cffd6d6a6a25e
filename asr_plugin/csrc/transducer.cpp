// Transducer (RNN-T) loss ops: schemas (TORCH_LIBRARY) and CPU kernels.
// The CUDA kernels (cuda/transducer_cuda.cu) implement the same three ops with the same math
// (see transducer.h); they live in a separately built library so CPU users never need nvcc.
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <torch/types.h>

#include <algorithm>
#include <cstring>
#include <tuple>

#include "transducer.h"
#include "transducer_checks.h"

namespace asr_plugin {
namespace {

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
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
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

// (N, Tc, U1, V) logits -> log_probs (N, Tc, U1, 2) and denominators (N, Tc, U1); flags samples with a
// non-finite valid row in `bad` (N,).
std::tuple<at::Tensor, at::Tensor> log_probs_cpu(const at::Tensor& logits, const at::Tensor& targets,
                                                 const at::Tensor& logit_lengths,
                                                 const at::Tensor& target_lengths, int64_t blank,
                                                 int64_t t_offset, const at::Tensor& bad) {
  check_log_probs_args(logits, targets, logit_lengths, target_lengths, blank, t_offset, bad);
  const int64_t N = logits.size(0), Tc = logits.size(1), U1 = logits.size(2), V = logits.size(3);
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
        const scalar_t* x = x_all + row * V;
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
  check_alphas_betas_args(log_probs, logit_lengths, target_lengths);
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

// grad[n, t, u, v] = scale[n] * clamp(d nll[n] / d logits[n, t, u, v]); writes `grad` (may alias logits:
// each element is read once before it is written, and the row constants come from the other inputs).
void logits_grad_cpu(const at::Tensor& logits, const at::Tensor& denominators, const at::Tensor& log_probs,
                     const at::Tensor& alphas, const at::Tensor& betas, const at::Tensor& nll,
                     const at::Tensor& targets, const at::Tensor& logit_lengths,
                     const at::Tensor& target_lengths, int64_t blank, int64_t t_offset,
                     const at::Tensor& scale, double clamp, const at::Tensor& grad) {
  check_logits_grad_args(logits, denominators, log_probs, alphas, betas, nll, targets, logit_lengths, target_lengths,
                         blank, t_offset, scale, grad);
  const int64_t N = logits.size(0), Tc = logits.size(1), U1 = logits.size(2), V = logits.size(3);
  const int64_t T = alphas.size(1), U = targets.size(1);
  const int64_t* tgt = targets.data_ptr<int64_t>();
  const int64_t* T_len = logit_lengths.data_ptr<int64_t>();
  const int64_t* U_len = target_lengths.data_ptr<int64_t>();

  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, logits.scalar_type(), "transducer_logits_grad", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* x_all = logits.data_ptr<scalar_t>();
    scalar_t* g_all = grad.data_ptr<scalar_t>();
    const acc_t* lp_all = log_probs.data_ptr<acc_t>();
    const acc_t* den_all = denominators.data_ptr<acc_t>();
    const acc_t* alpha_all = alphas.data_ptr<acc_t>();
    const acc_t* beta_all = betas.data_ptr<acc_t>();
    const acc_t* nll_all = nll.data_ptr<acc_t>();
    const acc_t* scale_all = scale.data_ptr<acc_t>();
    const acc_t clamp_value = static_cast<acc_t>(clamp);
    at::parallel_for(0, N * Tc * U1, kRowGrain, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const RowIndex r = row_index(row, Tc, U1, t_offset);
        const scalar_t* x = x_all + row * V;
        scalar_t* g = g_all + row * V;
        if (r.t >= T_len[r.n] || r.u > U_len[r.n]) {
          std::fill(g, g + V, scalar_t(0));
          continue;
        }
        const int64_t cell = (r.n * T + r.t) * U1 + r.u;  // index into the full-T tensors
        const CellFlows<acc_t> flows = cell_flows(lp_all + 2 * cell, alpha_all + cell, beta_all + cell, U1, r.t,
                                                  r.u, T_len[r.n], U_len[r.n], -nll_all[r.n]);
        const acc_t den = den_all[cell];
        const acc_t s = scale_all[r.n];
        const int64_t label = r.u < U_len[r.n] ? tgt[r.n * U + r.u] : -1;
        // The blank and label entries are read before the (possibly in-place) softmax loop overwrites them.
        const acc_t softmax_blank = exp_nonpositive(static_cast<acc_t>(x[blank]) - den);
        const acc_t softmax_label = label >= 0 ? exp_nonpositive(static_cast<acc_t>(x[label]) - den) : acc_t(0);
        _Pragma("omp simd") for (int64_t v = 0; v < V; ++v) {
          const acc_t value = exp_nonpositive(static_cast<acc_t>(x[v]) - den) * flows.occupancy;
          g[v] = static_cast<scalar_t>(clamp_and_scale(value, clamp_value, s));
        }
        g[blank] = static_cast<scalar_t>(
            clamp_and_scale(softmax_blank * flows.occupancy - flows.blank_flow, clamp_value, s));
        if (label >= 0) {
          g[label] = static_cast<scalar_t>(
              clamp_and_scale(softmax_label * flows.occupancy - flows.label_flow, clamp_value, s));
        }
      }
    });
  });
}

}  // namespace

TORCH_LIBRARY(asr_plugin, m) {
  // The fake (meta) kernels for torch.compile / FakeTensor live in Python, in this module.
  m.set_python_module("asr_plugin.losses._fake");
  m.def(
      "transducer_log_probs(Tensor logits, Tensor targets, Tensor logit_lengths, Tensor target_lengths, "
      "int blank, int t_offset, Tensor(a!) bad) -> (Tensor, Tensor)");
  m.def(
      "transducer_alphas_betas(Tensor log_probs, Tensor logit_lengths, Tensor target_lengths) "
      "-> (Tensor, Tensor, Tensor)");
  m.def(
      "transducer_logits_grad(Tensor logits, Tensor denominators, Tensor log_probs, Tensor alphas, "
      "Tensor betas, Tensor nll, Tensor targets, Tensor logit_lengths, Tensor target_lengths, int blank, "
      "int t_offset, Tensor scale, float clamp, Tensor(a!) grad) -> ()");
}

TORCH_LIBRARY_IMPL(asr_plugin, CPU, m) {
  m.impl("transducer_log_probs", &log_probs_cpu);
  m.impl("transducer_alphas_betas", &alphas_betas_cpu);
  m.impl("transducer_logits_grad", &logits_grad_cpu);
}

}  // namespace asr_plugin
