"""Safe extraction of named members from the WMT tar archives, in one sequential pass."""

from __future__ import annotations

import difflib
import gzip
import posixpath
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from rnnmt.errors import UserError
from rnnmt.fileio import atomic_path

_CHUNK = 1 << 20
# Raised by tarfile, gzip and zlib when an archive or a gzip member is truncated or corrupt.
_CORRUPT = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile)


def _normalise(name: str) -> str:
    """The member path as tar tools resolve it ("./a//b" -> "a/b")."""
    return posixpath.normpath(name)


def _is_unsafe(name: str) -> bool:
    """Whether a member path is absolute or climbs out of the extraction folder."""
    norm = _normalise(name)
    return norm.startswith("/") or norm == ".." or norm.startswith("../")


def _check_request(archive: Path, members: dict[str, Path]) -> None:
    """Refuse unsafe or duplicate member paths and shared outputs before anything is read."""
    for name in members:
        if _is_unsafe(name):
            raise UserError(f"{archive}: refusing member {name!r}, whose path is absolute or leaves the archive folder via '..'.")
    if len({_normalise(name) for name in members}) != len(members):
        raise UserError(f"{archive}: the same member is requested twice under different spellings.")
    outputs = [Path(out).resolve() for out in members.values()]
    if len(set(outputs)) != len(outputs):
        raise UserError(f"{archive}: two requested members are mapped to the same output file.")


def _open(archive: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(archive, mode="r:*")
    except FileNotFoundError:
        raise UserError(f"{archive} does not exist; expected a .tar, .tgz or .tar.gz archive.") from None
    except _CORRUPT:
        raise UserError(f"{archive} is not a readable .tar, .tgz or .tar.gz archive.") from None


def _iter_members(archive: Path, tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """Yield members in archive order, turning a truncated or corrupt header into a UserError."""
    try:
        yield from tar
    except _CORRUPT:
        raise UserError(f"{archive} is truncated or corrupt (failed while reading member headers).") from None


def _wants_gunzip(name: str, out: Path) -> bool:
    """A ".gz" member mapped to an output without ".gz" is asked for decompressed (giga-fren)."""
    return name.endswith(".gz") and not str(out).endswith(".gz")


def _copy(src: BinaryIO, dst: BinaryIO) -> int:
    """Copy a stream in chunks; return the number of bytes written."""
    n = 0
    while block := src.read(_CHUNK):
        dst.write(block)
        n += len(block)
    return n


def _extract_one(archive: Path, tar: tarfile.TarFile, member: tarfile.TarInfo, name: str, out: Path) -> int:
    """Stream one regular-file member to `out` atomically; return the bytes written."""
    if not member.isreg():
        raise UserError(f"{archive}: refusing member {name!r}, which is a link, device, fifo or folder rather than a regular file.")
    data = tar.extractfile(member)
    try:
        with atomic_path(out) as tmp, open(tmp, "wb") as dst:
            if _wants_gunzip(name, out):
                with gzip.GzipFile(fileobj=data, mode="rb") as src:
                    return _copy(src, dst)
            return _copy(data, dst)
    except _CORRUPT:
        raise UserError(f"{archive}: member {name!r} is truncated or corrupt; nothing was written to {out}.") from None


def _missing_error(archive: Path, missing: list[str], seen: list[str]) -> UserError:
    """A UserError naming the missing members and up to 5 member names that resemble the first."""
    similar = difflib.get_close_matches(missing[0], seen, n=5, cutoff=0.3) or seen[:5]
    listed = ", ".join(similar) if similar else "none (the archive is empty)"
    return UserError(f"{archive} has no member {', '.join(map(repr, missing))}; similar members: {listed}.")


def extract_members(archive: Path, members: dict[str, Path]) -> dict[str, int]:
    """Extract the named members to their output paths; return the bytes written per member.

    Each output appears atomically. Members are matched by normalised path, the first occurrence
    wins, and the pass stops as soon as all are found. A ".gz" member mapped to an output path not
    ending in ".gz" is decompressed while streaming. On an error, outputs of members met earlier in
    the archive are already complete and stay in place.
    """
    archive = Path(archive)
    _check_request(archive, members)
    if not members:
        return {}
    wanted = {_normalise(name): name for name in members}
    written: dict[str, int] = {}
    seen: list[str] = []
    with _open(archive) as tar:
        for member in _iter_members(archive, tar):
            seen.append(member.name)
            name = wanted.pop(_normalise(member.name), None)
            if name is not None:
                written[name] = _extract_one(archive, tar, member, name, Path(members[name]))
            if not wanted:
                return written
    raise _missing_error(archive, sorted(wanted.values()), seen)


def list_members(archive: Path) -> list[str]:
    """All member names as stored (folders and links included), in archive order; reads the whole archive."""
    archive = Path(archive)
    with _open(archive) as tar:
        return [member.name for member in _iter_members(archive, tar)]
