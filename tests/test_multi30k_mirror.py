"""The local stand-in for Multi30k's repository: the dataset's files at their URL paths, a slice of them with their own
checksums, fetched by rnnmt's download as the multi30k scale fetches them."""

from __future__ import annotations

import gzip

import pytest
import yaml

from rnnmt.data import sources
from rnnmt.data.download import Checksum, download

import multi30k_mirror as mm
import wmt_mirror as wm

needs_shared = pytest.mark.skipif(not (mm.DEFAULT_SHARED / "task1-raw-gz").is_dir(), reason=f"{mm.DEFAULT_SHARED} is absent: no Multi30k files to serve")


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    # A proxy from the environment would otherwise be asked for 127.0.0.1.
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@needs_shared
def test_the_whole_files_are_the_tables_and_a_slice_has_its_own_checksums(tmp_path):
    """Uncut, every file matches the shipped table's checksum; cut, each holds its first lines, gzipped the same way twice."""
    table = sources.load("multi30k")
    whole = yaml.safe_load(mm.build_mirror(tmp_path / "whole", mm.DEFAULT_SHARED).read_text())
    assert whole == {key: {"sha256": a["sha256"], "bytes": a["bytes"]} for key, a in table["archives"].items()}
    cut = yaml.safe_load(mm.build_mirror(tmp_path / "cut", mm.DEFAULT_SHARED, lines=5).read_text())
    assert cut == yaml.safe_load(mm.build_mirror(tmp_path / "again", mm.DEFAULT_SHARED, lines=5).read_text())
    train_de = tmp_path / "cut" / wm.url_path(table["archives"]["train.de"]["url"])
    expected = (mm.DEFAULT_SHARED / "raw" / "train.de").read_text(encoding="utf-8").splitlines(keepends=True)[:5]
    assert gzip.decompress(train_de.read_bytes()).decode("utf-8") == "".join(expected)


@needs_shared
def test_rnnmt_downloads_a_file_through_the_mirror_and_checks_it(tmp_path):
    table = sources.load("multi30k")
    mm.build_mirror(tmp_path / "root", mm.DEFAULT_SHARED)
    archive = table["archives"]["val.fr"]
    with wm.serve(tmp_path / "root") as base:
        record = download(archive["url"], tmp_path / "val.fr.gz", checksum=Checksum("sha256", archive["sha256"]), size=archive["bytes"], mirror=base)
    assert record["sha256"] == archive["sha256"] and (tmp_path / "val.fr.gz").stat().st_size == archive["bytes"]


def test_build_without_the_shared_folder_is_one_line(tmp_path, capsys):
    assert mm.main(["build", str(tmp_path / "out"), "--shared", str(tmp_path / "nowhere")]) == 2
    assert (
        capsys.readouterr().err
        == f"multi30k_mirror: {tmp_path / 'nowhere' / 'task1-raw-gz'} is missing; expected Multi30k's gzipped task-1 files (shared/data/multi30k).\n"
    )
