"""The README and docs/ link to each other by relative paths: every such link must reach a file, and a
link to a heading (#anchor) must name one that file has. Figures the docs state about the workflow's files agree
with those files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(document: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+\s+(.+?)\s*$", document.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def relative_links(document: Path) -> list[str]:
    return [target for target in LINK.findall(document.read_text()) if not re.match(r"[a-z][a-z+.-]*:", target)]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.name)
def test_relative_links_resolve(document):
    for target in relative_links(document):
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        assert linked.exists(), f"{document.name}: {target} does not exist"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors(linked), f"{document.name}: {target} names no heading of {linked.name}"


def test_the_link_checker_sees_links_and_headings(tmp_path):
    """The checker itself: a relative link and an anchor are found; a URL is not a relative link."""
    doc = tmp_path / "a.md"
    doc.write_text("# Running on a GPU\n[x](b.md#when-something-goes-wrong) [y](https://example.org) [z](#running-on-a-gpu)\n")
    assert relative_links(doc) == ["b.md#when-something-goes-wrong", "#running-on-a-gpu"]
    assert anchors(doc) == {"running-on-a-gpu"}


def test_the_memory_table_and_the_slurm_profile_ask_the_same_memory():
    """docs/paper-scale.md's measured memory per data rule is what the Slurm profile requests."""
    text = (ROOT / "docs" / "paper-scale.md").read_text(encoding="utf-8")
    section = text[text.index("## Memory") : text.index("## GPU time per training job")]
    rows = re.findall(r"^\| `rnnmt [a-z-]+` \(`(\w+)`\) \|.*\| `([^`]+)` \|$", section, re.MULTILINE)
    resources = yaml.safe_load((ROOT / "workflow" / "profiles" / "slurm" / "config.yaml").read_text())["set-resources"]
    assert len(rows) == 5
    assert {rule: str(resources[rule]["mem_mb"]) for rule, _ in rows} == dict(rows)


def test_each_tables_gpu_hours_are_its_systems_rows_of_the_cost_table():
    """docs/paper-scale.md's cost of one table is derived from the per-system table on the same page."""
    from rnnmt import config as cfg
    from rnnmt.workflow.plan import Plan

    text = (ROOT / "docs" / "paper-scale.md").read_text(encoding="utf-8")
    hours = {s: float(h) for s, h in re.findall(r"^\| ([a-z0-9-]+) \| [\d,]+ \| [\d,]+ \| [\d,]+ \| \d+ \| [\d.]+ \| ([\d.]+) \|", text, re.MULTILINE)}
    tables = re.findall(r"^\| `(\w+)` \| (\d+)[^|]* \| ([\d.]+) \|$", text, re.MULTILINE)
    assert len(hours) == 23 and len(tables) == 6
    for table, count, total in tables:
        raw = cfg.deep_merge(cfg.read_yaml(ROOT / "config.yaml"), {"scale": "paper", "only_tables": [table]})
        systems = Plan.load(raw, ROOT / "workflow" / "schemas" / "config.schema.yaml").systems
        assert (len(systems), round(sum(hours[s] for s in systems), 1)) == (int(count), float(total)), table


def test_the_citation_names_the_packages_version():
    """CITATION.cff's version is the one rnnmt reports (src/rnnmt/__init__.py)."""
    import rnnmt

    assert str(yaml.safe_load((ROOT / "CITATION.cff").read_text())["version"]) == rnnmt.__version__


MEASUREMENTS = ROOT / "docs" / "measurements.md"
# A figure with its unit, or a range of two ("337–463 s"), and a date: what a README passage quotes from a page.
NUMBER = r"\d+(?:,\d{3})*(?:\.\d+)?"
FIGURE = re.compile(rf"({NUMBER})(?:–({NUMBER}))? ?(?:s|minutes|hours|GPU-hours)\b")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def passages(text: str) -> list[str]:
    """A Markdown text's paragraphs and list items, each joined into one line."""
    blocks = re.split(r"\n\s*\n|\n(?=- )", text)
    return [" ".join(block.split()) for block in blocks if block.strip()]


def quoted_figures(passage: str) -> set[str]:
    """The figures with a unit and the dates a passage states."""
    numbers = {n for pair in FIGURE.findall(passage) for n in pair if n}
    return numbers | set(DATE.findall(passage))


def test_the_figure_finder_sees_ranges_units_and_dates():
    """The checker itself: ranges give both ends, bare numbers without a unit are not figures."""
    found = quoted_figures("337–463 s in nine runs on 2026-11-29, 1,034 s, 52.4 GPU-hours, 23 systems, 7 minutes")
    assert found == {"337", "463", "1,034", "52.4", "7", "2026-11-29"}


def test_the_readmes_measured_figures_are_the_measurements_pages():
    """Each README passage that cites docs/measurements.md quotes only figures and dates that page states."""
    page = MEASUREMENTS.read_text(encoding="utf-8")
    stated = set(re.findall(NUMBER, page)) | set(DATE.findall(page))
    citing = [p for p in passages((ROOT / "README.md").read_text(encoding="utf-8")) if "docs/measurements.md" in p]
    assert citing, "no README passage cites docs/measurements.md"
    for passage in citing:
        missing = quoted_figures(passage) - stated
        assert not missing, f"README quotes {sorted(missing)} beside a link to docs/measurements.md, which does not state them: {passage[:120]}"
