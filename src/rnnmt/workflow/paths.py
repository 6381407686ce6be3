"""Every file the workflow writes under results/, written once: rules pass wildcards ("{pair}"), input functions values.

Each function's defaults are the rule's wildcard names, so `tok()` is the tokenize rule's output pattern and
`tok("en-fr", "test", "fr")` one of its files.
"""

from __future__ import annotations

RESULTS = "results"
DATA = f"{RESULTS}/data"


def archive(file: str = "{file}") -> str:
    """A downloaded WMT archive (its record beside it: `archive(...) + ".json"`)."""
    return f"{DATA}/archives/{file}"


def extracted(archive: str = "{archive}", member: str = "{member}") -> str:
    return f"{DATA}/extracted/{archive}/{member}"


def raw_dir(pair: str = "{pair}") -> str:
    """A pair's corpora as downloaded or generated."""
    return f"{DATA}/raw/{pair}"


def raw(pair: str = "{pair}", corpus: str = "{corpus}", ext: str = "{lang}") -> str:
    """One corpus as downloaded or generated: `.{lang}` text, `.json` its assembly report."""
    return f"{raw_dir(pair)}/{corpus}.{ext}"


def raw_report(pair: str = "{pair}") -> str:
    """The pair's corpus report (or the demo generator's)."""
    return f"{raw_dir(pair)}/report.json"


def corpus(pair: str = "{pair}", split: str = "{split}", ext: str = "{lang}") -> str:
    """A split's corpora concatenated: `.{lang}` text, `.json` report."""
    return f"{DATA}/corpus/{pair}/{split}.{ext}"


def tok(pair: str = "{pair}", split: str = "{split}", lang: str = "{lang}") -> str:
    return f"{DATA}/tok/{pair}/{split}.{lang}"


def selection(pair: str = "{pair}", name: str = "{name}") -> str:
    """A file of the Axelrod selection's working folder (vocabularies, LMs, sample, index, scores, ranking)."""
    return f"{DATA}/selection/{pair}/{name}"


def selected(pair: str = "{pair}", name: str = "{name}") -> str:
    """The training pairs the selection kept (`train.{lang}`) and its report (`report.json`)."""
    return f"{DATA}/selected/{pair}/{name}"


def vocab(pair: str = "{pair}", lang: str = "{lang}") -> str:
    return f"{DATA}/vocab/{pair}/vocab.{lang}.json"


def bpe_codes(pair: str = "{pair}", codes: str = "{codes}") -> str:
    """BPE merges of one language of a pair (`codes` its code), or of both (`codes` "joint", vocab.joint)."""
    return f"{DATA}/vocab/{pair}/bpe.{codes}.codes"


def binarized(pair: str = "{pair}", part: str = "{part}") -> str:
    return f"{DATA}/bin/{pair}/{part}.pt"


def nounk_ids(pair: str = "{pair}", split: str = "{split}") -> str:
    """Line numbers of a test split's No-UNK subset."""
    return f"{DATA}/nounk/{pair}/{split}.ids"


def unk_dictionary(pair: str = "{pair}") -> str:
    return f"{DATA}/unkdict/{pair}.tsv"


def settings(name: str = "{name}") -> str:
    """A resolved settings file a command reads: SYSTEM (training), decode/SYSTEM, tables/TABLE, claims, coverage."""
    return f"{RESULTS}/config/{name}.json"


def model(system: str = "{system}", name: str = "model.pt") -> str:
    """A trained system's folder: model.pt, meta.json (its training record), ckpt/."""
    return f"{RESULTS}/models/{system}/{name}"


def translation(system: str = "{system}", split: str = "{split}", subset: str = "{subset}", ext: str = "txt") -> str:
    """Test translations: subset all / nounk (as decoded) or unk (UNK replaced); `.align` beside the text."""
    return f"{RESULTS}/translations/{system}/{split}.{subset}.{ext}"


def scores(name: str = "{score}") -> str:
    """A score file, named [SPLIT/]SYSTEM[.unk] (plan.score_name)."""
    return f"{RESULTS}/scores/{name}.json"


def alignments(system: str = "{system}") -> str:
    return f"{RESULTS}/alignments/{system}.json"


def table(name: str = "{table}", ext: str = "md") -> str:
    return f"{RESULTS}/tables/{name}.{ext}"


def figure(name: str) -> str:
    return f"{RESULTS}/figures/{name}.png"


def provenance() -> str:
    return f"{RESULTS}/provenance.json"


def log(rule: str, name: str) -> str:
    """A job's log: results/logs/RULE/NAME.log."""
    return f"{RESULTS}/logs/{rule}/{name}.log"


def benchmark(rule: str, name: str) -> str:
    """A job's time and memory (snakemake's benchmark:): results/benchmarks/RULE/NAME.tsv."""
    return f"{RESULTS}/benchmarks/{rule}/{name}.tsv"
