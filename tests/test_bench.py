"""`rnnmt bench train --paper-shape`: random batches at a system's paper sizes, and what it reports."""

from __future__ import annotations

import json
import math
import re
import shlex
from pathlib import Path

import pytest
import torch
import yaml

from rnnmt.bench import kernel_count, paper
from rnnmt.bench.paper_shape import _paper_shape, synthetic_data
from rnnmt.cli import main
from rnnmt.errors import UserError
from rnnmt.train.setup import Setup

ROOT = Path(__file__).resolve().parents[1]
LENGTHS = {"src_median": 22, "tgt_median": 24, "sigma": 0.55, "correlation": 0.92}


def test_synthetic_lengths_follow_the_configured_distribution():
    data = synthetic_data(LENGTHS, 20000, 100, 120, 50, seed=1)
    src, tgt = data.src_lengths.double(), data.tgt_lengths.double()
    assert int(src.min()) >= 1 and int(max(src.max(), tgt.max())) <= 50
    assert abs(float(src.median()) - 22) <= 1 and abs(float(tgt.median()) - 24) <= 1
    assert abs(float(torch.corrcoef(torch.stack([src.log(), tgt.log()]))[0, 1]) - 0.92) < 0.03
    assert int(data.src_ids.min()) >= 4 and int(data.src_ids.max()) < 100 and int(data.tgt_ids.max()) < 120
    assert torch.equal(synthetic_data(LENGTHS, 50, 100, 120, 50, seed=1).tgt_ids, synthetic_data(LENGTHS, 50, 100, 120, 50, seed=1).tgt_ids)


@pytest.fixture
def tiny_paper_config(tmp_path: Path) -> Path:
    """config.yaml with the paper scale shrunk to a CPU test's size (the budgets stay the paper's)."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["scales"]["paper"]["vocab"].update(size=50, pair_sizes={"en-de": 60, "de-en": 60})
    config["recipes"]["bahdanau2014"]["model"].update(emb=8, hidden=12, align_hidden=10, maxout=6, output_rank=7)
    config["recipes"]["luong2015"]["model"].update(layers=2, emb=8, hidden=12)
    for recipe in ("bahdanau2014", "luong2015"):
        config["recipes"][recipe]["train"]["batch_size"] = 4
    config["bench"]["synthetic_pairs"] = 200
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("system,budget", [("rnnsearch-50", 288000), ("luong-global-general-feed", 12 * math.ceil(4_500_000 / 4))])
def test_paper_shape_bench_reports_speed_budget_and_kernels(tiny_paper_config, tmp_path, system, budget):
    out = tmp_path / "bench.json"
    code = main(
        [
            "bench",
            "train",
            "--paper-shape",
            system,
            "--config",
            str(tiny_paper_config),
            "--steps",
            "2",
            "--device",
            "cpu",
            "--precision",
            "bfloat16",
            "--output",
            str(out),
        ]
    )
    result = json.loads(out.read_text())
    assert code in (0, None)
    assert result["system"] == system and result["data"] == "random, paper sizes" and result["batch_size"] == 4
    assert result["precision"] == "bfloat16" and result["recurrence"] == "fused" and result["graph"] == "none"
    assert result["paper_budget_updates"] == budget
    assert result["projected_hours"] == pytest.approx(budget / result["updates_per_s"] / 3600)
    assert 0 < result["batch_fill"] <= 1 and result["target_tokens_per_update"] > 0
    assert result["kernels_per_update"] > 0 and result["kernels_in_graph"] == 0 and result["graphs_captured"] == 0
    assert result["first_pass_seconds"] > 0 and result["capture_seconds"] >= 0


def test_paper_shape_bench_counts_the_kernels_a_graph_would_capture(tiny_paper_config, tmp_path):
    """train.graph static: the forward and backward that `cuda` captures hold most of an update's kernels."""
    out = tmp_path / "bench.json"
    main(
        [
            "bench",
            "train",
            "--paper-shape",
            "rnnsearch-50",
            "--config",
            str(tiny_paper_config),
            "--steps",
            "1",
            "--device",
            "cpu",
            "--graph",
            "static",
            "--sync",
            "logging",
            "--output",
            str(out),
        ]
    )
    result = json.loads(out.read_text())
    assert result["graph"] == "static" and result["graphs_captured"] == 0
    assert 0.9 * result["kernels_per_update"] < result["kernels_in_graph"] < result["kernels_per_update"]
    assert all(width % 8 == 0 for width in result["kernels_counted_at_width"])


def test_projected_hours_add_the_capture_cost_of_every_possible_shape(tiny_paper_config, tmp_path, monkeypatch):
    """With graph cuda the window's first pass captures; its extra time per shape, times the shapes a run can
    meet, joins the steady rate's hours (a stand-in reports three captures: no GPU here)."""
    monkeypatch.setattr(Setup, "captured_shapes", lambda self: 3)
    out = tmp_path / "bench.json"
    main(
        [
            "bench",
            "train",
            "--paper-shape",
            "rnnsearch-50",
            "--config",
            str(tiny_paper_config),
            "--steps",
            "2",
            "--device",
            "cpu",
            "--graph",
            "static",
            "--output",
            str(out),
        ]
    )
    r = json.loads(out.read_text())
    assert r["graphs_captured"] == 3 and r["shapes_possible"] == 7 * 7  # widths 8..56 for max_len 50 + EOS
    assert r["capture_seconds"] == pytest.approx(max(0.0, r["first_pass_seconds"] - r["seconds"]))
    steady = r["paper_budget_updates"] / r["updates_per_s"]
    assert r["projected_hours"] == pytest.approx((steady + r["capture_seconds"] / 3 * 49) / 3600)


def outermost_kernels(work) -> int:
    """kernel_count.kernels summed over the outermost operator calls of `work()`."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        work()
    events = [e for e in prof.events() if e.name.startswith("aten::")]
    return sum(kernel_count.kernels(e) for e in events if not any(a in events for a in kernel_count._ancestors(e)))


@pytest.mark.parametrize(
    "work,expected",
    [
        (lambda x, b: torch.mm(x, x.t()), 1),  # a product counts once, whatever the CPU calls inside it
        (lambda x, b: torch.mm(x.to(torch.bfloat16), b), 2),  # a cast and a product
        (lambda x, b: x.to(torch.float32), 0),  # already float32: nothing runs
        (lambda x, b: x.view(-1).t().unsqueeze(0), 0),  # views
        (lambda x, b: x.amax(dim=1), 1),  # a reduction (a CPU also fills its accumulator)
        (lambda x, b: torch.zeros(3), 1),  # an allocation and a fill
        (lambda x, b: torch._foreach_mul_([x, x.clone()], 2.0), 2),  # the clone's copy, one multi-tensor op
        (lambda x, b: x.sigmoid().mul_(x), 2),
        (lambda x, b: torch.nn.functional.dropout(x, 0.0, training=True), 0),  # rate 0: the input itself
    ],
)
def test_kernels_count_what_a_gpu_would_launch(work, expected):
    x, b = torch.randn(4, 4), torch.randn(4, 4, dtype=torch.bfloat16)
    assert outermost_kernels(lambda: work(x, b)) == expected


def test_the_softmax_is_counted_as_one_block_as_on_a_gpu(tiny_paper_config, tmp_path, monkeypatch):
    """A CPU takes the output layer's softmax in cache-sized blocks; the count does not depend on their size."""
    from rnnmt.train import nll
    from rnnmt.train.loop import Trainer

    shape = _paper_shape(tiny_paper_config, "rnnsearch-50")
    system = {**shape["system"], "train": {**shape["system"]["train"], "graph": "static"}}
    counts = []
    for floats in (2**18, 64):
        monkeypatch.setattr(nll, "CACHE_FLOATS", floats)
        trainer = Trainer(system, shape["data"], {}, shape["vocab"], shape["vocab"], tmp_path, torch.device("cpu"), {})
        trainer.step(0)
        counts.append(kernel_count.kernels_per_update(trainer, 1)["kernels"])
    assert counts[0] == counts[1] > 0


def test_paper_shape_names_an_unknown_system(tiny_paper_config, capsys):
    code = main(["bench", "train", "--paper-shape", "rnnsearch-99", "--config", str(tiny_paper_config), "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 2 and "rnnsearch-99" in err and "rnnsearch-50" in err and len(err.strip().splitlines()) == 1


def test_translate_bench_decodes_with_the_decode_file_and_the_flags(tmp_path):
    from rnnmt.models.artifact import save_model
    from rnnmt.models.build import build_model
    from rnnmt.text.vocab import Vocab

    from conftest import tiny_model_config

    torch.manual_seed(0)
    vocab = Vocab(["a", "b", "c"], [3, 2, 1])
    save_model(
        tmp_path / "m.pt",
        build_model(tiny_model_config(), len(vocab), len(vocab)),
        {"name": "t", "pair": "en-fr", "model": tiny_model_config()},
        vocab,
        vocab,
        {"src": None, "tgt": None},
    )
    (tmp_path / "in.txt").write_text("a b c\nc b\nb\n")
    (tmp_path / "decode.json").write_text('{"beam": 3, "shrink": false, "max_ratio": 1.5}')
    out = tmp_path / "bench.json"
    code = main(
        [
            "bench",
            "translate",
            "--model",
            str(tmp_path / "m.pt"),
            "--input",
            str(tmp_path / "in.txt"),
            "--steps",
            "1",
            "--batch-size",
            "2",
            "--decode",
            str(tmp_path / "decode.json"),
            "--beam",
            "2",
            "--device",
            "cpu",
            "--output",
            str(out),
        ]
    )
    result = json.loads(out.read_text())
    assert code == 0 and result["sentences"] == 2
    assert result["beam"] == {"beam": 2, "normalize": False, "shrink": False, "min_ratio": 0.5, "max_ratio": 1.5, "stack": None, "ensemble": "logits"}


def test_translate_bench_names_the_options_it_lacks(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "translate", "--device", "cpu"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.endswith("\nrnnmt bench translate: error: the following arguments are required: --model, --input\n")


def test_train_bench_names_the_files_it_lacks_without_a_paper_shape(capsys):
    assert main(["bench", "train", "--system", "s.json", "--device", "cpu"]) == 2
    assert capsys.readouterr().err == "rnnmt bench: error: rnnmt bench train needs --data, --src-vocab, --tgt-vocab (or --paper-shape).\n"


# Every option of each mode besides --threads (all) and --device, --gpu-lock-dir and --output (all but corpus).
MODE_OPTIONS = {
    "train": "--paper-shape --config --system --data --src-vocab --tgt-vocab --steps --precision --recurrence --sync --deterministic --graph --settings-for",
    "paper": "--config --scale --only --concurrent --seconds --steps --precision --recurrence --sync --deterministic --graph",
    "precision": "--paper-shape --config --system --data --src-vocab --tgt-vocab --valid --steps --valid-every --settle --out-dir "
    "--recurrence --sync --deterministic --graph",
    "batches": "--paper-shape --config --data --pairs --steps",
    "corpus": "--paper-shape --config --out-dir --pairs --dev-pairs --updates",
    "translate": "--model --input --steps --batch-size --decode --beam --normalize --constant-beam --min-ratio --max-ratio --stack",
    "select": "--src --tgt --indomain-src --indomain-tgt --order --chunk-lines",
}


def help_of(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_bench_help_lists_each_mode_on_a_line_and_no_options(capsys):
    """`rnnmt bench --help`: the modes, one line each; their options are under `rnnmt bench MODE --help`."""
    out = help_of(["bench"], capsys)
    assert re.findall(r"^    (\w+)", out, re.MULTILINE) == list(MODE_OPTIONS)
    assert re.findall(r"^  (--[a-z-]+)", out, re.MULTILINE) == []


@pytest.mark.parametrize("mode", MODE_OPTIONS)
def test_each_modes_help_lists_its_own_options_and_no_other_modes(mode, capsys):
    """The modes once shared one list of 45 options, most of them meaningless to any one mode."""
    listed = re.findall(r"^  (--[a-z-]+)", help_of(["bench", mode], capsys), re.MULTILINE)
    run = ["--device", "--gpu-lock-dir", "--output"] if mode != "corpus" else []
    assert sorted(listed) == sorted([*MODE_OPTIONS[mode].split(), *run, "--threads"])


@pytest.mark.parametrize(
    "argv, refused",
    [
        ("select --src p.en --tgt p.fr --indomain-src n.en --indomain-tgt n.fr --steps 5", "--steps 5"),
        ("corpus --paper-shape rnnsearch-50 --out-dir c --device cpu", "--device cpu"),  # it writes files, measures nothing
        ("precision --system s --data t --valid d --src-vocab v --tgt-vocab v --out-dir o --precision bfloat16", "--precision bfloat16"),  # it trains in both
    ],
)
def test_an_option_of_another_mode_is_refused_under_the_modes_usage(argv, refused, capsys):
    mode = argv.split()[0]
    with pytest.raises(SystemExit) as exit_:
        main(["bench", *argv.split()])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith(f"usage: rnnmt bench {mode} ")
    assert err.endswith(f"\nrnnmt bench {mode}: error: unrecognized arguments: {refused}\n")


def documented_bench_commands() -> list[list[str]]:
    """The `rnnmt bench` commands of README.md and docs/: each code-block line, and each inline one with options and
    nothing elided ("...") or left to fill in (MODE)."""
    found = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text().replace("\\\n", " ")
        found += re.findall(r"^\s*(rnnmt bench [^`\n]*)$", text, re.MULTILINE)
        found += [span for span in re.findall(r"`(rnnmt bench [^`]*)`", text) if "--" in span and "..." not in span and "MODE" not in span]
    return [shlex.split(command, comments=True)[1:] for command in found]


def test_the_documented_bench_commands_parse():
    """What the README and docs tell a reader to run still parses, each as the mode it names (scripts/gpu_check.py's
    commands are parsed by its dry run, tests/test_gpu_check.py)."""
    from rnnmt.cli import build_parser

    commands = documented_bench_commands()
    assert {argv[1] for argv in commands} >= {"train", "paper", "precision", "translate", "select"}
    for argv in commands:
        try:
            assert build_parser().parse_args(argv).mode == argv[1]
        except SystemExit:
            pytest.fail(f"rnnmt {shlex.join(argv)} does not parse")


def test_settings_for_cuda_count_a_gpus_update_on_a_cpu(tiny_paper_config, tmp_path, monkeypatch):
    """--settings-for cuda: the auto settings a CUDA device would take (bfloat16, kernels, sync logging), the
    capture run uncaptured (graph static), explicit flags still winning."""
    from rnnmt.train import device_choices

    monkeypatch.setattr(device_choices.importlib.util, "find_spec", lambda name: object())
    out = tmp_path / "bench.json"
    main(
        [
            "bench",
            "train",
            "--paper-shape",
            "rnnsearch-50",
            "--config",
            str(tiny_paper_config),
            "--steps",
            "1",
            "--device",
            "cpu",
            "--settings-for",
            "cuda",
            "--output",
            str(out),
        ]
    )
    r = json.loads(out.read_text())
    assert (r["precision"], r["recurrence"], r["sync"], r["graph"]) == ("bfloat16", "kernels", "logging", "static")
    main(
        [
            "bench",
            "train",
            "--paper-shape",
            "rnnsearch-50",
            "--config",
            str(tiny_paper_config),
            "--steps",
            "1",
            "--device",
            "cpu",
            "--settings-for",
            "cuda",
            "--precision",
            "float32",
            "--output",
            str(out),
        ]
    )
    assert json.loads(out.read_text())["precision"] == "float32"


def test_bench_paper_on_a_cpu_counts_the_kernels_of_each_systems_gpu_update(tiny_paper_config, tmp_path, capsys):
    """`rnnmt bench paper` without a GPU: every system asked for, its update as a GPU would run it (bfloat16,
    the kernel loops, the static update), its kernels counted, no rates; a table and the JSON."""
    out = tmp_path / "paper.json"
    main(
        [
            "bench",
            "paper",
            "--config",
            str(tiny_paper_config),
            "--only",
            "rnnsearch-50",
            "luong-localp-general-feed",
            "--steps",
            "1",
            "--device",
            "cpu",
            "--output",
            str(out),
        ]
    )
    result = json.loads(out.read_text())
    assert [row["system"] for row in result["systems"]] == ["rnnsearch-50", "luong-localp-general-feed"] and not result["timed"]
    for row in result["systems"]:
        assert row["kernels_per_update"] > 0 and row["target_tokens_per_s"] is None and row["projected_hours"] is None
        assert (row["precision"], row["graph"], row["recurrence"]) == ("bfloat16", "static", "kernels")
    table = capsys.readouterr().out
    assert "| luong-localp-general-feed | 13,500,000 |" in table and "no rates on this device" in table


def test_bench_paper_names_an_unknown_scale(tiny_paper_config):
    with pytest.raises(UserError, match=r"--scale huge: .* has no such scale \(known: demo, multi30k, paper, sample\)\."):
        paper.bench_paper(torch.device("cpu"), config=tiny_paper_config, scale="huge", steps=1, overrides={})


@pytest.mark.parametrize("hours, expected", [([20.0, 10.0, 10.0, 4.0], (2, 24.0)), ([5.0, 5.0], (1, 10.0)), ([30.0, 1.0], (None, 30.0)), ([], (0, 0.0))])
def test_gpus_for_one_day_packs_the_longest_jobs_first(hours, expected):
    assert paper.gpus_for(hours, 24.0) == expected


def test_bench_paper_keeps_the_rows_it_measured_when_a_system_fails(tiny_paper_config, tmp_path, monkeypatch):
    """A run stopped part-way (a crash, a time limit) leaves the rows so far, marked incomplete."""
    measured = paper.bench_train

    def second_fails(device, **kwargs):
        if kwargs["paper_shape"] == "luong-base":
            raise RuntimeError("CUDA error: out of memory")
        return measured(device, **kwargs)

    monkeypatch.setattr(paper, "bench_train", second_fails)
    out = tmp_path / "paper.json"
    with pytest.raises(RuntimeError, match="out of memory"):
        paper.bench_paper(torch.device("cpu"), config=tiny_paper_config, scale="paper", steps=1, overrides={}, systems=["rnnsearch-30", "luong-base"], keep=out)
    kept = json.loads(out.read_text())
    assert kept["complete"] is False and [row["system"] for row in kept["systems"]] == ["rnnsearch-30"]


def test_batches_bench_times_the_hosts_work_on_a_corpus_of_the_papers_lengths(tiny_paper_config, tmp_path, capsys):
    """`rnnmt bench batches`: the time to make each paper batch, from a random corpus or a written one, and the memory."""
    assert main(["bench", "batches", "--paper-shape", "rnnsearch-50", "--config", str(tiny_paper_config), "--pairs", "5000", "--steps", "30"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["pairs"] == 5000 and made["batches"] == 30 and made["corpus"] == "random, made here"
    assert 0 < made["batch_ms_median"] <= made["batch_ms_max"] and made["corpus_mb"] > 0
    assert (
        main(
            [
                "bench",
                "corpus",
                "--paper-shape",
                "rnnsearch-50",
                "--config",
                str(tiny_paper_config),
                "--pairs",
                "3000",
                "--dev-pairs",
                "50",
                "--updates",
                "7",
                "--out-dir",
                str(tmp_path / "corpus"),
            ]
        )
        == 0
    )
    written = json.loads(capsys.readouterr().out)
    assert written == {"system": "rnnsearch-50", "pairs": 3000, "dev_pairs": 50, "vocab": 54, "out_dir": str(tmp_path / "corpus"), "updates": 7}
    system = json.loads((tmp_path / "corpus" / "system.json").read_text())
    assert system["train"]["updates"] == 7 and system["train"]["valid_every"] == 5000 and system["train"]["checkpoint_every"] == 1000  # the paper's
    argv = [
        "bench",
        "batches",
        "--paper-shape",
        "rnnsearch-50",
        "--config",
        str(tiny_paper_config),
        "--data",
        str(tmp_path / "corpus" / "train.pt"),
        "--steps",
        "10",
    ]
    assert main(argv) == 0
    read = json.loads(capsys.readouterr().out)
    assert read["pairs"] == 3000 and read["corpus"] == str(tmp_path / "corpus" / "train.pt")


def test_the_written_corpus_trains_with_rnnmt_train(tiny_paper_config, tmp_path):
    corpus, run = tmp_path / "corpus", tmp_path / "run"
    main(
        [
            "bench",
            "corpus",
            "--paper-shape",
            "rnnsearch-50",
            "--config",
            str(tiny_paper_config),
            "--pairs",
            "400",
            "--dev-pairs",
            "20",
            "--updates",
            "3",
            "--out-dir",
            str(corpus),
        ]
    )
    argv = ["train", "--system", str(corpus / "system.json"), "--train", str(corpus / "train.pt"), "--valid", f"dev={corpus / 'dev.pt'}"]
    assert (
        main([*argv, "--src-vocab", str(corpus / "vocab.src.json"), "--tgt-vocab", str(corpus / "vocab.tgt.json"), "--out-dir", str(run), "--device", "cpu"])
        == 0
    )
    assert json.loads((run / "meta.json").read_text())["updates"] == 3 and len((run / "metrics.jsonl").read_text().splitlines()) == 3


def test_concurrent_processes_train_together_and_each_reports_its_rate(tiny_paper_config, capsys):
    """`rnnmt bench paper --concurrent 2`: two training processes of two systems on one device, timed over the same
    window; the aggregate is the sum of their rates."""
    argv = ["bench", "paper", "--concurrent", "2", "--only", "rnnsearch-50", "luong-global-general-feed", "--config", str(tiny_paper_config)]
    assert main([*argv, "--device", "cpu", "--seconds", "1", "--steps", "2"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["processes"] == 2 and [row["system"] for row in result["systems"]] == ["luong-global-general-feed", "rnnsearch-50"]
    assert all(row["updates"] >= 1 and row["seconds"] >= 1 for row in result["systems"])
    assert result["aggregate_target_tokens_per_s"] == pytest.approx(sum(row["target_tokens_per_s"] for row in result["systems"]))
    assert result["mps"] is False


def test_concurrent_needs_the_systems_to_run(tiny_paper_config, capsys):
    assert main(["bench", "paper", "--concurrent", "2", "--config", str(tiny_paper_config), "--device", "cpu"]) == 2
    assert "rnnmt bench paper --concurrent needs --only SYSTEM [SYSTEM ...]" in capsys.readouterr().err


def test_precision_bench_trains_both_precisions_and_writes_both_dev_curves(tiny_corpus, tmp_path, capsys):
    """`rnnmt bench precision`: the same system, data and seed in float32 and in bfloat16; the dev NLL per target token
    of each validation in a table and a figure, and the largest relative gap after the settling updates."""
    from conftest import tiny_system

    (tmp_path / "system.json").write_text(json.dumps(tiny_system(updates=999)))
    data = ["--data", str(tiny_corpus["data"]), "--valid", str(tiny_corpus["data"]), "--src-vocab", str(tiny_corpus["src_vocab"])]
    argv = ["bench", "precision", "--system", str(tmp_path / "system.json"), *data, "--tgt-vocab", str(tiny_corpus["tgt_vocab"])]
    out = tmp_path / "precision"
    assert main([*argv, "--steps", "6", "--valid-every", "2", "--settle", "2", "--out-dir", str(out), "--device", "cpu"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [row["update"] for row in result["curves"]] == [2, 4, 6]
    for row in result["curves"]:
        assert row["float32"] > 0 and row["bfloat16"] > 0 and row["gap"] == pytest.approx(abs(row["bfloat16"] - row["float32"]) / row["float32"])
    assert result["largest_gap_after_settle"] == max(row["gap"] for row in result["curves"][1:]) and result["at_update"] in (4, 6)
    assert (out / "precision.png").stat().st_size > 0 and (out / "precision.csv").read_text().startswith("update,float32,bfloat16,gap")
    assert all((out / p / "metrics.jsonl").exists() for p in ("float32", "bfloat16"))  # each run's own record
