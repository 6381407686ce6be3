"""The GPU path of a model's loops (`train.recurrence: kernels`): each step's pointwise work as one kernel. (The
output softmax and the clipped optimiser step, one kernel each, live with what they serve: train/kernel_stages.py.)

- stages.py: each stage declared once (a GRU step's gates and state, an LSTM cell, an attention step, h̃): its
  named operands, its torch reference and its Triton launch, which of the two runs, and the layout check before
  every launch;
- loops.py: the GRU, stacked-LSTM and attention-decoder loops (autograd Functions) built from the stages and
  matrix products, the same equations as fused.py's, and `KernelLoops`, which runs a model's loops with them;
- triton_common.py, triton_gru.py, triton_luong.py: the stages' Triton kernels and launchers (CUDA devices;
  imported only where a kernel runs).

train/selfcheck.py checks the loops against the model (autograd through its modules) and each Triton kernel
against its stage's reference on the device that trains, before a run relies on them.
"""
