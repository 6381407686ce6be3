"""Beam search semantics: GroundHog's shrinking beam (paper-spec §1.11) and Luong's constant one (§4.7)."""

from __future__ import annotations

import pytest
import torch

from rnnmt.decode.beam import _search, beam_search
from rnnmt.decode.settings import DecodeSettings
from rnnmt.models.build import build_model
from rnnmt.models.source import SourceFormat, pad
from rnnmt.text.vocab import Vocab

from conftest import tiny_luong_config, tiny_model_config

SOURCES = [torch.tensor([5, 6, 7]), torch.tensor([8, 9, 10, 11, 12, 13]), torch.tensor([14])]
GROUNDHOG = DecodeSettings(beam=1)
LUONG = DecodeSettings(beam=1, shrink=False, max_ratio=1.5, stack=100)


def model_and_format(kind: str):
    torch.manual_seed(0)
    cfg = tiny_model_config() if kind == "groundhog" else tiny_luong_config()
    return build_model(cfg, 20, 20).eval(), SourceFormat.of(cfg)


@pytest.fixture(params=["groundhog", "luong"])
def family(request):
    model, fmt = model_and_format(request.param)
    return model, fmt, GROUNDHOG if request.param == "groundhog" else LUONG


def output_bias(model) -> torch.Tensor:
    """The bias of the output layer (GroundHog's W_o, or W_s for a Luong model given one)."""
    dec = model.decoder
    return dec.W_o.bias if hasattr(dec, "W_o") else dec.W_s.bias


def greedy(model, fmt: SourceFormat, settings: DecodeSettings, src: torch.Tensor, forbid_unk: bool = False) -> list[int]:
    """Reference greedy decoder for one sentence through the step interface, with the beam's length rules."""
    src, mask = fmt.batch([src])
    ctx, state = model.begin(src, mask)
    n = int(fmt.words(mask)) + 1  # |x|: words and EOS
    min_len = max(int(settings.min_ratio * n), 0 if settings.shrink else 1)
    out = []
    for step in range(int(settings.max_ratio * n)):
        logp, _, state = model.predict(ctx, state, step)
        logp[0, [Vocab.PAD, Vocab.BOS] + ([Vocab.UNK] if forbid_unk else [])] = float("-inf")
        if step < min_len:
            logp[0, Vocab.EOS] = float("-inf")
        y = int(logp.argmax())
        if y == Vocab.EOS:
            break
        out.append(y)
        state = model.advance(ctx, state, torch.tensor([y]))
    return out


def test_beam_width_one_equals_greedy(family):
    model, fmt, settings = family
    src, mask = fmt.batch(SOURCES)
    hyps = beam_search(model, src, mask, settings, src_words=fmt.words(mask))
    assert [h.tokens for h in hyps] == [greedy(model, fmt, settings, s) for s in SOURCES]


@pytest.mark.parametrize("kind", ["groundhog", "luong"])
def test_batched_beam_equals_one_sentence_at_a_time(kind):
    model, fmt = model_and_format(kind)
    settings = DecodeSettings(beam=4, shrink=kind == "groundhog", max_ratio=3.0 if kind == "groundhog" else 1.5)
    src, mask = fmt.batch(SOURCES)
    batched = beam_search(model, src, mask, settings, src_words=fmt.words(mask))
    for s, hyp in zip(SOURCES, batched):
        one, one_mask = fmt.batch([s])
        alone = beam_search(model, one, one_mask, settings, src_words=fmt.words(one_mask))[0]
        assert alone.tokens == hyp.tokens and alone.align == hyp.align
        assert abs(alone.logprob - hyp.logprob) < 1e-4


@pytest.mark.parametrize("kind", ["groundhog", "luong"])
def test_hypothesis_score_is_the_model_probability_of_its_words(kind):
    """The beam's summed log-probability equals teacher-forced scoring of the same words plus EOS."""
    model, fmt = model_and_format(kind)
    if kind == "luong":
        model = build_model(tiny_luong_config(bias=True), 20, 20).eval()
    with torch.no_grad():
        output_bias(model)[Vocab.EOS] = 3.0  # so that every sentence finishes
    src, mask = fmt.batch(SOURCES)
    settings = DecodeSettings(beam=4, shrink=kind == "groundhog")
    for row, hyp in enumerate(beam_search(model, src, mask, settings, src_words=fmt.words(mask))):
        assert hyp.finished and len(hyp.align) == len(hyp.tokens) + 1
        tgt, _ = pad([torch.tensor(hyp.tokens, dtype=torch.long)])
        with torch.no_grad():
            logits, alpha = model(src[row : row + 1], mask[row : row + 1], tgt)
        logp = torch.log_softmax(logits[0], dim=-1).gather(1, tgt[0].unsqueeze(1)).sum()
        assert abs(float(logp) - hyp.logprob) < 1e-4
        assert hyp.align == alpha[0].argmax(dim=-1).tolist()


def test_groundhog_length_limits():
    model, fmt = model_and_format("groundhog")
    src, mask = fmt.batch(SOURCES)
    for s, hyp in zip(SOURCES, beam_search(model, src, mask, DecodeSettings(beam=3), src_words=fmt.words(mask))):
        n = len(s) + 1  # with EOS
        assert n // 2 <= len(hyp.tokens) <= 3 * n


def test_luong_length_limits_and_constant_width():
    """Luong's beam: at least ⌊0.5·|x|⌋ words, at most ⌊1.5·|x|⌋ steps (|x| = n + 1); EOS never shrinks the beam."""
    torch.manual_seed(0)
    model, fmt = build_model(tiny_luong_config(bias=True), 20, 20).eval(), SourceFormat.of(tiny_luong_config())
    with torch.no_grad():
        model.decoder.W_s.bias[Vocab.EOS] = 4.0  # EOS is likely at every step once allowed
    src, mask = fmt.batch(SOURCES)
    settings = DecodeSettings(beam=3, shrink=False, max_ratio=1.5, stack=5)
    for s, hyp in zip(SOURCES, beam_search(model, src, mask, settings, src_words=fmt.words(mask))):
        assert (len(s) + 1) // 2 <= len(hyp.tokens) <= int(1.5 * (len(s) + 1))
    # With EOS always best, a shrinking beam stops after `width` finished hypotheses, all of the
    # shortest length; the constant beam goes on collecting longer ones up to the stack size.
    with torch.no_grad():
        finished_const, _ = _search(model, src, mask, fmt.words(mask), settings, False)
        finished_shrink, _ = _search(model, src, mask, fmt.words(mask), DecodeSettings(beam=3, shrink=True, max_ratio=1.5), False)
    for s, const, shrink in zip(SOURCES, finished_const, finished_shrink):
        assert len(shrink) <= 3
        if int(1.5 * (len(s) + 1)) > (len(s) + 1) // 2 + 1:
            assert len(const) > len(shrink) and len(const) <= 5
            assert len({len(h.tokens) for h in const}) > 1


def test_no_unk_decoding_never_emits_unk(tiny_model):
    with torch.no_grad():
        tiny_model.decoder.W_o.bias[Vocab.UNK] = 50.0  # UNK would win every step
        tiny_model.decoder.W_o.bias[Vocab.EOS] = 20.0  # and EOS next, once allowed
    src, mask = SourceFormat().batch(SOURCES)
    settings, words = DecodeSettings(beam=3), SourceFormat().words(mask)
    assert all(Vocab.UNK in h.tokens for h in beam_search(tiny_model, src, mask, settings, src_words=words))
    assert all(Vocab.UNK not in h.tokens for h in beam_search(tiny_model, src, mask, settings, src_words=words, forbid_unk=True))


# nmt.matlab's bounds for n = 1..12 source words, worked out from lstmDecoder.m with srcLen = n + 1:
# at least max(1, floor(0.5·(n+1))) words (EOS is never the first word), floor(1.5·(n+1)) at most.
LUONG_BOUNDS = {1: (1, 3), 2: (1, 4), 3: (2, 6), 4: (2, 7), 5: (3, 9), 6: (3, 10), 7: (4, 12), 8: (4, 13), 9: (5, 15), 10: (5, 16), 11: (6, 18), 12: (6, 19)}


@pytest.mark.parametrize("eos_bias, bound", [(50.0, 0), (-1e4, 1)])
def test_luong_output_lengths_follow_nmt_matlab(eos_bias, bound):
    """EOS always best: the shortest translation allowed; EOS never: the longest. Never empty."""
    torch.manual_seed(0)
    model, fmt = build_model(tiny_luong_config(bias=True), 20, 20).eval(), SourceFormat.of(tiny_luong_config())
    with torch.no_grad():
        model.decoder.W_s.bias[Vocab.EOS] = eos_bias
    sources = [torch.arange(n) % 16 + 4 for n in LUONG_BOUNDS]
    src, mask = fmt.batch(sources)
    settings = DecodeSettings(beam=2, shrink=False, min_ratio=0.5, max_ratio=1.5, stack=100)
    hyps = beam_search(model, src, mask, settings, src_words=fmt.words(mask))
    assert {n: len(h.tokens) for n, h in zip(LUONG_BOUNDS, hyps)} == {n: b[bound] for n, b in LUONG_BOUNDS.items()}
