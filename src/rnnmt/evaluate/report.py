"""`rnnmt table` and `rnnmt claims`: read the files a table spec names and write the table (and its check)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rnnmt.evaluate.bleu import rejoin_hyphens
from rnnmt.evaluate.significance import paired_bootstrap
from rnnmt.evaluate.tables import (
    DEMO_BANNER,
    attention_check,
    build_claims_table,
    build_luong_table,
    build_nist_table,
    build_table1,
    build_table2,
    write_table,
)
from rnnmt.fileio import read_json, read_lines
from rnnmt.runtime import log


def _load(path: str | None) -> dict | None:
    return read_json(path) if path else None


def table_command(spec: dict[str, Any], csv_path: Path, md_path: Path) -> None:
    """spec: {kind: bleu|learning|luong|nist, title, demo, rows: [{label, system?, file?, unk_file?, meta?, published?}],
    check?, unk_column?}."""
    rows = spec["rows"]
    if spec["kind"] == "bleu":
        df = build_table1([{"system": r["label"], "scores": _load(r.get("file")), "published": r.get("published")} for r in rows], demo=spec["demo"])
    elif spec["kind"] == "luong":
        luong_rows = [
            {"system": r["label"], "scores": _load(r.get("file")), "scores_unk": _load(r.get("unk_file")), "meta": _load(r.get("meta")),
             "published": r.get("published")}
            for r in rows
        ]  # fmt: skip
        df = build_luong_table(luong_rows, demo=spec["demo"], unk_column=spec.get("unk_column", False))
    elif spec["kind"] == "nist":
        df = build_nist_table([{"system": r["label"], "scores": _load(r.get("file")), "published": r.get("published")} for r in rows], demo=spec["demo"])
    else:
        df = build_table2([{"system": r["label"], "meta": _load(r.get("file")), "published": r.get("published")} for r in rows], demo=spec["demo"])
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
