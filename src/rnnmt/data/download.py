"""Fetch the WMT archives: resumable HTTP downloads, checksum checks, copies from a local folder."""

from __future__ import annotations

import errno
import hashlib
import http.client
import os
import posixpath
import re
import shutil
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rnnmt.errors import UserError
from rnnmt.fileio import atomic_path

CHUNK = 1 << 20
PROGRESS_EVERY_S = 2.0
ALGOS = ("sha256", "md5")
# Errors after which the server may well answer the next attempt; a refused connection is kept
# here too because a server that is restarting refuses for a moment.
TRANSIENT = (urllib.error.URLError, ConnectionError, TimeoutError, http.client.HTTPException)
_CONTENT_RANGE = re.compile(r"bytes\s+(?:(\d+)-\d+|\*)/(\d+|\*)")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Checksum:
    """A published checksum: algo "sha256" or "md5", value in lower-case hex."""

    algo: str
    value: str

    def __post_init__(self) -> None:
        if self.algo not in ALGOS:
            raise UserError(f"checksum algorithm {self.algo!r} is not supported; use one of {', '.join(ALGOS)}.")
        object.__setattr__(self, "value", self.value.lower())


def file_digests(path: Path) -> dict[str, str]:
    """The sha256 and md5 hex digests of a file, computed in one pass."""
    hashes = {"sha256": hashlib.sha256(), "md5": hashlib.md5(usedforsecurity=False)}
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            for h in hashes.values():
                h.update(block)
    return {algo: h.hexdigest() for algo, h in hashes.items()}


def verify_checksum(
    path: Path, checksum: Checksum | None, *, label: str | None = None, advice: str = "the download is damaged or not the published file."
) -> str:
    """Return the file's sha256; raise UserError "{label}: {algo} is X, expected Y; {advice}" on a mismatch."""
    digests = file_digests(path)
    if checksum is not None and digests[checksum.algo] != checksum.value:
        raise UserError(f"{label or path}: {checksum.algo} is {digests[checksum.algo]}, expected {checksum.value}; {advice}")
    return digests["sha256"]


# What the first bytes of an archive are, by file name; plain files (Stanford's, SGM) have no signature.
_SIGNATURES = ((".tgz", 0, b"\x1f\x8b", "gzip"), (".gz", 0, b"\x1f\x8b", "gzip"), (".tar", 257, b"ustar", "tar"), (".zip", 0, b"PK\x03\x04", "zip"))
_HTML_START = (b"<!doctype html", b"<html", b"<head", b"<body", b"<?xml version", b"<title")


def check_content(path: Path, name: str, *, label: str, advice: str) -> None:
    """Refuse a file that is not what `name` says: an archive without its signature, or an HTML page.

    A server that answers a missing file with an error or login page and status 200 would otherwise
    have that page saved as the archive when no checksum or size is published to catch it (LIUM).
    """
    with open(path, "rb") as f:
        head = f.read(512)
    looks_html = head.lstrip().lower().startswith(_HTML_START)
    for suffix, offset, magic, kind in _SIGNATURES:
        if name.endswith(suffix) and head[offset : offset + len(magic)] != magic:
            what = "an HTML page" if looks_html else f"{head[:16]!r}"
            raise UserError(f"{label}: expected a {kind} archive, but it starts like {what}; {advice}")
    if looks_html:
        raise UserError(f"{label}: expected {name}, but it is an HTML page (an error or login page, not the file); {advice}")


def _accept(path: Path, name: str, checksum: Checksum | None, *, label: str, advice: str) -> str:
    """Check a file that is to become archive `name` (content, then checksum); return its sha256."""
    check_content(path, name, label=label, advice=advice)
    return verify_checksum(path, checksum, label=label, advice=advice)


def mirror_url(url: str, mirror: str | None) -> str:
    """Replace the scheme and host of `url` by `mirror`, keeping the path and query."""
    if mirror is None:
        return url
    parts = urllib.parse.urlsplit(url)
    query = f"?{parts.query}" if parts.query else ""
    return mirror.rstrip("/") + parts.path + query


def check_offline_dir(offline_dir: Path) -> None:
    """Refuse a download.dir that is not a folder: every archive would otherwise come from the network instead."""
    if offline_dir.is_dir():
        return
    what = "is not a folder" if offline_dir.exists() else "does not exist"
    relative = "" if offline_dir.is_absolute() else f" (relative paths are read from {Path.cwd()})"
    raise UserError(f"download.dir {offline_dir} {what}{relative}; expected a folder of archives fetched by hand (by file name or URL path).")


def offline_candidates(url: str, offline_dir: Path) -> list[Path]:
    """Where a folder of downloads may hold the archive for `url`: under its file name, or under its URL path (a mirrored tree)."""
    path = urllib.parse.urlsplit(url).path.lstrip("/")
    return list(dict.fromkeys((offline_dir / posixpath.basename(path), offline_dir / path)))


def offline_copy(url: str, offline_dir: Path | None) -> Path | None:
    """The archive for `url` in a folder of downloads, if it is there."""
    if offline_dir is None:
        return None
    return next((candidate for candidate in offline_candidates(url, Path(offline_dir)) if candidate.is_file()), None)


@dataclass(frozen=True)
class ByHand:
    """Where an archive was looked for before the network (`looked`), and how to supply it without one (`remedy`)."""

    looked: str
    remedy: str


def _by_hand(url: str, offline_dir: Path | None) -> ByHand:
    """What a failed download's error says about download.dir: the folder and paths searched, or that none is set."""
    name = posixpath.basename(urllib.parse.urlsplit(url).path)
    if offline_dir is None:
        return ByHand("no download.dir is set", f"fetch {name} elsewhere and give its folder as download.dir")
    looked = " and ".join(map(str, offline_candidates(url, Path(offline_dir))))
    return ByHand(f"download.dir {offline_dir} has no {name} (looked for {looked})", f"put {name} in {offline_dir}")


def partial_path(dest: Path) -> Path:
    """Where the bytes of an unfinished download of `dest` are kept between attempts."""
    return dest.with_name(dest.name + ".part")


class _Meter:
    """Reports bytes done/total, speed and ETA at most every PROGRESS_EVERY_S seconds."""

    def __init__(self, name: str, done: int, total: int | None, progress: Progress | None) -> None:
        self.name, self.done, self.total, self.progress = name, done, total, progress
        self.start = self.last = time.monotonic()
        self.fetched = 0

    def add(self, n: int) -> None:
        self.done += n
        self.fetched += n
        if time.monotonic() - self.last >= PROGRESS_EVERY_S:
            self.report()

    def report(self) -> None:
        self.last = time.monotonic()
        if self.progress is None:
            return
        # Speed counts only this attempt's bytes, so a resumed download does not look fast.
        rate = self.fetched / max(self.last - self.start, 1e-9)
        line = f"{self.name}: {self.done / 1e6:.1f}"
        if self.total:
            eta = (self.total - self.done) / rate if rate else float("inf")
            line += f"/{self.total / 1e6:.1f} MB ({100 * self.done / self.total:.1f}%), {rate / 1e6:.1f} MB/s"
            line += f", ETA {_clock(eta)}"
        else:
            line += f" MB, {rate / 1e6:.1f} MB/s"
        self.progress(line)


def _clock(seconds: float) -> str:
    """H:MM:SS, or "?" when the time is unknown."""
    if seconds == float("inf"):
        return "?"
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}"


def _check_disk(dest: Path, size: int | None) -> None:
    """Raise UserError if the disk holding `dest` cannot take the bytes still to come."""
    if size is None:
        return
    part = partial_path(dest)
    remaining = size - (part.stat().st_size if part.exists() else 0)
    free = shutil.disk_usage(dest.parent).free
    if free < remaining:
        raise UserError(
            f"{dest.parent} has {free / 1e9:.1f} GB free but {dest.name} needs {remaining / 1e9:.1f} GB more; "
            "free some space there or download to a larger disk."
        )


def _body_start(response: http.client.HTTPResponse) -> int:
    """The byte offset within the file at which the response body starts."""
    if response.status != 206:
        return 0
    match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
    if not match or match.group(1) is None:
        raise http.client.HTTPException("the server answered 206 without a byte range")
    return int(match.group(1))


def _range_total(headers: http.client.HTTPMessage | None) -> int | None:
    """The full size from a Content-Range header ("bytes */N" or "bytes a-b/N"), if given."""
    match = _CONTENT_RANGE.match(headers.get("Content-Range", "") if headers else "")
    return int(match.group(2)) if match and match.group(2) != "*" else None


def _open(url: str, have: int, timeout_s: float) -> http.client.HTTPResponse:
    """Request `url` from byte `have` on."""
    headers = {"User-Agent": "rnnmt", "Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout_s)


def _restart(part: Path, why: str) -> http.client.HTTPException:
    """Drop an unusable partial file; the returned error makes the next attempt start from byte 0."""
    part.unlink()
    return http.client.HTTPException(f"{why}; starting over")


def _transfer(url: str, part: Path, timeout_s: float, size: int | None, progress: Progress | None) -> None:
    """One attempt: append the rest of `url` to `part`; raise a TRANSIENT error if cut short."""
    have = part.stat().st_size if part.exists() else 0
    try:
        response = _open(url, have, timeout_s)
    except urllib.error.HTTPError as err:
        if err.code != 416 or not have:
            raise
        if _range_total(err.headers) in (None, have):
            return
        raise _restart(part, f"{part} is longer than the file on the server") from None
    with response:
        start = _body_start(response)
        if start not in (0, have):
            raise _restart(part, f"asked to resume at byte {have}, the server sent byte {start} on")
        length = response.headers.get("Content-Length")
        expected = int(length) if length is not None else None
        total = start + expected if expected is not None else size
        meter = _Meter(part.name.removesuffix(".part"), start, total, progress)
        got = 0
        # A server that ignores Range answers 200 with the whole file: start == 0 rewrites it.
        with open(part, "ab" if start else "wb") as f:
            # read1, not read: read(n) waits for all n bytes and loses those it has when the connection
            # stalls into a timeout; read1 hands over what has arrived, so the partial file keeps it.
            while block := response.read1(CHUNK):
                f.write(block)
                got += len(block)
                meter.add(len(block))
        meter.report()
    # http.client returns a short body without complaint when the peer closes early.
    if expected is not None and got < expected:
        raise http.client.IncompleteRead(b"", expected - got)


def _unreachable(err: urllib.error.URLError) -> bool:
    """True if no connection could be made at all (no route, no DNS, refused, connect timed out)."""
    reason = err.reason
    if isinstance(reason, (ConnectionRefusedError, socket.gaierror, TimeoutError)):
        return True
    return isinstance(reason, OSError) and reason.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH)


def _gave_up(url: str, dest: Path, attempts: int, err: BaseException, hand: ByHand) -> UserError:
    """The error for a download that failed on every attempt."""
    if isinstance(err, urllib.error.URLError) and _unreachable(err):
        host = urllib.parse.urlsplit(url).hostname
        return UserError(
            f"cannot reach {host} for {url} ({err.reason}) after {attempts} attempts, and {hand.looked}; "
            f"this machine seems offline — {hand.remedy}, or set download.mirror."
        )
    kept = partial_path(dest)
    return UserError(
        f"downloading {url} failed {attempts} times (last: {err}), and {hand.looked}; the bytes so far are kept in {kept} — "
        f"run again to resume, or {hand.remedy}."
    )


def _refused(url: str, code: int, hand: ByHand) -> UserError:
    """The error for an HTTP answer that a retry cannot change."""
    return UserError(f"{url} answered HTTP {code} (the archive is not available there), and {hand.looked}; check download.mirror or {hand.remedy}.")


def _fetch(url: str, dest: Path, hand: ByHand, *, size: int | None, retries: int, backoff_s: float, timeout_s: float, progress: Progress | None) -> None:
    """Download `url` into the partial file of `dest`, resuming after dropped connections; `hand`: for the error if it fails."""
    part = partial_path(dest)
    last: BaseException | None = None
    for attempt in range(retries + 1):
        try:
            _transfer(url, part, timeout_s, size, progress)
            return
        except urllib.error.HTTPError as err:
            if err.code < 500 and err.code != 429:
                raise _refused(url, err.code, hand) from None
            last = err
        except TRANSIENT as err:
            last = err
        if attempt < retries:
            time.sleep(backoff_s * 2**attempt)
    raise _gave_up(url, dest, retries + 1, last, hand) from last


def _finish_partial(url: str, dest: Path, checksum: Checksum | None, size: int | None) -> str:
    """Verify the partial file and rename it to `dest`; delete it if it is wrong."""
    part = partial_path(dest)
    try:
        got = part.stat().st_size
        if size is not None and got != size:
            raise UserError(f"{url} gave {got} bytes, expected {size}; the download is damaged or not the published file.")
        sha256 = _accept(part, dest.name, checksum, label=url, advice="the download is damaged or not the published file.")
    except UserError:
        part.unlink()
        raise
    os.replace(part, dest)
    return sha256


def _check_present(dest: Path, checksum: Checksum | None) -> str:
    """The sha256 of an existing `dest`; UserError (leaving the file alone) if it is not the published one."""
    advice = "delete it to download it again or replace it with the published file."
    return _accept(dest, dest.name, checksum, label=f"{dest} (already exists)", advice=advice)


def local_file(url: str) -> Path | None:
    """The path of a file:// URL (a corpus of one's own on this machine), else None."""
    parts = urllib.parse.urlsplit(url)
    return Path(urllib.request.url2pathname(parts.path)) if parts.scheme.lower() == "file" else None


def _install_offline(source: Path, dest: Path, checksum: Checksum | None, label: str, advice: str) -> str:
    """Verify a file supplied by hand and link (or copy) it to `dest` atomically; return its sha256."""
    if not source.is_file():
        raise UserError(f"{source} does not exist; {advice}")
    sha256 = _accept(source, dest.name, checksum, label=f"{source} ({label})", advice=advice)
    with atomic_path(dest) as tmp:
        tmp.unlink()
        try:
            os.link(source, tmp)
        except OSError:
            # Another file system, or one without hard links: a copy costs disk space but works.
            shutil.copyfile(source, tmp)
    return sha256


def download(
    url: str,
    dest: Path,
    *,
    checksum: Checksum | None,
    size: int | None = None,
    mirror: str | None = None,
    offline_dir: Path | None = None,
    retries: int = 4,
    backoff_s: float = 1.0,
    timeout_s: float = 60.0,
    progress: Progress | None = None,
) -> dict:
    """Make `dest` hold the verified archive from `url`, from `dest` itself, a file:// URL's file, `offline_dir` or the network.

    Returns what the caller records: the canonical url, path, bytes, sha256, whether a published
    checksum was checked, where the file came from and how long it took.
    """
    started = time.monotonic()
    dest = Path(dest)
    if offline_dir is not None:
        check_offline_dir(Path(offline_dir))
    if dest.exists():
        source, sha256 = "already_present", _check_present(dest, checksum)
    elif (supplied := local_file(url)) is not None:
        source, sha256 = "local_file", _install_offline(supplied, dest, checksum, "a file of data.files", "check the path and the sha256 given for it.")
    elif (supplied := offline_copy(url, offline_dir)) is not None:
        source, sha256 = "offline_dir", _install_offline(supplied, dest, checksum, "from download.dir", "replace it with the published file.")
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        _check_disk(dest, size)
        fetched_from, hand = mirror_url(url, mirror), _by_hand(url, offline_dir)
        if offline_dir is not None and progress is not None:
            progress(f"{hand.looked}; downloading {fetched_from}.")
        _fetch(fetched_from, dest, hand, size=size, retries=retries, backoff_s=backoff_s, timeout_s=timeout_s, progress=progress)
        source, sha256 = "download", _finish_partial(url, dest, checksum, size)
    if checksum is None and progress is not None:
        progress(f"{dest.name}: no published checksum exists; recorded the computed sha256 {sha256}.")
    return {
        "url": url,
        "path": str(dest),
        "bytes": dest.stat().st_size,
        "sha256": sha256,
        "checksum_verified": checksum is not None,
        "source": source,
        "seconds": round(time.monotonic() - started, 3),
    }
