"""Batched beam search with GroundHog's semantics (paper-spec §1.11).

Each finished hypothesis (one that emits EOS) takes one slot out of its sentence's beam, and the search
for a sentence ends when its beam is empty or after 3·len(x) steps (len(x) counts the source EOS). EOS is
forbidden while fewer than len(x)//2 words have been produced. Scores are summed log-probabilities,
optionally divided by the hypothesis length (EOS included) to pick the best one. With `forbid_unk` the
UNK logit is −inf (No-UNK decoding); a sentence where nothing finishes then is searched again with UNK
allowed. If still nothing finishes, the best hypothesis alive at the length limit is returned (GroundHog
would double the beam instead).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rnnmt.models.build import Seq2Seq
from rnnmt.text.vocab import Vocab

NEG_INF = float("-inf")


@dataclass
class Hypothesis:
    tokens: list[int]  # without EOS
    logprob: float  # summed log-probability, EOS included when finished
    finished: bool

    def score(self, normalize: bool) -> float:
        """Summed log-probability, or per symbol (EOS counted when it was produced)."""
        return self.logprob / (len(self.tokens) + self.finished) if normalize else self.logprob


def _best(hyps: list[Hypothesis], normalize: bool) -> Hypothesis | None:
    return max(hyps, key=lambda h: h.score(normalize), default=None)


@torch.no_grad()
def beam_search(
    model: Seq2Seq,
    src: Tensor,
    src_mask: Tensor,
    *,
    beam: int,
    normalize: bool = False,
    forbid_unk: bool = False,
) -> list[Hypothesis]:
    """Translate a batch of sources [B, S] (EOS included); returns the best hypothesis per sentence."""
    finished, alive_at_limit = _search(model, src, src_mask, beam, forbid_unk)
    results: list[Hypothesis | None] = [_best(f, normalize) for f in finished]
    retry = [b for b, r in enumerate(results) if r is None and forbid_unk]
    if retry:
        idx = torch.tensor(retry, device=src.device)
        again = beam_search(model, src[idx], src_mask[idx], beam=beam, normalize=normalize, forbid_unk=False)
        for b, hyp in zip(retry, again):
            results[b] = hyp
    return [r if r is not None else _best(alive_at_limit[b], normalize) for b, r in enumerate(results)]


def _search(
    model: Seq2Seq, src: Tensor, src_mask: Tensor, k: int, forbid_unk: bool
) -> tuple[list[list[Hypothesis]], list[list[Hypothesis]]]:
    """The beam loop; returns the finished hypotheses and those alive at the length limit, per sentence.

    Sentences whose beam is empty leave the computation (their rows are dropped), so a batch costs what
    its unfinished sentences cost.
    """
    dec = model.decoder
    batch, device = src.shape[0], src.device
    enc = model.encode(src, src_mask)
    keys = dec.attention.prepare(enc).repeat_interleave(k, dim=0)
    enc = enc.repeat(k)
    state = dec.init_state(enc)
    e_prev = torch.zeros(batch * k, dec.embed.weight.shape[1], device=device)

    active = torch.arange(batch, device=device)  # original sentence index of each computed sentence
    src_len = src_mask.sum(dim=1)
    min_len, max_len = src_len // 2, 3 * src_len
    scores = torch.full((batch, k), NEG_INF, device=device)
    scores[:, 0] = 0.0  # the first step expands one empty hypothesis
    slots = torch.full((batch,), k, device=device)  # beam width left: k minus finished hypotheses
    history = torch.zeros(batch, k, 0, dtype=torch.long, device=device)
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    alive_at_limit: list[list[Hypothesis]] = [[] for _ in range(batch)]
    banned = [Vocab.PAD, Vocab.BOS] + ([Vocab.UNK] if forbid_unk else [])
    slot_ids = torch.arange(k, device=device)

    for step in range(int(max_len.max())):
        logits, context, _ = dec.predict(state, e_prev, keys, enc)
        logp = torch.log_softmax(logits.float(), dim=-1)
        vocab = logp.shape[-1]
        logp[:, banned] = NEG_INF
        logp[(step < min_len).repeat_interleave(k), Vocab.EOS] = NEG_INF

        n = len(active)
        total = (scores.unsqueeze(-1) + logp.view(n, k, vocab)).view(n, -1)
        values, flat = total.topk(k, dim=-1)
        origin, words = flat // vocab, flat % vocab
        chosen = (slot_ids < slots.unsqueeze(1)) & torch.isfinite(values)
        ends = chosen & (words == Vocab.EOS)
        last_step = (step + 1 >= max_len).unsqueeze(1)
        live = chosen & ~ends & ~last_step

        history = torch.cat([history.gather(1, origin.unsqueeze(-1).expand_as(history)), words.unsqueeze(-1)], dim=-1)
        _collect(ends, active, history[..., :-1], values, finished, done=True)
        _collect(chosen & ~ends & last_step, active, history, values, alive_at_limit, done=False)
        slots -= ends.sum(dim=1)

        rows = origin + torch.arange(n, device=device).unsqueeze(1) * k  # parents in the current layout
        keep = live.any(dim=1).nonzero().squeeze(1)
        if len(keep) == 0:
            break
        if len(keep) < n:
            active, values, words, live, rows, history = (t[keep] for t in (active, values, words, live, rows, history))
            slots, min_len, max_len = slots[keep], min_len[keep], max_len[keep]
            kept_rows = (keep.unsqueeze(1) * k + slot_ids).view(-1)
            enc, keys = enc.select(kept_rows), keys[kept_rows]
        scores = values.masked_fill(~live, NEG_INF)
        safe_words = words.masked_fill(~live, Vocab.EOS).view(-1)
        state, e_prev = dec.advance(state[rows.view(-1)], safe_words, context[rows.view(-1)])
    return finished, alive_at_limit


def _collect(
    which: Tensor, active: Tensor, tokens: Tensor, values: Tensor, into: list[list[Hypothesis]], done: bool
) -> None:
    """Move the hypotheses marked in `which` [n, K] into per-sentence lists (few per step)."""
    for row, slot in which.nonzero().tolist():
        into[int(active[row])].append(Hypothesis(tokens[row, slot].tolist(), float(values[row, slot]), done))
