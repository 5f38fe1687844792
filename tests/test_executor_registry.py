"""The executors are one list (reynd.protocol.executor): everything naming them derives from it."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from reynctl.cli.agents import agents_configure, agents_create
from reynd.protocol import errors
from reynd.protocol.executor import (
    AGENT_EXECUTORS,
    DEFAULT_EXECUTOR,
    EXECUTOR_NAMES,
    EXECUTOR_OPTIONS,
    EXTERNAL,
    ExecutorName,
)
from reynd.protocol.openrpc import openrpc_document
from reynd.runtime.executors import make_executor

DOCS = Path(__file__).resolve().parent.parent / "docs"
# The least each executor takes (the command executor needs a program).
MINIMAL = {"builtin": {}, "command": {"argv": ["true"]}, "openai": {}}


def test_every_name_has_its_options_type() -> None:
    assert list(EXECUTOR_OPTIONS) == list(EXECUTOR_NAMES) == list(MINIMAL)
    assert (*EXECUTOR_NAMES, EXTERNAL) == AGENT_EXECUTORS
    assert DEFAULT_EXECUTOR in EXECUTOR_NAMES


@pytest.mark.parametrize("name", EXECUTOR_NAMES)
def test_the_runtime_builds_every_executor_from_its_options(name: ExecutorName) -> None:
    executor = make_executor(name, MINIMAL[name])
    assert type(executor).__module__ == f"reynd.runtime.executors.{name}"
    assert type(getattr(executor, "options")) is EXECUTOR_OPTIONS[name]  # noqa: B009


@pytest.mark.parametrize("name", ["external", "gpt", ""])
def test_the_runtime_refuses_a_name_it_does_not_run(name: str) -> None:
    with pytest.raises(errors.InvalidParams, match="use builtin, command, openai"):
        make_executor(name, {})


def test_the_protocol_and_the_cli_offer_the_same_names() -> None:
    methods = {m["name"]: m for m in openrpc_document()["methods"]}
    create = {p["name"]: p for p in methods["agents.create"]["params"]}
    assert create["executor"]["schema"] == {"enum": list(EXECUTOR_NAMES), "default": "builtin"}
    for command in (agents_create, agents_configure):
        (option,) = [p for p in command.params if p.name == "executor"]
        assert isinstance(option.type, click.Choice)
        assert list(option.type.choices) == list(EXECUTOR_NAMES)
    (option,) = [p for p in agents_create.params if p.name == "executor"]
    assert option.default == DEFAULT_EXECUTOR


def test_the_docs_list_the_same_names() -> None:
    cli = re.search(r"`--executor ([a-z|]+)`", (DOCS / "cli.md").read_text())
    assert cli is not None and cli[1].split("|") == list(EXECUTOR_NAMES)
    protocol = " ".join((DOCS / "protocol.md").read_text().split())
    built = re.search(
        r"an executor it can build \((.*?) with options that executor takes", protocol
    )
    assert built is not None
    assert re.findall(r"`(\w+)`", built[1]) == list(EXECUTOR_NAMES)
