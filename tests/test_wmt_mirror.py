"""The local statmt.org stand-in: archive layout, checksums, determinism, HTTP ranges and the CLI."""

from __future__ import annotations

import hashlib
import http.client
import subprocess
import sys
import tarfile
import time
import urllib.parse
from pathlib import Path

import pytest
import yaml

from rnnmt.data.archives import extract_members
from rnnmt.data.download import Checksum, download
from rnnmt.data.sgm import read_sgm

import wmt_mirror as wm

NO_SHARED = f"{wm.DEFAULT_SHARED} is absent, so the mirror has no real WMT files to build from"


@pytest.fixture(scope="module", params=["generated", "shared"])
def mirror(request, tmp_path_factory) -> tuple[Path, Path | None]:
    """A built mirror (its folder and the shared folder it came from), once generated and once real."""
    shared = None if request.param == "generated" else wm.DEFAULT_SHARED
    if shared is not None and not shared.is_dir():
        pytest.skip(NO_SHARED)
    out = tmp_path_factory.mktemp(request.param)
    wm.build_mirror(out, shared)
    return out, shared


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    # A proxy from the environment would otherwise be asked for 127.0.0.1.
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


def archive_path(out: Path, key: str) -> Path:
    return out / wm.url_path(wm.load_table()["archives"][key]["url"])


def members(out: Path, key: str) -> dict[str, bytes | None]:
    """Member name -> content (None for folders) of a built archive."""
    with tarfile.open(archive_path(out, key)) as tar:
        return {m.name: tar.extractfile(m).read() if m.isreg() else None for m in tar}


def table_pairs(key: str) -> list[set[str]]:
    """The members of each corpus pair the sources table reads from archive `key`."""
    corpora = wm.load_table()["corpora"].values()
    pairs = [p for c in corpora if c.get("archive") == key for p in c["pairs"].values()]
    return [{v for k, v in pair.items() if k != "lines"} for pair in pairs]


def table_members(key: str) -> set[str]:
    """Every member the sources table reads from archive `key`."""
    return set().union(*table_pairs(key))


EXPECTED = {
    "nc-v9": {"training"} | {f"training/news-commentary-v9.{p}-en.{lang}" for p in ("fr", "de") for lang in ("en", p)},
    "dev": {"dev"}
    | {
        f"dev/newstest{y}{kind}.{lang}{ext}"
        for y in (2012, 2013)
        for lang in ("en", "fr", "de")
        for kind, ext in (("-src", ".sgm"), ("-ref", ".sgm"), ("", ""))
    },
    "test-full": {"test-full"}
    | {
        f"test-full/newstest2014-{p}-{side}.{lang}.sgm"
        for p, ls in (("fren", "enfr"), ("deen", "ende"))
        for side in ("src", "ref")
        for lang in (ls[:2], ls[2:])
    },
    "wmt15-test": {
        "test",
        "test/newstest2015-ende-src.en.sgm",
        "test/newstest2015-ende-ref.de.sgm",
        "test/newstest2015-deen-src.de.sgm",
        "test/newstest2015-deen-ref.en.sgm",
    },
}
EXPECTED["test-filtered"] = {n.replace("test-full", "test") for n in EXPECTED["test-full"]}


@pytest.mark.parametrize("key", wm.SAMPLE_ARCHIVES)
def test_member_names(mirror, key):
    out, _ = mirror
    names = members(out, key)
    assert set(names) == EXPECTED[key]
    assert table_members(key) <= {n for n, data in names.items() if data}


def test_checksums_match_files(mirror):
    out, _ = mirror
    table = yaml.safe_load((out / "checksums.yaml").read_text())
    assert list(table) == list(wm.SAMPLE_ARCHIVES)
    for key, entry in table.items():
        data = archive_path(out, key).read_bytes()
        assert entry == {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def test_rebuild_gives_identical_bytes(mirror, tmp_path):
    out, shared = mirror
    wm.build_mirror(tmp_path, shared)
    for key in wm.SAMPLE_ARCHIVES:
        assert archive_path(tmp_path, key).read_bytes() == archive_path(out, key).read_bytes(), key


def test_nc_v9_has_one_invalid_utf8_line(mirror):
    out, _ = mirror
    nc = members(out, "nc-v9")
    en = nc["training/news-commentary-v9.fr-en.en"].split(b"\n")
    fr = nc["training/news-commentary-v9.fr-en.fr"].split(b"\n")
    assert len(en) == len(fr) and en[wm.INVALID_UTF8_LINE - 1] == wm.INVALID_UTF8_EN
    bad = [i for i, line in enumerate(en, 1) if not _is_utf8(line)]
    assert bad == [wm.INVALID_UTF8_LINE]
    de, de_en = (nc[f"training/news-commentary-v9.de-en.{lang}"].decode().splitlines() for lang in ("de", "en"))
    assert len(de) == len(de_en) == wm.GENERATED_NC_LINES and all(de) and all(de_en)


def _is_utf8(line: bytes) -> bool:
    try:
        line.decode()
    except UnicodeDecodeError:
        return False
    return True


def test_table_members_extract_and_parse(mirror, tmp_path):
    """rnnmt's own extraction and SGM reader accept every member the table names; src and ref align."""
    out, _ = mirror
    for key in ("dev", "test-full", "test-filtered", "wmt15-test"):
        names = sorted(table_members(key))
        written = extract_members(archive_path(out, key), {n: tmp_path / key / n for n in names})
        assert sorted(written) == names
        for pair in table_pairs(key):
            counts = {n: len(read_sgm(tmp_path / key / n)) for n in pair}
            assert len(set(counts.values())) == 1, counts


def test_filtered_deen_is_the_2737_subset(tmp_path):
    if not wm.DEFAULT_SHARED.is_dir():
        pytest.skip(NO_SHARED)
    wm.build_mirror(tmp_path, wm.DEFAULT_SHARED, ["test-filtered"])
    filtered = members(tmp_path, "test-filtered")
    for side, lang in (("src", "en"), ("src", "de"), ("ref", "en"), ("ref", "de")):
        assert wm.count_segments(filtered[f"test/newstest2014-deen-{side}.{lang}.sgm"]) == wm.FILTERED_DEEN_SEGMENTS
    plain = wm.DEFAULT_SHARED / "test" / "plain" / "newstest2014-deen.filtered2737.en"
    (tmp_path / "en.sgm").write_bytes(filtered["test/newstest2014-deen-src.en.sgm"])
    assert sorted(read_sgm(tmp_path / "en.sgm")) == sorted(plain.read_text().splitlines())
    full_fren = (wm.DEFAULT_SHARED / "test" / "newstest2014-fren-src.fr.sgm").read_bytes()
    assert filtered["test/newstest2014-fren-src.fr.sgm"] == full_fren


def test_generated_filtered_is_a_smaller_subset(tmp_path):
    wm.build_mirror(tmp_path, None, ["test-full", "test-filtered"])
    full = members(tmp_path, "test-full")["test-full/newstest2014-deen-ref.de.sgm"]
    cut = members(tmp_path, "test-filtered")["test/newstest2014-deen-ref.de.sgm"]
    assert 0 < wm.count_segments(cut) < wm.count_segments(full)
    assert set(wm.segment_ids(cut)) < set(wm.segment_ids(full))


def test_filter_sgm_refuses_unknown_segments():
    sgm = wm.make_sgm([("d1", ["a", "b"])], "t", "en", "src", "en")
    assert wm.count_segments(wm.filter_sgm(sgm, {("d1", "2")})) == 1
    with pytest.raises(ValueError, match="kept 0 segments, expected 1"):
        wm.filter_sgm(sgm, {("d2", "1")})


def test_unknown_archive_is_refused(tmp_path):
    with pytest.raises(ValueError, match="europarl-v7"):
        wm.build_mirror(tmp_path, None, ["europarl-v7"])


def get(base: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one GET, sending `path` as given (no client-side normalising)."""
    conn = http.client.HTTPConnection(urllib.parse.urlsplit(base).netloc, timeout=5)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.headers), response.read()
    finally:
        conn.close()


def test_server_full_range_and_missing(tmp_path):
    (tmp_path / "root" / "wmt14").mkdir(parents=True)
    body = bytes(range(256)) * 8
    (tmp_path / "root" / "wmt14" / "dev.tgz").write_bytes(body)
    (tmp_path / "outside.tgz").write_bytes(body)
    with wm.serve(tmp_path / "root") as base:
        assert get(base, "/wmt14/dev.tgz")[::2] == (200, body)
        status, headers, data = get(base, "/wmt14/dev.tgz", {"Range": "bytes=1000-"})
        assert (status, data, headers["Content-Range"]) == (206, body[1000:], f"bytes 1000-{len(body) - 1}/{len(body)}")
        assert get(base, "/wmt14/dev.tgz", {"Range": "bytes=10-19"})[::2] == (206, body[10:20])
        status, headers, _ = get(base, "/wmt14/dev.tgz", {"Range": f"bytes={len(body)}-"})
        assert (status, headers["Content-Range"]) == (416, f"bytes */{len(body)}")
        assert get(base, "/wmt14/missing.tgz")[0] == 404
        assert get(base, "/wmt14")[0] == 404
        assert get(base, "/../outside.tgz")[0] == 404
        assert get(base, "/wmt14/../../outside.tgz")[0] == 404


def test_rnnmt_download_through_the_mirror(tmp_path):
    out = tmp_path / "mirror"
    sums = yaml.safe_load(wm.build_mirror(out, None, ["wmt15-test"]).read_text())["wmt15-test"]
    url = wm.load_table()["archives"]["wmt15-test"]["url"]
    with wm.serve(out) as base:
        info = download(url, tmp_path / "test.tgz", checksum=Checksum("sha256", sums["sha256"]), size=sums["bytes"], mirror=base)
    assert info["checksum_verified"] and info["bytes"] == sums["bytes"]


def test_cli_build_and_serve(tmp_path):
    script = str(Path(wm.__file__))
    built = subprocess.run(
        [sys.executable, script, "build", str(tmp_path / "m"), "--no-shared", "--archives", "wmt15-test"], capture_output=True, text=True, check=True
    )
    assert built.stdout.strip() == str(tmp_path / "m" / "checksums.yaml")
    port_file = tmp_path / "url"
    server = subprocess.Popen(
        [sys.executable, script, "serve", str(tmp_path / "m"), "--port-file", str(port_file)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 300  # a guard against a hang, not a schedule
        while not port_file.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        base = port_file.read_text().strip()
        assert get(base, "/wmt15/test.tgz")[0] == 200
    finally:
        server.terminate()
        _, err = server.communicate(timeout=5)
    assert server.returncode == 0, err
    assert not port_file.exists()


def test_cli_serve_needs_a_built_folder(tmp_path):
    run = subprocess.run(
        [sys.executable, str(Path(wm.__file__)), "serve", str(tmp_path / "none"), "--port-file", str(tmp_path / "u")], capture_output=True, text=True
    )
    assert run.returncode == 2 and "run 'build' first" in run.stderr
