"""The GPU path of a training update (`train.recurrence: kernels`): each step's pointwise work as one kernel,
and the output softmax and the clipped optimiser step as one kernel each.

- stages.py: the stages (a GRU step's gates and state, an LSTM cell, an attention step, h̃, the output softmax,
  the clipped Adadelta and SGD updates) with their torch references, and which implementation runs them;
- loops.py: the GRU, stacked-LSTM and attention-decoder loops (autograd Functions) built from the stages
  and matrix products, the same equations as models/recurrence.py;
- triton_common.py, triton_gru.py, triton_luong.py, triton_update.py: the stages' Triton kernels (CUDA devices);
- padding.py: matrix products' operands padded to 16 bytes on a GPU, where cuBLAS's Hopper kernels want
  them (the output layer, the products with 620-wide embeddings), on every recurrence;
- selfcheck.py: the check of each Triton kernel against its reference on the device that trains, before
  a run relies on it.
"""
