"""What the pages show, gathered from the governed services (no HTML here)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from markupsafe import Markup, escape

from shoal.exceptions import ShoalError
from shoal.governance import AccessDenied, GovernedSql, Principal
from shoal.sql import to_json_value

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from shoal.config import Settings

OBJECT_ID = re.compile(r"^[0-9a-f]{32}$")


def governed_rows(
    spark: SparkSession, settings: Settings, who: Principal, sql: str, limit: int = 1000
) -> dict[str, Any]:
    """Rows as dicts, or the reason they are withheld (a refusal is an answer, not an error page)."""
    try:
        result = GovernedSql(spark, settings, who).execute(sql, limit=limit)
    except (AccessDenied, ShoalError) as exc:  # refused, or the table is missing or the SQL wrong
        return {"denied": str(exc).splitlines()[0], "rows": [], "columns": [], "types": []}
    rows = [{c: to_json_value(v) for c, v in zip(result.columns, r, strict=True)} for r in result.rows]
    return {"denied": None, "rows": rows, "columns": result.columns, "types": result.types}


def highlight(text: str, spans: list[tuple[int, int, str]]) -> Markup:
    """The text escaped, with spans wrapped in <mark>. Earlier spans in the list win overlaps
    (callers put PII first), so an e-mail inside an entity still shows as PII."""
    chosen: list[tuple[int, int, str]] = []
    for start, end, label in spans:
        start, end = max(0, start), min(end, len(text))
        if end > start and all(end <= s or start >= e for s, e, _ in chosen):
            chosen.append((start, end, label))
    out, last = [], 0
    for start, end, label in sorted(chosen):
        out.append(escape(text[last:start]))
        out.append(Markup('<mark class="ent" data-label="{0}" title="{0}">{1}</mark>').format(label, text[start:end]))
        last = end
    out.append(escape(text[last:]))
    return Markup("").join(out)


def mark_terms(text: str, terms: list[str]) -> Markup:
    """Search snippets: query terms wrapped in <mark>, everything else escaped."""
    terms = [t for t in terms if t]
    if not terms:
        return escape(text)
    pattern = re.compile("|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)), re.IGNORECASE)
    out, last = [], 0
    for m in pattern.finditer(text):
        out.append(escape(text[last : m.start()]))
        out.append(Markup("<mark>{}</mark>").format(m.group(0)))
        last = m.end()
    out.append(escape(text[last:]))
    return Markup("").join(out)


def grid(cells: list[dict[str, Any]]) -> dict[tuple[str, int], list[list[str]]]:
    """shoal.tables rows (one per cell) as row-major grids per (part, table_index)."""
    tables: dict[tuple[str, int], dict[tuple[int, int], str]] = {}
    for c in cells:
        tables.setdefault((c["part"] or "", c["table_index"]), {})[(c["row_index"], c["column_index"])] = (
            c["value"] or ""
        )
    out = {}
    for key, values in sorted(tables.items()):
        rows = 1 + max(r for r, _ in values)
        cols = 1 + max(c for _, c in values)
        out[key] = [[values.get((r, c), "") for c in range(cols)] for r in range(rows)]
    return out


def csv_safe(value: Any) -> str:
    """A cell for CSV: spreadsheet formulas from untrusted text are defused with a leading quote."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def readable_schema(
    spark: SparkSession, settings: Settings, who: Principal
) -> dict[str, dict[str, list[dict[str, str]]]]:
    """{database: {table: [{name, type}]}} of what `who` may SELECT: the tables the catalog lets
    them discover, each narrowed by Governance.access to the columns GovernedSql would let
    them read (a table with none is left out). What the SQL editor
    completes and its schema tree shows: nothing the statement itself would be refused."""
    from shoal.governance import Governance

    gov = Governance(settings)
    out: dict[str, dict[str, list[dict[str, str]]]] = {}
    for entry in gov.visible_tables(spark, who):
        try:
            fields = spark.table(f"`{entry['database']}`.`{entry['table']}`").schema.fields
        except Exception:  # noqa: BLE001 - dropped since it was listed: nothing to complete
            continue
        access = gov.access(who, entry["name"], [f.name for f in fields])
        visible = set(access.visible_columns) if access is not None else set()
        columns = [{"name": f.name, "type": f.dataType.simpleString()} for f in fields if f.name.lower() in visible]
        if columns:
            out.setdefault(entry["database"], {})[entry["table"]] = columns
    return out
