"""English and French inflection and orthography rules; their exceptions are `lexicon/morphology.yaml`."""

from __future__ import annotations

import re

from rnnmt.data.demo.tables import read_table, rows, unique, words

_TABLE = read_table("morphology")
_EN_IRREGULAR_PLURALS = unique(
    ((singular, plural) for singular, plural in rows(_TABLE.get("en_irregular_plurals"), "en_irregular_plurals", 2)), "en_irregular_plurals"
)
# infinitive: (present 3sg, present 3pl, past participle)
_FR_IRREGULAR_VERBS = unique(((inf, (sg, pl, pp)) for inf, sg, pl, pp in rows(_TABLE.get("fr_irregular_verbs"), "fr_irregular_verbs", 4)), "fr_irregular_verbs")
# m.sg: (m.sg, f.sg, m.pl, f.pl, m.sg before a vowel)
_FR_IRREGULAR_ADJECTIVES = unique(
    ((forms[0], tuple(forms)) for forms in rows(_TABLE.get("fr_irregular_adjectives"), "fr_irregular_adjectives", 5)), "fr_irregular_adjectives"
)
_ASPIRATED_H = frozenset(words(_TABLE.get("aspirated_h"), "aspirated_h"))

# --- English ------------------------------------------------------------------------------------


def en_plural(word: str) -> str:
    """English plural of a noun."""
    if word in _EN_IRREGULAR_PLURALS:
        return _EN_IRREGULAR_PLURALS[word]
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def en_third_person(verb: str) -> str:
    """English present third person singular."""
    if verb.endswith(("s", "x", "z", "ch", "sh", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def en_past(verb: str) -> str:
    """English simple past of a regular verb (doubling and irregular pasts are listed in the lexicon)."""
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


def takes_an(word: str) -> bool:
    """Whether the English article before `word` is "an"."""
    low = word.lower()
    if low.startswith(("hour", "honest", "honour")):
        return True
    return low[:1] in "aeiou" and not low.startswith(("uni", "use", "usu", "eu", "one"))


# --- French -------------------------------------------------------------------------------------


def fr_plural(word: str) -> str:
    """French plural of a noun."""
    if word.endswith(("s", "x", "z")):
        return word
    if word.endswith("al"):
        return word[:-2] + "aux"
    if word.endswith(("au", "eu")):
        return word + "x"
    return word + "s"


def fr_adjective_forms(masc: str, fem: str = "") -> tuple[str, str, str, str, str]:
    """m.sg, f.sg, m.pl, f.pl and m.sg before a vowel of a French adjective; `fem` an irregular feminine."""
    fem = fem or _fr_feminine(masc)
    return _FR_IRREGULAR_ADJECTIVES.get(masc, (masc, fem, _fr_masculine_plural(masc), fem + "s", masc))


def _fr_feminine(adj: str) -> str:
    """French feminine singular of a regular adjective."""
    for masc, fem in (("eux", "euse"), ("if", "ive"), ("el", "elle"), ("en", "enne"), ("on", "onne"), ("er", "ère")):
        if adj.endswith(masc):
            return adj[: -len(masc)] + fem
    return adj if adj.endswith("e") else adj + "e"


def _fr_masculine_plural(adj: str) -> str:
    """French masculine plural of a regular adjective."""
    if adj.endswith(("s", "x")):
        return adj
    if adj.endswith("al"):
        return adj[:-2] + "aux"
    return adj + "s"


def fr_agree(word: str, gender: str, plural: bool) -> str:
    """Inflect a past participle for gender and number."""
    if gender == "f":
        word += "e"
    if plural and not word.endswith(("s", "x")):
        word += "s"
    return word


def fr_conjugate(infinitive: str) -> tuple[str, str, str]:
    """French present 3sg, present 3pl and past participle."""
    if infinitive in _FR_IRREGULAR_VERBS:
        return _FR_IRREGULAR_VERBS[infinitive]
    stem = infinitive[:-2]
    if infinitive.endswith("er"):
        return _fr_first_group(stem)
    if infinitive.endswith("ir"):
        return stem + "it", stem + "issent", stem + "i"
    if infinitive.endswith("dre"):
        return infinitive[:-2], infinitive[:-2] + "ent", infinitive[:-2] + "u"
    raise ValueError(f"no conjugation for French verb {infinitive!r}")


def _fr_first_group(stem: str) -> tuple[str, str, str]:
    """Conjugate an -er verb, with the è of préfère/achète and the i of envoie before a silent ending."""
    mute = stem
    if stem.endswith("y"):
        mute = stem[:-1] + "i"
    elif m := re.search(r"(é|e(?=[^aeiouyéèêâîôûh]$))([^aeiouyéèêâîôûh]+)$", stem):
        mute = stem[: m.start()] + "è" + m.group(2)
    return mute + "e", mute + "ent", stem + "é"


def elides_before(word: str) -> bool:
    """Whether French elision (l', d', qu', n') and vowel forms apply before `word`."""
    first = word[:1]
    if first.lower() in "aeiouàâéèêëîïôœû":
        return True
    return first == "h" and word not in _ASPIRATED_H
