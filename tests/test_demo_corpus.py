"""The synthetic demo corpus: determinism, layout, disjoint dev/test, lengths, vocabulary, French grammar."""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections import Counter
from pathlib import Path

import pytest
from sacremoses import MosesTokenizer

from rnnmt.data.demo.corpus import MAX_TOKENS, DemoCorpus, generate_demo_corpus
from rnnmt.data.demo.grammar import HE, PP, SHE, City, Clause, NounPhrase, Relative, Sentence
from rnnmt.data.demo.lexicon import LEXICON, VERB_KINDS
from rnnmt.data.demo.sampler import draw_sentence
from rnnmt.data.demo.surface import detokenize, realise
from rnnmt.data.demo.tables import read_table
from rnnmt.errors import UserError
from rnnmt.fileio import read_json, read_lines

# The demo's corpora, declared as the workflow declares them (training ones are drawn first).
ROLES = {"demo-news": ("train", "news"), "demo-general": ("train", "pool"), "demo-dev": ("eval", "news"), "demo-test": ("eval", "news")}
SMALL = {"demo-news": 300, "demo-general": 600, "demo-dev": 100, "demo-test": 200}
N, A, V = LEXICON.nouns, LEXICON.adjectives, LEXICON.verbs


def declare(sizes: dict[str, int]) -> dict[str, DemoCorpus]:
    """The demo's corpora (see ROLES) at the given sizes."""
    return {name: DemoCorpus(pairs, *ROLES[name]) for name, pairs in sizes.items()}


def tree_sha256(directory: Path) -> str:
    """One sha256 over the names and contents of the files in `directory`."""
    digest = hashlib.sha256()
    for path in sorted(directory.iterdir()):
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("demo")
    return out, generate_demo_corpus(out, declare(SMALL), seed=7)


def pair(sentence: Sentence) -> tuple[str, str]:
    en, fr = realise(sentence)
    return detokenize(en), detokenize(fr)


def the(noun: str, plural: bool = False, *adjs: str, **kw) -> NounPhrase:
    return NounPhrase(N[noun], "the", plural, tuple(A[a] for a in adjs), **kw)


def test_same_seed_gives_byte_identical_files(tmp_path: Path) -> None:
    corpora = declare({"demo-news": 150, "demo-general": 150, "demo-test": 50})
    generate_demo_corpus(tmp_path / "a", corpora, seed=3)
    generate_demo_corpus(tmp_path / "b", corpora, seed=3)
    generate_demo_corpus(tmp_path / "c", corpora, seed=4)
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert (tmp_path / "a" / "demo-news.en").read_bytes() != (tmp_path / "c" / "demo-news.en").read_bytes()


def test_a_corpus_does_not_depend_on_the_size_of_another(tmp_path: Path) -> None:
    generate_demo_corpus(tmp_path / "a", declare({"demo-news": 100, "demo-general": 50}), seed=3)
    generate_demo_corpus(tmp_path / "b", declare({"demo-news": 100, "demo-general": 80}), seed=3)
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
        assert stats["max"] <= MAX_TOKENS


def test_vocabulary_exceeds_the_shortlist_with_a_rare_tail(tmp_path: Path) -> None:
    sizes = {"demo-news": 1500, "demo-general": 3000, "demo-test": 400}
    report = generate_demo_corpus(tmp_path, declare(sizes), seed=1)
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
    assert pair(Sentence((houses,))) == ("The old white houses are beautiful.", "Les vieilles maisons blanches sont belles.")
    man = Clause(NounPhrase(N["man"], "a", False, (A["old"],)), None, "past", pred=(A["happy"], A["tired"]))
    assert pair(Sentence((man,))) == ("An old man was happy and tired.", "Un vieil homme était heureux et fatigué.")


def test_participles_agree_with_etre_subjects_and_preceding_objects() -> None:
    went = Clause(the("woman", True), V["go to"], "past", obj=the("market"))
    assert pair(Sentence((went,))) == ("The women went to the market.", "Les femmes sont allées au marché.")
    letter = the("letter", rel=Relative("obj", Clause(the("minister"), V["write"], "past"), "that"))
    long = Clause(letter, None, "pres", pred=(A["long"],))
    assert pair(Sentence((long,))) == ("The letter that the minister wrote is long.", "La lettre que le ministre a écrite est longue.")
    clitic = Clause(the("man"), V["see"], "past", obj=SHE, neg=True)
    assert pair(Sentence((clitic,))) == ("The man did not see her.", "L'homme ne l'a pas vue.")


def test_possessives_cities_and_verb_agreement_need_context() -> None:
    car = NounPhrase(N["car"], "the", False, (A["new"],), possessor=the("minister"))
    assert pair(Sentence((Clause(car, None, "pres", pred=(A["red"],)),))) == ("The minister's new car is red.", "La nouvelle voiture du ministre est rouge.")
    cairo = _city("Cairo")
    lives = Clause(NounPhrase(N["man"], "this", False, (A["old"],)), V["live in"], "pres", obj=cairo)
    assert pair(Sentence((lives,))) == ("This old man lives in Cairo.", "Ce vieil homme vit au Caire.")
    who = Relative("subj", Clause(None, V["arrive"], "past"), "who")
    friends = Clause(NounPhrase(N["friend"], "the", True, rel=who), V["see"], "pres", obj=HE, pp=PP("in", cairo))
    assert pair(Sentence((friends,))) == ("The friends who arrived see him in Cairo.", "Les amis qui sont arrivés le voient au Caire.")


def _city(name: str) -> City:
    return next(c for c in LEXICON.cities if c.en_name == name)


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
    def count(table: dict) -> int:
        return sum(len(entries) for entries in table.values())

    assert len(N) == count(read_table("nouns"))
    assert len(A) == count(read_table("adjectives"))
    assert len(V) == sum(count(kinds) for kinds in read_table("verbs").values())
    assert all(set(kinds) <= set(VERB_KINDS) for kinds in read_table("verbs").values())
    # a lemma with two kinds (transitive and intransitive) would make some English strings ambiguous
    kinds = {}
    for verb in V.values():
        if verb.kind in ("tr", "in"):
            assert kinds.setdefault(verb.en, verb.kind) == verb.kind, verb.en


# sha256 over the files (names and contents) that the code before the lexicon moved to package data
# (rnnmt.data.synthetic) wrote for RECORDED at seed 1234: the grammar, the sampler and the word
# lists (their order included) must not drift, or every demo number in the README changes.
RECORDED = {"demo-news": 60, "demo-general": 200, "demo-dev": 20, "demo-test": 30}
RECORDED_SHA256 = "ce0148afb705cc2116078db42e9f5c5826a3109f93f3b9db5b84831d6af1343c"


def test_output_is_byte_identical_to_the_recorded_corpus(tmp_path: Path) -> None:
    generate_demo_corpus(tmp_path, declare(RECORDED), seed=1234)
    assert tree_sha256(tmp_path) == RECORDED_SHA256


def test_role_and_domain_come_from_the_declaration_not_the_name(tmp_path: Path) -> None:
    corpora = {
        "alpha": DemoCorpus(40, "eval", "news"),  # sorts first, yet is drawn after the training corpora
        "news-pool": DemoCorpus(150, "train", "pool"),
        "test-train": DemoCorpus(150, "train", "news"),
    }
    report = generate_demo_corpus(tmp_path, corpora, seed=2)
    entries = report["corpora"]
    assert list(entries) == ["news-pool", "test-train", "alpha"]
    assert {name: (e["role"], e["domain"]) for name, e in entries.items()} == {name: (c.role, c.domain) for name, c in corpora.items()}
    assert entries["alpha"]["overlap"] == 0 and "overlap" not in entries["test-train"]
    train = set(read_lines(tmp_path / "news-pool.en")) | set(read_lines(tmp_path / "test-train.en"))
    assert not set(read_lines(tmp_path / "alpha.en")) & train
    assert set(entries["alpha"]["topics"]) == set(entries["test-train"]["topics"]) == {"news"}
    assert set(entries["news-pool"]["topics"]) > {"news", "parliament", "web"}


@pytest.mark.parametrize(
    ("corpora", "seed", "message"),
    [
        ({"demo-news": DemoCorpus(-1, "train", "news")}, 1, "'demo-news' has pairs -1"),
        ({"demo-news": DemoCorpus(True, "train", "news")}, 1, "'demo-news' has pairs True"),
        ({"demo-news": DemoCorpus(2.5, "train", "news")}, 1, "'demo-news' has pairs 2.5"),
        ({"demo-dev": DemoCorpus(5, "dev", "news")}, 1, "'demo-dev' has role 'dev'; expected one of train, eval"),
        ({"demo-general": DemoCorpus(5, "train", "general")}, 1, "'demo-general' has domain 'general'"),
        ({"demo-news": 5}, 1, "'demo-news' must be declared with pairs, role and domain"),
        ({"../evil": DemoCorpus(3, "train", "news")}, 1, "'../evil' must be a plain file name"),
        ({}, 1, "at least one declared corpus"),
        ({"demo-news": DemoCorpus(3, "train", "news")}, "1234", "seed must be an integer, not '1234'"),
    ],
)
def test_user_mistakes_raise_user_error(tmp_path: Path, corpora: dict, seed: object, message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        generate_demo_corpus(tmp_path, corpora, seed=seed)
    assert not any(tmp_path.iterdir())
