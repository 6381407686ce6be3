"""The fused recurrent loops and the fused output NLL compute what autograd through the plain step
functions computes: values and gradients in float64, and five training updates in float32."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch.autograd import gradcheck

from rnnmt.models import padding
from rnnmt.models.build import build_model
from rnnmt.models.source import SourceFormat
from rnnmt.recurrence import forms, shared
from rnnmt.recurrence.fused import AttentiveGRULoop, GRUScan, LayerNormGRUScan, LuongFeedLoop
from rnnmt.runtime import cpu_has_bfloat16
from rnnmt.text.binarize import ParallelData
from rnnmt.text.vocab import Vocab
from rnnmt.train import nll
from rnnmt.train.loop import Trainer
from rnnmt.train.nll import OutputNLL, Workspace, output_nll

from conftest import tiny_luong_config, tiny_model_config, tiny_system

F64 = torch.float64


def rand(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=F64, requires_grad=True)


@pytest.mark.parametrize("reverse", [False, True])
def test_gru_scan_gradients(reverse):
    torch.manual_seed(0)
    B, T, H = 3, 5, 4
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    inputs = (rand(B, T, 3 * H), rand(B, H), rand(2 * H, H), rand(H, H), rand(H))
    assert gradcheck(lambda x, h0, ug, uc, b: GRUScan.apply(x, h0, mask, reverse, ug, uc, b), inputs)


@pytest.mark.parametrize("reverse", [False, True])
def test_layer_norm_gru_scan_gradients(reverse):
    """nmtpy's layer-normalised GRU: the recurrent matrices and LN₃'s and LN₄'s gains and biases all carry gradient."""
    torch.manual_seed(0)
    B, T, H = 3, 5, 4
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    inputs = (rand(B, T, 3 * H), rand(B, H), rand(2 * H, H), rand(H, H), rand(2 * H), rand(2 * H), rand(H), rand(H))
    assert gradcheck(lambda x, h0, *weights: LayerNormGRUScan.apply(x, h0, mask, reverse, *weights), inputs)


def test_attentive_gru_loop_gradients():
    """Queries, contexts and weights all carry gradient; padded source positions get none."""
    torch.manual_seed(0)
    B, T, H, S, A, C = 3, 4, 4, 4, 5, 6
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=torch.bool)
    inputs = (rand(B, H), rand(B, T, 3 * H), rand(B, S, A), rand(B, S, C), rand(A, H), rand(1, A), rand(3 * H, C), rand(2 * H, H), rand(H, H), rand(H))

    def loop(s0, x, keys, ann, *weights):
        return AttentiveGRULoop.apply(s0, x, keys, ann, mask, *weights)

    assert gradcheck(loop, inputs)


def test_luong_feed_loop_gradients_with_dropout_and_clipping():
    """The hand-written backward, dropout masks and a binding cell clip included, matches finite differences."""
    torch.manual_seed(0)
    model = build_model(tiny_luong_config(layers=2, dropout=0.3, state_clip=0.2, init_range=0.8), 20, 22, forms.loops("fused")).double().train()
    dec = model.decoder
    src, mask = SourceFormat.of(tiny_luong_config()).batch([torch.tensor([5, 6, 7, 8]), torch.tensor([9, 10])])
    enc = model.encode(src, mask)
    captured = {}
    original = LuongFeedLoop.apply

    def capture(loop, *flat):
        captured["loop"], captured["flat"] = loop, flat
        captured["out"] = original(loop, *flat)
        return captured["out"]

    LuongFeedLoop.apply = capture
    try:
        dec.features(enc, torch.tensor([[9, 10, 11, 2], [13, 14, 2, 0]]))
    finally:
        LuongFeedLoop.apply = original
    setup, tensors = captured["loop"], captured["flat"]
    assert setup.feed_mask is not None and setup.layer_masks is not None
    assert (setup.feed_mask == 0).any() and (setup.feed_mask > 1).any()
    cells = shared.saved(captured["out"][0].grad_fn).buffers.c_raw  # before clipping
    assert (cells.abs() > 0.2).any()
    assert len(setup.tensors(tensors).W_ih) == 2
    leaves = [t.detach().clone().requires_grad_() if t is not None else None for t in tensors]

    def loop(*flat):
        it = iter(flat)
        return LuongFeedLoop.apply(setup, *[next(it) if t is not None else None for t in leaves])

    assert gradcheck(loop, [t for t in leaves if t is not None], atol=1e-6)


@pytest.mark.parametrize("block_rows, row_bytes, stage", [(None, None, False), (2, None, False), (None, 32, False), (None, None, True), (2, 32, True)])
@pytest.mark.parametrize("bias", [True, False])
def test_output_nll_is_cross_entropy_with_its_gradient(bias, block_rows, row_bytes, stage, monkeypatch):
    """Whole, and in blocks of 2 rows (the last one short), as the forward pass takes them on a CPU; with rows that
    start every 12 values (a GPU's 16-byte rows); through the softmax stage (the `kernels` path)."""
    workspace = Workspace()
    workspace.kernels = stage
    if row_bytes:
        monkeypatch.setitem(padding.ROW_BYTES, "cpu", row_bytes)
    if block_rows:
        monkeypatch.setattr(nll, "CACHE_FLOATS", 11 * block_rows)
    torch.manual_seed(0)
    h, weight = rand(7, 5), rand(11, 5)
    b = rand(11) if bias else None
    target = torch.randint(0, 11, (7,))
    logits = h @ weight.t() + (b if bias else 0)
    reference = torch.nn.functional.cross_entropy(logits, target, reduction="none")
    got = OutputNLL.apply(h, weight, b, target, workspace)
    assert torch.allclose(got, reference, atol=1e-12)
    assert workspace.buffer.numel() == 7 * (12 if row_bytes else 11)
    upstream = torch.rand(7, dtype=F64)
    params = [h, weight, *([b] if bias else [])]
    expected = torch.autograd.grad(reference, params, upstream)
    for e, g in zip(expected, torch.autograd.grad(got, params, upstream)):
        assert torch.allclose(e, g, atol=1e-12)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("autocast", [False, True])
def test_a_padded_product_is_the_product(bias, autocast, monkeypatch):
    """aligned_linear with 16-byte rows (as on a GPU): 7 inputs and 5 outputs padded to 8 and 6 float64 values or
    8 and 8 bfloat16 ones (float32 under autocast); the same values and gradients as nn.functional.linear, the
    output unpadded."""
    monkeypatch.setitem(padding.ROW_BYTES, "cpu", 16)
    assert padding.padded(7, F64, torch.device("cpu")) == 8 and padding.padded(5, torch.bfloat16, torch.device("cpu")) == 8
    torch.manual_seed(0)
    dtype = torch.float32 if autocast else F64
    x, weight = rand(3, 4, 7).to(dtype).requires_grad_(), rand(5, 7).to(dtype).requires_grad_()
    b = rand(5).to(dtype).requires_grad_() if bias else None
    params = [x, weight, *([b] if bias else [])]
    upstream = torch.rand(3, 4, 5, dtype=dtype)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        got, expected = padding.aligned_linear(x, weight, b), torch.nn.functional.linear(x, weight, b)
    assert got.shape == expected.shape == (3, 4, 5) and got.dtype == expected.dtype
    assert torch.equal(got, expected) if autocast else torch.allclose(got, expected, atol=1e-12)
    for e, g in zip(torch.autograd.grad(expected, params, upstream), torch.autograd.grad(got, params, upstream)):
        assert e.dtype == g.dtype and torch.allclose(e, g, atol=1e-2 if autocast else 1e-12)


def test_a_reused_output_workspace_is_an_error_not_a_wrong_gradient():
    torch.manual_seed(0)
    h, weight, workspace = rand(3, 4), rand(6, 4), Workspace()
    first = OutputNLL.apply(h, weight, None, torch.tensor([0, 1, 2]), workspace)
    OutputNLL.apply(h, weight, None, torch.tensor([3, 4, 5]), workspace).sum().backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        first.sum().backward()


def test_output_nll_skips_padding():
    torch.manual_seed(0)
    layer = torch.nn.Linear(5, 9).double()
    hidden = torch.randn(2, 4, 5, dtype=F64)
    tgt = torch.tensor([[3, 4, 2, 0], [5, 2, 0, 0]])
    mask = tgt != 0
    full = torch.nn.functional.cross_entropy(layer(hidden).flatten(0, 1), tgt.flatten(), reduction="none").view(2, 4)
    rows = mask.flatten().nonzero().squeeze(1)
    assert torch.allclose(output_nll(hidden, layer, tgt, rows, Workspace()), (full * mask).sum(1), atol=1e-12)


def both_paths(cfg: dict, src, src_mask, tgt) -> dict[str, tuple]:
    """Logits, weights and parameter gradients of a loss that reads both, on the fused and the plain path (the same
    float64 model of `cfg`, built with each)."""
    out, weights = {}, None
    for kind in ("fused", "plain"):
        torch.manual_seed(0)
        model = build_model(cfg, 20, 22, forms.loops(kind)).double()
        if weights is not None:
            model.load_state_dict(weights)
        weights = model.state_dict()
        logits, alpha = model(src, src_mask, tgt)
        (logits.logsumexp(-1).sum() + (alpha**2).sum()).backward()
        out[kind] = (logits.detach(), alpha.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    return out


def assert_paths_agree(out: dict[str, tuple], atol: float) -> None:
    (fl, fa, fg), (pl, pa, pg) = out["fused"], out["plain"]
    assert torch.allclose(fl, pl, atol=atol) and torch.allclose(fa, pa, atol=atol)
    assert fg.keys() == pg.keys()
    for name in pg:
        assert torch.allclose(fg[name], pg[name], atol=atol), name


@pytest.mark.parametrize("encoder,attention,norm", list(itertools.product(["bigru", "gru"], ["additive", "none"], ["none", "layer"])))
def test_bahdanau_fused_path_equals_the_plain_path(encoder, attention, norm):
    torch.manual_seed(0)
    src = torch.randint(4, 20, (3, 6))
    src_mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 2 + [0] * 4], dtype=torch.bool)
    cfg = {**tiny_model_config(encoder=encoder, attention=attention), "encoder_norm": norm}
    assert_paths_agree(both_paths(cfg, src, src_mask, torch.randint(4, 22, (3, 5))), 1e-12)


@pytest.mark.parametrize("encoder,attention", [("bigru", "additive"), ("gru", "none")])
def test_bahdanau_fused_path_with_dropout_equals_the_plain_path(encoder, attention):
    """Readout, embedding and context dropout lie outside the recurrent loops: both paths draw the same masks and
    compute the same training pass."""
    torch.manual_seed(0)
    src = torch.randint(4, 20, (3, 6))
    src_mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 2 + [0] * 4], dtype=torch.bool)
    cfg = {**tiny_model_config(encoder=encoder, attention=attention), "dropout": 0.5, "embedding_dropout": 0.3, "context_dropout": 0.4}
    assert_paths_agree(both_paths(cfg, src, src_mask, torch.randint(4, 22, (3, 5))), 1e-12)


@pytest.mark.parametrize(
    "kind,score,clip,bias,layers",
    [
        ("global", "general", None, False, 2),
        ("global", "dot", 0.3, True, 3),
        ("global", "concat", None, True, 1),
        ("global", "location", 0.3, False, 2),
        ("local-m", "general", None, False, 2),
        ("local-p", "general", 0.3, True, 2),
    ],
)
def test_luong_fused_feeding_loop_equals_the_plain_path(kind, score, clip, bias, layers):
    torch.manual_seed(1)
    cfg = tiny_luong_config(attention=kind, score=score, state_clip=clip, bias=bias, layers=layers, init_range=0.5)
    src, src_mask = SourceFormat.of(cfg).batch([torch.tensor([5, 6, 7, 8, 9]), torch.tensor([9, 10]), torch.tensor([11, 12, 13])])
    tgt = torch.tensor([[9, 10, 11, 12, 2], [13, 14, 2, 0, 0], [4, 5, 6, 2, 0]])
    assert_paths_agree(both_paths(cfg, src, src_mask, tgt), 1e-12)


@pytest.mark.parametrize("model", [tiny_model_config(), tiny_luong_config()], ids=["rnnsearch", "luong"])
def test_five_updates_agree_in_float32(tiny_corpus, tmp_path, model):
    """The fused path trains as the plain path does: parameters within 1e-5 after five Adam updates."""
    data = ParallelData.load(tiny_corpus["data"])
    vocabs = Vocab.load(tiny_corpus["src_vocab"]), Vocab.load(tiny_corpus["tgt_vocab"])
    trained = []
    for kind in ("fused", "plain"):
        system = tiny_system(updates=5, recurrence=kind)
        system["model"] = model
        trainer = Trainer(system, data, {}, *vocabs, tmp_path / kind, torch.device("cpu"), {})
        for u in range(5):
            trainer.step(u)
        trained.append(dict(trainer.model.named_parameters()))
    for name, p in trained[0].items():
        assert torch.allclose(p, trained[1][name], atol=1e-5), name


@pytest.mark.parametrize("clip", [None, 0.3])
def test_luong_fused_encoder_equals_torchs_lstm(clip):
    """Annotations, every layer's final (h, c) and their gradients, as torch's packed LSTM (or, with clipping,
    the step loop) computes them; on padding the annotations are zero, as the packed LSTM's (the step loop
    leaves values there that the attention masks out)."""
    torch.manual_seed(2)
    cfg = tiny_luong_config(layers=3, state_clip=clip, bias=True, init_range=0.6)
    src, src_mask = SourceFormat.of(cfg).batch([torch.tensor([5, 6, 7, 8, 9]), torch.tensor([9, 10]), torch.tensor([11, 12, 13])])
    results, weights = [], None
    for kind in ("fused", "plain"):
        encoder = build_model(cfg, 20, 22, forms.loops(kind)).double().encoder
        if weights is not None:
            encoder.load_state_dict(weights)
        weights = encoder.state_dict()
        enc = encoder(src, src_mask)
        (enc.annotations[src_mask].sin().sum() + enc.summary.cos().sum()).backward()
        results.append((enc.annotations.detach(), enc.summary.detach(), [p.grad.clone() for p in encoder.parameters()]))
    (fa, fs, fg), (pa, ps, pg) = results
    assert torch.equal(fa[~src_mask], torch.zeros_like(fa[~src_mask]))
    real = src_mask if clip is not None else torch.ones_like(src_mask)
    assert torch.allclose(fa[real], pa[real], atol=1e-12) and torch.allclose(fs, ps, atol=1e-12)
    for f, p in zip(fg, pg):
        assert torch.allclose(f, p, atol=1e-12)


def bfloat16_errors(cfg: dict, outputs) -> dict[str, float]:
    """Relative error of every parameter gradient of a model of `cfg` under autocast (bfloat16), fused and plain,
    against the plain float32 gradient; `outputs(model)` runs the part of the model under test."""
    torch.manual_seed(0)
    models = {kind: build_model(cfg, 20, 22, forms.loops(kind)) for kind in ("plain", "fused")}
    models["fused"].load_state_dict(models["plain"].state_dict())
    torch.manual_seed(5)
    weights = [torch.randn_like(o.float()) for o in outputs(models["plain"])]  # a smooth loss on every output
    grads = {}
    for kind, dtype in (("plain", None), ("plain", torch.bfloat16), ("fused", torch.bfloat16)):
        model = models[kind]
        model.zero_grad()
        with torch.autocast("cpu", dtype=dtype or torch.float32, enabled=dtype is not None):
            results = outputs(model)
        sum((o.float() * w).sum() for o, w in zip(results, weights)).backward()
        grads[(kind, dtype)] = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    exact = grads[("plain", None)]
    return {kind: float((grads[(kind, torch.bfloat16)] - exact).norm() / exact.norm()) for kind in ("plain", "fused")}


def test_bfloat16_fused_loops_are_as_accurate_as_autocast():
    """Under autocast the fused loops run their products in bfloat16, as autograd's path does, and their
    gradients are as close to float32 (within 1.5×; a dtype mistake would be off by orders of magnitude).
    (Maxout's selection makes the whole model's gradient discontinuous, so the parts are checked.)"""
    torch.manual_seed(0)
    src = torch.randint(4, 20, (3, 7))
    src_mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4], dtype=torch.bool)
    tgt = torch.randint(4, 22, (3, 6))

    def encoder(model):
        enc = model.encode(src, src_mask)
        return [enc.annotations, enc.summary]

    def attention_loop(model):
        enc, dec = model.encode(src, src_mask), model.decoder
        return list(dec.loops.bahdanau_decoder(dec, dec.init_state(enc), dec.gru.project_inputs(dec.embed(tgt)), dec.attention.prepare(enc), enc))

    for outputs in (encoder, attention_loop):
        errors = bfloat16_errors(tiny_model_config(), outputs)
        assert 0 < errors["fused"] < 1.5 * errors["plain"], (outputs.__name__, errors)


@pytest.mark.skipif(not cpu_has_bfloat16(), reason="no bfloat16 reference: without AVX512_BF16 or AMX torch's LSTM runs in float32 (lstm.call)")
def test_bfloat16_fused_luong_loops_are_as_accurate_as_autocast():
    """The same for Luong's encoder and input-feeding decoder, whose plain path is torch's (oneDNN's) LSTM."""
    luong_cfg = tiny_luong_config(layers=2, bias=True)
    l_src, l_mask = SourceFormat.of(luong_cfg).batch([torch.tensor([5, 6, 7, 8, 9]), torch.tensor([9, 10])])
    l_tgt = torch.tensor([[9, 10, 11, 12, 2], [13, 14, 2, 0, 0]])

    def luong_features(model):
        return list(model.features(l_src, l_mask, l_tgt))

    errors = bfloat16_errors(luong_cfg, luong_features)
    assert 0 < errors["fused"] < 1.5 * errors["plain"], errors
