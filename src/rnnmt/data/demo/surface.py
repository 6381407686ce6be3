"""From a sentence tree to text: French contractions and elision, capitals, raw (untokenized) lines."""

from __future__ import annotations

from rnnmt.data.demo.grammar import Sentence
from rnnmt.data.demo.morphology import elides_before


def realise(sentence: Sentence) -> tuple[list[str], list[str]]:
    """English and French token lists (Moses tokenization of the raw sentences, before escaping)."""
    return _capitalise(sentence.en()), _capitalise(_fr_surface(sentence.fr()))


def detokenize(tokens: list[str]) -> str:
    """Raw text: punctuation and "'s" attached to the word before, elided French words to the word after."""
    text = ""
    for tok in tokens:
        glue = not text or tok in (",", ".", "'s") or text.endswith("'")
        text += tok if glue else " " + tok
    return text


def _fr_surface(tokens: list[str]) -> list[str]:
    """Apply French contractions (du, au, des, aux, sans + indefinite) and elision (l', d', qu', n', s'il)."""
    contracted: list[str] = []
    i = 0
    while i < len(tokens):
        tok, nxt = tokens[i], tokens[i + 1] if i + 1 < len(tokens) else ""
        after = tokens[i + 2] if i + 2 < len(tokens) else ""
        if tok in ("de", "à") and nxt == "les":
            contracted.append("des" if tok == "de" else "aux")
            i += 2
        elif tok in ("de", "à") and nxt == "le" and not elides_before(after):
            contracted.append("du" if tok == "de" else "au")
            i += 2
        elif tok == "de" and nxt in ("des", "de"):
            contracted.append("de")  # "de des amis" -> "d'amis", "de de grandes villes" -> "de grandes villes"
            i += 2
        elif tok == "sans" and nxt in ("un", "une", "des"):
            contracted.append("sans")  # "without a car" -> "sans voiture"
            i += 2
        else:
            contracted.append(tok)
            i += 1
    return [_elide(tok, contracted[i + 1] if i + 1 < len(contracted) else "") for i, tok in enumerate(contracted)]


def _elide(tok: str, nxt: str) -> str:
    if tok in ("le", "la", "de", "que", "ne") and nxt and elides_before(nxt):
        return tok[:-1] + "'"
    if tok == "si" and nxt in ("il", "ils"):
        return "s'"
    return tok


def _capitalise(tokens: list[str]) -> list[str]:
    return [tokens[0][:1].upper() + tokens[0][1:]] + tokens[1:] if tokens else tokens
