"""The files rnnmt writes with torch.save (trained models, training checkpoints): safe to load, checked on load.

Such a file holds {"format": F, "sha256": D, "content": C}. D is the SHA-256 of a canonical walk over C
(every key and plain value, and every tensor's dtype, shape and bytes), computed when the file is
written and compared when it is read: a byte overwritten inside a tensor, which torch.load itself does
not notice, stops the load with one sentence naming the file. torch.load runs with weights_only=True,
which rebuilds only tensors and plain containers, so a file planted in a results tree cannot run code.
"""

from __future__ import annotations

import hashlib
import pickle
import shutil
import struct
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch

from rnnmt.errors import UserError
from rnnmt.fileio import atomic_path


class FormatMismatch(UserError):
    """The file is readable and safe but is not of the expected format (another kind, or an older rnnmt)."""

    def __init__(self, message: str, found: object) -> None:
        super().__init__(message)
        self.found = found


def _feed(h: hashlib._Hash, obj: Any) -> None:
    """Add one value to the digest; the type tags and lengths keep different structures from colliding."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}:".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy())
    elif isinstance(obj, dict):
        h.update(b"{%d:" % len(obj))
        for key, value in obj.items():
            _feed(h, key)
            _feed(h, value)
    elif isinstance(obj, (list, tuple)):
        h.update(b"%s%d:" % (b"[" if isinstance(obj, list) else b"(", len(obj)))
        for value in obj:
            _feed(h, value)
    elif isinstance(obj, str):
        data = obj.encode("utf-8", errors="surrogatepass")
        h.update(b"s%d:" % len(data))
        h.update(data)
    elif obj is None or isinstance(obj, (bool, int, float)):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
    else:
        raise TypeError(f"a {type(obj).__name__} cannot be stored in an rnnmt tensor file; expected tensors and plain data.")


def digest(content: Any) -> str:
    """The SHA-256 recorded for `content` (nested dicts, lists, tuples, tensors, strings, numbers, None)."""
    h = hashlib.sha256()
    _feed(h, content)
    return h.hexdigest()


def _on_cpu(obj: Any) -> Any:
    """`obj` with every tensor on the CPU, so that it is copied from a GPU once, for the digest and the file alike."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return type(obj)((key, _on_cpu(value)) for key, value in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_on_cpu(value) for value in obj)
    return obj


def write(path: Path, obj: Any) -> None:
    """torch.save `obj` to `path` atomically; a full disk is one clear error naming `path` (see fileio)."""
    # A Python file object, not a path: torch then reports a full disk as OSError(ENOSPC), not a bare RuntimeError.
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        torch.save(obj, f)


def write_int64_files(path: Path, plain: dict[str, Any], raw: dict[str, Path]) -> None:
    """torch.save `plain` joined by one 1-D int64 tensor per `raw` file (its native-endian bytes), atomically.

    The tensors' bytes are copied from their files in chunks, never held in memory, so the memory this takes
    does not grow with them: torch.save writes the archive with the tensors' space left empty (skip_data, over
    tensors that are allocated but never touched), and the bytes go into their records in the zip file.
    torch.load reads the result as any torch.save file (mmap or not)."""
    sizes = {key: file.stat().st_size // 8 for key, file in raw.items()}
    with atomic_path(path) as tmp:
        with torch.serialization.skip_data(), open(tmp, "wb") as f:
            torch.save({**plain, **{key: torch.empty(size, dtype=torch.int64) for key, size in sizes.items()}}, f)
        starts = _record_starts(tmp, [8 * size for size in sizes.values()])
        with open(tmp, "r+b") as out:
            for file, start in zip(raw.values(), starts, strict=True):
                out.seek(start)
                with open(file, "rb") as src:
                    shutil.copyfileobj(src, out, 1 << 22)


def _record_starts(path: Path, nbytes: list[int]) -> list[int]:
    """Where the bytes of storage records data/0, data/1, ... begin in a torch.save zip file.

    torch.save numbers storages in the order it pickles them (a dict's in insertion order); each record's size
    is checked against the tensor meant for it."""
    with zipfile.ZipFile(path) as archive:
        records = {info.filename.split("/", 1)[1]: info for info in archive.infolist()}
    starts = []
    with open(path, "rb") as f:
        for key, size in enumerate(nbytes):
            info = records[f"data/{key}"]
            if info.file_size != size:
                raise RuntimeError(f"{path}: storage record data/{key} holds {info.file_size} bytes where {size} were expected.")
            f.seek(info.header_offset + 26)
            name_length, extra_length = struct.unpack("<HH", f.read(4))
            starts.append(info.header_offset + 30 + name_length + extra_length)
    return starts


def save(path: Path, fmt: str, content: dict[str, Any]) -> None:
    """Write `content` with its format and digest (what `load` checks)."""
    content = _on_cpu(content)
    write(path, {"format": fmt, "sha256": digest(content), "content": content})


def load(path: Path, fmt: str, what: str, advice: str) -> dict[str, Any]:
    """The content of a file `save` wrote with format `fmt`; anything else is a UserError ending in `advice`.

    `what` names the kind of file in messages ("model file", "training checkpoint"). A missing file
    raises FileNotFoundError, for the caller to explain.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about foreign pickles; the errors below say it in one line
            wrapped = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except pickle.UnpicklingError as exc:
        # The weights-only unpickler names a global (a class or function) it refused to call.
        if "Unsupported global" in str(exc):
            raise UserError(
                f"{path} is not a {what} written by rnnmt: it holds Python objects other than tensors and plain data, "
                f"and rnnmt refuses to load those because loading them can run code; {advice}"
            ) from None
        raise UserError(f"{path} cannot be read (UnpicklingError): it is damaged or not a {what} written by rnnmt; {advice}") from None
    except Exception as exc:  # torch raises many types for a damaged or foreign file
        raise UserError(f"{path} cannot be read ({exc.__class__.__name__}): it is damaged or not a {what} written by rnnmt; {advice}") from None
    found = wrapped.get("format") if isinstance(wrapped, dict) else None
    if found != fmt:
        described = f"format {found!r}" if found else "no rnnmt format"
        raise FormatMismatch(f"{path} is not a {what} of this rnnmt version ({described}, expected {fmt!r}); {advice}", found)
    if digest(wrapped.get("content")) != wrapped.get("sha256"):
        raise UserError(f"{path} is damaged: its content no longer matches the SHA-256 recorded when rnnmt wrote it; {advice}")
    return wrapped["content"]
