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
