"""The decoder of RNNsearch and RNNencdec: a GRU fed with the context, and a maxout deep output.

Time indexing follows GroundHog (paper-spec §1.6): the state s that has consumed y_<t is the attention
query for predicting y_t; the same context c_t feeds the readout for y_t and the state update that
consumes y_t. There is no BOS embedding: the previous-word readout term is zero at the first step.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rnnmt.models.attention import ATTENTIONS
from rnnmt.models.encoders import Embedding, Encoded
from rnnmt.models.gru import GroundhogGRU


class BahdanauDecoder(nn.Module):
    """GRU decoder with attention (or a fixed context) and a deep output with maxout (§1.4–1.5)."""

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden: int,
        context_size: int,
        summary_size: int,
        attention: str,
        align_hidden: int,
        maxout_units: int,
        output_rank: int | None,
    ) -> None:
        super().__init__()
        self.maxout_units = maxout_units
        self.embed = Embedding(vocab_size, emb_dim)
        self.W_s = nn.Linear(summary_size, hidden)  # s_0 = tanh(W_s ←h_1 + b)
        self.gru = GroundhogGRU(emb_dim, hidden, context_size)
        self.attention = ATTENTIONS[attention](hidden, context_size, align_hidden)
        self.U_o = nn.Linear(hidden, 2 * maxout_units)  # the only readout bias (§1.5)
        self.V_o = nn.Linear(emb_dim, 2 * maxout_units, bias=False)
        self.C_o = nn.Linear(context_size, 2 * maxout_units, bias=False)
        # GroundHog factorises W_o as 500 -> 620 -> K_y (rank_n_approx); the paper writes one matrix.
        if output_rank:
            self.W_o = nn.Sequential(nn.Linear(maxout_units, output_rank, bias=False), nn.Linear(output_rank, vocab_size))
        else:
            self.W_o = nn.Linear(maxout_units, vocab_size)

    def init_state(self, enc: Encoded) -> Tensor:
        return torch.tanh(self.W_s(enc.summary))

    def readout(self, s: Tensor, e_prev: Tensor, c: Tensor) -> Tensor:
        """Logits from t̃ = U_o s + V_o E y_prev + C_o c, maxout over adjacent pairs (§1.5)."""
        t = self.U_o(s) + self.V_o(e_prev) + self.C_o(c)
        t = t.unflatten(-1, (self.maxout_units, 2)).amax(dim=-1)
        return self.W_o(t)

    def forward(self, enc: Encoded, tgt: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher-forced pass over tgt [B, T] (ending in EOS); returns logits [B, T, V], α [B, T, S]."""
        keys = self.attention.prepare(enc)
        s = self.init_state(enc)
        y_emb = self.embed(tgt)
        x_proj = self.gru.project_inputs(y_emb)
        # RNNencdec's context is the same at every step, so its projection C·c is hoisted out of the loop.
        fixed_c_proj = self.gru.project_context(keys) if self.attention.static else None
        states, contexts, alphas = [], [], []
        for t in range(tgt.shape[1]):
            c, alpha = self.attention(s, keys, enc)
            states.append(s)
            contexts.append(c)
            alphas.append(alpha)
            c_proj = fixed_c_proj if fixed_c_proj is not None else self.gru.project_context(c)
            s = self.gru.step(x_proj[:, t] + c_proj, s)
        e_prev = torch.cat([torch.zeros_like(y_emb[:, :1]), y_emb[:, :-1]], dim=1)
        logits = self.readout(torch.stack(states, 1), e_prev, torch.stack(contexts, 1))
        return logits, torch.stack(alphas, 1)

    def predict(self, s: Tensor, e_prev: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor, Tensor]:
        """One decoding step before the word is chosen: (logits, context, α) for states s [N, H]."""
        c, alpha = self.attention(s, keys, enc)
        return self.readout(s, e_prev, c), c, alpha

    def advance(self, s: Tensor, y: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        """Consume the chosen words y [N] with the same context; return (new state, E y)."""
        e = self.embed(y)
        return self.gru.step(self.gru.project_inputs(e) + self.gru.project_context(c), s), e
