"""Warm engine benchmark (issue 21): the same `shoal sql` command, cold and warm, in one run.

1. Cold: `python -m shoal sql "SELECT count(*) FROM bench.t"` with SHOAL_ENGINE=off, so each
   call starts its own JVM and Python workers (what every CLI call paid before).
2. Warm: the same command with `shoal engine start` running for the workspace.
3. The client's own cost: `python -m shoal --help` in process (every import) against the
   delegating client's imports.

Target: warm p50 under 1.5 s. The machine's speed drifts (other work shares its cores):
read the ratio, measured side by side, before the absolute times.

    python benchmarks/engine.py [--cold 3] [--warm 10] [--rows 1000000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def shoal(args: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "shoal", *args], env=env, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"`shoal {' '.join(args)}` failed ({done.returncode}):\n{done.stderr}")
    return seconds


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cold", type=int, default=3, help="cold calls (each starts a JVM)")
    p.add_argument("--warm", type=int, default=10, help="warm calls")
    p.add_argument("--rows", type=int, default=1_000_000, help="rows in the table counted")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    args = p.parse_args()

    with tempfile.TemporaryDirectory(prefix="shoal-bench-engine-") as tmp:
        cwd = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
        env |= {
            "SHOAL_WORKSPACE": str(cwd / "ws"),
            "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
        }
        cold_env = env | {"SHOAL_ENGINE": "off"}
        query = ["sql", "SELECT count(*) FROM bench.t"]
        shoal(
            ["sql", f"CREATE TABLE bench.t USING iceberg AS SELECT id, id % 97 AS k FROM range(0, {args.rows})"],
            cold_env,
            cwd,
        )
        cold = [shoal(query, cold_env, cwd) for _ in range(args.cold)]
        t0 = time.perf_counter()
        shoal(["engine", "start"], env, cwd)
        start_s = time.perf_counter() - t0
        try:
            shoal(query, env, cwd)  # the engine's first plan of this table: not counted
            warm = [shoal(query, env, cwd) for _ in range(args.warm)]
            # Interleaved pair: cold and warm back to back, under the same load.
            pair = (shoal(query, cold_env, cwd), shoal(query, env, cwd))
        finally:
            shoal(["engine", "stop"], env, cwd)
        help_in_process = statistics.median(
            timed([sys.executable, "-m", "shoal", "--help"], env, cwd) for _ in range(5)
        )
        client_imports = statistics.median(
            timed([sys.executable, "-c", "import shoal.cli.entry, shoal.cli.warm.client"], env, cwd) for _ in range(5)
        )

    result = {
        "rows": args.rows,
        "cold_p50_s": round(statistics.median(cold), 2),
        "cold_s": [round(x, 2) for x in cold],
        "warm_p50_s": round(statistics.median(warm), 2),
        "warm_p90_s": round(sorted(warm)[int(0.9 * (len(warm) - 1))], 2),
        "warm_s": [round(x, 2) for x in warm],
        "speedup_p50": round(statistics.median(cold) / statistics.median(warm), 1),
        "interleaved_cold_warm_s": [round(x, 2) for x in pair],
        "engine_start_s": round(start_s, 1),
        "help_in_process_s": round(help_in_process, 3),
        "client_imports_s": round(client_imports, 3),
        "target_warm_p50_under_1_5_s": statistics.median(warm) < 1.5,
        "load_average_1m": round(os.getloadavg()[0], 1),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"shoal sql count(*) over {args.rows:,} rows")
    print(f"  cold (SHOAL_ENGINE=off)  p50 {result['cold_p50_s']:6.2f} s   {result['cold_s']}")
    print(f"  warm (engine)            p50 {result['warm_p50_s']:6.2f} s   p90 {result['warm_p90_s']} s")
    print(f"  speed-up (p50 cold / p50 warm): {result['speedup_p50']}x")
    print(f"  interleaved cold, warm: {result['interleaved_cold_warm_s']} s")
    print(f"  engine start (until it answers): {result['engine_start_s']} s")
    print(
        f"  `python -m shoal --help` in process: {result['help_in_process_s']} s; client imports: {result['client_imports_s']} s"
    )
    print(f"  target warm p50 < 1.5 s: {'met' if result['target_warm_p50_under_1_5_s'] else 'NOT met'}")
    print(f"  1-minute load average during the run: {result['load_average_1m']} (2 cores)")


if __name__ == "__main__":
    main()
