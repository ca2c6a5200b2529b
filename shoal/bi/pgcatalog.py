"""PostgreSQL's system catalogs (pg_catalog, information_schema) for BI tools, governed.

Tools list schemas, tables and columns by sending real PostgreSQL catalog queries (joins,
`::regclass` casts, `OPERATOR(pg_catalog.~)`, `= ANY(array)`, CASE, subqueries). Rather than
recognise each tool's queries, each connection holds an in-memory DuckDB database whose
pg_catalog and information_schema relations are filled with the rows of *this principal's*
governed catalog: the Shoal databases (as schemas), tables and columns it may read, nothing
else. A catalog query is parsed as PostgreSQL (sqlglot), its PostgreSQL-only constructs are
rewritten into DuckDB's (casts to regclass, OPERATOR(...), COLLATE, qualified functions), and
it runs there; DuckDB has arrays, regular expressions and window functions, which psql's,
SQLAlchemy's and pgjdbc's queries use. DuckDB's own pg_catalog views are not used: they
describe DuckDB (wrong type OIDs, no regclass), so every relation and function here is ours.

What a principal sees: tables it may SELECT (Governance.privileges and access), with only
the columns its grants show (a masked column is reported as text, the type it is read as).
Databases appear when they hold such a table; Shoal's `default` database is PostgreSQL's
`public` schema. The internal `shoal` database is hidden unless a grant names it. Rows go into
DuckDB as parameters, never as SQL text; the DuckDB database has no file access.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
import weakref
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

log = logging.getLogger("shoal.pgcatalog")

# How long one connection reuses the governed catalog it built (a psql `\d` sends about ten
# queries; listing the lake for each would be slow). A grant change shows after this delay.
CATALOG_TTL_S = 5.0
# A catalog query runs in the server process: past this it is interrupted (57014).
CATALOG_QUERY_TIMEOUT_S = 10.0
DATABASE = "lake"
PUBLIC = "public"  # PostgreSQL's default schema is Shoal's `default` database
INTERNAL_DB = "shoal"  # Shoal's own tables: hidden unless granted by name

PG_CATALOG_NS, PUBLIC_NS, INFO_SCHEMA_NS = 11, 2200, 13_000
OWNER_OID = 10  # the lake's tables are owned by the `shoal` role (PostgreSQL's bootstrap superuser OID)
PG_CLASS_OID, PG_NAMESPACE_OID, PG_PROC_OID, PG_TYPE_OID = 1259, 2615, 1255, 1247
_OID_BASE = 16_384  # the first OID PostgreSQL gives to user objects

_PGC, _ISC = "shoal_pg_catalog", "shoal_information_schema"

# Type OIDs (and how PostgreSQL's format_type writes them).
INT2, INT4, INT8, TEXT, BOOL, FLOAT4, FLOAT8, NUMERIC = 21, 23, 20, 25, 16, 700, 701, 1700
VARCHAR, NAME, OID, DATE, TIMESTAMP, TIMESTAMPTZ, BYTEA, CHAR = 1043, 19, 26, 1082, 1114, 1184, 17, 18


@dataclass(frozen=True)
class PgType:
    oid: int
    name: str
    display: str  # format_type's text
    length: int
    category: str
    array: int = 0  # the array type's OID
    element: int = 0  # for arrays: the element's OID
    input: str = ""


def _types() -> list[PgType]:
    base = [
        (BOOL, "bool", "boolean", 1, "B", 1000),
        (BYTEA, "bytea", "bytea", -1, "U", 1001),
        (CHAR, "char", '"char"', 1, "Z", 1002),
        (NAME, "name", "name", 64, "S", 1003),
        (INT8, "int8", "bigint", 8, "N", 1016),
        (INT2, "int2", "smallint", 2, "N", 1005),
        (22, "int2vector", "int2vector", -1, "A", 1006),
        (INT4, "int4", "integer", 4, "N", 1007),
        (24, "regproc", "regproc", 4, "N", 1008),
        (TEXT, "text", "text", -1, "S", 1009),
        (OID, "oid", "oid", 4, "N", 1028),
        (30, "oidvector", "oidvector", -1, "A", 1013),
        (114, "json", "json", -1, "U", 199),
        (194, "pg_node_tree", "pg_node_tree", -1, "Z", 0),
        (FLOAT4, "float4", "real", 4, "N", 1021),
        (FLOAT8, "float8", "double precision", 8, "N", 1022),
        (705, "unknown", "unknown", -2, "X", 0),
        (1042, "bpchar", "character", -1, "S", 1014),
        (VARCHAR, "varchar", "character varying", -1, "S", 1015),
        (DATE, "date", "date", 4, "D", 1182),
        (1083, "time", "time without time zone", 8, "D", 1183),
        (TIMESTAMP, "timestamp", "timestamp without time zone", 8, "D", 1115),
        (TIMESTAMPTZ, "timestamptz", "timestamp with time zone", 8, "D", 1185),
        (1186, "interval", "interval", 16, "T", 1187),
        (NUMERIC, "numeric", "numeric", -1, "N", 1231),
        (2205, "regclass", "regclass", 4, "N", 2210),
        (2206, "regtype", "regtype", 4, "N", 2211),
        (2950, "uuid", "uuid", 16, "U", 2951),
        (3802, "jsonb", "jsonb", -1, "U", 3807),
        (2249, "record", "record", -1, "P", 2287),
        (2276, "any", '"any"', 4, "P", 0),
        (2277, "anyarray", "anyarray", -1, "P", 0),
        (2278, "void", "void", 4, "P", 0),
    ]
    out = [PgType(o, n, d, ln, c, a, 0, _io_prefix(n) + "in") for o, n, d, ln, c, a in base]
    out += [PgType(a, f"_{n}", f"{d}[]", -1, "A", 0, o, "array_in") for o, n, d, _, _, a in base if a]
    return out


# PostgreSQL spells these types' I/O functions with an underscore (date_recv, numeric_in,
# timestamptz_send); the older ones without (int4recv, textin). Drivers such as ADBC pick their
# binary decoder by the typreceive name.
_UNDERSCORE_IO = {"json", "pg_node_tree", "date", "time", "timestamp", "timestamptz", "interval", "numeric",
                  "uuid", "jsonb", "record", "any", "anyarray", "void"}  # fmt: skip


def _io_prefix(name: str) -> str:
    return f"{name}_" if name in _UNDERSCORE_IO else name


TYPES = _types()
TYPES_BY_OID = {t.oid: t for t in TYPES}
TYPES_BY_NAME = {t.name: t for t in TYPES} | {t.display: t for t in TYPES}


def format_type(oid: int | None, typmod: int | None) -> str | None:
    """PostgreSQL's format_type(): a type's SQL name with its modifier (numeric(10,2), varchar(20))."""
    if oid is None:
        return None
    t = TYPES_BY_OID.get(int(oid))
    if t is None:
        return "???"
    mod = -1 if typmod is None else int(typmod)
    if t.oid == NUMERIC and mod >= 4:
        return f"numeric({(mod - 4) >> 16},{(mod - 4) & 0xFFFF})"
    if t.oid in (VARCHAR, 1042) and mod >= 4:
        return f"{t.display}({mod - 4})"
    return t.display


# ---- the governed catalog ---------------------------------------------------------------------------
@dataclass
class CatalogColumn:
    name: str
    type_oid: int
    typmod: int = -1
    nullable: bool = True


@dataclass
class CatalogTable:
    schema: str  # the PostgreSQL schema (Shoal database; `default` is `public`)
    name: str
    columns: list[CatalogColumn]
    comment: str | None = None
    kind: str = "r"  # pg_class.relkind: r table, v view
    # What the grants allow on it, in PostgreSQL's words (has_table_privilege): SELECT, INSERT.
    privileges: frozenset[str] = frozenset({"SELECT"})


@dataclass
class Snapshot:
    """What one principal may see of the lake's catalog."""

    tables: list[CatalogTable]
    schemas: list[str] = field(default_factory=list)


def schema_name(database: str) -> str:
    return PUBLIC if database == "default" else database


def database_name(schema: str) -> str:
    return "default" if schema.lower() == PUBLIC else schema


def _column_type(spark_type: str) -> tuple[int, int]:
    """The (type OID, typmod) a Spark column is reported as: the OID the wire protocol sends it with."""
    from shoal.bi.pg.codec import pg_type, pg_typmod

    return pg_type(spark_type), pg_typmod(spark_type)


def governed_snapshot(spark: Any, settings: Any, principal: Any) -> Snapshot:
    """The tables and columns `principal` may read, from Spark's catalog and Shoal's grants."""
    from shoal.governance import Governance
    from shoal.governance.grants import table_key

    gov = Governance(settings)
    # The internal database shows only when a grant names it: an admin's implicit access to
    # everything is not a reason to put Shoal's bookkeeping in front of every BI user.
    internal_granted = any(
        (g.target_kind == "DATABASE" and g.target == INTERNAL_DB)
        or (g.target_kind == "TABLE" and g.target.startswith(INTERNAL_DB + "."))
        for g in gov.grants_for(principal)
    )
    tables: list[CatalogTable] = []
    for (db,) in spark.sql("SHOW NAMESPACES").collect():
        if db == INTERNAL_DB and not internal_granted:
            continue
        # `db` comes from Spark's own namespace list (not from the client); quoted as Spark needs.
        for row in spark.sql(f"SHOW TABLES IN `{db.replace('`', '``')}`").collect():
            if row["isTemporary"]:
                continue
            name = f"{db}.{row['tableName']}"
            if not gov.discoverable(principal, name):  # the rule every face lists tables by
                continue
            privileges = gov.privileges(principal, name)
            try:
                fields = spark.table(name).schema.fields
            except Exception:  # a table that cannot be loaded is left out, not fatal
                log.warning("PostgreSQL catalog: cannot read the schema of %s", name, exc_info=True)
                continue
            access = gov.access(principal, name, [f.name for f in fields])
            visible = set(access.visible_columns)
            masked = {c for r in access.rules for c in r.masks}
            columns = []
            for f in fields:
                col = f.name.lower()
                if col not in visible:
                    continue
                oid, typmod = (TEXT, -1) if col in masked else _column_type(f.dataType.simpleString())
                columns.append(CatalogColumn(col, oid, typmod, bool(f.nullable)))
            if not columns:  # a PostgreSQL table has columns: none readable, no table
                continue
            db_key, table = table_key(name)
            description = gov.info(name).get("description")
            allowed = frozenset(privileges & _PG_TABLE_PRIVILEGES)
            tables.append(CatalogTable(schema_name(db_key), table, columns, description, privileges=allowed))
    schemas = sorted({t.schema for t in tables} | {PUBLIC})
    return Snapshot(tables, schemas)


class SnapshotCache:
    """Governed snapshots shared by one principal's connections for CATALOG_TTL_S.

    BI tools open a connection per request (Superset's SQL Lab lists schemas, then tables, then
    a table's columns, each on a new connection), and each connection listed the whole lake
    again: one table's columns took Superset ~8 listings. A snapshot is built for exactly one
    principal (name, admin flag, groups), so sharing it between that principal's connections
    shows nothing the principal's own connection would not; a change still shows within
    CATALOG_TTL_S, as before.
    """

    def __init__(self, build: Callable[[Any], Snapshot], ttl_s: float | None = None) -> None:
        self._build = build
        self._ttl_s = ttl_s
        self._lock = threading.Lock()
        self._entries: dict[Any, tuple[float, Snapshot]] = {}
        self._building: dict[Any, threading.Lock] = {}

    def get(self, principal: Any) -> Snapshot:
        ttl = CATALOG_TTL_S if self._ttl_s is None else self._ttl_s
        with self._lock:
            now = time.monotonic()
            for key in [k for k, (at, _) in self._entries.items() if now - at > ttl]:
                del self._entries[key]
            hit = self._entries.get(principal)
            if hit is not None:
                return hit[1]
            building = self._building.setdefault(principal, threading.Lock())
        with building:  # two connections of one principal at once build it once
            with self._lock:
                hit = self._entries.get(principal)
                if hit is not None and time.monotonic() - hit[0] <= ttl:
                    return hit[1]
            snap = self._build(principal)
            with self._lock:
                self._entries[principal] = (time.monotonic(), snap)
                self._building.pop(principal, None)
            return snap


# ---- the DuckDB side ----------------------------------------------------------------------------------
# Relation -> columns (name, DuckDB type). Columns follow PostgreSQL 15; the ones no client reads
# are left out. Integer OIDs are BIGINT so that comparisons with literals never overflow.
_I, _B, _T, _S, _F = "BIGINT", "BOOLEAN", "VARCHAR", "SMALLINT", "DOUBLE"
# fmt: off
PG_RELATIONS: dict[str, list[tuple[str, str]]] = {
    "pg_namespace": [("oid", _I), ("nspname", _T), ("nspowner", _I), ("nspacl", "VARCHAR[]")],
    "pg_class": [
        ("oid", _I), ("relname", _T), ("relnamespace", _I), ("reltype", _I), ("reloftype", _I),
        ("relowner", _I), ("relam", _I), ("relfilenode", _I), ("reltablespace", _I), ("relpages", _I),
        ("reltuples", _F), ("relallvisible", _I), ("reltoastrelid", _I), ("relhasindex", _B),
        ("relisshared", _B), ("relpersistence", _T), ("relkind", _T), ("relnatts", _S), ("relchecks", _S),
        ("relhasrules", _B), ("relhastriggers", _B), ("relhassubclass", _B), ("relrowsecurity", _B),
        ("relforcerowsecurity", _B), ("relispopulated", _B), ("relreplident", _T), ("relispartition", _B),
        ("relrewrite", _I), ("relfrozenxid", _I), ("relminmxid", _I), ("relacl", "VARCHAR[]"),
        ("reloptions", "VARCHAR[]"), ("relpartbound", _T),
    ],
    "pg_attribute": [
        ("attrelid", _I), ("attname", _T), ("atttypid", _I), ("attstattarget", _I), ("attlen", _S),
        ("attnum", _S), ("attndims", _I), ("attcacheoff", _I), ("atttypmod", _I), ("attbyval", _B),
        ("attalign", _T), ("attstorage", _T), ("attcompression", _T), ("attnotnull", _B), ("atthasdef", _B),
        ("atthasmissing", _B), ("attidentity", _T), ("attgenerated", _T), ("attisdropped", _B),
        ("attislocal", _B), ("attinhcount", _I), ("attcollation", _I), ("attacl", "VARCHAR[]"),
        ("attoptions", "VARCHAR[]"), ("attfdwoptions", "VARCHAR[]"),
    ],
    "pg_type": [
        ("oid", _I), ("typname", _T), ("typnamespace", _I), ("typowner", _I), ("typlen", _S), ("typbyval", _B),
        ("typtype", _T), ("typcategory", _T), ("typispreferred", _B), ("typisdefined", _B), ("typdelim", _T),
        ("typrelid", _I), ("typsubscript", _T), ("typelem", _I), ("typarray", _I), ("typinput", _T),
        ("typoutput", _T), ("typreceive", _T), ("typsend", _T), ("typmodin", _T), ("typmodout", _T),
        ("typanalyze", _T), ("typalign", _T), ("typstorage", _T), ("typnotnull", _B), ("typbasetype", _I),
        ("typtypmod", _I), ("typndims", _I), ("typcollation", _I), ("typdefaultbin", _T), ("typdefault", _T),
        ("typacl", "VARCHAR[]"),
    ],
    "pg_index": [
        ("indexrelid", _I), ("indrelid", _I), ("indnatts", _S), ("indnkeyatts", _S), ("indisunique", _B),
        ("indnullsnotdistinct", _B), ("indisprimary", _B), ("indisexclusion", _B), ("indimmediate", _B),
        ("indisclustered", _B), ("indisvalid", _B), ("indcheckxmin", _B), ("indisready", _B), ("indislive", _B),
        ("indisreplident", _B), ("indkey", "BIGINT[]"), ("indcollation", "BIGINT[]"), ("indclass", "BIGINT[]"),
        ("indoption", "BIGINT[]"), ("indexprs", _T), ("indpred", _T),
    ],
    "pg_description": [("objoid", _I), ("classoid", _I), ("objsubid", _I), ("description", _T)],
    "pg_shdescription": [("objoid", _I), ("classoid", _I), ("description", _T)],
    "pg_settings": [
        ("name", _T), ("setting", _T), ("unit", _T), ("category", _T), ("short_desc", _T), ("extra_desc", _T),
        ("context", _T), ("vartype", _T), ("source", _T), ("min_val", _T), ("max_val", _T),
        ("enumvals", "VARCHAR[]"), ("boot_val", _T), ("reset_val", _T), ("sourcefile", _T), ("sourceline", _I),
        ("pending_restart", _B),
    ],
    "pg_database": [
        ("oid", _I), ("datname", _T), ("datdba", _I), ("encoding", _I), ("datlocprovider", _T),
        ("datistemplate", _B), ("datallowconn", _B), ("datconnlimit", _I), ("datfrozenxid", _I),
        ("datminmxid", _I), ("dattablespace", _I), ("datcollate", _T), ("datctype", _T), ("daticulocale", _T),
        ("datcollversion", _T), ("datacl", "VARCHAR[]"),
    ],
    "pg_roles": [
        ("rolname", _T), ("rolsuper", _B), ("rolinherit", _B), ("rolcreaterole", _B), ("rolcreatedb", _B),
        ("rolcanlogin", _B), ("rolreplication", _B), ("rolconnlimit", _I), ("rolpassword", _T),
        ("rolvaliduntil", _T), ("rolbypassrls", _B), ("rolconfig", "VARCHAR[]"), ("oid", _I),
    ],
    "pg_user": [
        ("usename", _T), ("usesysid", _I), ("usecreatedb", _B), ("usesuper", _B), ("userepl", _B),
        ("usebypassrls", _B), ("passwd", _T), ("valuntil", _T), ("useconfig", "VARCHAR[]"),
    ],
    "pg_auth_members": [("oid", _I), ("roleid", _I), ("member", _I), ("grantor", _I), ("admin_option", _B)],
    "pg_constraint": [
        ("oid", _I), ("conname", _T), ("connamespace", _I), ("contype", _T), ("condeferrable", _B),
        ("condeferred", _B), ("convalidated", _B), ("conrelid", _I), ("contypid", _I), ("conindid", _I),
        ("conparentid", _I), ("confrelid", _I), ("confupdtype", _T), ("confdeltype", _T), ("confmatchtype", _T),
        ("conislocal", _B), ("coninhcount", _I), ("connoinherit", _B), ("conkey", "BIGINT[]"),
        ("confkey", "BIGINT[]"), ("conpfeqop", "BIGINT[]"), ("conppeqop", "BIGINT[]"),
        ("conffeqop", "BIGINT[]"), ("confdelsetcols", "BIGINT[]"), ("conexclop", "BIGINT[]"), ("conbin", _T),
    ],
    "pg_attrdef": [("oid", _I), ("adrelid", _I), ("adnum", _S), ("adbin", _T)],
    "pg_am": [("oid", _I), ("amname", _T), ("amhandler", _T), ("amtype", _T)],
    "pg_inherits": [("inhrelid", _I), ("inhparent", _I), ("inhseqno", _I), ("inhdetachpending", _B)],
    "pg_proc": [
        ("oid", _I), ("proname", _T), ("pronamespace", _I), ("proowner", _I), ("prolang", _I), ("procost", _F),
        ("prorows", _F), ("provariadic", _I), ("prosupport", _T), ("prokind", _T), ("prosecdef", _B),
        ("proleakproof", _B), ("proisstrict", _B), ("proretset", _B), ("provolatile", _T), ("proparallel", _T),
        ("pronargs", _S), ("pronargdefaults", _S), ("prorettype", _I), ("proargtypes", "BIGINT[]"),
        ("proallargtypes", "BIGINT[]"), ("proargmodes", "VARCHAR[]"), ("proargnames", "VARCHAR[]"),
        ("proargdefaults", _T), ("prosrc", _T), ("probin", _T), ("proconfig", "VARCHAR[]"),
        ("proacl", "VARCHAR[]"),
    ],
    "pg_collation": [
        ("oid", _I), ("collname", _T), ("collnamespace", _I), ("collowner", _I), ("collprovider", _T),
        ("collisdeterministic", _B), ("collencoding", _I), ("collcollate", _T), ("collctype", _T),
    ],
    "pg_tables": [
        ("schemaname", _T), ("tablename", _T), ("tableowner", _T), ("tablespace", _T), ("hasindexes", _B),
        ("hasrules", _B), ("hastriggers", _B), ("rowsecurity", _B),
    ],
    "pg_views": [("schemaname", _T), ("viewname", _T), ("viewowner", _T), ("definition", _T)],
    "pg_matviews": [
        ("schemaname", _T), ("matviewname", _T), ("matviewowner", _T), ("tablespace", _T), ("hasindexes", _B),
        ("ispopulated", _B), ("definition", _T),
    ],
    "pg_indexes": [("schemaname", _T), ("tablename", _T), ("indexname", _T), ("tablespace", _T), ("indexdef", _T)],
    "pg_sequence": [
        ("seqrelid", _I), ("seqtypid", _I), ("seqstart", _I), ("seqincrement", _I), ("seqmax", _I),
        ("seqmin", _I), ("seqcache", _I), ("seqcycle", _B),
    ],
    "pg_trigger": [("oid", _I), ("tgrelid", _I), ("tgname", _T), ("tgisinternal", _B), ("tgenabled", _T)],
    "pg_rewrite": [("oid", _I), ("rulename", _T), ("ev_class", _I), ("ev_type", _T), ("is_instead", _B)],
    "pg_policy": [
        ("oid", _I), ("polname", _T), ("polrelid", _I), ("polcmd", _T), ("polpermissive", _B),
        ("polroles", "BIGINT[]"), ("polqual", _T), ("polwithcheck", _T),
    ],
    "pg_statistic_ext": [
        ("oid", _I), ("stxrelid", _I), ("stxname", _T), ("stxnamespace", _I), ("stxowner", _I),
        ("stxstattarget", _I), ("stxkeys", "BIGINT[]"), ("stxkind", "VARCHAR[]"),
    ],
    "pg_publication": [
        ("oid", _I), ("pubname", _T), ("pubowner", _I), ("puballtables", _B), ("pubinsert", _B),
        ("pubupdate", _B), ("pubdelete", _B), ("pubtruncate", _B), ("pubviaroot", _B),
    ],
    "pg_publication_rel": [("oid", _I), ("prpubid", _I), ("prrelid", _I), ("prqual", _T), ("prattrs", "BIGINT[]")],
    "pg_publication_namespace": [("oid", _I), ("pnpubid", _I), ("pnnspid", _I)],
    "pg_partitioned_table": [("partrelid", _I), ("partstrat", _T), ("partnatts", _S)],
    "pg_foreign_table": [("ftrelid", _I), ("ftserver", _I), ("ftoptions", "VARCHAR[]")],
    "pg_tablespace": [("oid", _I), ("spcname", _T), ("spcowner", _I)],
    "pg_extension": [("oid", _I), ("extname", _T), ("extowner", _I), ("extnamespace", _I), ("extversion", _T)],
    "pg_enum": [("oid", _I), ("enumtypid", _I), ("enumsortorder", _F), ("enumlabel", _T)],
    "pg_depend": [
        ("classid", _I), ("objid", _I), ("objsubid", _I), ("refclassid", _I), ("refobjid", _I),
        ("refobjsubid", _I), ("deptype", _T),
    ],
    "pg_range": [("rngtypid", _I), ("rngsubtype", _I)],
    "pg_opclass": [("oid", _I), ("opcmethod", _I), ("opcname", _T), ("opcnamespace", _I), ("opcdefault", _B)],
    "pg_language": [("oid", _I), ("lanname", _T)],
    "pg_event_trigger": [("oid", _I), ("evtname", _T)],
    "pg_stat_activity": [
        ("datid", _I), ("datname", _T), ("pid", _I), ("usename", _T), ("state", _T), ("query", _T),
    ],
    "pg_timezone_names": [("name", _T), ("abbrev", _T), ("utc_offset", _T), ("is_dst", _B)],
}
INFO_RELATIONS: dict[str, list[tuple[str, str]]] = {
    "schemata": [
        ("catalog_name", _T), ("schema_name", _T), ("schema_owner", _T), ("default_character_set_catalog", _T),
        ("default_character_set_schema", _T), ("default_character_set_name", _T), ("sql_path", _T),
    ],
    "tables": [
        ("table_catalog", _T), ("table_schema", _T), ("table_name", _T), ("table_type", _T),
        ("self_referencing_column_name", _T), ("reference_generation", _T), ("user_defined_type_catalog", _T),
        ("user_defined_type_schema", _T), ("user_defined_type_name", _T), ("is_insertable_into", _T),
        ("is_typed", _T), ("commit_action", _T),
    ],
    "columns": [
        ("table_catalog", _T), ("table_schema", _T), ("table_name", _T), ("column_name", _T),
        ("ordinal_position", _I), ("column_default", _T), ("is_nullable", _T), ("data_type", _T),
        ("character_maximum_length", _I), ("character_octet_length", _I), ("numeric_precision", _I),
        ("numeric_precision_radix", _I), ("numeric_scale", _I), ("datetime_precision", _I),
        ("interval_type", _T), ("interval_precision", _I), ("character_set_catalog", _T),
        ("character_set_schema", _T), ("character_set_name", _T), ("collation_catalog", _T),
        ("collation_schema", _T), ("collation_name", _T), ("domain_catalog", _T), ("domain_schema", _T),
        ("domain_name", _T), ("udt_catalog", _T), ("udt_schema", _T), ("udt_name", _T), ("scope_catalog", _T),
        ("scope_schema", _T), ("scope_name", _T), ("maximum_cardinality", _I), ("dtd_identifier", _T),
        ("is_self_referencing", _T), ("is_identity", _T), ("identity_generation", _T), ("identity_start", _T),
        ("identity_increment", _T), ("identity_maximum", _T), ("identity_minimum", _T), ("identity_cycle", _T),
        ("is_generated", _T), ("generation_expression", _T), ("is_updatable", _T),
    ],
    "views": [
        ("table_catalog", _T), ("table_schema", _T), ("table_name", _T), ("view_definition", _T),
        ("check_option", _T), ("is_updatable", _T), ("is_insertable_into", _T), ("is_trigger_updatable", _T),
        ("is_trigger_deletable", _T), ("is_trigger_insertable_into", _T),
    ],
    "table_constraints": [
        ("constraint_catalog", _T), ("constraint_schema", _T), ("constraint_name", _T), ("table_catalog", _T),
        ("table_schema", _T), ("table_name", _T), ("constraint_type", _T), ("is_deferrable", _T),
        ("initially_deferred", _T), ("enforced", _T), ("nulls_distinct", _T),
    ],
    "key_column_usage": [
        ("constraint_catalog", _T), ("constraint_schema", _T), ("constraint_name", _T), ("table_catalog", _T),
        ("table_schema", _T), ("table_name", _T), ("column_name", _T), ("ordinal_position", _I),
        ("position_in_unique_constraint", _I),
    ],
    "referential_constraints": [
        ("constraint_catalog", _T), ("constraint_schema", _T), ("constraint_name", _T),
        ("unique_constraint_catalog", _T), ("unique_constraint_schema", _T), ("unique_constraint_name", _T),
        ("match_option", _T), ("update_rule", _T), ("delete_rule", _T),
    ],
    "routines": [("specific_schema", _T), ("specific_name", _T), ("routine_schema", _T), ("routine_name", _T)],
    "sequences": [("sequence_catalog", _T), ("sequence_schema", _T), ("sequence_name", _T), ("data_type", _T)],
}
# fmt: on

# Functions a catalog query may call, rewritten to the DuckDB macros and Python functions below
# (named shoal_<name>, so DuckDB's own pg_catalog functions, which describe DuckDB, never answer).
CATALOG_FUNCTIONS = {
    "format_type", "pg_get_userbyid", "pg_table_is_visible", "pg_type_is_visible", "pg_function_is_visible",
    "pg_get_expr", "obj_description", "col_description", "shobj_description", "has_table_privilege",
    "has_schema_privilege", "has_database_privilege", "has_column_privilege", "has_any_column_privilege",
    "pg_get_indexdef", "pg_get_constraintdef", "pg_get_viewdef", "pg_get_triggerdef", "pg_get_partkeydef",
    "pg_get_statisticsobjdef_columns", "pg_relation_is_updatable", "pg_column_is_updatable",
    "pg_encoding_to_char", "pg_backend_pid", "current_setting", "array_upper", "array_lower",
    "_pg_expandarray", "pg_relation_size", "pg_total_relation_size", "pg_table_size", "pg_indexes_size",
    "pg_size_pretty", "pg_is_in_recovery", "pg_get_function_result", "pg_get_function_arguments",
    "pg_get_function_identity_arguments", "quote_ident", "pg_postmaster_start_time", "txid_current",
    "pg_get_serial_sequence", "pg_tablespace_location", "pg_get_keywords", "version", "current_database",
    "pg_my_temp_schema", "pg_is_other_temp_schema", "pg_get_ruledef", "pg_sequence_parameters",
    "inet_server_addr", "inet_server_port", "pg_conf_load_time", "pg_current_logfile",
    "pg_relation_is_publishable", "pg_get_publication_tables", "to_regtype", "to_regclass", "to_regnamespace", "pg_collation_is_visible", "pg_opclass_is_visible",
    "pg_conversion_is_visible", "pg_operator_is_visible", "pg_ts_config_is_visible",
}  # fmt: skip
_SESSION_FUNCTIONS = (exp.CurrentSchema, exp.CurrentUser, exp.CurrentSchemas, exp.CurrentDatabase)


class CatalogError(Exception):
    """A catalog query this catalog cannot answer (reported to the client with a SQLSTATE)."""

    def __init__(self, message: str, code: str = "0A000", hint: str | None = None) -> None:
        super().__init__(message)
        self.code, self.hint = code, hint


@dataclass
class SessionInfo:
    """What a catalog query may ask of the connection (current_user, search_path, settings)."""

    user: str
    pid: int
    search_path: list[str]
    settings: dict[str, str]
    version: str


def _name_of(table: exp.Table) -> tuple[str, str]:
    return (table.db or "").lower(), table.name.lower()


def is_catalog_query(tree: exp.Expr) -> bool:
    """Whether a statement reads pg_catalog or information_schema (or asks only session functions)."""
    if not isinstance(tree, exp.Query):
        return False
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    tables = [t for t in tree.find_all(exp.Table) if isinstance(t.this, exp.Identifier)]
    for t in tables:
        db, name = _name_of(t)
        if db in ("pg_catalog", "information_schema") or (not db and name in PG_RELATIONS and name not in ctes):
            return True
    if any(not _name_of(t)[0] and _name_of(t)[1] not in ctes for t in tables) or any(_name_of(t)[0] for t in tables):
        return False
    if any(_type_name(c.to) in _REG_TYPES for c in tree.find_all(exp.Cast)):  # 'hr.t'::regclass
        return True
    for f in tree.find_all(exp.Func):
        if isinstance(f, _SESSION_FUNCTIONS):
            return True
        if isinstance(f, exp.Anonymous) and str(f.this).lower() in CATALOG_FUNCTIONS:
            return True
    return any(_qualified_function(d) for d in tree.find_all(exp.Dot))


def _qualified_function(dot: exp.Dot) -> str | None:
    """`pg_catalog.f(...)` / `information_schema.f(...)`: the function name, else None."""
    if (
        isinstance(dot.this, exp.Identifier)
        and dot.this.name.lower() in ("pg_catalog", "information_schema")
        and isinstance(dot.expression, exp.Func)
    ):
        f = dot.expression
        return str(f.this if isinstance(f, exp.Anonymous) else f.sql_name()).lower()
    return None


class Catalog:
    """One connection's governed catalog: an in-memory DuckDB database, rebuilt after CATALOG_TTL_S."""

    def __init__(self, load: Callable[[], Snapshot]) -> None:
        self._load = load
        self._db: Any = None
        self._duck_table_functions: set[str] = set()
        self._built = 0.0
        self._lock = threading.Lock()
        self._snapshot = Snapshot([])
        self._rel_oids: dict[tuple[str, str], int] = {}
        self._ns_oids: dict[str, int] = {}
        self._tables: dict[tuple[str, str], CatalogTable] = {}
        self._user, self._user_oid = "", 0
        self._session: SessionInfo | None = None
        self._sub: Callable[[exp.Expr], exp.Expr] = lambda e: e

    def invalidate(self) -> None:
        """Build the catalog again at the next query (the principal changed)."""
        with self._lock:
            self._built = float("-inf")

    def __del__(self) -> None:
        if self._db is not None:
            self._db.close()

    # ---- answering a query ------------------------------------------------------------------------
    def run(self, tree: exp.Expr, session: SessionInfo) -> tuple[list[str], list[int], list[tuple[Any, ...]]]:
        """Run a catalog query: (column names, type OIDs, rows)."""
        with self._lock:
            self._session = session
            if self._db is None or time.monotonic() - self._built > CATALOG_TTL_S:
                self._build(self._load())
            rewritten = self._rewrite(tree.copy(), session)
            self._refuse_table_functions(rewritten)
            sql = rewritten.sql(dialect="duckdb")
            self._set_search_path(session)
            db = self._db
            # A catalog query is small; one that is not (generate_series(1, 1e12)) is stopped.
            watchdog = threading.Timer(CATALOG_QUERY_TIMEOUT_S, db.interrupt)
            watchdog.start()
            try:
                cur = db.execute(sql)
                rows = cur.fetchall()
                description = cur.description or []
            except Exception as exc:  # DuckDB's errors become the client's
                if not watchdog.is_alive():
                    raise CatalogError(
                        f"the catalog query ran longer than {CATALOG_QUERY_TIMEOUT_S} s and was stopped", "57014"
                    ) from exc
                missing = _MISSING.search(str(exc))
                if missing:  # 'x'::regclass / ::regtype of an unknown name, as PostgreSQL reports it
                    code = "42P01" if missing.group(1) == "relation" else "42704"
                    raise CatalogError(missing.group(0), code) from exc
                raise CatalogError(
                    f"Shoal's PostgreSQL catalog cannot answer this query: {str(exc).splitlines()[0]}",
                    "0A000",
                    hint="Shoal emulates pg_catalog and information_schema for listing schemas, tables and "
                    "columns; see docs/bi.md, 'Catalog and SQL for BI tools'",
                ) from exc
            finally:
                watchdog.cancel()
        names = [d[0] for d in description]
        oids = [_oid_of(str(d[1])) for d in description]
        return names, oids, [tuple(_pg_value(v) for v in r) for r in rows]

    def _refuse_table_functions(self, tree: exp.Expr) -> None:
        """No DuckDB table function but PostgreSQL's few, wherever it stands (FROM, LATERAL, a
        subquery): they read files, settings (duckdb_settings) and run SQL (query, query_table)."""
        for fn in tree.find_all(exp.Func):
            name = fn.sql(dialect="duckdb").split("(", 1)[0].strip().strip('"').rsplit(".", 1)[-1].lower()
            if name in self._duck_table_functions and name not in _TABLE_FUNCTIONS:
                raise CatalogError(f"function {name} is not available in Shoal's catalog", "42883")

    # ---- rewriting PostgreSQL into DuckDB ---------------------------------------------------------
    def _rewrite(self, tree: exp.Expr, session: SessionInfo) -> exp.Expr:  # noqa: C901 - one pass over the tree, a case per catalog construct
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for t in list(tree.find_all(exp.Table)):
            if not isinstance(t.this, exp.Identifier):
                # Set-returning functions: PostgreSQL's few that catalog queries use, nothing of DuckDB's
                # own (file readers, settings), even though its file access is off.
                fname = t.this.sql_name().lower() if isinstance(t.this, exp.Func) else ""
                if isinstance(t.this, exp.Anonymous):
                    fname = str(t.this.this).lower()
                if fname not in _TABLE_FUNCTIONS:
                    raise CatalogError(f"function {fname or t.sql()} is not available in Shoal's catalog", "42883")
                if (t.db or "").lower() == "pg_catalog":  # pg_catalog.unnest(...)
                    t.set("db", None)
                continue
            db, name = _name_of(t)
            if db == "pg_catalog" or (not db and name in PG_RELATIONS and name not in ctes):
                if name not in PG_RELATIONS:
                    raise CatalogError(f'relation "pg_catalog.{name}" is not available in Shoal\'s catalog', "42P01")
                t.set("db", exp.to_identifier(_PGC))
                t.set("catalog", None)
            elif db == "information_schema":
                if name not in INFO_RELATIONS:
                    raise CatalogError(
                        f'relation "information_schema.{name}" is not available in Shoal\'s catalog', "42P01"
                    )
                t.set("db", exp.to_identifier(_ISC))
                t.set("catalog", None)
            elif not (not db and name in ctes):
                raise CatalogError(
                    f'a catalog query cannot read "{t.sql(dialect="postgres")}": lake tables and pg_catalog '
                    "are answered separately",
                    "0A000",
                    hint="query the lake's tables and the catalog in separate statements",
                )

        # sqlglot does not descend into a node a transform replaced: replacements rewrite their own
        # children (sub) before they take the old node's place.
        def sub(e: exp.Expr) -> exp.Expr:
            return e.transform(fix)

        self._sub = sub

        def fix(node: exp.Expr) -> exp.Expr:  # noqa: C901 - a case per catalog construct that a BI tool sends
            if isinstance(node, exp.Column) and node.args.get("db") is not None:  # pg_catalog.pg_class.relname
                schema = {"pg_catalog": _PGC, "information_schema": _ISC}.get(node.args["db"].name.lower())
                if schema:
                    node.set("db", exp.to_identifier(schema))
                return node
            if isinstance(node, exp.Dot) and (fname := _qualified_function(node)):
                inner = node.expression
                if fname not in CATALOG_FUNCTIONS:
                    return sub(inner)
                return _call(fname, [sub(a) for a in inner.expressions])
            if isinstance(node, exp.Anonymous) and str(node.this).lower() in (
                "json_build_object",
                "jsonb_build_object",
            ):
                return exp.Anonymous(this="json_object", expressions=[sub(a) for a in node.expressions])
            if isinstance(node, exp.Anonymous) and str(node.this).lower() in CATALOG_FUNCTIONS:
                return _call(str(node.this).lower(), [sub(a) for a in node.expressions])
            if isinstance(node, exp.CurrentVersion):  # version(): the endpoint's, never DuckDB's
                return exp.Anonymous(this="shoal_version", expressions=[])
            if isinstance(node, exp.CurrentSchema):
                existing = [
                    s for s in session.search_path if s in self._ns_oids
                ]  # as PostgreSQL: the first that exists
                return exp.Literal.string(existing[0]) if existing else exp.null()
            if isinstance(node, exp.CurrentSchemas):
                implicit = bool(node.this) and node.this.name.lower() == "true"
                names = (["pg_catalog"] if implicit else []) + session.search_path
                return exp.Array(expressions=[exp.Literal.string(n) for n in names])
            if isinstance(node, exp.CurrentUser) or (
                isinstance(node, exp.Column) and not node.table and node.name.lower() in ("session_user", "user")
            ):
                return exp.Literal.string(session.user)
            if isinstance(node, exp.CurrentDatabase):
                return exp.Literal.string(DATABASE)
            if isinstance(node, exp.Operator):
                op = str(node.args.get("operator", "")).lower().replace("pg_catalog.", "").strip()
                ops = {"~": exp.RegexpLike, "~*": exp.RegexpILike}
                if op in ops:
                    return ops[op](this=sub(node.this), expression=sub(node.expression))
                compare = {"=": exp.EQ, "<>": exp.NEQ, "<": exp.LT, ">": exp.GT, "<=": exp.LTE, ">=": exp.GTE}
                if op in compare:
                    return compare[op](this=sub(node.this), expression=sub(node.expression))
                raise CatalogError(f"operator {op} is not supported in Shoal's catalog", "42883")
            if isinstance(node, exp.Cast):
                return self._cast(node)
            if isinstance(node, exp.Any):  # = ANY('{a,b}'): PostgreSQL's array text
                arg = node.this.unnest() if isinstance(node.this, exp.Paren) else node.this
                if arg.is_string and arg.name.startswith("{"):
                    return exp.Any(this=_array_literal(arg.name))
            if isinstance(node, exp.EQ | exp.NEQ):
                # regproc columns hold function names here; PostgreSQL compares them with 0 ('-').
                for a, b in ((node.this, node.expression), (node.expression, node.this)):
                    if isinstance(a, exp.Column) and a.name.lower() in _REGPROC_COLUMNS and b.is_int and b.name == "0":
                        b.replace(exp.Literal.string("-"))
            return node

        name_columns(tree)
        # COLLATE first (pg_catalog.default is no DuckDB collation), then the rest, innermost
        # nodes included: a rewritten node's children are rewritten too.
        tree = tree.transform(lambda n: n.this if isinstance(n, exp.Collate) else n)
        return tree.transform(fix)

    def _cast(self, node: exp.Cast) -> exp.Expr:
        """PostgreSQL casts to its catalog types, as DuckDB expressions."""
        kind = _type_name(node.to)
        raw = node.this
        if isinstance(raw, exp.Cast) and kind in _TEXT_TYPES and _type_name(raw.to) in _REG_TYPES:
            # regclass/regtype as text: the name, as PostgreSQL prints it.
            return _call(f"{_type_name(raw.to)}_out", [self._cast(raw)])
        inner = self._cast(raw) if isinstance(raw, exp.Cast) else self._sub(raw)
        if kind in _REG_TYPES:
            return _call(f"{kind}_in", [inner]) if inner.is_string else exp.cast(inner, "BIGINT")
        target = _CAST_TYPES.get(kind)
        return exp.cast(inner, target) if target else node

    # ---- building the database ---------------------------------------------------------------------
    def _set_search_path(self, session: SessionInfo) -> None:
        self._db.execute(f"DELETE FROM {_PGC}._search_path")
        visible = ["pg_catalog"] + [s for s in session.search_path if s in self._ns_oids]
        self._db.executemany(
            f"INSERT INTO {_PGC}._search_path VALUES (?, ?)",
            [(self._ns_oids[s], i) for i, s in enumerate(visible) if s in self._ns_oids],
        )
        self._db.execute(f"DELETE FROM {_PGC}.pg_settings")
        self._db.executemany(
            f"INSERT INTO {_PGC}.pg_settings (name, setting, context, vartype, source, boot_val, reset_val)"
            " VALUES (?, ?, 'user', 'string', 'session', ?, ?)",
            [(k, v, v, v) for k, v in sorted(self._session_settings().items())],
        )

    def _session_settings(self) -> dict[str, str]:
        return dict(self._session.settings) if self._session else {}

    def _build(self, snap: Snapshot) -> None:
        import duckdb

        if self._db is not None:
            self._db.close()
        # Small and private: one thread, a memory cap and no spilling (no temp folder, which DuckDB
        # would otherwise let a query read from even with external access off).
        db = duckdb.connect(":memory:", config={"threads": 1, "memory_limit": "256MB", "temp_directory": ""})
        for setting in ("http_proxy", "http_proxy_username", "http_proxy_password"):
            with contextlib.suppress(duckdb.Error):  # never shown to a client, whatever the environment says
                db.execute(f"SET {setting} = ''")
        with contextlib.suppress(duckdb.Error):
            db.execute("SET allow_persistent_secrets = false")
        self._duck_table_functions = {
            str(r[0]).lower()
            for r in db.execute(
                "SELECT DISTINCT function_name FROM duckdb_functions() WHERE function_type IN ('table', 'table_macro')"
            ).fetchall()
        }
        self._snapshot = snap
        for schema, relations in ((_PGC, PG_RELATIONS), (_ISC, INFO_RELATIONS)):
            db.execute(f"CREATE SCHEMA {schema}")
            for rel, cols in relations.items():
                db.execute(f"CREATE TABLE {schema}.{rel} ({', '.join(f'{c} {t}' for c, t in cols)})")
        db.execute(f"CREATE TABLE {_PGC}._search_path (nspoid BIGINT, pos INTEGER)")
        self._fill(db, snap)
        self._functions(db)
        # The client's query may name any DuckDB function: no files, no extensions, no attaching.
        db.execute("SET enable_external_access = false")
        db.execute("SET autoinstall_known_extensions = false")
        db.execute("SET autoload_known_extensions = false")
        db.execute("SET lock_configuration = true")
        self._db, self._built = db, time.monotonic()

    def _insert(self, db: Any, schema: str, rel: str, rows: list[dict[str, Any]]) -> None:
        relations = PG_RELATIONS if schema == _PGC else INFO_RELATIONS
        cols = [c for c, _ in relations[rel]]
        for r in rows:
            unknown = set(r) - set(cols)
            assert not unknown, f"{rel}: {unknown}"
        if rows:
            db.executemany(
                f"INSERT INTO {schema}.{rel} VALUES ({', '.join('?' * len(cols))})",
                [[r.get(c) for c in cols] for r in rows],
            )

    def _fill(self, db: Any, snap: Snapshot) -> None:
        session = self._session
        user = session.user if session else "shoal"
        used: set[int] = set()

        def oid_for(*key: str) -> int:
            # Stable across rebuilds and connections (clients cache OIDs), unique within one catalog.
            oid = _OID_BASE + zlib.crc32("\x00".join(key).encode()) % (2**31 - _OID_BASE)
            while oid in used:
                oid += 1
            used.add(oid)
            return oid

        ns = {"pg_catalog": PG_CATALOG_NS, PUBLIC: PUBLIC_NS, "information_schema": INFO_SCHEMA_NS}
        for s in snap.schemas:
            if s not in ns:
                ns[s] = oid_for("namespace", s)
        self._ns_oids = ns
        user_oid = 10 if user == "shoal" else oid_for("role", user)
        self._insert(db, _PGC, "pg_namespace", [{"oid": o, "nspname": n, "nspowner": OWNER_OID} for n, o in ns.items()])
        roles = {OWNER_OID: "shoal", user_oid: user}
        self._insert(
            db,
            _PGC,
            "pg_roles",
            [
                {"oid": o, "rolname": n, "rolsuper": o == OWNER_OID, "rolinherit": True, "rolcanlogin": True,
                 "rolcreaterole": False, "rolcreatedb": False, "rolreplication": False, "rolconnlimit": -1,
                 "rolbypassrls": False, "rolpassword": "********"}
                for o, n in roles.items()
            ],
        )  # fmt: skip
        self._insert(
            db,
            _PGC,
            "pg_user",
            [{"usename": n, "usesysid": o, "usesuper": o == OWNER_OID, "usecreatedb": False, "userepl": False,
              "usebypassrls": False, "passwd": "********"} for o, n in roles.items()],
        )  # fmt: skip
        self._insert(
            db,
            _PGC,
            "pg_database",
            [{"oid": 16_384, "datname": DATABASE, "datdba": OWNER_OID, "encoding": 6, "datlocprovider": "c",
              "datistemplate": False, "datallowconn": True, "datconnlimit": -1, "dattablespace": 1663,
              "datcollate": "C.UTF-8", "datctype": "C.UTF-8"}],
        )  # fmt: skip
        self._insert(
            db,
            _PGC,
            "pg_am",
            [
                {"oid": 2, "amname": "heap", "amhandler": "heap_tableam_handler", "amtype": "t"},
                {"oid": 403, "amname": "btree", "amhandler": "bthandler", "amtype": "i"},
            ],
        )
        self._insert(
            db,
            _PGC,
            "pg_collation",
            [{"oid": 100, "collname": "default", "collnamespace": PG_CATALOG_NS, "collowner": OWNER_OID,
              "collprovider": "d", "collisdeterministic": True, "collencoding": -1}],
        )  # fmt: skip
        self._insert(
            db,
            _PGC,
            "pg_tablespace",
            [{"oid": 1663, "spcname": "pg_default", "spcowner": OWNER_OID}],
        )
        self._insert(db, _PGC, "pg_type", [_type_row(t) for t in TYPES])
        classes, attributes, descriptions = [], [], []
        info_tables, info_columns, pg_tables = [], [], []
        rel_oids: dict[tuple[str, str], int] = {}
        # The catalog's own relations are listed too (as views in pg_catalog / information_schema),
        # so `'pg_class'::regclass` and a tool's "system tables" view work as in PostgreSQL.
        system = [("pg_catalog", r, PG_CATALOG_NS) for r in PG_RELATIONS] + [
            ("information_schema", r, INFO_SCHEMA_NS) for r in INFO_RELATIONS
        ]
        for schema, rel, nsoid in system:
            oid = {"pg_class": PG_CLASS_OID, "pg_namespace": PG_NAMESPACE_OID, "pg_proc": PG_PROC_OID}.get(rel)
            oid = oid or oid_for("relation", schema, rel)
            rel_oids[(schema, rel)] = oid
            classes.append(_class_row(oid, rel, nsoid, "v", 0))
        for t in snap.tables:
            oid = oid_for("relation", t.schema, t.name)
            rel_oids[(t.schema, t.name)] = oid
            classes.append(_class_row(oid, t.name, ns[t.schema], t.kind, len(t.columns)))
            if t.comment:
                descriptions.append({"objoid": oid, "classoid": PG_CLASS_OID, "objsubid": 0, "description": t.comment})
            info_tables.append(
                {"table_catalog": DATABASE, "table_schema": t.schema, "table_name": t.name,
                 "table_type": "BASE TABLE" if t.kind == "r" else "VIEW", "is_insertable_into": "NO",
                 "is_typed": "NO"}
            )  # fmt: skip
            pg_tables.append(
                {"schemaname": t.schema, "tablename": t.name, "tableowner": "shoal", "hasindexes": False,
                 "hasrules": False, "hastriggers": False, "rowsecurity": False}
            )  # fmt: skip
            for i, c in enumerate(t.columns, start=1):
                typ = TYPES_BY_OID[c.type_oid]
                attributes.append(
                    {"attrelid": oid, "attname": c.name, "atttypid": c.type_oid, "attstattarget": -1,
                     "attlen": typ.length, "attnum": i, "attndims": 0, "attcacheoff": -1, "atttypmod": c.typmod,
                     "attbyval": typ.length in (1, 2, 4, 8), "attalign": "i", "attstorage": "p",
                     "attcompression": "", "attnotnull": not c.nullable, "atthasdef": False, "atthasmissing": False,
                     "attidentity": "", "attgenerated": "", "attisdropped": False, "attislocal": True,
                     "attinhcount": 0, "attcollation": 100 if typ.category == "S" else 0}
                )  # fmt: skip
                info_columns.append(_info_column(t, c, i))
        self._rel_oids = rel_oids
        self._tables = {(t.schema, t.name): t for t in snap.tables}
        self._user, self._user_oid = user, user_oid
        self._insert(db, _PGC, "pg_class", classes)
        self._insert(db, _PGC, "pg_attribute", attributes)
        self._insert(db, _PGC, "pg_description", descriptions)
        self._insert(db, _PGC, "pg_tables", pg_tables)
        self._insert(
            db,
            _ISC,
            "schemata",
            [{"catalog_name": DATABASE, "schema_name": s, "schema_owner": "shoal"} for s in ns if s != "pg_catalog"]
            + [{"catalog_name": DATABASE, "schema_name": "pg_catalog", "schema_owner": "shoal"}],
        )
        self._insert(db, _ISC, "tables", info_tables)
        self._insert(db, _ISC, "columns", info_columns)

    def _functions(self, db: Any) -> None:
        """The catalog functions: SQL macros over the relations, Python for names and types."""
        # The Python functions reach this catalog through a weak reference: DuckDB holding them
        # would otherwise keep the catalog (and its database) alive after the connection ends.
        me = weakref.proxy(self)
        p = _PGC
        macros = {
            "format_type": None,
            "pg_get_userbyid": f"(r) AS coalesce((SELECT rolname FROM {p}.pg_roles WHERE oid = r),"
            " 'unknown (OID=' || r || ')')",
            # Aliases no client query uses: a macro's argument is pasted in as written, so `c.oid`
            # from psql's `pg_table_is_visible(c.oid)` would otherwise mean this subquery's c.
            "pg_table_is_visible": f"(o) AS (SELECT count(*) > 0 FROM {p}.pg_class shoal_vis_c JOIN {p}._search_path"
            " shoal_vis_s ON shoal_vis_s.nspoid = shoal_vis_c.relnamespace WHERE shoal_vis_c.oid = o)",
            "pg_type_is_visible": "(o) AS true",
            "pg_function_is_visible": "(o) AS true",
            "pg_collation_is_visible": "(o) AS true",
            "pg_opclass_is_visible": "(o) AS true",
            "pg_conversion_is_visible": "(o) AS true",
            "pg_operator_is_visible": "(o) AS true",
            "pg_ts_config_is_visible": "(o) AS true",
            "pg_get_expr": "(e, r) AS e, (e, r, p) AS e",
            "obj_description": f"(o) AS (SELECT first(description) FROM {p}.pg_description WHERE objoid = o"
            f" AND objsubid = 0), (o, c) AS (SELECT first(description) FROM {p}.pg_description WHERE objoid = o"
            " AND objsubid = 0)",
            "col_description": f"(o, n) AS (SELECT first(description) FROM {p}.pg_description WHERE objoid = o"
            " AND objsubid = n)",
            "shobj_description": "(o, c) AS NULL::VARCHAR",
            # Answered from the grants (the snapshot): false for what the principal may not read.
            # A role other than the signed-in principal has no privileges here (shoal_is_me).
            "has_table_privilege": "(t, p) AS shoal_table_priv(t::VARCHAR, p),"
            " (u, t, p) AS shoal_is_me(u::VARCHAR) AND shoal_table_priv(t::VARCHAR, p)",
            "has_any_column_privilege": "(t, p) AS shoal_table_priv(t::VARCHAR, p),"
            " (u, t, p) AS shoal_is_me(u::VARCHAR) AND shoal_table_priv(t::VARCHAR, p)",
            "has_column_privilege": "(t, c, p) AS shoal_column_priv(t::VARCHAR, c::VARCHAR, p),"
            " (u, t, c, p) AS shoal_is_me(u::VARCHAR) AND shoal_column_priv(t::VARCHAR, c::VARCHAR, p)",
            "has_schema_privilege": "(s, p) AS shoal_schema_priv(s::VARCHAR, p),"
            " (u, s, p) AS shoal_is_me(u::VARCHAR) AND shoal_schema_priv(s::VARCHAR, p)",
            "has_database_privilege": "(d, p) AS upper(p) LIKE '%CONNECT%', (u, d, p) AS upper(p) LIKE '%CONNECT%'",
            "pg_get_indexdef": "(o) AS NULL::VARCHAR, (o, c, p) AS NULL::VARCHAR",
            "pg_get_constraintdef": "(o) AS NULL::VARCHAR, (o, p) AS NULL::VARCHAR",
            "pg_get_viewdef": "(o) AS NULL::VARCHAR, (o, p) AS NULL::VARCHAR",
            "pg_get_triggerdef": "(o) AS NULL::VARCHAR, (o, p) AS NULL::VARCHAR",
            "pg_get_ruledef": "(o) AS NULL::VARCHAR, (o, p) AS NULL::VARCHAR",
            "pg_get_partkeydef": "(o) AS NULL::VARCHAR",
            "pg_get_statisticsobjdef_columns": "(o) AS NULL::VARCHAR",
            "pg_get_function_result": "(o) AS NULL::VARCHAR",
            "pg_get_function_arguments": "(o) AS NULL::VARCHAR",
            "pg_get_function_identity_arguments": "(o) AS NULL::VARCHAR",
            "pg_get_serial_sequence": "(t, c) AS NULL::VARCHAR",
            "pg_tablespace_location": "(o) AS ''",
            "pg_relation_is_updatable": "(o, b) AS 0",
            "pg_relation_is_publishable": "(o) AS false",
            "pg_column_is_updatable": "(o, n, b) AS false",
            "pg_encoding_to_char": "(e) AS 'UTF8'",
            "array_upper": "(a, d) AS len(a)",
            "array_lower": "(a, d) AS CASE WHEN len(a) > 0 THEN 1 END",
            "_pg_expandarray": "(a) AS struct_pack(x := a[1], n := 1)",
            "pg_relation_size": "(o) AS 0::BIGINT, (o, f) AS 0::BIGINT",
            "pg_total_relation_size": "(o) AS 0::BIGINT",
            "pg_table_size": "(o) AS 0::BIGINT",
            "pg_indexes_size": "(o) AS 0::BIGINT",
            "pg_size_pretty": "(n) AS n || ' bytes'",
            "pg_is_in_recovery": "() AS false",
            "quote_ident": "(s) AS CASE WHEN regexp_matches(s, '^[a-z_][a-z0-9_]*$') THEN s"
            " ELSE '\"' || replace(s, '\"', '\"\"') || '\"' END",
            "txid_current": "() AS 1::BIGINT",
            "pg_my_temp_schema": "() AS 0::BIGINT",
            "pg_is_other_temp_schema": "(o) AS false",
            "inet_server_addr": "() AS NULL::VARCHAR",
            "inet_server_port": "() AS NULL::INTEGER",
        }
        for name, fn, arity in (
            ("table_priv", lambda t, p: me._table_privilege(t, None, p), 2),
            ("column_priv", lambda t, c, p: me._table_privilege(t, c, p), 3),
            ("schema_priv", lambda n, p: me._schema_privilege(n, p), 2),
            ("is_me", lambda u: None if u is None else u in (me._user, str(me._user_oid)), 1),
        ):
            db.create_function(f"shoal_{name}", fn, ["VARCHAR"] * arity, "BOOLEAN", null_handling="special")
        for name, body in macros.items():
            if body is not None:
                db.execute(f"CREATE MACRO shoal_{name}{body}")
        db.create_function("shoal_format_type", format_type, ["BIGINT", "BIGINT"], "VARCHAR", null_handling="special")
        # Read at call time: one catalog database serves all the connection's statements.
        db.create_function(
            "shoal_current_setting", lambda x: me._current_setting(x), ["VARCHAR"], "VARCHAR", null_handling="special"
        )
        db.create_function("shoal_pg_backend_pid", lambda: me._session.pid if me._session else 0, [], "BIGINT")
        db.create_function("shoal_version", lambda: me._session.version if me._session else "", [], "VARCHAR")
        db.create_function("shoal_current_database", lambda: DATABASE, [], "VARCHAR")
        db.create_function("shoal_regclass_in", lambda x: me._regclass_in(x), ["VARCHAR"], "BIGINT")
        db.create_function("shoal_regclass_out", lambda x: me._regclass_out(x), ["BIGINT"], "VARCHAR")
        db.create_function("shoal_regtype_in", _regtype_in, ["VARCHAR"], "BIGINT")
        db.create_function("shoal_regtype_out", lambda o: format_type(o, -1), ["BIGINT"], "VARCHAR")
        db.create_function("shoal_regproc_in", _regproc_in, ["VARCHAR"], "VARCHAR")
        db.create_function("shoal_regprocedure_in", _regproc_in, ["VARCHAR"], "VARCHAR")
        db.create_function("shoal_regnamespace_in", lambda s: me._ns_oids.get(_unquote(s)), ["VARCHAR"], "BIGINT")
        db.create_function("shoal_regrole_in", lambda s: OWNER_OID, ["VARCHAR"], "BIGINT")
        # to_reg*: NULL for an unknown name (the ::reg* casts raise instead).
        db.create_function("shoal_to_regtype", _quiet(_regtype_in), ["VARCHAR"], "BIGINT", null_handling="special")
        db.create_function(
            "shoal_to_regclass", _quiet(lambda x: me._regclass_in(x)), ["VARCHAR"], "BIGINT", null_handling="special"
        )
        db.create_function(
            "shoal_to_regnamespace",
            _quiet(lambda s: me._ns_oids.get(_unquote(s))),
            ["VARCHAR"],
            "BIGINT",
            null_handling="special",
        )
        names = {o: n for n, o in me._ns_oids.items()}
        db.create_function("shoal_regnamespace_out", lambda o: names.get(o, str(o)), ["BIGINT"], "VARCHAR")
        db.create_function("shoal_regproc_out", lambda o: str(o), ["BIGINT"], "VARCHAR")
        db.create_function("shoal_regprocedure_out", lambda o: str(o), ["BIGINT"], "VARCHAR")
        db.create_function("shoal_regrole_out", lambda o: "shoal" if o == OWNER_OID else str(o), ["BIGINT"], "VARCHAR")

    def _current_setting(self, name: str | None) -> str | None:
        settings = self._session.settings if self._session else {}
        return None if name is None else settings.get(name, settings.get(name.lower()))

    def _regclass_in(self, text: str) -> int:
        """'schema.table' or 'table' (found through the search path), as PostgreSQL's regclass input."""
        parts = _split_name(text)
        if len(parts) == 2:
            oid = self._rel_oids.get((parts[0], parts[1]))
        else:
            path = ["pg_catalog"] + (self._session.search_path if self._session else [PUBLIC])
            oid = next((self._rel_oids[(s, parts[-1])] for s in path if (s, parts[-1]) in self._rel_oids), None)
        if oid is None:
            raise ValueError(f'relation "{text}" does not exist')
        return oid

    # ---- privileges, from the grants --------------------------------------------------------------
    def _relation(self, text: str) -> tuple[str, str] | None:
        """(schema, name) of a relation given by OID or by name, None if this principal sees none."""
        if text.strip().isdigit():
            return next((key for key, o in self._rel_oids.items() if o == int(text)), None)
        try:
            oid = self._regclass_in(text)
        except ValueError:
            return None
        return next(key for key, o in self._rel_oids.items() if o == oid)

    def _table_privilege(self, table: str | None, column: str | None, privilege: str | None) -> bool | None:
        """has_table_privilege / has_column_privilege: any of the listed privileges, as PostgreSQL."""
        if table is None or privilege is None:
            return None
        wanted = _privileges(privilege, _PG_TABLE_PRIVILEGES | _PG_OTHER_TABLE_PRIVILEGES)
        key = self._relation(table)
        if key is None:
            return False
        if key[0] in ("pg_catalog", "information_schema"):  # readable by all, as PostgreSQL grants PUBLIC
            allowed, columns = frozenset({"SELECT"}), [c for c, _ in {**PG_RELATIONS, **INFO_RELATIONS}[key[1]]]
        else:
            t = self._tables[key]
            allowed, columns = t.privileges, [c.name for c in t.columns]
        if column is not None:
            name = _unquote(column) if not column.isdigit() else None
            if name is None and not 1 <= int(column) <= len(columns):
                return None  # PostgreSQL: NULL for a column number that does not exist
            if name is not None and name not in columns:
                return False  # a column the grants hide is one this principal does not see
        return any(p in allowed for p in wanted)

    def _schema_privilege(self, schema: str | None, privilege: str | None) -> bool | None:
        if schema is None or privilege is None:
            return None
        wanted = _privileges(privilege, {"USAGE", "CREATE"})
        if schema.strip().isdigit():
            visible = int(schema) in self._ns_oids.values()
        else:
            visible = _unquote(schema) in self._ns_oids
        return visible and "USAGE" in wanted  # CREATE: tables are made through Spark, not here

    def _regclass_out(self, oid: int) -> str:
        for (schema, name), o in self._rel_oids.items():
            if o == oid:
                path = self._session.search_path if self._session else [PUBLIC]
                return name if schema in path or schema == "pg_catalog" else f"{schema}.{name}"
        return str(oid)


_PG_TABLE_PRIVILEGES = frozenset({"SELECT", "INSERT"})  # the ones Shoal's grants give (the rest: never)
_PG_OTHER_TABLE_PRIVILEGES = frozenset({"UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER", "MAINTAIN"})


def _privileges(text: str, known: set[str] | frozenset[str]) -> set[str]:
    """'SELECT, INSERT WITH GRANT OPTION' -> the privileges asked without grant option (no
    principal may grant through this endpoint, so those are never held)."""
    out = set()
    for part in text.split(","):
        words = part.upper().split()
        if not words or words[0] not in known or words[1:] not in ([], ["WITH", "GRANT", "OPTION"]):
            raise ValueError(f'unrecognized privilege type: "{part.strip()}"')
        if len(words) == 1:
            out.add(words[0])
    return out


_TABLE_FUNCTIONS = {"generate_series", "exploding_generate_series", "unnest", "explode", "generate_subscripts"}
_REGPROC_COLUMNS = {
    "typinput", "typoutput", "typreceive", "typsend", "typmodin", "typmodout", "typanalyze", "typsubscript",
    "amhandler", "prosupport",
}  # fmt: skip
_MISSING = re.compile(r'(relation|type) "[^"]*" does not exist')
_REG_TYPES = {"regclass", "regtype", "regproc", "regprocedure", "regnamespace", "regrole"}
_TEXT_TYPES = {"text", "varchar", "name", "character varying", "bpchar", "char", '"char"'}
_CAST_TYPES = {
    **dict.fromkeys(_TEXT_TYPES | {"pg_node_tree", "aclitem"}, "VARCHAR"),
    **dict.fromkeys(("oid", "xid", "cid", "tid", "regconfig", "regoper", "int8", "bigint"), "BIGINT"),
    **dict.fromkeys(("int2", "int4", "smallint", "integer", "int"), "INTEGER"),
    **dict.fromkeys(("int2vector", "oidvector", "int2[]", "int4[]", "int8[]", "oid[]", "_int2", "_oid"), "BIGINT[]"),
    **dict.fromkeys(("text[]", "name[]", "varchar[]", "_text", "_name", "aclitem[]"), "VARCHAR[]"),
    **dict.fromkeys(("bool", "boolean"), "BOOLEAN"),
}


def _type_name(to: exp.Expr) -> str:
    """A cast's target as PostgreSQL writes it, without `pg_catalog.` (`regclass`, `text`, `oid[]`)."""
    if isinstance(to, exp.ObjectIdentifier):
        return to.name.lower()
    if isinstance(to, exp.DataType) and to.this == exp.DataType.Type.USERDEFINED:
        name = to.args["kind"].sql(dialect="postgres") if to.args.get("kind") else ""
    else:
        name = to.sql(dialect="postgres")
    name = name.lower().replace('"', "").removeprefix("pg_catalog.")
    return {"character varying": "varchar", "char": "char"}.get(name, name)


def name_columns(tree: exp.Expr) -> None:
    """Name the result's unnamed columns as PostgreSQL does (a function's name, a column's, else
    ?column?): the rewrite renames functions, and DuckDB (or Spark: `count(1)`) would name the
    column after that."""
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.this
    if not isinstance(select, exp.Select):
        return
    for i, e in enumerate(list(select.expressions)):
        if isinstance(e, exp.Alias | exp.Column | exp.Star):
            continue
        select.expressions[i] = exp.alias_(e, _column_name(e), quoted=True)


def _column_name(e: exp.Expr) -> str:
    """PostgreSQL's name for a result column written without an alias (its FigureColname)."""
    if isinstance(e, exp.Alias):
        return e.alias
    inner = e
    while isinstance(inner, exp.Cast | exp.Paren | exp.Dot) and not (
        isinstance(inner, exp.Dot) and isinstance(inner.expression, exp.Func)
    ):
        inner = inner.this
    if isinstance(inner, exp.Dot):
        inner = inner.expression
    if isinstance(inner, exp.Column):
        name = inner.name
    elif isinstance(inner, exp.Anonymous):
        name = str(inner.this).lower()
    elif isinstance(inner, exp.Case):
        name = "case"
    elif isinstance(inner, exp.Exists):
        name = "exists"
    elif isinstance(inner, exp.Subquery) and isinstance(inner.this, exp.Select) and inner.this.expressions:
        name = _column_name(inner.this.expressions[0])  # (SELECT max(x) ...) is "max"
    elif isinstance(inner, exp.Func):
        name = _function_name(inner)
    else:
        name = "?column?"
    if isinstance(e, exp.Cast) and name == "?column?" and isinstance(e.to, exp.DataType | exp.ObjectIdentifier):
        kind = _type_name(e.to).split("(", 1)[0].strip()
        name = _CAST_COLUMN_NAMES.get(kind, kind)
    return name


# `'1'::integer` is named int4 by PostgreSQL: its parser's name for the type, not the spelling.
_CAST_COLUMN_NAMES = {
    "int": "int4", "integer": "int4", "bigint": "int8", "smallint": "int2", "boolean": "bool",
    "double precision": "float8", "real": "float4", "decimal": "numeric", "character varying": "varchar",
    "timestamp with time zone": "timestamptz", "timestamp without time zone": "timestamp", "char": "bpchar",
    "character": "bpchar", "time without time zone": "time",
}  # fmt: skip


def _function_name(fn: exp.Func) -> str:
    """The name PostgreSQL gives a function's column: as PostgreSQL spells the call (sqlglot's
    node names differ: DATE_TRUNC is TimestampTrunc); an operator sqlglot reads as a function
    (`~`) names nothing."""
    text = fn.sql(dialect="postgres")
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)(\(|$)", text)
    return m.group(1).lower() if m else "?column?"


def _call(name: str, args: list[exp.Expr]) -> exp.Expr:
    return exp.Anonymous(this=f"shoal_{name}", expressions=args)


def _unquote(s: str) -> str:
    s = s.strip()
    return s[1:-1].replace('""', '"') if s.startswith('"') and s.endswith('"') else s.lower()


def _split_name(text: str) -> list[str]:
    """`a.b`, `"A"."b.c"`: the parts of a qualified name, as PostgreSQL reads an identifier."""
    parts, cur, quoted, i = [], "", False, 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            if quoted and text[i + 1 : i + 2] == '"':
                cur += '"'
                i += 1
            else:
                quoted = not quoted
        elif ch == "." and not quoted:
            parts.append(cur)
            cur = ""
        else:
            cur += ch if quoted else ch.lower()
        i += 1
    parts.append(cur)
    return [p.strip() for p in parts]


def _regtype_in(text: str) -> int:
    name = text.strip().lower().removeprefix("pg_catalog.")
    t = TYPES_BY_NAME.get(name) or TYPES_BY_NAME.get(name.split("(")[0].strip())
    if t is None:
        raise ValueError(f'type "{text}" does not exist')
    return t.oid


def _array_literal(text: str) -> exp.Expr:
    """PostgreSQL's array text ('{a,"b c",1}') as an array of string literals."""
    items, cur, quoted, i, body = [], "", False, 0, text.strip()[1:-1]
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            cur += body[i + 1]
            i += 1
        elif ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            items.append(cur.strip())
            cur = ""
        else:
            cur += ch
        i += 1
    if body.strip():
        items.append(cur.strip())
    return exp.Array(expressions=[exp.Literal.string(x) for x in items])


def _quiet(fn: Callable[[str], int | None]) -> Callable[[str | None], int | None]:
    def call(text: str | None) -> int | None:
        try:
            return None if text is None else fn(text)
        except ValueError:
            return None

    return call


def _regproc_in(text: str) -> str:
    return text.strip().removeprefix("pg_catalog.").split("(")[0]


def _type_row(t: PgType) -> dict[str, Any]:
    return {
        "oid": t.oid, "typname": t.name, "typnamespace": PG_CATALOG_NS, "typowner": OWNER_OID,
        "typlen": t.length, "typbyval": t.length in (1, 2, 4, 8), "typtype": "p" if t.category == "P" else "b",
        "typcategory": t.category, "typispreferred": t.oid in (TEXT, FLOAT8, BOOL, TIMESTAMPTZ, OID),
        "typisdefined": True, "typdelim": ",", "typrelid": 0, "typsubscript": "array_subscript_handler"
        if t.element else "-", "typelem": t.element, "typarray": t.array, "typinput": t.input,
        "typoutput": "array_out" if t.element else f"{_io_prefix(t.name)}out", "typreceive": "array_recv"
        if t.element else _binary_io(t.name, "recv"), "typsend": "array_send" if t.element
        else _binary_io(t.name, "send"), "typmodin": "-",
        "typmodout": "-", "typanalyze": "-", "typalign": "i", "typstorage": "p" if t.length > 0 else "x",
        "typnotnull": False, "typbasetype": 0, "typtypmod": -1, "typndims": 0,
        "typcollation": 100 if t.category == "S" else 0,
    }  # fmt: skip


def _binary_io(name: str, kind: str) -> str:
    return "-" if name == "any" else f"{_io_prefix(name)}{kind}"  # "any" has no binary I/O in PostgreSQL


def _class_row(oid: int, name: str, nsoid: int, kind: str, natts: int) -> dict[str, Any]:
    return {
        "oid": oid, "relname": name, "relnamespace": nsoid, "reltype": 0, "reloftype": 0, "relowner": OWNER_OID,
        "relam": 2 if kind == "r" else 0, "relfilenode": oid, "reltablespace": 0, "relpages": 0,
        "reltuples": -1.0, "relallvisible": 0, "reltoastrelid": 0, "relhasindex": False, "relisshared": False,
        "relpersistence": "p", "relkind": kind, "relnatts": natts, "relchecks": 0, "relhasrules": False,
        "relhastriggers": False, "relhassubclass": False, "relrowsecurity": False, "relforcerowsecurity": False,
        "relispopulated": True, "relreplident": "d", "relispartition": False, "relrewrite": 0,
        "relfrozenxid": 0, "relminmxid": 0,
    }  # fmt: skip


def _info_column(t: CatalogTable, c: CatalogColumn, position: int) -> dict[str, Any]:
    typ = TYPES_BY_OID[c.type_oid]
    precision = scale = None
    if c.type_oid == NUMERIC and c.typmod >= 4:
        precision, scale = (c.typmod - 4) >> 16, (c.typmod - 4) & 0xFFFF
    elif c.type_oid in (INT2, INT4, INT8):
        precision, scale = {INT2: 16, INT4: 32, INT8: 64}[c.type_oid], 0
    elif c.type_oid in (FLOAT4, FLOAT8):
        precision = 24 if c.type_oid == FLOAT4 else 53
    return {
        "table_catalog": DATABASE, "table_schema": t.schema, "table_name": t.name, "column_name": c.name,
        "ordinal_position": position, "is_nullable": "YES" if c.nullable else "NO",
        "data_type": typ.display, "numeric_precision": precision, "numeric_scale": scale,
        "numeric_precision_radix": (10 if c.type_oid == NUMERIC else 2) if precision is not None else None,
        "udt_catalog": DATABASE, "udt_schema": "pg_catalog", "udt_name": typ.name, "dtd_identifier": str(position),
        "is_self_referencing": "NO", "is_identity": "NO", "is_generated": "NEVER", "is_updatable": "NO",
    }  # fmt: skip


# DuckDB result types -> PostgreSQL type OIDs (the RowDescription clients decode by).
_DUCK_TYPES = {
    "BOOLEAN": BOOL, "TINYINT": INT2, "SMALLINT": INT2, "INTEGER": INT4, "BIGINT": INT8, "HUGEINT": NUMERIC,
    "UTINYINT": INT2, "USMALLINT": INT4, "UINTEGER": INT8, "UBIGINT": NUMERIC, "FLOAT": FLOAT4,
    "DOUBLE": FLOAT8, "VARCHAR": TEXT, "DATE": DATE, "TIMESTAMP": TIMESTAMP,
    "TIMESTAMP WITH TIME ZONE": TIMESTAMPTZ, "BLOB": BYTEA,
}  # fmt: skip
_ARRAYS = {BOOL: 1000, INT2: 1005, INT4: 1007, INT8: 1016, TEXT: 1009, FLOAT4: 1021, FLOAT8: 1022}


def _oid_of(duck_type: str) -> int:
    t = duck_type.upper()
    if t.endswith("[]"):
        return _ARRAYS.get(_oid_of(t[:-2]), 1009)
    if t.startswith("DECIMAL"):
        return NUMERIC
    return _DUCK_TYPES.get(t, TEXT)


def _pg_value(v: Any) -> Any:
    """Lists in PostgreSQL's array text ({a,b}); everything else as the wire writes it."""
    if isinstance(v, list):
        items = []
        for x in v:
            if x is None:
                items.append("NULL")
            elif isinstance(x, bool):
                items.append("t" if x else "f")
            elif isinstance(x, int | float):
                items.append(str(x))
            else:
                s = str(x)
                plain = s and not any(ch in s for ch in ' ,{}"\\') and s.upper() != "NULL"
                items.append(s if plain else '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"')
        return "{" + ",".join(items) + "}"
    if isinstance(v, dict):
        return "(" + ",".join("" if x is None else str(x) for x in v.values()) + ")"
    return v
