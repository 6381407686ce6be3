"""Binarized parallel data: exact round trip, subsets, and errors for bad inputs."""

import pytest
import torch

from rnnmt.errors import UserError
from rnnmt.fileio import sha256_file
from rnnmt.text.binarize import ParallelData, binarize
from rnnmt.text.bpe import BpeSegmenter, learn_bpe
from rnnmt.text.vocab import Vocab, build_shortlist

SRC = ["the cat sat", "a dog", "", "the unknownword cat"]
TGT = ["le chat", "un chien aboie", "vide", "le chat"]


@pytest.fixture
def corpus(tmp_path):
    src, tgt = tmp_path / "c.en", tmp_path / "c.fr"
    src.write_text("\n".join(SRC) + "\n", encoding="utf-8")
    tgt.write_text("\n".join(TGT) + "\n", encoding="utf-8")
    return src, tgt, build_shortlist(SRC[:3], 100), build_shortlist(TGT, 100)


def test_round_trip(tmp_path, corpus):
    src, tgt, sv, tv = corpus
    stats = binarize(src, tgt, sv, tv, tmp_path / "data.pt")
    data = ParallelData.load(tmp_path / "data.pt")
    assert len(data) == stats["pairs"] == 4
    for i, (s, t) in enumerate(zip(SRC, TGT)):
        assert data.src(i).tolist() == sv.encode(s.split())
        assert data.tgt(i).tolist() == tv.encode(t.split())
    assert data.src(3).tolist()[1] == Vocab.UNK
    assert stats["src_unk"] == 1 and stats["tgt_unk"] == 0
    assert data.src_lengths.tolist() == [3, 2, 0, 3]
    assert data.tgt_lengths.tolist() == [2, 3, 1, 2]
    assert data.src_ids.dtype == data.src_offsets.dtype == torch.int64
    assert data.meta["src_vocab_size"] == len(sv)
    assert data.meta["tgt_sha256"] == sha256_file(tgt)


def test_subset_keeps_given_order(tmp_path, corpus):
    src, tgt, sv, tv = corpus
    binarize(src, tgt, sv, tv, tmp_path / "data.pt")
    data = ParallelData.load(tmp_path / "data.pt")
    sub = data.subset([3, 0, 2])
    assert len(sub) == 3
    assert [sub.src(i).tolist() for i in range(3)] == [data.src(3).tolist(), data.src(0).tolist(), []]
    assert [sub.tgt(i).tolist() for i in range(3)] == [data.tgt(i).tolist() for i in (3, 0, 2)]
    assert sub.src_lengths.tolist() == [3, 3, 0]
    assert len(data.subset([])) == 0
    with pytest.raises(IndexError):
        data.src(4)


def test_bpe_segmented_binarize(tmp_path, corpus):
    src, tgt, _, tv = corpus
    learn_bpe(src, tmp_path / "codes", 10)
    seg = BpeSegmenter(tmp_path / "codes")
    sv = build_shortlist([" ".join(seg.segment(s.split())) for s in SRC], 1000, kind="bpe")
    binarize(src, tgt, sv, tv, tmp_path / "data.pt", src_segmenter=seg)
    data = ParallelData.load(tmp_path / "data.pt")
    assert BpeSegmenter.merge(sv.decode(data.src(3))) == SRC[3].split()


def test_line_count_mismatch_writes_nothing(tmp_path, corpus):
    src, _, sv, tv = corpus
    short = tmp_path / "short.fr"
    short.write_text("un\n", encoding="utf-8")
    with pytest.raises(UserError, match=f"{src} has 4 lines but {short} has 1 lines"):
        binarize(src, short, sv, tv, tmp_path / "out" / "data.pt")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("content", [b"", b"not a torch file", None])
def test_load_rejects_other_files(tmp_path, content):
    path = tmp_path / "data.pt"
    if content is None:
        torch.save({"src_ids": torch.zeros(3)}, path)
    else:
        path.write_bytes(content)
    with pytest.raises(UserError, match=str(path)):
        ParallelData.load(path)


def test_load_missing_file(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        ParallelData.load(tmp_path / "none.pt")


# The peak resident memory of one binarization, in its own process: VmHWM, the high-water mark of the process's
# own memory (getrusage's ru_maxrss would also count the memory of the test process it was forked from).
_PEAK = """
import re, sys
from pathlib import Path
from rnnmt.text.binarize import binarize
from rnnmt.text.vocab import Vocab
src, tgt, vocab, out = map(Path, sys.argv[1:])
v = Vocab.load(vocab)
binarize(src, tgt, v, v, out)
print(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
"""


def _write_corpus(path, pairs, words):
    line = " ".join(words) + "\n"
    path.write_text(line * pairs, encoding="utf-8")


def test_binarize_memory_does_not_grow_with_the_corpus(tmp_path):
    """Twice the pairs (2 x 4M ids more, 32 MB as int64 arrays) leave the peak RSS within 8 MB: ids go to disk as read."""
    import subprocess
    import sys

    words = [f"w{i}" for i in range(20)]
    vocab = build_shortlist([" ".join(words)], 100)
    vocab.save(tmp_path / "vocab.json")
    peaks = []
    for pairs in (100_000, 200_000):
        src, tgt = tmp_path / f"{pairs}.en", tmp_path / f"{pairs}.fr"
        _write_corpus(src, pairs, words)
        _write_corpus(tgt, pairs, words[::-1])
        run = subprocess.run(
            [sys.executable, "-c", _PEAK, str(src), str(tgt), str(tmp_path / "vocab.json"), str(tmp_path / f"{pairs}.pt")],
            capture_output=True,
            text=True,
            check=True,
        )
        peaks.append(int(run.stdout.split()[-1]) / 1024)
        data = ParallelData.load(tmp_path / f"{pairs}.pt")
        assert len(data) == pairs and data.tgt(pairs - 1).tolist() == vocab.encode(words[::-1])
    assert peaks[1] - peaks[0] <= 8, f"peak RSS {peaks[0]:.0f} MB at 100,000 pairs, {peaks[1]:.0f} MB at 200,000"


def test_binarize_writes_what_the_in_memory_writer_writes(tmp_path, corpus):
    """The streamed file and one saved from tensors in memory (how binarize wrote before) read back alike."""
    src, tgt, sv, tv = corpus
    binarize(src, tgt, sv, tv, tmp_path / "streamed.pt")
    streamed = ParallelData.load(tmp_path / "streamed.pt")
    ParallelData(streamed.src_ids.clone(), streamed.src_offsets.clone(), streamed.tgt_ids.clone(), streamed.tgt_offsets.clone(), dict(streamed.meta)).save(
        tmp_path / "in_memory.pt"
    )
    saved = ParallelData.load(tmp_path / "in_memory.pt")
    for key in ("src_ids", "src_offsets", "tgt_ids", "tgt_offsets"):
        assert torch.equal(getattr(saved, key), getattr(streamed, key)), key
    assert saved.meta == streamed.meta
    assert torch.load(tmp_path / "streamed.pt", weights_only=True)["src_ids"].tolist() == streamed.src_ids.tolist()  # without mmap too
