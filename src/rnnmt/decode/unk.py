"""Unknown words: the 'No UNK' test subset of Bahdanau Table 1 (paper-spec §3.3), and Luong's UNK
replacement with a dictionary learned from the training bitext (§4.7)."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rnnmt.errors import UserError
from rnnmt.fileio import iter_lines, read_lines, write_lines
from rnnmt.models.artifact import TrainedModel
from rnnmt.models.build import model_settings
from rnnmt.models.source import SourceFormat
from rnnmt.text.bpe import BpeSegmenter, units
from rnnmt.text.vocab import Vocab


def nounk_subset(
    src_lines: Sequence[str],
    ref_lines: Sequence[str],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    src_bpe: BpeSegmenter | None = None,
    tgt_bpe: BpeSegmenter | None = None,
) -> list[int]:
    """0-based indices of the pairs whose every source token and every reference token is in vocabulary."""
    if len(src_lines) != len(ref_lines):
        raise UserError(f"the test source has {len(src_lines)} lines but the reference has {len(ref_lines)}; expected equal counts.")

    return [i for i, (s, r) in enumerate(zip(src_lines, ref_lines)) if src_vocab.covers(units(s, src_bpe)) and tgt_vocab.covers(units(r, tgt_bpe))]


# --- UNK replacement (Luong et al. 2015, "+unk replace"; paper-spec §4.7) ---------------------------


def learn_dictionary(
    src_lines: Iterable[str], tgt_lines: Iterable[str], src_vocab: Vocab, tgt_vocab: Vocab, min_count: int = 2
) -> dict[str, tuple[str, float, int]]:
    """For each source word outside the source shortlist, the target word outside the target shortlist
    with the highest Dice coefficient 2·c(s, t) / (c(s) + c(t)) over sentence pairs (counts: pairs that
    contain the word, and pairs that contain both); pairs seen fewer than `min_count` times are ignored.

    UNK replacement only needs translations of rare words: the model writes UNK where the target word is
    outside its shortlist, and attends mostly to a rare source word there (names, numbers, compounds).
    Returns {source word: (target word, Dice, pair count)}; ties go to the more frequent pair, then the
    alphabetically first target word, so the result does not depend on the corpus order.
    """
    df_src: Counter[str] = Counter()
    df_tgt: Counter[str] = Counter()
    both: Counter[tuple[str, str]] = Counter()
    for s, t in zip(src_lines, tgt_lines, strict=True):
        rare_s = {w for w in s.split() if not src_vocab.covers((w,))}
        rare_t = {w for w in t.split() if not tgt_vocab.covers((w,))}
        df_src.update(rare_s)
        df_tgt.update(rare_t)
        both.update(itertools.product(rare_s, rare_t))
    best: dict[str, tuple[str, float, int]] = {}
    # In sorted order, so that among equal (Dice, count) the alphabetically first target word stays.
    for (s, t), count in sorted(both.items()):
        if count < min_count:
            continue
        dice = 2 * count / (df_src[s] + df_tgt[t])
        if s not in best or (dice, count) > best[s][1:]:
            best[s] = (t, dice, count)
    return best


def write_dictionary(path: Path, entries: dict[str, tuple[str, float, int]]) -> int:
    """Write 'source<TAB>target<TAB>dice<TAB>count' lines sorted by source word, atomically."""
    rows = [f"{s}\t{t}\t{dice:.6f}\t{count}" for s, (t, dice, count) in sorted(entries.items())]
    return write_lines(path, rows)


def dictionary_file(src: Path, tgt: Path, src_vocab: Path, tgt_vocab: Path, output: Path, min_count: int = 2) -> int:
    """Learn the UNK dictionary from a training bitext and its shortlists, write it to `output`; its entry count."""
    entries = learn_dictionary(iter_lines(src), iter_lines(tgt), Vocab.load(src_vocab), Vocab.load(tgt_vocab), min_count)
    write_dictionary(output, entries)
    return len(entries)


def load_dictionary(path: Path | None) -> dict[str, str]:
    """{source word: target word} from write_dictionary's file; no file, no entries (every UNK copies)."""
    if path is None:
        return {}
    entries = {}
    for lineno, line in enumerate(read_lines(path), 1):
        fields = line.split("\t")
        if len(fields) < 2 or not fields[0] or not fields[1]:
            raise UserError(f"{path}:{lineno}: expected 'source<TAB>target[<TAB>...]', got {line!r}.")
        entries[fields[0]] = fields[1]
    return entries


@dataclass(frozen=True)
class UnkReplacer:
    """Replaces each UNK of a hypothesis by the dictionary translation of the source word it attends to
    most, or by that word itself when the dictionary has none.

    Luong's content-based attention reads the weights of the step whose input is the UNK (his fn. 14),
    i.e. the next step; location-based attention and Bahdanau's read the step that predicted it.
    """

    dictionary: dict[str, str]
    source: SourceFormat
    align_on_input: bool

    @classmethod
    def for_model(cls, tm: TrainedModel, dictionary: dict[str, str]) -> UnkReplacer:
        if tm.src_bpe is not None or tm.tgt_bpe is not None:
            raise UserError("UNK replacement needs word vocabularies (shortlists); BPE models write no UNK.")
        model = model_settings(tm.system["model"])
        on_input = model["decoder"] == "lstm" and model.get("score") != "location"
        return cls(dictionary, SourceFormat.of(model), on_input)

    def replace(self, tokens: list[str], align: list[int], source_words: list[str]) -> list[str]:
        """A hypothesis's tokens with every UNK replaced; `align` has the source position of highest
        weight at each decoding step (the EOS step included)."""
        out = list(tokens)
        for i, token in enumerate(tokens):
            if token != UNK_SYMBOL:
                continue
            step = min(i + 1 if self.align_on_input else i, len(align) - 1)
            word = self.source.position(align[step], len(source_words))
            if word is not None:
                out[i] = self.dictionary.get(source_words[word], source_words[word])
        return out


UNK_SYMBOL = Vocab.SPECIALS[Vocab.UNK]


def replace_unknowns(tm: TrainedModel, hyps: list[str], aligns: list[str], sources: list[str], dictionary: dict[str, str]) -> list[str]:
    """Apply UnkReplacer to translated lines, given the alignment lines `rnnmt translate --align-output` wrote."""
    if not len(hyps) == len(aligns) == len(sources):
        raise UserError(
            f"UNK replacement needs as many alignment and source lines as translations: got {len(hyps)} translations, "
            f"{len(aligns)} alignment lines and {len(sources)} source lines."
        )
    replacer = UnkReplacer.for_model(tm, dictionary)
    out = []
    for lineno, (hyp, align, src) in enumerate(zip(hyps, aligns, sources), 1):
        try:
            positions = [int(x) for x in align.split()]
        except ValueError:
            raise UserError(f"alignment line {lineno} is {align!r}; expected source positions (integers).") from None
        if hyp and not positions:
            raise UserError(f"alignment line {lineno} is empty but its translation is not; translate again with --align-output.")
        out.append(" ".join(replacer.replace(hyp.split(), positions, src.split())) if hyp else hyp)
    return out
