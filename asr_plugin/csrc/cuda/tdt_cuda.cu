// CUDA kernels of the TDT loss ops defined in ../transducer.cpp; the same algorithm as the CPU kernels in
// ../tdt.cpp, sharing their per-cell math (../tdt.h): one warp per lattice row (t, u) for the log-probs and the
// gradient, one block per sample (and direction) walking the anti-diagonals t + u = d for the recursions
// (every TDT arc, the duration-0 label included, increases t + u). All indexing is int64.
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>
#include <torch/types.h>

#include <tuple>

#include "rows.cuh"
#include "tdt.h"
#include "transducer.h"
#include "transducer_checks.h"

namespace asr_plugin {
namespace {

using gpu::kDiagonalThreads;
using gpu::kMaxGridX;
using gpu::kRowThreads;
using gpu::kRowsPerBlock;
using gpu::kWarp;
using gpu::row_blocks;
using gpu::warp_log_sum_exp;
using gpu::warp_sum;

static_assert(kMaxDurations <= kWarp, "the gradient kernel gives each duration a lane of its warp");

// Each warp: the token and duration log-sum-exps of its row; lane 0 writes the S = 2 + D log-probs
// [blank - sigma, label - sigma, q_0 .. q_{D-1}] and both denominators, and flags a non-finite valid row.
template <typename scalar_t, typename acc_t>
__global__ void tdt_log_probs_kernel(const scalar_t* __restrict__ logits, const int64_t* __restrict__ targets,
                                     const int64_t* __restrict__ T_len, const int64_t* __restrict__ U_len,
                                     acc_t* __restrict__ log_probs, acc_t* __restrict__ denominators,
                                     bool* __restrict__ bad, int64_t rows, int64_t Tc, int64_t U1, int64_t V,
                                     int64_t D, int64_t U, int64_t blank, acc_t sigma, int64_t t_offset) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const RowIndex r = row_index(row, Tc, U1, t_offset);
  const int64_t S = 2 + D;
  acc_t* lp = log_probs + S * row;
  acc_t* den = denominators + 2 * row;
  if (r.t >= T_len[r.n] || r.u > U_len[r.n]) {
    for (int64_t i = lane; i < S; i += kWarp) lp[i] = acc_t(0);
    if (lane == 0) den[0] = den[1] = acc_t(0);
    return;
  }
  const scalar_t* x = logits + row * (V + D);
  const acc_t token_den = warp_log_sum_exp<scalar_t, acc_t>(x, 0, V, lane);
  const acc_t duration_den = warp_log_sum_exp<scalar_t, acc_t>(x, V, V + D, lane);
  if (lane == 0) {
    den[0] = token_den;
    den[1] = duration_den;
    lp[0] = static_cast<acc_t>(x[blank]) - token_den - sigma;
    lp[1] = r.u < U_len[r.n] ? static_cast<acc_t>(x[targets[r.n * U + r.u]]) - token_den - sigma : neg_inf<acc_t>();
    for (int64_t i = 0; i < D; ++i) lp[2 + i] = static_cast<acc_t>(x[V + i]) - duration_den;
    if (tdt_row_is_bad(den, lp, D)) bad[r.n] = true;  // racing rows only ever store `true`
  }
}

// blockIdx.x = sample, blockIdx.y = 0 for alphas (diagonals ascending), 1 for betas (descending).
template <typename acc_t>
__global__ void tdt_alphas_betas_kernel(const acc_t* __restrict__ log_probs, const int64_t* __restrict__ T_len,
                                        const int64_t* __restrict__ U_len, acc_t* __restrict__ alphas,
                                        acc_t* __restrict__ betas, acc_t* __restrict__ nll, int64_t T, int64_t U1,
                                        Durations durations) {
  const int64_t n = blockIdx.x;
  const int64_t T_n = T_len[n], U_n = U_len[n];
  const acc_t* lp = log_probs + n * T * U1 * (2 + durations.count);
  const bool forward = blockIdx.y == 0;
  acc_t* out = (forward ? alphas : betas) + n * T * U1;
  for (int64_t step = 0; step < T_n + U_n; ++step) {
    const int64_t d = forward ? step : T_n + U_n - 1 - step;
    for (int64_t u = threadIdx.x; u <= U_n; u += blockDim.x) {
      const int64_t t = d - u;
      if (t < 0 || t >= T_n) continue;
      out[t * U1 + u] = forward ? tdt_alpha(lp, out, durations, t, u, U1) : tdt_beta(lp, out, durations, t, u, U1, T_n, U_n);
    }
    __syncthreads();  // the next diagonal reads this one (global memory, same block)
  }
  if (!forward && threadIdx.x == 0) nll[n] = -out[0];
}

// Each warp: one row's gradient. Lane i < D holds the flows through the arcs of duration index i; their sums
// over the warp are the blank and label flows of the token scores. `logits` and `grad` are not __restrict__:
// `grad` may alias `logits`; every element is read once, by the lane that then writes it.
template <typename scalar_t, typename acc_t>
__global__ void tdt_logits_grad_kernel(const scalar_t* logits, const acc_t* __restrict__ denominators,
                                       const acc_t* __restrict__ log_probs, const acc_t* __restrict__ alphas,
                                       const acc_t* __restrict__ betas, const acc_t* __restrict__ nll,
                                       const int64_t* __restrict__ targets, const int64_t* __restrict__ T_len,
                                       const int64_t* __restrict__ U_len, const acc_t* __restrict__ weights,
                                       scalar_t* grad, int64_t rows, int64_t Tc, int64_t U1, int64_t V, int64_t T,
                                       int64_t U, int64_t blank, int64_t t_offset, acc_t clamp, Durations durations) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const RowIndex r = row_index(row, Tc, U1, t_offset);
  const int64_t D = durations.count, W = V + D;
  const scalar_t* x = logits + row * W;
  scalar_t* g = grad + row * W;
  const int64_t T_n = T_len[r.n], U_n = U_len[r.n];
  if (r.t >= T_n || r.u > U_n) {
    for (int64_t v = lane; v < W; v += kWarp) g[v] = scalar_t(0);
    return;
  }
  const int64_t cell = (r.n * T + r.t) * U1 + r.u;
  const acc_t* lp = log_probs + (2 + D) * cell;
  const acc_t a = alphas[cell] + nll[r.n];  // alpha - log P
  const acc_t occupancy = exp(a + betas[cell]);
  ArcFlows<acc_t> mine{acc_t(0), acc_t(0)};
  if (lane < D) mine = tdt_arc_flows(lp, betas + cell, a, durations.value[lane], lane, U1, r.t, r.u, T_n, U_n);
  const acc_t blank_flow = warp_sum(mine.blank), label_flow = warp_sum(mine.label);
  const acc_t den = denominators[2 * cell], duration_den = denominators[2 * cell + 1];
  const acc_t w = weights[r.n];
  const int64_t label = r.u < U_n ? targets[r.n * U + r.u] : -1;
  for (int64_t v = lane; v < V; v += kWarp) {
    acc_t value = exp(static_cast<acc_t>(x[v]) - den) * occupancy;
    if (v == blank) value -= blank_flow;
    if (v == label) value -= label_flow;
    g[v] = static_cast<scalar_t>(clamp_and_weight(value, clamp, w));
  }
  if (lane < D) {  // the duration scores' gradient, not clamped (as NeMo's TDT loss)
    const acc_t softmax = exp(static_cast<acc_t>(x[V + lane]) - duration_den);
    g[V + lane] = static_cast<scalar_t>((softmax * occupancy - mine.blank - mine.label) * w);
  }
}

std::tuple<at::Tensor, at::Tensor> tdt_log_probs_cuda(const at::Tensor& logits, const at::Tensor& targets,
                                                      const at::Tensor& logit_lengths,
                                                      const at::Tensor& target_lengths, int64_t blank,
                                                      int64_t num_durations, double sigma, int64_t t_offset,
                                                      const at::Tensor& bad) {
  check_log_probs_args(logits, targets, logit_lengths, target_lengths, t_offset, bad);
  TORCH_CHECK(2 <= num_durations && num_durations <= kMaxDurations, "transducer op: num_durations must be in [2, ",
              kMaxDurations, "]");
  const int64_t D = num_durations, V = logits.size(3) - D;
  check_vocab(logits, blank, V);
  const c10::cuda::CUDAGuard guard(logits.device());
  const int64_t N = logits.size(0), Tc = logits.size(1), U1 = logits.size(2);
  const auto acc_dtype = accumulation_dtype(logits.scalar_type());
  auto log_probs = at::empty({N, Tc, U1, 2 + D}, logits.options().dtype(acc_dtype));
  auto denominators = at::empty({N, Tc, U1, 2}, logits.options().dtype(acc_dtype));
  const int64_t rows = N * Tc * U1;
  if (rows == 0) return {log_probs, denominators};
  const auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, logits.scalar_type(), "tdt_log_probs_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    tdt_log_probs_kernel<scalar_t, acc_t><<<row_blocks(rows), kRowThreads, 0, stream>>>(
        logits.data_ptr<scalar_t>(), targets.data_ptr<int64_t>(), logit_lengths.data_ptr<int64_t>(),
        target_lengths.data_ptr<int64_t>(), log_probs.data_ptr<acc_t>(), denominators.data_ptr<acc_t>(),
        bad.data_ptr<bool>(), rows, Tc, U1, V, D, targets.size(1), blank, static_cast<acc_t>(sigma), t_offset);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {log_probs, denominators};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> tdt_alphas_betas_cuda(const at::Tensor& log_probs,
                                                                     const at::Tensor& logit_lengths,
                                                                     const at::Tensor& target_lengths,
                                                                     c10::IntArrayRef duration_values) {
  const Durations durations = tdt_durations(duration_values);
  check_alphas_betas_args(log_probs, logit_lengths, target_lengths, 2 + durations.count);
  TORCH_CHECK(log_probs.size(0) <= kMaxGridX, "transducer op: too many samples for one launch");
  const c10::cuda::CUDAGuard guard(log_probs.device());
  const int64_t N = log_probs.size(0), T = log_probs.size(1), U1 = log_probs.size(2);
  auto alphas = at::zeros({N, T, U1}, log_probs.options());
  auto betas = at::zeros({N, T, U1}, log_probs.options());
  auto nll = at::empty({N}, log_probs.options());
  if (N == 0) return {alphas, betas, nll};
  const auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(log_probs.scalar_type(), "tdt_alphas_betas_cuda", [&] {
    tdt_alphas_betas_kernel<scalar_t><<<dim3(static_cast<unsigned int>(N), 2), kDiagonalThreads, 0, stream>>>(
        log_probs.data_ptr<scalar_t>(), logit_lengths.data_ptr<int64_t>(), target_lengths.data_ptr<int64_t>(),
        alphas.data_ptr<scalar_t>(), betas.data_ptr<scalar_t>(), nll.data_ptr<scalar_t>(), T, U1, durations);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {alphas, betas, nll};
}

void tdt_logits_grad_cuda(const at::Tensor& logits, const at::Tensor& denominators, const at::Tensor& log_probs,
                          const at::Tensor& alphas, const at::Tensor& betas, const at::Tensor& nll,
                          const at::Tensor& targets, const at::Tensor& logit_lengths,
                          const at::Tensor& target_lengths, int64_t blank, c10::IntArrayRef duration_values,
                          int64_t t_offset, const at::Tensor& weights, double clamp, const at::Tensor& grad) {
  const Durations durations = tdt_durations(duration_values);
  check_logits_grad_args(logits, denominators, log_probs, alphas, betas, nll, targets, logit_lengths, target_lengths,
                         t_offset, weights, grad);
  check_tdt_layout(logits, log_probs, denominators, blank, durations.count);
  const c10::cuda::CUDAGuard guard(logits.device());
  const int64_t N = logits.size(0), Tc = logits.size(1), U1 = logits.size(2), V = logits.size(3) - durations.count;
  const int64_t rows = N * Tc * U1;
  if (rows == 0) return;
  const auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, logits.scalar_type(), "tdt_logits_grad_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    tdt_logits_grad_kernel<scalar_t, acc_t><<<row_blocks(rows), kRowThreads, 0, stream>>>(
        logits.data_ptr<scalar_t>(), denominators.data_ptr<acc_t>(), log_probs.data_ptr<acc_t>(),
        alphas.data_ptr<acc_t>(), betas.data_ptr<acc_t>(), nll.data_ptr<acc_t>(), targets.data_ptr<int64_t>(),
        logit_lengths.data_ptr<int64_t>(), target_lengths.data_ptr<int64_t>(), weights.data_ptr<acc_t>(),
        grad.data_ptr<scalar_t>(), rows, Tc, U1, V, alphas.size(1), targets.size(1), blank, t_offset,
        static_cast<acc_t>(clamp), durations);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(asr_plugin, CUDA, m) {
  m.impl("tdt_log_probs", &tdt_log_probs_cuda);
  m.impl("tdt_alphas_betas", &tdt_alphas_betas_cuda);
  m.impl("tdt_logits_grad", &tdt_logits_grad_cuda);
}

}  // namespace asr_plugin
