"""Scale-out by configuration only: a Spark standalone master with two workers, started on loopback;
`shoal` commands run on it as separate processes with only SHOAL_* environment variables changed."""

from __future__ import annotations

import json

import pytest

from shoal.samples import corpus as samples
from tests.cluster.support import CHANGES, base_env, run_json, write_changes
from tests.support.servers import free_port

pytestmark = pytest.mark.slow

WORKFLOW = {
    "StartAt": "Both",
    "States": {
        "Both": {
            "Type": "Parallel",
            "Branches": [
                {
                    "StartAt": "Count",
                    "States": {
                        "Count": {
                            "Type": "Task",
                            "Resource": "shoal:sql",
                            "Parameters": {"QueryString": "SELECT count(*) AS n FROM inv.p"},
                            "End": True,
                        }
                    },
                },
                {
                    "StartAt": "Sum",
                    "States": {
                        "Sum": {
                            "Type": "Task",
                            "Resource": "shoal:sql",
                            "Parameters": {"QueryString": "SELECT sum(price) AS s FROM inv.p"},
                            "End": True,
                        }
                    },
                },
            ],
            "End": True,
        }
    },
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    workspace = tmp_path_factory.mktemp("cluster-ws")
    env = base_env(workspace)
    env.update({"SHOAL_CLUSTER__PORT": str(free_port()), "SHOAL_CLUSTER__WEBUI_PORT": str(free_port())})
    up = run_json(["cluster", "up", "--workers", "2"], env, timeout=200)
    try:
        assert up["alive_workers"] == 2 and up["running"]
        yield {**env, "SHOAL_SPARK__MASTER": up["master_url"]}, up
    finally:
        down = run_json(["cluster", "down"], env)
        assert down["stopped_processes"] == 3


def test_cluster_runs_cdc_extraction_and_a_workflow(cluster, tmp_path):
    env, up = cluster
    source = tmp_path / "changes"
    write_changes(source)
    (source / "20240102-000001.csv").write_text(CHANGES)
    applied = run_json(
        ["cdc", "apply", str(source), "--table", "inv.p", "--key", "product_id", "--sequence", "last_update_time"], env
    )
    assert applied["inserted"] + applied["updated"] >= 1 and applied["committed"]
    docs = tmp_path / "docs"
    samples.write_corpus(docs)
    run_json(["ingest", str(docs), "--source-name", "inbox"], env)
    extracted = run_json(["extract", "--only", "text/*,application/pdf"], env)
    assert extracted["objects"] >= 4 and not [p for p in extracted["problems"] if p["status"] == "timeout"]
    assert extracted["statuses"]["entities"]["ok"] >= 3
    definition = tmp_path / "wf.json"
    definition.write_text(json.dumps(WORKFLOW))
    execution = run_json(["workflow", "run", str(definition)], env)
    assert execution["status"] == "SUCCEEDED", execution
    counts = [b["ResultSet"]["Rows"][0] for b in execution["output"]]
    assert counts == [{"n": 1}, {"s": 2.5}]
    # The work ran on the cluster's executors, not in a local driver.
    status = run_json(["cluster", "status"], {k: v for k, v in env.items() if k != "SHOAL_SPARK__MASTER"})
    assert status["alive_workers"] == 2
    import httpx

    apps = httpx.get(up["webui_url"] + "/json/", timeout=10).json()["completedapps"]
    assert len([a for a in apps if a["name"] == "shoal"]) >= 4
    assert all(a["cores"] >= 1 for a in apps if a["name"] == "shoal")
