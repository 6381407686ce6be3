"""config.yaml: schema validation with defaults, and the views the workflow needs (systems of a scale)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from rnnmt.errors import UserError


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
    """Check `config` against the schema, fill defaults in place, and check cross-references."""
    schema = yaml.safe_load(Path(schema_path).read_text())
    cls = _fill_defaults(jsonschema.validators.validator_for(schema))
    errors = sorted(cls(schema).iter_errors(config), key=lambda e: (len(e.absolute_path), str(e.absolute_path)))
    if errors:
        raise UserError(f"config: {_describe(errors[0])}.")
    _check_references(config)
    return config


def _check_references(config: dict[str, Any]) -> None:
    """Names used in one section must exist in another."""
    if config["scale"] not in config["scales"]:
        raise UserError(f"config: scale '{config['scale']}' is not one of the presets in 'scales' ({', '.join(config['scales'])}).")
    for name, system in config["systems"].items():
        if system["pair"] not in config["pairs"]:
            raise UserError(f"config: systems.{name}.pair '{system['pair']}' is not defined under 'pairs'.")
        for scale in system.get("scales", []):
            if scale not in config["scales"]:
                raise UserError(f"config: systems.{name}.scales names '{scale}', which is not a preset in 'scales'.")
    figures = config["figures"]
    if "bahdanau2014_fig2" in figures and figures["bahdanau2014_fig2"]["table"] not in config["tables"]:
        raise UserError(f"config: figures.bahdanau2014_fig2.table '{figures['bahdanau2014_fig2']['table']}' is not under 'tables'.")
    if "bahdanau2014_fig3" in figures and figures["bahdanau2014_fig3"]["system"] not in config["systems"]:
        raise UserError(f"config: figures.bahdanau2014_fig3.system '{figures['bahdanau2014_fig3']['system']}' is not under 'systems'.")
    for scale, preset_ in config["scales"].items():
        for pair in preset_["corpora"]:
            if pair not in config["pairs"]:
                raise UserError(f"config: scales.{scale}.corpora.{pair} is not a pair defined under 'pairs'.")
    for name in active_systems(config):
        if config["systems"][name]["pair"] not in config["scales"][config["scale"]]["corpora"]:
            raise UserError(f"config: systems.{name} translates {config['systems'][name]['pair']}, which has no corpora at scale '{config['scale']}'.")
    method = config["scales"][config["scale"]]["selection"]["method"]
    if method not in AVAILABLE_SELECTION:
        raise UserError(f"config: scale '{config['scale']}' selects data with '{method}', which this version does not have (available: {', '.join(AVAILABLE_SELECTION)}).")
    for name, table in config["tables"].items():
        for role, system in table.get("check", {}).items():
            if system not in config["systems"]:
                raise UserError(f"config: tables.{name}.check.{role} '{system}' is not under 'systems'.")
        for row in table["rows"]:
            if "system" in row and row["system"] not in config["systems"]:
                raise UserError(f"config: tables.{name} names system '{row['system']}', which is not under 'systems'.")
            if "system" not in row and "label" not in row:
                raise UserError(f"config: every row of tables.{name} needs 'system' or 'label'.")


def load(path: Path, schema_path: Path) -> dict[str, Any]:
    """Read and validate a config file."""
    try:
        config = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"config file {path} cannot be read as YAML ({exc.__class__.__name__}).") from exc
    return validate(config, schema_path)


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A copy of `base` with `override` merged in recursively (dicts merge, other values replace)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else copy.deepcopy(value)
    return out


def preset(config: dict[str, Any]) -> dict[str, Any]:
    """The active scale preset."""
    return config["scales"][config["scale"]]


def active_systems(config: dict[str, Any]) -> list[str]:
    """Systems that run at the active scale, in config order."""
    scale = config["scale"]
    return [name for name, s in config["systems"].items() if scale in s.get("scales", [scale])]


def system_config(config: dict[str, Any], name: str) -> dict[str, Any]:
    """The fully resolved settings of one system at the active scale (what `rnnmt train` reads)."""
    system = config["systems"][name]
    scale = preset(config)
    resolved = deep_merge({"model": scale["model"], "train": scale["train"]}, {"model": system["model"], "train": system["train"]})
    resolved = deep_merge(resolved, system["overrides"].get(config["scale"], {}))
    resolved["train"].setdefault("max_len", None)
    resolved["train"].setdefault("patience", None)
    resolved["train"].setdefault("sort_k_batches", 20)
    missing = [f"{part}.{key}" for part, keys in REQUIRED.items() for key in keys if key not in resolved[part]]
    if missing:
        raise UserError(f"config: system '{name}' at scale '{config['scale']}' has no value for {', '.join(missing)}.")
    # Only what training reads: a new label or description must not retrain the system.
    return {"name": name, "pair": system["pair"], "seed": system.get("seed", config["seed"]), **resolved}


# Axelrod selection (paper scale) is a later stage; the schema already names it.
AVAILABLE_SELECTION = ("none", "lium")

REQUIRED = {
    "model": ("encoder", "attention", "emb", "hidden", "align_hidden", "maxout", "init"),
    "train": ("optimizer", "loss", "clip_norm", "batch_size", "updates", "valid_every", "log_every", "checkpoint_every"),
}
