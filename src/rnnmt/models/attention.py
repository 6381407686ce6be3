"""Attention: how the decoder turns its state into a context vector over the source annotations.

`additive` is Bahdanau's alignment model (paper-spec §1.3); `none` is RNNencdec, whose context is the
fixed summary c at every step (§2). Each class precomputes what does not depend on the decoder step
once per batch (`prepare`), and `forward` does the per-step work; `BahdanauAttention` states what the GRU
decoder calls, and `ATTENTIONS` names the classes that offer it (`model.attention` of a `gru` decoder).

Luong et al.'s attention (§4.2–4.3) is `LuongAttention`: global or local (local-m, local-p) over the top
encoder states h̄_s, queried by the current decoder state h_t, with the score functions dot, general,
concat (Luong's simplified v_aᵀ tanh(h̄_s + W_a h_t)) and location (softmax(W_a h_t) over fixed positions).
Its scores and kinds are data: `LUONG_SCORES` and `LUONG_KINDS` map each name to its equation and say which
fast forms compute it (docs/equations.md: adding one).

The equations are the functions below (`additive_terms`, `additive_energies`, `attention_weights`,
`attention_context`, `dot_energies`, `location_energies`, `monotonic_centre`, `predicted_position`,
`gaussian`); the modules compose them, and so do the fast loops (recurrence/) and the kernel stages' torch
references, so that an edit here reaches every path (train/selfcheck.py checks their backward passes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor, nn

from rnnmt.errors import UserError
from rnnmt.models.encoders import Encoded
from rnnmt.models.initialisation import Initialised, Rule, Scheme, normal, zeros


def additive_terms(keys: Tensor, queries: Tensor, out: Tensor | None = None) -> Tensor:
    """tanh(U_a h_j + W_a s) [B, k, S, A] for k query terms [B, k, A] per sentence against its keys [B, S, A]."""
    return torch.add(keys.unsqueeze(1), queries.unsqueeze(2), out=out).tanh_()


def additive_energies(terms: Tensor, v: Tensor, out: Tensor | None = None) -> Tensor:
    """e = v_aᵀ terms: rows [N, A] -> [N, 1], for v_a's weight [1, A]."""
    return torch.mm(terms, v.view(-1, 1), out=out)


def attention_weights(energies: Tensor, allowed: Tensor, out: Tensor | None = None) -> Tensor:
    """α = softmax of the energies over the allowed positions (the last dimension; the others' energies become −inf,
    in place); a row with none allowed gets no weight, not NaN."""
    weights = torch.softmax(energies.masked_fill_(~allowed, float("-inf")), dim=-1, out=out)
    # Out of place under autograd, which keeps the softmax's output for its backward.
    return weights.nan_to_num_(0.0) if out is not None else weights.nan_to_num(0.0)


def attention_context(alpha: Tensor, annotations: Tensor, out: Tensor | None = None) -> Tensor:
    """c = Σ_s α_s h_s: weights [B, k, S] and annotations [B, S, C] -> [B, k, C]."""
    return torch.bmm(alpha, annotations, out=out)


# The gradients of the equations above that the fast loops' backward passes and the kernel stages' references write
# out (one home for both; train/selfcheck.py checks them against autograd through the equations).


def weights_grad(alpha: Tensor, d_alpha: Tensor, out: Tensor) -> Tensor:
    """The energies' gradient from the weights' (`attention_weights`): α ∘ (dα − Σ_s α_s dα_s) into out."""
    return torch.ops.aten._softmax_backward_data.out(d_alpha, alpha, -1, alpha.dtype, grad_input=out)


def additive_terms_grad(d_energies: Tensor, v: Tensor, terms: Tensor) -> Tensor:
    """The gradient of `additive_terms`' sums (keys + query) [B, S, A] from the energies' [B, S]: de ∘ v ∘ (1 − tanh²)."""
    return torch.ops.aten.tanh_backward(d_energies.unsqueeze(2) * v, terms)


class Attention(Initialised, Protocol):
    """What every attention offers its decoder: the keys of a batch, computed once (`prepare`), and how its
    parameters are initialised (`init_rules`)."""

    def prepare(self, enc: Encoded) -> Tensor: ...


class BahdanauAttention(Attention, Protocol):
    """What BahdanauDecoder calls: one step's contexts and weights."""

    static: bool  # the context is the same at every step (RNNencdec), so the decoder hoists C·c out of its loop

    def __call__(self, query: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor]:
        """The contexts [N, A] and weights [N, S] of N = B·k queries [N, Q], k per source sentence in a row."""
        ...


# Floats of the pre-activations beam search keeps at once (1 MiB): a few sentences' worth, so they stay in
# a core's L2 cache between the tanh and the product with v.
_ENERGY_CHUNK = 1 << 18
# A BLAS rounds the last M mod 8 rows of a matrix-vector product with other kernels (MKL here); chunks of a
# multiple of 32 rows round every row as one product of all rows would, so beam search's translations do
# not depend on the chunk size.
_ROW_BLOCK = 32


def tanh_energies(keys: Tensor, queries: Tensor, v: nn.Linear) -> Tensor:
    """vᵀ tanh(k_s + q) [B, k, S] for k queries [B, k, A] per sentence against its keys [B, S, A]
    (`additive_terms`, then `additive_energies`).

    Under autograd this is one expression. Without it (beam search) the [B, k, S, A] pre-activations are
    not kept: a few sentences at a time go through one reused buffer, which stays in the cache, instead of
    a fresh tensor of every hypothesis and position written to memory and read back twice.
    """
    batch, length, width = keys.shape
    k = queries.shape[1]
    if torch.is_grad_enabled():
        return additive_energies(additive_terms(keys, queries).reshape(-1, width), v.weight).view(batch, k, length)
    rows = k * length  # per sentence
    step = _ROW_BLOCK // math.gcd(rows, _ROW_BLOCK)  # sentences per chunk: a multiple of this keeps rows aligned
    per_chunk = min(batch, max(step, _ENERGY_CHUNK // (rows * width) // step * step))
    buffer = keys.new_empty(per_chunk, k, length, width)
    energies = keys.new_empty(batch, k, length)
    for start in range(0, batch, per_chunk):
        end = min(batch, start + per_chunk)
        pre = additive_terms(keys[start:end], queries[start:end], out=buffer[: end - start])
        additive_energies(pre.view(-1, width), v.weight, out=energies[start:end].view(-1, 1))
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

    def loop_weights(self) -> tuple[Tensor, Tensor]:
        """What a fast decoder loop reads of this module at each step (recurrence/): W_a's and v_a's weights."""
        return self.W_a.weight, self.v_a.weight

    def forward(self, query: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor]:
        """The contexts c_i [N, A] and weights α_i [N, S] (zero on padding) of N = B·k queries, k per source
        sentence in a row (beam search's hypotheses; k = 1 in training)."""
        batch, _, width = keys.shape
        energy = tanh_energies(keys, self.W_a(query).view(batch, -1, width), self.v_a)  # [B, k, S]
        alpha = attention_weights(energy, enc.mask.unsqueeze(1))
        return attention_context(alpha, enc.annotations).flatten(0, 1), alpha.flatten(0, 1)


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


def dot_energies(queries: Tensor, keys: Tensor) -> Tensor:
    """score(h_t, h̄_s) = h_tᵀ k_s for queries [B, T, H] and keys [B, S, H] (dot: k_s = h̄_s; general: W_a h̄_s)."""
    return torch.bmm(queries, keys.transpose(1, 2))


def location_energies(terms: Tensor, lengths: Tensor, width: int) -> Tensor:
    """location: W_a h_t [B, T, P] read at each of `width` source positions' slots: [B, T, S]. A sentence of n
    words sits in slots P − n .. P − 1 (position s in slot P − n + s); a position beyond the slots gets −inf."""
    slots = terms.shape[-1]
    slot = torch.arange(width, device=terms.device) + (slots - lengths).unsqueeze(1)  # [B, S]
    scores = terms.gather(-1, slot.clamp(0, slots - 1).unsqueeze(1).expand(-1, terms.shape[1], -1))
    return scores.masked_fill((slot < 0).unsqueeze(1), float("-inf"))


def monotonic_centre(steps: Tensor, n: Tensor) -> Tensor:
    """local-m's window centre p_t = t, capped at the last word: [B, T] for 0-based steps [T] and lengths n [B, 1]."""
    return torch.minimum(steps.to(n.dtype).unsqueeze(0), n - 1)


def predicted_position(n: Tensor, wp_h: Tensor, v_p: Tensor, terms: Tensor | None = None) -> Tensor:
    """local-p's p_t = n·σ(v_pᵀ tanh(W_p h_t)) from the lengths n, W_p h_t [..., H] and v_p's weight [1, H] (tanh(W_p h_t)
    into `terms` where given): 0-based in the original word order, from the first word to one past the last."""
    return n * torch.sigmoid(torch.tanh(wp_h, out=terms) @ v_p.t()).squeeze(-1)


def within_window(offset: Tensor, window: int) -> Tensor:
    """Whether a position at `offset` from the window's centre is in [p_t − D, p_t + D]."""
    return offset.abs() <= window


def gaussian(offset: Tensor, window: int) -> Tensor:
    """local-p's weight exp(−(s − p_t)² / 2σ²), σ = D/2, of offsets s − p_t (`distLayerForward.m`)."""
    return torch.exp(-(offset**2) / (2 * (window / 2) ** 2))


Modules = Callable[[int, int], dict[str, nn.Module]]  # (hidden size, location slots) -> the modules an entry adds, by name


def _no_modules(hidden: int, slots: int) -> dict[str, nn.Module]:
    return {}


def _annotations(attention: LuongAttention, annotations: Tensor) -> Tensor:
    return annotations


@dataclass(frozen=True)
class FastWeights:
    """What a fast form reads of a score's or a kind's parameters at each step: the weight of its product with the
    top state h_t (W_a h_t, W_p h_t) and its vector (v_a, v_p); None where it has none."""

    query: Tensor | None = None
    vector: Tensor | None = None


def _no_weights(attention: LuongAttention) -> FastWeights:
    return FastWeights()


@dataclass(frozen=True)
class LoopAttention:
    """What a fast loop reads of a LuongAttention (`LuongAttention.loop_weights`): the fast forms its score and kind
    name (`Score.form`, `Kind.form`), the tensors those read (`FastWeights`), its other parameters, its window D and
    whether the source is reversed; and its forward, which a loop without a written-out form runs by autograd."""

    score_form: str | None
    kind_form: str | None
    score: FastWeights
    kind: FastWeights
    others: list[Tensor]  # the parameters `score` and `kind` do not hand over, in the module's order
    window: int
    reversed_source: bool
    forward: Callable[[Tensor, Tensor, Encoded, Tensor], tuple[Tensor, Tensor]]


@dataclass(frozen=True)
class Score:
    """A score(h_t, h̄_s) of Luong §3.1: its equation, the keys it reads, its parameters, and its fast form.

    `energies(attention, queries [B, T, H], keys, source mask [B, S]) -> [B, T, S]` is the equation every path
    runs, `keys(attention, h̄_s)` what `prepare` computes once per batch. `form` names the fast form that
    computes it (an object of recurrence/kernels/luong_attention.py's SCORE_FORMS): "dot" (energies = keys·h_t,
    written out in the fused loop and the kernels), "concat" and "location" (kernels); None: the fused loop runs
    `energies` by autograd at each step, and a run that asks for the kernels trains without them.
    `weights(attention)` hands that form the parameters it reads.
    """

    energies: Callable[[LuongAttention, Tensor, Tensor, Tensor], Tensor]
    keys: Callable[[LuongAttention, Tensor], Tensor] = _annotations
    modules: Modules = _no_modules
    form: str | None = None
    weights: Callable[[LuongAttention], FastWeights] = _no_weights


@dataclass(frozen=True)
class Kind:
    """global, local-m or local-p (Luong §3.2): where its window centres, its parameters, its fast form.

    `centre(attention, queries [B, T, H], lengths n [B, 1], steps [T]) -> (centre [B, T], p_t [B, T] or None)`:
    the window [centre − D, centre + D], and where p_t is given, the Gaussian around it (`gaussian`); None: no
    window. `form` and `weights` as Score's ("global", "local-m", "local-p": the kernels'; the fused loop writes out
    "global").
    """

    centre: Callable[[LuongAttention, Tensor, Tensor, Tensor], tuple[Tensor, Tensor | None]] | None = None
    modules: Modules = _no_modules
    form: str | None = None
    weights: Callable[[LuongAttention], FastWeights] = _no_weights


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

    The score and the kind are entries of LUONG_SCORES and LUONG_KINDS, whose modules (W_a, v_a; W_p, v_p)
    this module holds.
    """

    static = False

    def __init__(self, hidden: int, kind: str, score: str, window: int, max_positions: int, reversed_source: bool) -> None:
        super().__init__()
        if kind not in LUONG_KINDS or score not in LUONG_SCORES:
            raise UserError(f"Luong attention is {kind!r} with score {score!r}; expected {'/'.join(LUONG_KINDS)} with {'/'.join(LUONG_SCORES)}.")
        self.kind, self.score, self.window, self.reversed_source = kind, score, window, reversed_source
        for name, module in {**LUONG_SCORES[score].modules(hidden, max_positions), **LUONG_KINDS[kind].modules(hidden, max_positions)}.items():
            self.add_module(name, module)

    def init_rules(self, scheme: Scheme) -> dict[str, Rule]:
        """W_a and v_a by the alignment-model rules (`alignment_rules`), every other module's weight (local-p's W_p and
        v_p) as a weight."""
        inner, output = alignment_rules(scheme)
        rules = {"W_a": inner, "v_a": output}
        return {f"{name}.weight": rules.get(name, scheme.weight) for name, _ in self.named_children()}

    def prepare(self, enc: Encoded) -> Tensor:
        """The keys the scores read (general: W_a h̄_s, once per batch)."""
        return LUONG_SCORES[self.score].keys(self, enc.annotations)

    def energies(self, query: Tensor, keys: Tensor, mask: Tensor) -> Tensor:
        """score(h_t, h̄_s) for every step and position: [B, T, S] (the source mask places the location slots)."""
        return LUONG_SCORES[self.score].energies(self, query, keys, mask)

    def loop_weights(self) -> LoopAttention:
        """What a fast loop reads of this module (recurrence/), as its score's and kind's entries hand it over."""
        score, kind = LUONG_SCORES[self.score], LUONG_KINDS[self.kind]
        handed = score.weights(self), kind.weights(self)
        given = {id(t) for weights in handed for t in (weights.query, weights.vector) if t is not None}
        others = [p for p in self.parameters() if id(p) not in given]
        return LoopAttention(score.form, kind.form, *handed, others, self.window, self.reversed_source, self)

    def original_positions(self, lengths: Tensor, width: int) -> Tensor:
        """The 0-based original word index of every encoder position: [B, S] (negative on reversed padding)."""
        positions = torch.arange(width, device=lengths.device).unsqueeze(0)
        return lengths.unsqueeze(1) - 1 - positions if self.reversed_source else positions.expand(len(lengths), -1)

    def forward(self, query: Tensor, keys: Tensor, enc: Encoded, steps: Tensor) -> tuple[Tensor, Tensor]:
        """Return the contexts c_t [B, T, H] and the weights a_t [B, T, S] (zero outside the mask and window)."""
        allowed = enc.mask.unsqueeze(1).expand(-1, query.shape[1], -1)
        centre = LUONG_KINDS[self.kind].centre
        gauss = None
        if centre is not None:
            lengths = enc.mask.sum(dim=1)
            n = lengths.to(query.dtype).unsqueeze(1)  # [B, 1]
            original = self.original_positions(lengths, keys.shape[1]).to(query.dtype).unsqueeze(1)  # [B, 1, S]
            middle, p = centre(self, query, n, steps)
            allowed = allowed & within_window(original - middle.unsqueeze(-1), self.window)
            if p is not None:
                gauss = gaussian(original - p.unsqueeze(-1), self.window)
        alpha = attention_weights(self.energies(query, keys, enc.mask), allowed)
        if gauss is not None:
            alpha = alpha * gauss
        return attention_context(alpha, enc.annotations), alpha


def _square(hidden: int, slots: int) -> dict[str, nn.Module]:
    return {"W_a": nn.Linear(hidden, hidden, bias=False)}


LUONG_SCORES: dict[str, Score] = {
    "dot": Score(lambda att, q, keys, mask: dot_energies(q, keys), form="dot"),
    "general": Score(lambda att, q, keys, mask: dot_energies(q, keys), keys=lambda att, ann: att.W_a(ann), modules=_square, form="dot"),
    "concat": Score(
        lambda att, q, keys, mask: tanh_energies(keys, att.W_a(q), att.v_a),
        modules=lambda hidden, slots: {"W_a": nn.Linear(hidden, hidden, bias=False), "v_a": nn.Linear(hidden, 1, bias=False)},
        form="concat",
        weights=lambda att: FastWeights(att.W_a.weight, att.v_a.weight),
    ),
    "location": Score(
        lambda att, q, keys, mask: location_energies(att.W_a(q), mask.sum(dim=1), keys.shape[1]),
        modules=lambda hidden, slots: {"W_a": nn.Linear(hidden, slots, bias=False)},
        form="location",
        weights=lambda att: FastWeights(att.W_a.weight),
    ),
}
"""Luong's score functions by `model.score`."""


def _predicted(att: LuongAttention, q: Tensor, n: Tensor, steps: Tensor) -> tuple[Tensor, Tensor]:
    p = predicted_position(n, att.W_p(q), att.v_p.weight)
    return torch.floor(p), p


LUONG_KINDS: dict[str, Kind] = {
    "global": Kind(form="global"),
    "local-m": Kind(lambda att, q, n, steps: (monotonic_centre(steps, n), None), form="local-m"),
    "local-p": Kind(
        _predicted,
        modules=lambda hidden, slots: {"W_p": nn.Linear(hidden, hidden, bias=False), "v_p": nn.Linear(hidden, 1, bias=False)},
        form="local-p",
        weights=lambda att: FastWeights(att.W_p.weight, att.v_p.weight),
    ),
}
"""Luong's attentions by `model.attention` of an `lstm` decoder."""

ATTENTIONS: dict[str, Callable[[int, int, int], BahdanauAttention]] = {"additive": AdditiveAttention, "none": NoAttention}
"""Bahdanau-family attentions by `model.attention`, built from (query size, key size, alignment hidden size)."""
