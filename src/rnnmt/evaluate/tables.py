"""Paper tables as DataFrames, CSV and Markdown: Bahdanau's Table 1 (BLEU) and Table 2 (learning
statistics), Luong's Tables 1, 3 and 4 (perplexity, BLEU, BLEU after UNK replacement) and Table 2 (NIST BLEU,
sacreBLEU standing in); a table of one's own systems (BLEU, sacreBLEU, perplexity); the demo check. `TABLES` maps each table kind (config `tables.<name>.kind`) to its
builder and the files one of its rows reads."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
from pandas.api.types import is_numeric_dtype

from rnnmt.errors import UserError
from rnnmt.fileio import atomic_path

DEMO_BANNER = "**Synthetic demo data** — published numbers are shown for orientation only; the data differ, so no deltas."
BLEU_NOTE = (
    "BLEU = case-sensitive corpus BLEU on Moses-tokenized text (identical to multi-bleu.perl), the papers' metric. "
    "sacreBLEU (detok) is scored on detokenized output and is not comparable with the published numbers."
)
# Published updates are far above this; a smaller value is almost surely the paper's ×10⁵ column copied as is.
MIN_PUBLISHED_UPDATES = 1000


def _field(d: dict, key: str, what: str):
    """d[key], or a UserError naming what is missing where."""
    if key not in d:
        raise UserError(f"{what} has no {key!r} entry.")
    return d[key]


def _optional(d: dict | None, key: str, what: str):
    """None for a missing block (published-only or reproduced-only row), else the required d[key]."""
    return _field(d, key, what) if d else None


def _reader(block: dict | None, what: str):
    """A getter for one row's reproduced or published numbers; every key reads None for an absent block."""
    return lambda key: _optional(block, key, what)


def _with_deltas(record: dict, deltas: Sequence[tuple[str, str, str]], demo: bool) -> dict:
    """Add each (delta column, reproduced column, published column) difference, except at the demo scale."""
    if not demo:
        for delta, ours, published in deltas:
            a, b = record[ours], record[published]
            record[delta] = None if a is None or b is None else a - b
    return record


def _bleu_record(row: dict, demo: bool) -> dict:
    system = _field(row, "system", "A Table 1 row")
    ours = _reader(_field(row, "scores", f"Table 1 row {system!r}"), f"The scores of {system!r}")
    pub = _reader(_field(row, "published", f"Table 1 row {system!r}"), f"The published numbers of {system!r}")
    record = {
        "System": system,
        "BLEU All": ours("bleu_all"),
        "BLEU No-UNK": ours("bleu_nounk"),
        "sacreBLEU All (detok)": ours("sacrebleu_all"),
        "sacreBLEU No-UNK (detok)": ours("sacrebleu_nounk"),
        "published All": pub("all"),
        "published No-UNK": pub("nounk"),
    }
    deltas = (("delta All", "BLEU All", "published All"), ("delta No-UNK", "BLEU No-UNK", "published No-UNK"))
    return _with_deltas(record, deltas, demo)


def _signature_notes(rows: list[dict]) -> list[str]:
    signatures = dict.fromkeys(_field(row["scores"], "sacrebleu_signature", f"The scores of {row['system']!r}") for row in rows if row.get("scores"))
    return [f"sacreBLEU signature: `{sig}`" for sig in signatures]


def _frame(records: list[dict], text_columns: Sequence[str], int_columns: Sequence[str] = ()) -> pd.DataFrame:
    """DataFrame with NaN/NA for missing numbers, so CSV and Markdown show them as empty cells."""
    df = pd.DataFrame.from_records(records)
    kinds = {c: ("Int64" if c in int_columns else float) for c in df.columns if c not in text_columns}
    return df.astype(kinds)


def bleu_table(rows: list[dict], *, demo: bool) -> pd.DataFrame:
    """Bahdanau's Table 1: reproduced BLEU All / No-UNK, detokenized sacreBLEU, published numbers, and deltas unless demo.

    A row is {"system", "scores": score_system() dict or None, "published": {"all", "nounk"} or None}.
    The sacreBLEU signature(s) and a note on the metrics go to `df.attrs["notes"]`, which write_table prints.
    """
    if not rows:
        raise UserError("Table 1 needs at least one system.")
    df = _frame([_bleu_record(row, demo) for row in rows], text_columns=["System"])
    df.attrs["notes"] = [BLEU_NOTE, *_signature_notes(rows)]
    return df


def _published_updates(published: dict | None, system: str) -> int | None:
    updates = _optional(published, "updates", f"The published statistics of {system!r}")
    if updates is not None and updates < MIN_PUBLISHED_UPDATES:
        raise UserError(f"The published updates of {system!r} must be a raw count (e.g. 288000, not 2.88), got {updates}.")
    return None if updates is None else round(updates)


def _learning_record(row: dict, demo: bool) -> dict:
    system = _field(row, "system", "A Table 2 row")
    ours = _reader(_field(row, "meta", f"Table 2 row {system!r}"), f"The meta.json of {system!r}")
    published = _field(row, "published", f"Table 2 row {system!r}")
    pub = _reader(published, f"The published statistics of {system!r}")
    wall_time_s = ours("wall_time_s")
    record = {
        "System": system,
        "Updates": ours("updates"),
        "Epochs": ours("epochs"),
        "Hours": None if wall_time_s is None else wall_time_s / 3600,
        "Train NLL": ours("train_nll"),
        "Dev NLL": ours("dev_nll"),
        "Device": ours("device"),
        "published Updates": _published_updates(published, system),
        "published Epochs": pub("epochs"),
        "published Hours": pub("hours"),
        "published Train NLL": pub("train_nll"),
        "published Dev NLL": pub("dev_nll"),
    }
    # No deltas for updates, epochs and hours: they are the training budget, not a result.
    deltas = (("delta Train NLL", "Train NLL", "published Train NLL"), ("delta Dev NLL", "Dev NLL", "published Dev NLL"))
    return _with_deltas(record, deltas, demo)


LEARNING_NOTE = (
    "Updates = parameter updates; Epochs = passes over the training pairs they amount to; Hours = the training job's "
    "wall time on Device, validations and checkpoints included; Train NLL = the mean NLL per sentence (nats) over the "
    "last log window (`train.log_every` updates), not a pass over the data; Dev NLL = the NLL per sentence on the dev "
    "set of the model the job published (with early stopping, the best validation's). The published hours are the "
    "paper's, on its GPUs."
)


def learning_table(rows: list[dict], *, demo: bool) -> pd.DataFrame:
    """Bahdanau's Table 2: updates, epochs, hours, train/dev NLL, reproduced and published; NLL deltas unless demo.

    A row is {"system", "meta": meta.json dict or None, "published": {"updates", "epochs", "hours",
    "train_nll", "dev_nll"} or None}. Updates are raw counts on both sides (the paper prints ×10⁵).
    Only the NLLs get deltas: updates, epochs and hours are a budget, not a result.
    """
    if not rows:
        raise UserError("Table 2 needs at least one system.")
    df = _frame([_learning_record(row, demo) for row in rows], text_columns=["System", "Device"], int_columns=["Updates", "published Updates"])
    df.attrs["notes"] = [LEARNING_NOTE]
    return df


LUONG_NOTE = (
    "Ppl = test-set perplexity per word (EOS counted). BLEU = case-sensitive corpus BLEU on Moses-tokenized "
    "text with split hyphens rejoined (multi-bleu.perl after Luong's post-processing), the paper's metric; "
    "+unk = after UNK replacement. sacreBLEU (detok) is 13a on detokenized output, the closest public "
    "stand-in for NIST mteval-v13a, and not comparable with the published tokenized BLEU."
)


def _luong_record(row: dict, demo: bool, unk_column: bool) -> dict:
    system = _field(row, "system", "A Luong table row")
    ours = _reader(row.get("scores"), f"The scores of {system!r}")
    published = row.get("published") or {}
    pub = published.get  # the paper gives some numbers per row only (no perplexity for an ensemble)
    meta = row.get("meta")
    ppl = None
    if meta is not None:
        ppl = _field(meta, "heldout_ppl", f"The meta.json of {system!r}").get("test")
    record = {"System": system, "Ppl": ppl, "BLEU": ours("bleu_all")}
    deltas = [("delta Ppl", "Ppl", "published Ppl"), ("delta BLEU", "BLEU", "published BLEU")]
    if unk_column:
        record["BLEU +unk"] = _reader(row.get("scores_unk"), f"The UNK-replaced scores of {system!r}")("bleu_all")
        deltas.append(("delta BLEU +unk", "BLEU +unk", "published BLEU +unk"))
    record["sacreBLEU (detok)"] = ours("sacrebleu_all")
    record["published Ppl"] = pub("ppl")
    record["published BLEU"] = pub("bleu")
    if unk_column:
        record["published BLEU +unk"] = pub("bleu_unk")
    return _with_deltas(record, deltas, demo)


def luong_table(rows: list[dict], *, demo: bool, unk_column: bool = False) -> pd.DataFrame:
    """Luong's Tables 1, 3 and 4: test perplexity, tokenized BLEU (and, for Table 4, BLEU after UNK
    replacement), detokenized sacreBLEU, the published numbers and, unless demo, the deltas.

    A row is {"system", "scores": score dict or None (the UNK-replaced one on a "+unk replace" row),
    "scores_unk": score dict or None, "meta": meta.json dict or None, "published": dict or None}.
    """
    if not rows:
        raise UserError("A Luong table needs at least one row.")
    df = _frame([_luong_record(row, demo, unk_column) for row in rows], text_columns=["System"])
    df.attrs["notes"] = [LUONG_NOTE, *_signature_notes(rows)]
    return df


NIST_NOTE = (
    "The published numbers are NIST BLEU (mteval-v13a on detokenized output, WMT's metric). sacreBLEU 13a on our "
    "detokenized output, case-sensitive, stands in for it and takes the deltas. BLEU (tok) = case-sensitive corpus "
    "BLEU on Moses-tokenized text with split hyphens rejoined (multi-bleu.perl), Luong's Table 1 metric, for reference."
)


def _nist_record(row: dict, demo: bool) -> dict:
    system = _field(row, "system", "A NIST BLEU table row")
    ours = _reader(row.get("scores"), f"The scores of {system!r}")
    published = row.get("published") or {}  # the paper gives no newstest2015 number for some rows
    record = {"System": system, "sacreBLEU 13a (detok)": ours("sacrebleu_all"), "BLEU (tok)": ours("bleu_all"), "published NIST BLEU": published.get("bleu")}
    return _with_deltas(record, [("delta NIST BLEU", "sacreBLEU 13a (detok)", "published NIST BLEU")], demo)


def nist_table(rows: list[dict], *, demo: bool) -> pd.DataFrame:
    """Luong's Table 2: detokenized sacreBLEU 13a standing in for the published NIST BLEU, tokenized BLEU beside,
    and, unless demo, the deltas against sacreBLEU.

    A row is {"system", "scores": score dict or None (published-only row), "published": {"bleu"} or None}.
    """
    if not rows:
        raise UserError("A NIST BLEU table needs at least one row.")
    df = _frame([_nist_record(row, demo) for row in rows], text_columns=["System"])
    df.attrs["notes"] = [NIST_NOTE, *_signature_notes(rows)]
    return df


SYSTEMS_NOTE = (
    "BLEU = case-sensitive corpus BLEU on Moses-tokenized text (identical to multi-bleu.perl). sacreBLEU (detok) is 13a "
    "on detokenized output, comparable with other work's sacreBLEU. Dev ppl and Test ppl = perplexity per target word "
    "(EOS counted) of the held-out sets at the end of training; a system reports those its `heldout` names."
)


def _systems_record(row: dict, demo: bool) -> dict:
    system = _field(row, "system", "A table row")
    ours = _reader(row.get("scores"), f"The scores of {system!r}")
    meta = row.get("meta")
    ppl = _field(meta, "heldout_ppl", f"The meta.json of {system!r}") if meta is not None else {}
    return {"System": system, "BLEU": ours("bleu_all"), "sacreBLEU (detok)": ours("sacrebleu_all"), "Dev ppl": ppl.get("dev"), "Test ppl": ppl.get("test")}


def systems_table(rows: list[dict], *, demo: bool) -> pd.DataFrame:
    """A table of one's own systems (no published numbers): tokenized BLEU, detokenized sacreBLEU, dev and test
    perplexity. A row is {"system", "scores": score dict or None, "meta": meta.json dict or None}."""
    if not rows:
        raise UserError("A systems table needs at least one row.")
    df = _frame([_systems_record(row, demo) for row in rows], text_columns=["System"])
    df.attrs["notes"] = [SYSTEMS_NOTE, *_signature_notes(rows)]
    return df


SPLITS_NOTE = (
    "BLEU = corpus BLEU on the tokenized text as the scale preprocesses it, subword units joined (identical to "
    "multi-bleu.perl; at the multi30k scale lowercased, as the published numbers are computed). sacreBLEU (detok) is 13a "
    "on detokenized output against the raw references (case-insensitive where the text was lowercased). Dev ppl = "
    "perplexity per target unit (EOS counted) on the dev set of the model training wrote (with early stopping, the best "
    "validation's); Updates = updates trained, Best = the update whose weights were kept; Hours = the training job's wall "
    "time on Device, validations included, decoding not. A published row is another system's number on the same data, "
    "with its settings in its label; delta = ours − published."
)


def _splits_record(row: dict, demo: bool, splits: Sequence[str], tolerance: float | None) -> dict:
    system = _field(row, "system", "A splits table row")
    scores = row.get("scores") or {}
    meta = row.get("meta")
    published = row.get("published") or {}
    record: dict = {"System": system}
    for column, key in (("BLEU {}", "bleu_all"), ("sacreBLEU {} (detok)", "sacrebleu_all")):
        for corpus in splits:
            record[column.format(corpus)] = _field(scores[corpus], key, f"The {corpus} scores of {system!r}") if corpus in scores else None
    info = _reader(meta, f"The meta.json of {system!r}")
    wall_time_s = info("wall_time_s")
    record |= {
        "Dev ppl": _field(meta, "heldout_ppl", f"The meta.json of {system!r}").get("dev") if meta else None,
        "Updates": info("updates"),
        "Best": info("model_update"),
        "Hours": None if wall_time_s is None else wall_time_s / 3600,
        "Device": info("device"),
    }
    for corpus in splits:
        record[f"published {corpus}"] = published.get(corpus)
    record = _with_deltas(record, [(f"delta {c}", f"BLEU {c}", f"published {c}") for c in splits], demo)
    if tolerance is not None and not demo:
        deltas = [record[f"delta {c}"] for c in splits if record.get(f"delta {c}") is not None]
        record[f"within {tolerance:g} BLEU"] = ("yes" if all(abs(d) <= tolerance for d in deltas) else "no") if deltas and scores else None
    return record


def splits_table(rows: list[dict], *, demo: bool, splits: Sequence[str], tolerance: float | None = None) -> pd.DataFrame:
    """Systems (of one or several pairs) on several held-out sets: tokenized BLEU on each of `splits` (corpus names),
    detokenized sacreBLEU, dev perplexity, updates and training hours; published rows and, unless demo, deltas, and
    whether every published number of a row is within `tolerance` BLEU of ours.

    A row is {"system", "scores": {corpus: score dict} or None, "meta": meta.json dict or None, "published": {corpus: BLEU}
    or None}."""
    if not rows:
        raise UserError("A splits table needs at least one row.")
    records = [_splits_record(row, demo, splits, tolerance) for row in rows]
    text = ["System", "Device", *(c for c in records[0] if c.startswith("within"))]
    df = _frame(records, text_columns=text, int_columns=["Updates", "Best"])
    notes = [SPLITS_NOTE]
    if tolerance is not None and not demo:
        notes.append(f"within {tolerance:g} BLEU: every delta of the row is at most {tolerance:g} BLEU (config `evaluation.reproduced.tolerance`).")
    df.attrs["notes"] = [*notes, *_signature_notes([{"system": r["system"], "scores": s} for r in rows for s in (r.get("scores") or {}).values()])]
    return df


@dataclass(frozen=True)
class TableKind:
    """A kind of paper table (config `tables.<name>.kind`): its builder; `files`, for each key of a builder row
    that holds a JSON file's contents (or a mapping of such), the key of the `rnnmt table` spec row naming that file
    (or a mapping of names to files); the spec options passed on to the builder as keywords; and the keys a row's
    `published` may have (None: the table's `splits`)."""

    build: Callable[..., pd.DataFrame]
    files: Mapping[str, str]
    options: tuple[str, ...] = ()
    published: tuple[str, ...] | None = ()


TABLES = {
    "bleu": TableKind(bleu_table, {"scores": "file"}, published=("all", "nounk")),
    "learning": TableKind(learning_table, {"meta": "file"}, published=("updates", "epochs", "hours", "train_nll", "dev_nll")),
    "luong": TableKind(
        luong_table, {"scores": "file", "scores_unk": "unk_file", "meta": "meta"}, options=("unk_column",), published=("ppl", "bleu", "bleu_unk")
    ),
    "nist": TableKind(nist_table, {"scores": "file"}, published=("bleu",)),
    "systems": TableKind(systems_table, {"scores": "file", "meta": "meta"}),
    "splits": TableKind(splits_table, {"scores": "splits", "meta": "meta"}, options=("splits", "tolerance"), published=None),
}
TABLE_KINDS = tuple(TABLES)


SEEDS_NOTE = (
    "With several seeds a reproduced number is the mean over the seeds ± the sample standard deviation (n = Seeds); "
    "the CSV has each seed's number. Published numbers and deltas are of the mean."
)


def reproduced_columns(df: pd.DataFrame) -> list[str]:
    """The numeric columns this run measured: not the published numbers, not the deltas."""
    return [c for c in df.columns if is_numeric_dtype(df[c]) and not str(c).startswith(("published", "delta"))]


def over_seeds(df: pd.DataFrame, per_seed: Sequence[Sequence[tuple[int, pd.Series]] | None]) -> pd.DataFrame:
    """`df` with each row that has per-seed rows [(seed, row)] replaced by their mean; the sample standard
    deviation goes to `attrs["spread"]` for the Markdown, each seed's numbers to CSV-only columns, n to "Seeds"."""
    # The published numbers are the same for every seed; the rest are averaged, and a mean of counts need not be whole.
    numeric = [c for c in df.columns if is_numeric_dtype(df[c]) and not str(c).startswith("published")]
    reproduced = reproduced_columns(df)
    out = df.astype({c: "Float64" for c in numeric if str(df[c].dtype) == "Int64"})
    out.attrs = {**df.attrs, "spread": {}, "csv_only": [], "notes": [*df.attrs.get("notes", []), SEEDS_NOTE]}
    out["Seeds"] = pd.array([len(rows) if rows else 1 for rows in per_seed], dtype="Int64")
    for i, rows in enumerate(per_seed):
        if not rows:
            continue
        for c in numeric:
            values = pd.Series([row[c] for _, row in rows], dtype=float)
            out.at[i, c] = values.mean()
            if c in reproduced:
                out.attrs["spread"][(i, c)] = values.std(ddof=1) if len(values) > 1 else math.nan
                for seed, row in rows:
                    column = f"{c} (seed {seed})"
                    if column not in out.columns:
                        out[column] = pd.array([pd.NA] * len(out), dtype="Float64")
                        out.attrs["csv_only"].append(column)
                    out.at[i, column] = row[c]
    return out


def table_kind(kind: str) -> TableKind:
    if kind not in TABLES:
        raise UserError(f"Table kind {kind!r} is unknown; expected one of {', '.join(TABLE_KINDS)}.")
    return TABLES[kind]


CLAIMS_NOTE = (
    "Δ = BLEU(A) − BLEU(B), tokenized BLEU on the test set as in the tables. The interval is the 2.5th–97.5th "
    "percentile of Δ over paired bootstrap resamples of the test sentences (Koehn 2004); P(A ≤ B) is the share "
    "of resamples in which A does not beat B. *holds*: the whole interval is above 0. *reproduced*: the claim holds and "
    "the published Δ lies within the interval widened by the tolerance (BLEU) on each side; *not comparable*: this "
    "scale's data and sizes are not the paper's (config `evaluation.reproduced`), or no Δ was published."
)


def verdict(low: float, high: float) -> str:
    """Whether a 95% interval of BLEU(A) − BLEU(B) supports 'A beats B'."""
    return "holds" if low > 0 else "reversed" if high < 0 else "not significant"


def reproduction(low: float, high: float, published: float | None, tolerance: float, comparable: bool) -> str:
    """Whether a claim is reproduced: it holds and the published difference lies within the 95% interval widened by
    `tolerance` a side; "not comparable" where the scale's data and sizes are not the paper's or nothing was published."""
    if not comparable or published is None:
        return "not comparable"
    return "reproduced" if low > 0 and low - tolerance <= published <= high + tolerance else "not reproduced"


SEEDED_CLAIMS_NOTE = (
    "With several seeds (n A/n B), Δ is the difference of mean BLEU over seeds and the interval comes from a two-level "
    'bootstrap (Clark et al. 2011, "Better hypothesis testing for statistical machine translation: controlling for '
    "optimizer instability\"): each resample draws every system's seeds with replacement, then the test sentences. "
    "The seed-only interval resamples seeds on the full test set, the sentence-only one sentences with every seed; "
    "the wider of the two is the larger source of variation."
)


def _claim_record(r: dict) -> dict:
    record = {
        "paper": r["paper"],
        "claim": r["claim"],
        "A": r["a"],
        "B": r["b"],
        "delta published": r.get("published"),
        "delta reproduced": r["delta"],
        "95% interval": f"[{r['low']:+.2f}, {r['high']:+.2f}]",
        "P(A ≤ B)": r["p_not_better"],
        "verdict": verdict(r["low"], r["high"]),
        "tolerance": r["tolerance"],
        "reproduced": reproduction(r["low"], r["high"], r.get("published"), r["tolerance"], r["comparable"]),
    }
    if "seed_low" in r:
        seeds, sentences = r["seed_high"] - r["seed_low"], r["sentence_high"] - r["sentence_low"]
        record |= {
            "seeds": f"{r['seeds_a']}/{r['seeds_b']}",
            "seed-only 95%": f"[{r['seed_low']:+.2f}, {r['seed_high']:+.2f}]",
            "sentence-only 95%": f"[{r['sentence_low']:+.2f}, {r['sentence_high']:+.2f}]",
            "larger source": "seeds" if seeds > sentences else "sentences",
        }
    return record


def build_claims_table(rows: list[dict]) -> pd.DataFrame:
    """rows: {paper, claim, a, b, published (Δ or None), tolerance, comparable, delta, low, high, p_not_better, samples},
    and with several seeds {seed_low, seed_high, sentence_low, sentence_high, seeds_a, seeds_b}."""
    text = ["paper", "claim", "A", "B", "95% interval", "verdict", "reproduced", "seeds", "seed-only 95%", "sentence-only 95%", "larger source"]
    records = [_claim_record(r) for r in rows]
    df = _frame(records, [c for c in text if any(c in record for record in records)])
    samples = {r["samples"] for r in rows}
    seeded = [SEEDED_CLAIMS_NOTE] if any("seed_low" in r for r in rows) else []
    df.attrs["notes"] = [CLAIMS_NOTE + (f" {samples.pop()} resamples." if len(samples) == 1 else ""), *seeded]
    return df


VARIANTS_NOTE = (
    "Each variant (config `variants`) is compared with the system it changes, on the same test set. BLEU = tokenized "
    "BLEU as in the paper tables; sacreBLEU (detok) = 13a on detokenized output. delta = variant − baseline; the interval "
    "is the 2.5th–97.5th percentile of delta over paired bootstrap resamples of the test sentences (Koehn 2004), and p "
    "the two-sided p-value of no difference the same resamples give: twice the share of them on the rarer side of 0 "
    "(so p < 0.05 where the interval excludes 0); with several seeds, the two-level bootstrap over seeds and sentences "
    "of the claims table. One seed a system shows the test sentences' variation only, not the seeds'. Ppl = perplexity "
    "per target word of the model training wrote (with early stopping, the best validation's). BLEU by length splits "
    "the test set at the sentence length in the column's name; results/figures/variants_length.png draws the whole "
    "curve and variants_training.png the learning curves."
)


def _p(value: float | None) -> str | None:
    """A p-value as the tables print it: three decimals (two would show most significant ones as 0.00)."""
    return None if value is None else f"{value:.3f}"


def _variant_record(r: dict, threshold: int, by: str) -> dict:
    """One row of the variants table: a baseline's numbers, or a variant's with its differences from the baseline."""
    bleu, sacre = r.get("bleu_diff"), r.get("sacre_diff")
    return {
        "System": r["label"],
        "Compared with": r.get("baseline") or "(the baseline)",
        "Seeds": r["seeds"],
        "BLEU": r["bleu"],
        "delta BLEU": bleu.delta if bleu else None,
        "95% interval": f"[{bleu.low:+.2f}, {bleu.high:+.2f}]" if bleu else "",
        "p (BLEU)": _p(bleu.p_value if bleu else None),
        "sacreBLEU (detok)": r["sacrebleu"],
        "delta sacreBLEU": sacre.delta if sacre else None,
        "p (sacreBLEU)": _p(sacre.p_value if sacre else None),
        "Dev ppl": r["dev_ppl"],
        "Test ppl": r["test_ppl"],
        f"BLEU, {by} ≤ {threshold} words": r["short"],
        f"BLEU, {by} > {threshold} words": r["long"],
    }


def build_variants_table(rows: list[dict], threshold: int, by: str = "source") -> pd.DataFrame:
    """rows: a baseline's {label, seeds, bleu, sacrebleu, dev_ppl, test_ppl, short, long} (means over seeds), then each
    of its variants' with {baseline (its label), bleu_diff, sacre_diff} (significance.Difference against the baseline); the
    length columns split at `threshold` words of the `by` side (evaluation.length_curve.by)."""
    if not rows:
        raise UserError("The variants table needs at least one variant.")
    records = [_variant_record(r, threshold, by) for r in rows]
    df = _frame(records, ["System", "Compared with", "95% interval", "p (BLEU)", "p (sacreBLEU)"], int_columns=["Seeds"])
    if (df["Seeds"] == 1).all():
        df = df.drop(columns="Seeds")
    samples = {r["bleu_diff"].samples for r in rows if r.get("bleu_diff")}
    df.attrs["notes"] = [VARIANTS_NOTE + (f" {samples.pop()} resamples." if len(samples) == 1 else "")]
    return df


def build_coverage_table(rows: list[dict]) -> pd.DataFrame:
    """rows: {paper, item, status, output, note, this run}: every table and figure of the papers."""
    records = [
        {"paper": r["paper"], "item": r["item"], "status": r["status"], "this run": r["this run"], "output": r["output"] or "", "note": r["note"]} for r in rows
    ]
    return pd.DataFrame.from_records(records, columns=["paper", "item", "status", "this run", "output", "note"])


def _is_missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _cell(value, signed: bool, spread: float | None = None) -> str:
    if _is_missing(value):
        return "—"
    if isinstance(value, float):
        text = f"{value:+.2f}" if signed else f"{value:.2f}"
        return text if spread is None or _is_missing(spread) else f"{text} ± {spread:.2f}"
    return str(value).replace("|", "\\|")


def markdown_table(df: pd.DataFrame) -> str:
    """A pipe table: numbers right-aligned with 2 decimals, deltas signed, missing values as "—", a mean over
    seeds with its standard deviation (`attrs["spread"]`); CSV-only columns (`attrs["csv_only"]`) left out."""
    columns = [c for c in df.columns if c not in df.attrs.get("csv_only", [])]
    spread = df.attrs.get("spread", {})
    numeric = [is_numeric_dtype(df[c]) for c in columns]
    header = "| " + " | ".join(str(c) for c in columns) + " |"
    rule = "|" + "|".join("---:" if num else ":---" for num in numeric) + "|"
    body = ["| " + " | ".join(_cell(df.at[i, c], str(c).startswith("delta"), spread.get((i, c))) for c in columns) + " |" for i in df.index]
    return "\n".join([header, rule, *body])


def write_table(
    df: pd.DataFrame, csv_path: str | os.PathLike, md_path: str | os.PathLike, *, title: str, banner: str | None, preface: Sequence[str] = ()
) -> None:
    """Write the table as CSV and as Markdown (title, banner, preface, table, `df.attrs["notes"]`), both atomically."""
    with atomic_path(csv_path) as tmp:
        df.to_csv(tmp, index=False, float_format="%.2f")
    parts = [f"# {title}", *([banner] if banner else []), *preface, markdown_table(df), *df.attrs.get("notes", [])]
    with atomic_path(md_path) as tmp:
        tmp.write_text("\n\n".join(parts) + "\n", encoding="utf-8")


def _system_scores(scores: dict[str, dict], system: str) -> tuple[float, dict]:
    """(BLEU All, length split) of one system."""
    what = f"The scores of {system!r}"
    return _field(scores[system], "bleu_all", what), _field(scores[system], "split", what)


def _split_side(split: dict, side: str, system: str) -> dict:
    return _field(split, side, f"The length split of {system!r}")


def attention_check(scores: dict[str, dict], *, search: str = "RNNsearch-50", encdec: str = "RNNencdec-50") -> tuple[bool, str]:
    """The demo's acceptance check: (a) search beats encdec on BLEU All; (b) it holds up better on long sentences.

    Long/short is the "split" of score_system (length > / <= threshold). Returns (passed, report text).
    """
    missing = [name for name in (search, encdec) if name not in scores]
    if missing:
        raise UserError(f"The attention check needs scores for {', '.join(missing)}.")
    (bleu_s, split_s), (bleu_e, split_e) = _system_scores(scores, search), _system_scores(scores, encdec)
    if split_s.get("threshold") != split_e.get("threshold"):
        raise UserError(f"{search!r} and {encdec!r} were split at different length thresholds.")
    ok_a = bleu_s > bleu_e
    line_a = f"(a) BLEU All: {search} {bleu_s:.2f}, {encdec} {bleu_e:.2f}, lead {bleu_s - bleu_e:+.2f} -> {'pass' if ok_a else 'FAIL'}"
    ok_b, lines_b = _length_robustness(split_s, split_e, search, encdec)
    passed = ok_a and ok_b
    text = [f"Attention check: {search} vs {encdec}", line_a, *lines_b, f"Result: {'PASS' if passed else 'FAIL'}"]
    return passed, "\n".join(text)


def _length_robustness(split_s: dict, split_e: dict, search: str, encdec: str) -> tuple[bool, list[str]]:
    """Part (b): does search keep a larger share of its short-sentence BLEU on the long sentences than encdec?

    Bahdanau et al. 2014, section 5.1 (Figure 2): RNNencdec's BLEU "dramatically drops as the length of the
    sentences increases" while RNNsearch-50 "shows no performance deterioration". Each system's BLEU on long
    sentences over its BLEU on short ones says that for any BLEU level; the difference of the two systems'
    leads does not when the weaker system sits near BLEU's floor on both sides, as the demo's RNNencdec does.
    The leads are printed beside it.
    """
    threshold = split_s["threshold"]
    sides = {side: (_split_side(split_s, side, search), _split_side(split_e, side, encdec)) for side in ("short", "long")}
    bleu = {side: [entry["bleu"] for entry in pair] for side, pair in sides.items()}
    if None in bleu["short"] + bleu["long"] or min(bleu["short"]) <= 0:
        return False, [f"(b) cannot compare: no sentences, or no BLEU, on one side of length {threshold} -> FAIL"]
    kept = [long / short for long, short in zip(bleu["long"], bleu["short"])]
    ok = kept[0] > kept[1]
    shares = ", ".join(f"{name} {bleu['long'][k]:.2f} / {bleu['short'][k]:.2f} = {kept[k]:.2f}" for k, name in enumerate((search, encdec)))
    lead = {side: values[0] - values[1] for side, values in bleu.items()}
    return ok, [
        f"(b) BLEU on length > {threshold} (n={sides['long'][0]['n']}) over length <= {threshold} "
        f"(n={sides['short'][0]['n']}): {shares} -> {'pass' if ok else 'FAIL'}",
        f"    BLEU lead of {search}: length <= {threshold} {lead['short']:+.2f}, length > {threshold} {lead['long']:+.2f}",
    ]
