"""Attention: how the decoder turns its state into a context vector over the source annotations.

`additive` is Bahdanau's alignment model (paper-spec §1.3); `none` is RNNencdec, whose context is the
fixed summary c at every step (§2). Each class precomputes what does not depend on the decoder step
once per batch (`prepare`), and `forward` does the per-step work.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rnnmt.models.encoders import Encoded


class AdditiveAttention(nn.Module):
    """e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j), softmax over real source positions; no biases (§1.3)."""

    static = False  # the context depends on the decoder state

    def __init__(self, query_size: int, key_size: int, hidden: int) -> None:
        super().__init__()
        self.W_a = nn.Linear(query_size, hidden, bias=False)
        self.U_a = nn.Linear(key_size, hidden, bias=False)
        self.v_a = nn.Linear(hidden, 1, bias=False)

    def prepare(self, enc: Encoded) -> Tensor:
        """U_a·h_j for all j, once per batch (§1.3: precomputed once per sentence)."""
        return self.U_a(enc.annotations)

    def forward(self, query: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor]:
        """Return the context c_i [B, A] and the weights α_i [B, S] (zero on padding)."""
        energy = self.v_a(torch.tanh(keys + self.W_a(query).unsqueeze(1))).squeeze(-1)
        alpha = torch.softmax(energy.masked_fill(~enc.mask, float("-inf")), dim=-1)
        return torch.bmm(alpha.unsqueeze(1), enc.annotations).squeeze(1), alpha


class NoAttention(nn.Module):
    """RNNencdec: the context is the encoder summary c at every step; its 'weight' is 1 on it."""

    static = True

    def __init__(self, query_size: int, key_size: int, hidden: int) -> None:
        super().__init__()

    def prepare(self, enc: Encoded) -> Tensor:
        return enc.annotations[:, 0]

    def forward(self, query: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor]:
        return keys, enc.mask.to(keys.dtype)


ATTENTIONS = {"additive": AdditiveAttention, "none": NoAttention}
