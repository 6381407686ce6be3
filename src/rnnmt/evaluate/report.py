"""`rnnmt table` and `rnnmt claims`: read the files a table spec names and write the table (and its check)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rnnmt.evaluate.bleu import rejoin_hyphens
from rnnmt.evaluate.significance import paired_bootstrap
from rnnmt.evaluate.tables import DEMO_BANNER, TableKind, attention_check, build_claims_table, build_coverage_table, table_kind, write_table
from rnnmt.fileio import read_json, read_lines
from rnnmt.runtime import log


def _load(path: str | None) -> dict | None:
    return read_json(path) if path else None


def _row(spec_row: dict[str, Any], kind: TableKind) -> dict[str, Any]:
    """A builder row: the label as the system, the published numbers, and the JSON files its kind reads."""
    files = {key: _load(spec_row.get(spec_key)) for key, spec_key in kind.files.items()}
    return {"system": spec_row["label"], "published": spec_row.get("published"), **files}


def table_command(spec: dict[str, Any], csv_path: Path, md_path: Path) -> None:
    """spec: {kind: one of tables.TABLE_KINDS, title, demo, rows: [{label, system?, file?, unk_file?, meta?,
    published?}], check?, unk_column?}."""
    kind = table_kind(spec["kind"])
    rows = spec["rows"]
    options = {name: spec[name] for name in kind.options if name in spec}
    df = kind.build([_row(r, kind) for r in rows], demo=spec["demo"], **options)
    if spec.get("check"):
        scores = {r["system"]: _load(r["file"]) for r in rows if r.get("file")}
        passed, text = attention_check(scores, search=spec["check"]["search"], encdec=spec["check"]["encdec"])
        df.attrs.setdefault("notes", []).append("```\n" + text + "\n```")
        print(text)
    write_table(df, csv_path, md_path, title=spec["title"], banner=DEMO_BANNER if spec["demo"] else None)
    print(md_path.read_text(encoding="utf-8"))


def claims_command(spec: dict[str, Any], csv_path: Path, md_path: Path) -> None:
    """spec: {title, demo, samples, seed, claims: [{paper, claim, a, b, hyps_a, hyps_b, refs, rejoin, published?}]}."""
    rows = []
    for c in spec["claims"]:
        prepare = rejoin_hyphens if c["rejoin"] else list
        hyps_a, hyps_b, refs = (prepare(read_lines(c[key])) for key in ("hyps_a", "hyps_b", "refs"))
        d = paired_bootstrap(hyps_a, hyps_b, refs, spec["samples"], spec["seed"])
        log(f"{c['a']} vs {c['b']}: delta {d.delta:+.2f} BLEU, 95% [{d.low:+.2f}, {d.high:+.2f}]")
        rows.append({**c, "delta": d.delta, "low": d.low, "high": d.high, "p_not_better": d.p_not_better, "samples": d.samples})
    write_table(build_claims_table(rows), csv_path, md_path, title=spec["title"], banner=DEMO_BANNER if spec["demo"] else None)
    print(md_path.read_text(encoding="utf-8"))


def coverage_command(spec: dict[str, Any], csv_path: Path, md_path: Path) -> None:
    """spec: {title, rows: [{paper, item, status, output?, note?, this run}]}: every table and figure of the papers."""
    write_table(build_coverage_table(spec["rows"]), csv_path, md_path, title=spec["title"], banner=None)
    print(md_path.read_text(encoding="utf-8"))
