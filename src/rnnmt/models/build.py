"""Build a model from a system's `model` config and initialise it (paper-spec §1.7, §4.5).

`decoder: gru` is Bahdanau's family (bigru/gru encoder, additive or no attention); `decoder: lstm` is
Luong's (stacked LSTM encoder, global/local attention or none); `decoder: cgru` is nmtpy's conditional GRU on
RNNsearch's encoder, the published Multi30k system's decoder (a comparison, not a paper's model). Besides the network, the model config
says how a source sentence is laid out: with EOS (GroundHog) or without (Luong), reversed or not.
The allowed encoders and attentions are the keys of the registries of encoders.py and attention.py, and
the modules declare their own initialisation (initialisation.py). How the model runs its teacher-forced loops
(`train.recurrence`) is the `loops` object it is built with (loops.py), one for all its parts or one per part (the
encoder's and the decoder's), fixed for its life.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from rnnmt.errors import UserError
from rnnmt.models.attention import ATTENTIONS, LUONG_KINDS, LuongAttention
from rnnmt.models.decoders import DECODER_INITS, BahdanauDecoder, ConditionalGRUDecoder, Context, LuongDecoder, State
from rnnmt.models.encoders import ENCODER_NORMS, ENCODERS, BiGRUEncoder, Encoded, LSTMEncoder
from rnnmt.models.initialisation import SCHEMES, initialise
from rnnmt.models.loops import PLAIN, Loops

# Dropout beyond where the authors' code applies it (`dropout`): the Bahdanau family's switches (docs/faithfulness.md).
BAHDANAU_DROPOUT = ("embedding_dropout", "context_dropout")
# Every dropout probability of a model config: train/selfcheck.py turns them all off.
DROPOUT = ("dropout", *BAHDANAU_DROPOUT)

# The conventions of GroundHog systems, whose configs (and model files) predate these keys.
DEFAULTS = {
    "decoder": "gru",
    "source_eos": True,
    "reverse_source": False,
    "dropout": 0.0,
    **dict.fromkeys(BAHDANAU_DROPOUT, 0.0),
    "encoder_norm": "none",
    "decoder_init": "summary",
}
# Where a decoder's own convention is not GroundHog's: nmtpy's conditional GRU starts from the mean annotation.
DECODER_DEFAULTS = {"cgru": {"decoder_init": "mean"}}


def model_settings(cfg: dict[str, Any]) -> dict[str, Any]:
    """A model config with the GroundHog conventions (or its decoder's) filled in where it does not say otherwise."""
    return {**DEFAULTS, **DECODER_DEFAULTS.get(cfg.get("decoder", DEFAULTS["decoder"]), {}), **cfg}


class Seq2Seq(nn.Module):
    """An encoder and a decoder; `forward` is the teacher-forced pass used for training.

    `begin`, `predict` and `advance` are the step interface of beam search (see decoders.py); `predict`
    returns log-probabilities, `predict_logits` what the softmax reads (an ensemble averages either).
    """

    def __init__(self, encoder: nn.Module, decoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    @property
    def attends(self) -> bool:
        """Whether the weights `predict` returns align target steps with source positions."""
        return self.decoder.attends

    def encode(self, src: Tensor, src_mask: Tensor) -> Encoded:
        return self.encoder(src, src_mask)

    def forward(self, src: Tensor, src_mask: Tensor, tgt: Tensor) -> tuple[Tensor, Tensor]:
        return self.decoder(self.encode(src, src_mask), tgt)

    def features(self, src: Tensor, src_mask: Tensor, tgt: Tensor) -> tuple[Tensor, Tensor]:
        """The teacher-forced output layer inputs and weights (training: train/nll.py applies the output layer)."""
        return self.decoder.features(self.encode(src, src_mask), tgt)

    def begin(self, src: Tensor, src_mask: Tensor) -> tuple[Context, State]:
        return self.decoder.begin(self.encode(src, src_mask))

    def predict_logits(self, ctx: Context, state: State, step: int) -> tuple[Tensor, Tensor, State]:
        """The softmax inputs of the next word (an ensemble may average these), weights and next state."""
        return self.decoder.predict(ctx, state, step)

    def predict(self, ctx: Context, state: State, step: int) -> tuple[Tensor, Tensor, State]:
        logits, alpha, state = self.predict_logits(ctx, state, step)
        return torch.log_softmax(logits.float(), dim=-1), alpha, state

    def advance(self, ctx: Context, state: State, words: Tensor) -> State:
        return self.decoder.advance(ctx, state, words)


def _choice(cfg: dict[str, Any], key: str, allowed: Iterable[str], family: str) -> str:
    """cfg[key], or a UserError naming it and what a decoder of `family` takes."""
    allowed = tuple(allowed)
    if cfg[key] not in allowed:
        raise UserError(f"model.{key} is {cfg[key]!r}, but a '{family}' decoder takes {', '.join(allowed)}.")
    return cfg[key]


def without_dropout(cfg: dict[str, Any]) -> dict[str, Any]:
    """A model config with every dropout off (the fast forms' checks: two paths draw their masks differently)."""
    return {**cfg, **dict.fromkeys(DROPOUT, 0.0)}


def build_model(cfg: dict[str, Any], src_vocab: int, tgt_vocab: int, loops: Loops | Mapping[str, Loops] = PLAIN) -> Seq2Seq:
    """Create the network described by a system's `model` section, initialised per `cfg['init']`, whose
    teacher-forced loops run by `loops` (default: as the modules write them), or by part ("encoder", "decoder")."""
    cfg = model_settings(cfg)
    if cfg["decoder"] not in BUILDERS:
        raise UserError(f"model.decoder is {cfg['decoder']!r}; expected one of {', '.join(BUILDERS)}.")
    parts = loops if isinstance(loops, Mapping) else {"encoder": loops, "decoder": loops}
    model = BUILDERS[cfg["decoder"]](cfg, src_vocab, tgt_vocab, parts)
    if cfg["init"] not in SCHEMES:
        raise UserError(f"model.init is {cfg['init']!r}; expected one of {', '.join(SCHEMES)}.")
    initialise(model, SCHEMES[cfg["init"]](cfg))
    return model


def _build_bahdanau(cfg: dict[str, Any], src_vocab: int, tgt_vocab: int, loops: Mapping[str, Loops]) -> Seq2Seq:
    encoder_class = ENCODERS[_choice(cfg, "encoder", ENCODERS, "gru")]
    norm = _choice(cfg, "encoder_norm", ENCODER_NORMS, "gru")
    encoder = encoder_class(src_vocab, cfg["emb"], cfg["hidden"], loops["encoder"], dropout=cfg["embedding_dropout"], norm=norm)
    decoder = BahdanauDecoder(
        tgt_vocab,
        cfg["emb"],
        cfg["hidden"],
        context_size=encoder.output_size,
        summary_size=encoder.summary_size,
        attention=_choice(cfg, "attention", ATTENTIONS, "gru"),
        align_hidden=cfg["align_hidden"],
        maxout_units=cfg["maxout"],
        output_rank=cfg.get("output_rank"),
        loops=loops["decoder"],
        dropout=cfg["dropout"],
        context_dropout=cfg["context_dropout"],
        init=_choice(cfg, "decoder_init", DECODER_INITS, "gru"),
    )
    return Seq2Seq(encoder, decoder)


def _build_conditional(cfg: dict[str, Any], src_vocab: int, tgt_vocab: int, loops: Mapping[str, Loops]) -> Seq2Seq:
    """nmtpy's conditional GRU decoder on RNNsearch's encoder (decoders.ConditionalGRUDecoder)."""
    _choice(cfg, "encoder", ("bigru",), "cgru")
    _choice(cfg, "attention", ("additive",), "cgru")
    norm = _choice(cfg, "encoder_norm", ENCODER_NORMS, "cgru")
    _choice(cfg, "decoder_init", ("mean",), "cgru")
    encoder = BiGRUEncoder(src_vocab, cfg["emb"], cfg["hidden"], loops["encoder"], dropout=cfg["embedding_dropout"], norm=norm)
    decoder = ConditionalGRUDecoder(tgt_vocab, cfg["emb"], cfg["hidden"], encoder.output_size, cfg["align_hidden"], cfg["dropout"], cfg["context_dropout"])
    return Seq2Seq(encoder, decoder)


def _build_luong(cfg: dict[str, Any], src_vocab: int, tgt_vocab: int, loops: Mapping[str, Loops]) -> Seq2Seq:
    _choice(cfg, "encoder", ("lstm",), "lstm")
    for key in BAHDANAU_DROPOUT:
        if cfg[key]:
            raise UserError(f"model.{key} is {cfg[key]}, but a 'lstm' decoder has no such dropout; its `dropout` is nmt.matlab's, on every LSTM layer's input.")
    _choice(cfg, "encoder_norm", ("none",), "lstm")
    _choice(cfg, "decoder_init", ("summary",), "lstm")
    kind = _choice(cfg, "attention", ("none", *LUONG_KINDS), "lstm")
    sizes = (cfg["emb"], cfg["hidden"], cfg["layers"])
    common = {"dropout": cfg["dropout"], "bias": cfg["bias"], "state_clip": cfg["state_clip"]}
    encoder = LSTMEncoder(src_vocab, *sizes, **common, loops=loops["encoder"])
    attention = None
    if kind != "none":
        attention = LuongAttention(cfg["hidden"], kind, cfg["score"], cfg["window"], cfg["max_positions"], cfg["reverse_source"])
    return Seq2Seq(encoder, LuongDecoder(tgt_vocab, *sizes, attention, feed_input=cfg["feed_input"], **common, loops=loops["decoder"]))


BUILDERS = {"gru": _build_bahdanau, "cgru": _build_conditional, "lstm": _build_luong}


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
