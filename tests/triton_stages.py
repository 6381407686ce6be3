"""Every Triton stage of rnnmt.models.kernels against its torch reference, through the models that use them.

For each system below, one training update runs with every stage's Triton kernel and its reference on the
same inputs (train/selfcheck.py); the worst difference per stage, as a share of its tolerance, is
printed as JSON (> 1 fails), with every stage that failed to run. Then a whole padded batch's gradients
with the Triton kernels against those with the references. On a CPU run it with TRITON_INTERPRET=1 (Triton's
interpreter: test_kernels.py does); on a GPU, `--device cuda` (test_kernels_cuda.py does).

Sizes: `ragged` (odd widths, a shorter row on each side: the blocks' and masks' edges; RNNsearch's context and
alignment over 128 columns, so that the attention's second column block runs) or `paper` (RNNsearch
at B 80, emb 620, hidden and alignment 1000, 50 source positions, GroundHog's initialisation; Luong at B 128, emb
and hidden 1000, 4 layers, window 10, 50 source positions and location slots, initialised within ±0.1 (±0.3
overflowed float32 gradients over 50 target steps of 4 layers, in the references too); 20 target steps each).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import torch

from rnnmt.recurrence.kernels import stages
from rnnmt.train import selfcheck

from conftest import tiny_luong_config, tiny_model_config

SYSTEMS = {
    "rnnsearch": tiny_model_config("bigru", "additive"),
    "rnnencdec": tiny_model_config("gru", "none"),
    "luong-global-dot-everything": tiny_luong_config("global", "dot", dropout=0.3, bias=True, state_clip=0.5),
    "luong-global-general": tiny_luong_config("global", "general"),
    "luong-global-concat": tiny_luong_config("global", "concat"),
    "luong-global-location": tiny_luong_config("global", "location"),
    "luong-local-m-dot": tiny_luong_config("local-m", "dot"),
    "luong-local-p-general-everything": tiny_luong_config("local-p", "general", dropout=0.3, bias=True, state_clip=0.5),
    "luong-local-p-concat": tiny_luong_config("local-p", "concat", reverse_source=False),
    "luong-local-m-location": tiny_luong_config("local-m", "location"),
}

SIZES: dict[str, dict[str, Any]] = {
    "ragged": {
        "bahdanau": {"model": {"emb": 9, "hidden": 67, "align_hidden": 131, "maxout": 7}, "batch": 5, "src_len": 9, "tgt_len": 6},
        "luong": {"model": {"emb": 9, "hidden": 37, "layers": 2, "window": 2, "max_positions": 7}, "batch": 5, "src_len": 9, "tgt_len": 6},
    },
    "paper": {
        "bahdanau": {
            "model": {"emb": 620, "hidden": 1000, "align_hidden": 1000, "maxout": 500, "output_rank": 620, "init": "groundhog"},
            "batch": 80,
            "src_len": 50,
            "tgt_len": 20,
        },
        "luong": {
            "model": {"emb": 1000, "hidden": 1000, "layers": 4, "window": 10, "max_positions": 50, "init_range": 0.1},
            "batch": 128,
            "src_len": 50,
            "tgt_len": 20,
        },
    },
}


def at_size(model: dict[str, Any], size: str) -> tuple[dict[str, Any], dict[str, int]]:
    """A system's model config at `size`, and the batch's shape."""
    family = SIZES[size]["luong" if model.get("decoder") == "lstm" else "bahdanau"]
    return {**model, **family["model"]}, {key: family[key] for key in ("batch", "src_len", "tgt_len")}


def differences(device: torch.device, precision: str, size: str) -> dict[str, Any]:
    """Per stage, the worst difference over all systems as a share of its tolerance, or its error."""
    worst: dict[str, Any] = {}
    checks = [("the optimisers' steps", selfcheck.update_stage_differences(device))]
    for name, model in SYSTEMS.items():
        cfg, shape = at_size(model, size)
        checks.append((name, selfcheck.stage_differences(cfg, device, precision, vocab=64, **shape)))
    for name, found in checks:
        for stage, check in found.items():
            if check.error is not None:
                worst[stage] = f"{name}: {check.reason()}"
            elif not isinstance(worst.get(stage), str):
                worst[stage] = max(worst.get(stage, 0.0), check.worst)
    return worst


def update_difference(model: dict[str, Any], device: torch.device) -> float:
    """The largest difference between a padded batch's gradients with the Triton kernels and with the references."""
    from rnnmt.models.build import build_model
    from rnnmt.recurrence import forms
    from rnnmt.train.nll import SentenceNLL

    torch.manual_seed(0)
    net = build_model(model, 20, 20, forms.loops("kernels", packed=False)).to(device)
    src, tgt = torch.randint(4, 20, (3, 6), device=device), torch.randint(4, 20, (3, 5), device=device)
    src_mask, tgt_mask = torch.ones(3, 6, dtype=torch.bool, device=device), torch.ones(3, 5, dtype=torch.bool, device=device)
    src_mask[1, 4:], tgt_mask[2, 3:] = False, False
    grads = []
    for implementation in ("triton", "reference"):
        with stages.implementation(implementation):
            torch.manual_seed(1)  # the same dropout masks
            net.zero_grad()
            SentenceNLL(net, "kernels")(src, src_mask, tgt, tgt_mask).sum().backward()
        grads.append([p.grad.clone() for p in net.parameters()])
    return max(float((a - b).abs().max()) for a, b in zip(*grads))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", choices=SIZES, default="ragged")
    args = parser.parse_args()
    device = torch.device(args.device)
    with stages.implementation("triton"):
        result = {precision: differences(device, precision, args.sizes) for precision in ("float32", "bfloat16")}
    result["update"] = {name: update_difference(model, device) for name, model in SYSTEMS.items()}
    result["stages"] = list(stages.STAGES)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
