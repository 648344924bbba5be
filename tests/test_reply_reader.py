"""ReplyReader: a reply's JSON read a chunk at a time, every long string cut, saying by how much.

Any JSON value (escapes, non-ASCII text, surrogate pairs) is sent as a body
split at any places: what comes out does not depend on the split, equals the
body when nothing is over the limit, and otherwise parses to the same value
with each long string a prefix of the original (never half a surrogate pair)
followed by a note that counts exactly the characters of JSON text left out.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent17.agent.reply_reader import (
    CUT_NOTE,
    ReplyReader,
    ReplyTooLarge,
    cut_text,
    was_cut,
)

# Plain letters, the characters JSON escapes, and ones outside the BMP (a surrogate
# pair when escaped).
TEXT = st.text(alphabet=st.sampled_from('ab é"\\/\n\x01\u2028😀'), max_size=30)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def read(body: bytes, splits: list[int], limit: int, reply_limit: int = 10**9) -> str:
    reader = ReplyReader(string_limit=limit, reply_limit=reply_limit)
    start = 0
    for split in sorted(splits):
        reader.feed(body[start:split])
        start = split
    reader.feed(body[start:])
    return reader.text()


def pairs(text: str) -> Any:
    """The JSON value with every object as its list of pairs (cut keys may coincide)."""
    return json.loads(text, object_pairs_hook=lambda items: ("object", items))


def check_cut(original: Any, kept: Any, limit: int, ascii_only: bool) -> None:
    if isinstance(original, str):
        written = json.dumps(original, ensure_ascii=ascii_only)[1:-1]
        if len(written) <= limit:
            assert kept == original
            return
        assert was_cut(kept)
        head, note = kept.rsplit(" [... cut: ", 1)
        assert original.startswith(head)
        head.encode("utf-8")  # no half of a surrogate pair
        left_out = int(note.removesuffix(" more characters]").replace(",", ""))
        assert left_out + len(json.dumps(head, ensure_ascii=ascii_only)[1:-1]) == len(written)
    elif isinstance(original, tuple):
        assert len(original[1]) == len(kept[1])
        for (key, value), (kept_key, kept_value) in zip(original[1], kept[1], strict=True):
            check_cut(key, kept_key, limit, ascii_only)
            check_cut(value, kept_value, limit, ascii_only)
    elif isinstance(original, list):
        assert len(original) == len(kept)
        for item, kept_item in zip(original, kept, strict=True):
            check_cut(item, kept_item, limit, ascii_only)
    else:
        assert kept == original


@FAST
@given(value=JSON, ascii_only=st.booleans(), data=st.data())
def test_a_body_with_nothing_too_long_comes_out_as_it_went_in_however_it_is_split(
    value: Any, ascii_only: bool, data: st.DataObject
) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode()
    splits = data.draw(st.lists(st.integers(0, len(body)), max_size=8))
    assert read(body, splits, limit=10**6) == body.decode()


@FAST
@given(value=JSON, ascii_only=st.booleans(), limit=st.integers(1, 12), data=st.data())
def test_each_long_string_keeps_a_prefix_and_counts_what_it_left_out(
    value: Any, ascii_only: bool, limit: int, data: st.DataObject
) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode()
    whole = read(body, [], limit)
    splits = data.draw(st.lists(st.integers(0, len(body)), max_size=8))
    assert read(body, splits, limit) == whole
    check_cut(pairs(body.decode()), pairs(whole), limit, ascii_only)


def test_a_reply_too_large_even_cut_is_refused() -> None:
    body = json.dumps(["x" * 50] * 100).encode()
    with pytest.raises(ReplyTooLarge, match="over 1,000 characters even with every text"):
        read(body, [], limit=10, reply_limit=1_000)


def test_cut_text_cuts_once_and_merges_a_cut_the_reader_made() -> None:
    assert cut_text("short", 10) == "short"
    assert cut_text("a" * 15, 10) == "a" * 10 + CUT_NOTE.format(5)
    already = "a" * 15 + CUT_NOTE.format(1_000_000)
    assert cut_text(already, 10) == "a" * 10 + CUT_NOTE.format(1_000_005)
    assert cut_text(already, 20) == already


def test_was_cut_finds_a_note_at_the_end_of_a_text_or_of_a_json_string() -> None:
    note = CUT_NOTE.format(3)
    assert was_cut("abc" + note)
    assert was_cut(json.dumps({"text": "abc" + note}))
    assert not was_cut(f"abc{note} and more")
    assert not was_cut("abc")
