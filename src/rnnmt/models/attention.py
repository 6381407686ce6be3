"""Attention: how the decoder turns its state into a context vector over the source annotations.

`additive` is Bahdanau's alignment model (paper-spec §1.3); `none` is RNNencdec, whose context is the
fixed summary c at every step (§2). Each class precomputes what does not depend on the decoder step
once per batch (`prepare`), and `forward` does the per-step work; `BahdanauAttention` states what the GRU
decoder calls, and `ATTENTIONS` names the classes that offer it (`model.attention` of a `gru` decoder).

Luong et al.'s attention (§4.2–4.3) is `LuongAttention`: global or local (local-m, local-p) over the top
encoder states h̄_s, queried by the current decoder state h_t, with the score functions dot, general,
concat (Luong's simplified v_aᵀ tanh(h̄_s + W_a h_t)) and location (softmax(W_a h_t) over fixed positions).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor, nn

from rnnmt.errors import UserError
from rnnmt.models.encoders import Encoded
from rnnmt.models.gru import GroundhogGRU
from rnnmt.models.initialisation import Initialised, Rule, Scheme, normal, zeros
from rnnmt.models.kernels.loops import AttentiveGRUKernels
from rnnmt.models.recurrence import AttentiveGRULoop


class Attention(Initialised, Protocol):
    """What every attention offers its decoder: the keys of a batch, computed once (`prepare`), and how its
    parameters are initialised (`init_rules`)."""

    def prepare(self, enc: Encoded) -> Tensor: ...


class BahdanauAttention(Attention, Protocol):
    """What BahdanauDecoder calls: one step's contexts and weights, and the fused teacher-forced loop."""

    static: bool  # the context is the same at every step (RNNencdec), so the decoder hoists C·c out of its loop

    def __call__(self, query: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor]:
        """The contexts [N, A] and weights [N, S] of N = B·k queries [N, Q], k per source sentence in a row."""
        ...

    def recurrence(self, gru: GroundhogGRU, s0: Tensor, x_proj: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor, Tensor]:
        """The decoder's teacher-forced loop from s_0 over projected inputs [B, T, 3H]: queries, contexts, weights."""
        ...


# Floats of the pre-activations beam search keeps at once (1 MiB): a few sentences' worth, so they stay in
# a core's L2 cache between the tanh and the product with v.
_ENERGY_CHUNK = 1 << 18
# A BLAS rounds the last M mod 8 rows of a matrix-vector product with other kernels (MKL here); chunks of a
# multiple of 32 rows round every row as one product of all rows would, so beam search's translations do
# not depend on the chunk size.
_ROW_BLOCK = 32


def tanh_energies(keys: Tensor, queries: Tensor, v: nn.Linear) -> Tensor:
    """vᵀ tanh(k_s + q) [B, k, S] for k queries [B, k, A] per sentence against its keys [B, S, A].

    Under autograd this is one expression. Without it (beam search) the [B, k, S, A] pre-activations are
    not kept: a few sentences at a time go through one reused buffer, which stays in the cache, instead of
    a fresh tensor of every hypothesis and position written to memory and read back twice.
    """
    if torch.is_grad_enabled():
        return v(torch.tanh(keys.unsqueeze(1) + queries.unsqueeze(2))).squeeze(-1)
    batch, length, width = keys.shape
    k = queries.shape[1]
    rows = k * length  # per sentence
    step = _ROW_BLOCK // math.gcd(rows, _ROW_BLOCK)  # sentences per chunk: a multiple of this keeps rows aligned
    per_chunk = min(batch, max(step, _ENERGY_CHUNK // (rows * width) // step * step))
    buffer = keys.new_empty(per_chunk, k, length, width)
    energies = keys.new_empty(batch, k, length)
    v_t = v.weight.t()
    for start in range(0, batch, per_chunk):
        end = min(batch, start + per_chunk)
        pre = torch.add(keys[start:end].unsqueeze(1), queries[start:end].unsqueeze(2), out=buffer[: end - start]).tanh_()
        torch.mm(pre.view(-1, width), v_t, out=energies[start:end].view(-1, 1))
    return energies


def alignment_rules(scheme: Scheme) -> tuple[Rule, Rule]:
    """The rules of an alignment model's matrices inside the tanh (W_a, U_a) and of its output vector (v_a).

    GroundHog's `RecurrentLayerWithSearch._init_params` (experiments/nmt/encdec.py:269–288) draws A_cp and
    B_hp from N(0, 0.001²) (`sample_weights_classic(..., 10 ** (-3))`) and sets D_pe to zero, so every source
    position gets the same weight at first; the other schemes draw them as weights.
    """
    if scheme.name == "groundhog":
        return normal(1e-3), zeros
    return scheme.weight, scheme.weight


class AdditiveAttention(nn.Module):
    """e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j), softmax over real source positions; no biases (§1.3)."""

    static = False  # the context depends on the decoder state

    def __init__(self, query_size: int, key_size: int, hidden: int) -> None:
        super().__init__()
        self.W_a = nn.Linear(query_size, hidden, bias=False)
        self.U_a = nn.Linear(key_size, hidden, bias=False)
        self.v_a = nn.Linear(hidden, 1, bias=False)

    def init_rules(self, scheme: Scheme) -> dict[str, Rule]:
        inner, output = alignment_rules(scheme)
        return {"W_a.weight": inner, "U_a.weight": inner, "v_a.weight": output}

    def prepare(self, enc: Encoded) -> Tensor:
        """U_a·h_j for all j, once per batch (§1.3: precomputed once per sentence)."""
        return self.U_a(enc.annotations)

    def forward(self, query: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor]:
        """The contexts c_i [N, A] and weights α_i [N, S] (zero on padding) of N = B·k queries, k per source
        sentence in a row (beam search's hypotheses; k = 1 in training)."""
        batch, _, width = keys.shape
        energy = tanh_energies(keys, self.W_a(query).view(batch, -1, width), self.v_a)  # [B, k, S]
        alpha = torch.softmax(energy.masked_fill(~enc.mask.unsqueeze(1), float("-inf")), dim=-1)
        return torch.bmm(alpha, enc.annotations).flatten(0, 1), alpha.flatten(0, 1)

    def recurrence(self, gru: GroundhogGRU, s0: Tensor, x_proj: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor, Tensor]:
        """The decoder's teacher-forced loop with the hand-written backward: queries, contexts, weights (recurrence.py)."""
        weights = (self.W_a.weight, self.v_a.weight, gru.C_in.weight, gru.U_gates.weight, gru.U_cand.weight, gru.b_cand)
        loop = AttentiveGRUKernels if gru.kernels else AttentiveGRULoop
        queries, contexts, alphas = loop.apply(s0, x_proj, keys, enc.annotations, enc.mask, *weights)
        return queries, contexts, alphas


class NoAttention(nn.Module):
    """RNNencdec: the context is the encoder summary c at every step; its 'weight' is 1 on it."""

    static = True

    def __init__(self, query_size: int, key_size: int, hidden: int) -> None:
        super().__init__()

    def init_rules(self, scheme: Scheme) -> dict[str, Rule]:
        return {}  # no parameters

    def prepare(self, enc: Encoded) -> Tensor:
        return enc.annotations[:, 0]

    def forward(self, query: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor]:
        per_sentence = query.shape[0] // keys.shape[0]
        return keys.repeat_interleave(per_sentence, dim=0), enc.mask.to(keys.dtype).repeat_interleave(per_sentence, dim=0)

    def recurrence(self, gru: GroundhogGRU, s0: Tensor, x_proj: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor, Tensor]:
        """RNNencdec's loop is a plain GRU scan over W·y_t + C·c (c fixed), from s_0: the states before each word."""
        steps = x_proj.shape[1]
        after = gru.scan(x_proj[:, :-1] + gru.project_context(keys).unsqueeze(1), None, h0=s0)
        queries = torch.cat([s0.unsqueeze(1), after], dim=1)
        alphas = enc.mask.to(keys.dtype).unsqueeze(1).expand(-1, steps, -1)
        return queries, keys.unsqueeze(1).expand(-1, steps, -1), alphas


class LuongAttention(nn.Module):
    """a_t over source positions for queries h_t [B, T, H] at 0-based target steps `steps` [T]; no biases.

    Positions are those of the encoder's input (with a reversed source, position 0 holds the last word);
    local windows and location rows are placed as nmt.matlab places them, in the original word order:

    - local-m centres the window [p_t − D, p_t + D] on the target step, clipped to the last word
      (`attnLayerForward.m`: `srcPositions = tgtPos`, capped at `srcLens − 1`, srcLens = n + 1 with EOS).
    - local-p: p_t = n·sigmoid(v_pᵀ tanh(W_p h_t)) counts 0-based in the original order, so it runs from the
      first word to one past the last (`regressPositions`: `mu = scales.*(srcLens-1) + 1`, 1-based); the
      window is centred on ⌊p_t⌋ (`srcPositions = floor(mu)`, then `srcMaxLen − srcPositions` indexes the
      reversed states), cut to the sentence (`buildSrcVecs.m`), and the softmax over it is multiplied by
      exp(−(j − p_t)² / 2σ²), σ = D/2, j the original position, without renormalising (`distLayerForward.m`).
    - location: softmax(W_a h_t) over `max_positions` slots into which the source states are right-aligned
      as the encoder reads them (`updateDataSrcVecs.m` before commit 1f7dc9c: `absSrcHidVecs(:, :,
      numAttnPositions−numSrcHidVecs+1:end) = srcHidVecsOrig`), so the last row of W_a always scores the
      last word read (with a reversed source, the first word), whatever the length. Words beyond the slots
      (read first; with a reversed source, those near the end) get no weight.
    """

    static = False

    def __init__(self, hidden: int, kind: str, score: str, window: int, max_positions: int, reversed_source: bool) -> None:
        super().__init__()
        if kind not in LUONG_KINDS or score not in LUONG_SCORES:
            raise UserError(f"Luong attention is {kind!r} with score {score!r}; expected {'/'.join(LUONG_KINDS)} with {'/'.join(LUONG_SCORES)}.")
        self.kind, self.score, self.window, self.reversed_source = kind, score, window, reversed_source
        if score in ("general", "concat"):
            self.W_a = nn.Linear(hidden, hidden, bias=False)
        if score == "concat":
            self.v_a = nn.Linear(hidden, 1, bias=False)
        if score == "location":
            self.W_a = nn.Linear(hidden, max_positions, bias=False)
        if kind == "local-p":
            self.W_p = nn.Linear(hidden, hidden, bias=False)
            self.v_p = nn.Linear(hidden, 1, bias=False)

    def init_rules(self, scheme: Scheme) -> dict[str, Rule]:
        """W_a and v_a by the alignment-model rules (`alignment_rules`), local-p's W_p and v_p as weights."""
        inner, output = alignment_rules(scheme)
        rules = {"W_a": inner, "v_a": output, "W_p": scheme.weight, "v_p": scheme.weight}
        return {f"{name}.weight": rules[name] for name, _ in self.named_children() if name in rules}

    def prepare(self, enc: Encoded) -> Tensor:
        """The keys the scores read: W_a h̄_s for general (once per batch), else h̄_s."""
        return self.W_a(enc.annotations) if self.score == "general" else enc.annotations

    def energies(self, query: Tensor, keys: Tensor, mask: Tensor) -> Tensor:
        """score(h_t, h̄_s) for every step and position: [B, T, S] (the source mask places the location slots)."""
        if self.score in ("dot", "general"):
            return torch.bmm(query, keys.transpose(1, 2))
        if self.score == "concat":
            return tanh_energies(keys, self.W_a(query), self.v_a)
        energy = self.W_a(query)  # [B, T, P]
        slots, lengths = energy.shape[-1], mask.sum(dim=1)
        # Encoder position s of a sentence of n words sits in slot P − n + s; padding reads slot 0, masked later.
        slot = torch.arange(keys.shape[1], device=query.device) + (slots - lengths).unsqueeze(1)  # [B, S]
        scores = energy.gather(-1, slot.clamp(0, slots - 1).unsqueeze(1).expand(-1, query.shape[1], -1))
        return scores.masked_fill((slot < 0).unsqueeze(1), float("-inf"))

    def original_positions(self, lengths: Tensor, width: int) -> Tensor:
        """The 0-based original word index of every encoder position: [B, S] (negative on reversed padding)."""
        positions = torch.arange(width, device=lengths.device).unsqueeze(0)
        return lengths.unsqueeze(1) - 1 - positions if self.reversed_source else positions.expand(len(lengths), -1)

    def forward(self, query: Tensor, keys: Tensor, enc: Encoded, steps: Tensor) -> tuple[Tensor, Tensor]:
        """Return the contexts c_t [B, T, H] and the weights a_t [B, T, S] (zero outside the mask and window)."""
        allowed = enc.mask.unsqueeze(1).expand(-1, query.shape[1], -1)
        gauss = None
        if self.kind != "global":
            lengths = enc.mask.sum(dim=1)
            n = lengths.to(query.dtype).unsqueeze(1)  # [B, 1]
            original = self.original_positions(lengths, keys.shape[1]).to(query.dtype).unsqueeze(1)  # [B, 1, S]
            if self.kind == "local-m":
                centre = torch.minimum(steps.to(query.dtype).unsqueeze(0), n - 1)
            else:
                p = n * torch.sigmoid(self.v_p(torch.tanh(self.W_p(query)))).squeeze(-1)  # [B, T]
                centre = torch.floor(p)
                gauss = torch.exp(-((original - p.unsqueeze(-1)) ** 2) / (2 * (self.window / 2) ** 2))
            allowed = allowed & ((original - centre.unsqueeze(-1)).abs() <= self.window)
        alpha = torch.softmax(self.energies(query, keys, enc.mask).masked_fill(~allowed, float("-inf")), dim=-1)
        # A row with nothing allowed (a location score on an empty window) gets no weight, not NaN.
        alpha = alpha.nan_to_num(0.0)
        if gauss is not None:
            alpha = alpha * gauss
        return torch.bmm(alpha, enc.annotations), alpha


LUONG_KINDS = ("global", "local-m", "local-p")
LUONG_SCORES = ("dot", "general", "concat", "location")
ATTENTIONS: dict[str, Callable[[int, int, int], BahdanauAttention]] = {"additive": AdditiveAttention, "none": NoAttention}
"""Bahdanau-family attentions by `model.attention`, built from (query size, key size, alignment hidden size)."""
