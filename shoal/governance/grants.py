"""Grants, tags and the policy that turns them into what a principal may see.

Deny by default. A principal's SELECT on a table is the union of every grant that reaches
it: grants on the table, on its database, and on tag expressions its tags (or its
columns' tags) satisfy, made to the user, to a group of theirs, or to `everyone`. Each
grant contributes cells: its columns (include or exclude list; for tag grants, the
columns whose tags match) on the rows its filter keeps, masked where it says so. The
union is exact: a cell is visible if some grant shows it, masked only if every grant
that shows it masks it.
"""

from __future__ import annotations

import builtins
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlalchemy import delete, insert, select, update
from sqlglot import exp

from shoal.config import Settings
from shoal.governance.errors import AccessDenied, GovernanceError
from shoal.governance.principals import EVERYONE, Principal, Principals
from shoal.governance.store import grants, state_tables, table_info, tag_assignments, tag_keys
from shoal.lake import database
from shoal.lake.database import utcnow

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PRIVILEGES = ("SELECT", "INSERT", "ALTER", "DROP", "DESCRIBE", "ALL")
TARGETS = ("TABLE", "DATABASE", "TAGS", "WORKFLOW")
# On a workflow: SELECT sees its definition, executions (with their step results) and
# graphs; EXECUTE (or ALL) also starts and resumes it.
WORKFLOW_PRIVILEGES = ("SELECT", "EXECUTE", "ALL")
# Members of this group see, start and resume every workflow (as admins do).
OPERATORS = "operators"
_WORKFLOW = re.compile(r"^[^\s\x00-\x1f/]{1,200}$")
# What each mask guarantees (README, Governance): `hash` is a keyed HMAC-SHA256 with a
# per-deployment secret (equal values stay equal, so joins and counts work, but no
# dictionary of guesses can be hashed to match); `redact` and `null` reveal nothing;
# `last4` and `email` reveal the kept part by design.
MASKS = {
    "hash": "shoal_mask_hmac(cast({c} AS string))",
    "redact": "CAST('****' AS string)",
    "null": "CAST(NULL AS string)",
    "last4": "concat(repeat('*', greatest(length(cast({c} AS string)) - 4, 0)), right(cast({c} AS string), 4))",
    "email": "regexp_replace(cast({c} AS string), '^[^@]+', '***')",
}
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Functions that read files, reach the JVM or reveal where data lives: never in a filter.
FORBIDDEN_FUNCTIONS = {"input_file_name", "input_file_block_start", "input_file_block_length", "reflect", "java_method"}


def forbidden_function(name: str) -> bool:
    """Never in user SQL or filters: file/JVM functions, and Shoal's own (the mask function
    would otherwise hash values of the caller's choosing with the secret key)."""
    name = name.lower()
    return name in FORBIDDEN_FUNCTIONS or name.startswith("shoal_")


def table_key(name: str) -> tuple[str, str]:
    parts = [p.strip("`").lower() for p in name.split(".")]
    if len(parts) != 2 or not all(IDENTIFIER.match(p) for p in parts):
        raise GovernanceError(f"invalid table name {name!r}", hint="use DATABASE.TABLE")
    return parts[0], parts[1]


def parse_tag_expression(text: str) -> dict[str, list[str]]:
    """`k=v1,v2; k2=v3` (or `AND` between keys): AND across keys, OR across values."""
    out: dict[str, list[str]] = {}
    for part in re.split(r"\s*;\s*|\s+AND\s+", text.strip(), flags=re.I):
        if not part:
            continue
        if "=" not in part:
            raise GovernanceError(f"invalid tag expression {text!r}", hint="write KEY=VALUE[,VALUE...][;KEY=VALUE...]")
        key, values = part.split("=", 1)
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not key.strip() or not vals:
            raise GovernanceError(f"invalid tag expression {text!r}")
        out.setdefault(key.strip().lower(), [])
        out[key.strip().lower()] += [v for v in vals if v not in out[key.strip().lower()]]
    if not out:
        raise GovernanceError("an empty tag expression")
    return {k: sorted(v) for k, v in sorted(out.items())}


def check_predicate(text: str, columns: list[str] | None, *, what: str = "row filter") -> str:
    """A row filter is one boolean expression over the table's columns: no queries, no file functions."""
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.ParseError as exc:
        raise GovernanceError(f"cannot parse the {what} {text!r}: {str(exc).splitlines()[0]}") from exc
    if isinstance(tree, exp.Query) or tree.find(exp.Select, exp.Subquery, exp.Table) is not None:
        raise GovernanceError(f"the {what} must be an expression over the row, not a query: {text!r}")
    for fn in tree.find_all(exp.Func):
        name = (fn.sql_name() if not isinstance(fn, exp.Anonymous) else fn.name).lower()
        if forbidden_function(name):
            raise GovernanceError(f"function {name} is not allowed in a {what}")
    if columns is not None:
        unknown = sorted({c.name.lower() for c in tree.find_all(exp.Column)} - {c.lower() for c in columns})
        if unknown:
            raise GovernanceError(f"the {what} names unknown column(s) {', '.join(unknown)}")
    return tree.sql(dialect="spark")


@dataclass
class Grant:
    id: int
    grantee: str
    privilege: str
    target_kind: str
    target: str
    columns: list[str] | None = None
    exclude_columns: list[str] | None = None
    row_filter: str | None = None
    masks: dict[str, str] = field(default_factory=dict)
    grantable: bool = False
    granted_by: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "grantee": self.grantee,
            "privilege": self.privilege,
            "on": f"{self.target_kind} {self.target}",
            "columns": self.columns,
            "exclude_columns": self.exclude_columns,
            "row_filter": self.row_filter,
            "masks": self.masks or None,
            "with_grant_option": self.grantable,
            "granted_by": self.granted_by,
        }


@dataclass
class CellRule:
    """What one grant lets a principal see of a table."""

    columns: set[str]
    row_filter: str | None
    masks: dict[str, str]
    # The grant covers the table as a whole, so also every column it ever had: the table's
    # history (snapshots, tags, branches, metadata tables) holds columns dropped since.
    whole: bool = False


@dataclass
class TableAccess:
    table: str
    all_columns: list[str]
    rules: list[CellRule]

    @property
    def visible_columns(self) -> list[str]:
        seen = set().union(*(r.columns for r in self.rules)) if self.rules else set()
        return [c for c in self.all_columns if c in seen]

    @property
    def unrestricted(self) -> bool:
        """Every column, every row, nothing masked (what metadata tables and time travel need)."""
        return any(r.row_filter is None and not r.masks and r.columns >= set(self.all_columns) for r in self.rules)

    @property
    def whole_table(self) -> bool:
        """Granted the table as a whole (admin, owner, a database grant, a table grant without
        column lists, filters or masks, a tag grant the table's own tags satisfy): what reading
        its history and metadata needs. Covering today's columns is not enough: a column left
        out of a grant and then dropped is still in old snapshots and in file statistics."""
        return any(r.whole for r in self.rules)

    def projection(self) -> tuple[list[str], str | None]:
        """Select-list expressions (one per visible column) and the row predicate."""
        if self.unrestricted:
            return [f"`{c}`" for c in self.all_columns], None
        filters = [r.row_filter for r in self.rules]
        where = None if any(f is None for f in filters) else " OR ".join(f"({f})" for f in dict.fromkeys(filters))
        select = []
        for c in self.visible_columns:
            q = f"`{c}`"
            plain = [r.row_filter for r in self.rules if c in r.columns and c not in r.masks]
            masked = [(r.row_filter, r.masks[c]) for r in self.rules if c in r.columns and c in r.masks]
            if None in plain:  # some grant shows it unmasked on every row it shows
                select.append(q)
                continue
            shown = f"CAST({q} AS string)" if masked else q  # one CASE, one type
            branches = [f"WHEN {' OR '.join(f'({f})' for f in plain)} THEN {shown}"] if plain else []
            branches += [f"WHEN {f or 'TRUE'} THEN {MASKS[m].format(c=q)}" for f, m in masked]
            select.append(f"CASE {' '.join(branches)} END AS {q}")
        return select, where


class Governance:
    """Grants, tags and ownership; and the evaluation of what a principal may do."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.principals = Principals(settings)
        self.engine = database.engine(settings, state_tables)

    # ---- grants ------------------------------------------------------------------------------
    def grant(
        self,
        by: Principal,
        privilege: str,
        target_kind: str,
        target: str,
        grantee: str,
        *,
        columns: list[str] | None = None,
        exclude_columns: list[str] | None = None,
        row_filter: str | None = None,
        masks: dict[str, str] | None = None,
        grantable: bool = False,
        table_columns: list[str] | None = None,
    ) -> Grant:
        privilege, target_kind = privilege.upper(), target_kind.upper()
        if target_kind not in TARGETS:
            raise GovernanceError(f"unknown target {target_kind!r} (ON TABLE, ON DATABASE, ON TAGS or ON WORKFLOW)")
        known = WORKFLOW_PRIVILEGES if target_kind == "WORKFLOW" else PRIVILEGES
        if privilege not in known:
            raise GovernanceError(
                f"unknown privilege {privilege!r} on {target_kind.lower()} (known: {', '.join(known)})"
            )
        self.principals.get_row(grantee)
        if target_kind == "WORKFLOW":
            if not _WORKFLOW.match(target):
                raise GovernanceError(f"invalid workflow name {target!r}")
        elif target_kind == "TABLE":
            target = ".".join(table_key(target))
        elif target_kind == "DATABASE":
            if not IDENTIFIER.match(target):
                raise GovernanceError(f"invalid database name {target!r}")
            target = target.lower()
        else:
            expression = parse_tag_expression(target)
            self._check_tag_values(expression)
            target = json.dumps(expression, sort_keys=True)
        fine = columns or exclude_columns or row_filter or masks
        if fine and (privilege not in ("SELECT", "ALL") or target_kind != "TABLE"):
            raise GovernanceError("--columns, --exclude-columns, --row-filter and --mask apply to SELECT on a table")
        if columns and exclude_columns:
            raise GovernanceError("give --columns or --exclude-columns, not both")
        cols = [c.lower() for c in columns or []]
        excl = [c.lower() for c in exclude_columns or []]
        mask_map = {k.lower(): v.lower() for k, v in (masks or {}).items()}
        for c, m in mask_map.items():
            if m not in MASKS:
                raise GovernanceError(f"unknown mask {m!r} for {c} (known: {', '.join(MASKS)})")
        if table_columns is not None:
            existing = {c.lower() for c in table_columns}
            unknown = sorted((set(cols) | set(excl) | set(mask_map)) - existing)
            if unknown:
                raise GovernanceError(f"table {target} has no column(s) {', '.join(unknown)}")
        if row_filter:
            row_filter = check_predicate(row_filter, table_columns)
        self._require_grant_authority(by, privilege, target_kind, target)
        with self.engine.begin() as conn:
            gid = database.inserted_id(
                conn.execute(
                    insert(grants).values(
                        grantee=grantee,
                        privilege=privilege,
                        target_kind=target_kind,
                        target=target,
                        columns=json.dumps(cols) if cols else None,
                        exclude_columns=json.dumps(excl) if excl else None,
                        row_filter=row_filter,
                        masks=json.dumps(mask_map) if mask_map else None,
                        grantable=grantable,
                        granted_by=by.name,
                        created_at=utcnow(),
                    )
                )
            )
        return self.get(gid)

    def _require_grant_authority(self, by: Principal, privilege: str, kind: str, target: str) -> None:
        if by.is_admin:
            return
        if kind == "TABLE" and self.owner(target) == by.name:
            return
        for g in self.grants_for(by):
            same = g.privilege in (privilege, "ALL") and g.target_kind == kind and g.target == target
            if g.grantable and same and not (g.columns or g.exclude_columns or g.row_filter or g.masks):
                return
        raise AccessDenied(
            f"{by.name} may not grant {privilege} on {kind.lower()} {target}",
            hint="an admin, the owner or a holder WITH GRANT OPTION can",
        )

    def revoke(self, by: Principal, grant_id: int) -> None:
        g = self.get(grant_id)
        self._require_grant_authority(by, g.privilege, g.target_kind, g.target)
        with self.engine.begin() as conn:
            conn.execute(delete(grants).where(grants.c.id == grant_id))

    def get(self, grant_id: int) -> Grant:
        with self.engine.connect() as conn:
            row = conn.execute(select(grants).where(grants.c.id == grant_id)).first()
        if row is None:
            raise GovernanceError(f"no grant {grant_id}")
        return _grant(row)

    def list(self, grantee: str | None = None) -> list[Grant]:
        q = select(grants).order_by(grants.c.id)
        if grantee:
            q = q.where(grants.c.grantee == grantee)
        with self.engine.connect() as conn:
            return [_grant(r) for r in conn.execute(q)]

    def grants_for(self, principal: Principal) -> builtins.list[Grant]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(grants).where(grants.c.grantee.in_(sorted(principal.identities)))).all()
        return [_grant(r) for r in rows]

    # ---- tags -----------------------------------------------------------------------------------
    def create_tag(self, key: str, values: builtins.list[str]) -> None:
        key = key.lower()
        if not IDENTIFIER.match(key) or not values:
            raise GovernanceError("a tag needs a key (letters, digits, _) and at least one allowed value")
        with self.engine.begin() as conn:
            database.upsert(conn, tag_keys, {"key": key}, {"allowed_values": json.dumps(sorted(set(values)))})

    def tags(self) -> dict[str, builtins.list[str]]:
        with self.engine.connect() as conn:
            return {
                r.key: json.loads(r.allowed_values) for r in conn.execute(select(tag_keys).order_by(tag_keys.c.key))
            }

    def _check_tag_values(self, expression: dict[str, builtins.list[str]]) -> None:
        known = self.tags()
        for key, values in expression.items():
            if key not in known:
                raise GovernanceError(f"no tag key {key!r}", hint=f"create it: shoal tag create {key} --values ...")
            bad = [v for v in values if v not in known[key]]
            if bad:
                raise GovernanceError(f"tag {key} does not allow {', '.join(bad)} (allowed: {', '.join(known[key])})")

    def assign_tag(
        self,
        key: str,
        value: str,
        *,
        database_name: str | None = None,
        table: str | None = None,
        column: str | None = None,
    ) -> None:
        self._check_tag_values({key.lower(): [value]})
        if table:
            db, tbl = table_key(table)
        elif database_name:
            db, tbl = database_name.lower(), ""
        else:
            raise GovernanceError("assign a tag to --database DB or --table DB.TABLE (with --column C for a column)")
        col = (column or "").lower()
        if col and not tbl:
            raise GovernanceError("--column needs --table")
        with self.engine.begin() as conn:
            target = {"key": key.lower(), "database": db, "table_name": tbl, "column_name": col}
            database.upsert(conn, tag_assignments, target, {"value": value})

    def unassign_tag(
        self, key: str, *, database_name: str | None = None, table: str | None = None, column: str | None = None
    ) -> None:
        """Take a tag off a database, table or column; an assignment that does not exist is an error
        (a typo must not look like a removal)."""
        if not table and not database_name:
            raise GovernanceError("unassign a tag from --database DB or --table DB.TABLE (with --column C)")
        if column and not table:
            raise GovernanceError("--column needs --table")
        db, tbl = table_key(table) if table else ((database_name or "").lower(), "")
        with self.engine.begin() as conn:
            gone = conn.execute(
                delete(tag_assignments).where(
                    (tag_assignments.c.key == key.lower())
                    & (tag_assignments.c.database == db)
                    & (tag_assignments.c.table_name == tbl)
                    & (tag_assignments.c.column_name == (column or "").lower())
                )
            ).rowcount
        if not gone:
            where = f"{db}.{tbl}" if tbl else db
            raise GovernanceError(
                f"{where}{'.' + column.lower() if column else ''} has no tag {key.lower()!r}",
                hint="see its tags: shoal catalog describe TABLE",
            )

    def delete_tag(self, key: str) -> int:
        """Delete a tag key and its assignments; returns how many assignments went. Refused while
        a grant ON TAGS names the key: those grants would stop matching silently."""
        key = key.lower()
        if key not in self.tags():
            raise GovernanceError(f"no tag key {key!r}", hint="see the keys: shoal tag list")
        # A tag grant's target is stored canonical: JSON {key: [values]}.
        using = [g.id for g in self.list() if g.target_kind == "TAGS" and key in json.loads(g.target)]
        if using:
            raise GovernanceError(
                f"grant(s) {', '.join(map(str, using))} are on tag {key!r}",
                hint="revoke them first: shoal revoke GRANT_ID",
            )
        with self.engine.begin() as conn:
            gone = conn.execute(delete(tag_assignments).where(tag_assignments.c.key == key)).rowcount
            conn.execute(delete(tag_keys).where(tag_keys.c.key == key))
        return int(gone or 0)

    def tags_of(self, table: str, columns: builtins.list[str]) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
        """Effective tags of a table (inheriting its database's) and of each column (inheriting the table's)."""
        db, tbl = table_key(table)
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(tag_assignments).where(
                    tag_assignments.c.database == db, tag_assignments.c.table_name.in_(["", tbl])
                )
            ).all()
        table_tags = {r.key: r.value for r in rows if r.table_name == ""}
        table_tags.update({r.key: r.value for r in rows if r.table_name == tbl and r.column_name == ""})
        column_tags = {c: dict(table_tags) for c in columns}
        for r in rows:
            if r.table_name == tbl and r.column_name and r.column_name in column_tags:
                column_tags[r.column_name][r.key] = r.value
        return table_tags, column_tags

    def _column_tagged(self, table: str) -> bool:
        db, tbl = table_key(table)
        with self.engine.connect() as conn:
            return (
                conn.execute(
                    select(tag_assignments.c.key).where(
                        tag_assignments.c.database == db,
                        tag_assignments.c.table_name == tbl,
                        tag_assignments.c.column_name != "",
                    )
                ).first()
                is not None
            )

    # ---- ownership ----------------------------------------------------------------------------
    def set_owner(self, table: str, owner: str | None = None, description: str | None = None) -> None:
        self._set_info(".".join(table_key(table)), owner, description)

    def set_object_owner(self, object_id: str, owner: str | None = None, description: str | None = None) -> None:
        """Raw objects have owners and descriptions too (kept beside the tables', keyed object:ID)."""
        if not re.fullmatch(r"[0-9a-f]{32}", object_id):
            raise GovernanceError(f"invalid object id {object_id!r} (32 hex characters)")
        self._set_info(f"object:{object_id}", owner, description)

    def object_info(self, object_id: str) -> dict[str, Any]:
        return self.info(f"object:{object_id}")

    def _set_info(self, name: str, owner: str | None, description: str | None) -> None:
        if owner:
            self.principals.get_row(owner)
        with self.engine.begin() as conn:
            row = conn.execute(select(table_info).where(table_info.c.name == name)).first()
            values = {k: v for k, v in {"owner": owner, "description": description}.items() if v is not None}
            if row is None:
                conn.execute(insert(table_info).values(name=name, **values))
            elif values:
                conn.execute(update(table_info).where(table_info.c.name == name).values(**values))

    def owner(self, table: str) -> str | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(table_info.c.owner).where(table_info.c.name == table)).first()
        return row.owner if row else None

    def info(self, table: str) -> dict[str, Any]:
        with self.engine.connect() as conn:
            row = conn.execute(select(table_info).where(table_info.c.name == table)).first()
        return {"owner": row.owner, "description": row.description} if row else {"owner": None, "description": None}

    # ---- evaluation ---------------------------------------------------------------------------
    def privileges(self, principal: Principal, table: str) -> set[str]:
        """Table-level privileges. SELECT may still be narrowed (columns, rows, masks: see access());
        a tag grant counts here when the table's own tags satisfy it."""
        if principal.is_admin or self.owner(table) == principal.name:
            return set(PRIVILEGES) - {"ALL"}
        db, _ = table_key(table)
        out: set[str] = set()
        table_tags: dict[str, str] | None = None
        for g in self.grants_for(principal):
            if g.target_kind == "WORKFLOW":
                continue
            if g.target_kind == "TABLE" and g.target != table or g.target_kind == "DATABASE" and g.target != db:
                continue
            if g.target_kind == "TAGS":
                if table_tags is None:
                    table_tags = self.tags_of(table, [])[0]
                if not _satisfies(table_tags, json.loads(g.target)):
                    continue
            out |= set(PRIVILEGES) - {"ALL"} if g.privilege == "ALL" else {g.privilege}
        return out

    def access(self, principal: Principal, table: str, columns: builtins.list[str]) -> TableAccess:
        cols = [c.lower() for c in columns]
        if principal.is_admin or self.owner(table) == principal.name:
            return TableAccess(table, cols, [CellRule(set(cols), None, {}, whole=True)])
        db, _ = table_key(table)
        rules: list[CellRule] = []
        column_tags: dict[str, dict[str, str]] | None = None
        for g in self.grants_for(principal):
            if g.privilege not in ("SELECT", "ALL"):
                continue
            if g.target_kind == "DATABASE" and g.target == db:
                rules.append(CellRule(set(cols), None, {}, whole=True))
            elif g.target_kind == "TABLE" and g.target == table:
                visible = set(g.columns) if g.columns else set(cols) - set(g.exclude_columns or [])
                whole = not (g.columns or g.exclude_columns or g.row_filter or g.masks)
                rules.append(
                    CellRule(
                        visible & set(cols), g.row_filter, {c: m for c, m in g.masks.items() if c in cols}, whole=whole
                    )
                )
            elif g.target_kind == "TAGS":
                if column_tags is None:
                    column_tags = self.tags_of(table, cols)[1]
                expression = json.loads(g.target)
                visible = {c for c in cols if _satisfies(column_tags[c], expression)}
                if visible:
                    # Whole only when the table's own tags satisfy it and no column is tagged
                    # apart (a column tagged otherwise, even one dropped since, stays out).
                    whole = _satisfies(self.tags_of(table, [])[0], expression) and not self._column_tagged(table)
                    rules.append(CellRule(visible, None, {}, whole=whole))
        return TableAccess(table, cols, [r for r in rules if r.columns])

    def workflow_privileges(self, principal: Principal, workflow: str) -> set[str]:
        """What a principal may do with a workflow: {"SELECT"} to see it (definition, executions,
        step results), plus "EXECUTE" to start and resume it. Admins and the operators group may
        do both on every workflow; others need a grant ON WORKFLOW (EXECUTE implies SELECT)."""
        if principal.is_admin or OPERATORS in principal.groups:
            return {"SELECT", "EXECUTE"}
        out: set[str] = set()
        for g in self.grants_for(principal):
            if g.target_kind == "WORKFLOW" and g.target == workflow:
                out |= {"SELECT"} if g.privilege == "SELECT" else {"SELECT", "EXECUTE"}
        return out

    def workflows_visible(self, principal: Principal) -> set[str] | None:
        """The workflows a principal may see: None for all (admins, operators), else the granted names."""
        if principal.is_admin or OPERATORS in principal.groups:
            return None
        return {g.target for g in self.grants_for(principal) if g.target_kind == "WORKFLOW"}

    def discoverable(self, principal: Principal, table: str) -> bool:
        """Whether a table's metadata (its name in a listing, schema, owner) shows to `principal`:
        the one rule of every face (governed SHOW/DESCRIBE, the Python API and `shoal table`, the
        console and HTTP API catalog, the PostgreSQL endpoint, the REST catalog). Only tables it
        holds a privilege on, unless [governance] tables_visible_to_all opens them to everyone."""
        if self.settings.governance.tables_visible_to_all:
            return True
        return bool(self.privileges(principal, table))

    def visible_tables(self, spark: SparkSession, principal: Principal) -> builtins.list[dict[str, Any]]:
        """Every table in the catalog this principal may discover, with its owner/description and
        the principal's privileges: what the API's table list and the console's catalog page show."""
        out = []
        for (db,) in spark.sql("SHOW NAMESPACES").collect():
            for row in spark.sql(f"SHOW TABLES IN `{db}`").collect():
                name = f"{db}.{row['tableName']}"
                if self.discoverable(principal, name):
                    out.append(
                        {
                            "database": db,
                            "table": row["tableName"],
                            "name": name,
                            **self.info(name),
                            "privileges": sorted(self.privileges(principal, name)),
                        }
                    )
        return out


def _satisfies(tags: dict[str, str], expression: dict[str, list[str]]) -> bool:
    return all(tags.get(key) in values for key, values in expression.items())


def _grant(row: Any) -> Grant:
    return Grant(
        id=row.id,
        grantee=row.grantee,
        privilege=row.privilege,
        target_kind=row.target_kind,
        target=row.target,
        columns=json.loads(row.columns) if row.columns else None,
        exclude_columns=json.loads(row.exclude_columns) if row.exclude_columns else None,
        row_filter=row.row_filter,
        masks=json.loads(row.masks) if row.masks else {},
        grantable=row.grantable,
        granted_by=row.granted_by,
    )


__all__ = ["EVERYONE", "OPERATORS", "Governance", "Grant", "TableAccess"]
