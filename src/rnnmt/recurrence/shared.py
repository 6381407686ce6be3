"""What the two fast forms of the loops share around their step bodies: `fused` (recurrence/fused.py, the CPU's) and
`kernels` (recurrence/kernels/loops.py, the GPU's) both import this module, and neither imports the other.

Their step bodies stay two: the fused loops run torch operations, whose bits the CPU's runs keep; the kernel loops cut
each step into few Triton launches. What lies around them is written once here:

- `save` and `saved`: the tensors a loop keeps for its backward pass, by name (through save_for_backward, so that
  autograd still finds a tensor changed in place and saved-tensor hooks see them all);
- `Record`: a dataclass of tensors laid out flat, as autograd.Function.apply takes them and backward returns their
  gradients, and back from that layout;
- Luong's input-feeding loop: its settings (`FeedLoop`) and tensors (`FeedTensors`), made from what the decoder hands
  its fast forms (`feed_loop`), the buffers both forward passes fill (`FeedBuffers`), and the start and the weight
  gradients of both backward passes (`FeedBack`);
- Bahdanau's attentive GRU loop: the buffers both forward passes fill and the weight gradients after both backward
  passes (`AttentiveBuffers`); the annotations' gradient through the contexts of all steps (`annotations_grad`);
- the GRU's inputs as its loops read them (`gru_inputs`) and its recurrent weight gradients over all steps
  (`gru_weight_grads`);
- `FastLoops`: how a fast form runs a model's loops (models/loops.py) with its own loop functions.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, ClassVar, Self

import torch
from torch import Tensor

from rnnmt.models import lstm
from rnnmt.models.attention import LoopAttention
from rnnmt.models.build import model_settings
from rnnmt.models.decoders import FeedWeights
from rnnmt.models.encoders import Encoded
from rnnmt.models.loops import Loops
from rnnmt.recurrence.precision import Precision, weight_grad


class Record:
    """A dataclass whose fields are tensors (None where absent), lists or dicts of them, or records."""

    def flat(self) -> list[Tensor | None]:
        """Its tensors in field order, as autograd.Function.apply takes them (and backward returns their gradients)."""
        return _flat(self)

    def present(self) -> list[Tensor]:
        """Its tensors but the absent ones."""
        return [t for t in self.flat() if t is not None]

    def layout(self) -> Self:
        """The same record without its tensors (None in their places), to fill from a flat list again."""
        return _fill(self, itertools.repeat(None))

    def filled(self, values: Iterable[Tensor | None]) -> Self:
        """A record of this one's layout holding `values` in order: the inverse of `flat`."""
        return _fill(self, iter(values))


def _flat(value: Any) -> list[Tensor | None]:
    if isinstance(value, Record):
        return [t for field in dataclasses.fields(value) for t in _flat(getattr(value, field.name))]  # type: ignore[arg-type]
    if isinstance(value, (list, dict)):
        return [t for item in (value.values() if isinstance(value, dict) else value) for t in _flat(item)]
    return [value]


def _fill(layout: Any, values: Iterator[Tensor | None]) -> Any:
    if isinstance(layout, Record):
        return type(layout)(**{field.name: _fill(getattr(layout, field.name), values) for field in dataclasses.fields(layout)})  # type: ignore[arg-type]
    if isinstance(layout, list):
        return [_fill(item, values) for item in layout]
    if isinstance(layout, dict):
        return {name: _fill(item, values) for name, item in layout.items()}
    return next(values)


def save(ctx: Any, **tensors: Any) -> None:
    """Keep `tensors` (each a tensor, None, a list or dict of them, or a Record) for the backward pass by name; `saved`
    gives them back."""
    ctx.saved_layout = {name: _fill(value, itertools.repeat(None)) for name, value in tensors.items()}
    ctx.save_for_backward(*_flat(list(tensors.values())))


def saved(ctx: Any) -> SimpleNamespace:
    """What the forward pass kept (`save`), by the names it gave."""
    values = iter(ctx.saved_tensors)
    return SimpleNamespace(**{name: _fill(layout, values) for name, layout in ctx.saved_layout.items()})


def gru_inputs(p: Precision, x: Tensor, b_cand: Tensor) -> Tensor:
    """A GRU's projected inputs x [B, T, 3H] as its loops read them: steps first [T, B, 3H], in the accumulation dtype,
    the candidate's bias added once."""
    xs = p.steps_first(x)
    xs[..., 2 * (x.shape[-1] // 3) :] += b_cand
    return xs


def gru_weight_grads(p: Precision, dx: Tensor, h_prev: Tensor, rh: Tensor) -> tuple[Tensor, Tensor]:
    """dU_zr and dU over all steps at once, one product each: d(pre-activations) dx [T, B, 3H] (where a loop keeps them
    in the products' dtype, that copy), the states each step started from and r∘h [T, B, H]."""
    H = h_prev.shape[-1]
    return weight_grad(p, dx[..., : 2 * H], h_prev), weight_grad(p, dx[..., 2 * H :], rh)


def annotations_grad(alphas: Tensor, d_contexts: Tensor) -> Tensor:
    """The annotations' gradient through the contexts c_t = Σ_s α_s h_s of all steps (α [T, B, S], dc [T, B, C]):
    Σ_t α_t dc_tᵀ, one batched product [B, S, C]."""
    return torch.bmm(alphas.permute(1, 2, 0), d_contexts.transpose(0, 1))


@dataclass
class AttentiveBuffers(Record):
    """What both forward passes of the attentive GRU loop (Bahdanau's decoder) fill step by step, in the accumulation
    dtype, and keep."""

    states: Tensor  # [T, B, H]: the queries s_{t−1}, s_0 first
    contexts: Tensor  # [T, B, C]
    tanh: Tensor  # [T, B, S, A]: tanh(U_a h_j + W_a s_{t−1})
    alphas: Tensor  # [T, B, S]
    gates: Tensor  # [T, B, 2H]
    rh: Tensor  # [T, B, H]: r∘h
    cand: Tensor  # [T, B, H]: h̃

    @staticmethod
    def start(p: Precision, x: Tensor, s0: Tensor, keys: Tensor, annotations: Tensor) -> AttentiveBuffers:
        """The buffers of a loop over projected inputs x [B, T, 3H] from s_0 [B, H], against keys [B, S, A] and
        annotations [B, S, C]."""
        B, T, H3 = x.shape
        H, S, A = H3 // 3, keys.shape[1], keys.shape[2]
        b = AttentiveBuffers(
            states=p.buffer(x, T, B, H),
            contexts=p.buffer(x, T, B, annotations.shape[2]),
            tanh=p.buffer(x, T, B, S, A),
            alphas=p.buffer(x, T, B, S),
            gates=p.buffer(x, T, B, 2 * H),
            rh=p.buffer(x, T, B, H),
            cand=p.buffer(x, T, B, H),
        )
        b.states[0] = s0
        return b

    def outputs(self) -> tuple[Tensor, Tensor, Tensor]:
        """What the loop returns: the queries, the contexts and the weights, batch first."""
        return self.states.transpose(0, 1), self.contexts.transpose(0, 1), self.alphas.transpose(0, 1)

    def weight_grads(self, p: Precision, v_a: Tensor, dq: Tensor, de: Tensor, dx: Tensor, products: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, ...]:
        """The gradients of the loop's weights in the order it takes them (W_a, v_a, C, U_zr, U, b), each one product or
        sum over all steps, from what its backward steps filled: the query's dq, the energies' de and the GRU's
        pre-activations' dx [T, B, ·] (`products`: dx and the states in the products' dtype, where the loop keeps them)."""
        dx_m, states_m = products or (dx, self.states)
        A, H = self.tanh.shape[-1], self.rh.shape[-1]
        dv = (de.reshape(1, -1) @ self.tanh.reshape(-1, A)).reshape(v_a.shape)
        # The GRU ran T − 1 steps, from states[0..T−2].
        dU_gates, dU_cand = gru_weight_grads(p, dx_m[:-1], states_m[:-1], self.rh[:-1])
        return weight_grad(p, dq, states_m), dv, weight_grad(p, dx_m, self.contexts), dU_gates, dU_cand, dx[:-1, :, 2 * H :].sum((0, 1))


@dataclass
class AttentionTensors(Record):
    """A Luong attention's parameters as the input-feeding loop takes them: those its score's and kind's entries hand a
    fast form (attention.FastWeights), by role, and the others (which its forward reads where a loop runs it by
    autograd; general's W_a, which makes the keys outside the loop)."""

    score_query: Tensor | None  # the score's product with h_t (concat's W_a, location's)
    kind_query: Tensor | None  # the kind's (local-p's W_p)
    score_vector: Tensor | None  # v_a (concat)
    kind_vector: Tensor | None  # v_p (local-p)
    others: list[Tensor]


@dataclass
class FeedTensors(Record):
    """The tensors of the input-feeding loop by name: its Function takes them as `flat()` lays them out, and its
    backward returns their gradients as a FeedTensors of the same layout."""

    x1: Tensor  # [B, T, 4H]: layer 1's input projection of the embeddings, its biases added
    h0: Tensor  # [L, B, H]
    c0: Tensor
    W_ih: list[Tensor]  # per layer; layer 1's: the columns that read the fed h̃
    W_hh: list[Tensor]
    bias: list[Tensor | None]  # per layer b_ih + b_hh; None for layer 1 (in x1) and without biases
    Wc_c: Tensor  # W_c's context and state halves, and its bias
    Wc_h: Tensor
    b_c: Tensor | None
    keys: Tensor
    annotations: Tensor
    attention: AttentionTensors


@dataclass
class FeedLoop:
    """What Luong's input-feeding loop needs besides the tensors it differentiates (`FeedTensors`)."""

    clip: float | None  # of the carried cell, or None
    feed_mask: Tensor | None  # inverted-dropout multipliers on the fed h̃ [T, B, H], or None
    layer_masks: Tensor | None  # between the layers [L − 1, T, B, H], or None
    attention: LoopAttention  # what the attention hands over: its forms, window, source order and forward
    source: Encoded  # its mask and summary
    steps: Tensor  # the 0-based target steps [T]
    layout: FeedTensors  # of the tensors the loop's Function takes

    @property
    def layers(self) -> int:
        return len(self.layout.W_hh)

    def tensors(self, flat: Sequence[Tensor | None]) -> FeedTensors:
        """The Function's tensor inputs by name."""
        return self.layout.filled(flat)

    def attend(self, h: Tensor, keys: Tensor, annotations: Tensor, t: int) -> tuple[Tensor, Tensor]:
        """The attention's forward for top states h [B, H] at step t: (c [B, H], α [B, S])."""
        c, alpha = self.attention.forward(h.unsqueeze(1), keys, Encoded(annotations, self.source.mask, self.source.summary), self.steps[t : t + 1])
        return c.squeeze(1), alpha.squeeze(1)


def _dropout(shape: tuple[int, ...], p: float, like: Tensor) -> Tensor | None:
    """Inverted-dropout multipliers (0 or 1/(1 − p)) where p > 0, else None."""
    return lstm.dropout_multipliers(shape, p, like) if p > 0 else None


def feed_loop(hand: FeedWeights, ctx: dict[str, Any], steps: Tensor, state: tuple[Tensor, Tensor]) -> tuple[FeedLoop, FeedTensors]:
    """A LuongDecoder's input-feeding loop (decoders.py) from what it hands its fast forms (`FeedWeights`): the loop's
    settings and tensors."""
    x1, att = hand.x1, hand.attention
    layers, shape = len(hand.W_hh), (x1.shape[1], x1.shape[0], hand.W_hh[0].shape[1])
    feed_mask = _dropout(shape, hand.feed_dropout, x1)
    layer_masks = _dropout((layers - 1, *shape), hand.layer_dropout, x1) if layers > 1 else None
    attention = AttentionTensors(att.score.query, att.kind.query, att.score.vector, att.kind.vector, att.others)
    tensors = FeedTensors(x1, *state, hand.W_ih, hand.W_hh, hand.bias, hand.Wc_c, hand.Wc_h, hand.b_c, ctx["keys"], ctx["enc"].annotations, attention)
    return FeedLoop(hand.clip, feed_mask, layer_masks, att, ctx["enc"], steps, tensors.layout()), tensors


@dataclass
class FeedBuffers(Record):
    """What both forward passes of the input-feeding loop fill step by step (in the accumulation dtype) and keep."""

    xh: Tensor  # [L, T + 1, B, 2H]: xh[l, t] = [layer l's input at step t (layer 1: the fed h̃); its state before step t]
    c: Tensor  # [L, T + 1, B, H]: the carried (clipped) cell
    gates: Tensor  # [L, T, B, 4H]
    c_raw: Tensor  # [L, T, B, H]: the cell before its clip
    tanh_c: Tensor
    h_tilde: Tensor  # [T + 1, B, H]: h_tilde[t + 1] = h̃_t; h̃_0 = 0
    contexts: Tensor  # [T, B, H]
    alphas: Tensor  # [T, B, S]

    @staticmethod
    def start(p: Precision, w: FeedTensors) -> FeedBuffers:
        """The buffers of a loop over `w`, each layer's state and cell before step 1 in place."""
        B, T, H4 = w.x1.shape
        L, H, x = len(w.W_hh), H4 // 4, w.x1
        buffers = FeedBuffers(
            xh=p.buffer(x, L, T + 1, B, 2 * H, zero=True),
            c=p.buffer(x, L, T + 1, B, H),
            gates=p.buffer(x, L, T, B, 4 * H),
            c_raw=p.buffer(x, L, T, B, H),
            tanh_c=p.buffer(x, L, T, B, H),
            h_tilde=p.buffer(x, T + 1, B, H, zero=True),
            contexts=p.buffer(x, T, B, H),
            alphas=p.buffer(x, T, B, w.annotations.shape[1]),
        )
        buffers.xh[:, 0, :, H:], buffers.c[:, 0] = w.h0, w.c0
        return buffers

    def outputs(self) -> tuple[Tensor, Tensor]:
        """What the loop returns: h̃ [B, T, H] and α [B, T, S]."""
        return self.h_tilde[1:].transpose(0, 1), self.alphas.transpose(0, 1)

    def tops(self) -> Tensor:
        """The top layer's state after each step [T, B, H]."""
        return self.xh[-1, 1:, :, self.xh.shape[-1] // 2 :]

    def dot_keys_grad(self, d_scores: Tensor) -> Tensor:
        """The keys' gradient of a dot-product score (energies = keys·h_t): Σ_t of the outer products d_scores_t h_tᵀ,
        one batched product [B, S, H]."""
        return torch.bmm(d_scores.permute(1, 2, 0), self.tops().transpose(0, 1))


@dataclass
class FeedBack:
    """Where both backward passes of the input-feeding loop start: what the forward pass kept, the incoming gradients
    of h̃ and α steps first, and the buffers the steps fill for the weight gradients, d(gates) and d(W_c [c; h] + b)."""

    buffers: FeedBuffers
    tensors: FeedTensors
    d_h_tilde: Tensor  # [T, B, H]
    d_alphas: Tensor | None  # [T, B, S]
    d_gates: Tensor  # [L, T, B, 4H]
    d_pre: Tensor  # [T, B, H]

    @staticmethod
    def start(p: Precision, buffers: FeedBuffers, tensors: FeedTensors, d_h_tilde: Tensor, d_alphas: Tensor | None) -> FeedBack:
        """From what the forward pass kept and the gradients of its outputs, h̃ [B, T, H] and α [B, T, S] (or None)."""
        L, T, B, H4 = buffers.gates.shape
        d_alphas = p.steps_first(d_alphas) if d_alphas is not None else None
        return FeedBack(buffers, tensors, p.steps_first(d_h_tilde), d_alphas, p.buffer(d_h_tilde, L, T, B, H4), p.buffer(d_h_tilde, T, B, H4 // 4))

    def gradients(self, p: Precision, products: tuple[Tensor, Tensor] | None = None, **given: Any) -> FeedTensors:
        """The gradients of the loop's tensors: those `given` by name (h0, c0, keys, annotations, attention), each
        layer's [W_ih W_hh] from d(gates) and [x; h] (`products`: their copies in the products' dtype, where the loop
        keeps them), its bias, and W_c's, each one product or sum over all steps."""
        w, b = self.tensors, self.buffers
        d_gates, xh = products or (self.d_gates, b.xh)
        T, H = self.d_pre.shape[0], self.d_pre.shape[2]
        d_W = [weight_grad(p, d_gates[layer], xh[layer, :T]) for layer in range(len(w.W_hh))]
        return FeedTensors(
            x1=self.d_gates[0].transpose(0, 1),
            W_ih=[d[:, :H] for d in d_W],
            W_hh=[d[:, H:] for d in d_W],
            bias=[self.d_gates[layer].sum((0, 1)) if bias is not None else None for layer, bias in enumerate(w.bias)],
            Wc_c=weight_grad(p, self.d_pre, b.contexts),
            Wc_h=weight_grad(p, self.d_pre, b.tops()),
            b_c=self.d_pre.sum((0, 1)) if w.b_c is not None else None,
            **given,
        )


def fixed_context_loop(decoder: Any, s0: Tensor, x_proj: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor, Tensor]:
    """RNNencdec's decoder loop (attention `none`: the context is the summary c at every step) as one GRU scan over
    W·y_t + C·c from s_0, by the GRU's own loops: the states before each word, the contexts and the weights."""
    gru, steps = decoder.gru, x_proj.shape[1]
    after = gru.scan(x_proj[:, :-1] + gru.project_context(keys).unsqueeze(1), None, h0=s0)
    queries = torch.cat([s0.unsqueeze(1), after], dim=1)
    alphas = enc.mask.to(keys.dtype).unsqueeze(1).expand(-1, steps, -1)
    return queries, keys.unsqueeze(1).expand(-1, steps, -1), alphas


def additive_loop(function: Any, decoder: Any, s0: Tensor, x_proj: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor, Tensor]:
    """RNNsearch's decoder loop (additive attention) as `function` (a form's attentive GRU loop) runs it."""
    gru = decoder.gru
    return function.apply(s0, x_proj, keys, enc.annotations, enc.mask, *decoder.attention.loop_weights(), gru.context_weight(), *gru.recurrent_weights())


BahdanauForm = Callable[[Any, Tensor, Tensor, Tensor, Encoded], tuple[Tensor, Tensor, Tensor]]


@dataclass(frozen=True)
class FastLoops(Loops):
    """A fast form of the loops: Bahdanau's decoder by its form of the decoder's attention (`decoders`, by the
    attention's name), an LSTM encoder's layers by `encoder_layers` (on a GPU, cuDNN's kernel over packed sequences
    where that is faithful), Luong's input-feeding decoder by `feed_loop` from what the decoder hands over; the GRUs'
    scans as the form runs them (`gru_scans`)."""

    decoders: ClassVar[dict[str, BahdanauForm]]
    encoder_layers: ClassVar[Callable[..., tuple[Tensor, tuple[Tensor, Tensor]]]]
    feed_loop: ClassVar[type[torch.autograd.Function]]
    # The encoder GRUs (`model.encoder_norm`) the form's `gru_scans` runs.
    encoder_norms: ClassVar[tuple[str, ...]] = ("none",)

    def unsupported(self, model_cfg: dict[str, Any], part: str) -> str | None:
        model_cfg = model_settings(model_cfg)
        if part == "decoder" and model_cfg["decoder"] == "gru" and model_cfg["attention"] not in self.decoders:
            return f"Bahdanau attention {model_cfg['attention']!r} has no {self.name} form (recurrence/)"
        if part == "encoder" and model_cfg["encoder_norm"] not in self.encoder_norms:
            return f"the layer-normalised encoder GRU (models/lngru.py) has no {self.name} form"
        return None

    def bahdanau_decoder(self, decoder: Any, s0: Tensor, x_proj: Tensor, keys: Tensor, enc: Any) -> tuple[Tensor, Tensor, Tensor]:
        return self.decoders[decoder.attention_name](decoder, s0, x_proj, keys, enc)

    def lstm_encoder(self, encoder: Any, x: Tensor, mask: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        # On a GPU, cuDNN's kernel over packed sequences is the fast form (faithful without clipping).
        if x.device.type == "cuda" and encoder.state_clip is None and self.packed:
            return encoder.steps(x, mask, self.packed)
        return self.encoder_layers(encoder.lstm, x, mask, encoder.state_clip, encoder.training)

    def luong_decoder(self, decoder: Any, ctx: dict[str, Any], words: Tensor, steps: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        hand = decoder.loop_weights(words)
        if hand is None:
            return decoder.steps(ctx, words, steps, state)
        loop, tensors = feed_loop(hand, ctx, steps, state)
        return self.feed_loop.apply(loop, *tensors.flat())
