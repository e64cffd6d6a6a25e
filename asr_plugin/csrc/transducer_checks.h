// Argument checks shared by the CPU and CUDA kernels of the transducer ops. The Python wrappers validate user
// input with clear messages first; these checks guard the kernels' own assumptions (dense memory, one device,
// the dtypes and shapes they index with) against a direct `torch.ops.asr_plugin` call.
#pragma once

#include <torch/types.h>

#include <initializer_list>
#include <utility>

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

// transducer_log_probs: logits (N, Tc, U1, V) floating, bad (N,) bool, blank in [0, V).
inline void check_log_probs_args(const at::Tensor& logits, const at::Tensor& targets, const at::Tensor& logit_lengths,
                                 const at::Tensor& target_lengths, int64_t blank, int64_t t_offset,
                                 const at::Tensor& bad) {
  TORCH_CHECK(logits.dim() == 4 && logits.is_floating_point(), "transducer op: logits must be floating (N, Tc, U+1, V)");
  const int64_t N = logits.size(0);
  check_dense_on(logits.device(), {{"logits", &logits}, {"targets", &targets}, {"logit_lengths", &logit_lengths},
                                   {"target_lengths", &target_lengths}, {"bad", &bad}});
  check_lattice_args(targets, logit_lengths, target_lengths, N);
  TORCH_CHECK(logits.size(2) <= targets.size(1) + 1, "transducer op: logits have more label positions than targets + 1");
  check_dtype("bad", bad, at::kBool);
  TORCH_CHECK(bad.dim() == 1 && bad.size(0) == N, "transducer op: bad must be (N,) with N = ", N);
  TORCH_CHECK(0 <= blank && blank < logits.size(3), "transducer op: blank out of range [0, V)");
  TORCH_CHECK(t_offset >= 0, "transducer op: t_offset must be >= 0");
}

// transducer_alphas_betas: log_probs (N, T, U1, 2) float32/float64.
inline void check_alphas_betas_args(const at::Tensor& log_probs, const at::Tensor& logit_lengths,
                                    const at::Tensor& target_lengths) {
  TORCH_CHECK(log_probs.dim() == 4 && log_probs.size(3) == 2, "transducer op: log_probs must be (N, T, U+1, 2)");
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

// transducer_logits_grad: stats over the whole lattice, logits/grad a T-chunk of it; grad may alias logits.
inline void check_logits_grad_args(const at::Tensor& logits, const at::Tensor& denominators,
                                   const at::Tensor& log_probs, const at::Tensor& alphas, const at::Tensor& betas,
                                   const at::Tensor& nll, const at::Tensor& targets, const at::Tensor& logit_lengths,
                                   const at::Tensor& target_lengths, int64_t blank, int64_t t_offset,
                                   const at::Tensor& scale, const at::Tensor& grad) {
  TORCH_CHECK(logits.dim() == 4 && logits.is_floating_point(), "transducer op: logits must be floating (N, Tc, U+1, V)");
  const int64_t N = logits.size(0), U1 = logits.size(2);
  check_dense_on(logits.device(),
                 {{"logits", &logits}, {"denominators", &denominators}, {"log_probs", &log_probs}, {"alphas", &alphas},
                  {"betas", &betas}, {"nll", &nll}, {"targets", &targets}, {"logit_lengths", &logit_lengths},
                  {"target_lengths", &target_lengths}, {"scale", &scale}, {"grad", &grad}});
  check_lattice_args(targets, logit_lengths, target_lengths, N);
  const auto acc = accumulation_dtype(logits.scalar_type());
  check_stats(denominators, "denominators", acc, N, U1);
  check_stats(log_probs, "log_probs", acc, N, U1);
  check_stats(alphas, "alphas", acc, N, U1);
  check_stats(betas, "betas", acc, N, U1);
  TORCH_CHECK(alphas.sizes() == betas.sizes() && alphas.sizes() == denominators.sizes() &&
                  log_probs.size(1) == alphas.size(1),
              "transducer op: denominators, log_probs, alphas and betas must cover the same (N, T, U+1) lattice");
  TORCH_CHECK(t_offset >= 0 && t_offset + logits.size(1) <= alphas.size(1),
              "transducer op: the T-chunk [t_offset, t_offset + Tc) must lie inside the lattice's T");
  for (const auto& [name, tensor] : {NamedTensor{"nll", &nll}, NamedTensor{"scale", &scale}}) {
    check_dtype(name, *tensor, acc);
    TORCH_CHECK(tensor->dim() == 1 && tensor->size(0) == N, "transducer op: ", name, " must be (N,)");
  }
  TORCH_CHECK(grad.sizes() == logits.sizes() && grad.scalar_type() == logits.scalar_type(),
              "transducer op: grad must have the logits' shape and dtype");
  TORCH_CHECK(0 <= blank && blank < logits.size(3), "transducer op: blank out of range [0, V)");
}

}  // namespace asr_plugin
