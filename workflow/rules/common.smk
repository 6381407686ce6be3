# Helpers only: config validation, the active scale, path helpers and input functions.
import json
import re
import sys

import shlex

from rnnmt import config as rnnmt_config
from rnnmt.data import sources as rnnmt_sources
from rnnmt.errors import UserError
from rnnmt.fileio import write_json


def _resolve_data():
    """Validate config.yaml, then resolve every corpus name of the active scale in the sources table."""
    rnnmt_config.validate(config, Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml")
    preset = rnnmt_config.preset(config)
    table = rnnmt_sources.load(config["download"]["sources"], config["download"]["checksums"])
    pairs = {pair: (config["pairs"][pair]["src"], config["pairs"][pair]["tgt"]) for pair in preset["corpora"]}
    splits = {pair: rnnmt_sources.pair_splits(table, preset["corpora"][pair], *pairs[pair]) for pair in pairs}
    method = preset["selection"]["method"]
    for name in rnnmt_config.active_systems(config):
        pair = config["systems"][name]["pair"]
        if method in table["preselected"]:
            splits[pair]["preselected"] = [rnnmt_sources.preselected(table, method, *pairs[pair])]
    corpora = {}
    if preset["data"]["source"] != "synthetic":
        corpora = {
            pair: {name: rnnmt_sources.corpus(table, name, *pairs[pair]) for names in splits[pair].values() for name in names}
            for pair in pairs
        }
    for pair in corpora:
        for split, names in splits[pair].items():
            if len({corpora[pair][name].tokenized for name in names}) > 1:
                raise UserError(f"the {split} corpora of {pair} mix Moses-tokenized files and raw text ({', '.join(names)}); use one kind.")
    return table, splits, corpora


try:
    SOURCES, SPLIT_CORPORA, CORPORA = _resolve_data()
except UserError as exc:
    # One line and a non-zero exit before any job runs, not a traceback.
    sys.exit(f"rnnmt: {exc}")

PRESET = rnnmt_config.preset(config)
SYSTEMS = rnnmt_config.active_systems(config)
PAIRS = sorted({config["systems"][s]["pair"] for s in SYSTEMS})
BPE = PRESET["vocab"]["kind"] == "bpe"
DEMO = PRESET["data"]["source"] == "synthetic"
# The split the selection step reads: LIUM's released selection, or the pool to select from.
SELECTION_SPLIT = "preselected" if PRESET["selection"]["method"] in SOURCES["preselected"] else "pool"
ARCHIVE_FILES = {rnnmt_sources.file_name(SOURCES, key): key for key in SOURCES["archives"]}
# How score files measure BLEU against length (Figure 2 settings; schema defaults when the figure is off).
LENGTH_CURVE = {
    key: config["figures"].get("bahdanau2014_fig2", {}).get(key, default)
    for key, default in (("window", 10), ("max_length", 60), ("length_by", "source"))
}
# Which file a table row reads, by table kind.
TABLE_FILES = {"bleu": "results/scores/{system}.json", "learning": "results/models/{system}/meta.json"}
DEMO_BANNER_PLAIN = "Synthetic demo data: not comparable with the papers' numbers"


wildcard_constraints:
    pair=r"[a-z]{2}-[a-z]{2}",
    lang=r"[a-z]{2}",
    src=r"[a-z]{2}",
    tgt=r"[a-z]{2}",
    split="pool|indomain|dev|test|preselected",
    corpus="|".join(map(re.escape, sorted({c for names in CORPORA.values() for c in names}))) or "NONE",
    archive="|".join(map(re.escape, SOURCES["archives"])),
    file="|".join(map(re.escape, ARCHIVE_FILES)),
    system="|".join(map(re.escape, SYSTEMS)) if SYSTEMS else "NONE",
    table="|".join(map(re.escape, config["tables"])),
    subset="all|nounk",


def langs(pair):
    """(source, target) language codes of a pair."""
    p = config["pairs"][pair]
    return p["src"], p["tgt"]


def tgt_lang(system):
    return langs(config["systems"][system]["pair"])[1]


def split_corpora(pair, split):
    """The raw corpora that make up one split of a pair at the active scale (the tables read the first test set)."""
    splits = SPLIT_CORPORA[pair]
    if split == "test":
        return splits["test"][:1]
    return splits["train" if split == "pool" else split]


def part_path(part):
    """Where one input file of a corpus lies: an extracted archive member, or the downloaded file itself."""
    if part.member is None:
        return f"results/data/archives/{rnnmt_sources.file_name(SOURCES, part.archive)}"
    return f"results/data/extracted/{part.archive}/{part.member}"


def raw_corpus_inputs(wildcards):
    c = CORPORA[f"{wildcards.src}-{wildcards.tgt}"][wildcards.corpus]
    return {"src": [part_path(p) for p in c.src], "tgt": [part_path(p) for p in c.tgt]}


def raw_corpus_flags(wildcards):
    c = CORPORA[f"{wildcards.src}-{wildcards.tgt}"][wildcards.corpus]
    flags = f"--format {c.format}" + (" --heldout" if c.heldout else "")
    return flags + (f" --expected-lines {c.lines}" if c.lines is not None else "")


def corpus_reports(wildcards):
    return [f"results/data/raw/{wildcards.pair}/{name}.json" for name in CORPORA[wildcards.pair]]


def download_flags(wildcards):
    """URL, published checksum and size of an archive, and where else it may come from (download: in config)."""
    key = ARCHIVE_FILES[wildcards.file]
    archive = SOURCES["archives"][key]
    flags = ["--url", archive["url"]]
    if (checksum := rnnmt_sources.checksum(SOURCES, key)) is not None:
        flags += ["--checksum", f"{checksum.algo}:{checksum.value}"]
    if archive.get("bytes"):
        flags += ["--size", str(archive["bytes"])]
    for option, key in (("--mirror", "mirror"), ("--offline-dir", "dir")):
        if config["download"][key]:
            flags += [option, config["download"][key]]
    return shlex.join(flags)


def is_tokenized(pair, split):
    """Whether the corpora of a split come Moses-tokenized already (Stanford, LIUM; never mixed, see above)."""
    return any(CORPORA[pair][name].tokenized for name in split_corpora(pair, split)) if not DEMO else False


def raw_files(wildcards):
    pair = f"{wildcards.src}-{wildcards.tgt}"
    names = split_corpora(pair, wildcards.split)
    return {side: [f"results/data/raw/{pair}/{name}.{lang}" for name in names] for side, lang in zip(("src", "tgt"), langs(pair))}


def tokenizer_flags(wildcards):
    if is_tokenized(wildcards.pair, wildcards.split):
        return "--pretokenized"
    t = config["pairs"][wildcards.pair]["tokenizer"]
    return ("" if t["escape"] else "--no-escape ") + ("--aggressive-dash-splits" if t["aggressive_dash_splits"] else "")


def vocab_files(pair):
    src, tgt = langs(pair)
    files = {"src_vocab": f"results/data/vocab/{pair}/vocab.{src}.json", "tgt_vocab": f"results/data/vocab/{pair}/vocab.{tgt}.json"}
    if BPE:
        files.update(src_bpe=f"results/data/vocab/{pair}/bpe.{src}.codes", tgt_bpe=f"results/data/vocab/{pair}/bpe.{tgt}.codes")
    return files


def bpe_flags(input):
    """--src-bpe/--tgt-bpe when the vocabulary is BPE (input has those names then)."""
    return f"--src-bpe {input.src_bpe} --tgt-bpe {input.tgt_bpe}" if BPE else ""


def binarize_inputs(wildcards):
    pair = f"{wildcards.src}-{wildcards.tgt}"
    base = "results/data/selected" if wildcards.part == "train" else "results/data/tok"
    return {"src": f"{base}/{pair}/{wildcards.part}.{wildcards.src}", "tgt": f"{base}/{pair}/{wildcards.part}.{wildcards.tgt}", **vocab_files(pair)}


def train_inputs(wildcards):
    pair = system_pair(wildcards)
    heldout = {f"heldout_{name}": f"results/data/bin/{pair}/{name}.pt" for name in config["heldout"]}
    return {"system": f"results/config/{wildcards.system}.json", "train": f"results/data/bin/{pair}/train.pt", **heldout, **vocab_files(pair)}


def heldout_flags(wildcards, input):
    """--valid NAME=FILE for each held-out set whose cost the training log reports (the first decides early stopping)."""
    return " ".join(f"--valid {name}={input[f'heldout_{name}']}" for name in config["heldout"])


def nounk_inputs(wildcards):
    pair = f"{wildcards.src}-{wildcards.tgt}"
    base = f"results/data/tok/{pair}/test"
    return {"src": f"{base}.{wildcards.src}", "ref": f"{base}.{wildcards.tgt}", **vocab_files(pair)}


def translate_inputs(wildcards):
    pair = system_pair(wildcards)
    inputs = {"model": f"results/models/{wildcards.system}/model.pt", "src": f"results/data/tok/{pair}/test.{langs(pair)[0]}"}
    if wildcards.subset == "nounk":
        inputs["ids"] = f"results/data/nounk/{pair}/test.ids"
    return inputs


def translate_flags(wildcards, input):
    """No-UNK decoding of the No-UNK subset; optional length normalisation."""
    flags = "--normalize " if config["evaluation"]["normalize"] else ""
    return flags + (f"--no-unk --lines {input.ids}" if wildcards.subset == "nounk" else "")


def score_inputs(wildcards):
    pair = system_pair(wildcards)
    src, tgt = langs(pair)
    return {
        "hyps": f"results/translations/{wildcards.system}/test.all.txt",
        "hyps_nounk": f"results/translations/{wildcards.system}/test.nounk.txt",
        "ids": f"results/data/nounk/{pair}/test.ids",
        "refs_tok": f"results/data/tok/{pair}/test.{tgt}",
        "refs_raw": f"results/data/corpus/{pair}/test.{tgt}",
        "src_tok": f"results/data/tok/{pair}/test.{src}",
    }


def alignment_inputs(wildcards):
    pair = system_pair(wildcards)
    return {
        "model": f"results/models/{wildcards.system}/model.pt",
        "src": f"results/data/tok/{pair}/test.{langs(pair)[0]}",
        "ids": f"results/data/nounk/{pair}/test.ids",
    }


def system_pair(wildcards):
    return config["systems"][wildcards.system]["pair"]


def table_systems(table):
    """Active systems that are rows of a table, in row order."""
    return [r["system"] for r in config["tables"][table]["rows"] if r.get("system") in SYSTEMS]


def table_spec(table, file_pattern):
    """JSON for `rnnmt table`: rows (with their score/meta file), published numbers, demo flag, check."""
    t = config["tables"][table]
    rows = []
    for r in t["rows"]:
        if "system" in r and r["system"] not in SYSTEMS:
            continue
        label = r.get("label") or config["systems"][r["system"]]["label"]
        file = file_pattern.format(system=r["system"]) if "system" in r else None
        rows.append({"label": label, "system": r.get("system"), "file": file, "published": r.get("published")})
    check = t.get("check") if all(s in SYSTEMS for s in t.get("check", {}).values()) else None
    return json.dumps({"kind": t["kind"], "title": t["title"], "demo": DEMO, "rows": rows, "check": check})


def final_targets():
    targets = [f"results/tables/{t}.{ext}" for t in config["tables"] if table_systems(t) for ext in ("csv", "md")]
    figs = config["figures"]
    if "bahdanau2014_fig2" in figs and table_systems(figs["bahdanau2014_fig2"]["table"]):
        targets.append("results/figures/bahdanau2014_fig2.png")
    if "bahdanau2014_fig3" in figs and figs["bahdanau2014_fig3"]["system"] in SYSTEMS:
        targets.append("results/figures/bahdanau2014_fig3.png")
    reports = [f"results/data/raw/{pair}/report.json" for pair in PRESET["corpora"]]
    return targets + reports + ["results/provenance.json"]
