"""Snakemake input functions and command-line flags of the data, selection, training and evaluation rules.

Each method takes the job's wildcards (any object with the rule's wildcard names as attributes), so these
are tested without Snakemake.
"""

from __future__ import annotations

import shlex
from typing import Any

from rnnmt import config as cfg
from rnnmt.data import sources
from rnnmt.data.download import local_file
from rnnmt.workflow import paths
from rnnmt.workflow.plan import Plan, score_name_parts, translation_of


def pair_of(wildcards: Any) -> str:
    """The pair of a rule whose patterns name it `{src}-{tgt}`."""
    return f"{wildcards.src}-{wildcards.tgt}"


class RuleInputs:
    """The input functions and flags of the rules that make data, models, translations and scores."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.selection = plan.scale["selection"]

    # --- data ---------------------------------------------------------------------------------------

    def demo_corpus_flags(self, wildcards: Any = None) -> str:
        """The generator's seed and each demo corpus's size, role and domain (scales.demo.data)."""
        data = self.plan.scale["data"]
        specs = [f"{name}:{c['pairs']}:{c['role']}:{c['domain']}" for name, c in data["corpora"].items()]
        return shlex.join(["--out-dir", paths.raw_dir("en-fr"), "--seed", str(data["seed"]), *(arg for spec in specs for arg in ("--corpus", spec))])

    def demo_corpus_outputs(self) -> list[str]:
        return [paths.raw("en-fr", name, lang) for name in self.plan.scale["data"]["corpora"] for lang in ("en", "fr")]

    def download_flags(self, wildcards: Any) -> str:
        """URL, published checksum and size of an archive: what the file is."""
        table, key = self.plan.sources, self.plan.archive_files[wildcards.file]
        archive = table["archives"][key]
        flags = ["--url", archive["url"]]
        if (checksum := sources.checksum(table, key)) is not None:
            flags += ["--checksum", f"{checksum.algo}:{checksum.value}"]
        if archive.get("bytes"):
            flags += ["--size", str(archive["bytes"])]
        return shlex.join(flags)

    @property
    def download_origin(self) -> str:
        """Where else an archive may come from (download.mirror, download.dir): in the rule's command, not its
        params, since the file is the same (its checksum is checked), so a new mirror must not re-run the
        download and every step after it."""
        download = self.plan.config["download"]
        return shlex.join(arg for option, name in (("--mirror", "mirror"), ("--offline-dir", "dir")) if download[name] for arg in (option, download[name]))

    def download_source(self, wildcards: Any) -> list[str]:
        """A local file of `data.files` (a file:// URL), so that Snakemake links it again when it changes; none for a URL."""
        url = self.plan.sources["archives"][self.plan.archive_files[wildcards.file]]["url"]
        return [str(path)] if (path := local_file(url)) is not None else []

    def archive_of(self, wildcards: Any) -> str:
        return paths.archive(sources.file_name(self.plan.sources, wildcards.archive))

    def _part(self, part: Any) -> str:
        """Where one input file of a corpus lies: an extracted archive member, or the downloaded file itself."""
        if part.member is None:
            return paths.archive(sources.file_name(self.plan.sources, part.archive))
        return paths.extracted(part.archive, part.member)

    def raw_corpus(self, wildcards: Any) -> dict[str, list[str]]:
        c = self.plan.corpora[pair_of(wildcards)][wildcards.corpus]
        return {"src": [self._part(p) for p in c.src], "tgt": [self._part(p) for p in c.tgt]}

    def raw_corpus_flags(self, wildcards: Any) -> str:
        c = self.plan.corpora[pair_of(wildcards)][wildcards.corpus]
        flags = ["--format", c.format, *(["--heldout"] if c.heldout else []), *(["--expected-lines", str(c.lines)] if c.lines is not None else [])]
        return shlex.join(flags)

    def corpus_reports(self, wildcards: Any) -> list[str]:
        return [paths.raw(wildcards.pair, name, "json") for name in self.plan.corpora[wildcards.pair]]

    def split_files(self, wildcards: Any) -> dict[str, list[str]]:
        """The raw corpora a split concatenates, per side."""
        pair = pair_of(wildcards)
        names = self.plan.split_corpora_of(pair, wildcards.split)
        return {side: [paths.raw(pair, name, lang) for name in names] for side, lang in zip(("src", "tgt"), self.plan.langs(pair))}

    def tokenizer_flags(self, wildcards: Any) -> str:
        if self.plan.is_tokenized(wildcards.pair, wildcards.split):
            return "--pretokenized"
        t = cfg.tokenizer(self.plan.config, wildcards.pair)
        options = {"aggressive_dash_splits": "--aggressive-dash-splits", "lowercase": "--lowercase", "normalize_punctuation": "--normalize-punctuation"}
        return shlex.join([*([] if t["escape"] else ["--no-escape"]), *(flag for key, flag in options.items() if t[key])])

    # --- selection ------------------------------------------------------------------------------------

    def selection_lm_text(self, wildcards: Any) -> str:
        """An LM's training text: the in-domain corpus, or the out-of-domain sample."""
        if wildcards.domain == "in":
            return paths.tok(wildcards.pair, "indomain", wildcards.lang)
        return paths.selection(wildcards.pair, f"ood.{wildcards.lang}")

    def selection_score(self, wildcards: Any) -> dict[str, str]:
        pair = pair_of(wildcards)
        inputs = {"src": paths.tok(pair, "pool", wildcards.src), "tgt": paths.tok(pair, "pool", wildcards.tgt), "index": paths.selection(pair, "index.json")}
        for side, lang in (("src", wildcards.src), ("tgt", wildcards.tgt)):
            inputs[f"{side}_vocab"] = paths.selection(pair, f"vocab.{lang}.txt")
            for domain in ("in", "out"):
                inputs[f"lm_{domain}_{side}"] = paths.selection(pair, f"lm.{domain}.{lang}.npz")
        return inputs

    def selection_shards(self, wildcards: Any) -> list[str]:
        return [paths.selection(pair_of(wildcards), f"scores/{shard}.npz") for shard in range(self.selection["shards"])]

    def selection_cut_flags(self, wildcards: Any) -> str:
        """The pool's corpora and the cut of select-rank, from `selection:` in config."""
        pool, s = self.plan.split_corpora_of(pair_of(wildcards), "pool"), self.selection
        flags = ["--corpora", *pool, "--cut", s["cut"], "--normalise", s["normalise"]]
        if s["cut"] == "per_corpus":
            flags += [arg for name in pool for arg in ("--keep", f"{name}={s['fractions'][name]}")]
        elif s["target_words"] is not None:
            flags += ["--target-words", str(s["target_words"])]
        else:
            flags += ["--fraction", str(s["fraction"])]
        return shlex.join(flags)

    def select(self, wildcards: Any) -> dict[str, str]:
        """The pool (or LIUM's selection), the test set for the leak count, and the ranked ids for axelrod."""
        pair, (src, tgt) = pair_of(wildcards), (wildcards.src, wildcards.tgt)
        split = self.plan.selection_split(pair)
        inputs = {
            "src": paths.tok(pair, split, src),
            "tgt": paths.tok(pair, split, tgt),
            "test_src": paths.tok(pair, "test", src),
            "test_tgt": paths.tok(pair, "test", tgt),
        }
        if self.plan.selection_method(pair) == "axelrod":
            inputs.update(ids=paths.selection(pair, "selected.npy"), rank=paths.selection(pair, "rank.json"))
        return inputs

    def select_flags(self, wildcards: Any, input: Any) -> str:
        flags = ["--method", self.plan.selection_method(pair_of(wildcards))]
        return shlex.join(flags + (["--ids", input.ids, "--rank-report", input.rank] if "ids" in input.keys() else []))

    # --- vocabulary and binarized data ------------------------------------------------------------------

    def codes_of(self, pair: str, lang: str) -> str:
        """The BPE codes that segment one language of a pair: its own, or (vocab.joint) the pair's joint codes."""
        return paths.bpe_codes(pair, "joint" if self.plan.scale["vocab"]["joint"] else lang)

    def bpe_text(self, wildcards: Any) -> list[str]:
        """The training text BPE codes are learned from: one language's, or both (joint) one after the other."""
        langs = self.plan.langs(wildcards.pair) if wildcards.codes == "joint" else (wildcards.codes,)
        return [paths.selected(wildcards.pair, f"train.{lang}") for lang in langs]

    def vocab_files(self, pair: str) -> dict[str, str]:
        src, tgt = self.plan.langs(pair)
        files = {"src_vocab": paths.vocab(pair, src), "tgt_vocab": paths.vocab(pair, tgt)}
        return files | ({"src_bpe": self.codes_of(pair, src), "tgt_bpe": self.codes_of(pair, tgt)} if self.plan.bpe else {})

    def bpe_flags(self, wildcards: Any, input: Any) -> str:
        """--src-bpe/--tgt-bpe when the vocabulary is BPE (input has those names then)."""
        return shlex.join(["--src-bpe", input.src_bpe, "--tgt-bpe", input.tgt_bpe]) if self.plan.bpe else ""

    def vocab_codes(self, wildcards: Any) -> list[str]:
        return [self.codes_of(wildcards.pair, wildcards.lang)] if self.plan.bpe else []

    def vocab_flags(self, wildcards: Any, input: Any) -> str:
        vocab = self.plan.scale["vocab"]
        size = vocab["pair_sizes"].get(wildcards.pair, vocab["size"])
        return shlex.join(["--size", str(size), *(["--bpe", input.codes[0]] if self.plan.bpe else [])])

    def binarize(self, wildcards: Any) -> dict[str, str]:
        pair = pair_of(wildcards)
        if wildcards.part == "train":
            text = {"src": paths.selected(pair, f"train.{wildcards.src}"), "tgt": paths.selected(pair, f"train.{wildcards.tgt}")}
        else:
            text = {"src": paths.tok(pair, wildcards.part, wildcards.src), "tgt": paths.tok(pair, wildcards.part, wildcards.tgt)}
        return text | self.vocab_files(pair)

    # --- training -------------------------------------------------------------------------------------------

    def train(self, wildcards: Any) -> dict[str, str]:
        pair = self.plan.pair_of(wildcards.system)
        heldout = {f"heldout_{name}": paths.binarized(pair, name) for name in self.plan.resolved(wildcards.system)["heldout"]}
        return {"system": paths.settings(wildcards.system), "train": paths.binarized(pair, "train"), **heldout, **self.vocab_files(pair)}

    def train_flags(self, wildcards: Any, input: Any) -> str:
        """--valid NAME=FILE for each held-out set whose cost the log reports (the first decides early stopping); BPE codes."""
        valid = [arg for name in self.plan.resolved(wildcards.system)["heldout"] for arg in ("--valid", f"{name}={input[f'heldout_{name}']}")]
        return " ".join([shlex.join(valid), self.bpe_flags(wildcards, input)]).strip()

    # --- translation and scores -------------------------------------------------------------------------------

    def nounk_subset(self, wildcards: Any) -> dict[str, str]:
        pair = pair_of(wildcards)
        return {"src": paths.tok(pair, wildcards.split, wildcards.src), "ref": paths.tok(pair, wildcards.split, wildcards.tgt), **self.vocab_files(pair)}

    def models(self, run: str) -> list[str]:
        """The model file(s) a run translates with: its own, or its ensemble members' of its seed."""
        return [paths.model(m) for m in self.plan.members(run)]

    def translate(self, wildcards: Any) -> dict[str, Any]:
        pair = self.plan.pair_of(wildcards.system)
        inputs = {
            "models": self.models(wildcards.system),
            "decode": paths.settings(f"decode/{self.plan.system_of(wildcards.system)}"),
            "src": paths.tok(pair, wildcards.split, self.plan.langs(pair)[0]),
        }
        if wildcards.subset == "nounk":
            inputs["ids"] = paths.nounk_ids(pair, wildcards.split)
        return inputs

    def translate_flags(self, wildcards: Any, input: Any) -> str:
        """No-UNK decoding of the No-UNK subset."""
        return shlex.join(["--no-unk", "--lines", input.ids]) if wildcards.subset == "nounk" else ""

    def unk_dictionary(self, wildcards: Any) -> dict[str, str]:
        src, tgt = self.plan.langs(wildcards.pair)
        return {
            "src": paths.selected(wildcards.pair, f"train.{src}"),
            "tgt": paths.selected(wildcards.pair, f"train.{tgt}"),
            **self.vocab_files(wildcards.pair),
        }

    def replace_unk(self, wildcards: Any) -> dict[str, str]:
        pair = self.plan.pair_of(wildcards.system)
        return {
            "model": self.models(wildcards.system)[0],
            "hyps": paths.translation(wildcards.system, wildcards.split, "all"),
            "align": paths.translation(wildcards.system, wildcards.split, "all", "align"),
            "src": paths.tok(pair, wildcards.split, self.plan.langs(pair)[0]),
            "dictionary": paths.unk_dictionary(pair),
        }

    def score(self, wildcards: Any) -> dict[str, str]:
        """A system's translations on a test split (UNK-replaced for .unk), references, and No-UNK subset if translated."""
        split, system, unk = score_name_parts(wildcards.score)
        pair = self.plan.pair_of(system)
        src, tgt = self.plan.langs(pair)
        inputs = {
            "hyps": translation_of(wildcards.score),
            "refs_tok": paths.tok(pair, split, tgt),
            "refs_raw": paths.corpus(pair, split, tgt),
            "src_tok": paths.tok(pair, split, src),
        }
        if self.plan.resolved(system)["nounk"] and not unk:
            inputs.update(hyps_nounk=paths.translation(system, split, "nounk"), ids=paths.nounk_ids(pair, split))
        return inputs

    def score_flags(self, wildcards: Any, input: Any) -> str:
        """The target language, the No-UNK subset, Luong's hyphen rejoining, and the length curves' settings."""
        system = score_name_parts(wildcards.score)[1]
        pair = self.plan.pair_of(system)
        flags = ["--lang", self.plan.langs(pair)[1], "--threshold", str(self.plan.config["evaluation"]["long_threshold"])]
        flags += ["--hyps-nounk", input.hyps_nounk, "--nounk-ids", input.ids] if "ids" in input.keys() else []
        flags += ["--rejoin-hyphens"] if self.plan.config["pairs"][pair]["rejoin_hyphens"] else []
        flags += ["--lowercase"] if cfg.tokenizer(self.plan.config, pair)["lowercase"] else []
        curve, groups = self.plan.config["evaluation"]["length_curve"], self.plan.config["evaluation"]["length_groups"]
        flags += ["--window", str(curve["window"]), "--max-length", str(curve["max_length"]), "--length-by", curve["by"], "--group-size", str(groups["size"])]
        return shlex.join(flags)

    def alignments(self, wildcards: Any) -> dict[str, str]:
        pair = self.plan.pair_of(wildcards.system)
        return {
            "model": paths.model(wildcards.system),
            "decode": paths.settings(f"decode/{self.plan.system_of(wildcards.system)}"),
            "src": paths.tok(pair, "test", self.plan.langs(pair)[0]),
            "ids": paths.nounk_ids(pair, "test"),
        }

    def alignment_flags(self, wildcards: Any) -> str:
        """The alignment figures' sentences: the scale's fixed ones and a seeded random draw from the No-UNK subset."""
        samples = self.plan.config["evaluation"]["alignments"]
        flags = [f"--fixed={s}" for s in self.plan.scale["figures"]["alignment_fixed"]]
        flags += ["--random", str(samples["random"]), "--min-length", str(samples["min_length"]), "--max-length", str(samples["max_length"])]
        return shlex.join(flags + ["--seed", str(samples["seed"])])
