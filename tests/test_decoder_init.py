"""`model.decoder_init`: the Bahdanau decoder's first state from the encoder's summary (GroundHog's ←h_1) or from the
mean annotation (nmtpy's `init_cgru: text`), against nmtpy's expression, with its masking, its order with context
dropout, the fast forms and the user's errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rnnmt.errors import UserError
from rnnmt.models.build import build_model
from rnnmt.train import selfcheck

from conftest import assert_padding_does_not_change_a_sentence, tiny_luong_config, tiny_model_config

SRC = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])


def model(**overrides: object) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model({**tiny_model_config(), **overrides}, 11, 13).eval()


def test_the_first_state_is_nmtpys_tanh_of_the_mean_of_the_real_annotations():
    """nmtpy dc0a161 models/attention.py l. 417–420: ctx_mean = (ctx · mask).sum(0) / mask.sum(0), then the `ff`
    layer with tanh (layers.py: tanh(x W + b))."""
    m = model(decoder_init="mean")
    with torch.no_grad():
        enc = m.encode(SRC, SRC != 0)
        s0 = m.decoder.init_state(enc).numpy()
    ctx, mask = enc.annotations.numpy().transpose(1, 0, 2), (SRC != 0).numpy().T.astype(np.float32)  # nmtpy's [S, B, ·]
    ctx_mean = (ctx * mask[:, :, None]).sum(0) / mask.sum(0)[:, None]
    expected = np.tanh(ctx_mean @ m.decoder.W_s.weight.detach().numpy().T + m.decoder.W_s.bias.detach().numpy())
    np.testing.assert_allclose(s0, expected, atol=1e-6)


def test_the_default_is_groundhogs_first_backward_state():
    """Without the key, s_0 = tanh(W_s ←h_1 + b) (paper-spec §1.4): W_s reads the backward GRU's width, not the annotations'."""
    m = model()
    assert m.decoder.W_s.in_features == m.encoder.summary_size
    assert model(decoder_init="mean").decoder.W_s.in_features == m.encoder.output_size
    with torch.no_grad():
        enc = m.encode(SRC, SRC != 0)
        hidden = m.encoder.summary_size
        torch.testing.assert_close(m.decoder.init_state(enc), torch.tanh(m.decoder.W_s(enc.annotations[:, 0, hidden:])))


def test_the_mean_is_of_the_annotations_after_context_dropout(monkeypatch):
    """nmtpy drops out ctx before it takes the mean (attention.py l. 414–420): s_0 reads what the attention reads."""
    m = model(decoder_init="mean", context_dropout=0.5).train()
    seen = {}
    init_state, prepare = m.decoder.init_state, m.decoder.attention.prepare
    monkeypatch.setattr(m.decoder, "init_state", lambda enc: (seen.setdefault("init", enc.annotations), init_state(enc))[1])
    monkeypatch.setattr(m.decoder.attention, "prepare", lambda enc: (seen.setdefault("attention", enc.annotations), prepare(enc))[1])
    m(SRC, SRC != 0, torch.tensor([[3, 4, 2], [5, 2, 0]]))
    assert seen["init"] is seen["attention"]
    assert (seen["init"] == 0).any()


def test_padding_does_not_change_a_sentence():
    assert_padding_does_not_change_a_sentence(model(decoder_init="mean"))


@pytest.mark.parametrize("recurrence", ["fused", "kernels"])
def test_the_fast_forms_take_the_mean_start(recurrence):
    """s_0 is computed before the loop, so the fast forms run the whole decoder and agree with the plain path."""
    verdict = selfcheck.verify({**tiny_model_config(), "decoder_init": "mean"}, recurrence, torch.device("cpu"), "float32")
    assert verdict.paths.decoder == recurrence and verdict.paths.encoder == recurrence, verdict.left


def test_each_decoder_takes_only_its_own_starts():
    with pytest.raises(UserError, match="model.decoder_init is 'first'"):
        model(decoder_init="first")
    with pytest.raises(UserError, match="model.decoder_init is 'mean', but a 'lstm' decoder takes summary"):
        build_model({**tiny_luong_config(), "decoder_init": "mean"}, 11, 13)
    cgru = {"decoder": "cgru", "encoder": "bigru", "attention": "additive", "emb": 5, "hidden": 4, "align_hidden": 6, "init": "uniform"}
    assert build_model(cgru, 11, 13).decoder.W_s.in_features == 8
    with pytest.raises(UserError, match="model.decoder_init is 'summary', but a 'cgru' decoder takes mean"):
        build_model({**cgru, "decoder_init": "summary"}, 11, 13)
