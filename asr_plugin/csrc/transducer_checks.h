// Argument checks shared by the CPU and CUDA kernels of the transducer ops. The Python wrappers validate user
// input with clear messages first; these checks guard the kernels' own assumptions (dense memory, one device,
// the dtypes and shapes they index with) against a direct `torch.ops.asr_plugin` call.
#pragma once

#include <torch/types.h>

#include <initializer_list>
#include <limits>
#include <utility>

#include "tdt.h"

namespace asr_plugin {

using NamedTensor = std::pair<const char*, const at::Tensor*>;

// Every tensor is contiguous and on `device`.
inline void check_dense_on(const at::Device& device, std::initializer_list<NamedTensor> tensors) {
  for (const auto& [name, tensor] : tensors) {
    TORCH_CHECK(tensor->device() == device, "transducer op: ", name, " is on ", tensor->device(), ", expected ",
                device);
    TORCH_CHECK(tensor->is_contiguous(), "transducer op: ", name, " must be contiguous");
  }
}

inline void check_dtype(const char* name, const at::Tensor& tensor, at::ScalarType dtype) {
  TORCH_CHECK(tensor.scalar_type() == dtype, "transducer op: ", name, " must be ", dtype, ", got ",
              tensor.scalar_type());
}

// targets (N, U) and lengths (N,) int64 for an N-sample lattice.
inline void check_lattice_args(const at::Tensor& targets, const at::Tensor& logit_lengths,
                               const at::Tensor& target_lengths, int64_t N) {
  for (const auto& [name, tensor] : {NamedTensor{"targets", &targets}, NamedTensor{"logit_lengths", &logit_lengths},
                                     NamedTensor{"target_lengths", &target_lengths}}) {
    check_dtype(name, *tensor, at::kLong);
    TORCH_CHECK(tensor->dim() >= 1 && tensor->size(0) == N, "transducer op: ", name, " must have N = ", N, " rows");
  }
  TORCH_CHECK(targets.dim() == 2, "transducer op: targets must be (N, U)");
}

// Per-cell statistics (N, T, U1[, 2]) in the accumulation dtype `acc`.
inline void check_stats(const at::Tensor& tensor, const char* name, at::ScalarType acc, int64_t N, int64_t U1) {
  check_dtype(name, tensor, acc);
  TORCH_CHECK(tensor.dim() >= 3 && tensor.size(0) == N && tensor.size(2) == U1, "transducer op: ", name,
              " must be (N, T, U+1[, 2]) with N = ", N, ", U+1 = ", U1);
}

inline at::ScalarType accumulation_dtype(at::ScalarType logits) {
  return logits == at::kDouble ? at::kDouble : at::kFloat;
}

// The token scores are the first `vocab` of each row's W (a TDT joint's duration scores follow them).
inline void check_vocab(const at::Tensor& logits, int64_t blank, int64_t vocab) {
  TORCH_CHECK(2 <= vocab && vocab <= logits.size(3), "transducer op: vocab must be in [2, W = ", logits.size(3),
              "] (the token scores of each row), got ", vocab);
  TORCH_CHECK(0 <= blank && blank < vocab, "transducer op: blank out of range [0, V)");
}

// transducer_log_probs / tdt_log_probs: logits (N, Tc, U1, W) floating, bad (N,) bool.
inline void check_log_probs_args(const at::Tensor& logits, const at::Tensor& targets, const at::Tensor& logit_lengths,
                                 const at::Tensor& target_lengths, int64_t t_offset, const at::Tensor& bad) {
  TORCH_CHECK(logits.dim() == 4 && logits.is_floating_point(), "transducer op: logits must be floating (N, Tc, U+1, V)");
  const int64_t N = logits.size(0);
  check_dense_on(logits.device(), {{"logits", &logits}, {"targets", &targets}, {"logit_lengths", &logit_lengths},
                                   {"target_lengths", &target_lengths}, {"bad", &bad}});
  check_lattice_args(targets, logit_lengths, target_lengths, N);
  TORCH_CHECK(logits.size(2) <= targets.size(1) + 1, "transducer op: logits have more label positions than targets + 1");
  check_dtype("bad", bad, at::kBool);
  TORCH_CHECK(bad.dim() == 1 && bad.size(0) == N, "transducer op: bad must be (N,) with N = ", N);
  TORCH_CHECK(t_offset >= 0, "transducer op: t_offset must be >= 0");
}

// transducer_alphas_betas / tdt_alphas_betas: log_probs (N, T, U1, values) float32/float64.
inline void check_alphas_betas_args(const at::Tensor& log_probs, const at::Tensor& logit_lengths,
                                    const at::Tensor& target_lengths, int64_t values) {
  TORCH_CHECK(log_probs.dim() == 4 && log_probs.size(3) == values, "transducer op: log_probs must be (N, T, U+1, ",
              values, ")");
  TORCH_CHECK(log_probs.scalar_type() == at::kFloat || log_probs.scalar_type() == at::kDouble,
              "transducer op: log_probs must be float32 or float64");
  const int64_t N = log_probs.size(0);
  check_dense_on(log_probs.device(),
                 {{"log_probs", &log_probs}, {"logit_lengths", &logit_lengths}, {"target_lengths", &target_lengths}});
  for (const auto& [name, tensor] : {NamedTensor{"logit_lengths", &logit_lengths},
                                     NamedTensor{"target_lengths", &target_lengths}}) {
    check_dtype(name, *tensor, at::kLong);
    TORCH_CHECK(tensor->dim() == 1 && tensor->size(0) == N, "transducer op: ", name, " must be (N,)");
  }
}

// transducer_logits_grad / tdt_logits_grad: stats over the whole lattice, logits/grad a T-chunk of it; grad may
// alias logits.
inline void check_logits_grad_args(const at::Tensor& logits, const at::Tensor& denominators,
                                   const at::Tensor& log_probs, const at::Tensor& alphas, const at::Tensor& betas,
                                   const at::Tensor& nll, const at::Tensor& targets, const at::Tensor& logit_lengths,
                                   const at::Tensor& target_lengths, int64_t t_offset, const at::Tensor& weights,
                                   const at::Tensor& grad) {
  TORCH_CHECK(logits.dim() == 4 && logits.is_floating_point(), "transducer op: logits must be floating (N, Tc, U+1, V)");
  const int64_t N = logits.size(0), U1 = logits.size(2);
  check_dense_on(logits.device(),
                 {{"logits", &logits}, {"denominators", &denominators}, {"log_probs", &log_probs}, {"alphas", &alphas},
                  {"betas", &betas}, {"nll", &nll}, {"targets", &targets}, {"logit_lengths", &logit_lengths},
                  {"target_lengths", &target_lengths}, {"weights", &weights}, {"grad", &grad}});
  check_lattice_args(targets, logit_lengths, target_lengths, N);
  const auto acc = accumulation_dtype(logits.scalar_type());
  check_stats(denominators, "denominators", acc, N, U1);
  check_stats(log_probs, "log_probs", acc, N, U1);
  check_stats(alphas, "alphas", acc, N, U1);
  check_stats(betas, "betas", acc, N, U1);
  TORCH_CHECK(alphas.sizes() == betas.sizes() && alphas.sizes() == denominators.sizes().slice(0, 3) &&
                  log_probs.size(1) == alphas.size(1),
              "transducer op: denominators, log_probs, alphas and betas must cover the same (N, T, U+1) lattice");
  TORCH_CHECK(t_offset >= 0 && t_offset + logits.size(1) <= alphas.size(1),
              "transducer op: the T-chunk [t_offset, t_offset + Tc) must lie inside the lattice's T");
  for (const auto& [name, tensor] : {NamedTensor{"nll", &nll}, NamedTensor{"weights", &weights}}) {
    check_dtype(name, *tensor, acc);
    TORCH_CHECK(tensor->dim() == 1 && tensor->size(0) == N, "transducer op: ", name, " must be (N,)");
  }
  TORCH_CHECK(grad.sizes() == logits.sizes() && grad.scalar_type() == logits.scalar_type(),
              "transducer op: grad must have the logits' shape and dtype");
}

// transducer_logits_grad: FastEmit's lambda is a finite number >= 0 (0: off).
inline void check_fastemit(double fastemit_lambda) {
  TORCH_CHECK(fastemit_lambda >= 0.0 && fastemit_lambda < std::numeric_limits<double>::infinity(),
              "transducer op: fastemit_lambda must be finite and >= 0, got ", fastemit_lambda);
}

// The TDT ops' durations: 0 and 1 first, then sorted and distinct, at most kMaxDurations; D trailing scores
// of each row after at least 2 token scores.
inline Durations tdt_durations(c10::IntArrayRef values) {
  TORCH_CHECK(2 <= static_cast<int64_t>(values.size()) && static_cast<int64_t>(values.size()) <= kMaxDurations,
              "transducer op: durations must hold 2 to ", kMaxDurations, " values");
  TORCH_CHECK(values[0] == 0 && values[1] == 1, "transducer op: durations must start with 0, 1");
  Durations durations{};
  durations.count = static_cast<int64_t>(values.size());
  for (int64_t i = 0; i < durations.count; ++i) {
    TORCH_CHECK(i == 0 || values[i] > values[i - 1], "transducer op: durations must be sorted and distinct");
    durations.value[i] = values[i];
  }
  return durations;
}

inline void check_tdt_layout(const at::Tensor& logits, const at::Tensor& log_probs, const at::Tensor& denominators,
                             int64_t blank, int64_t D) {
  check_vocab(logits, blank, logits.size(3) - D);
  TORCH_CHECK(log_probs.size(3) == 2 + D, "transducer op: log_probs must hold 2 + D = ", 2 + D, " values per cell");
  TORCH_CHECK(denominators.dim() == 4 && denominators.size(3) == 2,
              "transducer op: denominators must be (N, T, U+1, 2) for the TDT ops");
}

}  // namespace asr_plugin
