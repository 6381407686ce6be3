"""Build a model from a system's `model` config and initialise it (paper-spec §1.7)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from rnnmt.errors import UserError
from rnnmt.models.decoders import BahdanauDecoder
from rnnmt.models.encoders import ENCODERS, Encoded


class Seq2Seq(nn.Module):
    """An encoder and a decoder; `forward` is the teacher-forced pass used for training."""

    def __init__(self, encoder: nn.Module, decoder: BahdanauDecoder) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def encode(self, src: Tensor, src_mask: Tensor) -> Encoded:
        return self.encoder(src, src_mask)

    def forward(self, src: Tensor, src_mask: Tensor, tgt: Tensor) -> tuple[Tensor, Tensor]:
        return self.decoder(self.encode(src, src_mask), tgt)


def build_model(cfg: dict[str, Any], src_vocab: int, tgt_vocab: int) -> Seq2Seq:
    """Create the network described by a system's `model` section, initialised per `cfg['init']`."""
    if cfg["encoder"] not in ENCODERS:
        raise UserError(f"model.encoder is {cfg['encoder']!r}; expected one of {sorted(ENCODERS)}.")
    encoder = ENCODERS[cfg["encoder"]](src_vocab, cfg["emb"], cfg["hidden"])
    decoder = BahdanauDecoder(
        tgt_vocab,
        cfg["emb"],
        cfg["hidden"],
        context_size=encoder.output_size,
        summary_size=encoder.summary_size,
        attention=cfg["attention"],
        align_hidden=cfg["align_hidden"],
        maxout_units=cfg["maxout"],
        output_rank=cfg.get("output_rank"),
    )
    model = Seq2Seq(encoder, decoder)
    INITIALISERS[cfg["init"]](model)
    return model


def _orthogonal_blocks(weight: Tensor) -> None:
    """Each square block of a stacked recurrent matrix [U_z; U_r] gets its own random orthogonal init."""
    n = weight.shape[1]
    for block in weight.split(n, dim=0):
        nn.init.orthogonal_(block)


def init_groundhog(model: nn.Module) -> None:
    """GroundHog's scheme: orthogonal recurrent, N(0, 0.001²) W_a/U_a, v_a = 0, biases 0, else N(0, 0.01²)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 2)[-2] if name.endswith(".weight") else name.rsplit(".", 1)[-1]
            if name.endswith("bias") or name.endswith("b_cand") or leaf == "v_a":
                p.zero_()
            elif leaf in ("U_gates", "U_cand"):
                _orthogonal_blocks(p)
            elif leaf in ("W_a", "U_a"):
                p.normal_(0.0, 1e-3)
            else:
                p.normal_(0.0, 1e-2)


def init_uniform(model: nn.Module, scale: float = 0.1) -> None:
    """U(−0.1, 0.1) everywhere (the common NMT default), recurrent matrices orthogonal, biases 0."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.zero_()
            elif "U_gates" in name or "U_cand" in name:
                _orthogonal_blocks(p)
            else:
                p.uniform_(-scale, scale)


INITIALISERS = {"groundhog": init_groundhog, "uniform": init_uniform}


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())

