"""The equations of paper-spec §1.2–1.6 checked against hand computation."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from rnnmt.models import attention
from rnnmt.models.attention import AdditiveAttention, tanh_energies
from rnnmt.models.build import build_model
from rnnmt.models.encoders import Encoded
from rnnmt.models.gru import GroundhogGRU

from conftest import tiny_model_config


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_gru_step_is_groundhog_convention():
    """1-d GRU: z, r from the input and state; reset before U; h = (1-z) h + z h̃; only the candidate has a bias."""
    gru = GroundhogGRU(1, 1)
    with torch.no_grad():
        gru.W_in.weight.copy_(torch.tensor([[0.5], [-1.0], [2.0]]))  # W_z, W_r, W
        gru.U_gates.weight.copy_(torch.tensor([[0.3], [0.7]]))  # U_z, U_r
        gru.U_cand.weight.fill_(-0.4)
        gru.b_cand.fill_(0.1)
    x, h = 0.8, 0.6
    z = sigmoid(0.5 * x + 0.3 * h)
    r = sigmoid(-1.0 * x + 0.7 * h)
    h_cand = math.tanh(2.0 * x + 0.1 + -0.4 * (r * h))
    expected = (1 - z) * h + z * h_cand
    got = gru.step(gru.project_inputs(torch.tensor([[x]])), torch.tensor([[h]]))
    assert got.item() == pytest.approx(expected, abs=1e-6)


def test_gru_scan_carries_state_over_masked_steps():
    torch.manual_seed(0)
    gru = GroundhogGRU(3, 4)
    x = gru.project_inputs(torch.randn(1, 5, 3))
    mask = torch.tensor([[True, True, True, False, False]])
    fwd = gru.scan(x, mask)
    assert torch.equal(fwd[0, 3], fwd[0, 2]) and torch.equal(fwd[0, 4], fwd[0, 2])
    bwd = gru.scan(x, mask, reverse=True)
    # Backward over right padding starts from zero state at the last real token.
    assert torch.allclose(bwd[0, :3], gru.scan(x[:, :3], mask[:, :3], reverse=True)[0])


@pytest.mark.parametrize("grad", [True, False], ids=["training", "beam-search"])
def test_additive_attention_hand_computed_and_masks_padding(grad):
    att = AdditiveAttention(query_size=1, key_size=1, hidden=1)
    with torch.no_grad():
        att.W_a.weight.fill_(1.0)
        att.U_a.weight.fill_(2.0)
        att.v_a.weight.fill_(3.0)
    h = torch.tensor([[[0.1], [0.5], [9.0]]])  # third position is padding
    enc = Encoded(h, torch.tensor([[True, True, False]]), h[:, 0])
    s = torch.tensor([[0.2]])
    with torch.set_grad_enabled(grad):
        c, alpha = att(s, att.prepare(enc), enc)
    e = [3 * math.tanh(0.2 + 2 * 0.1), 3 * math.tanh(0.2 + 2 * 0.5)]
    a = [math.exp(v) / sum(math.exp(w) for w in e) for v in e]
    assert alpha[0].tolist() == pytest.approx([a[0], a[1], 0.0], abs=1e-6)
    assert c.item() == pytest.approx(a[0] * 0.1 + a[1] * 0.5, abs=1e-6)


# With a buffer of 512 floats: 4 chunks of 2, 2, 2, 1 sentences; 2 chunks of 4 and 3; one chunk (310 rows a
# sentence: 16 sentences to keep rows aligned); one row.
@pytest.mark.parametrize("sentences,k,length", [(7, 4, 8), (7, 2, 8), (5, 10, 31), (1, 1, 1)])
def test_beam_search_energies_in_chunks_equal_the_training_expression(monkeypatch, sentences, k, length):
    """Without autograd the energies go through a small buffer a few sentences at a time; the values are the
    one-expression form's (rows per chunk kept a multiple of 32, so a BLAS rounds each row alike)."""
    torch.manual_seed(0)
    v = torch.nn.Linear(8, 1, bias=False)
    keys, queries = torch.randn(sentences, length, 8), torch.randn(sentences, k, 8)
    expected = tanh_energies(keys, queries, v).detach()
    monkeypatch.setattr(attention, "_ENERGY_CHUNK", 64 * 8)  # a few chunks, the last one short
    with torch.no_grad():
        got = tanh_energies(keys, queries, v)
    assert got.shape == (sentences, k, length)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-7)


def test_maxout_pairs_adjacent_units(tiny_model):
    dec = tiny_model.decoder
    with torch.no_grad():
        for layer in (dec.U_o, dec.V_o, dec.C_o):
            layer.weight.zero_()
        dec.U_o.bias.copy_(torch.tensor([1.0, 5.0, -2.0, -3.0, 0.0, 4.0, 7.0, 1.0, 2.0, 2.0, -1.0, 0.5]))
        dec.W_o.weight.copy_(torch.eye(20, 6))
        dec.W_o.bias.zero_()
    logits = dec.readout(torch.zeros(1, 12), torch.zeros(1, 12), torch.zeros(1, 24))
    assert logits[0, :6].tolist() == [5.0, -2.0, 4.0, 7.0, 2.0, 0.5]


def test_padding_does_not_change_a_sentence(tiny_model):
    """A sentence scored alone and inside a padded batch gets the same logits and zero weight on padding."""
    src = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]])
    mask = src != 0
    tgt = torch.tensor([[9, 10, 2], [11, 2, 0]])
    logits, alpha = tiny_model(src, mask, tgt)
    alone_logits, _ = tiny_model(src[1:, :2], mask[1:, :2], tgt[1:, :2])
    assert torch.allclose(logits[1, :2], alone_logits[0], atol=1e-5)
    assert torch.all(alpha[1, :, 2:] == 0)


def test_groundhog_init_follows_the_paper():
    torch.manual_seed(0)
    model = build_model(tiny_model_config(init="groundhog"), 20, 20)
    att = model.decoder.attention
    assert torch.all(att.v_a.weight == 0)  # uniform attention at the first update
    assert att.W_a.weight.std() < 0.01 and model.decoder.embed.weight.std() < 0.05
    u_z = model.encoder.fwd.U_gates.weight[:12]
    assert torch.allclose(u_z @ u_z.T, torch.eye(12), atol=1e-5)
    assert torch.all(model.decoder.U_o.bias == 0)


def test_nmtpy_init_scales_each_matrix_by_its_inputs():
    """nmtpy's xavier: N(0, 1/n_in) with n_in a weight's inputs, or an embedding table's vocabulary."""
    torch.manual_seed(0)
    cfg = {**tiny_model_config(init="nmtpy"), "emb": 64, "hidden": 96, "align_hidden": 80, "maxout": 48}
    model = build_model(cfg, 3000, 2000)
    expected = {
        model.encoder.fwd.W_in.weight: 64,  # embeddings in
        model.decoder.attention.U_a.weight: 192,  # annotations in
        model.decoder.U_o.weight: 96,  # decoder state in
        model.decoder.W_o.weight: 48,  # maxout units in
        model.encoder.embed.weight: 3000,  # source vocabulary
        model.decoder.embed.weight: 2000,  # target vocabulary
    }
    for weight, n_in in expected.items():
        assert abs(weight.std().item() * n_in**0.5 - 1.0) < 0.05
    u_r = model.decoder.gru.U_gates.weight[96:]
    assert torch.allclose(u_r @ u_r.T, torch.eye(96), atol=1e-5)
    assert torch.all(model.decoder.U_o.bias == 0) and torch.all(model.encoder.embed.bias == 0)


def test_encdec_context_is_last_forward_state():
    torch.manual_seed(0)
    model = build_model(tiny_model_config(encoder="gru", attention="none"), 20, 20)
    src = torch.tensor([[5, 6, 2, 0]])
    enc = model.encode(src, src != 0)
    states = model.encoder.fwd.scan(model.encoder.fwd.project_inputs(model.encoder.embed(src)), src != 0)
    assert torch.allclose(enc.summary[0], states[0, 2])


@pytest.mark.parametrize("grad", [True, False], ids=["autograd", "no-grad"])
@pytest.mark.parametrize(("encoder", "attention"), [("bigru", "additive"), ("gru", "none")])
@pytest.mark.parametrize("decoder_init", ["summary", "mean"])
def test_training_pass_equals_step_by_step_decoding(encoder, attention, decoder_init, grad):
    """The batched teacher-forced pass and the beam's predict/advance steps (vocabulary tables, and without
    autograd the chunked energies) compute the same logits (§1.6)."""
    torch.manual_seed(1)
    model = build_model({**tiny_model_config(encoder, attention), "decoder_init": decoder_init}, 20, 20).eval()
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    tgt = torch.tensor([[9, 10, 11, 2], [12, 2, 0, 0]])
    logits, _ = model(src, src != 0, tgt)
    with torch.set_grad_enabled(grad):
        ctx, state = model.decoder.begin(model.encode(src, src != 0))
        for t in range(tgt.shape[1]):
            step_logits, _, state = model.decoder.predict(ctx, state, t)
            assert torch.allclose(step_logits, logits[:, t], atol=1e-5)
            state = model.decoder.advance(ctx, state, tgt[:, t])


def test_readout_dropout_is_groundhogs_between_maxout_and_the_output_layer():
    """`dropout` drops maxout outputs t (GroundHog's DropOp after the maxout, encdec.py l. 938–940), scaled by 1/(1 − p)
    in training, and nothing in evaluation; with p = 0 the model computes what it computed without the key."""
    torch.manual_seed(0)
    cfg = {**tiny_model_config(), "dropout": 0.5}
    model = build_model(cfg, 20, 20)
    plain = build_model(tiny_model_config(), 20, 20)
    plain.load_state_dict(model.state_dict())
    dec, s, word, c = model.decoder, torch.randn(4, 12), torch.randn(4, 12), torch.randn(4, 24)
    t = plain.decoder.hidden(s, word, c)
    dropped = dec.hidden(s, word, c)
    kept = dropped != 0
    assert 0 < kept.float().mean() < 1
    torch.testing.assert_close(dropped[kept], 2 * t[kept])
    torch.testing.assert_close(dec.eval().hidden(s, word, c), t)


@pytest.mark.parametrize("key", ["embedding_dropout", "context_dropout"])
def test_embedding_and_context_dropout_act_in_training_only(key):
    """The switches beyond GroundHog change the training pass and leave evaluation (beam search) alone."""
    src, tgt = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]]), torch.tensor([[9, 10, 11, 2], [12, 2, 0, 0]])
    torch.manual_seed(0)
    model = build_model({**tiny_model_config(), key: 0.5}, 20, 20)
    plain = build_model(tiny_model_config(), 20, 20)
    plain.load_state_dict(model.state_dict())
    assert not torch.allclose(model(src, src != 0, tgt)[0], plain(src, src != 0, tgt)[0])
    torch.testing.assert_close(model.eval()(src, src != 0, tgt)[0], plain.eval()(src, src != 0, tgt)[0])


def test_a_luong_model_refuses_the_bahdanau_dropout_switches():
    from rnnmt.errors import UserError

    from conftest import tiny_luong_config

    with pytest.raises(UserError, match=r"^model.context_dropout is 0.3, but a 'lstm' decoder has no such dropout"):
        build_model({**tiny_luong_config(), "context_dropout": 0.3}, 20, 20)


def test_the_models_import_nothing_from_training():
    """models/ is below train/: the networks, their loops and kernels never reach up into the training code."""
    models = Path(__file__).resolve().parents[1] / "src" / "rnnmt" / "models"
    upward = [
        f"{path.relative_to(models)}:{n}"
        for path in models.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "rnnmt.train" in line and ("import" in line or "from" in line)
    ]
    assert not upward, upward
