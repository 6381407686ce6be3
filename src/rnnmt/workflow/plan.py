"""What the workflow runs at the active scale: config validated once, corpora resolved, names and targets."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rnnmt import config as cfg
from rnnmt.data import sources
from rnnmt.data.download import check_offline_dir
from rnnmt.errors import UserError
from rnnmt.evaluate.figures import figure_kind
from rnnmt.text.tokenize import check_language
from rnnmt.workflow import paths

DEMO_BANNER = "Synthetic demo data: not comparable with the papers' numbers"


@dataclass(frozen=True)
class Curve:
    """One curve (or panel) of a figure: the run drawn, whether its UNKs were replaced, and its legend (a template of
    label words; None: the system's label)."""

    system: str
    unk_replace: bool = False
    legend: str | None = None


def split_score_name(name: str) -> tuple[str, bool]:
    """SYSTEM (plain translations) or SYSTEM.unk (after UNK replacement) as (system, unk)."""
    return (name[: -len(".unk")], True) if name.endswith(".unk") else (name, False)


def score_name_parts(name: str) -> tuple[str, str, bool]:
    """A score file's name, [SPLIT/]SYSTEM[.unk], as (split, system, unk); no SPLIT/ is the first test set."""
    split, _, rest = name.rpartition("/")
    return (split or "test", *split_score_name(rest))


def score_name(system: str, unk: bool = False, split: str = "test") -> str:
    """The inverse of score_name_parts: the first test set's scores keep their paths, another split's go in a folder."""
    return f"{'' if split == 'test' else split + '/'}{system}{'.unk' if unk else ''}"


def translation_of(name: str) -> str:
    """The test translations a score name stands for: as decoded (all) or UNK replaced (unk)."""
    split, system, unk = score_name_parts(name)
    return paths.translation(system, split, "unk" if unk else "all")


def one_of(names: list[str]) -> str:
    """A wildcard constraint matching exactly these names (a never-matching one when there are none)."""
    return "|".join(map(re.escape, names)) or "NONE"


def sources_table(config: dict[str, Any]) -> dict[str, Any]:
    """The archives and corpora the active scale draws from: a table shipped with rnnmt (WMT'14, Multi30k) or
    download.sources, the scale's own files, or none (the demo generates its corpus). download.dir must be a folder."""
    if config["download"]["dir"] is not None:
        # At every scale, before any job: a wrong folder would otherwise show only once the network fails, or not at all.
        check_offline_dir(Path(config["download"]["dir"]))
    scale = cfg.active_scale(config)
    source = scale["data"]["source"]
    if source == "synthetic":
        return {"what": "the synthetic demo corpus", "archives": {}, "corpora": {}, "sets": {}, "preselected": {}}
    if source != "files":
        return sources.load(config["download"]["sources"] or source, config["download"]["checksums"])
    heldout = {name for splits in scale["corpora"].values() for split in ("dev", "test") for name in splits.get(split, [])}
    return sources.files_table(scale["data"].get("files", {}), heldout, Path.cwd())


def resolve_data(config: dict[str, Any], pairs: list[str]) -> tuple[dict, dict, dict]:
    """The sources table, and for each of `pairs` (those the active systems translate) its split -> corpus names and
    its corpus name -> parts (WMT scales and files). A scale's other pairs (one it inherits from its `base`) are left alone."""
    scale = cfg.active_scale(config)
    table = sources_table(config)
    langs = {pair: (config["pairs"][pair]["src"], config["pairs"][pair]["tgt"]) for pair in pairs}
    splits = {pair: sources.pair_splits(table, scale["corpora"][pair], *langs[pair]) for pair in langs}
    for name in cfg.active_systems(config):
        pair = cfg.system_pair(config, name)
        method = cfg.selection_method(config, pair)
        if method in table["preselected"]:
            splits[pair]["preselected"] = [sources.preselected(table, method, *langs[pair])]
        if method == "axelrod":
            cfg.check_axelrod(scale["selection"], pair, splits[pair])
    corpora: dict[str, dict] = {}
    if scale["data"]["source"] != "synthetic":
        corpora = {pair: {name: sources.corpus(table, name, *langs[pair]) for names in splits[pair].values() for name in names} for pair in langs}
    for pair in corpora:
        for split, names in splits[pair].items():
            if len({corpora[pair][name].tokenized for name in names}) > 1:
                raise UserError(f"the {split} corpora of {pair} mix Moses-tokenized files and raw text ({', '.join(names)}); use one kind.")
    for pair, pair_langs in langs.items():
        if not corpora or not all(c.tokenized for c in corpora[pair].values()):
            for lang in pair_langs:
                check_language(lang, f"pairs.{pair}")
    return table, splits, corpora


@dataclass(frozen=True)
class Run:
    """One trained model (a system with one seed), or one ensemble decoding its members' runs of that seed."""

    system: str
    seed: int


class Plan:
    """The active scale's systems, their runs (one per seed), pairs, corpora and test splits, from a validated config."""

    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.scale = cfg.active_scale(config)
        self.systems = cfg.active_systems(config)
        self.ensembles = cfg.active_ensembles(config)
        self.runs = {cfg.run_name(config, s, seed): Run(s, seed) for s in self.systems for seed in cfg.seeds(config, s)}
        self.runs |= {cfg.run_name(config, e, seed): Run(e, seed) for e in self.ensembles for seed in self._ensemble_seeds(e)}
        self.pairs = sorted({cfg.system_pair(config, s) for s in self.systems})
        self.sources, self.split_corpora, self.corpora = resolve_data(config, self.pairs)
        self.demo = self.scale["data"]["source"] == "synthetic"
        self.bpe = self.scale["vocab"]["kind"] == "bpe"
        self.archive_files = {sources.file_name(self.sources, key): key for key in self.sources["archives"]}
        self.table_splits = self._table_splits()
        self.variants = self._variants()

    @classmethod
    def load(cls, config: dict[str, Any], schema: Path) -> Plan:
        """Validate `config` in place (defaults filled) against the schema, then plan it."""
        return cls(cfg.validate(config, schema))

    # --- names ------------------------------------------------------------------------------------

    def _variants(self) -> dict[str, list[str]]:
        """Each baseline that runs here and its variants (config `variants`), in the order they are listed."""
        variants: dict[str, list[str]] = {}
        for name, variant in self.config["variants"].items():
            if name in self.systems and variant["of"] in self.systems:
                variants.setdefault(variant["of"], []).append(name)
        return variants

    @property
    def decoded(self) -> list[str]:
        """Everything that translates: the active systems, then the active ensembles."""
        return self.systems + self.ensembles

    def _ensemble_seeds(self, ensemble: str) -> list[int]:
        """The seeds every member trains with, in the first member's order."""
        members = self.config["ensembles"][ensemble]["members"]
        return [s for s in cfg.seeds(self.config, members[0]) if all(s in cfg.seeds(self.config, m) for m in members)]

    def runs_of(self, name: str) -> list[str]:
        """The runs of a system or an ensemble at the active scale, one per seed."""
        return [run for run, r in self.runs.items() if r.system == name]

    def system_of(self, name: str) -> str:
        """The system (or ensemble) of a run; a system's own name is its reference run."""
        return self.runs[name].system if name in self.runs else name

    def langs(self, pair: str) -> tuple[str, str]:
        """(source, target) language codes of a pair."""
        p = self.config["pairs"][pair]
        return p["src"], p["tgt"]

    def pair_of(self, name: str) -> str:
        """The pair a system, ensemble or run translates at the active scale."""
        return cfg.system_pair(self.config, self.system_of(name))

    def members(self, run: str) -> list[str]:
        """The runs whose models a run translates with: itself, or its ensemble's members' runs of its seed."""
        if run in self.runs and self.runs[run].system in self.ensembles:
            ensemble, seed = self.runs[run].system, self.runs[run].seed
            return [cfg.run_name(self.config, m, seed) for m in self.config["ensembles"][ensemble]["members"]]
        return [run]

    def resolved(self, name: str) -> dict[str, Any]:
        """The resolved settings of a system, ensemble or run at the active scale (an ensemble: its first member's)."""
        return cfg.resolve_system(self.config, cfg.representative(self.config, self.system_of(name)))

    def label(self, name: str, unk_replace: bool = False, template: str | None = None) -> str:
        """A system's label (a run's: its system's; or `template`, a table row's own) with its words filled from the
        system's settings at the active scale (config `label_words`), marked when its UNKs were replaced."""
        system = self.system_of(name)
        template = template or (self.config["ensembles"] if system in self.ensembles else self.config["systems"])[system]["label"]
        label = cfg.fill_label(self.config, template, self.resolved(system))
        return f"{label}, UNK replaced" if unk_replace else label

    def selection_method(self, pair: str) -> str:
        return cfg.selection_method(self.config, pair)

    def selection_split(self, pair: str) -> str:
        """The split the selection step reads: LIUM's released selection, or the pool to select from."""
        return "preselected" if self.selection_method(pair) in self.sources["preselected"] else "pool"

    def split_corpora_of(self, pair: str, split: str) -> list[str]:
        """The raw corpora of one split of a pair (`test-CORPUS`: a test set a table names)."""
        splits = self.split_corpora[pair]
        if split == "test":
            return splits["test"][:1]
        if split.startswith("test-"):
            return [split.removeprefix("test-")]
        return splits["train" if split == "pool" else split]

    def is_tokenized(self, pair: str, split: str) -> bool:
        """Whether a split's corpora come Moses-tokenized already (Stanford, LIUM; never mixed, resolve_data)."""
        return not self.demo and any(self.corpora[pair][name].tokenized for name in self.split_corpora_of(pair, split))

    # --- test splits and wildcards -----------------------------------------------------------------

    def table_corpora(self, table: str, pair: str) -> list[str]:
        """The held-out corpora a table scores for one of its pairs (at the active scale): its `splits`, each a dev or
        test corpus of the pair; else the one test set it names (`test`), else the pair's first."""
        corpora = self.split_corpora[pair]
        wanted = self.config["tables"][table].get("splits")
        if wanted is None:
            return [cfg.table_test_set(self.config, table, corpora["test"], pair)]
        heldout = corpora["dev"] + corpora["test"]
        if unknown := [c for c in wanted if c not in heldout]:
            raise UserError(
                f"config: tables.{table}.splits names {', '.join(unknown)}, but the dev and test sets of {pair} at scale "
                f"'{self.config['scale']}' are {', '.join(heldout)}; expected corpora among them (scales.{self.config['scale']}.corpora.{pair})."
            )
        return list(wanted)

    def split_name(self, pair: str, corpus: str) -> str:
        """The split that holds a held-out corpus of a pair for translation and scoring: `test` for the pair's first test
        set, `test-CORPUS` for any other (a second test set, or a dev set a table scores)."""
        return "test" if corpus == self.split_corpora[pair]["test"][0] else f"test-{corpus}"

    def _table_splits(self) -> dict[str, list[str]]:
        """Each table with active rows: the splits it scores, in order, `test` or `test-CORPUS` (Plan.split_name), the same
        for each of its pairs that runs."""
        active = set(self.decoded)
        splits = {}
        for name, table in self.config["tables"].items():
            if any(row.get("system") in active for row in table["rows"]):
                pairs = {cfg.pair_at_scale(self.config, p) for p in cfg.table_pairs(self.config, name)} & set(self.split_corpora)
                names = {tuple(self.split_name(pair, c) for c in self.table_corpora(name, pair)) for pair in sorted(pairs)}
                if len(names) > 1:
                    raise UserError(
                        f"config: tables.{name} scores different splits for its pairs ({'; '.join(map(', '.join, sorted(names)))}); expected the same test sets."
                    )
                splits[name] = list(names.pop())
        return splits

    @property
    def named_test_splits(self) -> list[str]:
        """Test splits besides each pair's first (`test`): the other held-out sets tables name."""
        return sorted({split for splits in self.table_splits.values() for split in splits} - {"test"})

    @property
    def test_splits(self) -> str:
        """A constraint matching the test splits: each pair's first (`test`) and those tables name (`test-CORPUS`)."""
        return one_of(["test", *self.named_test_splits])

    def wildcard_constraints(self) -> dict[str, str]:
        """Snakemake's global wildcard constraints: every wildcard matches only what this plan has."""
        languages = sorted({lang for pair in self.pairs for lang in self.langs(pair)})
        return {
            "pair": one_of(self.pairs),
            "lang": one_of(languages),
            "codes": one_of([*languages, "joint"]),
            "src": one_of(languages),
            "tgt": one_of(languages),
            "split": f"pool|indomain|dev|preselected|{self.test_splits}",
            "corpus": one_of(sorted({c for names in self.corpora.values() for c in names})),
            "archive": one_of(list(self.sources["archives"])),
            "file": one_of(list(self.archive_files)),
            "system": one_of(list(self.runs)) if self.systems else "NONE",
            "table": one_of(list(self.config["tables"])),
            "figure": one_of(list(self.config["figures"])) if self.config["figures"] else "NONE",
            "subset": "all|nounk",
            # [SPLIT/]SYSTEM[.unk]: no folder for the first test set.
            "score": rf"(({one_of(self.named_test_splits)})/)?({one_of(list(self.runs))})(\.unk)?",
        }

    # --- what the tables and figures show ------------------------------------------------------------

    def table_rows(self, table: str) -> list[dict[str, Any]]:
        """The rows of a table that run at the active scale: label-only rows, and rows of active systems."""
        return [r for r in self.config["tables"][table]["rows"] if "system" not in r or r["system"] in self.decoded]

    def table_systems(self, table: str) -> list[str]:
        """Active systems (and ensembles) that are rows of a table, in row order."""
        return list(dict.fromkeys(r["system"] for r in self.table_rows(table) if "system" in r))

    def figure_rows(self, name: str) -> list[Curve]:
        """The curves of figure `name` at the active scale: its table's systems, its rows, or (`variants: true`) each baseline
        and its variants, those that run here (a row's system, else the first of its `stand_in` that runs); for a kind
        that reads training files, those trained here (and that validate on the figure's held-out set where it names one)."""
        fig = self.config["figures"][name]
        kind = figure_kind(fig["kind"])
        runs_here = self.systems if kind.trained else self.decoded
        if "heldout" in kind.options:
            runs_here = [s for s in runs_here if fig["heldout"] in self.resolved(s)["heldout"]]
        if "variants" in fig:
            rows = [{"system": s} for baseline, variants in self.variants.items() for s in (baseline, *variants)]
        elif "table" in fig:
            rows = [{"system": s} for s in self.table_systems(fig["table"])]
        else:
            rows = fig["rows"]
        curves = []
        for row in rows:
            drawn = next((s for s in (row["system"], *row.get("stand_in", [])) if s in runs_here), None)
            if drawn is not None:
                curves.append(Curve(drawn, row.get("unk_replace", False), row.get("legend", fig.get("legend"))))
        return curves

    def figure_systems(self) -> dict[str, list[Curve]]:
        """What each figure (figures.<name>) draws at the active scale, in config order; empty: not made. With
        `only_tables`, a figure of another table, or one that would miss systems the tables leave out, is not made."""
        only = self.config.get("only_tables")
        drawn = {name: self.figure_rows(name) for name in self.config["figures"]}
        if only:
            at_scale = set(self.scale["systems"])
            for name, fig in self.config["figures"].items():
                # What each row draws at this scale without only_tables: its system, else the first stand-in that runs.
                needed = set()
                for row in fig.get("rows", []):
                    trained = (cfg.trained_for(self.config, {s}) for s in (row["system"], *row.get("stand_in", [])))
                    needed |= next((t for t in trained if t <= at_scale), set())
                if ("table" in fig and fig["table"] not in only) or not needed <= set(self.systems):
                    drawn[name] = []
        return drawn

    def tables_made(self) -> list[str]:
        """The tables this run writes: those with a row that runs at the active scale (with `only_tables`, of those only)."""
        only = self.config.get("only_tables")
        return [t for t in self.config["tables"] if self.table_systems(t) and (not only or t in only)]

    def active_claims(self) -> list[dict[str, Any]]:
        """The claims whose two systems run at the active scale."""
        active = set(self.decoded)
        return [c for c in self.config["claims"] if all(split_score_name(c[side])[0] in active for side in ("a", "b"))]

    def final_targets(self) -> list[str]:
        """What `snakemake` with no target makes: tables, figures, claims, the variants' comparison, coverage, the corpus
        reports of the pairs the systems translate, provenance."""
        targets = [paths.table(t, ext) for t in self.tables_made() for ext in ("csv", "md")]
        targets += [paths.figure(key) for key, drawn in self.figure_systems().items() if drawn]
        targets += [paths.table("claims", ext) for ext in ("csv", "md")] if self.active_claims() else []
        targets += [paths.table("variants", ext) for ext in ("csv", "md")] if self.variants else []
        targets += [paths.table("coverage", ext) for ext in ("csv", "md")]
        return targets + [paths.raw_report(pair) for pair in self.pairs] + [paths.provenance()]
