"""BI clients' catalogs and PostgreSQL SQL through the governed endpoint, with the real clients.

psql, SQLAlchemy (inspect, pandas.read_sql), pgjdbc's DatabaseMetaData (a single-file Java
program) and the ADBC PostgreSQL driver run against one PgServer on an ephemeral port, over
TLS with SCRAM-SHA-256 sign-in (an API token as the secret, never sent). A
restricted principal must see exactly its granted schemas, tables and columns, never the
others, and read governed rows (row filter, masked column).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import psycopg
import pytest

from shoal.bi import pg as pgwire
from shoal.governance import Governance, Principals
from shoal.governance.masks import mask_hash

PASSWORD = "catalog-Passw0rd"
HIDDEN = ("ssn", "secret_", "ops_")  # an ungranted column, table and database: never listed
JAR = Path("/usr/share/java/postgresql.jar")


class Lake:
    def __init__(self, spark, settings) -> None:
        u = uuid.uuid4().hex[:6]
        self.hr, self.ops = f"hr_{u}", f"ops_{u}"
        self.secret = f"secret_{u}"
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self.hr}")
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self.ops}")
        spark.sql(
            f"CREATE TABLE {self.hr}.salaries (id int, name string, region string, amount decimal(10,2),"
            " email string, ssn string) USING iceberg"
        )
        spark.sql(
            f"INSERT INTO {self.hr}.salaries VALUES (1, 'Ann', 'EU', 10.50, 'ann@eu.example', 'SSN-1'),"
            " (2, 'Bob', 'US', 20.00, 'bob@us.example', 'SSN-2'), (3, 'Cy', 'EU', 30.25, 'cy@eu.example', 'SSN-3')"
        )
        spark.sql(f"CREATE TABLE {self.hr}.{self.secret} (id int) USING iceberg")
        spark.sql(f"CREATE TABLE {self.ops}.jobs (id int) USING iceberg")
        self.user = f"bi_{u}"
        Principals(settings).add(self.user, password=PASSWORD)
        # The secret every client below signs in with: SCRAM-SHA-256 inside TLS checks it.
        _, self.token = Principals(settings).create_token(self.user, description="bi catalog")
        admin = Principals(settings).principal("admin")
        Governance(settings).grant(
            admin,
            "SELECT",
            "TABLE",
            f"{self.hr}.salaries",
            self.user,
            columns=["id", "name", "region", "amount", "email"],
            row_filter="region = 'EU'",
            masks={"email": "hash"},
            table_columns=["id", "name", "region", "amount", "email", "ssn"],
        )
        self.columns = ["id", "name", "region", "amount", "email"]


@pytest.fixture(scope="module")
def lake(spark, settings):
    return Lake(spark, settings)


@pytest.fixture(scope="module")
def server(spark, settings):
    # TLS (clients use sslmode=require) and SCRAM for every sign-in: no secret crosses the wire.
    scram = settings.model_copy(update={"server": settings.server.model_copy(update={"pg_auth": "scram-sha-256"})})
    srv = pgwire.PgServer(scram, spark=spark, host="127.0.0.1", port=0).start()
    yield srv
    srv.stop()


def _no_hidden(text: str, lake: Lake) -> None:
    for word in ("ssn", lake.secret, lake.ops, "SSN-"):
        assert word not in text, word


def test_psql_lists_and_describes_only_what_is_granted(server, lake, settings):
    if shutil.which("psql") is None:
        pytest.skip("psql (postgresql-client) is not installed")
    host, port = server.address
    env = {**os.environ, "PGPASSWORD": lake.token, "PGCONNECT_TIMEOUT": "20"}
    dsn = f"host={host} port={port} user={lake.user} dbname=lake sslmode=require"

    def psql(*commands: str) -> str:
        args = ["psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", dsn]
        for c in commands:
            args += ["-c", c]
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        _no_hidden(done.stdout + done.stderr, lake)
        return done.stdout

    schemas = psql("\\dn")
    assert f"{lake.hr}|shoal" in schemas.split() and "public|shoal" in schemas.split()
    assert psql(f"\\dt {lake.hr}.*").split() == [f"{lake.hr}|salaries|table|shoal"]
    described = psql(f"\\d {lake.hr}.salaries")
    assert [line.split("|")[:2] for line in described.split("\n") if line.count("|") >= 4] == [
        ["id", "integer"],
        ["name", "text"],
        ["region", "text"],
        ["amount", "numeric(10,2)"],
        ["email", "text"],  # masked: read as text
    ]
    assert "lake|" in psql("\\l")
    rows = psql(f'SELECT "id", amount::text, email FROM "{lake.hr}"."salaries" WHERE name ILIKE \'%n%\' ORDER BY 1')
    assert rows.split() == [f"1|10.50|{mask_hash(settings, 'ann@eu.example')}"]


def test_sqlalchemy_inspect_and_pandas(server, lake, settings):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    pd = pytest.importorskip("pandas")
    host, port = server.address
    engine = sqlalchemy.create_engine(
        f"postgresql+psycopg://{lake.user}:{lake.token}@{host}:{port}/lake?sslmode=require"
    )
    try:
        insp = sqlalchemy.inspect(engine)
        schemas = insp.get_schema_names()
        assert lake.hr in schemas and lake.ops not in schemas and "shoal" not in schemas
        assert insp.get_table_names(schema=lake.hr) == ["salaries"]
        assert insp.get_view_names(schema=lake.hr) == []
        columns = insp.get_columns("salaries", schema=lake.hr)
        assert [c["name"] for c in columns] == lake.columns
        types = {c["name"]: str(c["type"]) for c in columns}
        assert types["id"] == "INTEGER" and types["amount"] == "NUMERIC(10, 2)" and types["email"] == "TEXT"
        assert insp.get_pk_constraint("salaries", schema=lake.hr)["constrained_columns"] == []
        assert insp.get_foreign_keys("salaries", schema=lake.hr) == []
        assert insp.get_indexes("salaries", schema=lake.hr) == []
        assert insp.has_table("salaries", schema=lake.hr)
        assert not insp.has_table(lake.secret, schema=lake.hr)
        assert not insp.has_schema(lake.ops)
        frame = pd.read_sql(f"SELECT * FROM {lake.hr}.salaries ORDER BY id", engine)
        assert list(frame.columns) == lake.columns
        assert frame["id"].tolist() == [1, 3]
        assert frame["email"].tolist() == [mask_hash(settings, "ann@eu.example"), mask_hash(settings, "cy@eu.example")]
        # SQLAlchemy Core writes PostgreSQL: quoted identifiers, LIMIT/OFFSET, bound parameters.
        table = sqlalchemy.Table("salaries", sqlalchemy.MetaData(), schema=lake.hr, autoload_with=engine)
        query = sqlalchemy.select(table.c.id, table.c.name).where(table.c.amount > 1).order_by(table.c.id)
        with engine.connect() as conn:
            assert conn.execute(query.limit(1).offset(1)).all() == [(3, "Cy")]
        _no_hidden(repr((schemas, columns, frame.to_dict())), lake)
    finally:
        engine.dispose()


@pytest.mark.skipif(shutil.which("java") is None or not JAR.exists(), reason="needs java and Debian's pgjdbc")
def test_pgjdbc_database_metadata(server, lake, settings):
    host, port = server.address
    program = Path(__file__).with_name("PgMeta.java")
    done = subprocess.run(
        [
            "java",
            "-cp",
            str(JAR),
            str(program),
            f"jdbc:postgresql://{host}:{port}/lake?sslmode=require",
            lake.user,
            lake.token,
            lake.hr,
            "salaries",
            f"SELECT id, email FROM {lake.hr}.salaries ORDER BY id",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.split("\n")
    _no_hidden(done.stdout, lake)
    schemas = [line.split("|")[1] for line in lines if line.startswith("schema|")]
    assert lake.hr in schemas and lake.ops not in schemas
    assert [line for line in lines if line.startswith("table|")] == [f"table|{lake.hr}|salaries|TABLE"]
    columns = [line.split("|") for line in lines if line.startswith("column|")]
    assert [(c[2], c[3], c[5]) for c in columns] == [
        ("id", "4", "1"),
        ("name", "12", "2"),
        ("region", "12", "3"),
        ("amount", "2", "4"),
        ("email", "12", "5"),
    ]
    assert not [line for line in lines if line.startswith("pk|")]
    assert [line for line in lines if line.startswith("fk|")] == ["fk|done"]  # answered, and empty
    assert int(next(line for line in lines if line.startswith("typeinfo|")).split("|")[1]) > 10
    type_names = {line.split("|")[1] for line in lines if line.startswith("type|")}
    returned = {"bool", "int2", "int4", "int8", "float4", "float8", "numeric", "text", "date", "timestamp",
                "timestamptz", "bytea"}  # fmt: skip
    assert returned <= type_names, returned - type_names  # getTypeInfo covers every type Shoal returns
    assert [line for line in lines if line.startswith("row|")] == [
        f"row|1|{mask_hash(settings, 'ann@eu.example')}",
        f"row|3|{mask_hash(settings, 'cy@eu.example')}",
    ]


def test_adbc_driver(server, lake, settings):
    dbapi = pytest.importorskip("adbc_driver_postgresql.dbapi")
    host, port = server.address
    uri = f"postgresql://{lake.user}:{lake.token}@{host}:{port}/lake?sslmode=require"
    with dbapi.connect(uri) as conn:
        objects = conn.adbc_get_objects(depth="columns").read_all().to_pylist()
        schemas = {s["db_schema_name"]: s for c in objects for s in c["catalog_db_schemas"] or []}
        assert lake.ops not in schemas
        tables = {t["table_name"]: t for t in schemas[lake.hr]["db_schema_tables"] or []}
        assert list(tables) == ["salaries"]
        columns = sorted(tables["salaries"]["table_columns"], key=lambda c: c["ordinal_position"])
        assert [c["column_name"] for c in columns] == lake.columns  # its query has no ORDER BY
        query = f"SELECT id, email FROM {lake.hr}.salaries ORDER BY id"
        with conn.cursor() as cur:
            cur.execute(query)  # ADBC reads with COPY (query) TO STDOUT (FORMAT binary) by default
            by_copy = cur.fetchall()
        with conn.cursor() as cur:
            cur.adbc_statement.set_options(**{"adbc.postgresql.use_copy": "false"})
            cur.execute(query)
            rows = cur.fetchall()
    assert rows == by_copy == [(1, mask_hash(settings, "ann@eu.example")), (3, mask_hash(settings, "cy@eu.example"))]


def test_session_commands_and_dialects(server, lake, spark):
    host, port = server.address
    kw = {"host": host, "port": port, "user": lake.user, "password": lake.token, "dbname": "lake", "sslmode": "require"}
    with psycopg.connect(autocommit=True, **kw) as conn:
        assert conn.execute("SHOW transaction isolation level").fetchone() == ("read committed",)
        assert conn.execute("SHOW standard_conforming_strings").fetchone() == ("on",)
        assert conn.info.parameter_status("standard_conforming_strings") == "on"
        assert conn.execute("SELECT %s AS v", ("back\\slash 'q'",)).fetchone() == ("back\\slash 'q'",)
        conn.execute("SET SESSION application_name = 'dash'")
        assert conn.execute("SHOW application_name").fetchone() == ("dash",)
        assert conn.execute("SELECT current_setting('application_name')").fetchone() == ("dash",)
        conn.execute("SET search_path TO " + lake.hr + ", public")
        assert conn.execute("SELECT current_schema()").fetchone() == (lake.hr,)
        assert conn.execute("SELECT pg_catalog.version()").fetchone()[0].startswith("PostgreSQL 15")
        with pytest.raises(psycopg.errors.UndefinedObject, match="unrecognized configuration parameter"):
            conn.execute("SET no_such_setting = 1")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="UTC"):
            conn.execute("SET TIME ZONE 'Europe/Paris'")
        before = spark.conf.get("spark.sql.ansi.enabled")
        conn.execute("SET spark.sql.ansi.enabled = true")  # a placeholder setting: never reaches Spark
        assert spark.conf.get("spark.sql.ansi.enabled") == before
        # Transactions: read-only work, with PostgreSQL's transaction status in ReadyForQuery.
        conn.execute("START TRANSACTION READ ONLY")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.execute("COMMIT")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        conn.execute("DISCARD ALL")
        assert conn.execute("SHOW application_name").fetchone() == ("",)
        # PostgreSQL in: translated to Spark, then governed like any statement.
        assert conn.execute(
            f"SELECT id, date_trunc('month', DATE '2024-05-17')::date AS m FROM \"{lake.hr}\".salaries"
            " ORDER BY id LIMIT 1 OFFSET 1"
        ).fetchall() == [(3, __import__("datetime").date(2024, 5, 1))]
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="ssn"):
            conn.execute(f'SELECT "ssn" FROM {lake.hr}.salaries')
        with pytest.raises(psycopg.errors.SyntaxError, match="as PostgreSQL") as err:
            conn.execute(f"SELECT `id` FROM {lake.hr}.salaries")
        assert "shoal.dialect=spark" in (err.value.diag.message_hint or "")
        # Catalog queries see only what is granted.
        names = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema NOT IN"
            " ('pg_catalog', 'information_schema')"
        ).fetchall()
        assert names == [(lake.hr, "salaries")]
        cols = conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 ORDER BY attnum",
            (f"{lake.hr}.salaries",),
        ).fetchall()
        assert [c[0] for c in cols] == lake.columns
        # An ungranted table does not exist as far as the catalog knows.
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT %s::regclass", (f"{lake.hr}.{lake.secret}",))
        # The catalog database reads no files, and catalog and lake tables are not joined.
        with pytest.raises(psycopg.Error, match="read_text is not available"):
            conn.execute("SELECT current_schema(), * FROM read_text('/etc/passwd')")
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="separate statements|separately"):
            conn.execute(f"SELECT relname, id FROM pg_class, {lake.hr}.salaries")
    spark_kw = {**kw, "options": "-c shoal.dialect=spark"}
    with psycopg.connect(autocommit=True, **spark_kw) as conn:
        assert conn.execute("SHOW shoal.dialect").fetchone() == ("spark",)
        assert conn.info.parameter_status("standard_conforming_strings") == "off"
        assert conn.execute(f"SELECT `id` FROM {lake.hr}.salaries ORDER BY id").fetchall() == [(1,), (3,)]


def test_privilege_functions_answer_from_the_grants(server, lake):
    """BI tools grey out what has_*_privilege says is not granted: it must say so (issue 42)."""
    host, port = server.address
    kw = {"host": host, "port": port, "user": lake.user, "password": lake.token, "dbname": "lake", "sslmode": "require"}
    salaries, secret = f"{lake.hr}.salaries", f"{lake.hr}.{lake.secret}"
    with psycopg.connect(autocommit=True, **kw) as conn:
        row = conn.execute(
            "SELECT has_table_privilege(%s, 'SELECT'), has_table_privilege(%s, 'SELECT'),"
            " has_table_privilege(%s, 'SELECT'), has_table_privilege(%s, 'INSERT'),"
            " has_column_privilege(%s, 'email', 'SELECT'), has_column_privilege(%s, 'ssn', 'SELECT'),"
            " has_schema_privilege(%s, 'USAGE'), has_schema_privilege(%s, 'USAGE')",
            (salaries, secret, f"{lake.ops}.jobs", salaries, salaries, salaries, lake.hr, lake.ops),
        ).fetchone()
    assert row == (True, False, False, False, True, False, True, False)
