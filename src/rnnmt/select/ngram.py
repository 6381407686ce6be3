"""Interpolated modified Kneser-Ney n-gram LMs in numpy: lmplz-identical estimation, vectorised backoff scoring, ARPA.

Follows docs/data-selection.md §2.4-2.6 and §5.5. Word ids are 0 <unk>, 1 <s>, 2 </s>, then the vocabulary. An
n-gram is one uint64 key with 16 bits per word and its last word in the lowest bits, so all n-grams sharing a
context are adjacent in a sorted key array and the context of a key is `key >> 16`.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rnnmt.errors import UserError
from rnnmt.fileio import atomic_path

UNK, BOS, EOS = 0, 1, 2
SPECIALS = ("<unk>", "<s>", "</s>")

BITS = 16
MAX_ORDER = 64 // BITS
MAX_IDS = 1 << BITS
# lmplz --discount_fallback's default (D1, D2, D3+) for an order whose counts-of-counts are degenerate.
FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)
_FORMAT = "rnnmt-ngram-lm-1"


def build_vocab(lines: Iterable[str], min_count: int = 1) -> list[str]:
    """Whitespace tokens with count >= min_count, sorted; specials excluded (they are implicit)."""
    if min_count < 1:
        raise UserError(f"the vocabulary's minimum count is {min_count}; expected an integer of at least 1.")
    counts: Counter[str] = Counter()
    for line in lines:
        counts.update(line.split())
    return sorted(w for w, c in counts.items() if c >= min_count and w not in SPECIALS)


class Encoder:
    """Maps whitespace tokens to LM word ids: specials 0..2, then the vocabulary words 3, 4, ..."""

    def __init__(self, words: Sequence[str]) -> None:
        clashes = sorted(set(words) & set(SPECIALS))
        if clashes or len(set(words)) != len(words):
            raise UserError(
                f"the n-gram vocabulary has duplicate words or special symbols {clashes}; "
                "expected distinct words without <unk>, <s>, </s> (their ids are implicit)."
            )
        self.words: list[str] = [*SPECIALS, *words]
        # Specials are absent on purpose: a literal "<s>" in text is an unknown word, not a sentence boundary.
        self._index = {w: i for i, w in enumerate(words, len(SPECIALS))}

    def encode(self, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(flat int32 token ids without <s>/</s>, int64 sentence offsets, len(lines)+1); unknown tokens -> UNK."""
        split = [line.split() for line in lines]
        offsets = np.zeros(len(split) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, split), dtype=np.int64, count=len(split)), out=offsets[1:])
        flat = itertools.chain.from_iterable(split)
        tokens = np.fromiter(map(self._index.get, flat, itertools.repeat(UNK)), dtype=np.int32, count=int(offsets[-1]))
        return tokens, offsets


def check_shape(order: int, vocab_size: int) -> None:
    """Refuse an order or vocabulary that the 16-bit-per-word key packing cannot hold."""
    if not 1 <= order <= MAX_ORDER:
        raise UserError(f"the n-gram order is {order}; expected 1 to {MAX_ORDER}, since {BITS} bits per word must fit a 64-bit key.")
    if vocab_size > MAX_IDS:
        raise UserError(
            f"the n-gram vocabulary has {vocab_size - len(SPECIALS):,} words, but the {BITS}-bit key packing allows "
            f"at most {MAX_IDS - len(SPECIALS):,} plus the three specials; raise the vocabulary's minimum count."
        )


def _mask(n: int) -> np.uint64:
    """Bit mask keeping the last n words of a key."""
    return np.uint64((1 << (BITS * n)) - 1)


def _pad(words: np.ndarray, offsets: np.ndarray, order: int) -> np.ndarray:
    """Each sentence as order-1 <s>, its words and </s>, concatenated; every window stays inside its sentence."""
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(words) or (lengths < 0).any():
        raise ValueError("offsets must be non-decreasing, start at 0 and end at the number of tokens")
    n_sent = len(offsets) - 1
    padded = np.full(len(words) + n_sent * order, BOS, dtype=np.int64)
    shift = np.arange(n_sent, dtype=np.int64) * order + (order - 1)
    padded[np.arange(len(words), dtype=np.int64) + np.repeat(shift, lengths)] = words
    padded[offsets[1:] + shift] = EOS
    return padded


def _as_words(tokens: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """int64 ids with every id that is not an allowed word (out of range, <s>, </s>, ...) replaced by UNK."""
    ids = np.asarray(tokens, dtype=np.int64)
    ids = np.where((ids >= 0) & (ids < len(allowed)), ids, UNK)
    return np.where(allowed[ids], ids, UNK)


def _discounts(adjusted: np.ndarray) -> tuple[float, float, float]:
    """Chen & Goodman's (D1, D2, D3+) from counts-of-counts, with lmplz's fallback when they are degenerate."""
    t = np.bincount(np.minimum(adjusted, 5), minlength=6)[1:5].astype(np.float64)
    if (t[:3] == 0).any():
        return FALLBACK_DISCOUNTS
    y = t[0] / (t[0] + 2 * t[1])
    d = tuple(float(k - (k + 1) * y * t[k] / t[k - 1]) for k in (1, 2, 3))
    if any(not 0 <= dk <= k for k, dk in enumerate(d, 1)):
        return FALLBACK_DISCOUNTS
    return d


def _count(padded: np.ndarray, order: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Sorted keys and lmplz adjusted counts per order; the unigram zerotons are added later."""
    ends = np.flatnonzero(padded != BOS)
    window = np.zeros(len(ends), dtype=np.uint64)
    leading_bos = np.zeros(len(ends), dtype=np.int64)
    for back in range(order):
        word = padded[ends - back]
        window |= word.astype(np.uint64) << np.uint64(BITS * back)
        leading_bos += word == BOS
    # A window with L >= 2 leading <s> is really the shorter n-gram starting at its last <s>, with a raw count.
    gram_order = order - np.maximum(leading_bos - 1, 0)
    keys: list[np.ndarray] = [np.empty(0, np.uint64)] * order
    counts: list[np.ndarray] = [np.empty(0, np.int64)] * order
    keys[-1], counts[-1] = np.unique(window[gram_order == order], return_counts=True)
    for n in range(order - 1, 0, -1):
        # Below the top order a count is the number of distinct left extensions (<s> included) ...
        ext_keys, ext_counts = np.unique(keys[n] & _mask(n), return_counts=True)
        # ... except for n-grams starting with <s>, which nothing extends; those are disjoint from the suffixes.
        bos_keys, bos_counts = np.unique(window[gram_order == n] & _mask(n), return_counts=True)
        merged = np.concatenate([ext_keys, bos_keys])
        by_key = np.argsort(merged, kind="stable")
        keys[n - 1] = merged[by_key]
        counts[n - 1] = np.concatenate([ext_counts, bos_counts])[by_key]
    return keys, counts


def _unigrams(keys: np.ndarray, counts: np.ndarray, vocab_size: int, unk_is_word: bool) -> tuple[np.ndarray, ...]:
    """Unigram keys and counts with zerotons added: <unk> and <s> in lmplz mode, every id in SRILM -unk mode."""
    dense = np.zeros(vocab_size, dtype=np.int64)
    dense[keys.astype(np.int64)] = counts
    ids = np.arange(vocab_size) if unk_is_word else np.union1d(keys.astype(np.int64), [UNK, BOS, EOS])
    return ids.astype(np.uint64), dense[ids]


def _groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start index of each run of keys sharing a context, and each key's run number."""
    context = keys >> np.uint64(BITS)
    first = np.ones(len(keys), dtype=bool)
    first[1:] = context[1:] != context[:-1]
    return np.flatnonzero(first), np.cumsum(first) - 1


def _find(keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Index of each query in the sorted keys, -1 where absent."""
    index = np.searchsorted(keys, query)
    inside = index < len(keys)
    hit = np.zeros(len(query), dtype=bool)
    hit[inside] = keys[index[inside]] == query[inside]
    return np.where(hit, index, -1)


@dataclass(eq=False)
class NgramLM:
    """A backoff n-gram LM: per order, sorted packed keys with log10 probabilities and log10 backoffs."""

    order: int
    vocab_size: int  # number of ids incl. specials
    keys: list[np.ndarray]  # per order n=1..N: sorted uint64 packed n-grams
    logp: list[np.ndarray]  # float64 log10 p, aligned with keys
    backoff: list[np.ndarray]  # float64 log10 backoff (0 where none)
    discount: np.ndarray  # (order, 3) float64 (D1, D2, D3+) as used; NaN when read from ARPA, which omits them
    _unigram: np.ndarray = field(init=False, repr=False)  # id -> index into keys[0], -1 without a unigram
    _is_word: np.ndarray = field(init=False, repr=False)  # id -> may appear as a scored word

    def __post_init__(self) -> None:
        self._unigram = np.full(self.vocab_size, -1, dtype=np.int64)
        self._unigram[self.keys[0].astype(np.int64)] = np.arange(len(self.keys[0]))
        self._is_word = self._unigram >= 0
        self._is_word[[BOS, EOS]] = False

    @classmethod
    def estimate(cls, tokens: np.ndarray, offsets: np.ndarray, vocab_size: int, order: int = 4, unk_is_word: bool = True) -> NgramLM:
        """Interpolated modified Kneser-Ney as lmplz computes it, without pruning or cut-offs."""
        check_shape(order, vocab_size)
        if len(offsets) < 2:
            raise UserError("the n-gram training text has no sentences; expected at least one line.")
        allowed = np.ones(vocab_size, dtype=bool)
        allowed[[BOS, EOS]] = False
        words = _as_words(tokens, allowed)
        if not unk_is_word and (words == UNK).any():
            raise UserError(
                f"the n-gram training text has {int((words == UNK).sum()):,} tokens outside the vocabulary, but lmplz "
                "mode (unk_is_word false) keeps <unk> unseen; expected unk_is_word true or a vocabulary covering "
                "the text."
            )
        keys, counts = _count(_pad(words, offsets, order), order)
        keys[0], counts[0] = _unigrams(keys[0], counts[0], vocab_size, unk_is_word)
        discount = np.array([_discounts(c) for c in counts])
        logp, backoff = _interpolate(keys, counts, discount)
        return cls(order, vocab_size, keys, logp, backoff, discount)

    def discounts(self) -> list[tuple[float, float, float]]:
        """(D1, D2, D3+) per order as used in estimation, after the fallback."""
        return [(float(a), float(b), float(c)) for a, b, c in self.discount]

    def token_logprobs(self, tokens: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """float64 log10 p of each predicted token: per sentence its words then </s>, sentences in order."""
        padded = _pad(_as_words(tokens, self._is_word), offsets, self.order)
        unigram = self._unigram[padded]
        targets = np.flatnonzero(padded != BOS)
        logp = self.logp[0][unigram]
        longest = np.ones(len(padded), dtype=np.int8)
        # context_backoff[j - 1][p]: log10 backoff of the j-gram ending at position p (0 where it is no n-gram).
        context_backoff = [self.backoff[0][unigram]] if self.order > 1 else []
        at, key = targets, padded[targets].astype(np.uint64)
        for n in range(2, self.order + 1):
            # An n-gram can only exist where its suffix does, so each order searches the previous order's hits.
            key = key | padded[at - (n - 1)].astype(np.uint64) << np.uint64(BITS * (n - 1))
            index = _find(self.keys[n - 1], key)
            hit = index >= 0
            at, key, index = at[hit], key[hit], index[hit]
            logp[at] = self.logp[n - 1][index]
            longest[at] = n
            if n < self.order:
                context_backoff.append(np.zeros(len(padded)))
                context_backoff[-1][at] = self.backoff[n - 1][index]
        longest_at = longest[targets]
        out = logp[targets]
        for j, backoff in enumerate(context_backoff, 1):
            out += np.where(longest_at <= j, backoff[targets - 1], 0.0)
        return out

    def score(self, tokens: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """float64 log10 P of each sentence including </s> (history padded with <s>)."""
        logp = self.token_logprobs(tokens, offsets)
        n_sent = len(offsets) - 1
        if n_sent == 0:
            return np.zeros(0)
        # Sentence i's predictions start after the i earlier </s>; every sentence has at least its </s>.
        return np.add.reduceat(logp, np.asarray(offsets[:-1], dtype=np.int64) + np.arange(n_sent))

    def save(self, path: Path) -> None:
        """Write the LM as .npz, atomically."""
        arrays = {"format": np.array(_FORMAT), "order": np.array(self.order), "vocab_size": np.array(self.vocab_size)}
        arrays["discount"] = self.discount
        for n in range(1, self.order + 1):
            arrays[f"keys{n}"] = self.keys[n - 1]
            arrays[f"logp{n}"] = self.logp[n - 1]
            arrays[f"backoff{n}"] = self.backoff[n - 1]
        # A file object, because np.savez appends ".npz" to a file name that lacks it.
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.savez(f, **arrays)

    @classmethod
    def load(cls, path: Path) -> NgramLM:
        """Read an LM written by save()."""
        try:
            with np.load(path, allow_pickle=False) as z:
                if "format" not in z or str(z["format"]) != _FORMAT:
                    raise UserError(f"{path} is not an n-gram LM file; expected one written by rnnmt ({_FORMAT}).")
                order = int(z["order"])
                parts = [[z[f"{name}{n}"] for n in range(1, order + 1)] for name in ("keys", "logp", "backoff")]
                return cls(order, int(z["vocab_size"]), *parts, z["discount"])
        except FileNotFoundError:
            raise UserError(f"{path} does not exist; expected an n-gram LM .npz file.") from None

    def write_arpa(self, path: Path, words: Sequence[str]) -> None:
        """Write the LM as an ARPA file (full float64 precision), atomically; words[i] names id i."""
        if len(words) != self.vocab_size:
            raise UserError(
                f"got {len(words):,} word strings for an n-gram LM of {self.vocab_size:,} ids; expected all words by id, specials first (Encoder.words)."
            )
        names = np.asarray(words, dtype=object)
        with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
            f.write("\\data\\\n")
            f.writelines(f"ngram {n}={len(k)}\n" for n, k in enumerate(self.keys, 1))
            for n in range(1, self.order + 1):
                f.write(f"\n\\{n}-grams:\n")
                grams = (" ".join(row) for row in names[_unpack(self.keys[n - 1], n)].tolist())
                logp = self.logp[n - 1].tolist()
                if n < self.order:
                    f.writelines(f"{p!r}\t{g}\t{b!r}\n" for p, g, b in zip(logp, grams, self.backoff[n - 1].tolist()))
                else:
                    f.writelines(f"{p!r}\t{g}\n" for p, g in zip(logp, grams))
            f.write("\n\\end\\\n")

    @classmethod
    def read_arpa(cls, path: Path, words: Sequence[str]) -> NgramLM:
        """Read an ARPA backoff LM whose words are all in `words` (by id, specials first)."""
        sections = _read_arpa_sections(Path(path), {w: i for i, w in enumerate(words)})
        order = len(sections)
        check_shape(order, len(words))
        keys, logp, backoff = [], [], []
        for ids, values in sections:
            packed = np.zeros(len(ids), dtype=np.uint64)
            for j in range(ids.shape[1]):
                packed = packed << np.uint64(BITS) | ids[:, j].astype(np.uint64)
            by_key = np.argsort(packed, kind="stable")
            keys.append(packed[by_key])
            logp.append(values[by_key, 0])
            backoff.append(values[by_key, 1])
        return cls(order, len(words), keys, logp, backoff, np.full((order, 3), np.nan))


def _interpolate(keys: list[np.ndarray], counts: list[np.ndarray], discount: np.ndarray) -> tuple[list, list]:
    """log10 interpolated probabilities and backoffs (log10 gamma of each n-gram that is a context) per order."""
    logp, backoff, prob = [], [], np.empty(0)
    for n, (k, a) in enumerate(zip(keys, counts), 1):
        starts, group = _groups(k)
        d = np.concatenate([[0.0], discount[n - 1]])[np.minimum(a, 3)]
        total = np.add.reduceat(a.astype(np.float64), starts)
        gamma = np.add.reduceat(d, starts) / total
        discounted = (a - d) / total[group]
        if n == 1:
            # The uniform base spreads gamma over every unigram but <s>, which is never predicted.
            prob = discounted + gamma[0] / (len(k) - 1)
            prob[k == BOS] = 1.0
        else:
            lower = prob[np.searchsorted(keys[n - 2], k & _mask(n - 1))]
            prob = discounted + gamma[group] * lower
            contexts = np.searchsorted(keys[n - 2], k[starts] >> np.uint64(BITS))
            backoff[n - 2][contexts] = np.log10(gamma)
        logp.append(np.log10(prob))
        backoff.append(np.zeros(len(k)))
    return logp, backoff


def _unpack(keys: np.ndarray, n: int) -> np.ndarray:
    """(len(keys), n) int64 word ids of packed n-grams, first word first."""
    shifts = np.arange(n - 1, -1, -1, dtype=np.uint64) * np.uint64(BITS)
    return ((keys[:, None] >> shifts) & _mask(1)).astype(np.int64)


def _read_arpa_sections(path: Path, index: dict[str, int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per order, the (count, n) word ids and (count, 2) [log10 p, log10 backoff] rows of an ARPA file."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise UserError(f"{path} does not exist; expected an ARPA language model.") from None
    expected: list[int] = []
    sections: list[tuple[list, list]] = []
    in_data = False
    for lineno, line in enumerate(lines, 1):
        line = line.strip()
        fields = line.split()
        if not fields:
            continue
        if line == "\\data\\":
            in_data = True
        elif line == "\\end\\":
            break
        elif in_data and fields[0] == "ngram":
            expected.append(int(fields[1].split("=")[1]))
        elif line.startswith("\\") and line.endswith("-grams:"):
            in_data = False
            if line != f"\\{len(sections) + 1}-grams:":
                raise UserError(f"{path}:{lineno}: found {line!r}; expected the \\{len(sections) + 1}-grams: section.")
            sections.append(([], []))
        elif sections:
            n = len(sections)
            if len(fields) not in (n + 1, n + 2) or any(w not in index for w in fields[1 : n + 1]):
                raise UserError(
                    f"{path}:{lineno}: {line!r} is not a {n}-gram entry over the vocabulary; expected 'log10p w1 .. w{n} [backoff]' with known words."
                )
            sections[-1][0].append([index[w] for w in fields[1 : n + 1]])
            sections[-1][1].append([float(fields[0]), float(fields[n + 1]) if len(fields) == n + 2 else 0.0])
    found = [len(ids) for ids, _ in sections]
    if not sections or found != expected:
        raise UserError(f"{path}: the ARPA sections hold {found} n-grams; expected the \\data\\ counts {expected}.")
    return [(np.array(ids, dtype=np.int64).reshape(-1, n), np.array(values).reshape(-1, 2)) for n, (ids, values) in enumerate(sections, 1)]
