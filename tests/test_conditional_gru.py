"""nmtpy's conditional GRU decoder (`model.decoder: cgru`) against a transcription of nmtpy's own step, the step
interface against the teacher-forced pass, and its masking."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rnnmt.errors import UserError
from rnnmt.models.build import build_model
from rnnmt.models.encoders import Encoded

from conftest import assert_padding_does_not_change_a_sentence

CONFIG = {"decoder": "cgru", "encoder": "bigru", "attention": "additive", "emb": 5, "hidden": 4, "align_hidden": 6, "init": "uniform"}


def model(**overrides: object) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model({**CONFIG, **overrides}, 11, 13).eval()


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def nmtpy_gru(x: np.ndarray, h: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    """nmtpy's `gru_step` (layers.py l. 118–138) and the second GRU of `gru_cond_layer` (l. 470–492), which differ
    only in where the candidate's bias sits: outside the reset (the first GRU's bx) or inside (the second's bx_nl)."""
    dim = h.shape[-1]
    preact = sigmoid(h @ w["U"] + x @ w["W"] + w["b"])
    r, u = preact[:, :dim], preact[:, dim:]
    h_tilda = np.tanh((h @ w["Ux"] + w["bx_in"]) * r + x @ w["Wx"] + w["bx"])
    return u * h_tilda + (1 - u) * h


def nmtpy_weights(cell: torch.nn.GRUCell) -> dict[str, np.ndarray]:
    """A torch GRU cell's weights in nmtpy's layout: [r, u] stacked by columns, u = 1 − z (so z's rows negated); the
    gates' biases summed (nmtpy has one per gate); the candidate's bias outside the reset (bx) and inside (bx_in)."""
    w_ih, w_hh = cell.weight_ih.detach().numpy(), cell.weight_hh.detach().numpy()
    b_ih, b_hh = cell.bias_ih.detach().numpy(), cell.bias_hh.detach().numpy()
    H = cell.hidden_size
    r, z, n = slice(0, H), slice(H, 2 * H), slice(2 * H, 3 * H)
    return {
        "W": np.concatenate([w_ih[r].T, -w_ih[z].T], axis=1),
        "U": np.concatenate([w_hh[r].T, -w_hh[z].T], axis=1),
        "b": np.concatenate([b_ih[r] + b_hh[r], -(b_ih[z] + b_hh[z])]),
        "Wx": w_ih[n].T,
        "Ux": w_hh[n].T,
        "bx": b_ih[n],
        "bx_in": b_hh[n],
    }


def test_a_step_is_nmtpys_gru_cond_layer():
    """One step of `gru_cond_layer` (layers.py l. 415–495) and the readout (models/attention.py l. 448–460), written
    out in numpy from nmtpy's code, on the decoder's own weights: the first GRU over E y_{t−1}, the attention queried
    by its state, the second GRU over the context, tanh of the three readout terms."""
    m = model()
    dec = m.decoder
    with torch.no_grad():
        # nmtpy's candidate biases: the first GRU's outside the reset (bx, l. 370), the second's inside (bx_nl, l. 484).
        dec.gru1.bias_hh[2 * 4 :] = 0
        dec.gru2.bias_ih[2 * 4 :] = 0
    rng = np.random.default_rng(1)
    ctx = rng.normal(size=(2, 3, 8)).astype(np.float32)
    mask = np.array([[1, 1, 1], [1, 1, 0]], dtype=bool)
    e_prev = rng.normal(size=(2, 5)).astype(np.float32)
    s_prev = rng.normal(size=(2, 4)).astype(np.float32)

    enc = Encoded(torch.from_numpy(ctx), torch.from_numpy(mask), torch.zeros(2, 4))
    with torch.no_grad():
        s, c, alpha = dec.step(torch.from_numpy(e_prev), torch.from_numpy(s_prev), dec.attention.prepare(enc), enc)
        logits = dec.W_o(dec.hidden(s, torch.from_numpy(e_prev), c))

    g1, g2 = nmtpy_weights(dec.gru1), nmtpy_weights(dec.gru2)
    h1 = nmtpy_gru(e_prev, s_prev, g1)
    att = dec.attention
    pctx = ctx @ att.U_a.weight.detach().numpy().T  # Wc_att (its bias b_att: zero here)
    pctx__ = np.tanh(pctx + (h1 @ att.W_a.weight.detach().numpy().T)[:, None, :])  # W_comb_att
    energies = (pctx__ @ att.v_a.weight.detach().numpy().T)[..., 0]  # U_att
    weights = np.exp(energies - energies.max(1, keepdims=True)) * mask
    weights /= weights.sum(1, keepdims=True)
    ctx_ = (ctx * weights[:, :, None]).sum(1)
    h2 = nmtpy_gru(ctx_, h1, g2)  # over the context (Wc, Wcx) from h1 (U_nl, Ux_nl)

    def ff(layer: torch.nn.Linear, x: np.ndarray) -> np.ndarray:
        return x @ layer.weight.detach().numpy().T + layer.bias.detach().numpy()

    readout = np.tanh(ff(dec.U_o, h2) + ff(dec.C_o, ctx_) + ff(dec.V_o, e_prev))
    np.testing.assert_allclose(alpha.numpy(), weights, atol=1e-6)
    np.testing.assert_allclose(c.numpy(), ctx_, atol=1e-6)
    np.testing.assert_allclose(s.numpy(), h2, atol=1e-6)
    np.testing.assert_allclose(logits.numpy(), ff(dec.W_o, readout), atol=1e-5)


def test_the_first_state_is_tanh_of_the_mean_of_the_real_annotations():
    """nmtpy's `init_cgru: text` (models/attention.py l. 417–420): padding does not enter the mean."""
    dec = model().decoder
    ann = torch.randn(2, 3, 8)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    with torch.no_grad():
        s0 = dec.init_state(Encoded(ann, mask, torch.zeros(2, 4)))
        expected = torch.tanh(dec.W_s(torch.stack([ann[0].mean(0), ann[1, :2].mean(0)])))
    torch.testing.assert_close(s0, expected)


def test_step_by_step_decoding_equals_the_training_pass():
    """begin/predict/advance (beam search's interface) give the teacher-forced pass's logits, word by word."""
    m = model()
    src = torch.tensor([[3, 4, 5, 2], [6, 7, 2, 0]])
    mask = src != 0
    tgt = torch.tensor([[3, 4, 2], [5, 2, 0]])
    with torch.no_grad():
        logits, alphas = m(src, mask, tgt)
        ctx, state = m.begin(src, mask)
        for t in range(tgt.shape[1]):
            step_logits, alpha, state = m.predict_logits(ctx, state, t)
            torch.testing.assert_close(step_logits, logits[:, t])
            torch.testing.assert_close(alpha, alphas[:, t])
            state = m.advance(ctx, state, tgt[:, t])
    assert alphas[1, :, 3].abs().max() == 0  # no weight on the padded source position


def test_padding_does_not_change_a_sentence():
    assert_padding_does_not_change_a_sentence(model())


@pytest.mark.parametrize(("key", "value"), [("encoder", "gru"), ("attention", "none")])
def test_a_conditional_gru_takes_rnnsearchs_encoder_and_additive_attention_only(key, value):
    with pytest.raises(UserError, match=f"model.{key} is '{value}'"):
        model(**{key: value})


def test_the_conditional_gru_trains_a_step():
    """Every parameter gets a gradient (a part left out of the graph would train as nothing)."""
    m = model(dropout=0.5, embedding_dropout=0.3, context_dropout=0.5).train()
    src = torch.tensor([[3, 4, 5, 2], [6, 7, 2, 0]])
    logits, _ = m(src, src != 0, torch.tensor([[3, 4, 2], [5, 2, 0]]))
    logits.logsumexp(-1).sum().backward()
    assert [name for name, p in m.named_parameters() if p.grad is None or not p.grad.abs().sum()] == []
