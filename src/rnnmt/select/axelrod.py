"""Axelrod et al. (2011) bilingual cross-entropy difference selection (data-selection.md §2).

score(s, t) = [H_I,src(s) − H_O,src(s)] + [H_I,tgt(t) − H_O,tgt(t)], each H the per-word cross-entropy
in bits with `</s>` counted; the lowest scores are the most in-domain-like. The in-domain (I) LMs are
estimated on the in-domain text, the out-of-domain (O) LMs on a seeded random sample of the pool of
about the in-domain size, all over a closed vocabulary taken from the in-domain text.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from rnnmt.data.corpus import count_lines, mismatch_error
from rnnmt.errors import UserError
from rnnmt.fileio import atomic_path, iter_lines, read_json, read_lines, write_lines
from rnnmt.select.ngram import Encoder, NgramLM, build_vocab

COMPONENTS = ("h_in_src", "h_out_src", "h_in_tgt", "h_out_tgt")
_BITS_PER_LOG10 = math.log2(10)


# --- shards -------------------------------------------------------------------------------------


def line_offsets(path: Path, shards: int) -> tuple[int, list[int]]:
    """(line count, byte offsets of shards+1 boundaries) for `shards` shards of equal line counts.

    Two passes (count, then find the boundaries) keep only the boundaries in memory, whatever the pool's size."""
    n = count_lines(path)
    wanted = [k * n // shards for k in range(shards + 1)]
    offsets, position, k = [], 0, 0
    with open(path, "rb") as f:
        for number, line in enumerate(f):
            while k <= shards and wanted[k] == number:
                offsets.append(position)
                k += 1
            position += len(line)
    return n, offsets + [position] * (shards + 1 - len(offsets))


def read_range(path: Path, start: int, end: int) -> list[str]:
    """The UTF-8 lines between two byte offsets (line boundaries) of a file."""
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    return data.decode("utf-8").split("\n")[:-1] if data else []


def shard_index(src: Path, tgt: Path, shards: int) -> dict:
    """Line count and per-side byte offsets of the shards of a parallel pool; both sides must match."""
    n_src, src_offsets = line_offsets(src, shards)
    n_tgt, tgt_offsets = line_offsets(tgt, shards)
    if n_src != n_tgt:
        raise mismatch_error(src, tgt, n_src, n_tgt)
    return {"lines": n_src, "shards": shards, "src": src_offsets, "tgt": tgt_offsets}


# --- language models ----------------------------------------------------------------------------


def _check_nonempty(lines: Sequence[str], what: str) -> None:
    if not any(line.strip() for line in lines):
        raise UserError(f"{what} is empty; Axelrod selection needs in-domain text to estimate its language models.")


def estimate_lm(lines: Sequence[str], words: Sequence[str], order: int, what: str) -> NgramLM:
    """An interpolated modified-KN LM over the closed vocabulary `words` (`<unk>` a normal word)."""
    _check_nonempty(lines, what)
    encoder = Encoder(words)
    tokens, offsets = encoder.encode(lines)
    return NgramLM.estimate(tokens, offsets, len(encoder.words), order=order, unk_is_word=True)


def ood_sample(tgt_lengths: np.ndarray, target_tokens: int, seed: int) -> np.ndarray:
    """Sorted ids of a seeded random sample, without replacement, whose target tokens reach `target_tokens`."""
    order = np.random.default_rng(seed).permutation(len(tgt_lengths))
    reach = np.cumsum(tgt_lengths[order])
    take = int(np.searchsorted(reach, target_tokens)) + 1
    return np.sort(order[:take])


def token_counts(path: Path) -> np.ndarray:
    """Whitespace-token count of every line of a file."""
    return np.fromiter((len(line.split()) for line in iter_lines(path)), dtype=np.int32)


# --- scoring ------------------------------------------------------------------------------------


def cross_entropies(lm: NgramLM, tokens: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per-word cross-entropy in bits, `</s>` counted, of each encoded sentence."""
    return -lm.score(tokens, offsets) * _BITS_PER_LOG10 / (np.diff(offsets) + 1)


def score_lines(src_lines: Sequence[str], tgt_lines: Sequence[str], lms: dict[str, NgramLM], encoders: dict[str, Encoder]) -> dict[str, np.ndarray]:
    """The four cross-entropy components (float32) and the token counts of each pair."""
    out: dict[str, np.ndarray] = {}
    for side, lines in (("src", src_lines), ("tgt", tgt_lines)):
        tokens, offsets = encoders[side].encode(lines)
        for domain in ("in", "out"):
            out[f"h_{domain}_{side}"] = cross_entropies(lms[f"{domain}_{side}"], tokens, offsets).astype(np.float32)
        out[f"n_{side}"] = np.diff(offsets).astype(np.int32)
    return out


def _chunks(lines: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(lines), size):
        yield lines[i : i + size]


def score_shard(
    src: Path, tgt: Path, index: dict, shard: int, lms: dict[str, NgramLM], encoders: dict[str, Encoder], chunk_lines: int = 200_000
) -> dict[str, np.ndarray]:
    """Score one shard of the pool chunk by chunk; returns the components plus `seconds`."""
    started = time.monotonic()
    src_lines = read_range(src, index["src"][shard], index["src"][shard + 1])
    tgt_lines = read_range(tgt, index["tgt"][shard], index["tgt"][shard + 1])
    if len(src_lines) != len(tgt_lines):
        raise UserError(f"shard {shard} of {src} and {tgt} has {len(src_lines)} and {len(tgt_lines)} lines; rebuild the selection index.")
    parts = [score_lines(s, t, lms, encoders) for s, t in zip(_chunks(src_lines, chunk_lines), _chunks(tgt_lines, chunk_lines))]
    keys = (*COMPONENTS, "n_src", "n_tgt")
    result = {key: np.concatenate([p[key] for p in parts]) if parts else np.zeros(0, np.float32) for key in keys}
    result["seconds"] = np.float64(time.monotonic() - started)
    return result


NORMALISE = ("words_plus_eos", "words")


def combined(parts: dict[str, np.ndarray], normalise: str = "words_plus_eos") -> np.ndarray:
    """The bilingual cross-entropy difference per pair (float64); +inf where a side is empty.

    The stored components are per word with `</s>` counted (SRILM, XenC v1); `words` rescales them to
    per word without it (Moses' modified Moore-Lewis, XenC v2), so a variant needs no rescoring.
    """
    if normalise not in NORMALISE:
        raise UserError(f"selection normalisation {normalise!r} is unknown; expected one of {', '.join(NORMALISE)}.")
    score = np.zeros(len(parts["n_src"]))
    empty = (parts["n_src"] == 0) | (parts["n_tgt"] == 0)
    for side in ("src", "tgt"):
        n = parts[f"n_{side}"].astype(np.float64)
        scale = (n + 1) / np.maximum(n, 1) if normalise == "words" else 1.0
        score += (parts[f"h_in_{side}"].astype(np.float64) - parts[f"h_out_{side}"]) * scale
    return np.where(empty, np.inf, score)


# --- ranking and the cut ------------------------------------------------------------------------


def _keep_prefix(order: np.ndarray, tgt_tokens: np.ndarray, budget: float) -> np.ndarray:
    """The longest prefix of a ranking whose cumulative target tokens stay within `budget`."""
    reach = np.cumsum(tgt_tokens[order], dtype=np.int64)
    return order[: int(np.searchsorted(reach, budget, side="right"))]


def select_ids(
    score: np.ndarray,
    tgt_tokens: np.ndarray,
    corpus_of_line: np.ndarray,
    corpora: Sequence[str],
    *,
    cut: str,
    target_words: int | None = None,
    fraction: float | None = None,
    fractions: dict[str, float] | None = None,
) -> np.ndarray:
    """Sorted ids of the selected pairs: a global budget of target words, or a fraction per corpus.

    Ranking is ascending by score, ties in line order (a stable sort), so duplicates go together.
    """
    finite = np.isfinite(score)
    order = np.argsort(score, kind="stable")
    order = order[finite[order]]
    if cut == "global":
        total = int(tgt_tokens[finite].sum())
        budget = target_words if target_words is not None else fraction * total
        return np.sort(_keep_prefix(order, tgt_tokens, budget))
    missing = [c for c in corpora if c not in (fractions or {})]
    if missing:
        raise UserError(f"selection.fractions has no fraction for {', '.join(missing)}; per_corpus cuts need one for every pool corpus.")
    kept = []
    for c, name in enumerate(corpora):
        mine = order[corpus_of_line[order] == c]
        kept.append(_keep_prefix(mine, tgt_tokens, fractions[name] * int(tgt_tokens[mine].sum())))
    return np.sort(np.concatenate(kept)) if kept else np.zeros(0, np.int64)


def extract_lines(src: Path, tgt: Path, ids: np.ndarray | None, out_src: Path, out_tgt: Path, test_pairs: frozenset = frozenset()) -> tuple[int, int]:
    """Write the pool pairs with the listed 0-based ids (None: all), in pool order, atomically.

    Returns (pairs written, pairs identical to one of `test_pairs`).
    """
    keep = None
    if ids is not None:
        keep = np.zeros(int(ids.max()) + 1 if len(ids) else 0, dtype=bool)
        keep[ids] = True
    written = leaked = 0
    with atomic_path(out_src) as tmp_src, atomic_path(out_tgt) as tmp_tgt:
        with open(tmp_src, "w", encoding="utf-8") as f_src, open(tmp_tgt, "w", encoding="utf-8") as f_tgt:
            for i, (s, t) in enumerate(zip(iter_lines(src), iter_lines(tgt), strict=True)):
                if keep is None or (i < len(keep) and keep[i]):
                    f_src.write(s + "\n")
                    f_tgt.write(t + "\n")
                    written += 1
                    leaked += (s, t) in test_pairs
    return written, leaked


# --- the steps the workflow runs, file to file ----------------------------------------------------


def write_vocab(text: Path, min_count: int, output: Path) -> int:
    """The closed LM vocabulary of one language: in-domain tokens seen at least `min_count` times."""
    words = build_vocab(iter_lines(text), min_count)
    if not words:
        raise UserError(f"{text} has no token seen {min_count} or more times; Axelrod selection needs in-domain text.")
    return write_lines(output, words)


def build_lm(text: Path, vocab: Path, order: int, output: Path) -> NgramLM:
    """Estimate and save one selection LM over the closed vocabulary."""
    lm = estimate_lm(read_lines(text), read_lines(vocab), order, str(text))
    lm.save(output)
    return lm


def sample_pool(src: Path, tgt: Path, indomain_tgt: Path, seed: int, out_src: Path, out_tgt: Path) -> dict:
    """Write the out-of-domain LM text: pool pairs drawn until their target tokens match the in-domain text's."""
    lengths = token_counts(tgt)
    target = int(token_counts(indomain_tgt).sum())
    if target == 0:
        raise UserError(f"{indomain_tgt} is empty; Axelrod selection needs in-domain text to size the pool sample.")
    ids = ood_sample(lengths, target, seed)
    kept, _ = extract_lines(src, tgt, ids, out_src, out_tgt)
    return {"seed": seed, "pool_lines": len(lengths), "sample_lines": kept, "sample_tgt_tokens": int(lengths[ids].sum()), "indomain_tgt_tokens": target}


def load_models(vocabs: dict[str, Path], lms: dict[str, Path]) -> tuple[dict[str, NgramLM], dict[str, Encoder]]:
    """The four LMs (in/out × src/tgt) and the encoder of each side's closed vocabulary."""
    return {key: NgramLM.load(path) for key, path in lms.items()}, {side: Encoder(read_lines(path)) for side, path in vocabs.items()}


def save_scores(parts: dict[str, np.ndarray], output: Path) -> None:
    """Store a shard's score components (not the sum: variants of the score need no rescoring)."""
    with atomic_path(output) as tmp, open(tmp, "wb") as f:
        np.savez(f, **parts)


def score_shard_file(
    src: Path, tgt: Path, index: Path, shard: int, vocabs: dict[str, Path], lms: dict[str, Path], output: Path, *, chunk_lines: int
) -> dict[str, np.ndarray]:
    """Score shard `shard` of the pool (`index`: select-index's output) with the four LMs and save the
    components to `output`; returns them."""
    models, encoders = load_models(vocabs, lms)
    shards = read_json(index)
    if not 0 <= shard < shards["shards"]:
        raise UserError(f"--shard {shard} is outside the {shards['shards']} shards of {index}.")
    parts = score_shard(src, tgt, shards, shard, models, encoders, chunk_lines)
    save_scores(parts, output)
    return parts


def load_scores(paths: Sequence[Path]) -> dict[str, np.ndarray]:
    """The components of all shards, concatenated in shard order."""
    shards = [dict(np.load(path)) for path in paths]
    keys = (*COMPONENTS, "n_src", "n_tgt")
    merged = {key: np.concatenate([s[key] for s in shards]) for key in keys}
    merged["seconds"] = np.array([float(s["seconds"]) for s in shards])
    return merged


def corpus_ranges(pool_report: dict, corpora: Sequence[str]) -> np.ndarray:
    """The corpus index of every pool line, from the assembly report (pairs kept per input, in order)."""
    counts = [entry["pairs_out"] for entry in pool_report["inputs"]]
    if len(counts) != len(corpora):
        raise UserError(f"the pool was assembled from {len(counts)} corpora but {len(corpora)} names were given ({', '.join(corpora)}).")
    return np.repeat(np.arange(len(corpora), dtype=np.int16), counts)


def rank_report(parts: dict[str, np.ndarray], corpus_of_line: np.ndarray, corpora: Sequence[str], ids: np.ndarray, settings: dict) -> dict:
    """What the cut kept, per corpus and in all: pairs, target words, score thresholds, in-domain fit, lengths."""
    score = combined(parts, settings.get("normalise", "words_plus_eos"))
    kept = np.zeros(len(score), dtype=bool)
    kept[ids] = True
    dropped = ~kept & np.isfinite(score)
    per_word_in = parts["h_in_tgt"].astype(np.float64)
    tgt_len = parts["n_tgt"].astype(np.int64)
    report = {"settings": settings, "corpora": {}, "scoring_seconds": float(parts["seconds"].sum()), "shards": len(parts["seconds"])}
    for c, name in enumerate([*corpora, None]):
        mine = np.ones(len(score), bool) if name is None else corpus_of_line == c
        entry = {
            "pairs": int(mine.sum()),
            "kept_pairs": int((mine & kept).sum()),
            "tgt_words": int(tgt_len[mine].sum()),
            "kept_tgt_words": int(tgt_len[mine & kept].sum()),
            "threshold": float(score[mine & kept].max()) if (mine & kept).any() else None,
            # Bits per target word under the in-domain LM: lower = more in-domain-like.
            "h_in_tgt_kept": _mean(per_word_in[mine & kept]),
            "h_in_tgt_dropped": _mean(per_word_in[mine & dropped]),
            # Per-word scores favour shorter sentences (data-selection.md §1.3): kept should be shorter.
            "mean_tgt_len_kept": _mean(tgt_len[mine & kept]),
            "mean_tgt_len_dropped": _mean(tgt_len[mine & dropped]),
        }
        entry["kept_fraction_pairs"] = entry["kept_pairs"] / max(entry["pairs"], 1)
        entry["kept_fraction_words"] = entry["kept_tgt_words"] / max(entry["tgt_words"], 1)
        if name is None:
            report["total"] = entry
        else:
            report["corpora"][name] = entry
    return report


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if len(values) else None


def rank_and_cut(
    scores: Sequence[Path],
    pool_report: Path,
    corpora: Sequence[str],
    output: Path,
    *,
    cut: str,
    target_words: int | None,
    fraction: float | None,
    fractions: dict[str, float],
    normalise: str,
) -> dict:
    """Rank the pool by its shards' `scores`, cut (select_ids), save the kept ids to `output` (.npy);
    returns the rank report. `pool_report` (the assembly report) and `corpora` place each line in its corpus."""
    parts = load_scores(scores)
    corpus_of_line = corpus_ranges(read_json(pool_report), corpora)
    if len(corpus_of_line) != len(parts["n_src"]):
        raise UserError(f"{pool_report} counts {len(corpus_of_line)} pool pairs but the scores cover {len(parts['n_src'])}; rerun the scoring.")
    settings = {"cut": cut, "target_words": target_words, "fraction": fraction, "fractions": fractions or None, "normalise": normalise}
    ids = select_ids(
        combined(parts, normalise), parts["n_tgt"], corpus_of_line, corpora, cut=cut, target_words=target_words, fraction=fraction, fractions=fractions
    )
    with atomic_path(output) as tmp, open(tmp, "wb") as f:
        np.save(f, ids)
    return rank_report(parts, corpus_of_line, corpora, ids, settings)
