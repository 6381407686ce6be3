"""The GPU path of a model's loops (`train.recurrence: kernels`): each step's pointwise work as one kernel. (The
output softmax and the clipped optimiser step, one kernel each, live with what they serve: train/kernel_stages.py.)

- stages.py: what a stage is (named operands, a torch reference, a Triton kernel launched by keyword from the
  operands, which of the two runs) and the layout check before every launch;
- gru_step.py, additive_attention.py, lstm_cell.py, luong_attention.py: the stages, a module per family, each stage's
  operands, reference and kernel together (luong_attention.py also each of Luong's score and kind forms as one object);
- triton_common.py: what the kernels share (tanh, an attention row's softmax and context) and the launch grids;
- loops.py: the GRU, stacked-LSTM and attention-decoder loops (autograd Functions) built from the stages and
  matrix products, the same equations as fused.py's, and `KernelLoops`, which runs a model's loops with them.

train/selfcheck.py checks the loops against the model (autograd through its modules) and each Triton kernel
against its stage's reference on the device that trains, before a run relies on them.
"""
