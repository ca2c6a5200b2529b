"""Workflow interpreter benchmark, every figure measured in the same run.

1. Interpreter overhead per state: a chain of N Pass states (entered/exited events and a
   checkpoint per state, all committed to the catalog database) against the same chain
   with the store on an in-memory SQLite database (the cost of durability) and against
   the bare interpretation (no store writes). Target: under 5 ms per state.
2. Parallel branches sharing one SparkSession: K Spark jobs in a Parallel state against
   the same jobs one after another in a chain.
3. The demo state machine end to end (20,000 opportunities, 731 days of metrics), with
   the time of each task taken from the execution's event history.

    python benchmarks/workflow.py [--states 1000] [--opportunities 20000] [--skip-demo] [--json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine

from shoal.config import load_settings
from shoal.workflows import definition, store, tasks
from shoal.workflows.interpreter import Interpreter


def chain(n: int) -> dict[str, Any]:
    states = {
        f"S{i}": {"Type": "Pass", "Parameters": {"i": i, "prev.$": "$"}, "OutputPath": "$.i", "Next": f"S{i + 1}"}
        for i in range(n)
    }
    states[f"S{n - 1}"].pop("Next")
    states[f"S{n - 1}"]["End"] = True
    return {"StartAt": "S0", "States": states}


class NullStore(store.Store):
    """No persistence at all: what interpretation alone costs."""

    def __init__(self) -> None:  # deliberately skips the database
        self._seq = {}
        import threading

        self._lock = threading.Lock()

    def create_execution(self, *a, **k):
        pass

    def event(self, *a, **k):
        pass

    def checkpoint(self, *a, **k):
        pass

    def clear_checkpoints(self, *a, **k):
        pass

    def finish(self, *a, **k):
        pass

    def execution(self, execution_id):
        return None


def time_chain(settings, n: int, backend: str, repeats: int = 3) -> float:
    machine = definition.build(chain(n), name=f"chain{n}")
    per_state = []
    for _ in range(repeats):
        if backend == "catalog":
            st = store.Store(settings)
        elif backend == "memory":
            st = store.Store(settings)
            st.engine = create_engine("sqlite://", connect_args={"check_same_thread": False})
            store.state_tables.create_all(st.engine)
        else:
            st = NullStore()
        interp = Interpreter(settings, tasks.resolve, store=st)
        started = time.perf_counter()
        interp.start(machine, {})
        per_state.append((time.perf_counter() - started) / n * 1000)
    return statistics.median(per_state)


def spark_job(ctx, params):
    spark = ctx.spark()
    # One partition per job: each job alone uses one core, so overlap shows as speedup.
    return (
        spark.range(0, params["rows"], numPartitions=1)
        .selectExpr("sum(length(sha2(cast(id AS string), 256))) AS s")
        .first()["s"]
    )


def parallel_vs_sequential(settings, branches: int, rows: int) -> tuple[float, float]:
    task = {"Type": "Task", "Resource": "bench:spark", "Parameters": {"rows": rows}}

    def resolve(resource):
        return spark_job if resource == "bench:spark" else tasks.resolve(resource)

    par = {
        "StartAt": "P",
        "States": {
            "P": {
                "Type": "Parallel",
                "End": True,
                "Branches": [{"StartAt": "J", "States": {"J": {**task, "End": True}}} for _ in range(branches)],
            }
        },
    }
    seq_states = {f"J{i}": {**task, "ResultPath": f"$.r{i}", "Next": f"J{i + 1}"} for i in range(branches)}
    seq_states[f"J{branches - 1}"].pop("Next")
    seq_states[f"J{branches - 1}"]["End"] = True
    seq = {"StartAt": "J0", "States": seq_states}
    interp = Interpreter(settings, resolve)
    interp.start(definition.build(par, name="warm"), {})  # JVM and Python workers warm
    timings = {}
    for label, d in (("parallel", par), ("sequential", seq)):
        runs = []
        for _ in range(3):
            started = time.perf_counter()
            rec = interp.start(definition.build(d, name=label), {})
            assert rec.status == "SUCCEEDED", rec.cause
            runs.append(time.perf_counter() - started)
        timings[label] = statistics.median(runs)
    return timings["parallel"], timings["sequential"]


def demo(settings, folder: Path, opportunities: int) -> dict[str, Any]:
    from shoal import workflows
    from shoal.notify import Notifier
    from shoal.recipes import JobRegistry, load_job_file
    from shoal.samples import sales

    files = sales.write_pipeline(folder, opportunities=opportunities)
    reg = JobRegistry(settings)
    reg.register(load_job_file(files.sales_job))
    reg.register(load_job_file(files.marketing_job))
    Notifier(settings).create_topic(sales.TOPIC)
    started = time.perf_counter()
    record = workflows.run(settings, str(files.definition))
    total = time.perf_counter() - started
    assert record.status == "SUCCEEDED", record.cause
    tasks_s = {}
    for e in workflows.Store(settings).history(record.id):
        if e["type"] == "TaskSucceeded":
            tasks_s[f"{e['scope']}/{e['state']}".lstrip("/")] = e["duration_s"]
    return {
        "seconds": round(total, 2),
        "tasks_s": tasks_s,
        "opportunities": files.sales_rows,
        "days": files.marketing_rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--states", type=int, default=1000)
    ap.add_argument("--branches", type=int, default=2)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--opportunities", type=int, default=20_000)
    ap.add_argument("--skip-demo", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="shoal-bench-wf-") as tmp:
        settings = load_settings(workspace=Path(tmp) / "ws")
        report: dict[str, Any] = {"when": dt.datetime.now(dt.UTC).isoformat(), "states": args.states}
        for backend in ("catalog", "memory", "none"):
            report[f"ms_per_state_{backend}"] = round(time_chain(settings, args.states, backend), 3)
        report["durability_cost_ratio"] = round(report["ms_per_state_catalog"] / report["ms_per_state_memory"], 2)
        report["target_ms_per_state"] = 5.0
        report["target_ratio"] = round(5.0 / report["ms_per_state_catalog"], 2)
        par, seq = parallel_vs_sequential(settings, args.branches, args.rows)
        report.update(parallel_s=round(par, 3), sequential_s=round(seq, 3), parallel_speedup=round(seq / par, 2))
        if not args.skip_demo:
            report["demo"] = demo(settings, Path(tmp) / "pipeline", args.opportunities)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return
    print(
        f"Pass chain of {args.states} states: {report['ms_per_state_catalog']} ms/state durable "
        f"(in-memory store {report['ms_per_state_memory']}, no store {report['ms_per_state_none']}); "
        f"durability costs {report['durability_cost_ratio']}x; target 5 ms -> {report['target_ratio']}x under target"
    )
    print(
        f"{args.branches} Spark jobs: parallel {report['parallel_s']} s vs sequential {report['sequential_s']} s "
        f"-> {report['parallel_speedup']}x"
    )
    if "demo" in report:
        d = report["demo"]
        print(f"Demo state machine ({d['opportunities']} opportunities, {d['days']} days): {d['seconds']} s end to end")
        for name, secs in d["tasks_s"].items():
            print(f"  {secs:8.2f} s  {name}")


if __name__ == "__main__":
    main()
