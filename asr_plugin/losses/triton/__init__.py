"""The Triton backend of the transducer loss: the six lattice ops of ``asr_plugin.losses.extension`` (RNN-T and
TDT: fused log-softmax and gather, alpha/beta recursions, logits gradient) written in Triton, for CUDA tensors
with no ``nvcc`` (Triton ships its own compiler), and for CPU tensors under ``TRITON_INTERPRET=1`` (how the
tests run them).

- ``ops``: the ops, with exactly the C++ ops' signatures (``extension.ops_for(device, "triton")`` returns it);
- ``rows``, ``recursions``, ``grads``: the kernels; ``lattice_math``: their shared per-cell math;
- ``configs``: the launch configurations, shared by the launches and the compile check;
- ``compile_check``: ``python -m asr_plugin.losses.triton.compile_check --arch 80,90`` compiles every kernel
  for GPUs on a machine without one and reports registers, shared memory and spills.

Nothing here is imported until a Triton op is asked for: ``TRITON_INTERPRET`` is read when a kernel is defined
(``triton.jit``), so it must be set before the first import of these modules.
"""
