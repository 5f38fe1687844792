"""The committed method reference is exactly what the protocol types generate."""

from __future__ import annotations

from pathlib import Path

from reynd.protocol.methods import METHODS
from reynd.protocol.reference import methods_markdown

DOC = Path(__file__).resolve().parent.parent / "docs" / "methods.md"


def test_docs_methods_md_is_generated_from_the_types() -> None:
    assert DOC.read_text() == methods_markdown(), (
        "docs/methods.md is stale: run `python -m reynd.protocol.reference > docs/methods.md`"
    )


def test_every_method_is_documented() -> None:
    text = DOC.read_text()
    for name in METHODS:
        assert f"## `{name}`" in text
