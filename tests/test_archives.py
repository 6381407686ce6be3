"""Archive extraction: only the asked-for members, streamed atomically, unsafe members refused."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from rnnmt.data import archives
from rnnmt.data.archives import extract_members, list_members
from rnnmt.errors import UserError

NC = {
    "training/news-commentary-v9.fr-en.en": b"Hello.\nWorld.\n",
    "training/news-commentary-v9.fr-en.fr": b"Bonjour.\nLe monde.\n",
    "training/news-commentary-v9.de-en.en": b"Hi.\n",
    "training/news-commentary-v9.de-en.de": b"Hallo.\n",
}


def _add_file(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _make_tar(path: Path, files: dict[str, bytes], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tar:
        for name, data in files.items():
            _add_file(tar, name, data)
    return path


def _no_outputs(folder: Path) -> bool:
    """True when extraction left neither a final file nor a temporary ".part" file behind."""
    return not any(p.is_file() for p in folder.rglob("*"))


@pytest.mark.parametrize("suffix,mode", [(".tgz", "w:gz"), (".tar.gz", "w:gz"), (".tar", "w")])
def test_extracts_only_requested_members(tmp_path, suffix, mode):
    archive = _make_tar(tmp_path / f"training-parallel-nc-v9{suffix}", NC, mode)
    out = tmp_path / "out"
    wanted = {"training/news-commentary-v9.fr-en.en": out / "nc.en", "./training/news-commentary-v9.fr-en.fr": out / "nc.fr"}
    written = extract_members(archive, wanted)
    assert written == {"training/news-commentary-v9.fr-en.en": 14, "./training/news-commentary-v9.fr-en.fr": len(NC["training/news-commentary-v9.fr-en.fr"])}
    assert (out / "nc.en").read_bytes() == NC["training/news-commentary-v9.fr-en.en"]
    assert (out / "nc.fr").read_bytes() == NC["training/news-commentary-v9.fr-en.fr"]
    assert sorted(p.name for p in out.iterdir()) == ["nc.en", "nc.fr"]


def test_list_members_in_archive_order(tmp_path):
    archive = _make_tar(tmp_path / "nc.tgz", NC)
    assert list_members(archive) == list(NC)


def test_gz_members_of_plain_tar_decompressed_on_the_fly(tmp_path):
    en = "".join(f"sentence {i}\n" for i in range(5000)).encode()
    fr = "".join(f"phrase {i} é\n" for i in range(5000)).encode()
    archive = _make_tar(
        tmp_path / "training-giga-fren.tar",
        {"giga-fren.release2.fixed.en.gz": gzip.compress(en), "giga-fren.release2.fixed.fr.gz": gzip.compress(fr)},
        mode="w",
    )
    written = extract_members(archive, {"giga-fren.release2.fixed.en.gz": tmp_path / "giga.en", "giga-fren.release2.fixed.fr.gz": tmp_path / "giga.fr.gz"})
    assert (tmp_path / "giga.en").read_bytes() == en
    assert written["giga-fren.release2.fixed.en.gz"] == len(en)
    # An output that keeps ".gz" gets the member's compressed bytes unchanged.
    assert gzip.decompress((tmp_path / "giga.fr.gz").read_bytes()) == fr


@pytest.mark.parametrize("name", ["../evil", "/abs", "training/../../evil"])
def test_unsafe_member_path_refused_and_nothing_written(tmp_path, name):
    archive = _make_tar(tmp_path / "a.tgz", {**NC, name: b"x\n"})
    out = tmp_path / "out"
    with pytest.raises(UserError, match=r"a\.tgz.*refusing member") as err:
        extract_members(archive, {"training/news-commentary-v9.fr-en.en": out / "ok", name: out / "evil"})
    assert name in str(err.value)
    assert not out.exists()
    assert not (tmp_path.parent / "evil").exists()


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE, tarfile.CHRTYPE])
def test_link_device_fifo_member_refused(tmp_path, kind):
    archive = tmp_path / "links.tar"
    with tarfile.open(archive, "w") as tar:
        _add_file(tar, "training/real.en", b"real\n")
        info = tarfile.TarInfo("training/link.en")
        info.type = kind
        info.linkname = "/etc/passwd" if kind == tarfile.SYMTYPE else "training/real.en"
        tar.addfile(info)
    out = tmp_path / "out"
    with pytest.raises(UserError, match=r"links\.tar.*'training/link\.en'.*regular file"):
        extract_members(archive, {"training/link.en": out / "link.en"})
    assert not out.exists()


def test_missing_member_lists_similar_names(tmp_path):
    archive = _make_tar(tmp_path / "nc.tgz", NC)
    with pytest.raises(UserError) as err:
        extract_members(archive, {"training/news-commentary-v8.fr-en.en": tmp_path / "x"})
    message = str(err.value)
    assert "nc.tgz" in message and "'training/news-commentary-v8.fr-en.en'" in message
    assert "training/news-commentary-v9.fr-en.en" in message
    assert not (tmp_path / "x").exists()


def test_missing_archive_and_non_archive(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        extract_members(tmp_path / "absent.tgz", {"a": tmp_path / "a"})
    junk = tmp_path / "junk.tgz"
    junk.write_bytes(b"not an archive at all\n" * 100)
    with pytest.raises(UserError, match="not a readable"):
        list_members(junk)


def test_two_members_to_one_output_refused(tmp_path):
    archive = _make_tar(tmp_path / "nc.tgz", NC)
    same = tmp_path / "same"
    with pytest.raises(UserError, match="same output"):
        extract_members(archive, {"training/news-commentary-v9.fr-en.en": same, "training/news-commentary-v9.fr-en.fr": same})
    with pytest.raises(UserError, match="requested twice"):
        extract_members(archive, {"training/news-commentary-v9.fr-en.en": same, "./training/news-commentary-v9.fr-en.en": tmp_path / "b"})
    assert not same.exists()


def test_failure_mid_stream_leaves_no_output(tmp_path, monkeypatch):
    archive = _make_tar(tmp_path / "nc.tgz", NC)
    calls = []

    def failing_read(self, size=-1):
        calls.append(size)
        if len(calls) > 1:
            raise EOFError("simulated truncation")
        return b"partial "

    monkeypatch.setattr(tarfile.ExFileObject, "read", failing_read)
    out = tmp_path / "out"
    with pytest.raises(UserError, match="truncated or corrupt"):
        extract_members(archive, {"training/news-commentary-v9.fr-en.en": out / "nc.en"})
    assert len(calls) == 2  # the first chunk reached the temporary file before the failure
    assert _no_outputs(out)


def test_truncated_archive_leaves_no_output(tmp_path, monkeypatch):
    monkeypatch.setattr(archives, "_CHUNK", 1024)
    big = b"".join(b"%08d some sentence text\n" % i for i in range(20000))
    full = _make_tar(tmp_path / "full.tar", {"training/big.en": big}, mode="w")
    truncated = tmp_path / "truncated.tar"
    truncated.write_bytes(full.read_bytes()[: len(big) // 2])
    out = tmp_path / "out"
    with pytest.raises(UserError, match=r"truncated\.tar.*'training/big\.en'.*truncated or corrupt"):
        extract_members(truncated, {"training/big.en": out / "big.en"})
    assert _no_outputs(out)


def test_corrupt_gzip_member_leaves_no_output(tmp_path):
    good = gzip.compress(b"line\n" * 10000)
    corrupt = good[:20] + bytes(len(good) - 20)
    archive = _make_tar(tmp_path / "giga.tar", {"giga-fren.release2.fixed.en.gz": corrupt}, mode="w")
    out = tmp_path / "out"
    with pytest.raises(UserError, match="truncated or corrupt"):
        extract_members(archive, {"giga-fren.release2.fixed.en.gz": out / "giga.en"})
    assert _no_outputs(out)


def test_empty_request_reads_nothing(tmp_path):
    assert extract_members(tmp_path / "never-opened.tgz", {}) == {}
