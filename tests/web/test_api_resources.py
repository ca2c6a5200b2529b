"""API parity: workflows and executions (start, describe, history, stop), objects with paging,
search, quality results and models, each under the same governance as the console."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from shoal import workflows
from shoal.governance import AuditLog, Governance, Principals
from tests.web.test_api import Api


@pytest.fixture(scope="module")
def api(spark, settings, tmp_path_factory):
    a = Api(spark, settings)
    u = uuid.uuid4().hex[:6]
    folder = tmp_path_factory.mktemp("apiwf")
    a.quick, a.slow = f"apiquick-{u}", f"apislow-{u}"
    for name, states in (
        (a.quick, {"Hello": {"Type": "Pass", "Parameters": {"greeting.$": "$.who"}, "End": True}}),
        (a.slow, {"Long": {"Type": "Wait", "Seconds": 300, "End": True}}),
    ):
        path = folder / f"{name}.asl.json"
        path.write_text(json.dumps({"StartAt": next(iter(states)), "States": states}))
        workflows.register(settings, path, name=name)
    admin = Principals(settings).principal("admin")
    Governance(settings).grant(admin, "SELECT", "WORKFLOW", a.quick, a.names["alice"])
    yield a
    a.server.should_exit = True
    a.thread.join(10)


def _until(check, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("timed out")


def test_workflows_start_describe_history(api) -> None:
    admin, alice, bob = api.client("admin"), api.client("alice"), api.client("bob")
    names = {w["name"] for w in admin.get("/api/v1/workflows").json()}
    assert {api.quick, api.slow} <= names
    # alice sees only the workflow she was granted; bob sees none.
    assert [w["name"] for w in alice.get("/api/v1/workflows").json()] == [api.quick]
    assert bob.get("/api/v1/workflows").json() == []
    assert bob.get(f"/api/v1/workflows/{api.quick}").status_code == 403
    detail = alice.get(f"/api/v1/workflows/{api.quick}").json()
    assert detail["definition"]["StartAt"] == "Hello" and detail["privileges"] == ["SELECT"]
    # SELECT does not let alice start it.
    r = alice.post(f"/api/v1/workflows/{api.quick}/executions", json={"input": {"who": "x"}})
    assert r.status_code == 403
    r = admin.post(f"/api/v1/workflows/{api.quick}/executions", json={"input": {"who": "world"}, "name": "api-run"})
    assert r.status_code == 202, r.text
    execution_id = r.json()["execution_id"]
    done = _until(lambda: (e := alice.get(f"/api/v1/executions/{execution_id}").json())["status"] != "RUNNING" and e)
    assert done["status"] == "SUCCEEDED" and done["output"] == {"greeting": "world"} and done["name"] == "api-run"
    assert done["trigger"] == {"api": "admin"}
    history = alice.get(f"/api/v1/executions/{execution_id}/history").json()
    assert history[0]["type"] == "ExecutionStarted" and history[-1]["type"] == "ExecutionSucceeded"
    assert [e["id"] for e in history] == sorted(e["id"] for e in history)
    listed = alice.get(f"/api/v1/workflows/{api.quick}/executions", params={"status": "succeeded"}).json()
    assert execution_id in {e["execution_id"] for e in listed}
    assert bob.get(f"/api/v1/executions/{execution_id}").status_code == 403
    assert bob.get(f"/api/v1/executions/{execution_id}/history").status_code == 403
    assert admin.get("/api/v1/executions/nope-123").status_code == 404
    assert admin.post("/api/v1/workflows/nope-123/executions", json={}).status_code in (403, 404)


def test_stop_a_running_execution(api, settings) -> None:
    admin, alice = api.client("admin"), api.client("alice")
    r = admin.post(f"/api/v1/workflows/{api.slow}/executions", json={})
    execution_id = r.json()["execution_id"]
    assert r.json()["status"] == "RUNNING"
    assert alice.post(f"/api/v1/executions/{execution_id}/stop", json={}).status_code == 403
    r = admin.post(f"/api/v1/executions/{execution_id}/stop", json={"error": "Ops.Stop", "cause": "maintenance"})
    assert r.status_code == 200, r.text
    stopped = _until(lambda: (e := admin.get(f"/api/v1/executions/{execution_id}").json())["status"] == "ABORTED" and e)
    assert stopped["error"] == "Ops.Stop" and stopped["cause"] == "maintenance"
    assert admin.post(f"/api/v1/executions/{execution_id}/stop", json={}).status_code == 409
    actions = {(e["action"], e["decision"]) for e in AuditLog(settings).list(limit=500)}
    assert ("workflow.stop", "allow") in actions and ("workflow.stop", "deny") in actions


def test_objects_paging_search_quality_models(api) -> None:
    admin, alice = api.client("admin"), api.client("alice")
    first = admin.get("/api/v1/objects", params={"limit": 1})
    assert first.status_code == 200
    page = first.json()
    assert isinstance(page, list) and len(page) <= 1
    if "x-next-offset" in first.headers:
        second = admin.get("/api/v1/objects", params={"limit": 1, "offset": first.headers["x-next-offset"]}).json()
        assert second and second != page
    assert admin.get("/api/v1/objects", params={"offset": 10_001}).status_code == 422
    r = alice.get("/api/v1/search", params={"q": "quarterly report", "limit": 3})
    assert r.status_code == 200 and r.json()["mode"] == "hybrid" and len(r.json()["hits"]) <= 3
    assert alice.get("/api/v1/search", params={"q": ""}).status_code == 422
    assert alice.get("/api/v1/search", params={"q": "x", "mode": "magic"}).status_code == 422
    assert isinstance(alice.get("/api/v1/models").json(), list)
    # Quality results are governed data: alice has no grant on shoal.quality_results.
    r = alice.get("/api/v1/quality/results")
    assert r.status_code in (200, 403)
    if r.status_code == 200:
        assert r.json() == {"results": []}  # only when no ruleset has run in this lake yet
    # Every endpoint needs a token.
    for path in ("/api/v1/workflows", "/api/v1/objects", "/api/v1/search?q=x", "/api/v1/models"):
        assert api.client().get(path).status_code == 401
