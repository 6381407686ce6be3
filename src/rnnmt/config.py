"""config.yaml: schema validation with defaults, and the views the workflow needs (systems of a scale)."""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from rnnmt.errors import UserError
from rnnmt.train.defaults import RESOLVED_KEYS, TRAIN_DEFAULTS

SCHEMA = Path("workflow") / "schemas" / "config.schema.yaml"


def _fill_defaults(validator_class: type) -> type:
    """A validator class that also writes schema `default`s into the instance (as snakemake's validate)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema) -> Iterator[jsonschema.ValidationError]:
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def _describe(error: jsonschema.ValidationError) -> str:
    """One sentence naming the key and what was expected."""
    where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
    if error.validator == "additionalProperties":
        unexpected = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        allowed = ", ".join(sorted(error.schema.get("properties", {}))) or "none"
        prefix = f"{where}." if error.absolute_path else ""
        return f"unknown key '{prefix}{unexpected[0]}' (allowed here: {allowed})"
    return f"key '{where}': {error.message}"


def validate(config: dict[str, Any], schema_path: Path) -> dict[str, Any]:
    """Merge each scale's `base` in, check `config` against the schema, fill defaults in place, check cross-references."""
    schema = yaml.safe_load(Path(schema_path).read_text())
    inherit_scales(config)
    cls = _fill_defaults(jsonschema.validators.validator_for(schema))
    errors = sorted(cls(schema).iter_errors(config), key=lambda e: (len(e.absolute_path), str(e.absolute_path)))
    if errors:
        raise UserError(f"config: {_describe(errors[0])}.")
    add_variants(config)
    _check_references(config)
    _check_only_tables(config)
    check_claims(config)
    return config


# What a system, a variant and a scale's overrides set: the sections of a resolved system (resolve_system).
STAGE_KEYS = ("model", "train", "decode", "heldout", "nounk")
# A system's or variant's name names its runs and files (SYSTEM.seedN, SYSTEM.unk, folders): no dots or slashes.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def add_variants(config: dict[str, Any]) -> None:
    """Each entry of `variants` as a system of its own name, listed in every scale that lists its baseline: the baseline's
    entry (resolve_system then layers the variant's own settings last). A name already taken would write over another
    system's results, so it stops."""
    for name, variant in config["variants"].items():
        base = variant["of"]
        if not NAME.fullmatch(name):
            raise UserError(f"config: variants.{name}: a variant's name names its runs and files; expected letters, digits, '-' and '_' only.")
        if base in config["variants"] and base != name:
            raise UserError(f"config: variants.{name}.of '{base}' is a variant; a variant changes a system under 'systems' (e.g. of: rnnsearch-50).")
        if base not in config["systems"]:
            raise UserError(f"config: variants.{name}.of '{base}' is not under 'systems'; a variant changes one system (e.g. of: rnnsearch-50).")
        system = {k: v for k, v in config["systems"][base].items() if k != "reproduces"} | {"label": variant.get("label", name)}
        # The entry this function made on an earlier validation of the same config is equal to `system`; any other is not.
        if name == base or config["systems"].get(name, system) != system or name in config.get("ensembles", {}):
            raise UserError(
                f"config: variants.{name} has the name of a system or an ensemble; give the variant a name of its own, so that its "
                f"results are written beside {base}'s, not over another's."
            )
        config["systems"][name] = system
        for scale in config["scales"].values():
            if base in scale["systems"] and name not in scale["systems"]:
                scale["systems"].append(name)


def _check_only_tables(config: dict[str, Any]) -> None:
    """Every table `only_tables` names must have a row the active scale trains (an ensemble: all its members)."""
    scale = config["scale"]
    for table in config.get("only_tables") or []:
        rows = [row["system"] for row in config["tables"][table]["rows"] if "system" in row]
        at = [name for name, s in config["scales"].items() if any(trained_for(config, {r}) <= set(s["systems"]) for r in rows)]
        if not any(trained_for(config, {r}) <= set(active_scale(config)["systems"]) for r in rows):
            elsewhere = f"scale {' or '.join(at)} makes it" if at else "no scale makes it"
            raise UserError(
                f"config: only_tables names {table}, which scale '{scale}' cannot make: it trains none of the table's systems "
                f"({', '.join(dict.fromkeys(rows))}; see scales.{scale}.systems); {elsewhere}."
            )


def _yaml_typed(value: Any) -> Any:
    """A value typed as YAML types it in config.yaml: "3" is 3, "[1,2]" items are 1 and 2, "null" is None."""
    if isinstance(value, str):
        return yaml.safe_load(value) if value.strip() else value
    if isinstance(value, list):
        return [_yaml_typed(v) for v in value]
    return value


def type_command_line(config: dict[str, Any], given: dict[str, Any]) -> None:
    """Retype in `config` the values given with `snakemake --config`, which keeps every scalar a string
    (`seeds=[1,2,3]` arrives as ['1', '2', '3']), as they would be typed in config.yaml."""
    for key, value in given.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            type_command_line(config[key], value)
        else:
            config[key] = _yaml_typed(value)


def inherit_scales(config: dict[str, Any]) -> None:
    """Replace each scale that names a `base` by its base (itself resolved first) with the scale's own keys merged in."""
    scales = config.get("scales")
    if not isinstance(scales, dict):
        return  # the schema reports it
    for name in scales:
        chain = scale_chain(config, name)
        merged: dict[str, Any] = {}
        for scale in chain:
            merged = deep_merge(merged, config["scales"][scale])
        scales[name] = merged


def scale_chain(config: dict[str, Any], name: str) -> list[str]:
    """A scale and the scales it inherits from, the root first."""
    chain = [name]
    while isinstance(config["scales"][chain[0]], dict) and (base := config["scales"][chain[0]].get("base")) is not None:
        if base not in config["scales"]:
            raise UserError(f"config: scales.{chain[0]}.base '{base}' is not a scale (known: {', '.join(config['scales'])}).")
        if base in chain:
            raise UserError(f"config: scales {' -> '.join(reversed([base, *chain]))} inherit in a cycle.")
        chain.insert(0, base)
    return chain


def _check_references(config: dict[str, Any]) -> None:
    """Names used in one section must exist in another."""
    if config["scale"] not in config["scales"]:
        raise UserError(f"config: scale '{config['scale']}' is not one of the scales under 'scales' ({', '.join(config['scales'])}).")
    for name, system in config["systems"].items():
        if system["pair"] not in config["pairs"]:
            raise UserError(f"config: systems.{name}.pair '{system['pair']}' is not defined under 'pairs'.")
        recipe(config, system["recipe"])
    if unknown := [t for t in config.get("only_tables") or [] if t not in config["tables"]]:
        raise UserError(f"config: only_tables names {', '.join(unknown)}, which are not under 'tables' (known: {', '.join(config['tables'])}).")
    for scale, scale_ in config["scales"].items():
        unknown = [s for s in scale_["systems"] if s not in config["systems"]]
        if unknown:
            raise UserError(f"config: scales.{scale}.systems names {', '.join(unknown)}, which are not under 'systems'.")
    for name, figure in config["figures"].items():
        _check_figure(config, name, figure)
    _check_label_words(config)
    for scale, scale_ in config["scales"].items():
        for pair in scale_["corpora"]:
            if pair not in config["pairs"]:
                raise UserError(f"config: scales.{scale}.corpora.{pair} is not a pair defined under 'pairs'.")
    for name in active_systems(config):
        if system_pair(config, name) not in config["scales"][config["scale"]]["corpora"]:
            raise UserError(f"config: systems.{name} translates {system_pair(config, name)}, which has no corpora at scale '{config['scale']}'.")
        resolve_system(config, name)
    for name, ensemble in config.get("ensembles", {}).items():
        unknown = [m for m in ensemble["members"] if m not in config["systems"]]
        if unknown:
            raise UserError(f"config: ensembles.{name} names {', '.join(unknown)}, which are not under 'systems'.")
        if name in config["systems"]:
            raise UserError(f"config: '{name}' is both a system and an ensemble; give the ensemble another name.")
        if len({config["systems"][m]["pair"] for m in ensemble["members"]}) > 1:
            raise UserError(f"config: the members of ensembles.{name} translate different pairs; an ensemble needs one.")
    for name, table in config["tables"].items():
        _check_table_kind(name, table)
        for role, system in table.get("check", {}).items():
            if system not in config["systems"]:
                raise UserError(f"config: tables.{name}.check.{role} '{system}' is not under 'systems'.")
        for row in table["rows"]:
            if "system" in row and row["system"] not in config["systems"] and row["system"] not in config.get("ensembles", {}):
                raise UserError(f"config: tables.{name} names system '{row['system']}', which is under neither 'systems' nor 'ensembles'.")
            if "system" not in row and "label" not in row:
                raise UserError(f"config: every row of tables.{name} needs 'system' or 'label'.")
            # A table scores its pairs' test sets (tables.<name>.test, .splits), so every row must translate one of them.
            pairs = table_pairs(config, name)
            if "system" in row and declared_pair(config, row["system"]) not in pairs:
                raise UserError(
                    f"config: tables.{name} is on {' and '.join(pairs)}, but its row '{row['system']}' translates "
                    f"{declared_pair(config, row['system'])}; expected only {' or '.join(pairs)} systems."
                )


def _check_table_kind(name: str, table: dict[str, Any]) -> None:
    """`splits` is a splits table's and it needs them; a row's published numbers are those its table's kind shows."""
    from rnnmt.evaluate.tables import table_kind

    kind = table_kind(table["kind"])
    if (kind.published is None) != ("splits" in table):
        raise UserError(f"config: tables.{name} is a {table['kind']} table; `splits` (the held-out sets to score) goes with kind splits and only there.")
    allowed = table["splits"] if kind.published is None else kind.published
    for row in table["rows"]:
        if unknown := [key for key in row.get("published") or {} if key not in allowed]:
            what = "the corpora of its `splits`" if kind.published is None else ", ".join(allowed) or "no published numbers"
            raise UserError(f"config: a row of tables.{name} has a published {unknown[0]!r}; a {table['kind']} table takes {what}.")


def _check_label_words(config: dict[str, Any]) -> None:
    """Every `{WORD}` of a label, table title or figure legend is under `label_words`; a figure's title may also
    name {systems}, and a table row without a system has no settings to fill words from."""
    section = {name: "variants" if name in config.get("variants", {}) else "systems" for name in config["systems"]}
    templates = [(f"{section[name]}.{name}.label", s["label"]) for name, s in config["systems"].items()]
    for name, table in config["tables"].items():
        templates.append((f"tables.{name}.title", table["title"]))
        templates += [(f"tables.{name}.rows[{i}].label", row["label"]) for i, row in enumerate(table["rows"]) if "label" in row and "system" in row]
        if words := [w for row in table["rows"] if "system" not in row for w in label_words(row["label"])]:
            raise UserError(f"config: a row of tables.{name} without a system names {{{words[0]}}}; only a system's row has settings to fill it from.")
    for name, figure in config["figures"].items():
        templates += [(f"figures.{name}.legend", figure["legend"])] if "legend" in figure else []
        templates += [(f"figures.{name}.rows[{i}].legend", row["legend"]) for i, row in enumerate(figure.get("rows", [])) if "legend" in row]
        templates += [(f"figures.{name}.title", figure["title"].replace("{systems}", ""))]
    known = config.get("label_words", {})
    for where, template in templates:
        if unknown := [w for w in label_words(template) if w not in known]:
            raise UserError(f"config: {where} names {{{unknown[0]}}}, which is not under 'label_words' (known: {', '.join(known) or 'none'}).")


def _check_figure(config: dict[str, Any], name: str, figure: dict[str, Any]) -> None:
    """A figure's table or rows name what exists, and no more curves or other systems than its kind draws."""
    from rnnmt.evaluate.figures import figure_kind

    kind = figure_kind(figure["kind"])
    if "variants" in figure:
        if kind.max_curves is not None:
            raise UserError(
                f"config: figures.{name} draws every variant and its baseline (variants: true); a {figure['kind']} figure draws at most {kind.max_curves}."
            )
        return
    if "table" in figure:
        if figure["table"] not in config["tables"]:
            raise UserError(f"config: figures.{name}.table '{figure['table']}' is not under 'tables'.")
        return
    known = config["systems"] if kind.trained else {**config["systems"], **config.get("ensembles", {})}
    for row in figure["rows"]:
        for system in (row["system"], *row.get("stand_in", [])):
            if system not in known:
                what = "'systems' (a trained system: it draws training files)" if kind.trained else "'systems' or 'ensembles'"
                raise UserError(f"config: figures.{name} names system '{system}', which is not under {what}.")
    if kind.max_curves is not None and len(figure["rows"]) > kind.max_curves:
        raise UserError(f"config: figures.{name} has {len(figure['rows'])} rows; a {figure['kind']} figure draws at most {kind.max_curves}.")


def read_yaml(path: Path) -> Any:
    """A YAML file's content; a syntax error names the file, line and column (Snakemake's own message names neither)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"config file {path} cannot be read ({exc.__class__.__name__}: {exc}); expected a UTF-8 YAML file.") from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        context = f" ({exc.context} at line {exc.context_mark.line + 1})" if exc.context and exc.context_mark else ""
        raise UserError(f"config file {path}{where}: {exc.problem or 'invalid YAML'}{context}; fix the YAML there.") from None
    except yaml.YAMLError as exc:
        raise UserError(f"config file {path} is not valid YAML ({exc}).") from None


def read_mapping(path: Path, empty: dict[str, Any] | None = None) -> dict[str, Any]:
    """A config file's top-level mapping (`empty` stands for an empty file, when given)."""
    config = read_yaml(path)
    if config is None and empty is not None:
        return empty
    if not isinstance(config, dict):
        found = "nothing" if config is None else f"a {type(config).__name__}"
        raise UserError(f"config file {path} holds {found}; expected a YAML mapping of settings (scale:, systems:, ...).")
    return config


def load(path: Path, schema_path: Path) -> dict[str, Any]:
    """Read and validate a config file."""
    return validate(read_mapping(path), schema_path)


def schema_beside(config_path: Path) -> Path:
    """The config schema of this source checkout, else the one in the workflow beside `config_path`."""
    here = Path(__file__).resolve().parents[2] / SCHEMA
    return here if here.exists() else Path(config_path).parent / SCHEMA


def load_files(paths: list[Path], scale: str | None = None) -> dict[str, Any]:
    """Config files merged in order (as `snakemake --configfile A B`), at `scale` if given, validated."""
    merged: dict[str, Any] = {}
    for path in paths:
        merged = deep_merge(merged, read_mapping(path, empty={}))
    if scale is not None:
        merged["scale"] = scale
    return validate(merged, schema_beside(paths[0]))


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A copy of `base` with `override` merged in recursively (dicts merge, other values replace)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else copy.deepcopy(value)
    return out


def active_scale(config: dict[str, Any]) -> dict[str, Any]:
    """The active scale's settings (its `base` merged in)."""
    return config["scales"][config["scale"]]


def tokenizer(config: dict[str, Any], pair: str) -> dict[str, bool]:
    """How a pair's raw text is tokenized at the active scale: the pair's settings with the scale's `tokenizer` over them."""
    return {**config["pairs"][pair]["tokenizer"], **active_scale(config).get("tokenizer", {})}


def reproducible(config: dict[str, Any]) -> bool:
    """Whether the jobs run in reproducible mode (rnnmt/reproducible.py): the top-level switch, else the scale's."""
    given = config.get("reproducible")
    return bool(active_scale(config).get("reproducible", False)) if given is None else given


def trained_for(config: dict[str, Any], names: set[str]) -> set[str]:
    """The systems that must train for `names` (systems and ensembles) to translate: an ensemble's members."""
    ensembles = config.get("ensembles", {})
    return {m for name in names for m in (ensembles[name]["members"] if name in ensembles else [name])}


def tables_systems(config: dict[str, Any], tables: list[str]) -> set[str]:
    """The systems the rows of `tables` train."""
    return trained_for(config, {row["system"] for t in tables for row in config["tables"][t]["rows"] if "system" in row})


def active_systems(config: dict[str, Any]) -> list[str]:
    """Systems that run at the active scale (its `systems`; with `only_tables`, those the tables need and their variants), in the
    order of `systems`."""
    listed = set(active_scale(config)["systems"])
    if config.get("only_tables"):
        needed = tables_systems(config, config["only_tables"])
        listed &= needed | {name for name, variant in config.get("variants", {}).items() if variant["of"] in needed}
    return [name for name in config["systems"] if name in listed]


def active_ensembles(config: dict[str, Any]) -> list[str]:
    """Ensembles whose members all run at the active scale."""
    systems = set(active_systems(config))
    return [name for name, e in config.get("ensembles", {}).items() if set(e["members"]) <= systems]


def pair_at_scale(config: dict[str, Any], pair: str) -> str:
    """The pair a system or table of `pair` runs on at the active scale (the demo maps every pair to its own)."""
    return active_scale(config).get("pair_map", {}).get(pair, pair)


def representative(config: dict[str, Any], name: str) -> str:
    """The system whose settings stand for `name`: itself, or an ensemble's first member."""
    return config["ensembles"][name]["members"][0] if name in config.get("ensembles", {}) else name


def declared_pair(config: dict[str, Any], name: str) -> str:
    """The pair a system or an ensemble names in config.yaml (before any scale's `pair_map`)."""
    return config["systems"][representative(config, name)]["pair"]


def system_pair(config: dict[str, Any], name: str) -> str:
    """The language pair of a system or an ensemble at the active scale."""
    return pair_at_scale(config, declared_pair(config, name))


def table_pairs(config: dict[str, Any], name: str) -> list[str]:
    """The pairs a table's rows translate, as config.yaml names them (`tables.<name>.pair`: one, or a list)."""
    pair = config["tables"][name]["pair"]
    return [pair] if isinstance(pair, str) else list(pair)


def table_test_set(config: dict[str, Any], name: str, test_sets: list[str], pair: str | None = None) -> str:
    """The test corpus a table scores: the first of its `test` names in `test_sets` (those of `pair`, its first pair's
    unless given), else the first."""
    wanted = config["tables"][name].get("test")
    if wanted is None:
        return test_sets[0]
    found = next((corpus for corpus in wanted if corpus in test_sets), None)
    if found is None:
        scale, pair = config["scale"], pair_at_scale(config, pair or table_pairs(config, name)[0])
        raise UserError(
            f"config: tables.{name}.test names {' or '.join(wanted)}, but the test sets of {pair} at scale '{scale}' "
            f"are {', '.join(test_sets)}; expected one of the table's among them (scales.{scale}.corpora.{pair}.test)."
        )
    return found


def selection_method(config: dict[str, Any], pair: str) -> str:
    """How a pair's training data are selected: the pair's own `selection.method`, or the scale's."""
    scale = active_scale(config)
    return scale["corpora"].get(pair, {}).get("selection", {}).get("method", scale["selection"]["method"])


def recipe(config: dict[str, Any], name: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """A recipe with its `base` recipes merged in (the base first)."""
    if name not in config.get("recipes", {}):
        raise UserError(f"config: recipe '{name}' is not under 'recipes' (known: {', '.join(config.get('recipes', {})) or 'none'}).")
    if name in seen:
        raise UserError(f"config: recipes {' -> '.join([*seen, name])} form a cycle.")
    spec = {k: v for k, v in config["recipes"][name].items() if k != "base"}
    base = config["recipes"][name].get("base")
    return deep_merge(recipe(config, base, (*seen, name)), spec) if base else spec


def resolve_system(config: dict[str, Any], name: str) -> dict[str, Any]:
    """Everything about one system at the active scale: model, train, decode, heldout, nounk.

    Decoding starts from `evaluation` (GroundHog's beam). Then, in order: the system's recipe, the
    recipe's overrides for the active scale and the scales it inherits (base first; at least one must
    exist), the scale's own model/train/decode, the system's own settings, its overrides for the scale;
    for a variant, the baseline's (its system entry) and then the variant's own settings and overrides.
    """
    system, scale = config["systems"][name], config["scale"]
    chain = scale_chain(config, scale)
    evaluation = config["evaluation"]
    spec = recipe(config, system["recipe"])
    overrides = spec.get("overrides", {})
    if not any(s in overrides for s in chain):
        raise UserError(
            f"config: recipe '{system['recipe']}' (of system '{name}') has no overrides for scale '{scale}'"
            f"{' or ' + ', '.join(chain[:-1]) if len(chain) > 1 else ''}; add recipes.{system['recipe']}.overrides.{scale}"
            f" ({{}} if the recipe's own settings are meant)."
        )
    variant = config.get("variants", {}).get(name)
    layers = [
        {"decode": {"beam": evaluation["beam"], "normalize": evaluation["normalize"]}, "heldout": config["heldout"], "nounk": True},
        {k: v for k, v in spec.items() if k in STAGE_KEYS},
        *(overrides.get(s, {}) for s in chain),
        {k: v for k, v in active_scale(config).items() if k in STAGE_KEYS},
        *_own_layers(system, chain),
        *(_own_layers(variant, chain) if variant else []),
    ]
    resolved: dict[str, Any] = {"model": {}, "train": {}}
    for layer in layers:
        resolved = deep_merge(resolved, layer)
    return resolved


def _own_layers(entry: dict[str, Any], chain: list[str]) -> list[dict[str, Any]]:
    """A system's (or a variant's) own settings, then its overrides for the scales of `chain`, root first."""
    return [{k: entry[k] for k in STAGE_KEYS if k in entry}, *(entry.get("overrides", {}).get(s, {}) for s in chain)]


LABEL_WORD = re.compile(r"\{([^{}]+)\}")


def setting(settings: dict[str, Any], path: str) -> Any:
    """A resolved system's setting by its dotted path (`model.dropout`); None where it is not set."""
    value: Any = settings
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def label_words(template: str) -> list[str]:
    """The `{WORD}`s of a label, table title or figure legend."""
    return LABEL_WORD.findall(template)


def fill_label(config: dict[str, Any], template: str, settings: dict[str, Any] | None, extra: dict[str, str] | None = None) -> str:
    """`template` with each `{WORD}` replaced by config `label_words`' text for these resolved settings (or by `extra`)."""

    def word(match: re.Match) -> str:
        name = match.group(1)
        if extra and name in extra:
            return extra[name]
        known = config.get("label_words", {})
        if name not in known or settings is None:
            raise UserError(f"config: the label {template!r} names {{{name}}}, which is not under 'label_words' or has no system to read it from.")
        spec, value = known[name], setting(settings, known[name]["setting"])
        if "values" in spec:
            return spec["values"].get(str(value), "")
        return spec["text"] if value else ""

    return LABEL_WORD.sub(word, template)


def reference_seed(config: dict[str, Any], name: str) -> int:
    """A system's reference seed, the one whose run keeps the plain name (an ensemble's: its first member's)."""
    return config["systems"][representative(config, name)].get("seed", config["seed"])


def seeds(config: dict[str, Any], name: str) -> list[int]:
    """The seeds a system trains with at the active scale: its own `seeds`, the scale's, the top-level, or its reference seed."""
    for owner in (config["systems"][name], active_scale(config), config):
        if "seeds" in owner:
            return list(owner["seeds"])
    return [reference_seed(config, name)]


def run_name(config: dict[str, Any], name: str, seed: int) -> str:
    """The name of a system's (or an ensemble's) run with `seed`: its own for its reference seed, else NAME.seedN."""
    return name if seed == reference_seed(config, name) else f"{name}.seed{seed}"


def training_settings(config: dict[str, Any], name: str, seed: int | None = None) -> dict[str, Any]:
    """The settings of one system at the active scale that training reads (what `rnnmt train` gets); `seed`: a run's."""
    resolved = resolve_system(config, name)
    for key in RESOLVED_KEYS:
        resolved["train"].setdefault(key, TRAIN_DEFAULTS[key])
    decoder = resolved["model"].get("decoder", "gru")
    required = {"model": REQUIRED_MODEL.get(decoder, ()), "train": REQUIRED_TRAIN}
    missing = [f"{part}.{key}" for part, keys in required.items() for key in keys if key not in resolved[part]]
    if resolved["train"].get("epochs") is None and "updates" not in resolved["train"]:
        missing.append("train.updates (or train.epochs)")
    if missing:
        raise UserError(f"config: system '{name}' at scale '{config['scale']}' has no value for {', '.join(missing)}.")
    # Only what training reads: a new label, description or beam must not retrain the system. The tokenizer travels with
    # the model, so that raw text translated with it (translate --raw, the alignment figures) is tokenized as it was.
    if {**TRAIN_DEFAULTS, **resolved["train"]}["valid_metric"] == "bleu":
        # Only here: a new beam retrains just the systems whose early stopping decodes.
        resolved["train"].setdefault("valid_decode", resolved["decode"])
    pair = system_pair(config, name)
    return {
        "name": name,
        "pair": pair,
        "seed": reference_seed(config, name) if seed is None else seed,
        "tokenizer": tokenizer(config, pair),
        "model": resolved["model"],
        "train": resolved["train"],
    }


def show_system(config: dict[str, Any], name: str) -> dict[str, Any]:
    """A system at the active scale as the commands use it: training's settings with their defaults, decoding's, held-out sets."""
    from rnnmt.decode.settings import DecodeSettings
    from rnnmt.models.build import model_settings

    if name not in config["systems"]:
        raise UserError(f"config: no system '{name}' (known: {', '.join(config['systems'])}).")
    training, settings = training_settings(config, name), resolve_system(config, name)
    decode = DecodeSettings.from_dict(settings["decode"], f"systems.{name}.decode")
    return {
        "system": name,
        "scale": config["scale"],
        "runs at this scale": name in active_systems(config),
        "recipe": config["systems"][name]["recipe"],
        "pair": training["pair"],
        "seed": training["seed"],
        "seeds": seeds(config, name),
        "model": model_settings(training["model"]),
        "train": {**TRAIN_DEFAULTS, **training["train"]},
        "decode": dataclasses.asdict(decode),
        "heldout": settings["heldout"],
        "nounk": settings["nounk"],
    }


def check_axelrod(selection: dict[str, Any], pair: str, splits: dict[str, list[str]]) -> None:
    """Axelrod selection needs in-domain text and, for a per-corpus cut, a share for every pool corpus."""
    if not splits["indomain"]:
        raise UserError(f"config: selection.method axelrod needs in-domain corpora for {pair} (corpora.{pair}.indomain is empty).")
    if selection["cut"] == "per_corpus":
        missing = [name for name in splits["train"] if name not in selection["fractions"]]
        if missing:
            raise UserError(f"config: selection.cut per_corpus needs selection.fractions for {', '.join(missing)} ({pair}).")


def check_claims(config: dict[str, Any]) -> None:
    """Each claim compares two known systems (or ensembles; NAME.unk for UNK-replaced output) on one test set."""
    known = set(config["systems"]) | set(config.get("ensembles", {}))
    for claim in config.get("claims", []):
        systems = [name.removesuffix(".unk") for name in (claim["a"], claim["b"])]
        unknown = [s for s in systems if s not in known]
        if unknown:
            raise UserError(f"config: claim {claim['claim']!r} names {', '.join(unknown)}; expected a system or ensemble (NAME.unk for UNK-replaced output).")
        pairs = sorted({system_pair(config, s) for s in systems})
        if len(pairs) > 1:
            raise UserError(f"config: claim {claim['claim']!r} compares systems of different pairs ({', '.join(pairs)}); expected one test set.")


REQUIRED_MODEL = {
    "gru": ("encoder", "attention", "emb", "hidden", "align_hidden", "maxout", "init"),
    "cgru": ("encoder", "attention", "emb", "hidden", "align_hidden", "init"),
    "lstm": (
        "encoder",
        "attention",
        "score",
        "emb",
        "hidden",
        "layers",
        "dropout",
        "bias",
        "state_clip",
        "feed_input",
        "window",
        "max_positions",
        "source_eos",
        "reverse_source",
        "init",
        "init_range",
    ),
}
REQUIRED_TRAIN = ("optimizer", "loss", "clip_norm", "batch_size", "valid_every", "log_every", "checkpoint_every")
