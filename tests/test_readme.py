"""The README's demo tables are a demo run's: its seed-1 columns equal results/tables of `snakemake --cores all`.

CI runs the demo, then this module with RNNMT_DEMO_RESULTS=results; without that variable (a checkout whose
results/ may come from an edited model) it skips, saying why.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from test_workflow import DEMO_RESULTS, ROOT

pytestmark = pytest.mark.skipif(not DEMO_RESULTS, reason="RNNMT_DEMO_RESULTS names no demo run's results/ folder (CI sets it after its demo)")


def readme_rows(header: str) -> dict[str, list[str]]:
    """The rows of the README table whose header line starts with `header`, by their first cell."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text[text.index(header) :].split("\n\n", 1)[0].splitlines()[2:]
    return {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")] for line in block)}


def demo_rows(table: str) -> dict[str, dict[str, str]]:
    with open(Path(DEMO_RESULTS) / "tables" / f"{table}.csv", encoding="utf-8") as f:
        return {row["System"]: row for row in csv.DictReader(f)}


def cell(value: str) -> str:
    """A CSV number as the README prints it: two decimals, an empty cell as a dash."""
    return f"{float(value):.2f}" if value else "—"


def test_the_readme_bahdanau_table_is_the_demo_runs():
    readme, demo = readme_rows("| system | updates | BLEU All"), demo_rows("bahdanau2014_table1")
    assert set(readme) == {system for system, row in demo.items() if row["BLEU All"]}  # every trained row (not Moses's)
    for system, (_, bleu_all, bleu_nounk, _) in readme.items():
        assert [bleu_all, bleu_nounk] == [cell(demo[system]["BLEU All"]), cell(demo[system]["BLEU No-UNK"])], system


def test_the_readme_luong_table_is_the_demo_runs():
    readme = readme_rows("| Luong system")
    demo = demo_rows("luong2015_table1") | demo_rows("luong2015_table4")
    assert len(readme) == 3
    for label, (ppl, bleu, bleu_unk, _) in readme.items():
        system = re.sub(r" \(no attention.*\)$| \+ feed$", "", label)  # the tables' labels
        row = demo[system]
        assert [ppl, bleu, bleu_unk] == [cell(row["Ppl"]), cell(row["BLEU"]), cell(row.get("BLEU +unk", ""))], label
