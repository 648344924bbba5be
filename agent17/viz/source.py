"""The real code on screen: a function, a method or an SQL constant of the package, highlighted.

The notebooks show the code the chapter is about (the claim statement, the
transaction helper, `tick()`) by reading it from the package, never by
copying it, so what a student reads is what runs.
"""

from __future__ import annotations

import inspect
import textwrap
from typing import Any


class SourceView:
    """Code to show: highlighted in Jupyter (HTML), plain in a terminal and in tests."""

    def __init__(self, code: str, language: str, title: str) -> None:
        self.code = code
        self.language = language
        self.title = title

    def __str__(self) -> str:
        return self.code

    def __repr__(self) -> str:
        return f"# {self.title}\n{self.code}"

    def _repr_html_(self) -> str:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexer import Lexer
        from pygments.lexers import PostgresLexer, PythonLexer, SqlLexer
        from pygments.token import Error

        lexer: Lexer = PythonLexer()
        if self.language == "sql":
            # The generic lexer knows SQLite's :name parameters, but boxes PostgreSQL's
            # $$ quoting in red like a syntax error; that SQL gets PostgreSQL's lexer.
            lexer = SqlLexer()
            if any(kind in Error for kind, _ in lexer.get_tokens(self.code)):
                lexer = PostgresLexer()
        formatter = HtmlFormatter(noclasses=True, style="default", nowrap=False)
        body = highlight(self.code, lexer, formatter)
        caption = f'<div style="font-size: 11px; color: #555">{self.title}</div>'
        return f"<div>{caption}{body}</div>"


def show_source(thing: Any, *, title: str | None = None) -> SourceView:
    """The source of a function, method or class of agent17, or an SQL string, ready to show."""
    if isinstance(thing, str):
        return SourceView(textwrap.dedent(thing).strip("\n"), "sql", title or "SQL")
    code = textwrap.dedent(inspect.getsource(thing)).rstrip("\n")
    module = inspect.getmodule(thing)
    where = title or f"{module.__name__ if module else '?'}.{thing.__qualname__}"
    return SourceView(code, "python", where)
