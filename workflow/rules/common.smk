# Helpers only: config validation, the active scale, path helpers and input functions.
import json
import re
import sys

from rnnmt import config as rnnmt_config
from rnnmt.errors import UserError
from rnnmt.fileio import write_json

try:
    rnnmt_config.validate(config, Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml")
except UserError as exc:
    # One line and a non-zero exit before any job runs, not a traceback.
    sys.exit(f"rnnmt: {exc}")

PRESET = rnnmt_config.preset(config)
SYSTEMS = rnnmt_config.active_systems(config)
PAIRS = sorted({config["systems"][s]["pair"] for s in SYSTEMS})
BPE = PRESET["vocab"]["kind"] == "bpe"
DEMO = PRESET["data"]["source"] == "synthetic"
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
    split="pool|indomain|dev|test",
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
    """The raw corpora that make up one split of a pair at the active scale."""
    c = PRESET["corpora"][pair]
    return {"pool": c["train"], "indomain": c["indomain"], "dev": c["dev"], "test": [c["test"]]}[split]


def raw_files(wildcards):
    pair = f"{wildcards.src}-{wildcards.tgt}"
    names = split_corpora(pair, wildcards.split)
    return {side: [f"results/data/raw/{pair}/{name}.{lang}" for name in names] for side, lang in zip(("src", "tgt"), langs(pair))}


def tokenizer_flags(wildcards):
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
    return targets + ["results/provenance.json"]
