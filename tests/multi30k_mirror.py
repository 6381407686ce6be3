"""A local stand-in for raw.githubusercontent.com: Multi30k task 1's gzipped files, served over HTTP.

The files are shared/data/multi30k/task1-raw-gz/ (byte copies of the dataset repository's git blobs), laid out
under the URL path of the table in src/rnnmt/data/source_tables/multi30k.yaml, so that
download.mirror=http://127.0.0.1:PORT turns https://raw.githubusercontent.com/multi30k/dataset/COMMIT/data/task1/raw/train.en.gz
into http://127.0.0.1:PORT/multi30k/dataset/COMMIT/data/task1/raw/train.en.gz. With --lines N each file is cut to its
first N lines (gzipped again with fixed metadata, so rebuilding gives the same bytes) and checksums.yaml gives their
checksums, for download.checksums.

    python3 tests/multi30k_mirror.py build OUT_DIR [--shared PATH] [--lines N]
    python3 tests/multi30k_mirror.py serve OUT_DIR --port-file FILE [--port N]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import sys
from pathlib import Path

import yaml

from wmt_mirror import REPO, add_serve_command, serve_command, url_path

TABLE = REPO / "src" / "rnnmt" / "data" / "source_tables" / "multi30k.yaml"
DEFAULT_SHARED = REPO.parent / "shared" / "data" / "multi30k"


def load_table(path: Path = TABLE) -> dict:
    """The Multi30k sources table."""
    return yaml.safe_load(path.read_text())


def first_lines(data: bytes, lines: int) -> bytes:
    """A gzipped text file cut to its first `lines` lines, gzipped again with fixed metadata (no name, mtime 0)."""
    text = gzip.decompress(data)
    kept = b"".join(text.splitlines(keepends=True)[:lines])
    return gzip.compress(kept, mtime=0)


def build_mirror(out_dir: Path, shared: Path, lines: int | None = None) -> Path:
    """Write every file of the table under out_dir at its URL path (cut to `lines` lines if given) and
    out_dir/checksums.yaml with their checksums; return the latter."""
    source = Path(shared) / "task1-raw-gz"
    if not source.is_dir():
        raise FileNotFoundError(f"{source} is missing; expected Multi30k's gzipped task-1 files (shared/data/multi30k).")
    checksums = {}
    for key, archive in load_table()["archives"].items():
        data = (source / Path(url_path(archive["url"])).name).read_bytes()
        if lines is not None:
            data = first_lines(data, lines)
        dest = Path(out_dir) / url_path(archive["url"])
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        checksums[key] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    out = Path(out_dir) / "checksums.yaml"
    out.write_text(yaml.safe_dump(checksums, sort_keys=False))
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write the files and checksums.yaml; print the latter's path")
    b.add_argument("out_dir", type=Path)
    b.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help=f"the Multi30k folder (default: {DEFAULT_SHARED})")
    b.add_argument("--lines", type=int, help="cut every file to its first N lines (a slice for quick runs)")
    add_serve_command(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit status."""
    a = _parser().parse_args(argv)
    if a.command == "build":
        try:
            print(build_mirror(a.out_dir, a.shared, a.lines))
        except FileNotFoundError as exc:
            print(f"multi30k_mirror: {exc}", file=sys.stderr)
            return 2
        return 0
    return serve_command(a, "multi30k_mirror")


if __name__ == "__main__":
    sys.exit(main())
