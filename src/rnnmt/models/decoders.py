"""Decoders: Bahdanau's GRU with a maxout deep output, Luong's stacked LSTM with attentional states, and nmtpy's
conditional GRU (the published Multi30k system's, for comparison).

Bahdanau (GroundHog, paper-spec §1.6): the state s that has consumed y_<t is the attention query for
predicting y_t; the same context c_t feeds the readout for y_t and the state update that consumes y_t.
There is no BOS embedding: the previous-word readout term is zero at the first step.

Luong (§4.1–4.4): `<s>` is the first input; the top state h_t after consuming y_{t−1} queries the
attention, h̃_t = tanh(W_c [c_t; h_t]) predicts y_t, and with input feeding h̃_t joins the embedding of
y_t as the next input. Without input feeding the LSTM runs over the whole target at once.

Both offer the same step interface to beam search: `begin` (per-sentence context and the first state),
`predict` (logits for the next word) and `advance` (consume the chosen words). States are dicts of
tensors with one row per hypothesis, so a search can reorder and drop rows without knowing the model;
the context keeps one row per sentence, and the k hypotheses of a sentence (k rows in a row) share it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from rnnmt.models import lstm
from rnnmt.models.attention import ATTENTIONS, AdditiveAttention, BahdanauAttention, LoopAttention, LuongAttention
from rnnmt.models.encoders import Embedding, Encoded
from rnnmt.models.gru import GroundhogGRU
from rnnmt.models.initialisation import Rule, Scheme, linear_rules, prefixed
from rnnmt.models.loops import PLAIN, Loops
from rnnmt.models.padding import AlignedLinear
from rnnmt.text.vocab import Vocab

Context = dict[str, object]  # per sentence: the Encoded source and the attention keys
State = dict[str, Tensor]  # per hypothesis


def attentional_state(pre: Tensor, out: Tensor | None = None) -> Tensor:
    """Luong's h̃_t = tanh(W_c [c_t; h_t]) from the product W_c [c_t; h_t] (+ its bias) [..., H]."""
    return torch.tanh(pre, out=out)


def attentional_state_grad(d_h_tilde: Tensor, h_tilde: Tensor, out: Tensor) -> Tensor:
    """The gradient of `attentional_state`'s product from h̃'s: dh̃ ∘ (1 − h̃²) into out (the fast loops' backward
    passes and the kernel stage's reference)."""
    return torch.ops.aten.tanh_backward.grad_input(d_h_tilde, h_tilde, grad_input=out)


# What s_0 = tanh(W_s ·) reads, by `model.decoder_init`: the encoder's summary (GroundHog's: ←h_1 in RNNsearch, c in
# RNNencdec; the final states in Luong's), or the mean of the annotations the decoder reads (nmtpy's `init_cgru: text`).
DECODER_INITS = ("summary", "mean")


def mean_annotation(enc: Encoded) -> Tensor:
    """mean_j h_j over the real source positions [B, A] (nmtpy dc0a161, models/attention.py l. 417–420)."""
    mask = enc.mask.unsqueeze(-1).to(enc.annotations.dtype)
    return (enc.annotations * mask).sum(1) / mask.sum(1)


def previous_words(y_emb: Tensor) -> Tensor:
    """E y_{t−1} at every step t of a teacher-forced pass over y_emb [B, T, E]: zeros before the first word."""
    return torch.cat([torch.zeros_like(y_emb[:, :1]), y_emb[:, :-1]], dim=1)


class WordTerms:
    """What each vocabulary word contributes wherever the decoder reads it, computed once per search: rows
    [V, ·] of the vocabulary, not of sentences, so beam search's `take` (which picks sentence rows of
    tensors, dicts, tuples and dataclasses) passes it on whole."""

    def __init__(self, gru: Tensor, readout: Tensor) -> None:
        self.gru, self.readout = gru, readout


class BahdanauDecoder(nn.Module):
    """GRU decoder with attention (or a fixed context) and a deep output with maxout (§1.4–1.5); its teacher-forced
    loop runs by the model's loops (models/loops.py): `steps`, or a fast form of it.

    Dropout, in training only: `dropout` on the maxout output t, where GroundHog applies its `state['dropout']`
    (encdec.py l. 938–940: `output_nonlinearities = [maxout, DropOp]`, before the factorised softmax; GroundHog keeps
    with probability p and scales by p at test time, torch drops with probability p and scales by 1/(1 − p) in
    training, which gives the same expected activations); `context_dropout` on the annotations h_j the decoder reads
    (not in GroundHog: nmtpy's `ctx_dropout`). Neither is inside the recurrent loop, so every form of it runs them.
    `init`: what s_0 is computed from (DECODER_INITS), the encoder's summary (the paper's ←h_1) or the mean annotation.
    """

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
        loops: Loops = PLAIN,
        dropout: float = 0.0,
        context_dropout: float = 0.0,
        init: str = "summary",
    ) -> None:
        super().__init__()
        self.init_from = init
        self.maxout_units = maxout_units
        self.drop = nn.Dropout(dropout)
        self.context_drop = nn.Dropout(context_dropout)
        self.loops = loops
        self.embed = Embedding(vocab_size, emb_dim)
        self.W_s = nn.Linear(context_size if init == "mean" else summary_size, hidden)  # s_0 = tanh(W_s x + b)
        self.gru = GroundhogGRU(emb_dim, hidden, context_size, loops=loops)
        self.attention_name = attention  # its key in ATTENTIONS, by which the fast loops find their form of it
        self.attention: BahdanauAttention = ATTENTIONS[attention](hidden, context_size, align_hidden)
        self.U_o = nn.Linear(hidden, 2 * maxout_units)  # the only readout bias (§1.5)
        self.V_o = AlignedLinear(emb_dim, 2 * maxout_units, bias=False)
        self.C_o = nn.Linear(context_size, 2 * maxout_units, bias=False)
        # GroundHog factorises W_o as 500 -> 620 -> K_y (rank_n_approx); the paper writes one matrix.
        if output_rank:
            self.W_o = nn.Sequential(AlignedLinear(maxout_units, output_rank, bias=False), nn.Linear(output_rank, vocab_size))
        else:
            self.W_o = nn.Linear(maxout_units, vocab_size)

    def init_rules(self, scheme: Scheme) -> dict[str, Rule]:
        """The linear maps of s_0 and the readout (embeddings, GRU and attention declare their own)."""
        low_rank = isinstance(self.W_o, nn.Sequential)
        output = {f"W_o.{i}": factor for i, factor in self.W_o.named_children()} if low_rank else {"W_o": self.W_o}
        return linear_rules({"W_s": self.W_s, "U_o": self.U_o, "V_o": self.V_o, "C_o": self.C_o, **output}, scheme)

    @property
    def attends(self) -> bool:
        """Whether `predict`'s weights are an alignment over source positions (RNNencdec's are not)."""
        return not self.attention.static

    def init_state(self, enc: Encoded) -> Tensor:
        """s_0 = tanh(W_s x + b), x by `init` (DECODER_INITS); `features` hands it the annotations after dropout, as
        nmtpy takes their mean (attention.py l. 414–420)."""
        return torch.tanh(self.W_s(mean_annotation(enc) if self.init_from == "mean" else enc.summary))

    @property
    def output_layer(self) -> nn.Linear:
        """The last linear map to the vocabulary (the second factor of a low-rank W_o)."""
        return self.W_o[-1] if isinstance(self.W_o, nn.Sequential) else self.W_o

    def hidden(self, s: Tensor, word: Tensor, c: Tensor) -> Tensor:
        """t = maxout(U_o s + V_o E y_prev + C_o c) over adjacent pairs (§1.5), through W_o's first factor if
        low-rank; `word` is the previous word's term V_o E y_prev (0 before the first word)."""
        t = self.U_o(s) + word + self.C_o(c)
        t = self.drop(torch.maximum(t[..., 0::2], t[..., 1::2]))  # a reduction over pairs (amax) takes twice as long
        return self.W_o[0](t) if isinstance(self.W_o, nn.Sequential) else t

    def readout(self, s: Tensor, word: Tensor, c: Tensor) -> Tensor:
        """Logits W_o t."""
        return self.output_layer(self.hidden(s, word, c))

    def features(self, enc: Encoded, tgt: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher-forced pass over tgt [B, T] (ending in EOS): the output layer's inputs [B, T, F] and α [B, T, S]."""
        enc = Encoded(self.context_drop(enc.annotations), enc.mask, enc.summary)
        keys = self.attention.prepare(enc)
        y_emb = self.embed(tgt)
        queries, contexts, alphas = self.loops.bahdanau_decoder(self, self.init_state(enc), self.gru.project_inputs(y_emb), keys, enc)
        return self.hidden(queries, self.V_o(previous_words(y_emb)), contexts), alphas

    def forward(self, enc: Encoded, tgt: Tensor) -> tuple[Tensor, Tensor]:
        """Logits [B, T, V] and α [B, T, S] of the teacher-forced pass."""
        hidden, alphas = self.features(enc, tgt)
        return self.output_layer(hidden), alphas

    def steps(self, s: Tensor, x_proj: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor, Tensor]:
        """The teacher-forced loop as written, from s_0 over projected inputs W E y [B, T, 3H]: the attention, then the
        GRU's `step`, at each word; returns the queries s_{t−1}, the contexts c_t and the weights α_t."""
        gru = self.gru
        # RNNencdec's context is the same at every step, so its projection C·c is hoisted out of the loop.
        fixed_c_proj = gru.project_context(keys) if self.attention.static else None
        states, contexts, alphas = [], [], []
        for t in range(x_proj.shape[1]):
            c, alpha = self.attention(s, keys, enc)
            states.append(s)
            contexts.append(c)
            alphas.append(alpha)
            c_proj = fixed_c_proj if fixed_c_proj is not None else gru.project_context(c)
            s = gru.step(x_proj[:, t] + c_proj, s)
        return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(alphas, 1)

    def begin(self, enc: Encoded) -> tuple[Context, State]:
        """The search context and the state before the first word (s_0, no previous word).

        The context also holds what every target word contributes wherever it is read, computed once for the
        vocabulary: W E y for the GRU and V_o E y for the readout, so a step looks rows up instead of
        multiplying (the same products: a BLAS rounds a row alike in any matrix of two or more rows).
        """
        s = self.init_state(enc)
        e = self.embed(torch.arange(self.embed.weight.shape[0], device=s.device))
        ctx = {"enc": enc, "keys": self.attention.prepare(enc), "words": WordTerms(self.gru.project_inputs(e), self.V_o(e))}
        return ctx, {"s": s, "word": s.new_zeros(s.shape[0], self.V_o.weight.shape[0])}

    def predict(self, ctx: Context, state: State, step: int) -> tuple[Tensor, Tensor, State]:
        """Logits [N, V] and α [N, S] for the next word; the state keeps the context for `advance`."""
        c, alpha = self.attention(state["s"], ctx["keys"], ctx["enc"])
        return self.readout(state["s"], state["word"], c), alpha, {**state, "c": c}

    def advance(self, ctx: Context, state: State, words: Tensor) -> State:
        """Consume the chosen words [N] with the same context c (§1.6)."""
        terms = ctx["words"]
        s = self.gru.step(self.gru.project_context(state["c"], base=terms.gru.index_select(0, words)), state["s"])
        return {"s": s, "word": terms.readout.index_select(0, words)}


class ConditionalGRUDecoder(nn.Module):
    """nmtpy's decoder (dl4mt's conditional GRU), the published Multi30k system's: not a paper's model, a comparison.

    lium-lst/nmtpy dc0a161, `layers.py` l. 334–495 (`gru_cond_layer`) and `models/attention.py` l. 349–367, 417–460:
    a first GRU consumes the previous word's embedding, h′_t = GRU₁(E y_{t−1}, s_{t−1}); its state queries the
    additive attention, c_t = Σ_j α_tj h_j; a second GRU reads the context, s_t = GRU₂(c_t, h′_t); the readout is
    tanh(U_o s_t + V_o E y_{t−1} + C_o c_t), of the embedding's width, then dropout and the map to the vocabulary.
    s_0 = tanh(W_s mean_j h_j) (`init_cgru: text`), E y_0 = 0. Both GRUs are torch's cells, which reset after the
    recurrent product as nmtpy's `gru_step` does (l. 118–138; the update gate's sense is the mirror of nmtpy's, the
    same family of functions); nmtpy's attention has a bias inside its tanh that `AdditiveAttention` has not.
    `dropout` on the readout (nmtpy's `out_dropout`), `context_dropout` on the annotations (`ctx_dropout`), before
    their mean initialises s_0 as in nmtpy. Its loop runs as written here (no fast form).
    """

    attends = True

    def __init__(self, vocab_size: int, emb_dim: int, hidden: int, context_size: int, align_hidden: int, dropout: float, context_dropout: float) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb_dim)
        self.drop = nn.Dropout(dropout)
        self.context_drop = nn.Dropout(context_dropout)
        self.W_s = nn.Linear(context_size, hidden)
        self.gru1 = nn.GRUCell(emb_dim, hidden)
        self.attention = AdditiveAttention(hidden, context_size, align_hidden)
        self.gru2 = nn.GRUCell(context_size, hidden)
        self.U_o = nn.Linear(hidden, emb_dim)
        self.V_o = nn.Linear(emb_dim, emb_dim)
        self.C_o = nn.Linear(context_size, emb_dim)
        self.W_o = nn.Linear(emb_dim, vocab_size)

    def init_rules(self, scheme: Scheme) -> dict[str, Rule]:
        """The embeddings, both GRUs (recurrent matrices as the scheme's) and the linear maps; the attention its own."""
        cells = {}
        for name in ("gru1", "gru2"):
            cells |= {f"{name}.weight_ih": scheme.weight, f"{name}.weight_hh": scheme.recurrent}
            cells |= {f"{name}.bias_ih": scheme.bias, f"{name}.bias_hh": scheme.bias}
        linear = linear_rules({"W_s": self.W_s, "U_o": self.U_o, "V_o": self.V_o, "C_o": self.C_o, "W_o": self.W_o}, scheme)
        return {"embed.weight": scheme.embedding, **cells, **linear}

    @property
    def output_layer(self) -> nn.Linear:
        return self.W_o

    def init_state(self, enc: Encoded) -> Tensor:
        """s_0 = tanh(W_s mean_j h_j), the mean over real source positions."""
        return torch.tanh(self.W_s(mean_annotation(enc)))

    def hidden(self, s: Tensor, e_prev: Tensor, c: Tensor) -> Tensor:
        """The readout tanh(U_o s + V_o E y_prev + C_o c), dropout applied, which W_o maps to the vocabulary."""
        return self.drop(torch.tanh(self.U_o(s) + self.V_o(e_prev) + self.C_o(c)))

    def step(self, e_prev: Tensor, s: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor, Tensor]:
        """One conditional GRU step from s_{t−1} and E y_{t−1} [N, ·]: s_t, c_t and α_t."""
        h1 = self.gru1(e_prev, s)
        c, alpha = self.attention(h1, keys, enc)
        return self.gru2(c, h1), c, alpha

    def features(self, enc: Encoded, tgt: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher-forced pass over tgt [B, T] (ending in EOS): the output layer's inputs [B, T, E] and α [B, T, S]."""
        enc = Encoded(self.context_drop(enc.annotations), enc.mask, enc.summary)
        keys = self.attention.prepare(enc)
        y_emb = self.embed(tgt)
        e_prev = previous_words(y_emb)
        s = self.init_state(enc)
        states, contexts, alphas = [], [], []
        for t in range(tgt.shape[1]):
            s, c, alpha = self.step(e_prev[:, t], s, keys, enc)
            states.append(s)
            contexts.append(c)
            alphas.append(alpha)
        return self.hidden(torch.stack(states, 1), e_prev, torch.stack(contexts, 1)), torch.stack(alphas, 1)

    def forward(self, enc: Encoded, tgt: Tensor) -> tuple[Tensor, Tensor]:
        """Logits [B, T, V] and α [B, T, S] of the teacher-forced pass."""
        hidden, alphas = self.features(enc, tgt)
        return self.W_o(hidden), alphas

    def begin(self, enc: Encoded) -> tuple[Context, State]:
        """The search context and the state before the first word (s_0, E y_0 = 0)."""
        s = self.init_state(enc)
        return {"enc": enc, "keys": self.attention.prepare(enc)}, {"s": s, "e": s.new_zeros(s.shape[0], self.embed.weight.shape[1])}

    def predict(self, ctx: Context, state: State, step: int) -> tuple[Tensor, Tensor, State]:
        """Logits [N, V] and α [N, S] for the next word; the state keeps s_t for `advance`."""
        s, c, alpha = self.step(state["e"], state["s"], ctx["keys"], ctx["enc"])
        return self.W_o(self.hidden(s, state["e"], c)), alpha, {**state, "next": s}

    def advance(self, ctx: Context, state: State, words: Tensor) -> State:
        return {"s": state["next"], "e": self.embed(words)}


@dataclass(frozen=True)
class FeedWeights:
    """What a fast form of LuongDecoder's input-feeding loop reads of the decoder (`LuongDecoder.loop_weights`): layer
    1's input projection of the input words' embeddings x1 [B, T, 4H] (their dropout applied, its biases added); per
    layer W_ih (layer 1's: the columns that read the fed h̃), W_hh and b_ih + b_hh (None for layer 1, whose bias is in
    x1, and without biases); W_c's context and state halves and its bias; the carried cell's clip; the dropout on the
    fed h̃ and between the layers while training (0 otherwise); and what the attention hands over."""

    x1: Tensor
    W_ih: list[Tensor]
    W_hh: list[Tensor]
    bias: list[Tensor | None]
    Wc_c: Tensor
    Wc_h: Tensor
    b_c: Tensor | None
    clip: float | None
    feed_dropout: float
    layer_dropout: float
    attention: LoopAttention


class LuongDecoder(nn.Module):
    """Stacked LSTM decoder with global/local attention, attentional states and optional input feeding.

    With input feeding (or clipping) the teacher-forced loop runs by the model's loops (models/loops.py): `steps`,
    autograd through `lstm.step` and the attention at each word, or a fast form of it.
    """

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden: int,
        layers: int,
        attention: LuongAttention | None,
        feed_input: bool,
        dropout: float,
        bias: bool,
        state_clip: float | None,
        loops: Loops = PLAIN,
    ) -> None:
        super().__init__()
        self.loops = loops
        self.embed = nn.Embedding(vocab_size, emb_dim)
        self.drop = nn.Dropout(dropout)
        self.feed_input = feed_input
        self.hidden = hidden
        self.lstm = lstm.make_lstm(emb_dim + (hidden if feed_input else 0), hidden, layers, dropout, bias)
        self.attention = attention
        self.state_clip = state_clip
        # h̃_t = tanh(W_c [c_t; h_t]), context first (§4.1); without attention h̃_t = h_t.
        self.W_c = nn.Linear(2 * hidden, hidden, bias=bias) if attention is not None else None
        self.W_s = nn.Linear(hidden, vocab_size, bias=bias)

    def init_rules(self, scheme: Scheme) -> dict[str, Rule]:
        """The embeddings, the LSTM and the output maps (the attention declares its own)."""
        outputs = {"W_s": self.W_s} if self.W_c is None else {"W_c": self.W_c, "W_s": self.W_s}
        lstm_rules = prefixed("lstm", lstm.init_rules(self.lstm, scheme))
        return {"embed.weight": scheme.embedding, **lstm_rules, **linear_rules(outputs, scheme)}

    @property
    def attends(self) -> bool:
        """Whether `predict`'s weights are an alignment over source positions (zeros without attention)."""
        return self.attention is not None

    def attend(self, h: Tensor, ctx: Context, steps: Tensor) -> tuple[Tensor, Tensor]:
        """Attentional states h̃ [B, T, H] and weights [B, T, S] for top states h [B, T, H]."""
        enc = ctx["enc"]
        if self.attention is None:
            return h, h.new_zeros(h.shape[0], h.shape[1], enc.mask.shape[1])
        c, alpha = self.attention(h, ctx["keys"], enc, steps)
        return attentional_state(self.W_c(torch.cat([c, h], dim=-1))), alpha

    def _inputs(self, words: Tensor, h_tilde: Tensor | None) -> Tensor:
        """Layer 1's input: E y, joined by h̃_{t−1} with input feeding; dropout applies to all of it."""
        e = self.embed(words)
        return self.drop(torch.cat([e, h_tilde], dim=-1) if self.feed_input else e)

    def _context(self, enc: Encoded) -> Context:
        return {"enc": enc, "keys": self.attention.prepare(enc) if self.attention is not None else None}

    @property
    def output_layer(self) -> nn.Linear:
        return self.W_s

    def forward(self, enc: Encoded, tgt: Tensor) -> tuple[Tensor, Tensor]:
        """Logits [B, T, V] and weights [B, T, S] of the teacher-forced pass."""
        h_tilde, alphas = self.features(enc, tgt)
        return self.W_s(h_tilde), alphas

    def features(self, enc: Encoded, tgt: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher-forced pass over tgt [B, T] (ending in EOS): the attentional states h̃ [B, T, H] and weights [B, T, S]."""
        ctx = self._context(enc)
        words = torch.cat([torch.full_like(tgt[:, :1], Vocab.BOS), tgt[:, :-1]], dim=1)
        steps = torch.arange(tgt.shape[1], device=tgt.device)
        state = lstm.unpack_state(enc.summary)
        if not self.feed_input and self.state_clip is None:
            h, _ = lstm.call(self.lstm, self._inputs(words, None), state)
            return self.attend(h, ctx, steps)
        return self.loops.luong_decoder(self, ctx, words, steps, state)

    def steps(self, ctx: Context, words: Tensor, positions: Tensor, state: lstm.State) -> tuple[Tensor, Tensor]:
        """The teacher-forced loop as written, over the input words [B, T] at target steps `positions`: `lstm.step`,
        then the attention, at each word; returns h̃ [B, T, H] and the weights [B, T, S]."""
        h_tilde = ctx["enc"].annotations.new_zeros(words.shape[0], self.hidden)
        outputs, alphas = [], []
        for t in range(words.shape[1]):
            h, state = lstm.step(self.lstm, self._inputs(words[:, t], h_tilde), state, self.state_clip)
            h_tilde, alpha = self.attend(h.unsqueeze(1), ctx, positions[t : t + 1])
            h_tilde = h_tilde.squeeze(1)
            outputs.append(h_tilde)
            alphas.append(alpha)
        return torch.stack(outputs, 1), torch.cat(alphas, 1)

    def loop_weights(self, words: Tensor) -> FeedWeights | None:
        """What a fast form of the input-feeding loop over the input words [B, T] reads of this decoder (recurrence/);
        None without input feeding or attention, where `steps` is the loop."""
        if not self.feed_input or self.attention is None:
            return None
        weights, bias = lstm.layer_weights(self.lstm), lstm.summed_biases(self.lstm)
        emb, H = self.embed.weight.shape[1], self.hidden
        # Dropout on [E y; h̃] is dropout on each part: the embeddings' here, h̃'s in the loop.
        x1 = nn.functional.linear(self.drop(self.embed(words)), weights[0][0][:, :emb], bias[0])
        return FeedWeights(
            x1,
            W_ih=[W_ih[:, emb:] if k == 0 else W_ih for k, (W_ih, _) in enumerate(weights)],
            W_hh=[W_hh for _, W_hh in weights],
            bias=[None, *bias[1:]],
            Wc_c=self.W_c.weight[:, :H],
            Wc_h=self.W_c.weight[:, H:],
            b_c=self.W_c.bias,
            clip=self.state_clip,
            feed_dropout=self.drop.p if self.training else 0.0,
            layer_dropout=self.lstm.dropout if self.training else 0.0,
            attention=self.attention.loop_weights(),
        )

    def _step(self, lstm_state: Tensor, words: Tensor, h_tilde: Tensor) -> State:
        """Consume words [N] (with h̃_{t−1}) from a batch-first state [N, 2, layers, H]."""
        h, new = lstm.step(self.lstm, self._inputs(words, h_tilde), lstm.unpack_state(lstm_state), self.state_clip)
        return {"lstm": lstm.pack_state(new), "top": h}

    def begin(self, enc: Encoded) -> tuple[Context, State]:
        """The search context and the state after consuming `<s>` (h̃_0 = 0)."""
        ctx = self._context(enc)
        batch = enc.summary.shape[0]
        bos = torch.full((batch,), Vocab.BOS, dtype=torch.long, device=enc.summary.device)
        return ctx, self._step(enc.summary, bos, enc.summary.new_zeros(batch, self.hidden))

    def predict(self, ctx: Context, state: State, step: int) -> tuple[Tensor, Tensor, State]:
        """Logits [N, V] and weights [N, S] of target position `step`; the state keeps h̃_t for feeding.

        The N = B·k hypotheses, k per sentence of the context, query it as k positions of one sentence."""
        top = state["top"]
        per_sentence = top.shape[0] // ctx["enc"].mask.shape[0]
        steps = torch.full((per_sentence,), step, device=top.device)
        h_tilde, alpha = self.attend(top.view(-1, per_sentence, top.shape[-1]), ctx, steps)
        h_tilde = h_tilde.flatten(0, 1)
        return self.W_s(h_tilde), alpha.flatten(0, 1), {**state, "h_tilde": h_tilde}

    def advance(self, ctx: Context, state: State, words: Tensor) -> State:
        return self._step(state["lstm"], words, state["h_tilde"])
