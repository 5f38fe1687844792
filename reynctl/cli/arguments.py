"""Structured arguments: KEY=VALUE pairs and JSON objects (executor options, settings, data)."""

from __future__ import annotations

import json
from typing import Any

import click

from reynctl.cli.options import F

__all__ = ["json_object", "key_value", "options_decorators", "parse_options"]


def _option_value(text: str) -> Any:
    """KEY=VALUE's value: JSON when it parses (0.5, true, [1]), else the string itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def key_value(pair: str, param_hint: str) -> tuple[str, Any]:
    """One KEY=VALUE: its key, stripped, and its value; a usage error if it is not one."""
    key, sep, value = pair.partition("=")
    key = key.strip()
    if not sep or not key:
        raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint=param_hint)
    return key, _option_value(value)


def json_object(text: str, param_hint: str) -> dict[str, Any]:
    """`text` as a JSON object; a usage error if it is not JSON or not an object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint=param_hint) from None
    if not isinstance(value, dict):
        raise click.BadParameter("must be a JSON object", param_hint=param_hint)
    return value


def parse_options(pairs: tuple[str, ...], as_json: str | None) -> dict[str, Any] | None:
    """--option KEY=VALUE (repeatable) or --options JSON; None when neither is given."""
    if pairs and as_json is not None:
        raise click.UsageError("give either --option KEY=VALUE ... or --options JSON, not both")
    if as_json is not None:
        return json_object(as_json, "--options")
    if not pairs:
        return None
    options: dict[str, Any] = {}
    for pair in pairs:
        key, value = key_value(pair, "--option")
        options[key] = value
    return options


def options_decorators(f: F) -> F:
    """--option KEY=VALUE ... | --options JSON, shared by `agents create` and `configure`."""
    f = click.option(
        "--options",
        "options_json",
        metavar="JSON",
        help="The executor's options as one JSON object.",
    )(f)
    return click.option(
        "--option",
        "-o",
        "option_pairs",
        multiple=True,
        metavar="KEY=VALUE",
        help="One executor option (repeatable); VALUE is read as JSON when it parses "
        "(delay=0.5), else as a string (model=llama3).",
    )(f)
