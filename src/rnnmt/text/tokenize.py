"""Moses tokenization with sacremoses, sharded over worker processes.

The defaults (escape=True, aggressive_dash_splits=False) reproduce `tokenizer.perl -l LANG`;
see docs/reference-tools.md. `lowercase` and `normalize_punctuation` put `lowercase.perl` and
`normalize-punctuation.perl -l LANG` before it, in that order, as Multi30k's own preprocessing does
(multi30k/dataset, scripts/task1-tokenize.sh). This module must stay torch-free: worker processes import it.
"""

from __future__ import annotations

import functools
import itertools
import multiprocessing
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from sacremoses import MosesDetokenizer, MosesPunctNormalizer, MosesTokenizer
from sacremoses.corpus import NonbreakingPrefixes

from rnnmt.errors import UserError
from rnnmt.fileio import atomic_path, iter_lines

# Chunks sent to the pool per worker and round: enough to keep workers busy while bounding memory.
_CHUNKS_PER_WORKER = 4


@functools.cache
def moses_languages() -> frozenset[str]:
    """The language codes Moses has rules for (its nonbreaking prefixes); another code would get English's silently."""
    return frozenset(NonbreakingPrefixes().available_langs.values())


def check_language(lang: str, where: str) -> None:
    """UserError where Moses has no rules for `lang`: text in it must come tokenized."""
    if lang not in moses_languages():
        raise UserError(
            f"{where}: Moses (sacremoses) has no tokenizer rules for language '{lang}' (it has {', '.join(sorted(moses_languages()))}); "
            "tokenize that text yourself and mark its corpora `tokenized: true`."
        )


@functools.cache
def _tokenizer(lang: str) -> MosesTokenizer:
    return MosesTokenizer(lang=lang)


@functools.cache
def _detokenizer(lang: str) -> MosesDetokenizer:
    return MosesDetokenizer(lang=lang)


@functools.cache
def _normalizer(lang: str) -> MosesPunctNormalizer:
    return MosesPunctNormalizer(lang=lang)


def tokenize_lines(
    lines: Iterable[str], lang: str, *, escape: bool = True, aggressive_dash_splits: bool = False, lowercase: bool = False, normalize_punctuation: bool = False
) -> list[str]:
    """Tokenize each line (lowercased, then its punctuation normalised, where asked); tokens are separated by single spaces."""
    tok = _tokenizer(lang)
    out = []
    for line in lines:
        line = line.lower() if lowercase else line
        line = _normalizer(lang).normalize(line) if normalize_punctuation else line
        out.append(tok.tokenize(line, escape=escape, aggressive_dash_splits=aggressive_dash_splits, return_str=True))
    return out


def detokenize_lines(lines: Iterable[str], lang: str) -> list[str]:
    """Detokenize whitespace-tokenized lines, undoing the Moses escapes (&apos; and so on)."""
    detok = _detokenizer(lang)
    return [detok.detokenize(line.split()) for line in lines]


def _chunked(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    it = iter(lines)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def _unchanged(lines: list[str]) -> list[str]:
    """The lines as they are: the "tokenizer" of input that is already tokenized."""
    return lines


def _map_in_order(fn: Callable[[list[str]], list[str]], chunks: Iterator[list[str]], processes: int) -> Iterator[list[str]]:
    """Apply fn to every chunk, in order, in this process or in a pool of `processes` workers."""
    if processes == 1:
        yield from map(fn, chunks)
        return
    # spawn, not fork: the caller may hold torch threads, and forking a threaded process is unsafe.
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        # Pool.imap would read the whole input ahead; bounded rounds keep memory flat.
        while batch := list(itertools.islice(chunks, processes * _CHUNKS_PER_WORKER)):
            yield from pool.map(fn, batch)


def tokenize_file(
    in_path: Path,
    out_path: Path,
    lang: str,
    *,
    escape: bool = True,
    aggressive_dash_splits: bool = False,
    lowercase: bool = False,
    normalize_punctuation: bool = False,
    processes: int = 1,
    chunk_lines: int = 10_000,
    pretokenized: bool = False,
) -> int:
    """Tokenize a UTF-8 text file line by line into out_path (atomically); return the line count.

    The output is identical for any number of processes. With pretokenized=True the input is
    already Moses-tokenized (Luong's Stanford files) and each line is copied unchanged.
    """
    if processes < 1:
        raise UserError(f"the number of tokenizer processes must be at least 1, got {processes}.")
    if not pretokenized:
        check_language(lang, "--lang")
    if pretokenized:
        # Copying needs no workers; starting them would cost more than the copy.
        fn, processes = _unchanged, 1
    else:
        options = {"escape": escape, "aggressive_dash_splits": aggressive_dash_splits, "lowercase": lowercase, "normalize_punctuation": normalize_punctuation}
        fn = functools.partial(tokenize_lines, lang=lang, **options)
    n = 0
    with atomic_path(out_path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        for done in _map_in_order(fn, _chunked(iter_lines(in_path), chunk_lines), processes):
            out.writelines(line + "\n" for line in done)
            n += len(done)
    return n
