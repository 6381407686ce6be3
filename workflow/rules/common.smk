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
    for name in rnnmt_config.active_systems(config):
        pair = rnnmt_config.system_pair(config, name)
        method = rnnmt_config.selection_method(config, pair)
        if method in table["preselected"]:
            splits[pair]["preselected"] = [rnnmt_sources.preselected(table, method, *pairs[pair])]
        if method == "axelrod":
            rnnmt_config.check_axelrod(preset["selection"], pair, splits[pair])
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
ENSEMBLES = rnnmt_config.active_ensembles(config)
PAIRS = sorted({rnnmt_config.system_pair(config, s) for s in SYSTEMS})
BPE = PRESET["vocab"]["kind"] == "bpe"
DEMO = PRESET["data"]["source"] == "synthetic"
# The split the selection step reads: LIUM's released selection, or the pool to select from.
SELECTION = PRESET["selection"]


def selection_split(pair):
    """The split the selection step reads: LIUM's released selection, or the pool to select from."""
    return "preselected" if rnnmt_config.selection_method(config, pair) in SOURCES["preselected"] else "pool"


ARCHIVE_FILES = {rnnmt_sources.file_name(SOURCES, key): key for key in SOURCES["archives"]}
# How score files measure BLEU against length (Figure 2 settings; schema defaults when the figure is off).
LENGTH_CURVE = {
    key: config["figures"].get("bahdanau2014_fig2", {}).get(key, default)
    for key, default in (("window", 10), ("max_length", 60), ("length_by", "source"))
}
DEMO_BANNER_PLAIN = "Synthetic demo data: not comparable with the papers' numbers"


def _table_splits():
    """Each table with active system rows: the split it scores, `test` (its pair's first) or `test-CORPUS`."""
    active = set(SYSTEMS + ENSEMBLES)
    splits = {}
    for name, table in config["tables"].items():
        if any(row.get("system") in active for row in table["rows"]):
            test_sets = SPLIT_CORPORA[rnnmt_config.pair_at_scale(config, table["pair"])]["test"]
            corpus = rnnmt_config.table_test_set(config, name, test_sets)
            splits[name] = "test" if corpus == test_sets[0] else f"test-{corpus}"
    return splits


try:
    TABLE_SPLITS = _table_splits()
except UserError as exc:
    sys.exit(f"rnnmt: {exc}")
# Splits that are translated and scored: the pairs' first test sets (`test`), and the test sets tables name.
NAMED_TEST_SPLITS = sorted(set(TABLE_SPLITS.values()) - {"test"})
TEST_SPLITS = "|".join(map(re.escape, ["test", *NAMED_TEST_SPLITS]))


wildcard_constraints:
    pair=r"[a-z]{2}-[a-z]{2}",
    lang=r"[a-z]{2}",
    src=r"[a-z]{2}",
    tgt=r"[a-z]{2}",
    split=f"pool|indomain|dev|preselected|{TEST_SPLITS}",
    corpus="|".join(map(re.escape, sorted({c for names in CORPORA.values() for c in names}))) or "NONE",
    archive="|".join(map(re.escape, SOURCES["archives"])),
    file="|".join(map(re.escape, ARCHIVE_FILES)),
    system="|".join(map(re.escape, SYSTEMS + ENSEMBLES)) if SYSTEMS else "NONE",
    table="|".join(map(re.escape, config["tables"])),
    subset="all|nounk",


def langs(pair):
    """(source, target) language codes of a pair."""
    p = config["pairs"][pair]
    return p["src"], p["tgt"]


def tgt_lang(system):
    return langs(rnnmt_config.system_pair(config, system))[1]


def settings(system):
    """A system's resolved settings at the active scale (an ensemble: its first member's)."""
    if system in ENSEMBLES:
        system = config["ensembles"][system]["members"][0]
    return rnnmt_config.system_settings(config, system)


def label(system):
    return (config["ensembles"] if system in ENSEMBLES else config["systems"])[system]["label"]


def row_label(system, unk_replace):
    """A system's label, marked when its translations had their UNKs replaced."""
    return f"{label(system)}, UNK replaced" if unk_replace else label(system)


def model_files(system):
    """The model file(s) a system translates with: its own, or its ensemble members'."""
    members = config["ensembles"][system]["members"] if system in ENSEMBLES else [system]
    return [f"results/models/{m}/model.pt" for m in members]


def split_corpora(pair, split):
    """The raw corpora of one split of a pair at the active scale (`test-CORPUS`: a test set a table names)."""
    splits = SPLIT_CORPORA[pair]
    if split == "test":
        return splits["test"][:1]
    if split.startswith("test-"):
        return [split.removeprefix("test-")]
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


def selection_score_inputs(wildcards):
    pair = f"{wildcards.src}-{wildcards.tgt}"
    base = f"results/data/selection/{pair}"
    inputs = {"src": f"results/data/tok/{pair}/pool.{wildcards.src}", "tgt": f"results/data/tok/{pair}/pool.{wildcards.tgt}",
              "index": f"{base}/index.json"}  # fmt: skip
    for side, lang in (("src", wildcards.src), ("tgt", wildcards.tgt)):
        inputs[f"{side}_vocab"] = f"{base}/vocab.{lang}.txt"
        for domain in ("in", "out"):
            inputs[f"lm_{domain}_{side}"] = f"{base}/lm.{domain}.{lang}.npz"
    return inputs


def selection_cut_flags(wildcards):
    """The pool's corpora and the cut of select-rank, from `selection:` in config."""
    pool = split_corpora(f"{wildcards.src}-{wildcards.tgt}", "pool")
    flags = ["--corpora", *pool, "--cut", SELECTION["cut"], "--normalise", SELECTION["normalise"]]
    if SELECTION["cut"] == "per_corpus":
        flags += [arg for name in pool for arg in ("--keep", f"{name}={SELECTION['fractions'][name]}")]
    elif SELECTION["target_words"] is not None:
        flags += ["--target-words", str(SELECTION["target_words"])]
    else:
        flags += ["--fraction", str(SELECTION["fraction"])]
    return shlex.join(flags)


def select_inputs(wildcards):
    """The pool (or LIUM's selection), the test set for the leak count, and the ranked ids for axelrod."""
    pair = f"{wildcards.src}-{wildcards.tgt}"
    tok = f"results/data/tok/{pair}"
    split = selection_split(pair)
    inputs = {"src": f"{tok}/{split}.{wildcards.src}", "tgt": f"{tok}/{split}.{wildcards.tgt}",
              "test_src": f"{tok}/test.{wildcards.src}", "test_tgt": f"{tok}/test.{wildcards.tgt}"}  # fmt: skip
    if rnnmt_config.selection_method(config, pair) == "axelrod":
        inputs.update(ids=f"results/data/selection/{pair}/selected.npy", rank=f"results/data/selection/{pair}/rank.json")
    return inputs


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
    heldout = {f"heldout_{name}": f"results/data/bin/{pair}/{name}.pt" for name in settings(wildcards.system)["heldout"]}
    return {"system": f"results/config/{wildcards.system}.json", "train": f"results/data/bin/{pair}/train.pt", **heldout, **vocab_files(pair)}


def heldout_flags(wildcards, input):
    """--valid NAME=FILE for each held-out set whose cost the training log reports (the first decides early stopping)."""
    return " ".join(f"--valid {name}={input[f'heldout_{name}']}" for name in settings(wildcards.system)["heldout"])


def nounk_inputs(wildcards):
    pair = f"{wildcards.src}-{wildcards.tgt}"
    base = f"results/data/tok/{pair}/{wildcards.split}"
    return {"src": f"{base}.{wildcards.src}", "ref": f"{base}.{wildcards.tgt}", **vocab_files(pair)}


def translate_inputs(wildcards):
    pair = system_pair(wildcards)
    inputs = {"models": model_files(wildcards.system), "src": f"results/data/tok/{pair}/{wildcards.split}.{langs(pair)[0]}"}
    if wildcards.subset == "nounk":
        inputs["ids"] = f"results/data/nounk/{pair}/{wildcards.split}.ids"
    return inputs


def decode_flags(system):
    """The system's beam search (GroundHog's by default; Luong's recipe: constant beam 12, ratios 0.5/1.5)."""
    d = settings(system)["decode"]
    flags = ["--beam", str(d["beam"]), "--min-ratio", str(d.get("min_ratio", 0.5)), "--max-ratio", str(d.get("max_ratio", 3.0))]
    flags += ["--normalize"] if d["normalize"] else []
    if not d.get("shrink", True):
        flags += ["--constant-beam"] + (["--stack", str(d["stack"])] if d.get("stack") else [])
    return shlex.join(flags)


def translate_flags(wildcards, input):
    """Beam settings, how an ensemble averages; No-UNK decoding of the No-UNK subset."""
    average = settings(wildcards.system)["decode"].get("ensemble")
    return (decode_flags(wildcards.system) + (f" --ensemble-average {average}" if average else "")
            + (f" --no-unk --lines {input.ids}" if wildcards.subset == "nounk" else ""))


def score_inputs(wildcards):
    """A system's translations on a test split (UNK-replaced for .unk), references, and No-UNK subset if translated."""
    split, system, unk = score_name_parts(wildcards.name)
    pair = rnnmt_config.system_pair(config, system)
    src, tgt = langs(pair)
    inputs = {
        "hyps": translation_file(wildcards.name),
        "refs_tok": f"results/data/tok/{pair}/{split}.{tgt}",
        "refs_raw": f"results/data/corpus/{pair}/{split}.{tgt}",
        "src_tok": f"results/data/tok/{pair}/{split}.{src}",
    }
    if settings(system)["nounk"] and not unk:
        inputs.update(hyps_nounk=f"results/translations/{system}/{split}.nounk.txt", ids=f"results/data/nounk/{pair}/{split}.ids")
    return inputs


def score_flags(wildcards, input):
    _, system, _ = score_name_parts(wildcards.name)
    flags = f"--hyps-nounk {input.hyps_nounk} --nounk-ids {input.ids}" if "ids" in input.keys() else ""
    return flags + (" --rejoin-hyphens" if config["pairs"][rnnmt_config.system_pair(config, system)]["rejoin_hyphens"] else "")


def split_score_name(name):
    """A score file's name: SYSTEM (plain translations) or SYSTEM.unk (after UNK replacement)."""
    return (name[: -len(".unk")], True) if name.endswith(".unk") else (name, False)


def score_name_parts(name):
    """A score file's name, [SPLIT/]SYSTEM[.unk], as (split, system, unk); no SPLIT/ is the first test set."""
    split, _, rest = name.rpartition("/")
    return (split or "test", *split_score_name(rest))


def score_file(system, unk=False, split="test"):
    """A system's scores on a test split: the first test set's keep their paths, another split's are in a folder."""
    folder = "" if split == "test" else f"{split}/"
    return f"results/scores/{folder}{system}{'.unk' if unk else ''}.json"


def replace_unk_inputs(wildcards):
    pair = system_pair(wildcards)
    base = f"results/translations/{wildcards.system}/{wildcards.split}.all"
    return {"model": model_files(wildcards.system)[0], "hyps": f"{base}.txt", "align": f"{base}.align",
            "src": f"results/data/tok/{pair}/{wildcards.split}.{langs(pair)[0]}", "dictionary": f"results/data/unkdict/{pair}.tsv"}  # fmt: skip


def alignment_inputs(wildcards):
    pair = system_pair(wildcards)
    return {
        "model": f"results/models/{wildcards.system}/model.pt",
        "src": f"results/data/tok/{pair}/test.{langs(pair)[0]}",
        "ids": f"results/data/nounk/{pair}/test.ids",
    }


def system_pair(wildcards):
    return rnnmt_config.system_pair(config, wildcards.system)


def table_rows(table):
    """The rows of a table that run at the active scale: label-only rows, and rows of active systems."""
    return [r for r in config["tables"][table]["rows"] if "system" not in r or r["system"] in SYSTEMS + ENSEMBLES]


def table_systems(table):
    """Active systems (and ensembles) that are rows of a table, in row order."""
    return list(dict.fromkeys(r["system"] for r in table_rows(table) if "system" in r))


def row_files(table, row):
    """The files one table row reads, by table kind: score files on the table's test split, meta.json."""
    kind, system = config["tables"][table]["kind"], row.get("system")
    if system is None:
        return {}
    if kind == "learning":
        return {"file": f"results/models/{system}/meta.json"}
    split = TABLE_SPLITS[table]
    files = {"file": score_file(system, row.get("unk_replace", False), split)}
    if kind == "luong":
        if config["tables"][table]["unk_column"]:
            files["unk_file"] = score_file(system, True, split)
        # meta.json's test perplexity is the held-out cost of the pair's first test set, so only its tables show it.
        if system in SYSTEMS and not row.get("unk_replace", False) and split == "test":
            files["meta"] = f"results/models/{system}/meta.json"
    return files


def table_inputs(wildcards):
    return sorted({f for r in table_rows(wildcards.table) for f in row_files(wildcards.table, r).values()})


def table_spec(table):
    """JSON for `rnnmt table`: rows (with the files they read), published numbers, demo flag, check."""
    t = config["tables"][table]
    rows = [{"label": r.get("label") or label(r["system"]), "system": r.get("system"), "published": r.get("published"), **row_files(table, r)}
            for r in table_rows(table)]  # fmt: skip
    check = t.get("check") if all(s in SYSTEMS for s in t.get("check", {}).values()) else None
    return json.dumps({"kind": t["kind"], "title": t["title"], "demo": DEMO, "rows": rows, "check": check, "unk_column": t["unk_column"]})


def final_targets():
    targets = [f"results/tables/{t}.{ext}" for t in config["tables"] if table_systems(t) for ext in ("csv", "md")]
    figs = config["figures"]
    if "bahdanau2014_fig2" in figs and table_systems(figs["bahdanau2014_fig2"]["table"]):
        targets.append("results/figures/bahdanau2014_fig2.png")
    if "bahdanau2014_fig3" in figs and figs["bahdanau2014_fig3"]["system"] in SYSTEMS:
        targets.append("results/figures/bahdanau2014_fig3.png")
    if "luong2015_fig5" in figs and learning_curve_systems():
        targets.append("results/figures/luong2015_fig5.png")
    if "luong2015_fig6" in figs and length_group_rows():
        targets.append("results/figures/luong2015_fig6.png")
    if "luong2015_fig7" in figs and alignment_systems():
        targets.append("results/figures/luong2015_fig7.png")
    targets += [f"results/tables/claims.{ext}" for ext in ("csv", "md")] if active_claims() else []
    targets += [f"results/tables/coverage.{ext}" for ext in ("csv", "md")]
    reports = [f"results/data/raw/{pair}/report.json" for pair in PRESET["corpora"]]
    return targets + reports + ["results/provenance.json"]


def learning_curve_systems():
    """Trained systems of Figure 5's table that log the figure's held-out cost."""
    fig = config["figures"]["luong2015_fig5"]
    return [s for s in table_systems(fig["table"]) if s in SYSTEMS and fig["heldout"] in settings(s)["heldout"]]


def length_group_rows():
    """Figure 6's curves that run at the active scale: (system, unk_replace)."""
    return [(r["system"], r["unk_replace"]) for r in config["figures"]["luong2015_fig6"]["rows"] if r["system"] in SYSTEMS + ENSEMBLES]


def alignment_systems():
    """Figure 7's systems that run at the active scale (the same sentence aligned by each)."""
    return [s for s in config["figures"]["luong2015_fig7"]["systems"] if s in SYSTEMS]


def translation_file(name):
    """The test translations a score name stands for: [SPLIT/]SYSTEM (as decoded) or [SPLIT/]SYSTEM.unk (UNK replaced)."""
    split, system, unk = score_name_parts(name)
    return f"results/translations/{system}/{split}.{'unk' if unk else 'all'}.txt"


def active_claims():
    """The claims whose two systems run at the active scale."""
    active = set(SYSTEMS + ENSEMBLES)
    return [c for c in config["claims"] if all(split_score_name(c[side])[0] in active for side in ("a", "b"))]


def claim_pair(claim):
    """The pair whose test set a claim is measured on (config.check_claims: both systems share it)."""
    return rnnmt_config.system_pair(config, split_score_name(claim["a"])[0])


def claims_inputs(wildcards):
    refs = {f"results/data/tok/{claim_pair(c)}/test.{langs(claim_pair(c))[1]}" for c in active_claims()}
    return sorted({translation_file(c[side]) for c in active_claims() for side in ("a", "b")} | refs)


def claims_spec():
    """JSON for `rnnmt claims`: each active claim with its two translation files, reference and scoring flags."""
    claims = []
    for c in active_claims():
        pair = claim_pair(c)
        names = {side: row_label(*split_score_name(c[side])) for side in ("a", "b")}
        claims.append({"paper": c["paper"], "claim": c["claim"], "a": names["a"], "b": names["b"], "published": c["published"],
                       "hyps_a": translation_file(c["a"]), "hyps_b": translation_file(c["b"]),
                       "refs": f"results/data/tok/{pair}/test.{langs(pair)[1]}", "rejoin": config["pairs"][pair]["rejoin_hyphens"]})  # fmt: skip
    boot = config["evaluation"]["bootstrap"]
    title = "The papers' claims: BLEU differences with paired-bootstrap 95% intervals"
    return json.dumps({"title": title, "demo": DEMO, "samples": boot["samples"], "seed": boot["seed"], "claims": claims})


def coverage_rows():
    """config `coverage` with whether this scale's run writes each output."""
    made = set(final_targets())
    return [{**row, "this run": "yes" if row["output"] in made else "no"} for row in config["coverage"]]
