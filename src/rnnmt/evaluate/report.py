"""`rnnmt table`, `rnnmt claims` and `rnnmt variants`: read the files a table spec names and write the table (and its check)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rnnmt.errors import UserError
from rnnmt.evaluate.bleu import detokenized_metric, rejoin_hyphens
from rnnmt.evaluate.significance import bootstrap
from rnnmt.evaluate.tables import (
    DEMO_BANNER,
    TableKind,
    attention_check,
    build_claims_table,
    build_coverage_table,
    build_variants_table,
    over_seeds,
    table_kind,
    write_table,
)
from rnnmt.fileio import read_json, read_lines
from rnnmt.runtime import log
from rnnmt.text.tokenize import detokenize_lines


def _load(path: str | dict[str, str] | None) -> dict | None:
    """A JSON file's contents, or those of each file of a mapping (a splits table's scores by corpus); None for none."""
    if isinstance(path, dict):
        return {key: read_json(file) for key, file in path.items()}
    return read_json(path) if path else None


def _row(spec_row: dict[str, Any], kind: TableKind) -> dict[str, Any]:
    """A builder row: the label as the system, the published numbers, and the JSON files its kind reads."""
    files = {key: _load(spec_row.get(spec_key)) for key, spec_key in kind.files.items()}
    return {"system": spec_row["label"], "published": spec_row.get("published"), **files}


def table_command(spec: dict[str, Any], csv_path: Path, md_path: Path) -> None:
    """spec: {kind: one of tables.TABLE_KINDS, title, data?, demo, rows: [{label, system?, file?, unk_file?, meta?,
    splits?: {corpus: file}, published?, seeds?: [{seed, file?, unk_file?, meta?, splits?}]}], not_run?, check?,
    unk_column?, splits?, tolerance?}. A row with `seeds` shows the mean over them (tables.over_seeds)."""
    kind = table_kind(spec["kind"])
    rows = spec["rows"]
    options = {name: spec[name] for name in kind.options if name in spec}
    df = kind.build([_row(r, kind) for r in rows], demo=spec["demo"], **options)
    if any("seeds" in r for r in rows):
        per_seed = [
            [(s["seed"], kind.build([_row({**r, **s}, kind)], demo=spec["demo"], **options).iloc[0]) for s in r["seeds"]] if "seeds" in r else None
            for r in rows
        ]
        df = over_seeds(df, per_seed)
    if spec.get("check"):
        for text in _attention_checks(rows, spec["check"]):
            df.attrs.setdefault("notes", []).append("```\n" + text + "\n```")
            print(text)
    if spec.get("not_run"):
        df.attrs.setdefault("notes", []).append(f"Rows of the paper's table not run at this scale: {', '.join(spec['not_run'])} (config `systems`).")
    preface = [spec["data"]] if spec.get("data") else []
    write_table(df, csv_path, md_path, title=spec["title"], banner=DEMO_BANNER if spec["demo"] else None, preface=preface)
    print(md_path.read_text(encoding="utf-8"))


def _attention_checks(rows: list[dict[str, Any]], check: dict[str, str]) -> list[str]:
    """The demo's attention check on the rows' score files: once, or once per seed both systems have."""
    runs = {r["system"]: {s["seed"]: s["file"] for s in r.get("seeds", [])} or {None: r["file"]} for r in rows if r.get("file")}
    search, encdec = runs.get(check["search"], {}), runs.get(check["encdec"], {})
    texts = []
    for seed in [s for s in search if s in encdec] or [None]:
        scores = {name: _load(files[seed]) for name, files in ((check["search"], search), (check["encdec"], encdec)) if seed in files}
        _, text = attention_check(scores, search=check["search"], encdec=check["encdec"])
        texts.append(text if seed is None else f"Seed {seed}\n{text}")
    return texts


def _as_scored(lines: list[str], rejoin: bool) -> list[str]:
    """Tokenized lines as tokenized BLEU reads them: split hyphens rejoined where the pair's tables do (Luong)."""
    return rejoin_hyphens(lines) if rejoin else lines


def _mean(values: list[float | None]) -> float | None:
    """The mean over seeds; None where a seed has no value (no sentence on one side of a length split, no such set)."""
    return None if any(v is None for v in values) else sum(values) / len(values)  # type: ignore[arg-type]


def claims_command(spec: dict[str, Any], csv_path: Path, md_path: Path) -> None:
    """spec: {title, demo, comparable, samples, seed, claims: [{paper, claim, a, b, runs_a: [{seed, hyps}], runs_b, refs,
    rejoin, published?, tolerance}]}. One seed a side: the paired bootstrap of the test sentences; more: the two-level bootstrap."""
    rows = []
    for c in spec["claims"]:
        refs = _as_scored(read_lines(c["refs"]), c["rejoin"])
        hyps_a, hyps_b = ([_as_scored(read_lines(run["hyps"]), c["rejoin"]) for run in c[side]] for side in ("runs_a", "runs_b"))
        d = bootstrap(hyps_a, hyps_b, refs, spec["samples"], spec["seed"])
        log(f"{c['a']} vs {c['b']}: delta {d.delta:+.2f} BLEU, 95% [{d.low:+.2f}, {d.high:+.2f}]")
        rows.append({**c, **dataclasses.asdict(d), "comparable": spec["comparable"]})
    write_table(build_claims_table(rows), csv_path, md_path, title=spec["title"], banner=DEMO_BANNER if spec["demo"] else None)
    print(md_path.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class _Side:
    """One system of a variants table: its label and, per seed, its translations as each metric reads them, its scores and
    its meta.json."""

    label: str
    tokenized: list[list[str]]
    detokenized: list[list[str]]
    scores: list[dict[str, Any]]
    meta: list[dict[str, Any]]

    @staticmethod
    def read(entry: dict[str, Any], lang: str, rejoin: bool) -> _Side:
        """A spec's {label, runs: [{seed, hyps, scores, meta}]}, its translations in `lang`."""
        hyps = [read_lines(run["hyps"]) for run in entry["runs"]]
        return _Side(
            entry["label"],
            [_as_scored(h, rejoin) for h in hyps],
            [detokenize_lines(h, lang) for h in hyps],
            [read_json(run["scores"]) for run in entry["runs"]],
            [read_json(run["meta"]) for run in entry["runs"]],
        )

    def numbers(self) -> dict[str, Any]:
        """Its means over seeds: BLEU, sacreBLEU, dev and test perplexity, BLEU of the short and of the long sentences."""
        return {
            "label": self.label,
            "seeds": len(self.scores),
            "bleu": _mean([s["bleu_all"] for s in self.scores]),
            "sacrebleu": _mean([s["sacrebleu_all"] for s in self.scores]),
            "dev_ppl": _mean([m["heldout_ppl"].get("dev") for m in self.meta]),
            "test_ppl": _mean([m["heldout_ppl"].get("test") for m in self.meta]),
            "short": _mean([s["split"]["short"]["bleu"] for s in self.scores]),
            "long": _mean([s["split"]["long"]["bleu"] for s in self.scores]),
        }


VARIANTS_DEMO_BANNER = "**Synthetic demo data** — differences on these data and sizes say nothing about WMT."


def variants_command(spec: dict[str, Any], csv_path: Path, md_path: Path) -> None:
    """spec: {title, demo, samples, seed, groups: [{baseline: {label, runs: [{seed, hyps, scores, meta}]}, variants: [same],
    refs_tok, refs_raw, lang, rejoin, lowercase}]}: each variant against its baseline, tokenized BLEU and sacreBLEU with paired
    bootstrap intervals and p-values, perplexity, and BLEU by length as the score files split it."""
    if not spec["groups"]:
        raise UserError("The variants spec has no groups; expected a baseline and its variants at least once.")
    rows = []
    for group in spec["groups"]:
        lang, rejoin = group["lang"], group["rejoin"]
        refs_tok, refs_raw = _as_scored(read_lines(group["refs_tok"]), rejoin), read_lines(group["refs_raw"])
        base = _Side.read(group["baseline"], lang, rejoin)
        rows.append(base.numbers())
        for entry in group["variants"]:
            side = _Side.read(entry, lang, rejoin)
            bleu = bootstrap(side.tokenized, base.tokenized, refs_tok, spec["samples"], spec["seed"])
            sacre = bootstrap(side.detokenized, base.detokenized, refs_raw, spec["samples"], spec["seed"], detokenized_metric(group["lowercase"]))
            log(f"{side.label} vs {base.label}: delta {bleu.delta:+.2f} BLEU (p {bleu.p_value:.3f}), {sacre.delta:+.2f} sacreBLEU (p {sacre.p_value:.3f})")
            rows.append({**side.numbers(), "baseline": base.label, "bleu_diff": bleu, "sacre_diff": sacre})
    scored = base.scores[0]  # every score file of a run splits at the workflow's one threshold and side
    df = build_variants_table(rows, scored["split"]["threshold"], scored["length_by"])
    write_table(df, csv_path, md_path, title=spec["title"], banner=VARIANTS_DEMO_BANNER if spec["demo"] else None)
    print(md_path.read_text(encoding="utf-8"))


def coverage_command(spec: dict[str, Any], csv_path: Path, md_path: Path) -> None:
    """spec: {title, rows: [{paper, item, status, output?, note?, this run}]}: every table and figure of the papers."""
    write_table(build_coverage_table(spec["rows"]), csv_path, md_path, title=spec["title"], banner=None)
    print(md_path.read_text(encoding="utf-8"))
