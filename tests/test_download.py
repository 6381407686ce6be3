"""Downloads against a local HTTP server on 127.0.0.1: checksums, resume, errors, offline copies."""

from __future__ import annotations

import collections
import gzip
import hashlib
import http.server
import socket
import threading
import time
from dataclasses import dataclass, field

import pytest

from rnnmt.data import download as dl
from rnnmt.data.download import Checksum, download, mirror_url, verify_checksum
from rnnmt.errors import UserError

# A real gzip stream of 1 MiB (stored, not compressed), so that a transfer spans several reads and
# passes the check that an archive starts with its signature.
BODY = gzip.compress(bytes(range(256)) * 4096, compresslevel=0, mtime=0)


@dataclass
class Served:
    """What the test server serves and what it was asked."""

    files: dict[str, bytes] = field(default_factory=dict)
    drop_after: dict[str, int] = field(default_factory=dict)  # first request only
    stall_after: dict[str, tuple[int, float]] = field(default_factory=dict)  # first request: bytes, then seconds of silence
    ignore_range: bool = False
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    port: int = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def _handler(served: Served) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            served.requests.append((self.path, self.headers.get("Range")))
            body = served.files.get(self.path)
            if body is None:
                self.send_error(404)
                return
            start = 0
            if (rng := self.headers.get("Range")) and not served.ignore_range:
                start = int(rng.removeprefix("bytes=").removesuffix("-"))
                if start >= len(body):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(body)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            if (stall := served.stall_after.pop(self.path, None)) is not None:
                self.wfile.write(body[start : start + stall[0]])
                self.wfile.flush()
                time.sleep(stall[1])
                self.close_connection = True
                return
            cut = served.drop_after.pop(self.path, None)
            self.wfile.write(body[start:] if cut is None else body[start : start + cut])
            if cut is not None:
                self.wfile.flush()
                self.close_connection = True

    return Handler


@pytest.fixture
def server():
    served = Served()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(served))
    httpd.daemon_threads = True
    served.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield served
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    # A proxy from the environment would otherwise be asked for 127.0.0.1.
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


def sha256(data: bytes) -> Checksum:
    return Checksum("sha256", hashlib.sha256(data).hexdigest())


def md5(data: bytes) -> Checksum:
    return Checksum("md5", hashlib.md5(data).hexdigest())


def test_download_with_sha256(server, tmp_path):
    server.files["/wmt13/a.tgz"] = BODY
    lines = []
    info = download(server.url("/wmt13/a.tgz"), tmp_path / "a.tgz", checksum=sha256(BODY), size=len(BODY), progress=lines.append)
    assert (tmp_path / "a.tgz").read_bytes() == BODY
    assert info["source"] == "download" and info["checksum_verified"] and info["bytes"] == len(BODY)
    assert info["sha256"] == hashlib.sha256(BODY).hexdigest()
    assert not (tmp_path / "a.tgz.part").exists()
    assert "MB/s" in lines[-1]


def test_download_with_md5_upper_case(server, tmp_path):
    server.files["/a.tgz"] = BODY
    checksum = Checksum("md5", hashlib.md5(BODY).hexdigest().upper())
    info = download(server.url("/a.tgz"), tmp_path / "a.tgz", checksum=checksum)
    assert info["checksum_verified"] and info["sha256"] == hashlib.sha256(BODY).hexdigest()


def test_unknown_algorithm():
    with pytest.raises(UserError, match="crc32"):
        Checksum("crc32", "00")


def test_dropped_connection_resumes(server, tmp_path):
    server.files["/a.tgz"] = BODY
    server.drop_after["/a.tgz"] = 300_000
    download(server.url("/a.tgz"), tmp_path / "a.tgz", checksum=md5(BODY), backoff_s=0.001)
    assert (tmp_path / "a.tgz").read_bytes() == BODY
    assert server.requests == [("/a.tgz", None), ("/a.tgz", "bytes=300000-")]


def test_a_stalled_download_keeps_the_bytes_it_received(server, tmp_path):
    """Issue 11, defect 8: the message said "the bytes so far are kept" while the partial file was empty."""
    server.files["/a.tgz"] = BODY
    server.stall_after["/a.tgz"] = (300_000, 2.0)
    download(server.url("/a.tgz"), tmp_path / "a.tgz", checksum=md5(BODY), timeout_s=0.5, backoff_s=0.001)
    assert (tmp_path / "a.tgz").read_bytes() == BODY
    assert server.requests == [("/a.tgz", None), ("/a.tgz", "bytes=300000-")]


@pytest.mark.parametrize("name", ["bitexts.tgz", "train.en"])
def test_an_html_page_answered_with_200_is_not_saved_as_the_file(server, tmp_path, name):
    """Without a published checksum or size (LIUM), nothing else would notice a server's error or login page."""
    server.files[f"/{name}"] = b"<!DOCTYPE html>\n<html><head><title>Page not found</title></head></html>\n"
    with pytest.raises(UserError, match=rf"{name}: expected .*HTML page"):
        download(server.url(f"/{name}"), tmp_path / name, checksum=None)
    assert not (tmp_path / name).exists() and not (tmp_path / f"{name}.part").exists()


def test_a_file_that_is_not_an_archive_is_refused_wherever_it_comes_from(tmp_path):
    offline = tmp_path / "offline"
    offline.mkdir()
    (offline / "x.tgz").write_bytes(b"not gzip at all")
    with pytest.raises(UserError, match=r"x.tgz \(from download.dir\): expected a gzip archive"):
        download("http://127.0.0.1:9/x.tgz", tmp_path / "x.tgz", checksum=None, offline_dir=offline)
    (tmp_path / "y.tar").write_bytes(b"<html>oops</html>")
    with pytest.raises(UserError, match=r"y.tar \(already exists\): expected a tar archive, but it starts like an HTML page"):
        download("http://127.0.0.1:9/y.tar", tmp_path / "y.tar", checksum=None)


def test_server_ignoring_range_starts_over(server, tmp_path):
    server.files["/a.tgz"] = BODY
    server.drop_after["/a.tgz"] = 300_000
    server.ignore_range = True
    download(server.url("/a.tgz"), tmp_path / "a.tgz", checksum=sha256(BODY), backoff_s=0.001)
    assert (tmp_path / "a.tgz").read_bytes() == BODY


def test_complete_partial_answered_416(server, tmp_path):
    server.files["/a.tgz"] = BODY
    (tmp_path / "a.tgz.part").write_bytes(BODY)
    info = download(server.url("/a.tgz"), tmp_path / "a.tgz", checksum=sha256(BODY))
    assert info["source"] == "download" and (tmp_path / "a.tgz").read_bytes() == BODY
    assert server.requests == [("/a.tgz", f"bytes={len(BODY)}-")]


def test_wrong_checksum_leaves_nothing(server, tmp_path):
    server.files["/a.tgz"] = BODY
    with pytest.raises(UserError, match="expected 0+; the download is damaged"):
        download(server.url("/a.tgz"), tmp_path / "a.tgz", checksum=Checksum("sha256", "0" * 64))
    assert not (tmp_path / "a.tgz").exists() and not (tmp_path / "a.tgz.part").exists()


def test_http_404_is_not_retried(server, tmp_path):
    url = server.url("/wmt14/missing.tgz")
    with pytest.raises(UserError, match=f"{url} answered HTTP 404.*download.dir"):
        download(url, tmp_path / "missing.tgz", checksum=None, backoff_s=0.001)
    assert len(server.requests) == 1


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening_names_download_dir(tmp_path):
    with pytest.raises(UserError, match=r"no download\.dir is set; this machine seems offline — fetch x\.tgz elsewhere and give its folder as download\.dir"):
        download(f"http://127.0.0.1:{unused_port()}/x.tgz", tmp_path / "x.tgz", checksum=None, retries=1, backoff_s=0.001)


def test_offline_without_the_archive_in_download_dir_names_the_file_the_folder_and_the_url(tmp_path):
    """download.dir may hold only some archives; for one it lacks, an offline machine's error says what was looked for where."""
    supplied, url = tmp_path / "by-hand", f"http://127.0.0.1:{unused_port()}/wmt14/dev.tgz"
    supplied.mkdir()
    logged: list[str] = []
    with pytest.raises(UserError) as error:
        download(url, tmp_path / "out" / "dev.tgz", checksum=None, offline_dir=supplied, retries=1, backoff_s=0.001, progress=logged.append)
    looked = f"download.dir {supplied} has no dev.tgz (looked for {supplied / 'dev.tgz'} and {supplied / 'wmt14' / 'dev.tgz'})"
    assert str(error.value).startswith(f"cannot reach 127.0.0.1 for {url} (")
    assert str(error.value).endswith(f"after 2 attempts, and {looked}; this machine seems offline — put dev.tgz in {supplied}, or set download.mirror.")
    assert logged == [f"{looked}; downloading {url}."]
    assert not (tmp_path / "out" / "dev.tgz").exists()


def test_a_download_dir_that_is_not_a_folder_stops_before_the_network(server, tmp_path):
    server.files["/a.tgz"] = BODY
    (tmp_path / "a-file").write_bytes(BODY)
    for offline, what in ((tmp_path / "nowhere", "does not exist"), (tmp_path / "a-file", "is not a folder")):
        with pytest.raises(UserError, match=f"^download.dir {offline} {what}; expected a folder of archives fetched by hand"):
            download(server.url("/a.tgz"), tmp_path / "out" / "a.tgz", checksum=None, offline_dir=offline)
    assert server.requests == [] and not (tmp_path / "out").exists()


def test_offline_dir_needs_no_server(tmp_path):
    supplied = tmp_path / "by-hand"
    supplied.mkdir()
    (supplied / "a.tgz").write_bytes(BODY)
    info = download("http://127.0.0.1:9/a.tgz", tmp_path / "out" / "a.tgz", checksum=md5(BODY), offline_dir=supplied)
    assert info["source"] == "offline_dir" and (tmp_path / "out" / "a.tgz").read_bytes() == BODY


def test_offline_dir_as_a_mirrored_tree(tmp_path):
    (tmp_path / "tree" / "wmt14").mkdir(parents=True)
    (tmp_path / "tree" / "wmt14" / "dev.tgz").write_bytes(BODY)
    dest = tmp_path / "out" / "dev.tgz"
    info = download("http://www.statmt.org/wmt14/dev.tgz", dest, checksum=md5(BODY), offline_dir=tmp_path / "tree")
    assert info["source"] == "offline_dir" and dest.read_bytes() == BODY


def test_offline_dir_with_wrong_file(tmp_path):
    (tmp_path / "a.tgz").write_bytes(b"not it")
    with pytest.raises(UserError, match="download.dir"):
        download("http://127.0.0.1:9/a.tgz", tmp_path / "out" / "a.tgz", checksum=md5(BODY), offline_dir=tmp_path)
    assert not (tmp_path / "out" / "a.tgz").exists()


def test_already_present_is_not_downloaded(server, tmp_path):
    (tmp_path / "a.tgz").write_bytes(BODY)
    info = download(server.url("/a.tgz"), tmp_path / "a.tgz", checksum=sha256(BODY))
    assert info["source"] == "already_present" and server.requests == []


def test_damaged_present_file_is_kept(server, tmp_path):
    (tmp_path / "a.tgz").write_bytes(b"damaged")
    with pytest.raises(UserError, match="already exists"):
        download(server.url("/a.tgz"), tmp_path / "a.tgz", checksum=sha256(BODY))
    assert (tmp_path / "a.tgz").read_bytes() == b"damaged" and server.requests == []


def test_no_checksum_records_sha256(server, tmp_path):
    server.files["/a.tgz"] = BODY
    lines = []
    info = download(server.url("/a.tgz"), tmp_path / "a.tgz", checksum=None, progress=lines.append)
    assert not info["checksum_verified"] and info["sha256"] == hashlib.sha256(BODY).hexdigest()
    assert "no published checksum" in lines[-1] and info["sha256"] in lines[-1]


def test_mirror(server, tmp_path):
    server.files["/wmt/wmt13/a.tgz"] = BODY
    url = "http://www.statmt.org/wmt13/a.tgz"
    info = download(url, tmp_path / "a.tgz", checksum=sha256(BODY), mirror=server.url("/wmt"))
    assert info["url"] == url and server.requests == [("/wmt/wmt13/a.tgz", None)]


def test_mirror_url():
    assert mirror_url("https://statmt.org/wmt14/test-full.tgz", "http://127.0.0.1:8000/wmt/") == ("http://127.0.0.1:8000/wmt/wmt14/test-full.tgz")
    assert mirror_url("http://www.statmt.org/wmt13/x.tgz", None) == "http://www.statmt.org/wmt13/x.tgz"


def test_insufficient_disk(server, tmp_path, monkeypatch):
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(dl.shutil, "disk_usage", lambda path: usage(10**12, 10**12 - 10**9, 10**9))
    with pytest.raises(UserError, match="1.0 GB free but a.tgz needs 2.6 GB more"):
        download(server.url("/a.tgz"), tmp_path / "a.tgz", checksum=None, size=2_595_102_720)
    assert server.requests == []


def test_verify_checksum(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    assert verify_checksum(path, None) == hashlib.sha256(b"abc").hexdigest()
    with pytest.raises(UserError, match=f"{path}: md5 is {hashlib.md5(b'abc').hexdigest()}, expected f+;"):
        verify_checksum(path, Checksum("md5", "f" * 32))


def test_a_local_file_is_linked_and_checked_against_its_sha256(tmp_path):
    """A corpus of one's own (data.files) given by path arrives as a file:// URL: linked into place, its sha256 checked."""
    mine = tmp_path / "train.de.gz"
    mine.write_bytes(gzip.compress(b"Guten Tag.\n"))
    dest = tmp_path / "archives" / "my-train.de.gz"
    info = download(mine.as_uri(), dest, checksum=Checksum("sha256", hashlib.sha256(mine.read_bytes()).hexdigest()))
    assert info["source"] == "local_file" and info["checksum_verified"] and dest.read_bytes() == mine.read_bytes()
    assert dest.stat().st_ino == mine.stat().st_ino  # a hard link on the same file system: no copy
    dest.unlink()
    with pytest.raises(UserError, match=r"train\.de\.gz \(a file of data\.files\): sha256 is [0-9a-f]{64}, expected 0{64}; check the path and the sha256"):
        download(mine.as_uri(), dest, checksum=Checksum("sha256", "0" * 64))
    assert not dest.exists()
    with pytest.raises(UserError, match=r"nowhere\.de does not exist; check the path"):
        download((tmp_path / "nowhere.de").as_uri(), tmp_path / "archives" / "x", checksum=None)
