"""Word vocabularies: the GroundHog / Bahdanau et al. (2014) shortlist of the most frequent tokens."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from rnnmt.errors import UserError
from rnnmt.fileio import read_json, write_json

_FORMAT = "rnnmt-vocab"
_KINDS = ("shortlist", "bpe")


class Vocab:
    """A fixed mapping between tokens and ids: four specials, then words, most frequent first."""

    PAD, UNK, EOS, BOS = 0, 1, 2, 3
    SPECIALS = ("<pad>", "<unk>", "</s>", "<s>")

    def __init__(self, words: Sequence[str], counts: Sequence[int], kind: str = "shortlist") -> None:
        if len(words) != len(counts):
            raise ValueError(f"got {len(words)} words but {len(counts)} counts")
        if kind not in _KINDS:
            raise ValueError(f"vocabulary kind must be one of {_KINDS}, got {kind!r}")
        clashes = set(words) & set(self.SPECIALS)
        if clashes or len(set(words)) != len(words):
            raise ValueError(f"vocabulary words must be unique and not special symbols: {sorted(clashes)}")
        self.kind = kind
        self.symbols: list[str] = [*self.SPECIALS, *words]
        self.counts: list[int] = [0] * len(self.SPECIALS) + list(counts)
        # Special strings are deliberately absent: a literal "</s>" in text is an unknown word, not EOS.
        first = len(self.SPECIALS)
        self._index = {word: i for i, word in enumerate(self.symbols[first:], first)}

    def __len__(self) -> int:
        return len(self.symbols)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and (self.kind, self.symbols, self.counts) == (other.kind, other.symbols, other.counts)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Map tokens to ids, unknown ones to UNK; no EOS is added."""
        index, unk = self._index, self.UNK
        return [index.get(t, unk) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Map ids to tokens, skipping PAD and BOS and stopping at the first EOS."""
        out = []
        for i in map(int, ids):
            if i == self.EOS:
                break
            if i not in (self.PAD, self.BOS):
                out.append(self.symbols[i])
        return out

    def covers(self, tokens: Iterable[str]) -> bool:
        """True if no token would be encoded as UNK."""
        return all(t in self._index for t in tokens)

    def save(self, path: Path) -> None:
        """Write the vocabulary as JSON, atomically."""
        n = len(self.SPECIALS)
        write_json(
            path, {"format": _FORMAT, "kind": self.kind, "specials": list(self.SPECIALS), "words": [[w, c] for w, c in zip(self.symbols[n:], self.counts[n:])]}
        )

    @classmethod
    def load(cls, path: Path) -> Vocab:
        """Read a vocabulary written by save()."""
        expected = f"expected a JSON vocabulary written by rnnmt ({_FORMAT!r} with kind and words)"
        try:
            data = read_json(path)
        except FileNotFoundError:
            raise UserError(f"vocabulary file {path} does not exist; {expected}.") from None
        except (ValueError, UnicodeDecodeError) as e:
            raise UserError(f"vocabulary file {path} is not valid JSON ({e}); {expected}.") from None
        try:
            if data["format"] != _FORMAT or data["specials"] != list(cls.SPECIALS):
                raise ValueError("wrong format marker or special symbols")
            words, counts = zip(*data["words"]) if data["words"] else ((), ())
            if not all(isinstance(w, str) for w in words):
                raise ValueError("every word must be a string")
            return cls(words, [int(c) for c in counts], kind=data["kind"])
        except (KeyError, TypeError, ValueError) as e:
            raise UserError(f"vocabulary file {path} is malformed ({e}); {expected}.") from None


def count_tokens(lines: Iterable[str]) -> Counter[str]:
    """Count whitespace-separated tokens."""
    counts: Counter[str] = Counter()
    for line in lines:
        counts.update(line.split())
    return counts


def build_shortlist(lines: Iterable[str], size: int, *, kind: str = "shortlist") -> Vocab:
    """Keep the `size` most frequent tokens (ties by token string); everything else becomes UNK.

    The vocabulary then has size + 4 entries, or fewer if the text has fewer distinct tokens.
    """
    if size < 1:
        raise UserError(f"the vocabulary size must be a positive number of words, got {size}.")
    counts = count_tokens(lines)
    for special in Vocab.SPECIALS:
        counts.pop(special, None)
    top = sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))[:size]
    return Vocab([w for w, _ in top], [c for _, c in top], kind=kind)
