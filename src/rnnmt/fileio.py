"""File helpers: atomic writes so that a failed step never leaves a file that looks complete."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rnnmt.errors import UserError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; it is renamed to `path` only if the block succeeds."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
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


def iter_lines(path: str | os.PathLike) -> Iterator[str]:
    """Yield the lines of a UTF-8 file without their "\\n"; only "\\n" ends a line, as for `wc -l`.

    str.splitlines would also split at U+2028, U+0085 or form feeds inside a sentence and shift every
    later line against its parallel file.
    """
    number = 0
    try:
        with open(path, "rb") as f:
            for number, raw in enumerate(f, start=1):
                yield raw.removesuffix(b"\n").decode("utf-8")
    except FileNotFoundError:
        raise UserError(f"{path} does not exist; expected a UTF-8 text file.") from None
    except UnicodeDecodeError:
        raise UserError(f"{path} line {number} is not valid UTF-8; expected UTF-8 text.") from None


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


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Return the hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
