"""Luong et al. 2015 (paper-spec §4): score functions, local windows, input feeding, source reversal,
the fused decoder against the step loop, state clipping."""

from __future__ import annotations

import math

import pytest
import torch

from rnnmt.models.attention import LuongAttention
from rnnmt.models.build import build_model
from rnnmt.models.encoders import Encoded
from rnnmt.models.source import SourceFormat

from conftest import tiny_luong_config

H_BAR = [[0.5, -1.0], [2.0, 0.3], [-0.7, 0.8]]  # three real source states h̄_s (2-d), then one padding
QUERY = [0.4, -0.6]


def encoded() -> Encoded:
    annotations = torch.tensor([H_BAR + [[9.0, 9.0]]])
    return Encoded(annotations, torch.tensor([[True, True, True, False]]), annotations[:, 0])


def softmax(values: list[float]) -> list[float]:
    total = sum(math.exp(v) for v in values)
    return [math.exp(v) / total for v in values]


def attend(att: LuongAttention, step: int = 0) -> tuple[list[float], list[float]]:
    """(weights over the 4 positions, context) for QUERY at one target step."""
    enc = encoded()
    c, alpha = att(torch.tensor([[QUERY]]), att.prepare(enc), enc, torch.tensor([step]))
    return alpha[0, 0].tolist(), c[0, 0].tolist()


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


def matvec(m: list[list[float]], v: list[float]) -> list[float]:
    return [dot(row, v) for row in m]


def check(alpha: list[float], expected: list[float]) -> None:
    assert alpha == pytest.approx(expected, abs=1e-6)


def context_of(weights: list[float]) -> list[float]:
    return [sum(w * h[i] for w, h in zip(weights, H_BAR)) for i in range(2)]


def test_dot_score():
    alpha, c = attend(LuongAttention(2, "global", "dot", 10, 10, False))
    expected = softmax([dot(QUERY, h) for h in H_BAR])
    check(alpha, expected + [0.0])
    assert c == pytest.approx(context_of(expected), abs=1e-6)


def test_general_score_is_h_t_W_a_h_s():
    att = LuongAttention(2, "global", "general", 10, 10, False)
    w = [[1.0, 2.0], [-0.5, 0.25]]
    with torch.no_grad():
        att.W_a.weight.copy_(torch.tensor(w))
    alpha, _ = attend(att)
    check(alpha, softmax([dot(QUERY, matvec(w, h)) for h in H_BAR]) + [0.0])


def test_concat_score_is_luongs_simplified_form():
    """v_aᵀ tanh(h̄_s + W_a h_t): the h̄_s block of W_a is the identity (paper fn. 15)."""
    att = LuongAttention(2, "global", "concat", 10, 10, False)
    w, v = [[0.3, -0.2], [1.1, 0.4]], [0.7, -1.3]
    with torch.no_grad():
        att.W_a.weight.copy_(torch.tensor(w))
        att.v_a.weight.copy_(torch.tensor([v]))
    wq = matvec(w, QUERY)
    alpha, _ = attend(att)
    check(alpha, softmax([dot(v, [math.tanh(h[i] + wq[i]) for i in range(2)]) for h in H_BAR]) + [0.0])


def encoded_lengths(lengths: list[int]) -> Encoded:
    """A batch of sentences of the given lengths over H_BAR's states (padded to 4 positions)."""
    annotations = torch.tensor([H_BAR + [[9.0, 9.0]]] * len(lengths))
    mask = torch.tensor([[s < n for s in range(4)] for n in lengths])
    return Encoded(annotations, mask, annotations[:, 0])


def location_weights(slots: list[list[float]], lengths: list[int]) -> list[list[float]]:
    att = LuongAttention(2, "global", "location", 10, len(slots), reversed_source=True)
    with torch.no_grad():
        att.W_a.weight.copy_(torch.tensor(slots))
    enc = encoded_lengths(lengths)
    query = torch.tensor([QUERY]).expand(len(lengths), 1, 2)
    return att(query, att.prepare(enc), enc, torch.tensor([0]))[1][:, 0].tolist()


def test_location_rows_score_the_same_original_word_whatever_the_length():
    """nmt.matlab (updateDataSrcVecs.m before 1f7dc9c) right-aligns the states it reads in the P slots: with a
    reversed source the last row always scores the first word, the one before it the second word."""
    w = [[0.2, 0.1], [-0.3, 0.5], [1.0, 1.0], [7.0, -7.0], [0.0, 2.0]]
    row = matvec(w, QUERY)
    three, two = location_weights(w, [3, 2])
    # Three words read as (w2, w1, w0) sit in slots 2, 3, 4; two words (w1, w0) in slots 3, 4.
    check(three, softmax(row[2:5]) + [0.0])
    check(two, softmax(row[3:5]) + [0.0, 0.0])
    # The first word (w0) is scored by row 4 in both, the second (w1) by row 3: their odds agree.
    assert three[2] / three[1] == pytest.approx(two[1] / two[0], rel=1e-5)


def test_location_gives_words_beyond_the_slots_no_weight():
    """With fewer slots than words, the states read first (reversed: the words near the end) get none."""
    w = [[0.2, 0.1], [-0.3, 0.5]]
    (alpha,) = location_weights(w, [3])
    check(alpha, [0.0] + softmax(matvec(w, QUERY)) + [0.0])


def test_local_m_centres_on_the_target_step_in_original_order():
    """Source reversed: original position t sits at encoder position S−1−t; the window is cut at the ends."""
    scores = [dot(QUERY, h) for h in H_BAR]
    att = LuongAttention(2, "local-m", "dot", 1, 10, reversed_source=True)
    alpha, _ = attend(att, step=0)  # original word 0 = encoder position 2: window {1, 2}
    check(alpha, [0.0, *softmax(scores[1:3]), 0.0])
    alpha, _ = attend(att, step=7)  # past the end: the last original word = encoder position 0: window {0, 1}
    check(alpha, [*softmax(scores[0:2]), 0.0, 0.0])
    forward = LuongAttention(2, "local-m", "dot", 1, 10, reversed_source=False)
    alpha, _ = attend(forward, step=0)
    check(alpha, [*softmax(scores[0:2]), 0.0, 0.0])


def nmt_matlab_local_p(scores: list[float], scale: float, window: int) -> list[float]:
    """Weights over the original words 1..n as nmt.matlab computes them (1-based, attnLayerForward.m,
    buildSrcVecs.m, distLayerForward.m): mu = scale·(srcLens − 1) + 1 with srcLens = n + 1, a window of
    ±D around floor(mu) cut to the sentence, the softmax over it times exp(−((i − mu)/σ)²/2), σ = D/2."""
    n = len(scores)
    mu = scale * n + 1
    inside = [i for i in range(1, n + 1) if abs(i - math.floor(mu)) <= window]
    probs = softmax([scores[i - 1] for i in inside])
    weights = [0.0] * n
    for i, a in zip(inside, probs):
        weights[i - 1] = a * math.exp(-0.5 * ((i - mu) / (window / 2)) ** 2)
    return weights


@pytest.mark.parametrize("reversed_source", [True, False])
@pytest.mark.parametrize("v_p", [0.0, 3.0, -3.0, 40.0])
def test_local_p_centres_in_the_original_word_order(v_p, reversed_source):
    """p_t = n·sigmoid(v_pᵀ tanh(W_p h_t)) in the original order, window and Gaussian as nmt.matlab's."""
    att = LuongAttention(2, "local-p", "dot", 1, 10, reversed_source=reversed_source)
    with torch.no_grad():
        att.W_p.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
        att.v_p.weight.copy_(torch.tensor([[v_p, -v_p]]))
    # The sigmoid in float32, as the model computes it: at v_p = 40 it is exactly 1.
    scale = float(torch.sigmoid(torch.tensor(v_p * math.tanh(QUERY[0]) - v_p * math.tanh(QUERY[1]))))
    # H_BAR is the encoder's input order: reversed, original word i (1-based) sits at position n − i.
    states = H_BAR[::-1] if reversed_source else H_BAR
    by_word = nmt_matlab_local_p([dot(QUERY, h) for h in states], scale, window=1)
    expected = (by_word[::-1] if reversed_source else by_word) + [0.0]
    alpha, c = attend(att)
    check(alpha, expected)
    assert c == pytest.approx(context_of(expected[:3]), abs=1e-6)
    # mu = 2.5 (window words 1-3), 3.82 (words 2-3), 1.18 (words 1-2), 4.0 (one past the last word: word 3 alone).
    centre = {0.0: 2, 3.0: 3, -3.0: 1, 40.0: 4}[v_p]
    assert [i for i in (1, 2, 3) if by_word[i - 1] > 0] == [i for i in (1, 2, 3) if abs(i - centre) <= 1]


def test_source_reversal_with_padding_ends_on_the_real_last_word():
    """The reversed source starts with its last word and the encoder's final state is the one after
    the sentence's own last position, whatever padding follows."""
    fmt = SourceFormat.of(tiny_luong_config())
    src, mask = fmt.batch([torch.tensor([5, 6, 7]), torch.tensor([8, 9, 10, 11, 12])])
    assert src[0].tolist() == [7, 6, 5, 0, 0] and mask[0].tolist() == [True, True, True, False, False]
    assert fmt.position(0, 3) == 2 and fmt.position(2, 3) == 0 and fmt.position(3, 3) is None
    for clip in (None, 1e6):  # the fused kernel over packed sequences, and the step loop
        torch.manual_seed(0)
        model = build_model(tiny_luong_config(state_clip=clip), 20, 20).eval()
        batch = model.encode(src, mask)
        alone = model.encode(src[:1, :3], mask[:1, :3])
        assert torch.allclose(batch.summary[0], alone.summary[0], atol=1e-6)
        assert torch.allclose(batch.annotations[0, :3], alone.annotations[0], atol=1e-6)


def test_input_feeding_gives_layer_one_the_previous_attentional_state():
    """On the plain path (build_model's default), which calls the LSTM once per step (the fused path is checked
    against it)."""
    torch.manual_seed(0)
    model = build_model(tiny_luong_config(), 20, 20).eval()
    dec = model.decoder
    seen_inputs, seen_h_tilde = [], []
    dec.lstm.register_forward_hook(lambda m, args, out: seen_inputs.append(args[0].detach()))
    dec.W_s.register_forward_hook(lambda m, args, out: seen_h_tilde.append(args[0].detach()))
    src, mask = SourceFormat.of(tiny_luong_config()).batch([torch.tensor([5, 6, 7])])
    with torch.no_grad():
        model(src, mask, torch.tensor([[9, 10, 11, 2]]))
    h_tilde = seen_h_tilde[0][0]  # [T, H]: W_s reads all steps at once
    assert torch.equal(seen_inputs[0][0, 0, 8:], torch.zeros(12))  # h̃_0 = 0
    for t in range(1, 4):
        assert torch.allclose(seen_inputs[t][0, 0, 8:], h_tilde[t - 1])
        assert torch.equal(seen_inputs[t][0, 0, :8], dec.embed.weight[[9, 10, 11][t - 1]])


@pytest.mark.parametrize("attention", ["global", "local-m", "local-p", "none"])
def test_fused_decoder_equals_the_step_loop(attention):
    """Without input feeding the LSTM runs over the whole target at once; the beam's steps and the
    clipping loop (with a bound that never binds) compute the same logits with the same weights."""
    cfg = tiny_luong_config(attention=attention, score="dot", feed_input=False)
    torch.manual_seed(3)
    fused = build_model(cfg, 20, 20).eval()
    looped = build_model({**cfg, "state_clip": 1e6}, 20, 20).eval()
    looped.load_state_dict(fused.state_dict())
    src, mask = SourceFormat.of(cfg).batch([torch.tensor([5, 6, 7, 8]), torch.tensor([9, 10])])
    tgt = torch.tensor([[9, 10, 11, 12, 2], [13, 14, 2, 0, 0]])
    with torch.no_grad():
        logits, alpha = fused(src, mask, tgt)
        loop_logits, loop_alpha = looped(src, mask, tgt)
        assert torch.allclose(logits, loop_logits, atol=1e-5) and torch.allclose(alpha, loop_alpha, atol=1e-5)
        ctx, state = fused.begin(src, mask)
        for t in range(tgt.shape[1]):
            logp, step_alpha, state = fused.predict(ctx, state, t)
            assert torch.allclose(logp, torch.log_softmax(logits[:, t], dim=-1), atol=1e-5)
            assert torch.allclose(step_alpha, alpha[:, t], atol=1e-6)
            state = fused.advance(ctx, state, tgt[:, t])


def test_state_clipping_bounds_the_cell():
    torch.manual_seed(0)
    model = build_model(tiny_luong_config(state_clip=0.05, init_range=2.0), 20, 20).eval()
    src, mask = SourceFormat.of(tiny_luong_config()).batch([torch.tensor([5, 6, 7, 8, 9, 10])])
    summary = model.encode(src, mask).summary
    assert summary[:, 1].abs().max() <= 0.05 + 1e-7
    unclipped = build_model(tiny_luong_config(init_range=2.0), 20, 20).eval()
    unclipped.load_state_dict(model.state_dict())
    assert unclipped.encode(src, mask).summary[:, 1].abs().max() > 0.05


def test_luong_init_and_no_biases():
    torch.manual_seed(0)
    model = build_model(tiny_luong_config(init_range=0.1), 20, 20)
    names = [name for name, _ in model.named_parameters()]
    assert not any("bias" in name for name in names)
    assert all(p.abs().max() <= 0.1 for p in model.parameters())
    with_bias = build_model(tiny_luong_config(bias=True), 20, 20)
    assert any("bias" in name for name, _ in with_bias.named_parameters())


def test_families_refuse_each_others_parts():
    from rnnmt.errors import UserError

    with pytest.raises(UserError, match="model.attention is 'additive', but a 'lstm' decoder takes"):
        build_model(tiny_luong_config(attention="additive"), 20, 20)
    with pytest.raises(UserError, match="model.encoder is 'bigru', but a 'lstm' decoder takes lstm"):
        build_model(tiny_luong_config(encoder="bigru"), 20, 20)
