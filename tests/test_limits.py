"""The checks at the door (reynd.protocol.limits): exact for JSON, bounded for junk."""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reynd.protocol.limits import (
    INT_MAX,
    INT_MIN,
    MAX_DEPTH,
    batch_exceeds,
    integer_exceeds,
    nesting_exceeds,
)


def json_values(scalars: st.SearchStrategy[Any], keys: st.SearchStrategy[str]) -> Any:
    """Arrays and objects of `scalars`, keyed by `keys`, nested."""
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
        max_leaves=40,
    )


# Text that looks like structure: brackets, quotes and backslashes inside strings.
_tricky_text = st.text(alphabet='[]{}"\\ab,:\n\u00e9\U0001f600', max_size=12)
_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _tricky_text
_values = json_values(_scalars, _tricky_text)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


def nest(value: Any, levels: int, kind: str) -> Any:
    for _ in range(levels):
        value = [value] if kind == "list" else {'k["{': value}
    return value


@given(_values, st.integers(0, 8), st.sampled_from(["list", "dict"]), st.integers(0, 10))
def test_exact_on_json(value: Any, extra: int, kind: str, limit: int) -> None:
    value = nest(value, extra, kind)
    for text in (json.dumps(value).encode(), msgspec.json.encode(value)):
        assert nesting_exceeds(text, limit) == (depth(value) > limit), text


@given(st.integers(0, 200), st.integers(1, 40))
def test_chains_and_combs(levels: int, copies: int) -> None:
    """Many short chains side by side (the case measured run by run) and one deep chain."""
    chain = "[" * levels + "]" * levels
    text = ("[" + ",".join([chain] * copies) + "]").encode()
    assert nesting_exceeds(text) == (levels + 1 > MAX_DEPTH)
    comb = "".join("[[]," for _ in range(levels)) + "1" + "]" * levels
    assert nesting_exceeds(comb.encode()) == (levels + 1 > MAX_DEPTH)  # each tooth one deeper


@given(st.binary(max_size=300))
def test_junk_never_hides_deep_nesting_from_the_decoder(junk: bytes) -> None:
    """Whatever the check lets through, msgspec decodes or refuses without recursing away."""
    for text in (junk, b"[" * 500 + junk, junk + b"[" * 500, b'"' + b"[" * 500 + junk):
        if not nesting_exceeds(text):
            with contextlib.suppress(msgspec.DecodeError):
                msgspec.json.decode(text)


def test_boundaries_and_hostile_sizes() -> None:
    at = nest(1, MAX_DEPTH, "list")
    assert not nesting_exceeds(json.dumps(at).encode())
    assert nesting_exceeds(json.dumps([at]).encode())
    for n in (10**2, 10**3, 10**4, 10**5, 10**6):
        assert nesting_exceeds(b"[" * n)
        assert nesting_exceeds(b"[" * n + b"]" * n)
        assert nesting_exceeds(b'{"a":' * n + b"1" + b"}" * n)
    assert not nesting_exceeds(b"[" + b"1," * 10**6 + b"1]")
    # Brackets inside strings are text, however many.
    assert not nesting_exceeds(json.dumps({"text": "[" * 10**5 + '\\"' * 10}).encode())


@given(st.lists(_values, max_size=12), st.integers(1, 12))
def test_batch_members_counted_exactly(members: list[Any], limit: int) -> None:
    for text in (json.dumps(members).encode(), msgspec.json.encode(members)):
        assert batch_exceeds(text, limit) == (len(members) > limit), text


def test_a_huge_batch_is_counted_without_decoding() -> None:
    assert batch_exceeds(b"[" + b"1," * 10**6 + b"1]", 1000)
    assert not batch_exceeds(json.dumps([{"a": [1, 2, {"b": ",,,"}]}] * 1000).encode(), 1000)
    assert batch_exceeds(json.dumps([{"a": [1, 2, {"b": ",,,"}]}] * 1001).encode(), 1000)
    # Members nesting as deep as the limit allows are counted like any other.
    deepest = nest(1, MAX_DEPTH - 1, "list")
    assert not batch_exceeds(json.dumps([deepest] * 1000).encode(), 1000)
    assert batch_exceeds(json.dumps([deepest] * 1001).encode(), 1000)


def _seconds(fn: Callable[[], object], runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def test_counting_members_is_linear_whatever_the_depth() -> None:
    """1 MiB of chains 63 deep, as many as fit or inside 1000 members: one pass, not one per level.

    Peeling inner groups level by level took ~300 ms on a line like these
    (stalling every client); one pass takes ~5-20 ms. The bound is generous
    for a shared machine.
    """
    size = 1024 * 1024
    chain = b"[" * 63 + b"]" * 63
    many = b"[" + b",".join([chain] * (size // (len(chain) + 1))) + b"]"
    inner = b"[" * 62 + b"]" * 62
    member = b"[" + b",".join([inner] * (size // 1000 // (len(inner) + 1))) + b"]"
    within = b"[" + b",".join([member] * 1000) + b"]"
    assert not nesting_exceeds(many) and not nesting_exceeds(within)
    assert batch_exceeds(many, 1000) and not batch_exceeds(within, 1000)
    for line in (many, within):
        assert _seconds(functools.partial(batch_exceeds, line, 1000)) < 0.1


# -- integers -----------------------------------------------------------------------------

_edges = st.sampled_from([INT_MAX, INT_MAX + 1, INT_MIN, INT_MIN - 1, 2**64, -(2**64), 10**19])
_integers = st.integers() | st.integers(-(2**70), 2**70) | _edges | _edges.map(lambda n: n + 1)
# Digits inside strings are text; so are escaped quotes before them.
_digit_text = st.text(alphabet='0123456789-.e"\\ ', max_size=25)
_numbers = json_values(
    st.none()
    | st.booleans()
    | _integers
    | st.floats(allow_nan=False, allow_infinity=False)
    | _digit_text,
    _digit_text,
)


def out_of_range(value: Any) -> bool:
    if isinstance(value, list):
        return any(map(out_of_range, value))
    if isinstance(value, dict):
        return any(map(out_of_range, value.values()))
    return type(value) is int and not INT_MIN <= value <= INT_MAX


@given(_numbers)
def test_integer_range_exact_on_json(value: Any) -> None:
    for text in (
        json.dumps(value).encode(),
        json.dumps(value, indent=1).encode(),
        json.dumps(value, ensure_ascii=False).encode(),
    ):
        assert integer_exceeds(text) == out_of_range(value), text


@pytest.mark.parametrize(
    ("text", "exceeds"),
    [
        (b"9223372036854775807", False),
        (b"9223372036854775808", True),
        (b"-9223372036854775808", False),
        (b"-9223372036854775809", True),
        (b'{"a":1e-12345678901234567890}', False),  # an exponent: a float
        (b'{"a":1.12345678901234567890123}', False),
        (b'{"a":12345678901234567890.5}', False),
        (b'{"a":12345678901234567890E2}', False),
        (b'{"12345678901234567890":"-12345678901234567890"}', False),
        (b'["\\\\",12345678901234567890]', True),  # an escaped backslash ends no string
        (b'["\\"",12345678901234567890]', True),
        (b'["\\" 12345678901234567890"]', False),
        (b"[true,false,null,\n\t-99999999999999999999 ]", True),
        (b"[" + b"9" * 5000 + b"]", True),  # Python would refuse to parse it: never converted
    ],
)
def test_integer_range_cases(text: bytes, exceeds: bool) -> None:
    assert integer_exceeds(text) == exceeds


def test_integer_range_on_hostile_sizes() -> None:
    """Sizes up to a MiB of what costs most: digit runs, short numbers, escapes, one huge int."""
    huge = b"[" + b"7" * 10**6 + b"]"
    assert integer_exceeds(huge)
    assert not integer_exceeds(b"[1234567890123456789" + b",1" * 500_000 + b"]")
    assert not integer_exceeds(json.dumps(["1234567890123456789012" * 40_000]).encode())
    assert integer_exceeds(json.dumps(['\\"' * 100_000]).encode()[:-1] + b",10000000000000000000]")
    dense = json.dumps([INT_MAX - i for i in range(50_000)]).encode()
    assert not integer_exceeds(dense)
    assert integer_exceeds(dense[:-1] + b",-9223372036854775809]")
