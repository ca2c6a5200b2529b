"""PostgreSQL sessions for BI tools: session commands, the governed catalog, and dialect translation.

`PgSession` is one connection's PostgreSQL side; the wire protocol (shoal.bi.pg.session.Connection) asks it:

- `answer(sql)`: a statement answered without Spark, or None. SET/RESET/SHOW (settings kept per
  connection, as PostgreSQL does; a PostgreSQL SET never reaches Spark) and catalog queries
  (pg_catalog, information_schema, current_schema() ... through pgcatalog, governed).
- `translate(sql)`: the statement in Spark SQL, for GovernedSql. Clients speak PostgreSQL by
  default (double-quoted identifiers, `::` casts, ILIKE, LIMIT/OFFSET, date_trunc): sqlglot reads
  it as PostgreSQL and writes Spark SQL; governance then checks and rewrites the Spark text, as
  for any other statement. Schema `public` is Shoal's `default` database. A client that sends
  Spark SQL (backticks, Spark functions) connects with `options='-c shoal.dialect=spark'` or
  runs `SET shoal.dialect = spark`; its statements then go to GovernedSql unchanged.
- `split(sql)`, `prepare(sql)` and `bind(parsed, params)`: a statement is read once, by its dialect's
  quoting rules (dollar quotes included); Bind puts each parameter into the tree as a literal node,
  and `answer`/`translate` take that bound tree: a value never becomes SQL text read again.

`copy_spec` reads `COPY (query) TO STDOUT` and its options (the wire protocol streams the rows).
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from shoal.bi import pgcatalog
from shoal.bi.pg.codec import PgError, bind, check_bound_sql, parameter_numbers, tree_parameters
from shoal.bi.pgcatalog import CatalogError, SessionInfo
from shoal.exceptions import SqlError
from shoal.sql import split_statements

DIALECTS = ("postgres", "spark")
DIALECT_SETTING = "shoal.dialect"

# Settings a client may SET and SHOW, with their defaults. Only harmless ones: they change what
# SHOW and current_setting() answer, nothing else. Values some settings must keep are in _FIXED.
DEFAULTS: dict[str, str] = {
    "application_name": "",
    "bytea_output": "hex",
    "client_encoding": "UTF8",
    "client_min_messages": "notice",
    "datestyle": "ISO, MDY",
    "default_transaction_isolation": "read committed",
    "default_transaction_read_only": "off",
    "extra_float_digits": "1",
    "idle_in_transaction_session_timeout": "0",
    "integer_datetimes": "on",
    "intervalstyle": "postgres",
    "jit": "off",
    "lc_collate": "C.UTF-8",
    "lc_ctype": "C.UTF-8",
    "lc_messages": "C.UTF-8",
    "lc_monetary": "C.UTF-8",
    "lc_numeric": "C.UTF-8",
    "lc_time": "C.UTF-8",
    "lock_timeout": "0",
    "max_identifier_length": "63",
    "max_index_keys": "32",  # pgjdbc reads it before listing foreign keys
    "search_path": '"$user", public',
    "server_encoding": "UTF8",
    "server_version": "",  # filled from the endpoint
    "server_version_num": "150000",
    "standard_conforming_strings": "off",
    "statement_timeout": "0",
    "timezone": "UTC",
    "transaction_isolation": "read committed",
    "transaction_read_only": "off",
    "row_security": "on",
    "geqo": "on",
    "enable_seqscan": "on",
    "work_mem": "4MB",
    "synchronous_commit": "on",
    "is_superuser": "off",
    "session_authorization": "",
    "default_text_search_config": "pg_catalog.english",
    DIALECT_SETTING: "postgres",
}
# Read-only settings (PostgreSQL refuses to SET them too) and settings held to one value because
# the endpoint always works that way (the text it sends is UTF-8, timestamps are UTC, ISO dates).
_READ_ONLY = {"server_version", "server_version_num", "server_encoding", "integer_datetimes",
              "max_identifier_length", "max_index_keys", "lc_collate", "lc_ctype", "is_superuser", "session_authorization"}  # fmt: skip
_FIXED = {
    "client_encoding": ({"utf8", "utf-8", "unicode"}, "the endpoint sends UTF-8 only"),
    "timezone": ({"utc", "gmt", "etc/utc", "z", "zulu", "universal", "+00", "00:00"}, "sessions run in UTC"),
    "datestyle": ({"iso", "iso, mdy", "iso,mdy", "iso, ymd", "iso, dmy"}, "dates are sent in ISO format"),
    DIALECT_SETTING: (set(DIALECTS), "choose postgres or spark"),
}
# SHOW's spelled-out forms and the names PostgreSQL reports (case as in pg_settings).
_SHOW_ALIASES = {
    "transaction isolation level": "transaction_isolation",
    "time zone": "timezone",
    "session authorization": "session_authorization",
}
_DISPLAY = {"datestyle": "DateStyle", "timezone": "TimeZone", "intervalstyle": "IntervalStyle"}

# Utility statements: PostgreSQL allows no parameters in them.
_NO_PARAMETERS = {"SET", "RESET", "SHOW", "COPY", "DISCARD", "BEGIN", "START", "COMMIT", "END", "ROLLBACK",
                  "ABORT", "DEALLOCATE", "SAVEPOINT", "RELEASE"}  # fmt: skip
_SPARK_HINT = (
    "to send Spark SQL instead, connect with options='-c shoal.dialect=spark' or run SET shoal.dialect = spark"
)

_SET = re.compile(r"(?is)^set\s+(?:(session|local)\s+)?(.+?)\s*;?\s*$")
_SET_VALUE = re.compile(r"(?is)^([a-z_][a-z0-9_.$]*|\"[^\"]+\")\s*(?:=|\s+to\s+)\s*(.*)$")
_SHOW = re.compile(r"(?is)^show\s+(.+?)\s*;?\s*$")
_RESET = re.compile(r"(?is)^reset\s+(.+?)\s*;?\s*$")


@dataclass
class Parsed:
    """One statement read once, by the quoting rules of the dialect it was read in: its text, the
    `$n` parameters it uses and, when it has some, its tree (with the values once bound)."""

    sql: str
    dialect: str
    numbers: list[int]
    tree: exp.Expr | None = None
    values: list[exp.Expr] = dataclasses.field(default_factory=list)  # the bound parameters


class PgSession:
    """One connection's PostgreSQL state: settings, dialect, and its governed catalog."""

    def __init__(
        self,
        principal: Any,
        *,
        pid: int,
        server_version: str,
        startup: dict[str, str],
        snapshot: Callable[[], pgcatalog.Snapshot],
    ) -> None:
        self.principal = principal
        self.pid = pid
        self.version = server_version
        self.defaults = {
            **DEFAULTS,
            "server_version": server_version,
            "session_authorization": principal.name,
            "is_superuser": "on" if getattr(principal, "is_admin", False) else "off",
            "application_name": startup.get("application_name", ""),
        }
        self.settings = dict(self.defaults)
        for name, value in _startup_options(startup.get("options", "")).items():
            self._set(name, value)
        # sqlglot reads PostgreSQL string literals as PostgreSQL does today (a backslash is a
        # backslash); Spark reads it as an escape. Clients escape their literals by what this says.
        self.defaults["standard_conforming_strings"] = "off" if self.dialect == "spark" else "on"
        self.settings["standard_conforming_strings"] = self.defaults["standard_conforming_strings"]
        self.catalog = pgcatalog.Catalog(snapshot)

    @classmethod
    def connect(
        cls, spark: Any, settings: Any, principal: Any, pid: int, server_version: str, startup: dict[str, str]
    ) -> PgSession:
        """The session of a connection that just signed in (startup: its startup parameters)."""
        session = cls(
            principal,
            pid=pid,
            server_version=server_version,
            startup=startup,
            snapshot=lambda: _snapshots(spark, settings).get(session.principal),
        )
        return session

    def set_principal(self, principal: Any) -> None:
        """The principal as re-read for a statement (groups, admin): the catalog is rebuilt for it."""
        if principal != self.principal:
            self.principal = principal
            self.catalog.invalidate()

    @property
    def dialect(self) -> str:
        return self.settings[DIALECT_SETTING]

    # ---- what the wire protocol asks ---------------------------------------------------------------
    def answer(
        self, sql: str, bound: Parsed | None = None
    ) -> tuple[list[str], list[int], list[tuple[Any, ...]], str] | None:
        """(columns, type OIDs, rows, command tag) for a statement answered here; None for Spark.
        `bound`: the statement with its parameters bound (prepare(), then the wire's Bind)."""
        if bound is not None and bound.tree is not None:
            return self._catalog(bound.tree) if bound.dialect == "postgres" else None
        body = sql.strip().rstrip(";").strip()
        word = body.split(None, 1)[0].upper() if body else ""
        if word == "SET":
            self.set_statement(body)
            return [], [], [], "SET"
        if word == "RESET":
            m = _RESET.match(body)
            name = _norm(m.group(1)) if m else "all"
            if name == "all":
                self.settings = dict(self.defaults)
            else:
                self.settings[name] = self.defaults.get(name, "")
            return [], [], [], "RESET"
        if word == "SHOW":
            return self.show(body)  # None for a Spark SHOW (SHOW TABLES ...) in the spark dialect
        if word in ("SAVEPOINT", "RELEASE") or (
            word == "ROLLBACK" and re.match(r"(?is)^rollback\s+(work\s+|transaction\s+)?to\b", body)
        ):
            # Savepoints inside the (read-only) transaction: nothing to undo. psycopg sets one
            # around its type lookups; ROLLBACK TO must not end the transaction as ROLLBACK does.
            return [], [], [], "ROLLBACK" if word == "ROLLBACK" else word
        if word == "DISCARD":
            self.settings = dict(self.defaults)
            return None  # the wire protocol also drops its prepared statements
        if word not in ("SELECT", "WITH", "(", "VALUES", "TABLE") and not body.startswith("("):
            return None
        tree = _parse_postgres(body)
        return None if tree is None else self._catalog(tree)

    def _catalog(self, tree: exp.Expr) -> tuple[list[str], list[int], list[tuple[Any, ...]], str] | None:
        if not pgcatalog.is_catalog_query(tree):
            return None
        try:
            columns, oids, rows = self.catalog.run(tree, self.session_info())
        except CatalogError as exc:
            raise _pg_error(str(exc), exc.code, exc.hint) from exc
        return columns, oids, rows, f"SELECT {len(rows)}"

    # ---- statements: split, prepared, bound ----------------------------------------------------------
    def split(self, sql: str) -> list[str]:
        """The statements of a simple query, split by the session dialect's quoting rules (a `;`
        inside a PostgreSQL dollar-quoted string does not end a statement)."""
        return split_statements(sql, dialect=self.dialect)

    def prepare(self, sql: str) -> Parsed:
        """Read a statement once, as the wire's Parse message brings it: its `$n` parameters (by
        the dialect's own quoting rules, dollar quotes included) and, when it has some, its tree,
        where Bind puts each value as a literal node. Catalog queries are PostgreSQL in both
        dialects, so the spark dialect tries PostgreSQL first for them."""
        dialects = ["postgres"] if self.dialect == "postgres" else ["postgres", "spark"]
        for dialect in dialects:
            catalog_only = dialect != self.dialect
            try:
                numbers = parameter_numbers(sql, dialect)
            except PgError:
                if catalog_only:
                    continue
                raise
            if not numbers:
                if catalog_only:
                    continue
                return Parsed(sql, dialect, [])
            tree = _parse_one(sql, dialect, strict=not catalog_only)
            if catalog_only and (tree is None or not pgcatalog.is_catalog_query(tree)):
                continue
            assert tree is not None
            word = sql.split(None, 1)[0].upper().rstrip(";")
            if word in _NO_PARAMETERS:
                raise PgError(f"a {word} statement cannot have parameters (${numbers[0]})", "42601")
            if isinstance(tree, exp.Command) or sorted(tree_parameters(tree)) != sorted(numbers):
                raise PgError("parameters ($n) are not supported in this kind of statement", "0A000")
            return Parsed(sql, dialect, numbers, tree)
        raise AssertionError("unreachable: the session dialect always answers")

    def bind(self, parsed: Parsed, params: list[exp.Expr]) -> Parsed:
        """The prepared statement with its parameters bound as literal nodes of a new tree."""
        if parsed.tree is None:
            return parsed
        return dataclasses.replace(parsed, tree=bind(parsed.tree, params), values=list(params))

    def translate(self, sql: str, bound: Parsed | None = None) -> str:
        """The statement as Spark SQL (unchanged in the spark dialect, unless it had parameters:
        then the bound tree is written as Spark SQL)."""
        if bound is not None and bound.tree is not None:
            text = bound.tree.sql(dialect="spark") if bound.dialect == "spark" else self._to_spark([bound.tree])
            check_bound_sql(text, bound.values)
            return text
        if self.dialect == "spark":
            return sql
        try:
            trees = sqlglot.parse(sql, read="postgres")
        except SqlglotError as exc:
            # A SqlError: pgwire reports it as the statement's syntax error (42601), hint included.
            raise SqlError(
                f"cannot read SQL as PostgreSQL: {str(exc).splitlines()[0]}",
                hint=_SPARK_HINT,
            ) from exc
        return self._to_spark(trees)

    def _to_spark(self, trees: list[exp.Expr | None]) -> str:
        out = []
        for tree in trees:
            if tree is None:
                continue
            if isinstance(tree, exp.Command):  # sqlglot did not understand it: Spark reads the text as is
                out.append(tree.sql(dialect="postgres"))
                continue
            _schema_qualified_columns(tree)
            pgcatalog.name_columns(tree)  # count, max, ?column?: not Spark's count(1)
            _unconstrained_numeric(tree)
            _any_as_exists(tree)
            _zoned_truncation(tree)
            tree = tree.transform(_aggregate_lists)
            for t in tree.find_all(exp.Table):
                if (t.db or "").lower() == pgcatalog.PUBLIC and not t.catalog:
                    t.set("db", exp.to_identifier("default"))
            out.append(tree.sql(dialect="spark"))
        return ";\n".join(out)

    def parameter_status(self) -> dict[str, str]:
        """What the sign-in reports (ParameterStatus) that depends on the dialect chosen at startup."""
        return {"standard_conforming_strings": self.settings["standard_conforming_strings"]}

    def session_info(self) -> SessionInfo:
        return SessionInfo(
            user=self.principal.name,
            pid=self.pid,
            search_path=self.search_path(),
            settings={_DISPLAY.get(k, k): v for k, v in self.settings.items()} | dict(self.settings),
            version=f"PostgreSQL {self.version}, Spark SQL governed by Shoal",
        )

    def search_path(self) -> list[str]:
        out = []
        for part in self.settings["search_path"].split(","):
            name = part.strip()
            if name == '"$user"' or name == "$user":
                name = self.principal.name
            out.append(name[1:-1] if name.startswith('"') and name.endswith('"') else name.lower())
        return [n for n in out if n] or [pgcatalog.PUBLIC]

    # ---- SET and SHOW -------------------------------------------------------------------------------
    def set_statement(self, body: str) -> None:
        m = _SET.match(body)
        rest = m.group(2) if m else ""
        low = " ".join(rest.lower().split())
        if low.startswith(("transaction ", "session characteristics as transaction")):
            if "read write" in low:
                raise _pg_error("Shoal's PostgreSQL endpoint has read-only transactions only", "0A000")
            return  # isolation levels: every statement sees the latest committed snapshots
        if low.startswith("time zone "):
            self._set("timezone", rest[len("time zone ") :])
            return
        if low.startswith(("names ", "schema ")):
            self._set("client_encoding" if low.startswith("names") else "search_path", rest.split(None, 1)[1])
            return
        if low.startswith("role ") or low.startswith("session authorization"):
            raise _pg_error(
                "SET ROLE and SET SESSION AUTHORIZATION are not supported: sign in as that principal", "0A000"
            )
        v = _SET_VALUE.match(rest)
        if not v:
            raise _pg_error(f"cannot read this SET statement: {body[:200]}", "42601")
        self._set(v.group(1), v.group(2))

    def _set(self, raw_name: str, raw_value: str) -> None:
        name = _norm(raw_name)
        value = _value(raw_value)
        # PostgreSQL accepts any two-part name (an extension's placeholder): kept for SHOW, no
        # effect. So `SET spark.sql.x = ...` is remembered here and never reaches Spark.
        if name not in self.settings and "." not in name:
            raise _pg_error(
                f'unrecognized configuration parameter "{name}"',
                "42704",
                hint="Shoal's PostgreSQL endpoint keeps the usual client settings only; see docs/bi.md",
            )
        if name in _READ_ONLY:
            raise _pg_error(f'parameter "{name}" cannot be changed', "55P02")
        if value.upper() == "DEFAULT":
            value = self.defaults.get(name, "")
        if name in _FIXED:
            allowed, why = _FIXED[name]
            if value.lower() not in allowed:
                raise _pg_error(f'invalid value for parameter "{name}": "{value}" ({why})', "22023")
            if name == DIALECT_SETTING:
                value = value.lower()
        if name == "search_path":
            value = ", ".join(p.strip() for p in raw_value.split(",")) if "," in raw_value else value
        self.settings[name] = value

    def show(self, body: str) -> tuple[list[str], list[int], list[tuple[Any, ...]], str] | None:
        m = _SHOW.match(body)
        raw = " ".join((m.group(1) if m else "").lower().split())
        name = _SHOW_ALIASES.get(raw, _norm(raw))
        if name == "all":
            rows = [(_DISPLAY.get(k, k), v, "") for k, v in sorted(self.settings.items())]
            return ["name", "setting", "description"], [pgcatalog.TEXT] * 3, rows, "SHOW"
        if name not in self.settings:
            if self.dialect == "spark":
                return None
            raise _pg_error(f'unrecognized configuration parameter "{name}"', "42704")
        return [_DISPLAY.get(name, name)], [pgcatalog.TEXT], [(self.settings[name],)], "SHOW"


_caches: dict[tuple[int, int], tuple[Any, Any, pgcatalog.SnapshotCache]] = {}
_caches_lock = threading.Lock()


def _snapshots(spark: Any, settings: Any) -> pgcatalog.SnapshotCache:
    """The governed-snapshot cache of one server (its Spark session and settings)."""
    with _caches_lock:
        held = _caches.get((id(spark), id(settings)))
        if held is None or held[0] is not spark or held[1] is not settings:
            cache = pgcatalog.SnapshotCache(lambda principal: pgcatalog.governed_snapshot(spark, settings, principal))
            held = _caches[(id(spark), id(settings))] = (spark, settings, cache)
        return held[2]


def _schema_qualified_columns(tree: exp.Expr) -> None:
    """`hr.salaries.id` (SQLAlchemy writes columns so) -> `salaries.id` over `hr.salaries AS salaries`.

    Governance replaces each table with a subquery, which a schema-qualified column cannot
    reach; naming the table by an alias, as PostgreSQL resolves it, keeps the reference valid.
    """
    qualified = [c for c in tree.find_all(exp.Column) if c.args.get("db") is not None and c.table]
    if not qualified:
        return
    for t in tree.find_all(exp.Table):
        if isinstance(t.this, exp.Identifier) and t.db and not t.alias:
            t.set("alias", exp.TableAlias(this=exp.to_identifier(t.name)))
    for c in qualified:
        c.set("db", None)
        c.set("catalog", None)


def _aggregate_lists(node: exp.Expr) -> exp.Expr:
    """string_agg / array_agg (with ORDER BY), which Spark 3.5 lacks (sqlglot writes LISTAGG, or
    COLLECT_LIST without the order): array_join over a list sorted by the ORDER BY keys."""
    if isinstance(node, exp.GroupConcat):
        listed = _sorted_list(node.this)
        separator = node.args.get("separator") or exp.Literal.string(",")
        return node if listed is None else exp.Anonymous(this="ARRAY_JOIN", expressions=[listed, separator])
    if isinstance(node, exp.ArrayAgg) and isinstance(node.this, exp.Order):
        listed = _sorted_list(node.this)
        return node if listed is None else listed
    return node


def _sorted_list(arg: exp.Expr) -> exp.Expr | None:
    """The aggregated values as a Spark array, in the ORDER BY's order (all keys ascending or all
    descending; None, left as it was, for a mix)."""
    if isinstance(arg, exp.Distinct):
        return exp.Anonymous(
            this="ARRAY_SORT", expressions=[exp.Anonymous(this="COLLECT_SET", expressions=arg.expressions)]
        )
    if not isinstance(arg, exp.Order):
        return exp.Anonymous(this="COLLECT_LIST", expressions=[arg])
    descending = {bool(o.args.get("desc")) for o in arg.expressions}
    if len(descending) != 1:
        return None
    fields = [exp.alias_(o.this, f"k{i}") for i, o in enumerate(arg.expressions)]
    pairs = exp.Anonymous(this="STRUCT", expressions=[*fields, exp.alias_(arg.this, "v")])
    ordered: exp.Expr = exp.Anonymous(
        this="ARRAY_SORT", expressions=[exp.Anonymous(this="COLLECT_LIST", expressions=[pairs])]
    )
    if descending.pop():
        ordered = exp.Anonymous(this="REVERSE", expressions=[ordered])
    return exp.Dot(this=exp.Paren(this=ordered), expression=exp.to_identifier("v"))  # the v of each pair


def _zoned_truncation(tree: exp.Expr) -> None:
    """date_trunc(field, ts, zone) truncates in `zone`; Spark's DATE_TRUNC has no zone and sqlglot
    dropped it (a wrong answer): truncate the wall-clock time in the zone, then read it back."""
    for node in list(tree.find_all(exp.TimestampTrunc)):
        zone = node.args.get("zone")
        if zone is None:
            continue
        local = exp.Anonymous(this="from_utc_timestamp", expressions=[node.this.copy(), zone.copy()])
        cut = exp.TimestampTrunc(this=local, unit=node.args.get("unit"))
        node.replace(exp.Anonymous(this="to_utc_timestamp", expressions=[cut, zone.copy()]))


def _unconstrained_numeric(tree: exp.Expr) -> None:
    """`x::numeric` keeps x's digits in PostgreSQL; Spark's bare DECIMAL is DECIMAL(10,0), which
    would drop every fraction (1.25 -> 1). Spark's widest with room on both sides stands in."""
    for dtype in tree.find_all(exp.DataType):
        if dtype.this == exp.DataType.Type.DECIMAL and not dtype.expressions:
            dtype.set("expressions", [exp.DataTypeParam(this=exp.Literal.number(n)) for n in (38, 18)])


def _norm(name: str) -> str:
    name = name.strip()
    return name[1:-1] if name.startswith('"') and name.endswith('"') else name.lower()


def _value(raw: str) -> str:
    """A SET value as PostgreSQL stores it: quotes removed, list items kept."""
    raw = raw.strip()
    parts = [p.strip() for p in raw.split(",")] if "," in raw and not raw.startswith("'") else [raw]
    out = []
    for p in parts:
        if len(p) >= 2 and p[0] == p[-1] == "'":
            p = p[1:-1].replace("''", "'")
        out.append(p)
    return ", ".join(out)


def _startup_options(options: str) -> dict[str, str]:
    """libpq's `options` startup parameter: `-c name=value` or `--name=value`, space-separated."""
    out: dict[str, str] = {}
    words = options.replace("\\ ", "\x00").split()
    i = 0
    while i < len(words):
        w = words[i].replace("\x00", " ")
        if w == "-c" and i + 1 < len(words):
            w, i = words[i + 1].replace("\x00", " "), i + 1
        elif w.startswith("-c") or w.startswith("--"):
            w = w[2:]
        name, sep, value = w.partition("=")
        if sep:
            out[name.replace("-", "_") if "." not in name else name] = value
        i += 1
    return out


@dataclass
class CopySpec:
    """`COPY (query) TO STDOUT` (or `COPY table [(columns)] TO STDOUT`) and its options; unset
    options take the format's defaults (text: tab and \\N; csv: comma and the empty string)."""

    query: str
    format: str = "text"  # text, csv or binary
    header: bool = False
    delimiter: str | None = None
    null: str | None = None
    quote: str = '"'
    escape: str | None = None  # csv: the quote unless set
    force_quote: set[str] = field(default_factory=set)  # csv: these columns always quoted ("*": all)


# The lambda variable of `v op ANY(array)` as Spark's EXISTS: sqlglot names it `x`, and a column
# named x then compared the variable with itself (x = ANY(ARRAY[...]) was always true).
_ANY_VARIABLE = "shoal_any_element"


def _any_as_exists(tree: exp.Expr) -> None:
    """`v op ANY(array)` -> EXISTS(array, e -> v op e), before sqlglot's own rewrite does it with `x`."""
    for found in list(tree.find_all(exp.Any)):
        binop, array = found.parent, found.this
        if isinstance(array, exp.Query) or not isinstance(binop, exp.Binary) or isinstance(binop, exp.Like | exp.ILike):
            continue
        variable = exp.to_identifier(_ANY_VARIABLE)
        found.replace(variable)
        body = exp.Lambda(this=binop.copy(), expressions=[variable.copy()])
        binop.replace(exp.Exists(this=array.unnest(), expression=body))


def copy_spec(sql: str) -> CopySpec:
    """Read a COPY statement by PostgreSQL's syntax (old and new option forms). Only COPY ... TO
    STDOUT, the form psql's \\copy and ADBC send; the query keeps the session's dialect."""
    try:
        tokens = sqlglot.tokenize(sql, read="postgres")
    except SqlglotError as exc:
        raise PgError(f"cannot read the COPY statement: {str(exc).splitlines()[0]}", "42601") from exc
    if len(tokens) < 4 or tokens[0].text.upper() != "COPY":
        raise PgError("cannot read the COPY statement", "42601")
    if tokens[1].token_type == TokenType.L_PAREN:
        end = _closing(tokens, 1)
        _query_only(tokens[2:end])
        query, rest = sql[tokens[1].end + 1 : tokens[end].start].strip(), tokens[end + 1 :]
    else:  # COPY table [(columns)]: its rows, through the same governed SELECT
        to = next((i for i, t in enumerate(tokens) if t.text.upper() in ("TO", "FROM")), len(tokens))
        name, _, columns = sql[tokens[1].start : tokens[to - 1].end + 1].partition("(")
        query, rest = _table_query(name.strip(), columns.strip().removesuffix(")")), tokens[to:]
    words = [t.text.upper() for t in rest[:2]]
    if words[:1] == ["FROM"]:
        raise PgError("COPY FROM is not supported by Shoal's PostgreSQL endpoint: write rows with INSERT", "0A000")
    if words != ["TO", "STDOUT"]:
        raise PgError(
            "only COPY ... TO STDOUT is supported (psql's \\copy ... to 'file' writes on the client)", "0A000"
        )
    spec = CopySpec(query)
    for item in _copy_items(rest[2:]):
        _copy_option(spec, item)
    csv = spec.format == "csv"
    spec.delimiter = spec.delimiter if spec.delimiter is not None else ("," if csv else "\t")
    spec.null = spec.null if spec.null is not None else ("" if csv else "\\N")
    spec.escape = spec.escape or spec.quote
    _check_copy_options(spec)
    return spec


# What COPY (query) may hold, as PostgreSQL: a query, never a statement that changes something.
_NOT_A_QUERY = {
    TokenType.INSERT, TokenType.UPDATE, TokenType.DELETE, TokenType.MERGE, TokenType.DROP, TokenType.CREATE,
    TokenType.ALTER, TokenType.TRUNCATE, TokenType.SET, TokenType.COMMAND, TokenType.SEMICOLON, TokenType.REPLACE,
    TokenType.CACHE, TokenType.UNCACHE, TokenType.USE, TokenType.DESCRIBE,
}  # fmt: skip
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*){0,2}")
_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")


def _query_only(tokens: list[Any]) -> None:
    first = tokens[0].text.upper() if tokens else ""
    if first not in ("SELECT", "WITH", "VALUES", "TABLE", "(") or any(t.token_type in _NOT_A_QUERY for t in tokens):
        raise PgError("COPY query must be a SELECT, VALUES or TABLE query", "0A000")


def _table_query(name: str, columns: str) -> str:
    """COPY table [(columns)] as the SELECT it stands for, from plain names only (quoted names:
    COPY (SELECT ...) TO STDOUT says the same)."""
    cols = [c.strip() for c in columns.split(",")] if columns else []
    if not _NAME.fullmatch(name) or not all(_COLUMN.fullmatch(c) for c in cols):
        raise PgError(
            "COPY table TO STDOUT takes a plain table name and column names",
            "0A000",
            hint="write COPY (SELECT ... FROM ...) TO STDOUT for quoted or unusual names",
        )
    return f"SELECT {', '.join(cols) or '*'} FROM {name}"


def _check_copy_options(spec: CopySpec) -> None:
    """PostgreSQL's own checks: options that would make the output ambiguous are errors."""
    delimiter, null = spec.delimiter or "", spec.null or ""
    text_forbidden = "\\.abcdefghijklmnopqrstuvwxyz0123456789" if spec.format == "text" else ""
    if delimiter in ("\n", "\r", "\\") or (delimiter and delimiter in text_forbidden):
        raise PgError(f'COPY delimiter cannot be "{delimiter}"', "22023")
    if spec.format == "csv" and delimiter == spec.quote:
        raise PgError("COPY delimiter and quote must be different", "22023")
    if delimiter and delimiter in null:
        raise PgError("COPY delimiter character must not appear in the NULL specification", "22023")
    if "\n" in null or "\r" in null:
        raise PgError("COPY null representation cannot use newline or carriage return", "22023")


def _closing(tokens: list[Any], start: int) -> int:
    depth = 0
    for i in range(start, len(tokens)):
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(tokens[i].token_type, 0)
        if depth == 0:
            return i
    raise PgError("cannot read the COPY statement: unbalanced parentheses", "42601")


def _copy_items(tokens: list[Any]) -> list[list[Any]]:
    """The options, one token list each: `WITH (FORMAT csv, HEADER true, ...)` or the old form
    `WITH CSV HEADER DELIMITER [AS] ',' FORCE QUOTE *`."""
    if tokens and tokens[0].text.upper() == "WITH":
        tokens = tokens[1:]
    if tokens and tokens[0].token_type == TokenType.L_PAREN:
        items: list[list[Any]] = [[]]
        depth = 0
        for t in tokens[1 : _closing(tokens, 0)]:
            depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(t.token_type, 0)
            if t.token_type == TokenType.COMMA and depth == 0:
                items.append([])
            else:
                items[-1].append(t)
        return items
    items, i = [], 0
    while i < len(tokens):
        item, word = [tokens[i]], tokens[i].text.upper()
        i += 1
        if word in ("DELIMITER", "NULL", "QUOTE", "ESCAPE", "ENCODING"):
            i += 1 if i < len(tokens) and tokens[i].text.upper() == "AS" else 0
            item += tokens[i : i + 1]
            i += 1
        elif word == "FORCE":  # FORCE QUOTE * | FORCE QUOTE col [, col ...]
            item += tokens[i : i + 2]
            i += 2
            while i + 1 < len(tokens) and tokens[i].token_type == TokenType.COMMA:
                item.append(tokens[i + 1])
                i += 2
        items.append(item)
    return items


def _copy_option(spec: CopySpec, item: list[Any]) -> None:
    if not item:
        return
    name = item[0].text.lower()
    values = [t.text for t in item[1:] if t.token_type not in (TokenType.L_PAREN, TokenType.R_PAREN, TokenType.COMMA)]
    value = values[0] if values else ""
    if name in ("csv", "binary"):
        spec.format = name
    elif name == "format":
        if value.lower() not in ("text", "csv", "binary"):
            raise PgError(f'COPY format "{value}" not recognized', "22023")
        spec.format = value.lower()
    elif name == "header":
        spec.header = value.lower() not in ("false", "off", "0")
    elif name in ("delimiter", "null", "quote", "escape"):
        if name != "null" and len(value) != 1:
            raise PgError(f"COPY {name} must be a single one-byte character", "22023")
        setattr(spec, name, value)
    elif name in ("force", "force_quote"):
        spec.force_quote = {"*"} if "*" in values else {v.lower() for v in values if v.upper() != "QUOTE"}
    elif name == "encoding":
        if value.upper().replace("-", "") != "UTF8":
            raise PgError("COPY encoding must be UTF8: the endpoint sends UTF-8 only", "0A000")
    else:
        raise PgError(f'COPY option "{name}" is not supported by Shoal\'s PostgreSQL endpoint', "0A000")


def _parse_one(sql: str, dialect: str, *, strict: bool) -> exp.Expr | None:
    """The one statement in sql as a tree; None (strict: a 42601 error) if it is not one statement."""
    try:
        trees = [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
    except SqlglotError as exc:
        if not strict:
            return None
        name = "PostgreSQL" if dialect == "postgres" else "Spark SQL"
        raise PgError(f"cannot read SQL as {name}: {str(exc).splitlines()[0]}", "42601", hint=_SPARK_HINT) from exc
    if len(trees) != 1:
        if not strict:
            return None
        raise PgError("cannot insert multiple commands into a prepared statement", "42601")
    return trees[0]


def _parse_postgres(sql: str) -> exp.Expr | None:
    try:
        trees = sqlglot.parse(sql, read="postgres")
    except SqlglotError:
        return None  # not PostgreSQL: not a catalog query either (Spark, or GovernedSql, says why)
    return trees[0] if len(trees) == 1 else None


def _pg_error(message: str, code: str, hint: str | None = None) -> Exception:
    # Imported here: the endpoint (shoal.bi.pg) imports this module; its PgError is what the client sees.
    from shoal.bi.pg.codec import PgError

    return PgError(message, code, hint=hint)
