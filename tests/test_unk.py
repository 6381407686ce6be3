"""UNK replacement (Luong et al. 2015, paper-spec §4.7) and ensembles."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from rnnmt.cli import main
from rnnmt.decode.beam import beam_search
from rnnmt.decode.ensemble import Ensemble
from rnnmt.decode.settings import DecodeSettings
from rnnmt.decode.unk import UnkReplacer, learn_dictionary, load_dictionary, write_dictionary
from rnnmt.models.artifact import save_model
from rnnmt.models.build import build_model
from rnnmt.models.source import SourceFormat
from rnnmt.text.vocab import Vocab, build_shortlist

from conftest import tiny_luong_config, tiny_model_config


def test_dictionary_pairs_rare_words_by_dice():
    src = ["the Obama visit", "Obama said", "the Merkel visit", "Merkel and Obama", "a visit"]
    tgt = ["la visite Obama", "Obama a dit", "la visite Merkel", "Merkel et Obama", "une visite"]
    common_src = build_shortlist(["the visit said and a"] * 3, 10)
    common_tgt = build_shortlist(["la visite a dit et une"] * 3, 10)
    entries = learn_dictionary(src, tgt, common_src, common_tgt, min_count=1)
    # Obama co-occurs with Obama in 3 pairs (Dice 2·3/(3+3) = 1) and with Merkel in 1 (2·1/(3+2)).
    assert entries["Obama"] == ("Obama", 1.0, 3)
    assert entries["Merkel"] == ("Merkel", 1.0, 2)
    assert "visit" not in entries  # in the shortlist: the model writes it itself
    assert learn_dictionary(src, tgt, common_src, common_tgt, min_count=3).keys() == {"Obama"}


def test_dictionary_ties_go_to_the_alphabetically_first_word():
    vocab = build_shortlist(["x"], 5)
    entries = learn_dictionary(["A"], ["zeta alpha"], vocab, vocab, min_count=1)
    assert entries["A"][0] == "alpha"


def test_dictionary_file_round_trip_and_bad_lines(tmp_path: Path):
    write_dictionary(tmp_path / "d.tsv", {"Haus": ("house", 0.5, 4)})
    assert load_dictionary(tmp_path / "d.tsv") == {"Haus": "house"}
    (tmp_path / "bad.tsv").write_text("Haus\n")
    from rnnmt.errors import UserError

    with pytest.raises(UserError, match="bad.tsv:1: expected 'source<TAB>target"):
        load_dictionary(tmp_path / "bad.tsv")
    assert load_dictionary(None) == {}


def test_unk_takes_the_translation_or_a_copy_of_the_most_attended_source_word():
    """Source 'Schmidt besucht Köln' read reversed (encoder positions 0=Köln, 1=besucht, 2=Schmidt)."""
    source = "Schmidt besucht Köln".split()
    replacer = UnkReplacer({"Köln": "Cologne"}, SourceFormat(eos=False, reverse=True), align_on_input=False)
    assert replacer.replace(["<unk>", "visits", "<unk>"], [2, 1, 0, 0], source) == ["Schmidt", "visits", "Cologne"]
    # Luong's content-based attention reads the step whose input is the UNK: the next one.
    on_input = UnkReplacer({}, SourceFormat(eos=False, reverse=True), align_on_input=True)
    assert on_input.replace(["<unk>", "x"], [0, 2, 1], source) == ["Schmidt", "x"]
    # GroundHog's source EOS aligns to no word: the UNK stays.
    groundhog = UnkReplacer({}, SourceFormat(), align_on_input=False)
    assert groundhog.replace(["<unk>"], [3, 0], "a b c".split()) == ["<unk>"]


@pytest.mark.parametrize("average", ["logits", "log_probs"])
def test_an_ensemble_of_one_is_that_model_and_of_two_copies_too(average):
    torch.manual_seed(0)
    model = build_model(tiny_luong_config(), 20, 20).eval()
    fmt = SourceFormat.of(tiny_luong_config())
    src, mask = fmt.batch([torch.tensor([5, 6, 7]), torch.tensor([8, 9])])
    settings = DecodeSettings(beam=3, shrink=False, max_ratio=1.5)
    alone = beam_search(model, src, mask, settings, src_words=fmt.words(mask))
    for members in ([model], [model, model]):
        together = beam_search(Ensemble(members, average), src, mask, settings, src_words=fmt.words(mask))
        assert [(h.tokens, h.align) for h in together] == [(h.tokens, h.align) for h in alone]
        assert [h.logprob for h in together] == pytest.approx([h.logprob for h in alone], abs=1e-5)


def two_members_first_step(average: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ensemble's log-probabilities at step 0 and each member's logits there."""
    torch.manual_seed(0)
    a, b = (build_model(tiny_luong_config(bias=True), 20, 20).eval() for _ in range(2))
    with torch.no_grad():  # members that disagree, so that the two averages differ
        for member in (a, b):
            member.decoder.W_s.bias.normal_(0.0, 3.0)
    src, mask = SourceFormat.of(tiny_luong_config()).batch([torch.tensor([5, 6, 7]), torch.tensor([8, 9])])
    ens = Ensemble([a, b], average)
    with torch.no_grad():
        logp, _, _ = ens.predict(*ens.begin(src, mask), 0)
        return logp, a.predict_logits(*a.begin(src, mask), 0)[0], b.predict_logits(*b.begin(src, mask), 0)[0]


def test_an_ensemble_takes_the_softmax_of_the_averaged_logits():
    """nmt.matlab's nextBeamStep: softmax((W_soft·h̃_a + W_soft·h̃_b) / 2), a normalised distribution."""
    logp, za, zb = two_members_first_step("logits")
    by_hand = [
        [math.log(math.exp((x + y) / 2) / sum(math.exp((u + v) / 2) for u, v in zip(ra, rb))) for x, y in zip(ra, rb)]
        for ra, rb in zip(za.tolist(), zb.tolist())
    ]
    assert logp.flatten().tolist() == pytest.approx([x for row in by_hand for x in row], abs=1e-5)
    assert torch.allclose(logp.exp().sum(dim=-1), torch.ones(2))


def test_an_ensemble_can_average_log_probabilities_instead():
    logp, za, zb = two_members_first_step("log_probs")
    assert torch.allclose(logp, (torch.log_softmax(za, -1) + torch.log_softmax(zb, -1)) / 2)
    assert (logp - two_members_first_step("logits")[0]).abs().max() > 0.1


@pytest.mark.parametrize(
    "configs",
    [
        (tiny_model_config(), tiny_model_config("gru", "none")),  # RNNsearch + RNNencdec (their weights had other shapes)
        (tiny_luong_config(), tiny_luong_config(attention="none")),
    ],
)
def test_an_ensemble_of_models_with_and_without_attention_aligns_by_those_that_attend(configs):
    torch.manual_seed(0)
    attending, plain = (build_model(cfg, 20, 20).eval() for cfg in configs)
    fmt = SourceFormat.of(configs[0])
    src, mask = fmt.batch([torch.tensor([5, 6, 7]), torch.tensor([8, 9])])
    ens = Ensemble([plain, attending], "logits")
    with torch.no_grad():
        _, alpha, _ = ens.predict(*ens.begin(src, mask), 0)
        expected = attending.predict(*attending.begin(src, mask), 0)[1]
    assert torch.equal(alpha, expected)
    hyps = beam_search(ens, src, mask, DecodeSettings(beam=2), src_words=fmt.words(mask))
    assert len(hyps) == 2 and all(0 <= a < src.shape[1] for h in hyps for a in h.align)


def test_unk_dict_and_unk_replacing_ensemble_translation_by_hand(tiny_corpus, tmp_path: Path, capsys):
    src_vocab, tgt_vocab = Vocab.load(tiny_corpus["src_vocab"]), Vocab.load(tiny_corpus["tgt_vocab"])
    system = {"name": "luong", "pair": "en-de", "seed": 1, "model": tiny_luong_config(bias=True), "train": {}}
    paths = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        model = build_model(system["model"], len(src_vocab), len(tgt_vocab))
        with torch.no_grad():
            model.decoder.W_s.bias[Vocab.UNK] = 10.0  # UNK is the likeliest word
            model.decoder.W_s.bias[Vocab.EOS] = 9.0
        paths.append(tmp_path / f"m{seed}.pt")
        save_model(paths[-1], model, {**system, "name": f"luong{seed}"}, src_vocab, tgt_vocab, {"src": None, "tgt": None})
    (tmp_path / "train.en").write_text("zz a\nzz b\n")
    (tmp_path / "train.de").write_text("ZZ A\nZZ B\n")
    vocab_args = ["--src-vocab", str(tiny_corpus["src_vocab"]), "--tgt-vocab", str(tiny_corpus["tgt_vocab"])]
    assert (
        main(["unk-dict", "--src", str(tmp_path / "train.en"), "--tgt", str(tmp_path / "train.de"), *vocab_args, "--output", str(tmp_path / "dict.tsv")]) == 0
    )
    assert load_dictionary(tmp_path / "dict.tsv") == {"zz": "ZZ"}
    (tmp_path / "in.txt").write_text("zz zz zz\n\na b\n")
    args = [
        "translate",
        "--model",
        *map(str, paths),
        "--input",
        str(tmp_path / "in.txt"),
        "--beam",
        "3",
        "--constant-beam",
        "--max-ratio",
        "1.5",
        "--device",
        "cpu",
    ]
    assert main([*args, "--output", str(tmp_path / "plain.txt")]) == 0
    assert main([*args, "--unk-replace", "--unk-dict", str(tmp_path / "dict.tsv"), "--output", str(tmp_path / "rep.txt")]) == 0
    plain, replaced = (tmp_path / "plain.txt").read_text().splitlines(), (tmp_path / "rep.txt").read_text().splitlines()
    assert plain[1] == replaced[1] == ""  # an empty source line translates to an empty line
    assert "<unk>" in plain[0] and "<unk>" not in replaced[0] and "ZZ" in replaced[0]
    assert [w for w, r in zip(plain[0].split(), replaced[0].split()) if w != r] == ["<unk>"] * plain[0].split().count("<unk>")
    # The same by post-processing the plain translation with its alignments.
    assert main([*args, "--output", str(tmp_path / "p2.txt"), "--align-output", str(tmp_path / "p2.align")]) == 0
    assert (
        main(
            [
                "replace-unk",
                "--model",
                str(paths[0]),
                "--hyps",
                str(tmp_path / "p2.txt"),
                "--align",
                str(tmp_path / "p2.align"),
                "--src",
                str(tmp_path / "in.txt"),
                "--unk-dict",
                str(tmp_path / "dict.tsv"),
                "--output",
                str(tmp_path / "r2.txt"),
            ]
        )
        == 0
    )
    assert (tmp_path / "r2.txt").read_text() == (tmp_path / "rep.txt").read_text()
