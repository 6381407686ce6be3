"""`rnnmt bench MODE`: throughput figures as JSON, for comparing commits (never asserted); a module per mode.

training.py (`train`: one system's updates), paper.py (`paper`: every system of a scale, one table), shared_gpu.py
(`paper --concurrent`: processes sharing a device), precision.py (`precision`: float32 against bfloat16), batching.py
(`batches`: the host's batches), corpus.py (`corpus`: a paper-size corpus for timing a real `rnnmt train`),
translation.py (`translate`: beam search), selection.py (`select`: Axelrod scoring). What several share: measure.py
(the device, the fields of every mode's JSON, timed updates), paper_shape.py (a system at its paper sizes on random
data), kernel_count.py (the GPU kernels an update launches, counted on any device).
"""
