"""Interactive SQL under load: Shoal's PostgreSQL endpoint beside a real PostgreSQL, in one run.

Both hold the same generated rows (`bench.items`: id, region, amount, note). Shoal's side is
read by a restricted analyst whose grant carries a row filter (`region IN ('eu', 'us')`); the
PostgreSQL side runs the same queries with the same filter written in, on a primary-key index.
Every client is a psycopg connection with bound parameters, as an application would use.

Phases, each for --seconds on both servers:
  point      point lookups by key only, with 1 and 16 clients
  mixed      80% point lookups, 10% a GROUP BY, 10% a 10k-row range scan, with 4 and 32 clients
then the time to pull the analyst's whole result (about 2/3 of --rows) and a LIMIT 10 through psql.

    python benchmarks/pg_load.py [--rows 100000] [--seconds 15] [--point-lookup both] [--json]

--point-lookup both (the default) measures Shoal twice, with `[sql] point_lookup` on and off.

Issue 43's targets: point lookup p50 <= 50 ms with one client, >= 40 point lookups/s at 16
clients, point-lookup p99 <= 1 s under the mixed load at 32 clients, the whole result within 3x
PostgreSQL's time. Run on a quiet machine: the figures are wall-clock and share two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the loopback PostgreSQL helper the tests use (tests.support.servers)

REGIONS = ("eu", "us", "apac")
FILTER = "region IN ('eu', 'us')"
QUERIES = {
    "point": "SELECT id, region, amount, note FROM {t} WHERE id = %s AND {f}",
    "group": "SELECT region, count(*) AS n, sum(amount) AS total FROM {t} WHERE {f} GROUP BY region",
    "scan": "SELECT id, amount FROM {t} WHERE id >= %s AND id < %s AND {f}",
}
SCAN_ROWS = 10_000


def shoal(args: list[str], env: dict[str, str], timeout: float = 900) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "shoal.cli.console", *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise SystemExit(f"shoal {' '.join(args[:2])} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def load_shoal(env: dict[str, str], rows: int) -> str:
    """The table and the analyst (row filter), through the CLI; returns the analyst's token."""
    ctas = (
        "CREATE DATABASE IF NOT EXISTS bench; CREATE TABLE bench.items AS SELECT id, "
        "element_at(array('eu', 'us', 'apac'), CAST(id % 3 AS INT) + 1) AS region, "
        f"CAST(id % 1000 AS DOUBLE) / 10 AS amount, concat('item ', CAST(id AS STRING)) AS note FROM range({rows})"
    )
    shoal(["--no-engine", "sql", ctas], env)
    shoal(["principal", "add", "analyst"], env)
    shoal(["grant", "SELECT", "ON", "TABLE", "bench.items", "TO", "analyst", "--row-filter", FILTER], env)
    return str(json.loads(shoal(["token", "create", "analyst", "--json"], env))["token"])


def load_postgres(dsn: dict, rows: int) -> None:
    import psycopg

    with psycopg.connect(**dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, region text, amount double precision, note text)")
        with conn.cursor().copy("COPY items (id, region, amount, note) FROM STDIN") as copy:
            for i in range(rows):
                copy.write_row((i, REGIONS[i % 3], (i % 1000) / 10, f"item {i}"))
        conn.execute("ANALYZE items")


def one_query(cur, kind: str, table: str, rows: int, rng: random.Random) -> None:
    sql = QUERIES[kind].format(t=table, f=FILTER)
    if kind == "point":
        cur.execute(sql, (rng.randrange(rows),))
    elif kind == "scan":
        start = rng.randrange(max(1, rows - SCAN_ROWS))
        cur.execute(sql, (start, start + SCAN_ROWS))
    else:
        cur.execute(sql)
    cur.fetchall()


def drive(connect: Callable[[], object], table: str, rows: int, clients: int, seconds: float, mix: dict) -> dict:
    """`clients` connections asking `mix` (kind -> weight) for `seconds`; latencies per kind."""
    kinds, weights = list(mix), list(mix.values())
    latencies: dict[str, list[float]] = {k: [] for k in kinds}
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client(n: int) -> None:
        rng = random.Random(n)
        try:
            with connect() as conn, conn.cursor() as cur:  # type: ignore[attr-defined]
                while time.monotonic() < deadline:
                    kind = rng.choices(kinds, weights)[0]
                    t0 = time.perf_counter()
                    one_query(cur, kind, table, rows, rng)
                    with lock:
                        latencies[kind].append(time.perf_counter() - t0)
        except Exception as exc:  # noqa: BLE001 - a failed client is reported, the run goes on
            with lock:
                errors.append(f"{type(exc).__name__}: {exc}"[:300])

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 120)
    wall = time.monotonic() - t0
    return {"clients": clients, "seconds": round(wall, 1), "errors": errors, **summary(latencies, wall)}


def summary(latencies: dict[str, list[float]], wall: float) -> dict:
    out: dict = {"queries_per_s": round(sum(len(v) for v in latencies.values()) / wall, 1)}
    for kind, values in latencies.items():
        if values:
            values.sort()
            out[kind] = {
                "n": len(values),
                "per_s": round(len(values) / wall, 1),
                "p50_ms": round(statistics.median(values) * 1000, 1),
                "p99_ms": round(values[min(len(values) - 1, int(len(values) * 0.99))] * 1000, 1),
            }
    return out


def psql_seconds(dsn: str, password: str, sql: str) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(
        ["psql", "-X", "-A", "-t", "-o", os.devnull, dsn, "-c", sql],
        env={**os.environ, "PGPASSWORD": password}, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"psql failed: {done.stderr[-2000:]}")
    return time.perf_counter() - t0


PHASES = (
    ("point", 1, {"point": 1}),
    ("point", 16, {"point": 1}),
    ("mixed", 4, {"point": 8, "group": 1, "scan": 1}),
    ("mixed", 32, {"point": 8, "group": 1, "scan": 1}),
)


def measure(name: str, connect, table: str, psql_dsn: str, password: str, args) -> dict:
    log = (lambda *_: None) if args.json else (lambda m: print(m, file=sys.stderr))
    drive(connect, table, args.rows, 1, 3, {"point": 1, "group": 1})  # warm: plans and connections
    phases = []
    for phase, clients, mix in PHASES:
        log(f"{name}: {phase} with {clients} client(s) for {args.seconds:g} s")
        phases.append({"phase": phase, **drive(connect, table, args.rows, clients, args.seconds, mix)})
    pull = {
        "all_rows_s": round(psql_seconds(psql_dsn, password, f"SELECT * FROM {table} WHERE {FILTER}"), 2),
        "limit_10_s": round(psql_seconds(psql_dsn, password, f"SELECT * FROM {table} WHERE {FILTER} LIMIT 10"), 2),
    }
    return {"server": name, "phases": phases, "psql": pull}


def run(args) -> dict:
    import psycopg

    from tests.support.servers import free_port, postgres, wait_port

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="shoal-pgload-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
        env["SHOAL_WORKSPACE"] = str(Path(tmp) / "ws")
        # One analyst opens up to 32 connections here: raise the per-principal cap as an operator
        # running this load would (the default 16 refuses half of them).
        env["SHOAL_SERVER__PG_MAX_CONNECTIONS_PER_PRINCIPAL"] = "40"
        env["SHOAL_SERVER__PG_MAX_CONNECTIONS"] = "64"
        token = load_shoal(env, args.rows)
        shoal_sides = []
        modes = {"on": ["on"], "off": ["off"], "both": ["on", "off"]}[args.point_lookup]
        for mode in modes:  # `[sql] point_lookup` (issue 43): Spark-free point lookups on or off
            env["SHOAL_SQL__POINT_LOOKUP"] = "true" if mode == "on" else "false"
            pg_port = free_port()
            serve = subprocess.Popen(
                [sys.executable, "-m", "shoal.cli.console", "serve", "--pg-only", "--pg-port", str(pg_port)],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                wait_port(pg_port, 300, serve)
                sdsn = {"host": "127.0.0.1", "port": pg_port, "user": "analyst", "password": token, "dbname": "lake"}
                shoal_sides.append(measure(
                    f"shoal/{mode}", lambda sdsn=sdsn: psycopg.connect(**sdsn, autocommit=True), "bench.items",
                    f"host=127.0.0.1 port={pg_port} user=analyst dbname=lake", token, args,
                ))  # fmt: skip
            finally:
                serve.terminate()
                serve.wait(60)
        (Path(tmp) / "pg").mkdir()
        with postgres(Path(tmp) / "pg") as pg:
            pdsn = {
                "host": "127.0.0.1",
                "port": pg.port,
                "user": pg.user,
                "password": pg.password,
                "dbname": pg.database,
            }
            load_postgres(pdsn, args.rows)
            pg_side = measure(
                "postgresql", lambda: psycopg.connect(**pdsn, autocommit=True), "items",
                f"host=127.0.0.1 port={pg.port} user={pg.user} dbname={pg.database}", pg.password, args,
            )  # fmt: skip
    return {
        "rows": args.rows,
        "seconds_per_phase": args.seconds,
        "load": os.getloadavg(),
        "load_before": load_before,
        "runs": [*shoal_sides, pg_side],
    }


def report(result: dict) -> None:
    *shoal_sides, pg_side = result["runs"]
    print(
        f"{result['rows']:,} rows, {result['seconds_per_phase']:g} s per phase, "
        f"load {result['load_before'][0]:.1f} before, {result['load'][0]:.1f} after"
    )
    print(
        f"{'phase':8s} {'clients':>7s} | {'server':12s} {'q/s':>7s} {'point p50':>10s} {'point p99':>10s} {'errors':>6s}"
    )
    for i in range(len(pg_side["phases"])):
        for side in (*shoal_sides, pg_side):
            run_ = side["phases"][i]
            pt = run_.get("point", {})
            print(
                f"{run_['phase']:8s} {run_['clients']:7d} | {side['server']:12s} {run_['queries_per_s']:7.1f} "
                f"{pt.get('p50_ms', float('nan')):8.1f}ms {pt.get('p99_ms', float('nan')):8.1f}ms {len(run_['errors']):6d}"
            )
    for side in (*shoal_sides, pg_side):
        for run_ in side["phases"]:
            for error in sorted(set(run_["errors"]))[:3]:
                print(f"error ({side['server']}, {run_['phase']}, {run_['clients']} clients): {error}")
    for key in ("all_rows_s", "limit_10_s"):
        b = pg_side["psql"][key]
        for side in shoal_sides:
            a = side["psql"][key]
            print(f"psql {key:11s}: {side['server']} {a:.2f} s, postgresql {b:.2f} s, x{a / b:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--point-lookup", choices=("on", "off", "both"), default="both",
        help="Shoal's [sql] point_lookup (Spark-free point lookups): measured on, off, or both in one run",
    )  # fmt: skip
    args = ap.parse_args()
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        report(result)


if __name__ == "__main__":
    main()
