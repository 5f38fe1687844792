"""Limits on the structure of what reynd accepts, checked before anything is decoded.

Nesting depth is fixed, not configurable: every component that handles a
record (msgspec, the stdlib json module, SQLite's JSON, a client's parser)
recurses over it, and several stop near a thousand levels. A record accepted
under this limit can never later fail in any of them, so an acknowledged
record can never keep the daemon from starting.

Integers are held to the signed 64-bit range for the same reason: JSON has
no bound, but msgpack (snapshots), SQLite and most clients do, and Python
refuses to parse one of more than 4300 digits. Counts in records (tokens,
step numbers) are held lower, to MAX_COUNT, which every JSON parser holds
exactly, and the sums the reducer keeps of them saturate there.

The defaults of the limits reynd.toml may change are declared here too, once:
the daemon's config, its transport and the clients that size their requests
take them from here (docs/protocol.md#limits lists them).
"""

from __future__ import annotations

import re
from itertools import accumulate, chain
from operator import sub
from typing import Final

__all__ = [
    "BUSY_POLL_US",
    "IDLE_TIMEOUT_S",
    "INT_MAX",
    "INT_MIN",
    "LINE_TIMEOUT_S",
    "MAX_APPEND_EVENTS",
    "MAX_BATCH_MEMBERS",
    "MAX_CONNECTIONS",
    "MAX_COUNT",
    "MAX_DEPTH",
    "MAX_MESSAGE_BYTES",
    "MAX_READ_RECORDS",
    "MAX_REQUESTS_PER_CONNECTION",
    "MAX_SUBSCRIPTIONS_PER_CONNECTION",
    "MAX_UNSENT_BYTES_PER_CONNECTION",
    "MiB",
    "SUBSCRIBER_QUEUE",
    "batch_exceeds",
    "integer_exceeds",
    "nesting_exceeds",
]

# Levels of arrays and objects in one message, the message itself included.
MAX_DEPTH: Final = 64
# The integers a message may hold anywhere: the signed 64-bit range.
INT_MIN: Final = -(2**63)
INT_MAX: Final = 2**63 - 1
# A count in a record (tokens, a step or plan step number) and the sums kept of
# them: JavaScript's Number.MAX_SAFE_INTEGER, exact in every JSON parser.
MAX_COUNT: Final = 2**53 - 1
# Events in one wal.append_batch: all of them are validated, and held in
# memory, before anything is written; a bigger batch is several.
MAX_APPEND_EVENTS: Final = 1000
# Records one wal.read returns at most (its `limit`).
MAX_READ_RECORDS: Final = 10_000

# Defaults of the limits reynd.toml sets (its keys, lower-cased; DaemonConfig).
MiB: Final = 1024 * 1024
MAX_MESSAGE_BYTES: Final = MiB  # longest request line, newline excluded
MAX_CONNECTIONS: Final = 256
MAX_REQUESTS_PER_CONNECTION: Final = 64  # running at once
MAX_BATCH_MEMBERS: Final = 1000  # members of one JSON-RPC batch
MAX_SUBSCRIPTIONS_PER_CONNECTION: Final = 64
MAX_UNSENT_BYTES_PER_CONNECTION: Final = MiB  # replies made, not yet read by the client
SUBSCRIBER_QUEUE: Final = 1024  # notifications queued per subscriber before it lags
BUSY_POLL_US: Final = 100  # a reader polls this long for the next line before it sleeps
LINE_TIMEOUT_S: Final = 10.0  # from a line's first byte to its newline; 0: no limit
IDLE_TIMEOUT_S: Final = 300.0  # no call in flight, no subscription; 0: never

# Brackets become parentheses and quotes stay (commas too, for counting members);
# everything else is deleted.
_SHAPE: Final = bytes.maketrans(b"[{]}", b"(())")
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b'[]{}"')
_NOT_MEMBERS: Final = bytes(b for b in range(256) if b not in b'[]{}",')
_STRING: Final = re.compile(rb'"[^"]*"')


def _group(levels: int) -> bytes:
    """A regex for one bracket group of the shape nesting at most `levels` deep.

    Possessive throughout and built on a shape of only `(`, `)` and `,`: no
    alternative can match where another did, so nothing is ever retried.
    """
    group = rb"\(,*+\)"
    for _ in range(levels - 1):
        group = rb"\(,*+(?:" + group + rb",*+)*+\)"
    return group


# One batch member (a group, or a scalar: nothing left of it in the shape) and
# the comma after it. Members nest at most MAX_DEPTH - 1 inside the batch.
_MEMBER: Final = re.compile(rb"(?:" + _group(MAX_DEPTH - 1) + rb")?+,")
_OPENS: Final = re.compile(rb"\(+")
_CLOSES: Final = re.compile(rb"\)+")


def _above(bound: int) -> str:
    """A regex for the numbers written with as many digits as `bound` and greater than it."""
    digits = str(bound)
    alternatives = [
        digits[:k] + (f"[{int(d) + 1}-9]" if d < "8" else "9") + f"[0-9]{{{len(digits) - k - 1}}}"
        for k, d in enumerate(digits)
        if d != "9"
    ]
    return "(?:" + "|".join(alternatives) + ")"


# Digits become "0", everything else a space: a run of 19 digits is one find.
_DIGITS: Final = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN: Final = b"0" * len(str(INT_MAX))
_FEW_RUNS: Final = 200  # up to this many runs of 19+ digits, each is checked on its own
# What is not part of a number or the punctuation before one (whitespace, the
# letters of true/false/null): deleted, which JSON outside strings allows.
_NOT_NUMBERS: Final = bytes(b for b in range(256) if b not in b"0123456789-+.eE[,:")
# An integer token out of range: after "[", "," or ":" (where a value starts),
# more than 19 digits or 19 above the bound, no fraction or exponent after them.
_OUT_OF_RANGE: Final = re.compile(
    (
        r"[\[,:]"
        rf"(?:-(?:[0-9]{{20,}}|{_above(-INT_MIN)})|(?:[0-9]{{20,}}|{_above(INT_MAX)}))"
        r"(?![0-9.eE])"
    ).encode()
)


def nesting_exceeds(data: bytes, limit: int = MAX_DEPTH) -> bool:
    """True when the JSON text `data` nests arrays/objects deeper than `limit`.

    Runs at C speed: two counts when there are at most `limit` brackets (the
    common case); otherwise strings are cut out, the brackets kept, and leaf
    pairs `()` peeled off while that shrinks the text quickly (each pass
    lowers the depth by exactly one), then the rest is measured run by run.
    About 1 ms per MiB, 20 in the worst case (many short chains). For text
    that is not JSON the answer bounds how deep a decoder could recurse
    before it finds the error.
    """
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    shape = _shape(data, _NOT_BRACKETS)
    peeled = 0
    while shape:
        if b"(" * (limit - peeled + 1) in shape:
            return True  # a run of opening brackets that long nests that deep
        shorter = shape.replace(b"()", b"")
        if 16 * len(shorter) > 15 * len(shape):
            # Leaves are under 1/16 of it: measuring the runs (fewer than
            # 1/16 of the bytes) now costs less than peeling on.
            break
        shape, peeled = shorter, peeled + 1
    return peeled + _max_depth(shape) > limit


def batch_exceeds(data: bytes, limit: int) -> bool:
    """True when the JSON array `data` has more than `limit` (at least 1) members.

    Nothing is decoded, so a huge batch costs no memory to refuse: fewer than
    `limit` commas is within the limit (one count); otherwise the members are
    skipped one by one on the bracket shape, each by one match of `_MEMBER`
    (never backtracking: linear in the bytes it covers), until `limit`
    top-level commas are found or there are no more. Call it on text within
    the nesting limit: a deeper group does not match and the text counts as
    within the limit (the decoder, which must never see it, would then).
    """
    if data.count(b",") < limit:
        return False
    shape = _shape(data, _NOT_MEMBERS)
    pos = shape.find(b"(") + 1
    match = _MEMBER.match
    for _ in range(limit):
        member = match(shape, pos)
        if member is None:
            return False  # the last member, or not JSON: the decoder refuses that
        pos = member.end()
    return True


def integer_exceeds(data: bytes) -> bool:
    """True when the JSON text `data` holds an integer outside [INT_MIN, INT_MAX].

    Anywhere outside strings: a fraction or an exponent makes a number a
    float, which is not this check's business. One translate and one find
    when no run of 19 digits is there (the common case: about 1.5 ms per
    MiB); otherwise strings are cut out, the rest is reduced to numbers and
    punctuation, and each run of 19+ digits is checked (a few: about 5 ms
    per MiB) or the whole searched once (many: up to about 15 ms per MiB).
    Only a run of exactly 19 digits is ever converted to an int, so a
    number of any length costs no more than its bytes. For text that is not JSON the
    answer may be either: the decoder refuses it anyway.
    """
    if _LONG_RUN not in data.translate(_DIGITS):
        return False
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    if b'"' in data:
        data = _STRING.sub(b"", data)
    numbers = b"[" + data.translate(None, _NOT_NUMBERS)
    runs = numbers.translate(_DIGITS)
    if runs.count(_LONG_RUN) > _FEW_RUNS:
        return _OUT_OF_RANGE.search(numbers) is not None
    # A few long runs among many short numbers: visit just those (the regex
    # would try every comma, ~35 ns each).
    i = runs.find(_LONG_RUN)
    while i >= 0:
        j = runs.find(b" ", i)
        j = len(runs) if j < 0 else j
        if numbers[j : j + 1] not in (b".", b"e", b"E"):  # else a float
            negative = numbers[i - 1] == 0x2D  # "-"
            if numbers[i - 2 if negative else i - 1] in b"[,:" and (
                j - i > len(_LONG_RUN) or int(numbers[i:j]) > (-INT_MIN if negative else INT_MAX)
            ):
                return True
        i = runs.find(_LONG_RUN, j)
    return False


def _shape(data: bytes, delete: bytes) -> bytes:
    """What is left outside strings once `delete` is deleted; brackets as parentheses."""
    if b"\\" in data:
        # Escaped backslashes first, then escaped quotes: the quotes left
        # delimit strings, whose brackets and commas are only text.
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    shape = data.translate(_SHAPE, delete)
    if b'"' in shape:
        shape = shape.replace(b'""', b"")  # most strings hold neither
        if b'"' in shape:
            shape = _STRING.sub(b"", shape)
    return shape


def _max_depth(shape: bytes) -> int:
    """The deepest running count of open parentheses, computed run by run.

    Leading ")" are dropped (not JSON; this only raises the bound); then runs
    of "(" and ")" alternate, and the depth after the k-th run of "(" is the
    sum of the first k of them minus the sum of the first k - 1 of ")".
    """
    shape = shape.lstrip(b")")
    opened = accumulate(map(len, _OPENS.findall(shape)))
    closed = chain((0,), accumulate(map(len, _CLOSES.findall(shape))))
    return max(map(sub, opened, closed), default=0)
