"""The networks of both papers: encoders, attention, decoders, their recurrent loops and how they are built."""

# How the recurrent loops run (train.recurrence; models/build.set_recurrence): the hand-written backward of
# recurrence.py, autograd step by step (the reference), or single-kernel stages (kernels/, the GPU path).
RECURRENCES = ("fused", "plain", "kernels")
