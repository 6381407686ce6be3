"""The tables of archives and corpora shipped with rnnmt (WMT'14, Multi30k: package data), and how config.yaml's corpus
names resolve in them; a scale's own files (`data.source: files`) become a table of the same form."""

from __future__ import annotations

import posixpath
import re
import urllib.parse
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from rnnmt.data.download import Checksum, local_file
from rnnmt.errors import UserError

SPLITS = ("train", "indomain", "dev", "test")


@dataclass(frozen=True)
class Part:
    """One input file of a corpus side: a member of an archive, or (member None) the downloaded file itself."""

    archive: str
    member: str | None


@dataclass(frozen=True)
class Corpus:
    """One corpus of one language pair: its input files per side and how to assemble them."""

    name: str
    src: tuple[Part, ...]
    tgt: tuple[Part, ...]
    heldout: bool
    format: str
    tokenized: bool
    lines: int | None


def _read_yaml(path: Path, what: str) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        found = "is a directory" if path.is_dir() else "does not exist" if not path.exists() else "is not a regular file"
        relative = "" if path.is_absolute() else f" (relative paths are read from {Path.cwd()})"
        raise UserError(f"{what} {path} {found}{relative}; expected a YAML file.")
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"{what} {path} cannot be read as YAML ({exc.__class__.__name__}).") from None
    if not isinstance(data, dict):
        raise UserError(f"{what} {path} must be a YAML mapping.")
    return data


def table_path(name: str) -> Path:
    """The path of a sources table: a package table by name ("wmt14", "multi30k"), or a file path."""
    tables = resources.files("rnnmt.data") / "source_tables"
    packaged = tables / f"{name}.yaml"
    if packaged.is_file():
        return Path(str(packaged))
    path = Path(name)
    if not path.is_file():
        shipped = ", ".join(sorted(t.name.removesuffix(".yaml") for t in tables.iterdir() if t.name.endswith(".yaml")))
        raise UserError(f"download.sources '{name}' is neither a table shipped with rnnmt ({shipped}) nor an existing YAML file.")
    return path


def _apply_checksums(table: dict[str, Any], path: Path) -> None:
    """Replace the published checksums and sizes of the archives named in an override file."""
    for key, entry in _read_yaml(path, "checksum override").items():
        if key not in table["archives"]:
            raise UserError(f"{path}: archive '{key}' is not in the sources table (known: {', '.join(sorted(table['archives']))}).")
        if not isinstance(entry, dict) or not ({"sha256", "md5"} & set(entry)):
            raise UserError(f"{path}: archive '{key}' needs a sha256 or md5 entry.")
        archive = table["archives"][key]
        for field in ("sha256", "md5", "bytes"):
            archive.pop(field, None)
        archive.update(entry)


def load(name: str = "wmt14", checksums: str | None = None) -> dict[str, Any]:
    """Read a sources table, optionally with the checksums of some archives replaced."""
    path = table_path(name)
    table = _read_yaml(path, "sources table")
    for section in ("archives", "corpora"):
        if not isinstance(table.get(section), dict):
            raise UserError(f"sources table {path} has no '{section}' mapping.")
    table.setdefault("sets", {})
    table.setdefault("preselected", {})
    if checksums:
        _apply_checksums(table, Path(checksums))
    return table


def checksum(table: dict[str, Any], archive: str) -> Checksum | None:
    """The published checksum to verify: sha256 when known, md5 otherwise, None when neither is."""
    entry = table["archives"][archive]
    for algo in ("sha256", "md5"):
        if entry.get(algo):
            return Checksum(algo, str(entry[algo]))
    return None


def file_name(table: dict[str, Any], archive: str) -> str:
    """The archive's file name under results/data/archives: its own `file`, else as published (its URL path's last part)."""
    entry = table["archives"][archive]
    return entry.get("file") or posixpath.basename(urllib.parse.urlsplit(entry["url"]).path)


# The keys of a `data.files` corpus that are not a language's file.
FILE_OPTIONS = ("sha256", "tokenized")
_URL = re.compile(r"^(https?|ftp|file)://", re.IGNORECASE)


def _location(value: str, base: Path) -> str:
    """A URL as given, or a local path (relative to `base`) as a file:// URL."""
    return value if _URL.match(value) else (base / value).resolve().as_uri()


def _unreadable(location: str, value: str, base: Path, where: str) -> str | None:
    """Why the local file (a path or a file:// URL) of `location` cannot be read, as one line; None if it can, or for a download."""
    path = local_file(location)
    if path is None or path.is_file():
        return None
    what = "does not exist" if not path.exists() else "is a directory" if path.is_dir() else "is not a regular file"
    return f"{where}: {value} {what} (relative paths are read from {base}); expected a text file, optionally gzipped (.gz), or a URL."


def files_table(files: dict[str, dict[str, Any]], heldout: set[str], base: Path) -> dict[str, Any]:
    """A sources table of a scale's own corpora (`data.files`): each language's file (a path or a URL) is one
    archive, downloaded or linked to results/data/archives/CORPUS.LANG[.gz]; the corpora in `heldout` (dev and
    test) refuse invalid UTF-8 instead of repairing it. Every local file that cannot be read is a line of one UserError."""
    archives: dict[str, Any] = {}
    corpora: dict[str, Any] = {}
    unreadable: list[str] = []
    for name, entry in files.items():
        where = f"data.files.{name}"
        langs = [key for key in entry if key not in FILE_OPTIONS]
        if len(langs) != 2:
            raise UserError(f"{where}: expected the files of two languages (e.g. de: train.de.gz, en: train.en.gz), got {', '.join(langs) or 'none'}.")
        sha256 = entry.get("sha256", {})
        if unknown := sorted(set(sha256) - set(langs)):
            raise UserError(f"{where}.sha256: {', '.join(unknown)} is not one of the corpus's languages ({', '.join(langs)}).")
        sides = {}
        for lang in langs:
            key, location = f"{name}.{lang}", _location(str(entry[lang]), base)
            if (problem := _unreadable(location, str(entry[lang]), base, f"{where}.{lang}")) is not None:
                unreadable.append(problem)
            suffix = ".gz" if urllib.parse.urlsplit(location).path.endswith(".gz") else ""
            archives[key] = {"url": location, "file": key + suffix, **({"sha256": sha256[lang]} if lang in sha256 else {})}
            sides[lang] = {"file": key}
        corpora[name] = {"pairs": {"-".join(langs): sides}, "kind": "heldout" if name in heldout else "train", "tokenized": entry.get("tokenized", False)}
    if unreadable:
        # All at once, a line each: named one a run, six missing files would take six runs to find.
        raise UserError("\n".join(unreadable))
    return {"what": "data.files", "archives": archives, "corpora": corpora, "sets": {}, "preselected": {}}


def _pair_entry(table: dict[str, Any], section: str, name: str, src: str, tgt: str) -> Any:
    """The entry of `name` for the language pair {src, tgt} (the table keys pairs the WMT way, "fr-en")."""
    for key, entry in table[section][name].get("pairs", table[section][name]).items():
        if set(key.split("-")) == {src, tgt}:
            return entry
    return None


def _parts(spec: Any, default_archive: str | None, where: str) -> tuple[Part, ...]:
    """The input files of one side: a member, a list of members, or {file: archive} for a plain download."""
    if isinstance(spec, dict) and "file" in spec:
        return (Part(spec["file"], None),)
    members = [spec] if isinstance(spec, str) else spec
    if default_archive is None or not isinstance(members, list) or not members:
        raise UserError(f"sources table: {where} must name members of the corpus's archive or a {{file: archive}}.")
    return tuple(Part(default_archive, m) for m in members)


def corpus(table: dict[str, Any], name: str, src: str, tgt: str) -> Corpus:
    """Resolve a corpus name for the pair src-tgt, or raise UserError saying what exists."""
    if name not in table["corpora"]:
        raise UserError(f"corpus '{name}' is not in {table.get('what', 'the sources table')} (known: {', '.join(sorted(table['corpora'])) or 'none'}).")
    spec = table["corpora"][name]
    entry = _pair_entry(table, "corpora", name, src, tgt)
    if entry is None:
        raise UserError(f"corpus '{name}' has no {src}-{tgt} data (it has: {', '.join(spec['pairs'])}).")
    sides = {lang: _parts(entry.get(lang), spec.get("archive"), f"corpora.{name} {lang}") for lang in (src, tgt)}
    for part in sides[src] + sides[tgt]:
        if part.archive not in table["archives"]:
            raise UserError(f"sources table: corpora.{name} names archive '{part.archive}', which is not under 'archives'.")
    return Corpus(
        name=name,
        src=sides[src],
        tgt=sides[tgt],
        heldout=spec.get("kind", "train") == "heldout",
        format=spec.get("format", "text"),
        tokenized=bool(spec.get("tokenized", False)),
        lines=entry.get("lines"),
    )


def pair_splits(table: dict[str, Any], corpora: dict[str, Any], src: str, tgt: str) -> dict[str, list[str]]:
    """The corpus names of each split of a pair: config.yaml's lists, or the named set of the table."""
    if "set" not in corpora:
        return {split: list(corpora.get(split, [])) for split in SPLITS}
    name = corpora["set"]
    if name not in table["sets"]:
        raise UserError(f"corpus set '{name}' is not in the sources table (known: {', '.join(sorted(table['sets'])) or 'none'}).")
    chosen = _pair_entry(table, "sets", name, src, tgt)
    if chosen is None:
        raise UserError(f"corpus set '{name}' has no {src}-{tgt} corpora.")
    return {split: list(chosen.get(split, [])) for split in SPLITS}


def preselected(table: dict[str, Any], method: str, src: str, tgt: str) -> str | None:
    """The pre-selected corpus a selection method trains on for this pair (None: the method selects itself)."""
    if method not in table["preselected"]:
        return None
    name = _pair_entry(table, "preselected", method, src, tgt)
    if name is None:
        raise UserError(f"selection method '{method}' has no pre-selected corpus for {src}-{tgt} (it covers {', '.join(table['preselected'][method])}).")
    return name
