"""Source encoders: the bidirectional GRU of RNNsearch, the unidirectional GRU of RNNencdec, and the
stacked LSTM of Luong et al. 2015."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from rnnmt.models import lstm
from rnnmt.models.gru import GroundhogGRU
from rnnmt.models.initialisation import Rule, Scheme, prefixed
from rnnmt.models.lngru import LayerNormGRU
from rnnmt.models.loops import PLAIN, Loops

# The Bahdanau family's encoder GRU by `model.encoder_norm`: GroundHog's, or nmtpy's layer-normalised one.
ENCODER_NORMS: dict[str, type[GroundhogGRU] | type[LayerNormGRU]] = {"none": GroundhogGRU, "layer": LayerNormGRU}


@dataclass
class Encoded:
    """What a decoder needs from the source: annotations h_j, their mask, and the init summary."""

    annotations: Tensor  # [B, S, A]
    mask: Tensor  # [B, S] bool, True on real tokens (EOS included)
    # What initialises the decoder: ←h_1 (RNNsearch) or →h_T (RNNencdec) [B, D], the input of s_0 = tanh(W_s·);
    # the final (h, c) of every layer (Luong) [B, 2, layers, H].
    summary: Tensor

    def select(self, rows: Tensor) -> Encoded:
        """Only the given batch rows."""
        return Encoded(self.annotations[rows], self.mask[rows], self.summary[rows])


class Embedding(nn.Module):
    """Word embedding with a bias, as GroundHog's `approx_embedder` (one-hot -> m, with bias)."""

    def __init__(self, vocab_size: int, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def init_rules(self, scheme: Scheme) -> dict[str, Rule]:
        return {"weight": scheme.embedding, "bias": scheme.bias}

    def forward(self, ids: Tensor) -> Tensor:
        return nn.functional.embedding(ids, self.weight) + self.bias


class BiGRUEncoder(nn.Module):
    """h_j = [→h_j; ←h_j] with one embedding shared by both directions (paper-spec §1.2); `dropout` on the word
    embeddings (`model.embedding_dropout`: not in GroundHog, nmtpy's `emb_dropout`); `norm`: the GRU, by
    ENCODER_NORMS."""

    def __init__(self, vocab_size: int, emb_dim: int, hidden: int, loops: Loops = PLAIN, dropout: float = 0.0, norm: str = "none") -> None:
        super().__init__()
        self.embed = Embedding(vocab_size, emb_dim)
        self.drop = nn.Dropout(dropout)
        self.fwd = ENCODER_NORMS[norm](emb_dim, hidden, loops=loops)
        self.bwd = ENCODER_NORMS[norm](emb_dim, hidden, loops=loops)
        self.loops = loops
        self.output_size = 2 * hidden
        self.summary_size = hidden

    def forward(self, src: Tensor, mask: Tensor) -> Encoded:
        e = self.drop(self.embed(src))
        x_fwd, x_bwd = self.fwd.project_inputs(e), self.bwd.project_inputs(e)
        h0 = x_fwd.new_zeros(x_fwd.shape[0], self.fwd.hidden_size)
        h_fwd, h_bwd = self.loops.gru_scans([self.fwd, self.bwd], [x_fwd, x_bwd], mask, [False, True], [h0, h0])
        return Encoded(torch.cat([h_fwd, h_bwd], dim=-1), mask, h_bwd[:, 0])


class GRUEncoder(nn.Module):
    """RNNencdec's encoder: the last forward state (after EOS) is the fixed summary c (paper-spec §2); `dropout` on
    the word embeddings and `norm`, as BiGRUEncoder's."""

    def __init__(self, vocab_size: int, emb_dim: int, hidden: int, loops: Loops = PLAIN, dropout: float = 0.0, norm: str = "none") -> None:
        super().__init__()
        self.embed = Embedding(vocab_size, emb_dim)
        self.drop = nn.Dropout(dropout)
        self.fwd = ENCODER_NORMS[norm](emb_dim, hidden, loops=loops)
        self.output_size = hidden
        self.summary_size = hidden

    def forward(self, src: Tensor, mask: Tensor) -> Encoded:
        h = self.fwd.scan(self.fwd.project_inputs(self.drop(self.embed(src))), mask)
        # Masked steps carry the state over, so the last column is the state after the last real token.
        last = h[:, -1]
        return Encoded(last.unsqueeze(1), mask.new_ones(mask.shape[0], 1), last)


class LSTMEncoder(nn.Module):
    """Luong's encoder: stacked LSTM over the (optionally reversed) source words, dropout on each layer's input.

    The annotations are the top layer's states h̄_s; the decoder starts from every layer's final (h, c).
    The layers run by the model's loops (models/loops.py): `steps`, torch's LSTM, or a fast form of it.
    """

    def __init__(
        self, vocab_size: int, emb_dim: int, hidden: int, layers: int, dropout: float, bias: bool, state_clip: float | None, loops: Loops = PLAIN
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb_dim)
        self.drop = nn.Dropout(dropout)
        self.lstm = lstm.make_lstm(emb_dim, hidden, layers, dropout, bias)
        self.state_clip = state_clip
        self.loops = loops
        self.output_size = hidden

    def init_rules(self, scheme: Scheme) -> dict[str, Rule]:
        return {"embed.weight": scheme.embedding, **prefixed("lstm", lstm.init_rules(self.lstm, scheme))}

    def forward(self, src: Tensor, mask: Tensor) -> Encoded:
        out, final = self.loops.lstm_encoder(self, self.drop(self.embed(src)), mask)
        return Encoded(out, mask, lstm.pack_state(final))

    def steps(self, x: Tensor, mask: Tensor, packed: bool) -> tuple[Tensor, lstm.State]:
        """The layers over x [B, T, E] as torch's LSTM runs them (`packed`: over packed sequences where no clipping
        needs the step loop): the top layer's states and every layer's final (h, c)."""
        return lstm.run(self.lstm, x, mask, None, self.state_clip, packed)


ENCODERS: dict[str, type[BiGRUEncoder] | type[GRUEncoder]] = {"bigru": BiGRUEncoder, "gru": GRUEncoder}
"""Bahdanau-family encoders by `model.encoder`, built from (vocabulary size, embedding size, hidden size, loops), the
embeddings' `dropout` and the GRU's `norm`; Luong's decoder takes the LSTMEncoder alone."""
