"""What a validation measures on a held-out set: its cost (NLL and perplexity) and, where early stopping follows
it (`train.valid_metric: bleu`), the BLEU of its beam-search translations."""

from __future__ import annotations

import math

import torch

from rnnmt.decode.settings import DecodeSettings
from rnnmt.decode.translate import search_batches
from rnnmt.evaluate.bleu import tokenized_bleu
from rnnmt.models.build import Seq2Seq
from rnnmt.models.source import SourceFormat
from rnnmt.text.binarize import ParallelData
from rnnmt.text.bpe import text_line
from rnnmt.text.vocab import Vocab
from rnnmt.train.batching import eval_batches
from rnnmt.train.nll import SentenceNLL, sentence_nll


@torch.no_grad()
def heldout_cost(model: Seq2Seq, data: ParallelData, device: torch.device, source: SourceFormat, output: str, batch_size: int = 64) -> dict[str, float]:
    """The summed NLL averaged over sentences ('nll': Bahdanau Table 2's Dev NLL) and the per-word
    perplexity, EOS counted ('ppl': Luong's Tables 1 and 4), the output layer's by the recurrence `output`."""
    model.eval()
    objective = SentenceNLL(model, output)
    total, tokens = 0.0, 0
    for b in eval_batches(data, batch_size, source):
        b = b.to(device)
        total += float(sentence_nll(objective, b).sum())
        tokens += b.target_tokens
    model.train()
    return {"nll": total / len(data), "ppl": math.exp(total / max(tokens, 1))}


def target_line(vocab: Vocab, ids: list[int], bpe: bool) -> str:
    """Target ids as a tokenized line, subword units joined where the target side is BPE'd."""
    return text_line(vocab.decode(ids), bpe)


@torch.no_grad()
def heldout_bleu(
    model: Seq2Seq,
    data: ParallelData,
    tgt_vocab: Vocab,
    settings: DecodeSettings,
    device: torch.device,
    source: SourceFormat,
    *,
    bpe: bool,
    batch_size: int = 64,
) -> float:
    """Tokenized BLEU (multi-bleu.perl's) of the set's beam-search translations against its target side, subword
    units joined on both: nmtpy's `valid_metric: bleu` (nmtpy/mainloop.py, `__do_validation`). The references are
    the binarized ones, so a reference word outside the vocabulary is an <unk> no hypothesis matches."""
    model.eval()
    sources = [data.src(i) for i in range(len(data))]
    hyps = [""] * len(data)
    for chunk, best in search_batches(model, sources, source, settings, batch_size=batch_size, device=device):
        for i, hyp in zip(chunk, best):
            hyps[i] = target_line(tgt_vocab, hyp.tokens, bpe)
    model.train()
    refs = [target_line(tgt_vocab, data.tgt(i).tolist(), bpe) for i in range(len(data))]
    return tokenized_bleu(hyps, refs)
