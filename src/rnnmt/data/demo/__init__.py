"""The offline demo's deterministic English→French corpus, drawn from a small generative grammar.

A grammar over real English and French words draws one tree per sentence and realises it twice, so
the French side is a deterministic function of the English side (BLEU can get high), yet one that
needs context: agreement, word order, elision and contractions.

Modules, in dependency order: `tables` reads the word lists (package data `lexicon/*.yaml`),
`morphology` inflects, `lexicon` builds the typed entries, `grammar` holds the sentence trees,
`surface` turns them into text, `sampler` draws trees, `corpus` draws, checks and writes corpora.
"""

from rnnmt.data.demo.corpus import DemoCorpus, generate_demo_corpus

__all__ = ["DemoCorpus", "generate_demo_corpus"]
