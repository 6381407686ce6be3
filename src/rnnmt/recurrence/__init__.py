"""The fast forms of the models' teacher-forced loops (`train.recurrence`), apart from the models they run.

A model's modules (rnnmt/models/) state each equation once and write each loop step by step (`plain`,
models/loops.py): the reference. The forms here compute the same loops faster and are checked against it
before a run relies on them (train/selfcheck.py):

- fused.py (`fused`, the CPU's default): the loops with a hand-written backward pass; their forward passes
  call the modules' equations;
- kernels/ (`kernels`, the GPU's): each step's pointwise work as one stage, a Triton kernel on a CUDA device
  beside its torch reference (a module per stage family), and the loops built from them (loops.py);
- shared.py: what the two forms share around their steps (neither imports the other): the tensors a loop keeps by
  name, its inputs' and gradients' layout, its buffers and the weight gradients after it, and `FastLoops`;
- precision.py: the dtypes both compute in (bfloat16 products under autocast, the rest float32) and their
  weight gradients;
- forms.py: the forms by name.
"""

# The values of `train.recurrence` besides `auto` (forms.py maps them to their loops; this module imports nothing,
# so that config resolution can read it without torch).
RECURRENCES = ("fused", "plain", "kernels")
