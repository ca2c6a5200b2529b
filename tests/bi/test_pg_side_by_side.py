"""Side by side: the same psycopg calls against a real PostgreSQL 15 holding the same rows and
against Shoal's endpoint, as a principal granted the whole table (so no governance difference
applies). Result shape (column names, type OIDs, numeric precision and scale), values and COPY's
output must match, but for the differences docs/bi.md lists as intended (issue 42; this covers
psycopg, other clients are left to extend it)."""

from __future__ import annotations

import decimal
import os
import shutil
import subprocess
import uuid

import psycopg
import pytest

from shoal.governance import Governance, Principals
from tests.bi.conftest import ROWS

PASSWORD = "side-by-side-Passw0rd"

# (query, parameters): PostgreSQL SQL as clients send it.
CASES: list[tuple[str, tuple]] = [
    ("SELECT count(*), max(id), min(region), sum(revenue) FROM {t}", ()),
    ("SELECT id, region, revenue, email FROM {t} ORDER BY id", ()),
    ("SELECT id::bigint, revenue::numeric(12,2) AS r, region || '-x' AS tagged FROM {t} ORDER BY id", ()),
    ("SELECT region, count(*) FROM {t} GROUP BY region ORDER BY region", ()),
    # In the zone given: 23:30 UTC is the next day in Tokyo (the zone was dropped before).
    ("SELECT date_trunc('day', TIMESTAMPTZ '2024-05-06 23:30:00+00', 'Asia/Tokyo') AS d", ()),
    ("SELECT id FROM {t} WHERE region = %s ORDER BY id", ("EU",)),
    ("SELECT count(*) AS n FROM {t} WHERE email LIKE %s OR id = %s", ("%eu%", 2)),
    ("SELECT $$label $1$$ AS v, %s AS w", ("x $$ UNION ALL SELECT 999 --",)),
    ("SELECT DATE '2024-02-29' AS d, 1.5::float8 AS f, true AS b, 10::float8 AS whole", ()),
    # (-x)::numeric(p,s): PostgreSQL reports precision and scale of casts and columns only, Shoal of
    # every decimal (an intended difference, docs/bi.md), so the minus goes inside the cast.
    ("SELECT id, CASE WHEN revenue > 15 THEN 'hi' ELSE 'lo' END FROM {t} ORDER BY id", ()),
    ("SELECT coalesce(email, 'none'), lower(region), length(email) FROM {t} ORDER BY id", ()),
    ("SELECT id FROM {t} ORDER BY id DESC LIMIT 1 OFFSET 1", ()),
    ("SELECT DISTINCT region FROM {t} ORDER BY region", ()),
    ("SELECT 1 + 1, 'a' || 'b', NULL::text AS z, id::text FROM {t} ORDER BY id", ()),
    ("SELECT count(DISTINCT region), sum(id) FROM {t}", ()),
    ("SELECT string_agg(region, ',' ORDER BY id DESC), string_agg(email, '|' ORDER BY revenue) FROM {t}", ()),
    ("SELECT upper(%s) AS u, %s::int + 1 AS n", ("abc", "41")),
    ("SELECT 12.5::numeric(6,2) AS n, (-0.001)::numeric(10,4) AS m", ()),
]
COPIES = [
    "COPY (SELECT id, region, revenue FROM {t} ORDER BY id) TO STDOUT (FORMAT csv, HEADER)",
    "COPY (SELECT id, email, notes FROM {t} ORDER BY id) TO STDOUT",
]


@pytest.fixture(scope="module")
def pair(spark, settings, server, lake, tmp_path_factory):
    """(PostgreSQL connection, Shoal connection), both in the PostgreSQL dialect, the same table."""
    try:
        from tests.support.servers import postgres
    except ImportError as exc:  # pragma: no cover - the support module always exists here
        pytest.skip(str(exc))
    user = f"side_{uuid.uuid4().hex[:6]}"
    Principals(settings).add(user, password=PASSWORD)
    Governance(settings).grant(Principals(settings).principal("admin"), "SELECT", "TABLE", lake.opps, user)
    schema, table = lake.opps.split(".")
    try:
        pg_server = postgres(tmp_path_factory.mktemp("pg"))
        pg_info = pg_server.__enter__()
    except FileNotFoundError as exc:
        pytest.skip(f"PostgreSQL is not installed: {exc}")
    try:
        real = psycopg.connect(host="127.0.0.1", port=pg_info.port, user=pg_info.user, password=pg_info.password,
                               dbname=pg_info.database, autocommit=True)  # fmt: skip
        real.execute(f"CREATE SCHEMA {schema}")
        real.execute(f"CREATE TABLE {schema}.{table} (id integer, region text, revenue double precision,"
                     " email text, notes text)")  # fmt: skip
        with real.cursor() as cur:
            cur.executemany(f"INSERT INTO {schema}.{table} VALUES (%s, %s, %s, %s, %s)", ROWS)
        host, port = server.address
        shoal = psycopg.connect(host=host, port=port, user=user, password=PASSWORD, dbname="lake", autocommit=True,
                                sslmode="require")  # fmt: skip
        yield real, shoal
        real.close()
        shoal.close()
    finally:
        pg_server.__exit__(None, None, None)


def _answer(conn: psycopg.Connection, query: str, params: tuple) -> tuple[list, list]:
    cur = conn.execute(query, params or None)
    shape = [(d.name, d.type_code, d.precision, d.scale) for d in cur.description]
    return shape, cur.fetchall()


@pytest.mark.parametrize(("query", "params"), CASES)
def test_psycopg_results_match_postgresql(pair, lake, query, params):
    real, shoal = pair
    sql = query.format(t=lake.opps)
    expected, got = _answer(real, sql, params), _answer(shoal, sql, params)
    assert got[0] == expected[0], "result shape (names, type OIDs, precision, scale)"
    assert got[1] == expected[1], "values"
    assert all(type(a) is type(b) for r, s in zip(got[1], expected[1], strict=True) for a, b in zip(r, s, strict=True))


@pytest.mark.parametrize("copy", COPIES)
def test_copy_output_matches_postgresql(pair, lake, copy):
    real, shoal = pair
    outputs = []
    for conn in (real, shoal):
        with conn.cursor() as cur, cur.copy(copy.format(t=lake.opps)) as out:
            outputs.append(b"".join(bytes(b) for b in out))
    assert outputs[1] == outputs[0]


def test_binary_numeric_matches_postgresql(pair, lake):
    real, shoal = pair
    sql = f"SELECT revenue::numeric(12,2) AS r, -0.5::numeric(3,1) AS n FROM {lake.opps} ORDER BY id"
    got = [c.cursor(binary=True).execute(sql).fetchall() for c in (real, shoal)]
    assert got[1] == got[0] and isinstance(got[0][0][0], decimal.Decimal)


def test_sqlalchemy_inspect_matches_postgresql(pair, lake):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    real, shoal = pair
    schema, table = lake.opps.split(".")
    answers = []
    for conn in (real, shoal):
        info = conn.info
        url = sqlalchemy.URL.create(
            "postgresql+psycopg", username=info.user, password=info.password, host=info.host, port=info.port,
            database=info.dbname, query={"sslmode": "require" if conn is shoal else "disable"},
        )  # fmt: skip
        engine = sqlalchemy.create_engine(url)
        try:
            insp = sqlalchemy.inspect(engine)
            columns = [
                (c["name"], str(c["type"]), c["nullable"], c["default"]) for c in insp.get_columns(table, schema)
            ]
            answers.append(
                (
                    insp.get_table_names(schema=schema),
                    insp.get_view_names(schema=schema),
                    columns,
                    insp.get_pk_constraint(table, schema)["constrained_columns"],
                    insp.get_foreign_keys(table, schema),
                    insp.get_indexes(table, schema),
                    insp.has_table(table, schema=schema),
                )
            )
        finally:
            engine.dispose()
    assert answers[1] == answers[0]


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql (postgresql-client) is not installed")
@pytest.mark.parametrize("command", ["\\d {t}", "\\dt {schema}.*", "\\dn {schema}"])
def test_psql_describes_as_postgresql(pair, lake, command):
    real, shoal = pair
    schema = lake.opps.split(".")[0]
    outputs = []
    for conn in (real, shoal):
        info = conn.info
        dsn = f"host={info.host} port={info.port} user={info.user} dbname={info.dbname} sslmode=prefer"
        env = {**os.environ, "PGPASSWORD": info.password, "PGCONNECT_TIMEOUT": "20"}
        done = subprocess.run(["psql", "-X", "-A", dsn, "-c", command.format(t=lake.opps, schema=schema)],
                              env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert outputs[1] == outputs[0]


JAR = "/usr/share/java/postgresql.jar"


@pytest.mark.skipif(shutil.which("java") is None or not os.path.exists(JAR), reason="needs java and Debian's pgjdbc")
def test_pgjdbc_metadata_matches_postgresql(pair, lake):
    real, shoal = pair
    schema, table = lake.opps.split(".")
    program = os.path.join(os.path.dirname(__file__), "PgMeta.java")
    compared = ("table|", "column|", "pk|", "fk|", "row|")  # the schema list and type count differ by design
    outputs = []
    for conn in (real, shoal):
        info = conn.info
        url = f"jdbc:postgresql://{info.host}:{info.port}/{info.dbname}?sslmode={'require' if conn is shoal else 'disable'}"
        query = f"SELECT id, region, revenue FROM {lake.opps} ORDER BY id"
        done = subprocess.run(["java", "-cp", JAR, program, url, info.user, info.password, schema, table, query],
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        outputs.append([line for line in done.stdout.splitlines() if line.startswith(compared)])
    assert [line for line in outputs[0] if line.startswith(("table|", "row|"))] == [
        f"table|{schema}|{table}|TABLE",
        "row|1|EU|10",
        "row|2|US|20",
        "row|3|EU|30",
    ]  # not an empty comparison
    assert outputs[1] == outputs[0]


@pytest.mark.parametrize("use_copy", ["true", "false"])
def test_adbc_reads_match_postgresql(pair, lake, use_copy):
    dbapi = pytest.importorskip("adbc_driver_postgresql.dbapi")
    real, shoal = pair
    query = (
        f"SELECT id, region, revenue, revenue::numeric(12,2) AS r, DATE '2024-02-29' AS d, id::bigint AS big"
        f" FROM {lake.opps} ORDER BY id"
    )
    tables = []
    for conn in (real, shoal):
        info = conn.info
        mode = "require" if conn is shoal else "disable"
        uri = f"postgresql://{info.user}:{info.password}@{info.host}:{info.port}/{info.dbname}?sslmode={mode}"
        with dbapi.connect(uri) as adbc, adbc.cursor() as cur:
            cur.adbc_statement.set_options(**{"adbc.postgresql.use_copy": use_copy})
            cur.execute(query)
            tables.append(cur.fetch_arrow_table())
    assert tables[1].schema.types == tables[0].schema.types  # names: ADBC takes them from the result
    assert tables[1].column_names == tables[0].column_names
    assert tables[1].to_pylist() == tables[0].to_pylist()
