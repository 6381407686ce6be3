"""nmtpy's layer-normalised encoder GRU (`model.encoder_norm: layer`) against a transcription of nmtpy's own step, its
masking and initialisation, and the fast forms that run it (fused) or leave it to the plain path (kernels)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rnnmt.errors import UserError
from rnnmt.models.build import build_model
from rnnmt.models.lngru import LayerNormGRU
from rnnmt.train import selfcheck

from conftest import assert_padding_does_not_change_a_sentence, tiny_luong_config, tiny_model_config


def model(**overrides: object) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model({**tiny_model_config(), "encoder_norm": "layer", **overrides}, 11, 13).eval()


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def layer_norm(x: np.ndarray, b: np.ndarray, s: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """nmtpy's `layer_norm` (layers.py l. 65–68); Theano's var is the population variance."""
    return s[None, :] * (x - x.mean(1)[:, None]) / np.sqrt(x.var(1)[:, None] + eps) + b[None, :]


def nmtpy_gru_layer(x: np.ndarray, mask: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    """nmtpy's `gru_layer` with `layernorm=True` (layers.py l. 244–290) over x [T, B, in] from a zero state, its step
    `gru_step_lnorm` (l. 84–103): the states [T, B, H]."""
    dim = w["Ux"].shape[1]
    h = np.zeros((x.shape[1], dim), dtype=np.float64)
    out = []
    for t in range(x.shape[0]):
        x_ = layer_norm(x[t] @ w["W"] + w["b"], w["b1"], w["s1"])
        xx_ = layer_norm(x[t] @ w["Wx"] + w["bx"], w["b2"], w["s2"])
        preact = sigmoid(layer_norm(h @ w["U"], w["b3"], w["s3"]) + x_)
        r, u = preact[:, :dim], preact[:, dim:]
        h_tilda = np.tanh(layer_norm(h @ w["Ux"], w["b4"], w["s4"]) * r + xx_)
        h_new = u * h_tilda + (1.0 - u) * h
        m = mask[t][:, None]
        h = m * h_new + (1.0 - m) * h
        out.append(h)
    return np.stack(out)


def nmtpy_weights(gru: LayerNormGRU) -> dict[str, np.ndarray]:
    """The module's parameters in nmtpy's names and layout ([in, out] matrices, [r; u] stacked by columns)."""
    H = gru.hidden_size

    def a(t: torch.Tensor) -> np.ndarray:
        return t.detach().double().numpy()

    W, b = a(gru.W_in.weight), a(gru.W_in.bias)
    return {
        "W": W[: 2 * H].T,
        "b": b[: 2 * H],
        "Wx": W[2 * H :].T,
        "bx": b[2 * H :],
        "U": a(gru.U_gates.weight).T,
        "Ux": a(gru.U_cand.weight).T,
        **{f"s{k}": a(norm.weight) for k, norm in enumerate((gru.norm_in_gates, gru.norm_in_cand, gru.norm_rec_gates, gru.norm_rec_cand), 1)},
        **{f"b{k}": a(norm.bias) for k, norm in enumerate((gru.norm_in_gates, gru.norm_in_cand, gru.norm_rec_gates, gru.norm_rec_cand), 1)},
    }


def test_the_encoder_is_nmtpys_gru_layer_with_layer_norm():
    """Both directions' annotations equal nmtpy's `gru_layer(…, layernorm=True)` run on the module's own weights (its
    gains, biases and input biases drawn away from their initial ones and zeros, so that each term shows), the
    backward one over the reversed sentence, as nmtpy's `encoder_r` (models/attention.py l. 398–404)."""
    m = model()
    with torch.no_grad():
        for p in m.encoder.parameters():
            p.add_(0.3 * torch.randn_like(p))
    src = torch.tensor([[3, 4, 5, 6, 2], [7, 8, 2, 0, 0]])
    mask = src != 0
    with torch.no_grad():
        enc = m.encode(src, mask)
        emb = m.encoder.embed(src).double().numpy()
    H = m.encoder.fwd.hidden_size
    fwd = nmtpy_gru_layer(emb.transpose(1, 0, 2), mask.T.double().numpy(), nmtpy_weights(m.encoder.fwd))
    np.testing.assert_allclose(enc.annotations[:, :, :H].numpy(), fwd.transpose(1, 0, 2), atol=1e-5)
    for row, length in enumerate(mask.sum(1).tolist()):
        reversed_emb = emb[row : row + 1, :length][:, ::-1].transpose(1, 0, 2)
        bwd = nmtpy_gru_layer(reversed_emb, np.ones((length, 1)), nmtpy_weights(m.encoder.bwd))[::-1, 0]
        np.testing.assert_allclose(enc.annotations[row, :length, H:].numpy(), bwd, atol=1e-5)


def test_padding_does_not_change_a_sentence():
    assert_padding_does_not_change_a_sentence(model())


def test_gains_start_at_one_biases_at_zero_and_recurrent_matrices_orthogonal():
    """nmtpy's `init_layer_norm` (layers.py l. 70–80) and `param_init_gru` (l. 205–241), under every scheme."""
    for init in ("uniform", "nmtpy", "groundhog"):
        gru = model(init=init).encoder.fwd
        for norm in (gru.norm_in_gates, gru.norm_in_cand, gru.norm_rec_gates, gru.norm_rec_cand):
            assert torch.all(norm.weight == 1) and torch.all(norm.bias == 0)
        assert torch.all(gru.W_in.bias == 0)
        for block in (*gru.U_gates.weight.split(gru.hidden_size), gru.U_cand.weight):
            torch.testing.assert_close(block @ block.T, torch.eye(gru.hidden_size), atol=1e-5, rtol=0)


def test_the_fused_form_runs_the_encoder_once_checked():
    """The fused scan (recurrence/fused.py) passes the check against autograd through the module and runs the encoder."""
    cfg = {**tiny_model_config(), "encoder_norm": "layer"}
    verdict = selfcheck.verify(cfg, "fused", torch.device("cpu"), "float32")
    assert verdict.paths.encoder == "fused" and verdict.paths.decoder == "fused" and not verdict.left


def test_the_kernel_form_leaves_the_encoder_to_the_fused_form():
    """The layer-normalised GRU has no kernel form: the encoder runs by the fused form, the decoder by the kernels."""
    cfg = {**tiny_model_config(), "encoder_norm": "layer"}
    verdict = selfcheck.verify(cfg, "kernels", torch.device("cpu"), "float32")
    assert verdict.paths.encoder == "fused" and verdict.paths.decoder == "kernels"
    assert any("layer-normalised" in line for line in verdict.left)


@pytest.mark.parametrize("encoder", ["bigru", "gru"])
def test_every_parameter_trains(encoder):
    """Every parameter gets a gradient (a part left out of the graph would train as nothing)."""
    m = model(encoder=encoder, attention="additive" if encoder == "bigru" else "none").train()
    src = torch.tensor([[3, 4, 5, 2], [6, 7, 2, 0]])
    logits, _ = m(src, src != 0, torch.tensor([[3, 4, 2], [5, 2, 0]]))
    logits.logsumexp(-1).sum().backward()
    assert [name for name, p in m.named_parameters() if p.grad is None or not p.grad.abs().sum()] == []


def test_luongs_encoder_takes_no_layer_norm():
    with pytest.raises(UserError, match="model.encoder_norm is 'layer'"):
        build_model({**tiny_luong_config(), "encoder_norm": "layer"}, 11, 13)


def test_an_unknown_norm_is_named():
    with pytest.raises(UserError, match="model.encoder_norm is 'batch'"):
        model(encoder_norm="batch")
