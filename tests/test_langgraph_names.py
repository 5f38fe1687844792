"""The agent that holds a LangGraph thread: named by the daemon's own agent-name rule."""

from __future__ import annotations

import msgspec
import pytest

pytest.importorskip("langgraph.checkpoint.base")

from reynctl.langgraph import agent_name
from reynd.protocol.names import AGENT_NAME_MAX, AgentName

FITS = AGENT_NAME_MAX - len("lg-")  # the longest thread id kept as it is


def valid(name: str) -> bool:
    try:
        msgspec.convert(name, AgentName)
    except msgspec.ValidationError:
        return False
    return True


@pytest.mark.parametrize(
    "tid",
    ["a", "chat-3", "x.y_z-1", "9", "A" * FITS, "a" + "_.-" * ((FITS - 1) // 3)],
)
def test_an_id_that_is_an_agent_name_and_fits_is_kept(tid: str) -> None:
    assert agent_name(tid) == f"lg-{tid}"
    assert valid(agent_name(tid))


@pytest.mark.parametrize(
    "tid",
    ["", "A" * (FITS + 1), "_a", "-a", ".a", "a b", "a/b", "a\n", "é", "a" * 1000, "1\x00"],
)
def test_any_other_id_is_hashed(tid: str) -> None:
    name = agent_name(tid)
    assert name.startswith("lgx-") and len(name) == len("lgx-") + 32
    assert valid(name)
    assert name == agent_name(tid) and name != agent_name(tid + "!")


def test_the_longest_kept_id_makes_the_longest_agent_name() -> None:
    assert len(agent_name("a" * FITS)) == AGENT_NAME_MAX
    assert agent_name("a" * (FITS + 1)).startswith("lgx-")
