"""File helpers: atomic writes so that a failed step never leaves a file that looks complete."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rnnmt.errors import UserError

# "No space left on device" and "Disk quota exceeded": both mean the disk cannot take the file.
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def disk_full_cause(exc: BaseException | None) -> OSError | None:
    """The "disk full" OSError behind `exc`, if any: torch's writer raises a RuntimeError from it."""
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno in DISK_FULL:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def disk_full(target: str | os.PathLike, exc: OSError) -> UserError:
    """The error for a write that ran out of disk: what, where, and that nothing partial was kept."""
    return UserError(f"the disk is full: cannot write {target} ({exc.strerror}); nothing partial was kept — free some space and run again.")


def _new_file_beside(target: Path) -> Path:
    """An empty, new hidden file next to `target`, with the mode open() would give (0666 less the umask).

    tempfile.mkstemp would make it 0600, and os.replace keeps the mode: every output would be private
    whatever the user's umask, and collaborators could not read the results.
    """
    while True:
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.part")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666))
            return tmp
        except FileExistsError:
            continue


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; it is renamed to `path` only if the block succeeds.

    A full disk anywhere in the block becomes one UserError naming `path`; the temporary file is removed.
    """
    target = Path(path)
    tmp: Path | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = _new_file_beside(target)
        yield tmp
        os.replace(tmp, target)
    except Exception as exc:
        if (full := disk_full_cause(exc)) is not None:
            raise disk_full(target, full) from None
        raise
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def write_lines(path: str | os.PathLike, lines: Iterable[str]) -> int:
    """Write one string per line atomically; return the number of lines."""
    n = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line)
            f.write("\n")
            n += 1
    return n


# Editors on Windows start UTF-8 files with a byte-order mark; it is no part of the first line's text.
UTF8_BOM = b"\xef\xbb\xbf"


def split_lines(stream: Iterable[bytes]) -> Iterator[bytes]:
    """The lines of a binary stream without their "\\n", and without a UTF-8 byte-order mark before the first."""
    for number, raw in enumerate(stream):
        yield (raw.removeprefix(UTF8_BOM) if number == 0 else raw).removesuffix(b"\n")


def decode_lines(stream: Iterable[bytes], name: str) -> Iterator[str]:
    """The lines of a binary stream as text, decoded strictly: invalid UTF-8 is an error naming `name` and the line.

    Only "\\n" ends a line, as for `wc -l`: str.splitlines would also split at U+2028, U+0085 or form
    feeds inside a sentence and shift every later line against its parallel file.
    """
    for number, raw in enumerate(split_lines(stream), start=1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UserError(f"{name} line {number} is not valid UTF-8; expected UTF-8 text.") from None


def iter_lines(path: str | os.PathLike) -> Iterator[str]:
    """Yield the lines of a UTF-8 file, split and decoded as decode_lines does."""
    try:
        with open(path, "rb") as f:
            yield from decode_lines(f, str(path))
    except FileNotFoundError:
        raise UserError(f"{path} does not exist; expected a UTF-8 text file.") from None


def stdin_lines() -> list[str]:
    """Standard input as UTF-8 lines, whatever the locale (sys.stdin would decode by the locale, or not at all)."""
    return list(decode_lines(sys.stdin.buffer, "standard input"))


def write_stdout_lines(lines: Iterable[str]) -> None:
    """One string per line on standard output, in UTF-8 whatever the locale, as files are written."""
    sys.stdout.flush()
    sys.stdout.buffer.write("".join(f"{line}\n" for line in lines).encode("utf-8"))
    sys.stdout.buffer.flush()


def read_lines(path: str | os.PathLike) -> list[str]:
    """All lines of a UTF-8 text file, split as iter_lines splits them."""
    return list(iter_lines(path))


def read_ids(path: Path, n_lines: int) -> list[int]:
    """Read 0-based, distinct line indices below `n_lines`, one per line."""
    ids = []
    for lineno, text in enumerate(read_lines(path), start=1):
        try:
            i = int(text)
        except ValueError:
            raise UserError(f"{path}:{lineno}: expected a 0-based line index, got {text!r}.") from None
        if not 0 <= i < n_lines:
            raise UserError(f"{path}:{lineno}: line index {i} is outside the test set of {n_lines} lines.")
        ids.append(i)
    if len(set(ids)) != len(ids):
        raise UserError(f"{path}: line indices must be distinct.")
    return ids


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write JSON atomically, pretty-printed with sorted keys."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write("\n")


def read_json(path: str | os.PathLike) -> Any:
    """Read a JSON file."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_json_file(path: str | os.PathLike, what: str) -> Any:
    """A JSON file a user may point at (`what` it should hold, for the error): a missing or invalid file is one UserError."""
    try:
        return read_json(path)
    except (OSError, ValueError) as exc:
        raise UserError(f"{what} {path} cannot be read as JSON ({exc.__class__.__name__}); expected the file the workflow writes.") from None


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Return the hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
