"""The error classes are the one table of codes: each registered by its definition."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import reynctl.errors
from reynd.protocol import errors
from reynd.protocol.errors import ERRORS, ReyndError

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_codes_and_names_are_unique_and_every_class_is_registered() -> None:
    classes = [
        c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, ReyndError)
    ]
    assert set(ERRORS.values()) == set(classes) - {ReyndError}
    assert all(code == cls.code for code, cls in ERRORS.items())
    assert len({cls.name for cls in ERRORS.values()}) == len(ERRORS)
    # The application codes (JSON-RPC leaves -32000 to -32099 to us), none skipped.
    ours = sorted(code for code in ERRORS if -32099 <= code <= -32000)
    assert ours == list(range(-32000 - len(ours), -32000))


@pytest.mark.parametrize(
    ("code", "name"), [(-32005, "a_new_name"), (-32999, "stale_branch")], ids=["code", "name"]
)
def test_a_repeated_code_or_name_is_refused_at_definition(code: int, name: str) -> None:
    with pytest.raises(TypeError, match="repeats StaleBranch"):

        class Again(ReyndError, code=code, name=name):
            pass

    assert ERRORS[-32005] is errors.StaleBranch
    assert -32999 not in ERRORS


@pytest.mark.parametrize("cls", list(ERRORS.values()), ids=lambda c: c.__name__)
def test_from_wire_rebuilds_every_class(cls: type[ReyndError]) -> None:
    sent = cls("what to do", {"field": "seq"}).to_wire()
    back = ReyndError.from_wire(json.loads(json.dumps(sent)))
    assert type(back) is cls
    assert (back.code, back.message) == (cls.code, "what to do")
    assert back.data == {"error": cls.name, "field": "seq"}
    assert back.to_wire() == sent
    assert errors.error_class(cls.code) is cls


def test_an_unknown_code_comes_back_as_the_base_class_with_its_code() -> None:
    back = ReyndError.from_wire({"code": -32999, "message": "new", "data": {"error": "new"}})
    assert type(back) is ReyndError and back.code == -32999
    assert errors.error_class(-32999) is ReyndError


def test_the_client_exports_every_class() -> None:
    for cls in ERRORS.values():
        assert getattr(reynctl.errors, cls.__name__) is cls
        assert cls.__name__ in reynctl.errors.__all__
    assert vars(errors)["__all__"] == [  # derived at run time (mypy reads no list)
        "ERRORS",
        "ReyndError",
        "error_class",
        *(c.__name__ for c in ERRORS.values()),
    ]


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_protocol_md_error_table_is_the_registry() -> None:
    table = _section((DOCS / "protocol.md").read_text(), "\n## Errors\n")
    rows = re.findall(r"^\| (-\d+) \| (\w+) \|", table, re.MULTILINE)
    assert [(int(code), name) for code, name in rows] == [
        (cls.code, cls.name) for cls in ERRORS.values()
    ]


def test_client_md_class_table_is_the_registry() -> None:
    text = (DOCS / "client.md").read_text()
    pairs = re.findall(r"\| (-\d+) \| `(\w+)` \|", text)
    assert sorted((int(code), name) for code, name in pairs) == sorted(
        (cls.code, cls.__name__) for cls in ERRORS.values()
    )
