"""The settings files commands read (training, decoding, tables, claims, coverage) and the report rules' inputs."""

from __future__ import annotations

from typing import Any

from rnnmt import config as cfg
from rnnmt.evaluate.figures import figure_kind
from rnnmt.evaluate.tables import table_kind
from rnnmt.workflow import paths
from rnnmt.workflow.plan import DEMO_BANNER, Plan, score_name, split_score_name, translation_of

# How the data line of a table names where a scale's corpora come from (config `scales.<s>.data.source`).
DATA_SOURCES = {
    "synthetic": " on rnnmt's synthetic corpora (not WMT)",
    "wmt14": " on WMT releases",
    "multi30k": " on Multi30k task 1 (the dataset's own files)",
    "files": " on the scale's own files (data.files)",
}
CLAIMS_TITLE = "The papers' claims: BLEU differences with paired-bootstrap 95% intervals"
COVERAGE_TITLE = "What the papers show and what this run regenerates"
VARIANTS_TITLE = "Variants beside their baselines: BLEU and sacreBLEU with paired bootstrap p-values, perplexity, BLEU by length"


class Reports:
    """What each settings file holds, and the inputs and flags of the table and figure rules."""

    def __init__(self, plan: Plan):
        self.plan = plan

    # --- settings files (paths.settings) ---------------------------------------------------------------

    def settings_names(self) -> list[str]:
        """Every settings file this plan writes: RUN (training), decode/SYSTEM, tables/TABLE, figures/FIGURE, claims,
        variants, coverage, provenance."""
        plan = self.plan
        trained = [run for run, r in plan.runs.items() if r.system in plan.systems]
        figures = [f"figures/{name}" for name, rows in plan.figure_systems().items() if rows]
        variants = ["variants"] if plan.variants else []
        return [
            *trained,
            *(f"decode/{s}" for s in plan.decoded),
            *(f"tables/{t}" for t in plan.table_splits),
            *figures,
            "claims",
            *variants,
            "coverage",
            "provenance",
        ]

    def settings(self, wildcards: Any) -> dict[str, Any]:
        """The content of one settings file (the `settings` rule's params: a change reruns what reads it)."""
        kind, _, name = wildcards.name.rpartition("/")
        if kind == "decode":
            return self.plan.resolved(name)["decode"]
        if kind == "tables":
            return self.table_spec(name)
        if kind == "figures":
            return self.figure_spec(name)
        if name == "claims":
            return self.claims_spec()
        if name == "variants":
            return self.variants_spec()
        if name == "coverage":
            return self.coverage_spec()
        if name == "provenance":
            return self.plan.config
        run = self.plan.runs[name]
        return cfg.training_settings(self.plan.config, run.system, run.seed)

    # --- tables -------------------------------------------------------------------------------------------

    def _run_files(self, table: str, row: dict[str, Any], run: str) -> dict[str, Any]:
        """The files one run of a table row reads, by table kind: score files on the table's test split (a splits table:
        on each of its splits, by corpus), meta.json."""
        spec = self.plan.config["tables"][table]
        if spec["kind"] == "learning":
            return {"file": paths.model(run, "meta.json")}
        if spec["kind"] == "splits":
            return {
                "splits": {c: paths.scores(score_name(run, False, split)) for c, split in zip(spec["splits"], self.plan.table_splits[table])},
                "meta": paths.model(run, "meta.json"),
            }
        split, unk = self.plan.table_splits[table][0], row.get("unk_replace", False)
        files = {"file": paths.scores(score_name(run, unk, split))}
        kind = table_kind(spec["kind"])
        if "unk_file" in kind.files.values() and spec["unk_column"]:
            files["unk_file"] = paths.scores(score_name(run, True, split))
        # meta.json's test perplexity is the held-out cost of the pair's first test set, so only its tables show it.
        if "meta" in kind.files.values() and row["system"] in self.plan.systems and not unk and split == "test":
            files["meta"] = paths.model(run, "meta.json")
        return files

    def row_files(self, table: str, row: dict[str, Any]) -> dict[str, Any]:
        """The files a table row reads: its first run's, and with several seeds each run's under `seeds`."""
        if "system" not in row:
            return {}
        runs = self.plan.runs_of(row["system"])
        files: dict[str, Any] = self._run_files(table, row, runs[0])
        if len(runs) > 1:
            files["seeds"] = [{"seed": self.plan.runs[run].seed, **self._run_files(table, row, run)} for run in runs]
        return files

    def table_inputs(self, wildcards: Any) -> list[str]:
        table = wildcards.table
        files = [f for r in self.plan.table_rows(table) for run in self.plan.runs_of(r.get("system", "")) for f in self._run_files(table, r, run).values()]
        return sorted({path for f in files for path in (f.values() if isinstance(f, dict) else [f])})

    def _row_label(self, row: dict[str, Any]) -> str:
        return self.plan.label(row["system"], template=row.get("label")) if "system" in row else row["label"]

    def data_line(self, table: str) -> str:
        """Which data this run's table measures, and the paper's."""
        config, t = self.plan.config, self.plan.config["tables"][table]
        pairs = [p for p in dict.fromkeys(cfg.pair_at_scale(config, p) for p in cfg.table_pairs(config, table)) if p in self.plan.split_corpora]
        source, parts = DATA_SOURCES.get(self.plan.scale["data"]["source"], ""), []
        for pair in pairs:
            (src, tgt), corpora = self.plan.langs(pair), self.plan.split_corpora[pair]
            selected = "" if self.plan.selection_method(pair) == "none" else f", selected by {self.plan.selection_method(pair)}"
            parts.append(
                f"{src}→{tgt}{source}, trained on {' + '.join(corpora['train'])}{selected}, validated on {' + '.join(corpora['dev'])}, "
                f"{'scored' if 'splits' in t else 'tested'} on {' and '.join(self.plan.table_corpora(table, pair))}"
            )
        line = f"Data: this run ({config['scale']} scale) {'; '.join(parts)}."
        return f"{line} The paper: {t['paper_data']}." if "paper_data" in t else line

    def table_spec(self, table: str) -> dict[str, Any]:
        """What `rnnmt table` builds: title, the data, rows (with the files they read), published numbers, the paper's
        rows this scale does not run, demo flag, check."""
        t = self.plan.config["tables"][table]
        rows = [
            {"label": self._row_label(r), "system": r.get("system"), "published": r.get("published"), **self.row_files(table, r)}
            for r in self.plan.table_rows(table)
        ]
        not_run = [r for r in t["rows"] if r.get("system") not in (None, *self.plan.decoded)]
        systems = self.plan.table_systems(table)
        check = t.get("check") if all(s in self.plan.systems for s in t.get("check", {}).values()) else None
        spec = {
            "kind": t["kind"],
            "title": cfg.fill_label(self.plan.config, t["title"], self.plan.resolved(systems[0]) if systems else None),
            "data": self.data_line(table),
            "demo": self.plan.demo,
            "rows": rows,
            "not_run": list(dict.fromkeys(r["system"] for r in not_run)),
            "check": check,
            "unk_column": t["unk_column"],
        }
        if "splits" in t:
            spec |= {"splits": t["splits"], "tolerance": self.plan.config["evaluation"]["reproduced"]["tolerance"]}
        return spec

    # --- claims and coverage -------------------------------------------------------------------------------

    def _claim_refs(self, claim: dict[str, Any]) -> str:
        """The reference a claim is measured against (config.check_claims: both systems share the pair)."""
        pair = self.plan.pair_of(split_score_name(claim["a"])[0])
        return paths.tok(pair, "test", self.plan.langs(pair)[1])

    def _claim_runs(self, name: str) -> list[dict[str, Any]]:
        """A claim side's translations, SYSTEM[.unk], one per seed: [{seed, hyps}]."""
        system, unk = split_score_name(name)
        return [{"seed": self.plan.runs[run].seed, "hyps": translation_of(score_name(run, unk))} for run in self.plan.runs_of(system)]

    def claims_inputs(self, wildcards: Any) -> list[str]:
        claims = self.plan.active_claims()
        hyps = {run["hyps"] for c in claims for side in ("a", "b") for run in self._claim_runs(c[side])}
        return sorted(hyps | {self._claim_refs(c) for c in claims})

    def claims_spec(self) -> dict[str, Any]:
        """Each active claim with its two translation files, reference, scoring flags and tolerance, for `rnnmt claims`;
        whether this scale's numbers are comparable with the papers' (evaluation.reproduced.scales)."""
        reproduced = self.plan.config["evaluation"]["reproduced"]
        claims = []
        for c in self.plan.active_claims():
            pair = self.plan.pair_of(split_score_name(c["a"])[0])
            names = {side: self.plan.label(*split_score_name(c[side])) for side in ("a", "b")}
            claims.append(
                {
                    "paper": c["paper"],
                    "claim": c["claim"],
                    "a": names["a"],
                    "b": names["b"],
                    "published": c["published"],
                    "tolerance": c.get("tolerance", reproduced["tolerance"]),
                    "runs_a": self._claim_runs(c["a"]),
                    "runs_b": self._claim_runs(c["b"]),
                    "refs": self._claim_refs(c),
                    "rejoin": self.plan.config["pairs"][pair]["rejoin_hyphens"],
                }
            )
        boot = self.plan.config["evaluation"]["bootstrap"]
        comparable = self.plan.config["scale"] in reproduced["scales"]
        return {"title": CLAIMS_TITLE, "demo": self.plan.demo, "comparable": comparable, "samples": boot["samples"], "seed": boot["seed"], "claims": claims}

    # --- variants ----------------------------------------------------------------------------------------

    def _variant_runs(self, system: str) -> list[dict[str, Any]]:
        """A system's runs, one per seed: its test translations as decoded, its scores and its meta.json."""
        return [
            {
                "seed": self.plan.runs[run].seed,
                "hyps": translation_of(score_name(run)),
                "scores": paths.scores(score_name(run)),
                "meta": paths.model(run, "meta.json"),
            }
            for run in self.plan.runs_of(system)
        ]

    def variants_spec(self) -> dict[str, Any]:
        """Each baseline with its variants (Plan.variants), the files of their runs and the pair's test set, for `rnnmt variants`."""
        groups = []
        for baseline, variants in self.plan.variants.items():
            pair = self.plan.pair_of(baseline)
            tgt = self.plan.langs(pair)[1]
            groups.append(
                {
                    "baseline": {"label": self.plan.label(baseline), "runs": self._variant_runs(baseline)},
                    "variants": [{"label": self.plan.label(v), "runs": self._variant_runs(v)} for v in variants],
                    "refs_tok": paths.tok(pair, "test", tgt),
                    "refs_raw": paths.corpus(pair, "test", tgt),
                    "lang": tgt,
                    "rejoin": self.plan.config["pairs"][pair]["rejoin_hyphens"],
                    "lowercase": cfg.tokenizer(self.plan.config, pair)["lowercase"],
                }
            )
        boot = self.plan.config["evaluation"]["bootstrap"]
        return {"title": VARIANTS_TITLE, "demo": self.plan.demo, "samples": boot["samples"], "seed": boot["seed"], "groups": groups}

    def variants_inputs(self, wildcards: Any) -> list[str]:
        """Every file `rnnmt variants` reads: each run's translations, scores and meta.json, each pair's references."""
        groups = self.variants_spec()["groups"]
        runs = [run for g in groups for entry in (g["baseline"], *g["variants"]) for run in entry["runs"]]
        return sorted({f for run in runs for f in (run["hyps"], run["scores"], run["meta"])} | {f for g in groups for f in (g["refs_tok"], g["refs_raw"])})

    def coverage_spec(self) -> dict[str, Any]:
        """config `coverage`, each row with whether this scale's run writes its output."""
        made = set(self.plan.final_targets())
        rows = [{**row, "this run": "yes" if row["output"] in made else "no"} for row in self.plan.config["coverage"]]
        return {"title": COVERAGE_TITLE, "rows": rows}

    # --- figures ------------------------------------------------------------------------------------------

    # The file of a run that a figure kind reads (evaluate/figures.py FigureKind.reads).
    READS = {
        "scores": lambda run, unk: paths.scores(score_name(run, unk)),
        "meta": lambda run, unk: paths.model(run, "meta.json"),
        "alignments": lambda run, unk: paths.alignments(run),
    }

    def _figure_curves(self, name: str) -> list[dict[str, Any]]:
        """Each curve of a figure: its label and the file of each run it draws (every seed's, or the first's)."""
        kind = figure_kind(self.plan.config["figures"][name]["kind"])
        curves = []
        for curve in self.plan.figure_rows(name):
            runs = self.plan.runs_of(curve.system)
            files = [self.READS[kind.reads](run, curve.unk_replace) for run in (runs if kind.every_seed else runs[:1])]
            curves.append({"label": self.plan.label(curve.system, curve.unk_replace, template=curve.legend), "files": files})
        return curves

    def figure_inputs(self, wildcards: Any) -> list[str]:
        return sorted({f for curve in self._figure_curves(wildcards.figure) for f in curve["files"]})

    def figure_spec(self, name: str) -> dict[str, Any]:
        """What `rnnmt figure` draws: the kind, title, the demo's banner, the curves and the kind's settings."""
        fig = self.plan.config["figures"][name]
        kind, curves = figure_kind(fig["kind"]), self._figure_curves(name)
        spec = {
            "kind": fig["kind"],
            "title": fig["title"].format(systems=", ".join(c["label"] for c in curves)),
            "banner": DEMO_BANNER if self.plan.demo else None,
        }
        spec |= {option: fig[option] for option in kind.options}
        if kind.evaluation:
            spec["evaluation"] = self.plan.config["evaluation"][kind.evaluation]
        return {**spec, "curves": curves}
