"""Beam search semantics (paper-spec §1.11)."""

from __future__ import annotations

import torch

from rnnmt.decode.beam import beam_search
from rnnmt.text.vocab import Vocab
from rnnmt.train.batching import pad_with_eos

SOURCES = [torch.tensor([5, 6, 7]), torch.tensor([8, 9, 10, 11, 12, 13]), torch.tensor([14])]


def greedy(model, src: torch.Tensor, forbid_unk: bool = False) -> list[int]:
    """Reference greedy decoder for one sentence, with the same length rules as the beam."""
    src, mask = pad_with_eos([src])
    enc = model.encode(src, mask)
    dec = model.decoder
    keys, s = dec.attention.prepare(enc), dec.init_state(enc)
    e = torch.zeros(1, dec.embed.weight.shape[1])
    n = int(mask.sum())
    out = []
    for step in range(3 * n):
        logits, c, _ = dec.predict(s, e, keys, enc)
        logits[0, [Vocab.PAD, Vocab.BOS] + ([Vocab.UNK] if forbid_unk else [])] = float("-inf")
        if step < n // 2:
            logits[0, Vocab.EOS] = float("-inf")
        y = int(logits.argmax())
        if y == Vocab.EOS:
            break
        out.append(y)
        s, e = dec.advance(s, torch.tensor([y]), c)
    return out


def test_beam_width_one_equals_greedy(tiny_model):
    src, mask = pad_with_eos(SOURCES)
    hyps = beam_search(tiny_model, src, mask, beam=1)
    assert [h.tokens for h in hyps] == [greedy(tiny_model, s) for s in SOURCES]


def test_batched_beam_equals_one_sentence_at_a_time(tiny_model):
    src, mask = pad_with_eos(SOURCES)
    batched = beam_search(tiny_model, src, mask, beam=4)
    for s, hyp in zip(SOURCES, batched):
        one, one_mask = pad_with_eos([s])
        alone = beam_search(tiny_model, one, one_mask, beam=4)[0]
        assert alone.tokens == hyp.tokens
        assert abs(alone.logprob - hyp.logprob) < 1e-4


def test_hypothesis_score_is_the_model_probability_of_its_words(tiny_model):
    """The beam's summed log-probability equals teacher-forced scoring of the same words plus EOS."""
    with torch.no_grad():
        tiny_model.decoder.W_o.bias[Vocab.EOS] = 3.0  # so that every sentence finishes
    src, mask = pad_with_eos(SOURCES)
    for row, hyp in enumerate(beam_search(tiny_model, src, mask, beam=4)):
        assert hyp.finished
        tgt, _ = pad_with_eos([torch.tensor(hyp.tokens, dtype=torch.long)])
        with torch.no_grad():
            logits, _ = tiny_model(src[row : row + 1], mask[row : row + 1], tgt)
        logp = torch.log_softmax(logits[0], dim=-1).gather(1, tgt[0].unsqueeze(1)).sum()
        assert abs(float(logp) - hyp.logprob) < 1e-4


def test_length_limits(tiny_model):
    src, mask = pad_with_eos(SOURCES)
    for s, hyp in zip(SOURCES, beam_search(tiny_model, src, mask, beam=3)):
        n = len(s) + 1  # with EOS
        assert n // 2 <= len(hyp.tokens) <= 3 * n


def test_no_unk_decoding_never_emits_unk(tiny_model):
    with torch.no_grad():
        tiny_model.decoder.W_o.bias[Vocab.UNK] = 50.0  # UNK would win every step
        tiny_model.decoder.W_o.bias[Vocab.EOS] = 20.0  # and EOS next, once allowed
    src, mask = pad_with_eos(SOURCES)
    assert all(Vocab.UNK in h.tokens for h in beam_search(tiny_model, src, mask, beam=3))
    assert all(Vocab.UNK not in h.tokens for h in beam_search(tiny_model, src, mask, beam=3, forbid_unk=True))
