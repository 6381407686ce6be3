"""Drawing the demo's corpora, checking them against each other, and writing them with a report.

The caller declares each corpus: how many pairs, its role (training, or evaluation like WMT's
newstest) and its domain ("news" draws news-topic sentences; "pool" the general mix an in-domain
selection picks from). Sentences are written as raw text; the token lists the realisers build are
the Moses tokenization of that text (checked in the tests), and the report's statistics count them.
"""

from __future__ import annotations

import logging
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rnnmt.data.demo.sampler import DOMAINS, Sampler
from rnnmt.data.demo.surface import detokenize, realise
from rnnmt.errors import UserError
from rnnmt.fileio import write_json, write_lines

log = logging.getLogger(__name__)

ROLES = ("train", "eval")
SHORTLIST = 800  # the demo vocabulary size the report measures rare-word coverage against
MAX_TOKENS = 64  # longer draws are discarded so that no sentence runs away
MIN_TOKENS = 4
SRC_LANG, TGT_LANG = "en", "fr"  # the grammar's only pair; also the file suffixes

_CORPUS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class DemoCorpus:
    """What the caller asks of one corpus."""

    pairs: int
    role: str  # "train" | "eval": eval corpora share no source sentence with any other corpus
    domain: str  # "news" | "pool"


@dataclass
class _Drawn:
    """One corpus as drawn: raw lines, their tokens, and how many sentences each topic gave."""

    name: str
    spec: DemoCorpus
    src: list[str] = field(default_factory=list)
    tgt: list[str] = field(default_factory=list)
    src_tokens: list[list[str]] = field(default_factory=list)
    tgt_tokens: list[list[str]] = field(default_factory=list)
    topics: Counter = field(default_factory=Counter)


def generate_demo_corpus(out_dir: Path, corpora: dict[str, DemoCorpus], *, seed: int) -> dict:
    """Write `{corpus}.en`, `{corpus}.fr` (raw text) and `report.json` under `out_dir`; return the report.

    Each corpus draws from its own generator seeded by (seed, name), so a corpus does not change when
    another one is resized. Eval corpora are drawn after the training ones, and their sentences are
    redrawn until none occurs in training or in an earlier eval corpus.
    """
    _check_arguments(corpora, seed)
    out_dir = Path(out_dir)
    drawn: list[_Drawn] = []
    taken: set[str] = set()
    for name in sorted(corpora, key=lambda n: (corpora[n].role == "eval", n)):
        spec = corpora[name]
        corpus = _draw_corpus(name, spec, seed, taken if spec.role == "eval" else set())
        drawn.append(corpus)
        taken.update(corpus.src)
    for c in drawn:
        write_lines(out_dir / f"{c.name}.{SRC_LANG}", c.src)
        write_lines(out_dir / f"{c.name}.{TGT_LANG}", c.tgt)
    report = _report(drawn, seed)
    write_json(out_dir / "report.json", report)
    log.info("demo corpus: %d pairs in %d corpora under %s", sum(len(c.src) for c in drawn), len(drawn), out_dir)
    return report


def _check_arguments(corpora: dict[str, DemoCorpus], seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UserError(f"the demo corpus seed must be an integer, not {seed!r}.")
    if not isinstance(corpora, dict) or not corpora:
        raise UserError(f"the demo corpus needs at least one declared corpus (pairs, role, domain), not {corpora!r}.")
    for name, spec in corpora.items():
        _check_corpus(name, spec)


def _check_corpus(name: str, spec: DemoCorpus) -> None:
    """One-sentence errors naming the corpus, the bad value and what was expected."""
    if not isinstance(name, str) or not _CORPUS_NAME.fullmatch(name):
        raise UserError(f"demo corpus name {name!r} must be a plain file name (letters, digits, '.', '_', '-').")
    if not isinstance(spec, DemoCorpus):
        raise UserError(f"demo corpus {name!r} must be declared with pairs, role and domain, not as {spec!r}.")
    if isinstance(spec.pairs, bool) or not isinstance(spec.pairs, int) or spec.pairs < 0:
        raise UserError(f"demo corpus {name!r} has pairs {spec.pairs!r}; expected a non-negative integer.")
    if spec.role not in ROLES:
        raise UserError(f"demo corpus {name!r} has role {spec.role!r}; expected one of {', '.join(ROLES)}.")
    if spec.domain not in DOMAINS:
        raise UserError(f"demo corpus {name!r} has domain {spec.domain!r}; expected one of {', '.join(DOMAINS)}.")


def _draw_corpus(name: str, spec: DemoCorpus, seed: int, taken: set[str]) -> _Drawn:
    """`spec.pairs` distinct pairs whose source sentences are not in `taken`."""
    sampler = Sampler(random.Random(f"{seed}:{name}"), spec.domain)
    corpus = _Drawn(name, spec)
    seen: set[str] = set()
    for _ in range(20 * spec.pairs + 1000):
        if len(corpus.src) == spec.pairs:
            break
        en, fr = realise(sampler.sentence())
        src = detokenize(en)
        if not MIN_TOKENS <= len(en) <= MAX_TOKENS or src in seen or src in taken:
            continue
        seen.add(src)
        corpus.src.append(src)
        corpus.tgt.append(detokenize(fr))
        corpus.src_tokens.append(en)
        corpus.tgt_tokens.append(fr)
        corpus.topics[sampler.topic] += 1
    if len(corpus.src) < spec.pairs:
        raise UserError(f"could not generate {spec.pairs} distinct sentence pairs for corpus {name!r}; ask for fewer.")
    return corpus


# --- report -------------------------------------------------------------------------------------


def _report(corpora: list[_Drawn], seed: int) -> dict:
    train = [c for c in corpora if c.spec.role == "train"]
    shortlist = _top_words([s for c in train for s in c.src_tokens], SHORTLIST)
    train_src = {s for c in train for s in c.src}
    entries = {}
    for c in corpora:
        entry = {
            "role": c.spec.role,
            "domain": c.spec.domain,
            "pairs": len(c.src),
            "src_tokens": _length_stats([len(t) for t in c.src_tokens]),
            "tgt_tokens": _length_stats([len(t) for t in c.tgt_tokens]),
            "src_types": len({tok for sent in c.src_tokens for tok in sent}),
            "tgt_types": len({tok for sent in c.tgt_tokens for tok in sent}),
            f"outside_top{SHORTLIST}": _share_with_rare_words(c.src_tokens, shortlist),
            "topics": dict(sorted(c.topics.items())),
        }
        if c.spec.role == "eval":  # source sentences shared with training or with another eval corpus
            others = train_src.union(*(o.src for o in corpora if o.spec.role == "eval" and o is not c))
            entry["overlap"] = sum(s in others for s in c.src)
        entries[c.name] = entry
    return {
        "seed": seed,
        "src_lang": SRC_LANG,
        "tgt_lang": TGT_LANG,
        "shortlist": SHORTLIST,
        "tokens": "sacremoses MosesTokenizer(lang) tokens of the raw lines",
        "corpora": entries,
        "overlap": sum(e.get("overlap", 0) for e in entries.values()),
        "src_types": len({tok for c in corpora for sent in c.src_tokens for tok in sent}),
        "tgt_types": len({tok for c in corpora for sent in c.tgt_tokens for tok in sent}),
    }


def _length_stats(lengths: list[int]) -> dict:
    return {
        "min": min(lengths, default=0),
        "mean": round(sum(lengths) / len(lengths), 2) if lengths else 0.0,
        "max": max(lengths, default=0),
        "over_30": sum(n > 30 for n in lengths),
        "over_50": sum(n > 50 for n in lengths),
    }


def _top_words(sentences: list[list[str]], n: int) -> set[str]:
    """The n most frequent tokens (ties broken alphabetically, so the set does not depend on order)."""
    counts = Counter(tok for sent in sentences for tok in sent)
    return {tok for tok, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]}


def _share_with_rare_words(sentences: list[list[str]], shortlist: set[str]) -> float:
    """Fraction of sentences with at least one token outside `shortlist`."""
    rare = sum(any(tok not in shortlist for tok in sent) for sent in sentences)
    return round(rare / len(sentences), 4) if sentences else 0.0
