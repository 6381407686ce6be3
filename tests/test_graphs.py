"""train.graph: the update at static shapes (the GPU path) computes what the default update computes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rnnmt.errors import UserError
from rnnmt.models.source import pad
from rnnmt.text.binarize import ParallelData
from rnnmt.text.vocab import Vocab
from rnnmt.train.batching import BatchStream
from rnnmt.train.loop import Trainer

from conftest import tiny_luong_config, tiny_model_config, tiny_system
from test_training import HOST_READS

SYSTEMS = {
    "rnnsearch": {"model": tiny_model_config()},
    "rnnencdec": {"model": tiny_model_config(encoder="gru", attention="none"), "train": {"clip_norm": 0.05}},
    "rnnsearch-adadelta": {"model": tiny_model_config(), "train": {"optimizer": {"name": "adadelta"}, "clip_norm": 0.05}},
    "luong-global-feed": {"model": tiny_luong_config(), "train": {"loss": "sentence_mean"}},
    "luong-local-p-clipped": {
        "model": tiny_luong_config("local-p", "general", bias=True, state_clip=50.0),
        "train": {"loss": "token_mean", "optimizer": {"name": "sgd", "lr": 0.5}},
    },
    "luong-no-feed": {"model": tiny_luong_config("global", "dot", feed_input=False), "train": {"clip_norm": 0.05}},
    "luong-no-attention": {"model": tiny_luong_config("none", feed_input=False), "train": {"loss": "sentence_mean"}},
    "luong-global-concat-feed": {"model": tiny_luong_config("global", "concat"), "train": {"loss": "sentence_mean"}},
    "luong-global-location-feed": {"model": tiny_luong_config("global", "location"), "train": {"loss": "sentence_mean"}},
    "luong-local-m-dot-feed": {"model": tiny_luong_config("local-m", "dot", bias=True), "train": {"loss": "sentence_mean"}},
    "luong-local-p-concat-feed": {"model": tiny_luong_config("local-p", "concat", reverse_source=False), "train": {"loss": "sentence_mean"}},
    "luong-location-no-feed": {"model": tiny_luong_config("global", "location", feed_input=False), "train": {"loss": "sentence_mean"}},
}


def make_trainer(corpus: dict[str, Path], out_dir: Path, name: str, device: str = "cpu", **train) -> Trainer:
    system = tiny_system(**{**SYSTEMS[name].get("train", {}), **train})
    system["model"] = SYSTEMS[name]["model"]
    data = ParallelData.load(corpus["data"])
    src, tgt = Vocab.load(corpus["src_vocab"]), Vocab.load(corpus["tgt_vocab"])
    return Trainer(system, data, {"dev": data.subset(range(8))}, src, tgt, out_dir, torch.device(device), {"train": "x"})


def five_updates(trainer: Trainer) -> tuple[list[float], dict[str, torch.Tensor]]:
    losses = [float(trainer.step(u)[0]) for u in range(5)]
    return losses, {k: v.detach().cpu().clone() for k, v in trainer.model.state_dict().items()}


def test_padding_to_a_multiple_only_adds_padding():
    seqs = [torch.tensor([5, 6, 7]), torch.tensor([8])]
    ids, mask = pad(seqs, multiple=8)
    plain_ids, plain_mask = pad(seqs)
    assert ids.shape == (2, 8) and plain_ids.shape == (2, 4)
    assert torch.equal(ids[:, :4], plain_ids) and torch.equal(mask[:, :4], plain_mask)
    assert not mask[:, 4:].any() and (ids[:, 4:] == Vocab.PAD).all()


def test_a_padded_stream_has_the_same_pairs_in_wider_batches(tiny_corpus):
    data = ParallelData.load(tiny_corpus["data"])
    plain = BatchStream(data, batch_size=4, sort_k=2, max_len=6, seed=1)
    padded = BatchStream(data, batch_size=4, sort_k=2, max_len=6, seed=1, pad_to=8)
    for u in range(6):
        a, b = plain.batch(u), padded.batch(u)
        assert torch.equal(a.indices, b.indices) and b.target_tokens == a.target_tokens
        assert b.src.shape[1] % 8 == 0 and b.tgt.shape[1] % 8 == 0
        assert torch.equal(b.tgt[:, : a.tgt.shape[1]], a.tgt) and not b.tgt_mask[:, a.tgt.shape[1] :].any()


@pytest.mark.parametrize("name", SYSTEMS)
def test_five_static_updates_agree_with_the_default_ones(tiny_corpus, tmp_path, name):
    """The issue's check of the GPU path on a CPU: float32, five updates, every weight within 1e-5. The static
    update computes every padded position and masks it, sums over wider products and scales the loss by a
    reciprocal, so only rounding may differ."""
    losses_a, a = five_updates(make_trainer(tiny_corpus, tmp_path / "none", name, graph="none"))
    losses_b, b = five_updates(make_trainer(tiny_corpus, tmp_path / "static", name, graph="static"))
    assert losses_b == pytest.approx(losses_a, rel=1e-6)
    for key in a:
        assert torch.allclose(a[key], b[key], rtol=0, atol=1e-5), key
    initial = make_trainer(tiny_corpus, tmp_path / "fresh", name).model.state_dict()
    assert all(not torch.equal(a[key], initial[key]) for key in ("encoder.embed.weight", "decoder.embed.weight"))


def test_a_static_update_keeps_its_gradient_buffers_and_reads_nothing_back(tiny_corpus, tmp_path):
    """What a captured graph relies on: each gradient stays at one address, and nothing in an update waits
    for a device value (counted on a CPU: the ops that read one back)."""
    from torch.profiler import ProfilerActivity, profile

    trainer = make_trainer(tiny_corpus, tmp_path, "luong-global-feed", graph="static", sync="logging", optimizer={"name": "sgd", "lr": 0.5})
    addresses = [p.grad.data_ptr() for p in trainer.model.parameters()]
    batches = [trainer.stream.batch(u) for u in range(3)]  # made on the host before the update, as a data loader would
    trainer.stream.batch = lambda update: batches[update]
    trainer.step(0)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.step(1)
    assert not any(e.name in HOST_READS for e in prof.events())
    trainer.step(2)
    assert [p.grad.data_ptr() for p in trainer.model.parameters()] == addresses


@pytest.mark.parametrize("name, recurrence", [("rnnsearch", "fused"), ("rnnsearch-adadelta", "kernels")])
def test_a_static_run_resumes_to_the_same_weights(tiny_corpus, tmp_path, name, recurrence):
    """With `kernels`, the clipped Adadelta step (train/update.KernelStep) keeps its state in torch's optimiser,
    which the checkpoint saves and restores."""
    straight = make_trainer(tiny_corpus, tmp_path / "a", name, graph="static", updates=6, recurrence=recurrence)
    straight.run()
    make_trainer(tiny_corpus, tmp_path / "b", name, graph="static", updates=3, recurrence=recurrence).run()
    resumed = make_trainer(tiny_corpus, tmp_path / "b", name, graph="static", updates=6, recurrence=recurrence)
    assert resumed.choices["update"].value == ("kernels" if recurrence == "kernels" else "torch")
    resumed.run()
    for (key, p), q in zip(straight.model.named_parameters(), resumed.model.parameters()):
        assert torch.equal(p, q), key


@pytest.mark.parametrize(
    "train, expected",
    [
        ({"graph": "cuda"}, "train.graph is 'cuda', but training runs on cpu; expected a CUDA device"),
        ({"graph": "eager"}, "train.graph is 'eager'; expected one of auto, none, static, cuda."),
    ],
)
def test_a_graph_setting_that_cannot_run_here_is_a_clear_error(tiny_corpus, tmp_path, train, expected):
    with pytest.raises(UserError, match=expected.replace(".", r"\.")):
        make_trainer(tiny_corpus, tmp_path, "rnnsearch", **train)


@pytest.mark.cuda
@pytest.mark.parametrize("name", ["rnnsearch", "luong-global-feed"])
def test_captured_updates_replay_the_static_ones(tiny_corpus, tmp_path, name):
    """On a GPU: five updates replayed from captured graphs give the weights of five eager static ones."""
    losses_a, a = five_updates(make_trainer(tiny_corpus, tmp_path / "static", name, device="cuda", graph="static"))
    losses_b, b = five_updates(make_trainer(tiny_corpus, tmp_path / "cuda", name, device="cuda", graph="cuda"))
    assert losses_b == pytest.approx(losses_a, rel=1e-6)
    for key in a:
        assert torch.allclose(a[key], b[key], rtol=0, atol=1e-5), key
