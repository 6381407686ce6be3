"""The synthetic demo corpus: determinism, layout, disjoint dev/test, lengths, vocabulary, French grammar."""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import pytest
from sacremoses import MosesTokenizer

from rnnmt.data import synthetic as syn
from rnnmt.data.synthetic import (
    HE,
    LEXICON,
    SHE,
    City,
    Clause,
    NounPhrase,
    PP,
    Relative,
    Sentence,
    detokenize,
    draw_sentence,
    generate_demo_corpus,
    realise,
)
from rnnmt.errors import UserError
from rnnmt.fileio import read_json, read_lines

SMALL = {"demo-news": 300, "demo-general": 600, "demo-dev": 100, "demo-test": 200}
N, A, V = LEXICON.nouns, LEXICON.adjectives, LEXICON.verbs


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("demo")
    return out, generate_demo_corpus(out, seed=7, sizes=SMALL)


def pair(sentence: Sentence) -> tuple[str, str]:
    en, fr = realise(sentence)
    return detokenize(en), detokenize(fr)


def the(noun: str, plural: bool = False, *adjs: str, **kw) -> NounPhrase:
    return NounPhrase(N[noun], "the", plural, tuple(A[a] for a in adjs), **kw)


def test_same_seed_gives_byte_identical_files(tmp_path: Path) -> None:
    sizes = {"demo-news": 150, "demo-general": 150, "demo-test": 50}
    generate_demo_corpus(tmp_path / "a", seed=3, sizes=sizes)
    generate_demo_corpus(tmp_path / "b", seed=3, sizes=sizes)
    generate_demo_corpus(tmp_path / "c", seed=4, sizes=sizes)
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert (tmp_path / "a" / "demo-news.en").read_bytes() != (tmp_path / "c" / "demo-news.en").read_bytes()


def test_a_corpus_does_not_depend_on_the_size_of_another(tmp_path: Path) -> None:
    generate_demo_corpus(tmp_path / "a", seed=3, sizes={"demo-news": 100, "demo-general": 50})
    generate_demo_corpus(tmp_path / "b", seed=3, sizes={"demo-news": 100, "demo-general": 80})
    assert (tmp_path / "a" / "demo-news.fr").read_bytes() == (tmp_path / "b" / "demo-news.fr").read_bytes()


def test_layout_and_report(small_corpus: tuple[Path, dict]) -> None:
    out, report = small_corpus
    expected = {f"{name}.{lang}" for name in SMALL for lang in ("en", "fr")} | {"report.json"}
    assert {p.name for p in out.iterdir()} == expected
    assert read_json(out / "report.json") == report
    for name, size in SMALL.items():
        src, tgt = read_lines(out / f"{name}.en"), read_lines(out / f"{name}.fr")
        assert len(src) == len(tgt) == size == report["corpora"][name]["pairs"]
        assert len(set(src)) == size, "duplicate source sentences within a corpus"
        for line in src + tgt:
            assert (line[0].isupper() or line[0].isdigit()) and line.endswith(".") and " ," not in line, line
    roles = {name: entry["role"] for name, entry in report["corpora"].items()}
    assert roles == {"demo-news": "train", "demo-general": "train", "demo-dev": "eval", "demo-test": "eval"}
    domains = {name: entry["domain"] for name, entry in report["corpora"].items()}
    assert domains == {"demo-news": "news", "demo-general": "pool", "demo-dev": "news", "demo-test": "news"}


def test_dev_and_test_are_disjoint_from_training_and_each_other(small_corpus: tuple[Path, dict]) -> None:
    out, report = small_corpus
    train = set(read_lines(out / "demo-news.en")) | set(read_lines(out / "demo-general.en"))
    dev, test = set(read_lines(out / "demo-dev.en")), set(read_lines(out / "demo-test.en"))
    assert not dev & train and not test & train and not dev & test
    assert report["overlap"] == 0
    assert report["corpora"]["demo-dev"]["overlap"] == report["corpora"]["demo-test"]["overlap"] == 0


def test_raw_text_is_untokenized_and_moses_recovers_the_counted_tokens() -> None:
    tokenizers = {"en": MosesTokenizer("en"), "fr": MosesTokenizer("fr")}
    rng = random.Random(11)
    for i in range(300):
        en, fr = realise(draw_sentence(rng, "news" if i % 2 else "pool"))
        for lang, tokens in (("en", en), ("fr", fr)):
            raw = detokenize(tokens)
            assert tokenizers[lang].tokenize(raw, escape=False, return_str=True).split() == tokens, raw


def test_lengths_spread_past_30_and_50_tokens(small_corpus: tuple[Path, dict]) -> None:
    _, report = small_corpus
    for name in ("demo-news", "demo-general", "demo-test"):
        stats = report["corpora"][name]["src_tokens"]
        assert stats["min"] <= 8 and stats["max"] > 50
        assert stats["over_30"] >= 0.2 * SMALL[name], name
        assert stats["max"] <= syn.MAX_TOKENS


def test_vocabulary_exceeds_the_shortlist_with_a_rare_tail(tmp_path: Path) -> None:
    report = generate_demo_corpus(tmp_path, seed=1, sizes={"demo-news": 1500, "demo-general": 3000, "demo-test": 400})
    assert report["src_types"] > 1000 and report["tgt_types"] > report["src_types"]
    assert 0.15 < report["corpora"]["demo-test"]["outside_top800"] < 0.8


def test_translation_is_a_function_of_the_source() -> None:
    seen: dict[str, str] = {}
    rng = random.Random(5)
    for i in range(4000):
        src, tgt = pair(draw_sentence(rng, "news" if i % 2 else "pool"))
        assert seen.setdefault(src, tgt) == tgt, src


def test_adjectives_agree_and_most_follow_the_noun() -> None:
    houses = Clause(the("house", True, "old", "white"), None, "pres", pred=(A["beautiful"],))
    assert pair(Sentence((houses,))) == (
        "The old white houses are beautiful.",
        "Les vieilles maisons blanches sont belles.",
    )
    man = Clause(NounPhrase(N["man"], "a", False, (A["old"],)), None, "past", pred=(A["happy"], A["tired"]))
    assert pair(Sentence((man,))) == ("An old man was happy and tired.", "Un vieil homme était heureux et fatigué.")


def test_participles_agree_with_etre_subjects_and_preceding_objects() -> None:
    went = Clause(the("woman", True), V["go to"], "past", obj=the("market"))
    assert pair(Sentence((went,))) == ("The women went to the market.", "Les femmes sont allées au marché.")
    letter = the("letter", rel=Relative("obj", Clause(the("minister"), V["write"], "past"), "that"))
    long = Clause(letter, None, "pres", pred=(A["long"],))
    assert pair(Sentence((long,))) == (
        "The letter that the minister wrote is long.",
        "La lettre que le ministre a écrite est longue.",
    )
    clitic = Clause(the("man"), V["see"], "past", obj=SHE, neg=True)
    assert pair(Sentence((clitic,))) == ("The man did not see her.", "L'homme ne l'a pas vue.")


def test_possessives_cities_and_verb_agreement_need_context() -> None:
    car = NounPhrase(N["car"], "the", False, (A["new"],), possessor=the("minister"))
    assert pair(Sentence((Clause(car, None, "pres", pred=(A["red"],)),))) == (
        "The minister's new car is red.",
        "La nouvelle voiture du ministre est rouge.",
    )
    cairo = _city("Cairo")
    lives = Clause(NounPhrase(N["man"], "this", False, (A["old"],)), V["live in"], "pres", obj=cairo)
    assert pair(Sentence((lives,))) == ("This old man lives in Cairo.", "Ce vieil homme vit au Caire.")
    who = Relative("subj", Clause(None, V["arrive"], "past"), "who")
    friends = Clause(NounPhrase(N["friend"], "the", True, rel=who), V["see"], "pres", obj=HE, pp=PP("in", cairo))
    assert pair(Sentence((friends,))) == (
        "The friends who arrived see him in Cairo.",
        "Les amis qui sont arrivés le voient au Caire.",
    )


def _city(name: str) -> City:
    return next(c for c in syn._POOLS["names", "city"].items if c.en_name == name)


def test_in_domain_and_pool_word_distributions_differ() -> None:
    """News sentences are likelier under a news unigram model than under a pool one, and vice versa."""

    def sample(domain: str, seed: int, n: int = 800) -> list[list[str]]:
        rng = random.Random(seed)
        return [realise(draw_sentence(rng, domain))[0] for _ in range(n)]

    def cross_entropy(model: Counter, sentences: list[list[str]]) -> float:
        total, vocab = sum(model.values()), len(model) + 1
        tokens = [t for s in sentences for t in s]
        return -sum(math.log((model[t] + 1) / (total + vocab)) for t in tokens) / len(tokens)

    news_lm = Counter(t for s in sample("news", 1) for t in s)
    pool_lm = Counter(t for s in sample("pool", 2) for t in s)
    news, pool = sample("news", 3, 300), sample("pool", 4, 300)
    assert cross_entropy(news_lm, news) < cross_entropy(pool_lm, news) - 0.2
    assert cross_entropy(pool_lm, pool) < cross_entropy(news_lm, pool) - 0.2


def test_lexicon_has_no_silently_shadowed_entries() -> None:
    def count(blocks: dict) -> int:
        return sum(len(syn._entries(b)) for b in blocks.values())

    assert len(N) == count(syn._NOUNS)
    assert len(A) == count(syn._ADJECTIVES)
    assert len(V) == sum(count(sections) for sections in syn._VERBS.values())
    # a lemma with two kinds (transitive and intransitive) would make some English strings ambiguous
    kinds = {}
    for verb in V.values():
        if verb.kind in ("tr", "in"):
            assert kinds.setdefault(verb.en, verb.kind) == verb.kind, verb.en


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sizes": {"demo-news": -1}},
        {"sizes": {"demo-news": True}},
        {"sizes": {"demo-news": 2.5}},
        {"sizes": {"../evil": 3}},
        {"sizes": {}},
        {"src_lang": "de"},
        {"tgt_lang": "de"},
        {"seed": "1234"},
    ],
)
def test_user_mistakes_raise_user_error(tmp_path: Path, kwargs: dict) -> None:
    with pytest.raises(UserError):
        generate_demo_corpus(tmp_path, **kwargs)
    assert not any(tmp_path.iterdir())
