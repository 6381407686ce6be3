"""A local stand-in for statmt.org: WMT archives in the official member layout, served over HTTP.

Real files come from shared/data/wmt14 where that folder exists; whatever has no real copy there
(News Commentary de-en, newstest2015, or everything when the folder is absent) is generated.
Archives sit under the URL path of the table in src/rnnmt/data/source_tables/wmt14.yaml, so that
download.mirror=http://127.0.0.1:PORT turns http://www.statmt.org/wmt14/dev.tgz into
http://127.0.0.1:PORT/wmt14/dev.tgz.

    python3 tests/wmt_mirror.py build OUT_DIR [--shared PATH | --no-shared]
    python3 tests/wmt_mirror.py serve OUT_DIR --port-file FILE [--port N]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import http.server
import io
import os
import re
import signal
import sys
import tarfile
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO / "src" / "rnnmt" / "data" / "source_tables" / "wmt14.yaml"
DEFAULT_SHARED = REPO.parent / "shared" / "data" / "wmt14"

SAMPLE_ARCHIVES = ("nc-v9", "dev", "test-full", "test-filtered", "wmt15-test")

# The fr-en English side of nc-v9 gets one extra line pair here (1-based) whose English text is
# Latin-1, not UTF-8, so that the training-corpus repair path has something to repair and count.
INVALID_UTF8_LINE = 42
INVALID_UTF8_EN = b"caf\xe9 au lait"
INVALID_UTF8_FR = "café au lait".encode()

GENERATED_NC_LINES = 300
GENERATED_SEGMENTS = 40  # per generated SGM set
FILTERED_DEEN_SEGMENTS = 2737  # the official filtered newstest2014 de-en, built from shared

# Fixed tar metadata (2014-02-01 00:00 UTC) so that rebuilding gives the same bytes and checksums.
_MTIME = 1391212800
_CHUNK = 1 << 20

Members = list[tuple[str, bytes]]  # (member path, content) in archive order


# --- Generated text -----------------------------------------------------------------------------

# Parallel phrases per slot; a sentence picks one phrase per slot, the same index in every language.
_SLOTS: tuple[tuple[dict[str, str], ...], ...] = (
    (
        {"en": "The government", "de": "Die Regierung", "fr": "Le gouvernement"},
        {"en": "The committee", "de": "Der Ausschuss", "fr": "Le comité"},
        {"en": "The minister", "de": "Der Minister", "fr": "Le ministre"},
        {"en": "The central bank", "de": "Die Zentralbank", "fr": "La banque centrale"},
        {"en": "Our economy", "de": "Unsere Wirtschaft", "fr": "Notre économie"},
        {"en": "The mayor", "de": "Der Bürgermeister", "fr": "Le maire"},
        {"en": "The union", "de": "Die Gewerkschaft", "fr": "Le syndicat"},
    ),
    (
        {"en": "supports", "de": "unterstützt", "fr": "soutient"},
        {"en": "rejects", "de": "verwirft", "fr": "rejette"},
        {"en": "discusses", "de": "diskutiert", "fr": "discute"},
        {"en": "examines", "de": "prüft", "fr": "examine"},
        {"en": "welcomes", "de": "begrüßt", "fr": "salue"},
        {"en": "criticises", "de": "kritisiert", "fr": "critique"},
    ),
    (
        {"en": "the new plan", "de": "den neuen Plan", "fr": "le nouveau plan"},
        {"en": "the reform", "de": "die Reform", "fr": "la réforme"},
        {"en": "the budget", "de": "den Haushalt", "fr": "le budget"},
        {"en": "the proposal", "de": "den Vorschlag", "fr": "la proposition"},
        {"en": "the treaty", "de": "den Vertrag", "fr": "le traité"},
    ),
    (
        {"en": "", "de": "", "fr": ""},
        {"en": " this year", "de": " in diesem Jahr", "fr": " cette année"},
        {"en": " in Europe", "de": " in Europa", "fr": " en Europe"},
        {"en": " after the election", "de": " nach der Wahl", "fr": " après l'élection"},
        {"en": " once again", "de": " erneut", "fr": " une fois de plus"},
    ),
)


def sentence(i: int, lang: str) -> str:
    """The i-th generated sentence in `lang` ("en", "de" or "fr"); same i = translations of each other.

    Every slot cycles on its own, so any few dozen consecutive sentences use every phrase: generated
    training text then covers the words of generated test sets, and the No-UNK subset is not empty.
    """
    words = [slot[i % len(slot)][lang] for slot in _SLOTS]
    return f"{words[0]} {words[1]} {words[2]}{words[3]}."


def _lines(texts: Iterable[str]) -> bytes:
    """Texts as UTF-8, one per line."""
    return "".join(f"{t}\n" for t in texts).encode()


# --- SGM ----------------------------------------------------------------------------------------

Docs = list[tuple[str, list[str]]]  # (docid, segment texts)


def _generated_docs(prefix: str, first: int, n: int, lang: str, per_doc: int = 7) -> Docs:
    """n generated segments, sentences first..first+n-1, in documents of `per_doc` segments."""
    texts = [sentence(first + k, lang) for k in range(n)]
    return [(f"{prefix}-{d // per_doc + 1}", texts[d : d + per_doc]) for d in range(0, n, per_doc)]


def make_sgm(docs: Docs, setid: str, lang: str, side: str, origlang: str) -> bytes:
    """A WMT SGM file in the newstest2014 line layout; side is "src" or "ref"."""
    if side == "src":
        head, tail, sysid = f'<srcset setid="{setid}" srclang="any">', "</srcset>", ""
    else:
        head, tail, sysid = f'<refset trglang="{lang}" setid="{setid}" srclang="any">', "</refset>", 'sysid="ref" '
    out = [head]
    for docid, texts in docs:
        out.append(f'<doc {sysid}docid="{docid}" genre="news" origlang="{origlang}">')
        out.extend(f'<seg id="{k}">{text}</seg>' for k, text in enumerate(texts, 1))
        out.append("</doc>")
    out.append(tail)
    return _lines(out)


_DOC = re.compile(rb'<doc [^>]*docid="([^"]*)"')
_SEG_ID = re.compile(rb'<seg id="?([^">]*)"?>')


def filter_sgm(full: bytes, keep: set[tuple[str, str]]) -> bytes:
    """The SGM `full` cut to the (docid, segid) pairs in `keep`, dropping documents left empty."""
    out: list[bytes] = []
    doc: list[bytes] = []  # the current <doc> line and its kept segments
    docid = ""
    # Lines end at "\n" only, as for sacrebleu; a stray "\r" stays inside its line.
    for line in full.split(b"\n"):
        if match := _DOC.match(line):
            docid, doc = match.group(1).decode(), [line]
        elif line.startswith(b"<seg "):
            if (docid, _SEG_ID.match(line).group(1).decode()) in keep:
                doc.append(line)
        elif line.startswith(b"</doc>"):
            if len(doc) > 1:
                out.extend(doc + [line])
            doc = []
        else:
            out.append(line)
    filtered = b"\n".join(out)
    if (n := count_segments(filtered)) != len(keep):
        raise ValueError(f"filter_sgm kept {n} segments, expected {len(keep)}: some listed segments are not in the file")
    return filtered


def segment_ids(sgm: bytes) -> Iterator[tuple[str, str]]:
    """The (docid, segid) of every segment, in file order."""
    docid = ""
    for line in sgm.split(b"\n"):
        if match := _DOC.match(line):
            docid = match.group(1).decode()
        elif line.startswith(b"<seg "):
            yield docid, _SEG_ID.match(line).group(1).decode()


def count_segments(sgm: bytes) -> int:
    """The number of "<seg " lines, which is what sacrebleu and rnnmt.data.sgm read."""
    return sum(line.startswith(b"<seg ") for line in sgm.split(b"\n"))


def _read_docids(path: Path) -> set[tuple[str, str]]:
    """The docid<TAB>segid pairs of a shared .docids file."""
    return {tuple(line.split("\t")) for line in path.read_text().splitlines()}


# --- Archive contents ---------------------------------------------------------------------------


def _with_invalid_line(en: bytes, fr: bytes) -> tuple[bytes, bytes]:
    """Both sides with the invalid-UTF-8 pair inserted at INVALID_UTF8_LINE."""
    at = INVALID_UTF8_LINE - 1
    en_lines, fr_lines = en.split(b"\n"), fr.split(b"\n")
    en_lines.insert(at, INVALID_UTF8_EN)
    fr_lines.insert(at, INVALID_UTF8_FR)
    return b"\n".join(en_lines), b"\n".join(fr_lines)


def _nc_v9(shared: Path | None) -> Members:
    """training-parallel-nc-v9.tgz: fr-en from the Moses nc-5k sample (or generated), de-en generated."""
    if shared is None:
        en, fr = (_lines(sentence(i, lang) for i in range(GENERATED_NC_LINES)) for lang in ("en", "fr"))
    else:
        sample = shared / "train-sample" / "news-commentary.fr-en.moses-nc5k"
        en, fr = (sample / "nc-5k.en").read_bytes(), (sample / "nc-5k.fr").read_bytes()
    en, fr = _with_invalid_line(en, fr)
    # Sentences from GENERATED_NC_LINES on, so the de-en English side differs from the fr-en one.
    de_en, de = (_lines(sentence(GENERATED_NC_LINES + i, lang) for i in range(GENERATED_NC_LINES)) for lang in ("en", "de"))
    return [
        ("training/news-commentary-v9.de-en.de", de),
        ("training/news-commentary-v9.de-en.en", de_en),
        ("training/news-commentary-v9.fr-en.en", en),
        ("training/news-commentary-v9.fr-en.fr", fr),
    ]


def _dev(shared: Path | None) -> Members:
    """dev.tgz: newstest2012 and newstest2013 as SGM (src and ref) and plain text, en/fr/de."""
    names = [
        f"newstest{year}{kind}.{lang}{ext}"
        for year in (2012, 2013)
        for kind, ext in (("-src", ".sgm"), ("-ref", ".sgm"), ("", ""))
        for lang in ("de", "en", "fr")
    ]
    if shared is not None:
        return [(f"dev/{name}", (shared / "dev" / name).read_bytes()) for name in names]
    members = []
    for year, first in ((2012, 600), (2013, 640)):
        for lang in ("de", "en", "fr"):
            docs = _generated_docs(f"dev{year}", first, GENERATED_SEGMENTS, lang)
            for side in ("src", "ref"):
                members.append((f"dev/newstest{year}-{side}.{lang}.sgm", make_sgm(docs, f"newstest{year}", lang, side, "en")))
            members.append((f"dev/newstest{year}.{lang}", _lines(t for _, texts in docs for t in texts)))
    return sorted(members)


def _newstest2014_full(shared: Path | None) -> Members:
    """The eight newstest2014 fr-en and de-en SGMs, named as in test-full.tgz minus its folder."""
    names = [
        f"newstest2014-{pair}-{side}.{lang}.sgm"
        for pair, langs in (("deen", ("de", "en")), ("fren", ("en", "fr")))
        for side in ("ref", "src")
        for lang in langs
    ]
    if shared is not None:
        return [(name, (shared / "test" / name).read_bytes()) for name in names]
    members = []
    for name in names:
        pair, side, lang = re.match(r"newstest2014-(\w+)-(\w+)\.(\w+)\.sgm", name).groups()
        docs = _generated_docs(f"nt14{pair}", 680 if pair == "deen" else 720, GENERATED_SEGMENTS, lang)
        members.append((name, make_sgm(docs, "newstest2014", lang, side, pair[:2])))
    return members


def _test_full(shared: Path | None) -> Members:
    """test-full.tgz: the full newstest2014 SGMs under test-full/."""
    return [(f"test-full/{name}", data) for name, data in _newstest2014_full(shared)]


def _filtered_keep(shared: Path | None, full: Members) -> set[tuple[str, str]]:
    """The (docid, segid) pairs of the filtered de-en set: the shared list, or every second generated doc."""
    if shared is not None:
        return _read_docids(shared / "test" / "plain" / "newstest2014-deen.filtered2737.docids")
    ids = list(segment_ids(dict(full)["newstest2014-deen-src.en.sgm"]))
    docids = list(dict.fromkeys(docid for docid, _ in ids))
    return {(docid, segid) for docid, segid in ids if docids.index(docid) % 2}


def _test_filtered(shared: Path | None) -> Members:
    """test-filtered.tgz: de-en SGMs cut to the filtered segments, fr-en SGMs whole, under test/."""
    full = _newstest2014_full(shared)
    keep = _filtered_keep(shared, full)
    return [(f"test/{name}", filter_sgm(data, keep) if "-deen-" in name else data) for name, data in full]


def _wmt15_test(shared: Path | None) -> Members:
    """wmt15 test.tgz: generated newstest2015 de-en and en-de SGMs (no real copy exists).

    Unlike newstest2014, WMT15 ships each direction's source only in the source language and its
    reference only in the target language.
    """
    members = []
    for pair, src, ref in (("deen", "de", "en"), ("ende", "en", "de")):
        for side, lang in (("ref", ref), ("src", src)):
            docs = _generated_docs("nt15", 760, GENERATED_SEGMENTS, lang)
            members.append((f"test/newstest2015-{pair}-{side}.{lang}.sgm", make_sgm(docs, "newstest2015", lang, side, src)))
    return members


BUILDERS: dict[str, Callable[[Path | None], Members]] = {
    "nc-v9": _nc_v9,
    "dev": _dev,
    "test-full": _test_full,
    "test-filtered": _test_filtered,
    "wmt15-test": _wmt15_test,
}


# --- Archives and checksums ---------------------------------------------------------------------


def _tarinfo(name: str, size: int | None) -> tarfile.TarInfo:
    """A tar header with fixed owner, mode and mtime; size None makes a folder entry."""
    info = tarfile.TarInfo(name)
    info.mtime, info.uid, info.gid, info.uname, info.gname = _MTIME, 0, 0, "", ""
    if size is None:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
    else:
        info.size, info.mode = size, 0o644
    return info


def make_tar(members: Members) -> bytes:
    """An uncompressed tar of `members`, each folder entered once before its first file."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        folders: set[str] = set()
        for name, data in members:
            parts = name.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                if (folder := "/".join(parts[:depth])) not in folders:
                    folders.add(folder)
                    tar.addfile(_tarinfo(folder + "/", None))
            tar.addfile(_tarinfo(name, len(data)), io.BytesIO(data))
    return buf.getvalue()


def _gzip(data: bytes) -> bytes:
    """gzip with mtime 0 and no file name, so the bytes depend on `data` alone."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
        gz.write(data)
    return buf.getvalue()


def load_table(path: Path = TABLE) -> dict:
    """The WMT sources table."""
    return yaml.safe_load(path.read_text())


def url_path(url: str) -> str:
    """The path part of a URL without its leading "/" (where the mirror keeps the file)."""
    return urllib.parse.urlsplit(url).path.lstrip("/")


def build_mirror(out_dir: Path, shared: Path | None, archives: Iterable[str] = SAMPLE_ARCHIVES) -> Path:
    """Write the archives under out_dir at their URL paths plus out_dir/checksums.yaml; return the latter."""
    table = load_table()["archives"]
    archives = list(archives)
    if unknown := [key for key in archives if key not in BUILDERS]:
        raise ValueError(f"no mirror builder for {unknown}; known archives: {', '.join(BUILDERS)}")
    checksums = {}
    for key in archives:
        url = table[key]["url"]
        data = make_tar(BUILDERS[key](shared))
        if not url.endswith(".tar"):
            data = _gzip(data)
        dest = Path(out_dir) / url_path(url)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        checksums[key] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    out = Path(out_dir) / "checksums.yaml"
    out.write_text(yaml.safe_dump(checksums, sort_keys=False))
    return out


# --- HTTP server --------------------------------------------------------------------------------

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


def parse_range(header: str, size: int) -> tuple[int, int] | None:
    """(first, last) byte of a "bytes=a-[b]" header; None for no header or another form.

    Other forms (suffix or multiple ranges) are ignored and the whole file is sent, as RFC 9110 allows.
    """
    match = _RANGE.match(header)
    if not match or (match.group(2) and int(match.group(2)) < int(match.group(1))):
        return None
    return int(match.group(1)), min(int(match.group(2) or size - 1), size - 1)


def _handler(root: Path) -> type[http.server.BaseHTTPRequestHandler]:
    """A GET/HEAD handler serving files under `root`, with single "bytes=a-[b]" ranges."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _file(self) -> Path | None:
            """The file the request path names, or None when absent or outside root."""
            rel = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path).lstrip("/")
            path = (root / rel).resolve()
            return path if path.is_file() and path.is_relative_to(root) else None

        def _headers(self, code: int, length: int, content_range: str | None = None) -> None:
            self.send_response(code)
            if content_range:
                self.send_header("Content-Range", content_range)
            self.send_header("Content-Length", str(length))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()

        def do_HEAD(self) -> None:
            self._answer(send_body=False)

        def do_GET(self) -> None:
            self._answer(send_body=True)

        def _answer(self, send_body: bool) -> None:
            path = self._file()
            if path is None:
                self.send_error(404)
                return
            size = path.stat().st_size
            byte_range = parse_range(self.headers.get("Range", ""), size)
            if byte_range is None:
                start, end = 0, size - 1
                self._headers(200, size)
            elif byte_range[0] >= size:
                self._headers(416, 0, f"bytes */{size}")
                return
            else:
                start, end = byte_range
                self._headers(206, end - start + 1, f"bytes {start}-{end}/{size}")
            if send_body:
                with path.open("rb") as f:
                    f.seek(start)
                    self._send(f, end - start + 1)

        def _send(self, f, n: int) -> None:
            """Copy n bytes of f to the client in chunks."""
            while n > 0 and (block := f.read(min(_CHUNK, n))):
                self.wfile.write(block)
                n -= len(block)

    return Handler


@contextlib.contextmanager
def serve(root: Path, port: int = 0) -> Iterator[str]:
    """Serve `root` on 127.0.0.1 (port 0: the OS picks) and yield "http://127.0.0.1:PORT"."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), _handler(Path(root).resolve()))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


# --- Command line -------------------------------------------------------------------------------


def _write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a script polling for `path` never reads half of it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _serve_until_signal(root: Path, port: int, port_file: Path, name: str) -> None:
    """Serve until SIGTERM or SIGINT, with the base URL in port_file meanwhile."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with serve(root, port) as url:
        _write_atomically(port_file, url + "\n")
        print(f"{name}: serving {root} at {url}", flush=True)
        try:
            stop.wait()
        finally:
            # A stale URL would send the next script that waits for this file to a dead port.
            port_file.unlink(missing_ok=True)


def add_serve_command(sub: argparse._SubParsersAction) -> None:
    """The `serve` command of both mirrors' command lines (tests/multi30k_mirror.py has it too)."""
    s = sub.add_parser("serve", help="serve OUT_DIR until SIGTERM/SIGINT")
    s.add_argument("out_dir", type=Path)
    s.add_argument("--port-file", type=Path, required=True, help="written with the base URL once listening")
    s.add_argument("--port", type=int, default=0, help="0 (default): any free port")


def serve_command(a: argparse.Namespace, name: str) -> int:
    """Run `serve` on a built folder; returns the exit status."""
    if not a.out_dir.is_dir():
        print(f"{name}: {a.out_dir} is not a folder; run 'build' first.", file=sys.stderr)
        return 2
    _serve_until_signal(a.out_dir, a.port, a.port_file, name)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write the archives and checksums.yaml; print the latter's path")
    b.add_argument("out_dir", type=Path)
    src = b.add_mutually_exclusive_group()
    src.add_argument("--shared", type=Path, help=f"real WMT files (default: {DEFAULT_SHARED} if it exists)")
    src.add_argument("--no-shared", action="store_true", help="generate every file")
    b.add_argument("--archives", nargs="+", default=list(SAMPLE_ARCHIVES), choices=list(BUILDERS))
    add_serve_command(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit status."""
    a = _parser().parse_args(argv)
    if a.command == "build":
        shared = None if a.no_shared else a.shared or (DEFAULT_SHARED if DEFAULT_SHARED.is_dir() else None)
        print(build_mirror(a.out_dir, shared, a.archives))
        return 0
    return serve_command(a, "wmt_mirror")


if __name__ == "__main__":
    sys.exit(main())
