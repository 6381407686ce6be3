"""User mistakes through the CLI: one line on stderr, exit status 2, no partial output."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from rnnmt.cli import main


def test_help_of_rnnmt_and_of_every_subcommand_prints(capsys):
    """`rnnmt --help` is the first command a new user types (it crashed on a literal "95%")."""
    from rnnmt.cli import COMMANDS
    from rnnmt.cli.arguments import Modes

    modes = [[c.name, mode.name] for c in COMMANDS.values() if isinstance(c, Modes) for mode in c.modes]
    for names in ([], *([name] for name in COMMANDS), *modes):
        with pytest.raises(SystemExit) as exit_:
            main([*names, "--help"])
        out = capsys.readouterr().out
        assert exit_.value.code == 0 and out.startswith(" ".join(["usage: rnnmt", *names])), names
    assert len(COMMANDS) > 30 and len(modes) > 5


def test_version_is_one_line_of_rnnmts_torchs_and_pythons(capsys):
    """rnnmt's from its one home, rnnmt.__version__ (pyproject.toml reads it too); torch's and Python's for a bug report."""
    import platform

    import torch

    from rnnmt import __version__

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"rnnmt {__version__} (torch {torch.__version__}, Python {platform.python_version()})\n"


def test_mismatched_parallel_files_name_both_files_and_counts(tmp_path: Path, capsys):
    (tmp_path / "a.en").write_text("one\ntwo\nthree\n")
    (tmp_path / "a.fr").write_text("un\ndeux\n")
    out = tmp_path / "out"
    code = main(["assemble", "--src", str(tmp_path / "a.en"), "--tgt", str(tmp_path / "a.fr"), "--out-src", str(out / "x.en"), "--out-tgt", str(out / "x.fr")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "a.en has 3 lines" in err and "a.fr has 2 lines" in err
    assert not (out / "x.en").exists() and not (out / "x.fr").exists()


def test_missing_model_is_a_clear_error(tmp_path: Path, capsys):
    code = main(["translate", "--model", str(tmp_path / "nope.pt"), "--input", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and "does not exist" in err


def test_train_translate_by_hand(tiny_corpus, tmp_path: Path, capsys, monkeypatch):
    """`rnnmt train` writes model.pt and meta.json; `rnnmt translate` reads stdin-like input files."""
    import json

    from conftest import tiny_system

    system = tmp_path / "system.json"
    system.write_text(json.dumps(tiny_system(updates=4)))
    out = tmp_path / "model"
    args = [
        "train",
        "--system",
        str(system),
        "--train",
        str(tiny_corpus["data"]),
        "--valid",
        f"dev={tiny_corpus['data']}",
        "--src-vocab",
        str(tiny_corpus["src_vocab"]),
        "--tgt-vocab",
        str(tiny_corpus["tgt_vocab"]),
        "--out-dir",
        str(out),
        "--device",
        "cpu",
    ]
    assert main(args) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["updates"] == 4 and meta["threads"] == 1
    src = tmp_path / "in.txt"
    src.write_text("a b c\nd e\n")
    assert (
        main(["translate", "--model", str(out / "model.pt"), "--input", str(src), "--output", str(tmp_path / "o.txt"), "--beam", "2", "--device", "cpu"]) == 0
    )
    assert len((tmp_path / "o.txt").read_text().splitlines()) == 2
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"a b c\nd e\n")))
    assert main(["translate", "--model", str(out / "model.pt"), "--beam", "2", "--device", "cpu"]) == 0
    assert capsys.readouterr().out.splitlines() == (tmp_path / "o.txt").read_text().splitlines()


def test_sigterm_to_a_training_process_checkpoints_and_the_rerun_resumes(tiny_corpus, tmp_path: Path):
    """What Slurm pre-emption does: SIGTERM mid-training, exit 143 with a checkpoint, the re-run resumes."""
    import json
    import signal
    import subprocess
    import sys
    import time

    from conftest import tiny_system

    system = tmp_path / "system.json"
    system.write_text(json.dumps(tiny_system(updates=100000, log_every=1, valid_every=100000, checkpoint_every=100000)))
    out = tmp_path / "model"
    args = [
        sys.executable,
        "-m",
        "rnnmt.cli",
        "train",
        "--system",
        str(system),
        "--train",
        str(tiny_corpus["data"]),
        "--src-vocab",
        str(tiny_corpus["src_vocab"]),
        "--tgt-vocab",
        str(tiny_corpus["tgt_vocab"]),
        "--out-dir",
        str(out),
        "--device",
        "cpu",
    ]
    log = tmp_path / "train.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(args, stderr=f)
        deadline = time.monotonic() + 900  # a guard against a hang, not a schedule
        while "update 3/" not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
    assert "SIGTERM received" in log.read_text()
    assert (out / "ckpt" / "last.pt").exists() and not (out / "model.pt").exists()
    system.write_text(json.dumps(tiny_system(updates=8)))  # a smaller budget: the re-run just finishes
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "resumed from" in done.stderr
    assert json.loads((out / "meta.json").read_text())["updates"] >= 8


def test_bad_device_and_sizes_are_one_line_errors(tmp_path: Path, capsys):
    assert main(["translate", "--model", str(tmp_path / "m.pt"), "--device", "gpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--device 'gpu' is not a device" in err
    with pytest.raises(SystemExit) as exc:
        main(["translate", "--model", str(tmp_path / "m.pt"), "--beam", "0"])
    assert exc.value.code == 2 and "expected a positive integer" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["demo-corpus", "--out-dir", str(tmp_path), "--seed", "-1"])
    assert exc.value.code == 2 and "expected a seed from 0 to 4294967295, got -1" in capsys.readouterr().err


def test_demo_corpus_takes_each_corpus_with_its_role_and_domain(tmp_path: Path, capsys):
    corpora = ["--corpus", "a:30:train:news", "--corpus", "held:10:eval:news"]
    assert main(["demo-corpus", "--out-dir", str(tmp_path), "--seed", "3", *corpora]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["corpora"]["held"]["role"] == "eval" and report["corpora"]["a"]["pairs"] == 30
    assert (tmp_path / "held.fr").read_text(encoding="utf-8").count("\n") == 10
    assert main(["demo-corpus", "--out-dir", str(tmp_path / "x"), "--seed", "3", "--corpus", "b:5:dev:news"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "role 'dev'" in err and not (tmp_path / "x").exists()
    with pytest.raises(SystemExit) as exc:
        main(["demo-corpus", "--out-dir", str(tmp_path), "--seed", "3", "--corpus", "b:5"])
    assert exc.value.code == 2 and "expected NAME:PAIRS:ROLE:DOMAIN" in capsys.readouterr().err


def test_data_binarized_with_other_vocabularies_is_refused(tiny_corpus, tmp_path: Path, capsys):
    import json

    from rnnmt.text.vocab import build_shortlist

    from conftest import tiny_system

    build_shortlist(["x y z"], 10).save(tmp_path / "other.json")
    system = tmp_path / "system.json"
    system.write_text(json.dumps(tiny_system(updates=2)))
    code = main(
        [
            "train",
            "--system",
            str(system),
            "--train",
            str(tiny_corpus["data"]),
            "--src-vocab",
            str(tmp_path / "other.json"),
            "--tgt-vocab",
            str(tiny_corpus["tgt_vocab"]),
            "--out-dir",
            str(tmp_path / "m"),
            "--device",
            "cpu",
        ]
    )
    assert code == 2 and "binarize again with the same vocabularies" in capsys.readouterr().err


def test_download_extract_and_sgm_by_hand(tmp_path: Path, capsys):
    """The WMT data commands chained by hand: an archive from download.dir, two members, an SGM file."""
    import hashlib
    import io as _io
    import tarfile

    sgm = '<srcset setid="t" srclang="any">\n<doc docid="d">\n<seg id="1">  Hello   world </seg>\n</doc>\n</srcset>\n'
    archive = tmp_path / "offline" / "dev.tgz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in (("dev/newstest2013-src.en.sgm", sgm), ("dev/other.txt", "x\n")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, _io.BytesIO(data))
    digest = hashlib.md5(archive.read_bytes()).hexdigest()
    out = tmp_path / "dl" / "dev.tgz"
    assert (
        main(
            [
                "download",
                "--url",
                "http://www.statmt.org/wmt14/dev.tgz",
                "--output",
                str(out),
                "--checksum",
                f"md5:{digest}",
                "--offline-dir",
                str(archive.parent),
            ]
        )
        == 0
    )
    sgm_out = tmp_path / "x" / "nt13.sgm"
    assert main(["extract", "--archive", str(out), "--member", f"dev/newstest2013-src.en.sgm={sgm_out}"]) == 0
    assert main(["sgm", "--input", str(sgm_out), "--output", str(tmp_path / "nt13.en")]) == 0
    assert (tmp_path / "nt13.en").read_text() == "Hello world\n"
    with pytest.raises(SystemExit) as exc:
        main(["download", "--url", "http://x/y.tgz", "--output", str(tmp_path / "z"), "--checksum", "crc:1"])
    assert exc.value.code == 2 and "expected sha256:HEX or md5:HEX" in capsys.readouterr().err


def test_raw_corpus_and_corpus_report_by_hand(tmp_path: Path, capsys):
    """`rnnmt raw-corpus` per corpus (a warning for an unexpected line count), then `rnnmt corpus-report`."""
    import gzip
    import json

    (tmp_path / "a.en").write_text("one\ntwo\n\n")
    (tmp_path / "a.fr").write_text("un\ndeux\nvide\n")
    with gzip.open(tmp_path / "b.en.gz", "wb") as f:
        f.write(b"three\n")
    (tmp_path / "b.fr").write_bytes(b"trois \xe9\n")
    out = tmp_path / "raw"
    code = main(
        [
            "raw-corpus",
            "--name",
            "toy",
            "--src",
            str(tmp_path / "a.en"),
            str(tmp_path / "b.en.gz"),
            "--tgt",
            str(tmp_path / "a.fr"),
            str(tmp_path / "b.fr"),
            "--out-src",
            str(out / "toy.en"),
            "--out-tgt",
            str(out / "toy.fr"),
            "--report",
            str(out / "toy.json"),
            "--expected-lines",
            "5",
        ]
    )
    assert code == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("warning: toy: 4 lines, expected 5 (the sources table's `lines`)")
    assert err[1].startswith("toy: 3 of 4 pairs kept (1 with an empty side dropped")
    assert (out / "toy.en").read_text() == "one\ntwo\nthree\n"
    assert (out / "toy.fr").read_text() == "un\ndeux\ntrois \ufffd\n"
    report = json.loads((out / "toy.json").read_text())
    assert (report["pairs"], report["repaired_utf8"], report["matches_expected"]) == (3, {"src": 0, "tgt": 1}, False)

    code = main(["corpus-report", "--pair", "fr-en", "--input", str(out / "toy.json"), "--output", str(tmp_path / "fr-en.json")])
    assert code == 0
    assert capsys.readouterr().err == "warning: fr-en: toy has 4 lines, expected 5 (the sources table's `lines`).\n"
    summary = json.loads((tmp_path / "fr-en.json").read_text())
    assert (summary["total_pairs"], summary["mismatches"], summary["repaired_utf8"]) == (3, ["toy"], 1)


def test_raw_corpus_user_errors_are_one_line_and_write_nothing(tmp_path: Path, capsys):
    (tmp_path / "nt.en").write_text("fine\n")
    (tmp_path / "nt.fr").write_bytes(b"mal \xe9crit\n")
    out = tmp_path / "raw"
    code = main(
        [
            "raw-corpus",
            "--name",
            "nt",
            "--heldout",
            "--src",
            str(tmp_path / "nt.en"),
            "--tgt",
            str(tmp_path / "nt.fr"),
            "--out-src",
            str(out / "nt.en"),
            "--out-tgt",
            str(out / "nt.fr"),
            "--report",
            str(out / "nt.json"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and "nt.fr line 1 is not valid UTF-8" in err
    assert not out.exists() or not any(out.iterdir())
    (tmp_path / "junk.json").write_text("[1, 2]")
    code = main(["corpus-report", "--pair", "fr-en", "--input", str(tmp_path / "junk.json"), "--output", str(out / "s.json")])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "junk.json lacks the keys" in err


def test_select_lium_copies_the_pool(tmp_path: Path, capsys):
    (tmp_path / "p.en").write_text("a b\nc\n")
    (tmp_path / "p.fr").write_text("x y\nz\n")
    code = main(
        [
            "select",
            "--method",
            "lium",
            "--src",
            str(tmp_path / "p.en"),
            "--tgt",
            str(tmp_path / "p.fr"),
            "--out-src",
            str(tmp_path / "s.en"),
            "--out-tgt",
            str(tmp_path / "s.fr"),
        ]
    )
    assert code == 0
    assert (tmp_path / "s.en").read_text() == "a b\nc\n" and (tmp_path / "s.fr").read_text() == "x y\nz\n"
    assert '"pairs_out": 2' in capsys.readouterr().out


@pytest.fixture
def tiny_model_file(tiny_corpus, tmp_path: Path) -> Path:
    import json

    from conftest import tiny_system

    system = tmp_path / "system.json"
    system.write_text(json.dumps(tiny_system(updates=2)))
    args = [
        "train",
        "--system",
        str(system),
        "--train",
        str(tiny_corpus["data"]),
        "--src-vocab",
        str(tiny_corpus["src_vocab"]),
        "--tgt-vocab",
        str(tiny_corpus["tgt_vocab"]),
        "--out-dir",
        str(tmp_path / "model"),
        "--device",
        "cpu",
    ]
    assert main(args) == 0
    return tmp_path / "model" / "model.pt"


def test_an_empty_line_translates_to_an_empty_line(tmp_path: Path):
    """A blank source line has nothing to translate; a GroundHog model used to decode from its source EOS
    alone and invent a sentence. EOS is made unlikely here, so such a decoding could not end at once."""
    import torch

    from rnnmt.models.artifact import save_model
    from rnnmt.models.build import build_model
    from rnnmt.text.vocab import Vocab

    from conftest import tiny_model_config

    torch.manual_seed(0)
    vocab = Vocab(["a", "b", "c"], [3, 2, 1])
    model = build_model(tiny_model_config(), len(vocab), len(vocab))
    with torch.no_grad():
        model.decoder.W_o.bias[Vocab.EOS] = -50.0
    save_model(tmp_path / "m.pt", model, {"name": "t", "pair": "en-fr", "model": tiny_model_config()}, vocab, vocab, {"src": None, "tgt": None})
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("a b c\n\n   \nc b\n", encoding="utf-8")
    assert main(["translate", "--model", str(tmp_path / "m.pt"), "--input", str(src), "--output", str(out), "--beam", "2", "--device", "cpu"]) == 0
    lines = out.read_text(encoding="utf-8").split("\n")
    assert lines[1] == lines[2] == "" and lines[0] != "" and lines[3] != ""


@pytest.mark.parametrize("locale", ["C", "C.UTF-8"])
def test_invalid_utf8_on_stdin_is_one_line_under_every_locale(tiny_model_file: Path, locale: str):
    """It used to become UNK silently under one locale and a traceback under another; --input already said so."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "LC_ALL": locale, "LANG": locale}
    env.pop("PYTHONIOENCODING", None)
    run = subprocess.run(
        [sys.executable, "-m", "rnnmt.cli", "translate", "--model", str(tiny_model_file), "--beam", "2", "--device", "cpu"],
        input=b"a b c\nd \xe9 e\n",
        capture_output=True,
        env=env,
        timeout=120,
    )
    err = run.stderr.decode().strip()
    assert run.returncode == 2 and run.stdout == b""
    assert err == "rnnmt translate: error: standard input line 2 is not valid UTF-8; expected UTF-8 text."


def test_translations_on_stdout_are_utf8_under_every_locale(tmp_path: Path):
    """Every target word here is outside latin-1, so a locale-encoded stdout would fail on any output."""
    import os
    import subprocess
    import sys

    import torch

    from rnnmt.models.artifact import save_model
    from rnnmt.models.build import build_model
    from rnnmt.text.vocab import Vocab

    from conftest import tiny_model_config

    torch.manual_seed(0)
    src_vocab, tgt_vocab = Vocab(["a", "b", "c"], [3, 2, 1]), Vocab(["€", "œ", "≠", "—"], [4, 3, 2, 1])
    model = build_model(tiny_model_config(), len(src_vocab), len(tgt_vocab))
    save_model(tmp_path / "m.pt", model, {"name": "t", "pair": "en-fr", "model": tiny_model_config()}, src_vocab, tgt_vocab, {"src": None, "tgt": None})
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": "latin-1"}
    run = subprocess.run(
        [sys.executable, "-m", "rnnmt.cli", "translate", "--model", str(tmp_path / "m.pt"), "--beam", "2", "--device", "cpu"],
        input=b"a b c\nc b\n",
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr.decode()
    lines = run.stdout.decode("utf-8").splitlines()
    assert len(lines) == 2 and all(line and set(line) <= set("€œ≠—<unk> ") for line in lines), lines


@pytest.fixture
def decoded_with(monkeypatch) -> list:
    """The DecodeSettings `rnnmt translate` resolved, with the translation itself left out."""
    seen = []
    monkeypatch.setattr("rnnmt.decode.translate.translate_file", lambda models, settings, **_: seen.append(settings))
    return seen


def test_decode_file_values_are_overridden_by_the_flags_given(tmp_path: Path, decoded_with: list):
    from rnnmt.decode.settings import DecodeSettings

    decode = tmp_path / "decode.json"
    decode.write_text('{"beam": 3, "shrink": false, "max_ratio": 1.5, "stack": 100}')
    assert main(["translate", "--model", "m.pt", "--decode", str(decode), "--beam", "5", "--ensemble-average", "log_probs"]) == 0
    assert decoded_with[-1] == DecodeSettings(beam=5, shrink=False, max_ratio=1.5, stack=100, ensemble="log_probs")
    assert main(["translate", "--model", "m.pt", "--decode", str(decode)]) == 0
    assert decoded_with[-1] == DecodeSettings(beam=3, shrink=False, max_ratio=1.5, stack=100)
    assert main(["translate", "--model", "m.pt", "--normalize", "--constant-beam"]) == 0
    assert decoded_with[-1] == DecodeSettings(normalize=True, shrink=False)


def test_absent_decode_keys_take_the_dataclass_defaults(tmp_path: Path, decoded_with: list):
    from rnnmt.decode.settings import DecodeSettings

    decode = tmp_path / "decode.json"
    decode.write_text("{}")
    assert main(["translate", "--model", "m.pt", "--decode", str(decode)]) == 0
    assert main(["translate", "--model", "m.pt"]) == 0
    assert decoded_with == [DecodeSettings(), DecodeSettings()]
    assert DecodeSettings() == DecodeSettings(beam=10, normalize=False, shrink=True, min_ratio=0.5, max_ratio=3.0, stack=None, ensemble="logits")


@pytest.mark.parametrize(
    "text,message",
    [
        ('{"beam": 3, "beam_size": 5}', "has an unknown decoding setting 'beam_size'"),
        ('{"beam": "3"}', "decoding setting 'beam' must be an integer, got '3'"),
        ('{"normalize": 1}', "decoding setting 'normalize' must be true or false, got 1"),
        ('{"max_ratio": true}', "decoding setting 'max_ratio' must be a number, got True"),
        ('{"stack": 0}', "decoding setting stack must be at least 1 or null, got 0"),
        ("[3]", "must be a JSON object of decoding settings, not list"),
        ("{beam: 3", "cannot be read as JSON (JSONDecodeError)"),
    ],
)
def test_a_bad_decode_file_is_one_line_and_exit_2(tmp_path: Path, capsys, decoded_with: list, text: str, message: str):
    decode = tmp_path / "decode.json"
    decode.write_text(text)
    assert main(["translate", "--model", "m.pt", "--decode", str(decode)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rnnmt translate: error: ") and err.count("\n") == 1 and message in err, err
    assert decoded_with == []


def test_a_decode_file_reads_a_float_setting_from_an_integer():
    from rnnmt.decode.settings import DecodeSettings

    settings = DecodeSettings.from_dict({"max_ratio": 2, "stack": None})
    assert settings.max_ratio == 2.0 and isinstance(settings.max_ratio, float) and settings.stack is None


def test_provenance_records_the_config_packages_cpu_and_reproducible_mode(tmp_path: Path):
    """Every workflow run writes provenance.json; the CPU and the mode are what decide a result's last bits."""
    (tmp_path / "config.json").write_text(json.dumps({"scale": "demo", "seeds": [1]}))
    assert main(["provenance", "--config", str(tmp_path / "config.json"), "--output", str(tmp_path / "p.json")]) == 0
    written = json.loads((tmp_path / "p.json").read_text())
    assert written["config"] == {"scale": "demo", "seeds": [1]}
    environment = written["environment"]
    assert environment["distributions"]["torch"] and environment["distributions"]["sacrebleu"]
    assert environment["matches"] in (True, False) and environment["lock"].endswith("constraints.txt")
    assert set(written["hardware"]) >= {"machine", "cpu", "cpus", "python", "gpus"}
    assert written["reproducible"]["on"] in (True, False)


def _runner_imports(command) -> list[str]:
    """The modules a command's runner imports (the stage code each runner imports inside itself)."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(command.run))
    modules = {command.run.__module__}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
    return sorted(modules)


def test_a_command_without_torch_starts_none(tmp_path: Path):
    """Commands marked `torch=False` skip torch's start (2.6 s a job) and so its thread count and reproducible mode's
    pinned kernels: none of what they import may start it, nor may drawing learning curves from a metrics file."""
    import subprocess
    import sys

    from rnnmt.cli import COMMANDS

    light = [c for c in COMMANDS.values() if not c.torch]
    assert {"tokenize", "select-lm", "score", "table", "figure"} <= {c.name for c in light}
    for command in light:
        code = "import sys\n" + "".join(f"import {m}\n" for m in _runner_imports(command)) + "sys.exit('torch' in sys.modules)"
        assert subprocess.run([sys.executable, "-c", code]).returncode == 0, f"{command.name} imports torch"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "meta.json").write_text("{}")
    rows = [{"update": u, "train_nll_per_token": 2.0, "target_tokens": 10, "dev_ppl": 5.0} for u in (1, 2)]
    (tmp_path / "m" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = {"kind": "training", "title": "t", "banner": None, "heldout": "dev", "curves": [{"label": "a", "files": [str(tmp_path / "m" / "meta.json")]}]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    draw = (
        f"import sys\nfrom rnnmt.cli import main\nrc = main(['figure', '--spec', {str(tmp_path / 'spec.json')!r}, '--output', {str(tmp_path / 'f.png')!r}])\n"
    )
    result = subprocess.run([sys.executable, "-c", draw + "sys.exit(rc or 3 * ('torch' in sys.modules))"], capture_output=True, text=True)
    assert result.returncode == 0 and (tmp_path / "f.png").is_file(), result.stderr


def test_a_model_tokenizes_raw_text_as_its_training_text_was(tmp_path):
    """The tokenizer travels in the model file (config.training_settings): a Multi30k model lowercases and normalises
    raw input before Moses (translate --raw, the alignment figures' sentences); one written without it uses the defaults."""
    import torch

    from rnnmt.models.artifact import load_model, save_model
    from rnnmt.models.build import build_model
    from rnnmt.text.vocab import Vocab

    from conftest import tiny_model_config

    vocab = Vocab(["a", "b", "c"], [3, 2, 1])
    model = build_model(tiny_model_config(), len(vocab), len(vocab))
    multi30k = {"escape": True, "aggressive_dash_splits": False, "lowercase": True, "normalize_punctuation": True}
    for name, tokenizer, expected in (("lc", multi30k, "a dog &quot; runs . &quot;"), ("old", None, "A Dog « runs » .")):
        system = {"name": "t", "pair": "en-de", "model": tiny_model_config(), **({"tokenizer": tokenizer} if tokenizer else {})}
        save_model(tmp_path / f"{name}.pt", model, system, vocab, vocab, {"src": None, "tgt": None})
        assert load_model(tmp_path / f"{name}.pt", torch.device("cpu")).tokenize(["A Dog «runs»."]) == [expected]
