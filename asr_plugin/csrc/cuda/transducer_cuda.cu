// CUDA kernels of the transducer (RNN-T) loss ops defined in ../transducer.cpp; same math as the CPU
// kernels (shared through transducer.h). Rows have W scores of which the first `vocab` are scored. Row kernels
// use one warp per lattice row (t, u); the recursions use one block per sample walking the anti-diagonals
// t + u = d, threads over u (rows.cuh). All indexing is int64.
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>
#include <torch/types.h>

#include <tuple>

#include "rows.cuh"
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

template <typename scalar_t, typename acc_t>
__global__ void log_probs_kernel(const scalar_t* __restrict__ logits, const int64_t* __restrict__ targets,
                                 const int64_t* __restrict__ T_len, const int64_t* __restrict__ U_len,
                                 acc_t* __restrict__ log_probs, acc_t* __restrict__ denominators,
                                 bool* __restrict__ bad, int64_t rows, int64_t Tc, int64_t U1, int64_t W,
                                 int64_t V, int64_t U, int64_t blank, int64_t t_offset) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const RowIndex r = row_index(row, Tc, U1, t_offset);
  acc_t* lp = log_probs + 2 * row;
  if (r.t >= T_len[r.n] || r.u > U_len[r.n]) {
    if (lane == 0) lp[0] = lp[1] = denominators[row] = acc_t(0);
    return;
  }
  const scalar_t* x = logits + row * W;
  const acc_t den = warp_log_sum_exp<scalar_t, acc_t>(x, 0, V, lane);
  if (lane == 0) {
    denominators[row] = den;
    lp[0] = static_cast<acc_t>(x[blank]) - den;
    lp[1] = r.u < U_len[r.n] ? static_cast<acc_t>(x[targets[r.n * U + r.u]]) - den : neg_inf<acc_t>();
    if (row_is_bad(den, lp[0], lp[1])) bad[r.n] = true;  // racing rows only ever store `true`
  }
}

// blockIdx.x = sample, blockIdx.y = 0 for alphas (diagonals ascending), 1 for betas (descending).
template <typename acc_t>
__global__ void alphas_betas_kernel(const acc_t* __restrict__ log_probs, const int64_t* __restrict__ T_len,
                                    const int64_t* __restrict__ U_len, acc_t* __restrict__ alphas,
                                    acc_t* __restrict__ betas, acc_t* __restrict__ nll, int64_t T, int64_t U1) {
  const int64_t n = blockIdx.x;
  const int64_t T_n = T_len[n], U_n = U_len[n];
  const acc_t* lp = log_probs + n * T * U1 * 2;
  const bool forward = blockIdx.y == 0;
  acc_t* out = (forward ? alphas : betas) + n * T * U1;
  for (int64_t step = 0; step < T_n + U_n; ++step) {
    const int64_t d = forward ? step : T_n + U_n - 1 - step;
    for (int64_t u = threadIdx.x; u <= U_n; u += blockDim.x) {
      const int64_t t = d - u;
      if (t < 0 || t >= T_n) continue;
      const int64_t c = t * U1 + u;
      acc_t value;
      if (forward) {
        value = (t == 0 && u == 0) ? acc_t(0) : neg_inf<acc_t>();
        if (t > 0) value = log_add(value, out[c - U1] + lp[2 * (c - U1)]);
        if (u > 0) value = log_add(value, out[c - 1] + lp[2 * (c - 1) + 1]);
      } else {
        value = (t == T_n - 1 && u == U_n) ? lp[2 * c] : neg_inf<acc_t>();
        if (t + 1 < T_n) value = log_add(value, out[c + U1] + lp[2 * c]);
        if (u < U_n) value = log_add(value, out[c + 1] + lp[2 * c + 1]);
      }
      out[c] = value;
    }
    __syncthreads();  // the next diagonal reads this one (global memory, same block)
  }
  if (!forward && threadIdx.x == 0) nll[n] = -out[0];
}

// `logits` and `grad` are not __restrict__: `grad` may alias `logits` (the in-place gradient).
template <typename scalar_t, typename acc_t>
__global__ void logits_grad_kernel(const scalar_t* logits, const acc_t* __restrict__ denominators,
                                   const acc_t* __restrict__ log_probs, const acc_t* __restrict__ alphas,
                                   const acc_t* __restrict__ betas, const acc_t* __restrict__ nll,
                                   const int64_t* __restrict__ targets, const int64_t* __restrict__ T_len,
                                   const int64_t* __restrict__ U_len, const acc_t* __restrict__ weights,
                                   scalar_t* grad, int64_t rows, int64_t Tc, int64_t U1, int64_t W, int64_t V,
                                   int64_t T, int64_t U, int64_t blank, int64_t t_offset, acc_t clamp,
                                   acc_t fastemit_lambda) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const RowIndex r = row_index(row, Tc, U1, t_offset);
  // `grad` may alias `logits`: every element is read once, by the lane that then writes it.
  const scalar_t* x = logits + row * W;
  scalar_t* g = grad + row * W;
  if (r.t >= T_len[r.n] || r.u > U_len[r.n]) {
    for (int64_t v = lane; v < W; v += kWarp) g[v] = scalar_t(0);
    return;
  }
  for (int64_t v = V + lane; v < W; v += kWarp) g[v] = scalar_t(0);  // columns the lattice does not score
  const int64_t cell = (r.n * T + r.t) * U1 + r.u;
  const CellFlows<acc_t> flows = with_fastemit(
      cell_flows(log_probs + 2 * cell, alphas + cell, betas + cell, U1, r.t, r.u, T_len[r.n], U_len[r.n], -nll[r.n]),
      fastemit_lambda);
  const acc_t den = denominators[cell];
  const acc_t w = weights[r.n];
  const int64_t label = r.u < U_len[r.n] ? targets[r.n * U + r.u] : -1;
  for (int64_t v = lane; v < V; v += kWarp) {
    acc_t value = exp(static_cast<acc_t>(x[v]) - den) * flows.occupancy;
    if (v == blank) value -= flows.blank_flow;
    if (v == label) value -= flows.label_flow;
    g[v] = static_cast<scalar_t>(clamp_and_weight(value, clamp, w));
  }
}

std::tuple<at::Tensor, at::Tensor> log_probs_cuda(const at::Tensor& logits, const at::Tensor& targets,
                                                  const at::Tensor& logit_lengths,
                                                  const at::Tensor& target_lengths, int64_t blank, int64_t vocab,
                                                  int64_t t_offset, const at::Tensor& bad) {
  check_log_probs_args(logits, targets, logit_lengths, target_lengths, t_offset, bad);
  check_vocab(logits, blank, vocab);
  const c10::cuda::CUDAGuard guard(logits.device());
  const int64_t N = logits.size(0), Tc = logits.size(1), U1 = logits.size(2), W = logits.size(3), V = vocab;
  const auto acc_dtype = logits.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  auto log_probs = at::empty({N, Tc, U1, 2}, logits.options().dtype(acc_dtype));
  auto denominators = at::empty({N, Tc, U1}, logits.options().dtype(acc_dtype));
  const int64_t rows = N * Tc * U1;
  if (rows == 0) return {log_probs, denominators};
  const auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, logits.scalar_type(), "transducer_log_probs_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    log_probs_kernel<scalar_t, acc_t><<<row_blocks(rows), kRowThreads, 0, stream>>>(
        logits.data_ptr<scalar_t>(), targets.data_ptr<int64_t>(), logit_lengths.data_ptr<int64_t>(),
        target_lengths.data_ptr<int64_t>(), log_probs.data_ptr<acc_t>(), denominators.data_ptr<acc_t>(),
        bad.data_ptr<bool>(), rows, Tc, U1, W, V, targets.size(1), blank, t_offset);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {log_probs, denominators};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> alphas_betas_cuda(const at::Tensor& log_probs,
                                                                 const at::Tensor& logit_lengths,
                                                                 const at::Tensor& target_lengths) {
  check_alphas_betas_args(log_probs, logit_lengths, target_lengths, 2);
  TORCH_CHECK(log_probs.size(0) <= kMaxGridX, "transducer op: too many samples for one launch");
  const c10::cuda::CUDAGuard guard(log_probs.device());
  const int64_t N = log_probs.size(0), T = log_probs.size(1), U1 = log_probs.size(2);
  auto alphas = at::zeros({N, T, U1}, log_probs.options());
  auto betas = at::zeros({N, T, U1}, log_probs.options());
  auto nll = at::empty({N}, log_probs.options());
  if (N == 0) return {alphas, betas, nll};
  const auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(log_probs.scalar_type(), "transducer_alphas_betas_cuda", [&] {
    alphas_betas_kernel<scalar_t><<<dim3(static_cast<unsigned int>(N), 2), kDiagonalThreads, 0, stream>>>(
        log_probs.data_ptr<scalar_t>(), logit_lengths.data_ptr<int64_t>(), target_lengths.data_ptr<int64_t>(),
        alphas.data_ptr<scalar_t>(), betas.data_ptr<scalar_t>(), nll.data_ptr<scalar_t>(), T, U1);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {alphas, betas, nll};
}

void logits_grad_cuda(const at::Tensor& logits, const at::Tensor& denominators, const at::Tensor& log_probs,
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
  const c10::cuda::CUDAGuard guard(logits.device());
  const int64_t N = logits.size(0), Tc = logits.size(1), U1 = logits.size(2), W = logits.size(3), V = vocab;
  const int64_t rows = N * Tc * U1;
  if (rows == 0) return;
  const auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, logits.scalar_type(), "transducer_logits_grad_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    logits_grad_kernel<scalar_t, acc_t><<<row_blocks(rows), kRowThreads, 0, stream>>>(
        logits.data_ptr<scalar_t>(), denominators.data_ptr<acc_t>(), log_probs.data_ptr<acc_t>(),
        alphas.data_ptr<acc_t>(), betas.data_ptr<acc_t>(), nll.data_ptr<acc_t>(), targets.data_ptr<int64_t>(),
        logit_lengths.data_ptr<int64_t>(), target_lengths.data_ptr<int64_t>(), weights.data_ptr<acc_t>(),
        grad.data_ptr<scalar_t>(), rows, Tc, U1, W, V, alphas.size(1), targets.size(1), blank, t_offset,
        static_cast<acc_t>(clamp), static_cast<acc_t>(fastemit_lambda));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(asr_plugin, CUDA, m) {
  m.impl("transducer_log_probs", &log_probs_cuda);
  m.impl("transducer_alphas_betas", &alphas_betas_cuda);
  m.impl("transducer_logits_grad", &logits_grad_cuda);
}

}  // namespace asr_plugin
