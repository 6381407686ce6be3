"""The demo lexicon: typed entries built from the package data files `lexicon/*.yaml`.

Each file documents its entry format. Lists keep their file order, which the sampler's Zipf draws
depend on; a word listed twice is an error rather than a silently shadowed entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rnnmt.data.demo.morphology import elides_before, en_past, en_plural, en_third_person, fr_adjective_forms, fr_conjugate, fr_plural
from rnnmt.data.demo.tables import read_table, rows, tuples, unique, words

VERB_KINDS = ("tr", "in", "cp")  # in the data files; "tr" entries with a preposition become kind "pv"

# --- entries ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Noun:
    en: str
    en_pl: str
    fr: str
    fr_pl: str
    gender: str
    animate: bool
    mass: bool
    topic: str


@dataclass(frozen=True)
class Adjective:
    en: str
    forms: tuple[str, str, str, str, str]  # m.sg, f.sg, m.pl, f.pl, m.sg before a vowel
    before: bool  # placed before the noun in French
    topic: str

    def fr(self, gender: str, plural: bool, next_word: str = "") -> str:
        """The French form agreeing with a noun; `next_word` selects bel/nouvel/vieil."""
        if gender == "m" and not plural and next_word and elides_before(next_word):
            return self.forms[4]
        return self.forms[(2 if plural else 0) + (gender == "f")]


@dataclass(frozen=True)
class Verb:
    en: str
    en_3sg: str
    en_past: str
    en_prep: str
    fr_inf: str
    fr_3sg: str
    fr_3pl: str
    fr_pp: str
    fr_prep: str
    kind: str  # tr: direct object in both languages; pv: object after a preposition; in: none; cp: that-clause
    etre: bool
    any_subject: bool
    locative: bool
    topic: str

    @property
    def key(self) -> str:
        return f"{self.en} {self.en_prep}".strip()


@dataclass(frozen=True)
class City:
    """A place name; it is a whole noun phrase by itself (masculine singular in agreement)."""

    en_name: str
    fr_name: tuple[str, ...]  # may carry its article: ("le", "Caire")
    gender = "m"
    plural = False
    animate = False

    def en(self) -> list[str]:
        return [self.en_name]

    def fr(self, subject: bool = False) -> list[str]:
        return list(self.fr_name)


@dataclass(frozen=True)
class Phrase:
    """A fixed pair of token sequences (time expression, connective, adverb)."""

    en: tuple[str, ...]
    fr: tuple[str, ...]


@dataclass(frozen=True)
class Modal:
    en: tuple[str, str, str]  # present singular, present plural, past
    fr: tuple[str, str, str, str]  # present 3sg, 3pl, imperfect 3sg, 3pl


@dataclass(frozen=True)
class Lexicon:
    """The open word lists, keyed by English lemma (verbs: lemma plus preposition, "look at")."""

    nouns: dict[str, Noun]
    adjectives: dict[str, Adjective]
    verbs: dict[str, Verb]
    first_names: dict[str, tuple[str, ...]]  # by gender, "m" and "f"
    last_names: tuple[str, ...]
    cities: tuple[City, ...]


@dataclass(frozen=True)
class Phrases:
    """The closed lists of fixed expressions (English, French)."""

    numbers: tuple[tuple[str, str], ...]
    days: tuple[tuple[str, str], ...]
    months: tuple[tuple[str, str], ...]
    ago_units: tuple[tuple[str, str], ...]
    times: dict[str, tuple[Phrase, ...]]  # by tense, "past" and "pres"
    adverbs: tuple[Phrase, ...]
    links: tuple[Phrase, ...]
    modals: tuple[Modal, ...]


# --- parsing the data files ---------------------------------------------------------------------


def _nouns(table: dict[str, Any]) -> list[Noun]:
    """Entries "english french tag" (tag: gender m/f, upper case if animate, trailing u if uncountable)."""
    nouns = []
    for topic, block in table.items():
        where = f"nouns.yaml: {topic}"
        for en, fr, tag in rows(block, where, 3):
            if not re.fullmatch(r"[mfMF]u?", tag):
                raise ValueError(f"{where}: noun {en!r} has tag {tag!r}, not m, f, M or F with an optional u")
            gender, animate, mass = tag[0].lower(), tag[0].isupper(), tag.endswith("u")
            nouns.append(Noun(en, en_plural(en), fr, fr_plural(fr), gender, animate, mass, topic))
    return nouns


def _adjectives(table: dict[str, Any]) -> list[Adjective]:
    """Entries "english [+]masc[/fem]" ("+": before the noun in French)."""
    adjectives = []
    for topic, block in table.items():
        for en, fr in rows(block, f"adjectives.yaml: {topic}", 2):
            masc, _, fem = fr.lstrip("+").partition("/")
            adjectives.append(Adjective(en, fr_adjective_forms(masc, fem), fr.startswith("+"), topic))
    return adjectives


def _verbs(table: dict[str, Any]) -> list[Verb]:
    verbs = []
    for topic, sections in table.items():
        if not isinstance(sections, dict) or not set(sections) <= set(VERB_KINDS):
            raise ValueError(f"verbs.yaml: {topic} must map verb kinds ({', '.join(VERB_KINDS)}) to lists")
        for kind, block in sections.items():
            where = f"verbs.yaml: {topic}: {kind}"
            verbs += [_verb(fields, topic, kind, where) for fields in rows(block, where, min_fields=2)]
    return verbs


def _verb(fields: list[str], topic: str, section: str, where: str) -> Verb:
    """One entry "english[/past][+prep] french[+prep] [flags]" of a `section` (tr, in or cp)."""
    en, fr, flags = fields[0], fields[1], "".join(fields[2:])
    if not set(flags) <= set("exl"):
        raise ValueError(f"{where}: verb {en!r} has flags {flags!r}; expected letters among e, x and l")
    en_forms, _, en_prep = en.partition("+")
    lemma, _, past = en_forms.partition("/")
    infinitive, _, fr_prep = fr.partition("+")
    kind = section if section != "tr" else ("pv" if en_prep or fr_prep else "tr")
    return Verb(
        lemma,
        en_third_person(lemma),
        past or en_past(lemma),
        en_prep,
        infinitive,
        *fr_conjugate(infinitive),
        fr_prep,
        kind,
        "e" in flags,
        "x" in flags,
        "l" in flags,
        topic,
    )


def load_lexicon() -> Lexicon:
    """Nouns, adjectives, verbs and names from the package data files."""
    names = read_table("names")
    first = names.get("first_names")
    if not isinstance(first, dict) or set(first) != {"m", "f"}:
        raise ValueError("names.yaml: first_names must map the genders m and f to lists of names")
    return Lexicon(
        unique(((n.en, n) for n in _nouns(read_table("nouns"))), "nouns.yaml"),
        unique(((a.en, a) for a in _adjectives(read_table("adjectives"))), "adjectives.yaml"),
        unique(((v.key, v) for v in _verbs(read_table("verbs"))), "verbs.yaml"),
        {gender: words(first[gender], f"names.yaml: first_names: {gender}") for gender in ("m", "f")},
        words(names.get("last_names"), "names.yaml: last_names"),
        tuple(City(e[0], tuple(e[1:])) for e in rows(names.get("cities"), "names.yaml: cities", min_fields=2)),
    )


def load_phrases() -> Phrases:
    """Numbers, dates, time expressions, adverbs, connectives and modals from `lexicon/phrases.yaml`."""
    table = read_table("phrases")

    def pairs(key: str) -> tuple[tuple[str, str], ...]:
        return tuple(tuples(table.get(key), f"phrases.yaml: {key}", 2))  # type: ignore[arg-type]

    def phrases(value: Any, where: str) -> tuple[Phrase, ...]:
        return tuple(Phrase(tuple(en.split()), tuple(fr.split())) for en, fr in tuples(value, where, 2))

    times = table.get("times")
    if not isinstance(times, dict) or set(times) != {"past", "pres"}:
        raise ValueError("phrases.yaml: times must map the tenses past and pres to lists")
    modals = tuples(table.get("modals"), "phrases.yaml: modals", 7)
    return Phrases(
        pairs("numbers"),
        pairs("days"),
        pairs("months"),
        pairs("ago_units"),
        {tense: phrases(times[tense], f"phrases.yaml: times: {tense}") for tense in ("past", "pres")},
        phrases(table.get("adverbs"), "phrases.yaml: adverbs"),
        phrases(table.get("links"), "phrases.yaml: links"),
        tuple(Modal(m[:3], m[3:]) for m in modals),  # type: ignore[arg-type]
    )


LEXICON = load_lexicon()
PHRASES = load_phrases()
