"""Training settings a system may leave out, in one place (no torch import: config resolution reads it too)."""

# Settings GroundHog systems leave out (their configs predate them); a given value wins.
TRAIN_DEFAULTS = {
    "sort_by": "max",
    "shuffle_batches": False,
    "clip_embeddings": True,
    "epochs": None,
    "lr_decay": None,
    "max_len": None,
    "patience": None,
    "sort_k_batches": 20,
    "recurrence": "fused",
    "precision": "float32",
    "sync": "auto",
    "host_memory": "keep",
    "graph": "none",
    "pad_to": 8,
}
# The ones written into every resolved system config (results/config/SYSTEM.json), which checkpoints fingerprint.
RESOLVED_KEYS = ("max_len", "patience", "sort_k_batches")
