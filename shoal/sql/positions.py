"""Where in a statement an error is, written one way everywhere: "(line L, column C)", both
1-based, as the Athena translation already wrote it. Spark says "line 2 pos 7" or "(line 2,
pos 7)" with a 0-based pos; sqlglot says "Line 3, Col: 13." and leaves the token unnamed."""

from __future__ import annotations

import re

from sqlglot.errors import ParseError

_SPARK = re.compile(r"[;.]?\s*\(?\bline (\d+),? pos (\d+)\)?;?")
_OURS = re.compile(r"\(line (\d+), column (\d+)\)")
_EITHER = re.compile(r"[;.]?\s*\(?\bline \d+,? (?:pos|column) \d+\)?;?")


def spark_positions(message: str) -> str:
    """Spark's positions in `message` rewritten as "(line L, column C)"."""
    return _SPARK.sub(lambda m: f" (line {m.group(1)}, column {int(m.group(2)) + 1})", message).strip()


def without_positions(message: str) -> str:
    """`message` with Spark's positions dropped: they point into SQL the user did not write
    (a governed rewrite), so naming them would mark the wrong spot."""
    return _EITHER.sub("", message).strip()


def parse_error(exc: ParseError) -> str:
    """sqlglot's first error as "unexpected 'FRM' (line 1, column 10)": the token named, and the
    column where it starts (sqlglot counts to the token's last character)."""
    err = (exc.errors or [{}])[0]
    token = str(err.get("highlight") or "")
    description = str(err.get("description") or str(exc).splitlines()[0])
    description = re.sub(r"<class '(?:\w+\.)*(\w+)'>", r"\1", description)  # sqlglot's class names
    if "Unexpected token" in description or "Invalid expression" in description:
        what = f"unexpected {token!r}" if token else "unexpected end of statement"
    else:
        what = description + (f" near {token!r}" if token else "")
    line, col = err.get("line"), err.get("col")
    if not line:
        return what
    start = max(1, int(col or 1) - max(len(token), 1) + 1)
    return f"{what} (line {line}, column {start})"


def position(message: str) -> tuple[int, int] | None:
    """The (line, column) a message written by the functions above names, if any."""
    found = _OURS.search(message or "")
    return (int(found.group(1)), int(found.group(2))) if found else None
