"""Every Triton stage of rnnmt.models.kernels against its torch reference, through the models that use them.

For each system below, one training update runs with every stage's Triton kernel and its reference on the
same inputs (train/selfcheck.py); the worst difference per stage, as a share of its tolerance, is
printed as JSON (> 1 fails), with every stage that failed to run. Then a whole padded batch's gradients
with the Triton kernels against those with the references. On a CPU run it with TRITON_INTERPRET=1 (Triton's
interpreter: test_kernels.py does); on a GPU, `--device cuda` (test_kernels_cuda.py does).

`--compile-for 90` instead compiles every kernel variant those updates launch (each system, both precisions, both
sizes) for a CUDA GPU of that compute capability, on a CPU without one (Triton's compiler down to the GPU's machine
code; the stages' references give the update its values): the kernels as a GPU would build them, from the arguments
their stages bind, where the interpreter is lenient about types.

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


class _Compiled(Exception):
    """Raised after a stage's kernels compiled instead of running: the check then gives it the reference's outputs."""


_POINTERS = {
    torch.float32: "*fp32",
    torch.bfloat16: "*bf16",
    torch.float16: "*fp16",
    torch.float64: "*fp64",
    torch.int64: "*i64",
    torch.int32: "*i32",
    torch.bool: "*i1",
}


def _type(value: Any) -> str:
    """Triton's signature type of a runtime argument."""
    if isinstance(value, torch.Tensor):
        return _POINTERS[value.dtype]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    return "fp32"


def compiled_for(capability: int, sizes: list[str]) -> dict[str, Any]:
    """Every kernel variant the systems' updates launch at `sizes` (both precisions), compiled for a CUDA GPU of
    `capability` (90: Hopper): how many, and the compiler's first line for each kernel that failed."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    target, seen, failures = GPUTarget("cuda", capability, 32), set(), {}

    def compile_only(kernel: Any, grid: tuple[int, ...], arguments: dict[str, Any]) -> None:
        constant = [p.name for p in kernel.params if p.is_constexpr or arguments[p.name] is None]  # None: an absent operand
        signature = {p.name: "constexpr" if p.name in constant else _type(arguments[p.name]) for p in kernel.params}
        constants = {name: arguments[name] for name in constant}
        key = (kernel.__name__, tuple(signature.items()), tuple(constants.items()), arguments.get("num_warps", 4))
        if key not in seen:
            seen.add(key)
            try:
                triton.compile(ASTSource(kernel, signature, constants), target=target, options={"num_warps": key[-1]})
            except Exception as error:  # noqa: BLE001 (the compiler's error, reported by kernel)
                failures[kernel.__name__] = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:300]}"

    def compile_then_refer(stage: stages.Stage) -> None:
        launch_checked(stage)  # every kernel of the stage compiles; none runs
        raise _Compiled

    stages.start, launch_checked, stages.Stage.launch_checked = compile_only, stages.Stage.launch_checked, compile_then_refer
    for size in sizes:
        for precision in ("float32", "bfloat16"):
            differences(torch.device("cpu"), precision, size)
    return {"compiled": len(seen), "kernels": sorted({key[0] for key in seen}), "failures": failures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", choices=SIZES, nargs="+", default=["ragged"])
    parser.add_argument("--compile-for", type=int, metavar="CAPABILITY", help="compile for a CUDA GPU of this compute capability (90: Hopper) instead")
    args = parser.parse_args()
    if args.compile_for:
        with stages.implementation("triton"):
            print(json.dumps(compiled_for(args.compile_for, args.sizes)))
        return
    if len(args.sizes) > 1:
        parser.error("one size at a time, but for --compile-for")
    device = torch.device(args.device)
    with stages.implementation("triton"):
        result = {precision: differences(device, precision, args.sizes[0]) for precision in ("float32", "bfloat16")}
    result["update"] = {name: update_difference(model, device) for name, model in SYSTEMS.items()}
    result["stages"] = list(stages.STAGES)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
