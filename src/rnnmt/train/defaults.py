"""Training settings a system may leave out, in one place (no torch import: config resolution reads it too)."""

from rnnmt.recurrence import RECURRENCES

# Settings GroundHog systems leave out (their configs predate them); a given value wins.
TRAIN_DEFAULTS = {
    "sort_by": "max",
    "shuffle_batches": False,
    "clip_embeddings": True,
    "l2": 0.0,  # nmtpy's decay_c: the cost's c · Σ‖W‖² over weights and embeddings (train/optim.py)
    "epochs": None,
    "lr_decay": None,
    "max_len": None,
    "patience": None,
    # What early stopping follows on the first held-out set: its perplexity, or the BLEU of its translations
    # (nmtpy's valid_metric) decoded with valid_decode (config.training_settings: the system's decode settings).
    "valid_metric": "perplexity",
    "valid_decode": None,
    "sort_k_batches": 20,
    "recurrence": "auto",  # train/device_choices.py: kernels on a GPU with Triton, fused elsewhere
    "precision": "auto",  # train/device_choices.py: bfloat16 on a GPU, float32 on a CPU
    "sync": "auto",
    "host_memory": "keep",
    "graph": "auto",  # train/device_choices.py: cuda on a GPU (with max_len, one process), none elsewhere
    "pad_to": 8,
    "deterministic": "auto",  # train/device_choices.py: on (a GPU run repeats bit for bit; a CPU's always does)
}
# The values of the settings train/device_choices.py resolves on the device that trains (`auto`).
DEVICE_CHOICES = {
    "precision": ("auto", "float32", "bfloat16"),
    "graph": ("auto", "none", "static", "cuda"),
    "sync": ("auto", "update", "logging"),
    "recurrence": ("auto", *RECURRENCES),
    "deterministic": ("auto", "on", "off"),
}
# The ones written into every resolved system config (results/config/SYSTEM.json), which checkpoints fingerprint.
RESOLVED_KEYS = ("max_len", "patience", "sort_k_batches")
