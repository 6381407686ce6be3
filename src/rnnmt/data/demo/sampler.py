"""The random sampler of the demo grammar: Zipf word pools, domain styles and sentence trees.

Relative clauses, prepositional phrases, reported speech and clause coordination spread source
lengths over about 4-64 tokens. A "news" domain draws every sentence on the news topic; the "pool"
domain mixes parliament, web and science sentences with a minority of news ones, so that a
cross-entropy-difference selection has something to find.
"""

from __future__ import annotations

import bisect
import itertools
import random
from dataclasses import dataclass, replace
from typing import Any

from rnnmt.data.demo.grammar import DETERMINERS, HE, PP, SHE, THEY, Agreeing, Clause, Coordination, NounPhrase, Obj, Person, Relative, Sentence, Subject
from rnnmt.data.demo.lexicon import LEXICON, PHRASES, Adjective, City, Noun, Phrase, Verb

# Zipf exponents per category, steeper than in natural text because the demo shortlist is tiny: with
# the demo's corpus sizes about 40-50% of test sentences hold a word outside the 800 most frequent training
# words. Verbs have three forms each, so they are the steepest; adjectives add little rare mass and stay
# flatter so that "big" does not fill every sentence; names (copied through) are the flattest.
ZIPF_EXPONENTS = {"noun": 2.1, "adj": 1.8, "verb": 2.3, "name": 1.6}
ZIPF_OFFSET = 3  # Zipf-Mandelbrot shift: keeps the first word of a list from dominating every sentence
TOPIC_SHARE = 0.4  # share of content words drawn from the sentence's topic rather than everyday words
MAX_DEPTH = 3  # phrases nested deeper than this get no prepositional phrase or relative clause


class _Zipf:
    """Draws list items with probability proportional to 1 / (rank + ZIPF_OFFSET) ** exponent."""

    def __init__(self, items: list, exponent: float) -> None:
        self.items = tuple(items)
        self.cumulative = list(itertools.accumulate((rank + ZIPF_OFFSET) ** -exponent for rank in range(len(items))))

    def draw(self, rng: random.Random) -> Any:
        return self.items[bisect.bisect_right(self.cumulative, rng.random() * self.cumulative[-1])]


def _build_pools() -> dict[tuple[str, str], _Zipf]:
    """Zipf samplers keyed by (topic, category): noun, noun+animate, adj, and each verb kind (+any)."""
    groups: dict[tuple[str, str], list] = {}
    for noun in LEXICON.nouns.values():
        groups.setdefault((noun.topic, "noun"), []).append(noun)
        if noun.animate:
            groups.setdefault((noun.topic, "noun+animate"), []).append(noun)
    for adj in LEXICON.adjectives.values():
        groups.setdefault((adj.topic, "adj"), []).append(adj)
    for verb in LEXICON.verbs.values():
        groups.setdefault((verb.topic, verb.kind), []).append(verb)
        if verb.any_subject:
            groups.setdefault((verb.topic, verb.kind + "+any"), []).append(verb)
    groups[("names", "m")] = list(LEXICON.first_names["m"])
    groups[("names", "f")] = list(LEXICON.first_names["f"])
    groups[("names", "last")] = list(LEXICON.last_names)
    groups[("names", "city")] = list(LEXICON.cities)
    return {key: _Zipf(items, ZIPF_EXPONENTS[_category(key)]) for key, items in groups.items()}


def _category(key: tuple[str, str]) -> str:
    """Which exponent of ZIPF_EXPONENTS a pool key uses."""
    topic, kind = key
    if topic == "names":
        return "name"
    return kind.split("+")[0] if kind.startswith(("noun", "adj")) else "verb"


_POOLS = _build_pools()


@dataclass(frozen=True)
class _Style:
    """How a domain writes: topic mix and how often it reports speech or names people."""

    topics: tuple[tuple[str, float], ...]
    report: float  # main clause is "X said that ..."
    person: float  # a subject is a named person
    according: float  # "According to X, ..."
    place: float  # "In Paris, ..."


# fmt: off
_STYLES = {
    "news": _Style((("news", 1.0),), report=0.3, person=0.15, according=0.06, place=0.05),
    "pool": _Style(
        (("parliament", 0.3), ("web", 0.3), ("science", 0.2), ("news", 0.2)),
        report=0.1, person=0.06, according=0.02, place=0.02,
    ),
}
DOMAINS = tuple(_STYLES)
_DET_WEIGHTS = (
    ("the", 45), ("a", 14), ("bare", 6), ("some", 3), ("this", 3), ("these", 2), ("his", 4), ("her", 3),
    ("their", 4), ("our", 2), ("my", 2), ("every", 2), ("all", 2), ("many", 2), ("several", 2), ("num", 5),
)
_MASS_DETS = ("the", "the", "the", "this", "his", "her", "their", "our")
_NP_PREPS = (
    ("of", 50), ("in", 12), ("with", 10), ("for", 8), ("on", 6), ("from", 5), ("about", 4), ("near", 3), ("without", 2),
)
_VP_PREPS = (
    ("in", 30), ("with", 15), ("for", 10), ("near", 7), ("after", 8), ("before", 6), ("during", 6),
    ("despite", 4), ("against", 4), ("under", 3), ("behind", 3), ("towards", 2), ("from", 2),
)
_VERB_KINDS = (("cop", 14), ("tr", 46), ("pv", 16), ("in", 20), ("cp", 4))
# fmt: on


class Sampler:
    """Draws sentence trees for one domain ("news" or "pool") from a seeded random generator; `topic`
    is the topic of the last sentence drawn."""

    def __init__(self, rng: random.Random, domain: str) -> None:
        self.rng = rng
        self.style = _STYLES[domain]
        self.topic = "general"
        self.size = 0.0  # per sentence, in [0, 1): scales how often phrases are elaborated

    # -- primitives

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def weighted(self, options: tuple[tuple[str, float], ...]) -> str:
        total = sum(w for _, w in options)
        x = self.rng.random() * total
        for value, weight in options:
            x -= weight
            if x < 0:
                return value
        return options[-1][0]

    def draw(self, category: str) -> Any:
        """A lexical entry of `category`, from the sentence topic's list or the everyday one."""
        pool = _POOLS.get((self.topic, category))
        if pool is None or self.topic == "general" or not self.chance(TOPIC_SHARE):
            pool = _POOLS.get(("general", category), pool)
        return pool.draw(self.rng)

    def tense(self, previous: str | None = None) -> str:
        if previous is not None and self.chance(0.7):
            return previous
        return "past" if self.chance(0.5) else "pres"

    # -- sentences and clauses

    def sentence(self) -> Sentence:
        self.topic = self.weighted(self.style.topics)
        self.size = self.rng.random() ** 0.6
        tense = self.tense()
        clauses = [self.clause(tense, 0, main=True, report=self.chance(self.style.report))]
        for _ in range(self.chance(0.15 + 0.55 * self.size) + self.chance(0.5 * self.size**2)):
            clauses.append(self.clause(self.tense(tense), 0, main=True))
        links = tuple(self.rng.choice(PHRASES.links) for _ in clauses[1:])
        return Sentence(tuple(clauses), links, self.front(clauses[0]))

    def front(self, first: Clause) -> Phrase | PP | None:
        """ "According to X,", "In Paris," or a time expression before the first clause, or nothing."""
        x = self.rng.random() - self.style.according
        if x < 0:
            return PP("according to", self.person() if self.chance(0.5) else self.np(MAX_DEPTH, animate=True))
        x -= self.style.place
        if x < 0:
            return PP("in", self.city())
        if x < 0.12 and first.time is None:
            return self.time(first.tense)
        return None

    def clause(self, tense: str, depth: int, *, main: bool = False, report: bool = False, gap: Agreeing | None = None, object_gap: bool = False) -> Clause:
        """A clause; `gap` makes it a subject relative about `gap`, `object_gap` an object relative."""
        if object_gap:
            verb = self.draw("tr")
            subj = self.simple_subject(animate=not verb.any_subject)
            return Clause(subj, verb, tense, None, **self.modifiers(verb, tense, depth, in_relative=True))
        kind = "cp" if report else self.verb_kind(gap, depth)
        verb = None if kind == "cop" else self.draw(kind + ("+any" if gap is not None and not gap.animate else ""))
        subj = None if gap is not None else self.subject(verb, depth, main)
        obj = self.object(verb, depth) if verb is not None and verb.kind in ("tr", "pv") else None
        comp = self.clause(self.tense(tense), depth + 1) if kind == "cp" else None
        pred = self.predicate() if verb is None else ()
        return Clause(subj, verb, tense, obj, pred, comp=comp, **self.modifiers(verb, tense, depth, gap is not None))

    def verb_kind(self, gap: Agreeing | None, depth: int) -> str:
        if gap is not None and not gap.animate:
            return self.weighted(_VERB_KINDS[:4])  # inanimate subjects do not say or think
        kind = self.weighted(_VERB_KINDS)
        return "tr" if kind == "cp" and depth >= 2 else kind

    def modifiers(self, verb: Verb | None, tense: str, depth: int, in_relative: bool) -> dict:
        """Negation, adverb, modal, verb-level prepositional phrase and time expression of a clause."""
        out: dict = {}
        x = self.rng.random()
        if verb is None or verb.kind != "cp":  # no "does not say that": French would need a subjunctive
            if x < 0.12:
                out["neg"] = True
            elif x < 0.24:
                out["adverb"] = self.rng.choice(PHRASES.adverbs)
            elif x < 0.32 and verb is not None:
                out["modal"] = self.rng.choice(PHRASES.modals)
        if verb is not None and depth < MAX_DEPTH and self.chance(0.08 + 0.3 * self.size):
            out["pp"] = self.pp(depth + 1, _VP_PREPS)
        if self.chance(0.05 if in_relative else 0.15):
            out["time"] = self.time(tense)
        return out

    def predicate(self) -> tuple[Adjective, ...]:
        first = self.draw("adj")
        second = self.draw("adj") if self.chance(0.25) else first
        return (first,) if second == first else (first, second)

    # -- noun phrases

    def subject(self, verb: Verb | None, depth: int, main: bool) -> Subject:
        animate = verb is not None and not verb.any_subject
        x = self.rng.random()
        if x < 0.1:
            return self.rng.choice((HE, SHE, THEY))
        if x < 0.1 + self.style.person:
            return self.person(relative=main and self.chance(0.1 + 0.2 * self.size), depth=depth)
        if main and x < 0.15 + self.style.person:
            return Coordination(self.simple_np(animate), self.simple_np(animate))
        return self.np(depth + 1, animate=animate, commas=main)

    def simple_subject(self, animate: bool) -> Subject:
        x = self.rng.random()
        if x < 0.25:
            return self.rng.choice((HE, SHE, THEY))
        if x < 0.25 + self.style.person:
            return self.person()
        return self.simple_np(animate)

    def object(self, verb: Verb, depth: int) -> Obj:
        x = self.rng.random()
        if verb.kind == "tr" and x < 0.07:
            return self.rng.choice((HE, SHE, THEY))
        if verb.locative and x < 0.4:
            return self.city()
        if depth == 0 and x < 0.12:
            return Coordination(self.simple_np(False), self.simple_np(False))
        if x < 0.17:
            return self.person()
        return self.np(depth + 1)

    def np(self, depth: int, *, animate: bool = False, commas: bool = False) -> NounPhrase:
        """A noun phrase, possibly with one prepositional phrase or one relative clause (`commas`: it
        may be non-restrictive); `animate` False means any noun."""
        core = self.simple_np(animate, possessor=True)
        if depth >= MAX_DEPTH:
            return core
        # "X's car of Y" would have two "de" phrases in French, in no obvious order: no PP after a possessor
        if core.possessor is None and self.chance(0.06 + 0.4 * self.size):
            return replace(core, pp=self.pp(depth + 1, _NP_PREPS))
        if self.chance(0.04 + 0.36 * self.size):
            return replace(core, rel=self.relative(core, depth + 1, commas and self.chance(0.35)))
        return core

    def simple_np(self, animate: bool, possessor: bool = False) -> NounPhrase:
        """Determiner, adjectives and noun (and, with `possessor`, maybe "the minister's")."""
        noun = self.draw("noun+animate" if animate else "noun")
        det, plural, number = self.determiner(noun)
        owner = self.possessor() if possessor and det == "the" and self.chance(0.06) else None
        return NounPhrase(noun, det, plural, self.adjectives(), possessor=owner, number=number)

    def possessor(self) -> NounPhrase | Person:
        """A singular owner ("the minister's", "Anna Smith's"): a plural one would need "the ministers'"."""
        if self.chance(0.5):
            return self.person()
        return NounPhrase(self.draw("noun+animate"), "the", False)

    def determiner(self, noun: Noun) -> tuple[str, bool, tuple[str, str] | None]:
        if noun.mass:
            return self.rng.choice(_MASS_DETS), False, None
        det = self.weighted(_DET_WEIGHTS)
        if det == "num":
            return det, True, self.number()
        number_constraint = DETERMINERS[det][1]
        return det, self.chance(0.3) if number_constraint is None else number_constraint, None

    def number(self) -> tuple[str, str]:
        if self.chance(0.92):
            return self.rng.choice(PHRASES.numbers)
        digits = str(self.rng.randint(11, 60))
        return digits, digits

    def adjectives(self) -> tuple[Adjective, ...]:
        if not self.chance(0.18 + 0.22 * self.size):
            return ()
        first = self.draw("adj")
        second = self.draw("adj") if self.chance(0.1 + 0.15 * self.size) else first
        return (first,) if second == first else (first, second)

    def relative(self, head: NounPhrase | Person, depth: int, commas: bool) -> Relative:
        if self.chance(0.65):
            clause = self.clause(self.tense(), depth, gap=head)
            gap = "subj"
        else:
            clause = self.clause(self.tense(), depth, object_gap=True)
            gap = "obj"
        if commas:
            pronoun = "who" if head.animate else "which"
        elif head.animate:
            pronoun = "who" if gap == "subj" and self.chance(0.7) else "that"
        else:
            pronoun = self.rng.choice(("that", "which"))
        return Relative(gap, clause, pronoun, commas)

    def pp(self, depth: int, preps: tuple[tuple[str, float], ...]) -> PP:
        prep = self.weighted(preps)
        if prep in ("in", "from", "near") and self.chance(0.2):
            return PP(prep, self.city())
        return PP(prep, self.np(depth))

    def person(self, relative: bool = False, depth: int = 0) -> Person:
        gender = "f" if self.chance(0.5) else "m"
        person = Person(_POOLS["names", gender].draw(self.rng), _POOLS["names", "last"].draw(self.rng), gender)
        if relative and depth < MAX_DEPTH:
            return Person(person.first, person.last, gender, self.relative(person, depth + 1, commas=True))
        return person

    def city(self) -> City:
        return _POOLS["names", "city"].draw(self.rng)

    def time(self, tense: str) -> Phrase:
        """A time expression that fits `tense` ("in 2012" and "three days ago" only in the past)."""
        x = self.rng.random()
        if x < 0.2:
            en, fr = self.rng.choice(PHRASES.days)
            return Phrase(("on", en), (fr,))
        if x < 0.35:
            en, fr = self.rng.choice(PHRASES.months)
            return Phrase(("in", en), ("en", fr))
        if tense == "past" and x < 0.5:
            year = str(self.rng.randint(2004, 2013))
            return Phrase(("in", year), ("en", year))
        if tense == "past" and x < 0.6:
            (n_en, n_fr), (unit_en, unit_fr) = self.rng.choice(PHRASES.numbers[:9]), self.rng.choice(PHRASES.ago_units)
            return Phrase((n_en, unit_en, "ago"), ("il", "y", "a", n_fr, unit_fr))
        return self.rng.choice(PHRASES.times[tense])


def draw_sentence(rng: random.Random, domain: str = "news") -> Sentence:
    """One sentence tree of `domain` ("news" or "pool")."""
    return Sampler(rng, domain).sentence()
