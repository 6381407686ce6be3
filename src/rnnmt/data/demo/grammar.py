"""Sentence trees of the demo grammar, each node realising itself as English and French tokens.

Nodes return English tokens (`en`) and French tokens (`fr`). The French side needs context that
position-wise copying cannot supply: gender and number agreement of determiners, adjectives, verbs
and participles; most adjectives after the noun; object pronouns before the verb; "the minister's
car" as "la voiture du ministre"; "ne ... pas" around the verb. French elision and contractions are
applied once to the whole sentence (`rnnmt.data.demo.surface`).
"""

from __future__ import annotations

from dataclasses import dataclass

from rnnmt.data.demo.lexicon import Adjective, City, Modal, Noun, Phrase, Verb
from rnnmt.data.demo.morphology import elides_before, fr_agree, takes_an

# key: English, number (True plural only, False singular only, None either), French m.sg, f.sg, m.pl, f.pl
DETERMINERS = {
    "the": ("the", None, "le", "la", "les", "les"),
    "a": ("a", False, "un", "une", "", ""),
    "some": ("some", True, "", "", "des", "des"),
    "bare": ("", True, "", "", "des", "des"),
    "this": ("this", False, "ce", "cette", "", ""),
    "these": ("these", True, "", "", "ces", "ces"),
    "his": ("his", None, "son", "sa", "ses", "ses"),
    "her": ("her", None, "son", "sa", "ses", "ses"),
    "their": ("their", None, "leur", "leur", "leurs", "leurs"),
    "our": ("our", None, "notre", "notre", "nos", "nos"),
    "my": ("my", None, "mon", "ma", "mes", "mes"),
    "every": ("every", False, "chaque", "chaque", "", ""),
    "all": ("all the", True, "", "", "tous les", "toutes les"),
    "many": ("many", True, "", "", "beaucoup de", "beaucoup de"),
    "several": ("several", True, "", "", "plusieurs", "plusieurs"),
}
# English preposition: French preposition
PREPOSITIONS = {
    "of": "de",
    "in": "dans",
    "on": "sur",
    "with": "avec",
    "for": "pour",
    "from": "de",
    "near": "près de",
    "about": "sur",
    "without": "sans",
    "after": "après",
    "before": "avant",
    "during": "pendant",
    "against": "contre",
    "under": "sous",
    "behind": "derrière",
    "towards": "vers",
    "despite": "malgré",
    "according to": "selon",
}
_LOCATIVE_FR = frozenset({"dans", "à", "en"})  # become "à" before a city name

NEVER = Phrase(("never",), ("jamais",))  # the negative adverb: "ne ... jamais", no "do not"

_EN_BE = {("pres", False): "is", ("pres", True): "are", ("past", False): "was", ("past", True): "were"}
_FR_BE = {("pres", False): "est", ("pres", True): "sont", ("past", False): "était", ("past", True): "étaient"}
_FR_HAVE = {False: "a", True: "ont"}
_FR_BE_AUX = {False: "est", True: "sont"}


@dataclass(frozen=True)
class Pronoun:
    en_subj: str
    en_obj: str
    fr_subj: str
    fr_obj: str
    gender: str
    plural: bool
    animate = True

    def en(self) -> list[str]:
        return [self.en_subj]

    def fr(self, subject: bool = False) -> list[str]:
        return [self.fr_subj]


HE = Pronoun("he", "him", "il", "le", "m", False)
SHE = Pronoun("she", "her", "elle", "la", "f", False)
THEY = Pronoun("they", "them", "ils", "les", "m", True)


@dataclass(frozen=True)
class Person:
    first: str
    last: str
    gender: str
    rel: Relative | None = None  # only non-restrictive: "John Smith, who ..., said"
    plural = False
    animate = True

    def en(self) -> list[str]:
        return [self.first, self.last] + (self.rel.en(self) if self.rel else [])

    def fr(self, subject: bool = False) -> list[str]:
        return [self.first, self.last] + (self.rel.fr(self) if self.rel else [])


@dataclass(frozen=True)
class NounPhrase:
    noun: Noun
    det: str  # a key of DETERMINERS, or "num" for `number`
    plural: bool
    adjs: tuple[Adjective, ...] = ()
    pp: PP | None = None
    rel: Relative | None = None
    possessor: NounPhrase | Person | None = None  # "the minister's car": `det` is then unused
    number: tuple[str, str] | None = None  # English and French cardinal for det "num"

    @property
    def gender(self) -> str:
        return self.noun.gender

    @property
    def animate(self) -> bool:
        return self.noun.animate

    def en(self) -> list[str]:
        words = [a.en for a in self.adjs] + [self.noun.en_pl if self.plural else self.noun.en]
        if self.possessor is not None:
            det = self.possessor.en() + ["'s"]
        elif self.det == "num":
            det = [self.number[0]]
        else:
            det = DETERMINERS[self.det][0].split()
            if det == ["a"] and takes_an(words[0]):
                det = ["an"]
        tail = (self.pp.en() if self.pp else []) + (self.rel.en(self) if self.rel else [])
        return det + words + tail

    def fr(self, subject: bool = False, negated: bool = False) -> list[str]:
        """French tokens; `negated` marks the direct object of a negated verb ("pas de voitures")."""
        head = self._fr_head()
        pre_adjective = head[0] != (self.noun.fr_pl if self.plural else self.noun.fr)
        out = self._fr_determiner(subject, negated, head[0], pre_adjective) + head
        if self.possessor is not None:
            out += ["de"] + self.possessor.fr()
        if self.pp:
            out += self.pp.fr()
        if self.rel:
            out += self.rel.fr(self)
        return out

    def _fr_head(self) -> list[str]:
        """Noun with its adjectives: the few pre-nominal ones before, the rest after in mirror order."""
        noun = self.noun.fr_pl if self.plural else self.noun.fr
        before: list[str] = []
        next_word = noun
        for adj in reversed([a for a in self.adjs if a.before]):
            next_word = adj.fr(self.gender, self.plural, next_word)
            before.insert(0, next_word)
        after = [a.fr(self.gender, self.plural) for a in reversed(self.adjs) if not a.before]
        return before + [noun] + after

    def _fr_determiner(self, subject: bool, negated: bool, next_word: str, pre_adjective: bool) -> list[str]:
        if self.possessor is not None:
            return ["les" if self.plural else ("la" if self.gender == "f" else "le")]
        if self.det == "num":
            return [self.number[1]]
        if negated and self.det in ("a", "some", "bare"):
            return ["de"]
        if self.det == "bare" and subject:
            return ["les"]  # generic plural subject: "Cars are fast" -> "Les voitures sont rapides"
        forms = DETERMINERS[self.det][2:]
        word = forms[(2 if self.plural else 0) + (self.gender == "f")]
        if word == "des" and pre_adjective:
            word = "de"
        elif word == "ce" and elides_before(next_word):
            word = "cet"
        elif word in ("ma", "sa") and elides_before(next_word):
            word = {"ma": "mon", "sa": "son"}[word]  # "son amie", not "sa amie"
        return word.split()


@dataclass(frozen=True)
class Coordination:
    """Two simple subjects or objects joined by "and": plural, masculine unless both are feminine."""

    left: NounPhrase | Person
    right: NounPhrase | Person
    plural = True

    @property
    def gender(self) -> str:
        return "f" if self.left.gender == self.right.gender == "f" else "m"

    @property
    def animate(self) -> bool:
        return self.left.animate and self.right.animate

    def en(self) -> list[str]:
        return self.left.en() + ["and"] + self.right.en()

    def fr(self, subject: bool = False) -> list[str]:
        return self.left.fr(subject) + ["et"] + self.right.fr(subject)


@dataclass(frozen=True)
class PP:
    prep: str  # a key of PREPOSITIONS
    np: NounPhrase | Person | City

    def en(self) -> list[str]:
        return self.prep.split() + self.np.en()

    def fr(self) -> list[str]:
        return _fr_preposition(PREPOSITIONS[self.prep], self.np) + self.np.fr()


def _fr_preposition(prep: str, np: Obj) -> list[str]:
    """French preposition before `np`: "dans la ville" but "à Paris"."""
    if isinstance(np, City) and prep in _LOCATIVE_FR:
        return ["à"]
    return prep.split()


@dataclass(frozen=True)
class Relative:
    gap: str  # "subj" (who/that + verb) or "obj" (that + subject + verb)
    clause: Clause
    pronoun: str  # English who / that / which
    commas: bool = False  # non-restrictive

    def en(self, antecedent: Agreeing) -> list[str]:
        comma = [","] if self.commas else []
        return comma + [self.pronoun] + self.clause.en(antecedent) + comma

    def fr(self, antecedent: Agreeing) -> list[str]:
        comma = [","] if self.commas else []
        return comma + ["qui" if self.gap == "subj" else "que"] + self.clause.fr(antecedent) + comma


Subject = NounPhrase | Person | Pronoun | Coordination
Obj = NounPhrase | Person | Pronoun | Coordination | City
Agreeing = NounPhrase | Person | Pronoun | Coordination | City


@dataclass(frozen=True)
class Clause:
    """One clause; `subj` None is the gap of a subject relative, `obj` None with a "tr" verb the gap of
    an object relative. `verb` None makes a copula with adjectives `pred`. A clause with a modal takes
    neither negation nor adverb (the sampler never combines them)."""

    subj: Subject | None
    verb: Verb | None
    tense: str  # "pres" | "past"
    obj: Obj | None = None
    pred: tuple[Adjective, ...] = ()
    neg: bool = False
    adverb: Phrase | None = None  # NEVER is the negative adverb ("ne ... jamais")
    modal: Modal | None = None
    pp: PP | None = None
    time: Phrase | None = None
    comp: Clause | None = None  # "said that ..."

    def en(self, antecedent: Agreeing | None = None) -> list[str]:
        agreement = self.subj if self.subj is not None else antecedent
        out = self.subj.en() if self.subj is not None else []
        out += self._en_verb_group(agreement.plural)
        if self.verb is not None:
            out += self.verb.en_prep.split()
        if isinstance(self.obj, Pronoun):
            out.append(self.obj.en_obj)
        elif self.obj is not None:
            out += self.obj.en()
        return out + self._tail("en")

    def fr(self, antecedent: Agreeing | None = None) -> list[str]:
        agreement = self.subj if self.subj is not None else antecedent
        out = self.subj.fr(subject=True) if self.subj is not None else []
        out += self._fr_verb_group(agreement, antecedent)
        if isinstance(self.obj, NounPhrase) and self.negated and not self.verb.fr_prep:
            out += self.obj.fr(negated=True)
        elif self.obj is not None and not isinstance(self.obj, Pronoun):
            out += _fr_preposition(self.verb.fr_prep, self.obj) + self.obj.fr()
        return out + self._tail("fr")

    @property
    def negated(self) -> bool:
        return self.neg or self.adverb == NEVER

    def _tail(self, lang: str) -> list[str]:
        """VP-level prepositional phrase, time expression and that-clause, in this order in both languages."""
        out: list[str] = []
        if self.pp:
            out += getattr(self.pp, lang)()
        if self.time:
            out += getattr(self.time, lang)
        if self.comp:
            out += ["that" if lang == "en" else "que"] + getattr(self.comp, lang)()
        return out

    def _en_verb_group(self, plural: bool) -> list[str]:
        past = self.tense == "past"
        adverb = list(self.adverb.en) if self.adverb else []
        if self.verb is None:
            pred = _join_and([[a.en] for a in self.pred], "and")
            return [_EN_BE[self.tense, plural]] + (["not"] if self.neg else []) + adverb + pred
        if self.modal is not None:
            return self.modal.en[2 if past else int(plural)].split() + [self.verb.en]
        if self.neg:
            return ["did" if past else ("do" if plural else "does"), "not", self.verb.en]
        return adverb + [self.verb.en_past if past else (self.verb.en if plural else self.verb.en_3sg)]

    def _fr_verb_group(self, agreement: Agreeing, antecedent: Agreeing | None) -> list[str]:
        plural, past = agreement.plural, self.tense == "past"
        neg_word = "jamais" if self.adverb == NEVER else ("pas" if self.neg else "")
        adverb = list(self.adverb.fr) if self.adverb and self.adverb != NEVER else []
        clitic = [self.obj.fr_obj] if isinstance(self.obj, Pronoun) else []
        if self.verb is None:
            pred = _join_and([[a.fr(agreement.gender, plural)] for a in self.pred], "et")
            return _negate([_FR_BE[self.tense, plural]], neg_word) + adverb + pred
        if self.modal is not None:
            return [self.modal.fr[2 * past + plural]] + clitic + [self.verb.fr_inf]
        if not past:
            return _negate(clitic + [self.verb.fr_3pl if plural else self.verb.fr_3sg], neg_word) + adverb
        aux = (_FR_BE_AUX if self.verb.etre else _FR_HAVE)[plural]
        return _negate(clitic + [aux], neg_word) + adverb + [self._fr_participle(agreement, antecedent)]

    def _fr_participle(self, agreement: Agreeing, antecedent: Agreeing | None) -> str:
        """Past participle agreeing with the subject (être) or with a direct object placed before it."""
        if self.verb.etre:
            target = agreement
        elif isinstance(self.obj, Pronoun):
            target = self.obj
        elif self.obj is None and self.verb.kind == "tr" and self.subj is not None:
            target = antecedent  # object relative: "la lettre que le ministre a écrite"
        else:
            return self.verb.fr_pp
        return fr_agree(self.verb.fr_pp, target.gender, target.plural)


def _negate(words: list[str], neg_word: str) -> list[str]:
    return ["ne"] + words + [neg_word] if neg_word else words


def _join_and(parts: list[list[str]], conjunction: str) -> list[str]:
    out: list[str] = []
    for i, part in enumerate(parts):
        out += ([conjunction] if i else []) + part
    return out


@dataclass(frozen=True)
class Sentence:
    clauses: tuple[Clause, ...]
    links: tuple[Phrase, ...] = ()  # connectives between consecutive clauses
    front: Phrase | PP | None = None  # fronted time expression or place / "according to" phrase

    def en(self) -> list[str]:
        return self._join("en")

    def fr(self) -> list[str]:
        return self._join("fr")

    def _join(self, lang: str) -> list[str]:
        out: list[str] = []
        if isinstance(self.front, PP):
            out += getattr(self.front, lang)() + [","]
        elif self.front is not None:
            out += list(getattr(self.front, lang)) + [","]
        for i, clause in enumerate(self.clauses):
            if i:
                out += list(getattr(self.links[i - 1], lang))
            out += getattr(clause, lang)()
        return out + ["."]
