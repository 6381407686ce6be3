"""Run every stage of rnnmt.models.kernels twice, as its torch reference and as its Triton kernel, and print
the largest difference per stage as JSON. Run with TRITON_INTERPRET=1 so that Triton runs on CPU tensors
(test_kernels.py does); ragged sizes (H = 37, S = 7 of 8 positions with two masked) test the blocks' edges."""

from __future__ import annotations

import json
from collections.abc import Callable

import torch

from rnnmt.models import kernels

B, H, S, A, C = 5, 37, 7, 11, 13


def inputs(compute: torch.dtype) -> dict[str, torch.Tensor]:
    """Random operands; products (and the strided views the loops pass) in `compute`, the rest float32."""
    g = torch.Generator().manual_seed(0)

    def r(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dtype)

    qg = r(B, A + 2 * H, dtype=compute)
    mask = torch.ones(B, S)
    mask[:, 5:] = 0
    return {
        "x": r(B, 3 * H), "xc": r(B, 3 * H, dtype=compute), "h": r(B, H), "gates": torch.sigmoid(r(B, 2 * H)),
        "cand": torch.tanh(r(B, H)), "keep": (r(B, 1) > 0).float(), "u": r(B, H, dtype=compute), "m": r(B, H, dtype=compute),
        "extra": r(B, H), "base": r(B, H), "q": qg[:, :A], "g": qg[:, A:], "keys": r(B, S, A), "v": r(A), "mask": mask,
        "ann": r(B, S, C), "tanh": torch.tanh(r(B, S, A)), "alpha": torch.softmax(r(B, S), -1), "d_ctx": r(B, C),
        "dcx": r(B, 2 * C, dtype=compute)[:, :C], "d_alpha": r(B, S),
        "x4": r(B, 4 * H), "gemm4": r(B, 4 * H, dtype=compute), "c": r(B, H), "drop": (r(B, H) > 0).float() * 2, "b": r(H),
        "gates4": torch.sigmoid(r(B, 4 * H)), "c_raw": r(B, H), "xh": r(B, 2 * H, dtype=compute), "keys_h": r(B, S, H), "ann_h": r(B, S, H),
    }  # fmt: skip


def stages(i: dict[str, torch.Tensor], compute: torch.dtype) -> dict[str, Callable[[], list[torch.Tensor]]]:
    """Each stage on fresh outputs (accumulated ones start from ones), returning every output."""

    def out(*shape: int, dtype: torch.dtype = torch.float32, fill: float = 0.0) -> torch.Tensor:
        return torch.full(shape, fill, dtype=dtype)

    def gru_gates() -> list[torch.Tensor]:
        o = [out(B, 2 * H), out(B, H), out(B, H, dtype=compute)]
        kernels.gru_gates(i["x"], i["xc"], i["g"], i["h"], *o)
        return o

    def gru_state() -> list[torch.Tensor]:
        o = [out(B, H), out(B, H), out(B, H, dtype=compute)]
        kernels.gru_state(i["x"], i["xc"], i["u"], i["gates"], i["h"], i["keep"], *o)
        return o

    def gru_back_cand() -> list[torch.Tensor]:
        o = [out(B, H), out(B, 3 * H), out(B, 3 * H, dtype=compute)]
        kernels.gru_back_cand(i["base"], i["m"], i["extra"], i["u"], i["gates"], i["cand"], i["keep"], *o)
        return o

    def gru_back_gates() -> list[torch.Tensor]:
        o = [out(B, 3 * H), out(B, 3 * H, dtype=compute), out(B, 2 * H + A, dtype=compute), out(B, H)]
        kernels.gru_back_gates(i["base"], i["m"], i["gates"], i["cand"], i["h"], i["keep"], *o)
        return o

    def additive_attention() -> list[torch.Tensor]:
        o = [out(B, S, A), out(B, S), out(B, C), out(B, C, dtype=compute)]
        kernels.additive_attention(i["keys"], i["q"], i["v"], i["mask"], i["ann"], *o)
        return o

    def additive_attention_back() -> list[torch.Tensor]:
        o = [out(B, C), out(B, S), out(B, S, A, fill=1.0), out(B, A), out(B, A + 2 * H, dtype=compute)[:, 2 * H :]]
        kernels.additive_attention_back(i["d_ctx"], i["dcx"], i["d_alpha"], i["ann"], i["alpha"], i["v"], i["tanh"], *o)
        return o

    def lstm_cell_carried() -> list[torch.Tensor]:
        o = [out(B, 4 * H), out(B, H), out(B, H), out(B, H), out(B, H), out(B, H, dtype=compute), out(B, H), out(B, 2 * H, dtype=compute)[:, H:]]
        kernels.lstm_cell(i["x4"], i["gemm4"], i["c"], i["h"], i["keep"], 0.5, *o[:6], o[6], o[7], i["drop"])
        return o

    def lstm_cell_stacked() -> list[torch.Tensor]:
        o = [out(B, 4 * H), out(B, H), out(B, H), out(B, H), out(B, 2 * H)[:, H:], out(B, 2 * H, dtype=compute)[:, H:],
             out(B, 2 * H, dtype=compute)[:, :H]]  # fmt: skip
        kernels.lstm_cell(None, i["gemm4"], i["c"], None, None, None, *o[:6], None, o[6], None)
        return o

    def lstm_cell_back_carried() -> list[torch.Tensor]:
        o = [i["base"].clone(), i["extra"].clone(), out(B, 4 * H), out(B, 4 * H, dtype=compute)]
        kernels.lstm_cell_back(o[0], i["m"], i["h"], i["drop"], i["base"][2:], i["keep"], o[1], i["gates4"], i["c"], i["cand"], i["c_raw"], 0.5,
                               o[2], o[3])  # fmt: skip
        return o

    def lstm_cell_back_stacked() -> list[torch.Tensor]:
        o = [i["extra"].clone(), out(B, 4 * H), out(B, 4 * H, dtype=compute)]
        kernels.lstm_cell_back(None, i["xh"][:, H:], i["xh"][:, :H], i["drop"], None, None, o[0], i["gates4"], i["c"], i["cand"], i["c_raw"], None, *o[1:])
        return o

    def dot_attention() -> list[torch.Tensor]:
        o = [out(B, S), out(B, H), out(B, 2 * H, dtype=compute)[:, :H]]
        kernels.dot_attention(i["xh"][:, H:].float(), i["keys_h"], i["mask"], i["ann_h"], *o)
        return o

    def dot_attention_back() -> list[torch.Tensor]:
        o = [out(B, H), out(B, S), out(B, H)]
        kernels.dot_attention_back(i["xh"], i["d_alpha"], i["ann_h"], i["alpha"], i["keys_h"], *o)
        return o

    def feed_tanh() -> list[torch.Tensor]:
        o = [out(B, H), out(B, 2 * H)[:, :H], out(B, 2 * H, dtype=compute)[:, :H]]
        kernels.feed_tanh(i["b"], i["u"], *o, i["drop"])
        return o

    def feed_tanh_back() -> list[torch.Tensor]:
        o = [out(B, H), out(B, H, dtype=compute)]
        kernels.feed_tanh_back(i["extra"], i["xh"][:, :H], i["drop"], i["cand"], *o)
        return o

    return {f.__name__: f for f in (gru_gates, gru_state, gru_back_cand, gru_back_gates, additive_attention, additive_attention_back, lstm_cell_carried,
                                     lstm_cell_stacked, lstm_cell_back_carried, lstm_cell_back_stacked, dot_attention, dot_attention_back, feed_tanh,
                                     feed_tanh_back)}  # fmt: skip


def differences(compute: torch.dtype) -> dict[str, float]:
    """The largest absolute difference between the Triton kernel and the reference, per stage."""
    worst = {}
    for name, run in stages(inputs(compute), compute).items():
        results = []
        for interpret in (False, True):
            kernels.INTERPRET_ON_CPU = interpret
            results.append(run())
        kernels.INTERPRET_ON_CPU = False
        worst[name] = max(float((a.float() - b.float()).abs().max()) for a, b in zip(*results))
    return worst


def update_difference(config: dict) -> float:
    """The largest difference between a padded batch's gradients with the Triton kernels and with the references."""
    from rnnmt.models.build import build_model, set_recurrence
    from rnnmt.train.nll import SentenceNLL

    torch.manual_seed(0)
    model = build_model(config, 20, 20)
    set_recurrence(model, "kernels")
    src, tgt = torch.randint(4, 20, (3, 6)), torch.randint(4, 20, (3, 5))
    src_mask, tgt_mask = torch.ones(3, 6, dtype=torch.bool), torch.ones(3, 5, dtype=torch.bool)
    src_mask[1, 4:], tgt_mask[2, 3:] = False, False
    grads = []
    for interpret in (False, True):
        kernels.INTERPRET_ON_CPU = interpret
        torch.manual_seed(1)  # the same dropout masks
        model.zero_grad()
        SentenceNLL(model)(src, src_mask, tgt, tgt_mask).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    kernels.INTERPRET_ON_CPU = False
    return max(float((a - b).abs().max()) for a, b in zip(*grads))


if __name__ == "__main__":
    from conftest import tiny_luong_config, tiny_model_config

    print(json.dumps({"float32": differences(torch.float32), "bfloat16": differences(torch.bfloat16),
                      "update": {"rnnsearch": update_difference(tiny_model_config("bigru", "additive")),
                                 "rnnencdec": update_difference(tiny_model_config("gru", "none")),
                                 "luong": update_difference(tiny_luong_config("global", "general", dropout=0.3, bias=True, state_clip=0.5))}}))  # fmt: skip
