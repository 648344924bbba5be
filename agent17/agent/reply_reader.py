"""A model server's reply, read in bounded memory: every long text cut, saying by how much.

A chat completion is JSON, and what a model writes is in its strings: the
answer (`content`) and each tool call's `arguments`. A broken or hostile server
can make one of them any size; read whole, a 50 MB answer took a teammate
process to nearly 500 MB, and went on whole into its log line and its report in
the Lead's mailbox.

So the body is read a chunk at a time through a small scanner that knows where
each JSON string starts and ends (escapes included) and keeps at most
STRING_LIMIT characters of each: the rest is read and dropped, and the string
ends with a note, " [... cut: 49,000,000 more characters]" (counted as the
reply wrote them: an escape such as \\n is two). The structure
around the strings is kept as it came, so the reply still parses; if what is
kept passes REPLY_LIMIT all the same (a reply of a million tool calls), the
reply is refused whole. The answer is then cut again, to ANSWER_LIMIT
(`cut_text`): it is what a teammate logs and reports to the Lead.
"""

from __future__ import annotations

import codecs
import re
from typing import Final

STRING_LIMIT: Final = 1_000_000
"""Characters kept of one JSON string of a reply (read_file reads as much of a file)."""
REPLY_LIMIT: Final = 4_000_000
"""Characters kept of a whole reply, its strings cut: past this it is refused."""
ANSWER_LIMIT: Final = 10_000
"""Characters kept of the model's text: what a log line and a report to the Lead carry."""

CUT_NOTE: Final = " [... cut: {:,} more characters]"
# ASCII with no quote or backslash: the same text inside a JSON string and out of it.
_NOTE: Final = re.compile(r" \[\.\.\. cut: ([0-9,]+) more characters\]")
_NOTE_AT_END: Final = re.compile(_NOTE.pattern + r"\Z")
_CUT_END: Final = re.compile(_NOTE.pattern + r'(?:"|\Z)')  # a cut string's end, in JSON or not

_STRUCTURE: Final = re.compile(r'[^"]*')  # JSON between two strings
_PLAIN: Final = re.compile(r'[^"\\]*')  # a string's characters up to a quote or an escape
# ... and its escapes, whole; possessive, or the regex engine keeps a step per character.
_DROPPED: Final = re.compile(r'(?:[^"\\]|\\.)*+', re.DOTALL)
_HIGH_SURROGATE: Final = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}")


class ReplyTooLarge(ValueError):
    """What is kept of a reply passed REPLY_LIMIT characters, its long strings cut."""


class ReplyReader:
    """Feed a reply's bytes as they come; `text()` is its JSON with every long string cut."""

    def __init__(self, string_limit: int = STRING_LIMIT, reply_limit: int = REPLY_LIMIT) -> None:
        self.string_limit = string_limit
        self.reply_limit = reply_limit
        # As httpx reads a body without a charset: UTF-8, a bad byte replaced.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._kept: list[str] = []
        self._size = 0
        self._carry = ""  # an escape whose end is in the next chunk
        self._in_string = False
        self._taken = 0  # characters kept of the string being read
        self._cutting = False
        self._dropped = 0  # characters dropped of it
        self._high_surrogate = False  # the last piece kept is the first half of a pair

    def feed(self, chunk: bytes) -> None:
        """Read the next bytes of the reply (ReplyTooLarge once too much is kept)."""
        self._carry = self._scan(self._carry + self._decoder.decode(chunk))
        if self._size > self.reply_limit:
            raise ReplyTooLarge(
                f"the reply is over {self.reply_limit:,} characters even with every text in it"
                f" cut to {self.string_limit:,}"
            )

    def text(self) -> str:
        """The reply as read: JSON text (unless the server sent none), long strings cut."""
        # A cut-off escape can only be the end of a truncated body: kept as it came, it
        # fails to parse like the rest of such a body.
        self._keep(self._carry + self._decoder.decode(b"", final=True))
        self._carry = ""
        return "".join(self._kept)

    def _keep(self, text: str) -> None:
        if text:
            self._kept.append(text)
            self._size += len(text)
            self._high_surrogate = False

    def _scan(self, data: str) -> str:
        """Take in `data`; return the end of it that must wait for the next chunk."""
        at, end = 0, len(data)
        while at < end:
            if not self._in_string:
                stop = _run_end(_STRUCTURE, data, at)
                self._keep(data[at:stop])
                if stop < end:
                    self._open_string()
                at = stop + 1
            elif self._cutting:
                stop = _run_end(_DROPPED, data, at)
                self._dropped += stop - at
                if stop < end and data[stop] == "\\":
                    return data[stop:]  # a backslash whose escaped character is still to come
                if stop < end:
                    self._close_string()
                at = stop + 1
            else:
                at, waiting = self._take(data, at)
                if waiting:
                    return data[at:]
        return ""

    def _take(self, data: str, at: int) -> tuple[int, bool]:
        """Keep a string's characters from `at` while they fit; where to go on.

        And whether to wait there for the next chunk: an escape cut in two.
        """
        stop = _run_end(_PLAIN, data, at)
        room = self.string_limit - self._taken
        if stop - at > room:
            self._keep(data[at : at + room])
            self._start_cut()
            self._dropped += stop - at - room
            return stop, False
        self._keep(data[at:stop])
        self._taken += stop - at
        if stop == len(data):
            return stop, False
        if data[stop] == '"':
            self._close_string()
            return stop + 1, False
        width = 6 if data.startswith("\\u", stop) else 2
        if stop + width > len(data):
            return stop, True
        if width > self.string_limit - self._taken:
            self._start_cut()  # the escape is dropped with the rest
            return stop, False
        self._keep(data[stop : stop + width])
        self._taken += width
        self._high_surrogate = _HIGH_SURROGATE.match(data, stop) is not None
        return stop + width, False

    def _open_string(self) -> None:
        self._keep('"')
        self._in_string, self._taken, self._cutting, self._dropped = True, 0, False, 0

    def _start_cut(self) -> None:
        self._cutting = True
        if self._high_surrogate:
            # Never half a surrogate pair: a lone one cannot be written as UTF-8.
            half = self._kept.pop()
            self._size -= len(half)
            self._dropped += len(half)
            self._high_surrogate = False

    def _close_string(self) -> None:
        if self._cutting:
            self._keep(CUT_NOTE.format(self._dropped))
        self._keep('"')
        self._in_string = False


def cut_text(text: str, limit: int = ANSWER_LIMIT) -> str:
    """`text` with at most `limit` characters of its own, then a note of how many more it had.

    A text the reader already cut has its note merged into the new one.
    """
    noted = _NOTE_AT_END.search(text)
    more = 0
    if noted is not None:
        more = int(noted.group(1).replace(",", ""))
        text = text[: noted.start()]
    if len(text) > limit:
        more += len(text) - limit
        text = text[:limit]
    return text + CUT_NOTE.format(more) if more else text


def was_cut(text: str) -> bool:
    """Whether `text`, or a JSON string inside it, ends with the reader's cut note."""
    return _CUT_END.search(text) is not None


def _run_end(pattern: re.Pattern[str], data: str, at: int) -> int:
    run = pattern.match(data, at)
    assert run is not None  # each pattern matches the empty run too
    return run.end()
