"""The GPU path of a training update (`train.recurrence: kernels`): each step's pointwise work as one kernel,
and the output softmax and the clipped optimiser step as one kernel each.

- stages.py: each stage declared once (a GRU step's gates and state, an LSTM cell, an attention step, h̃, the
  output softmax, the clipped Adadelta and SGD updates): its named operands, its torch reference and its
  Triton launch, and which of the two runs;
- loops.py: the GRU, stacked-LSTM and attention-decoder loops (autograd Functions) built from the stages and
  matrix products, the same equations as fused.py's, and `KernelLoops`, which runs a model's loops with them;
- triton_common.py, triton_gru.py, triton_luong.py, triton_update.py: the stages' Triton kernels and launchers
  (CUDA devices; imported only where a kernel runs).

train/selfcheck.py checks the loops against the model (autograd through its modules) and each Triton kernel
against its stage's reference on the device that trains, before a run relies on them.
"""
