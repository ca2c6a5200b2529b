"""The warm engine (issue 21): a real engine process serves the test workspace; commands run
through `python -m shoal` (the client) must print and exit exactly as they do in process."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from shoal.cli.warm import client
from tests.support.helpers import run_cli, write_csv

T1 = "2022-03-01 10:00:00"


# ---- the thin client, no Spark ----------------------------------------------------------------------


def test_peer_uid_check_allows_only_the_owner():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        uid = client.peer_uid(a)
    assert uid == os.getuid()
    assert client.same_owner(uid)
    assert not client.same_owner(uid + 1)
    assert not client.same_owner(uid, owner=uid + 1)
    assert client.same_owner(0, owner=0)


def test_root_options_and_which_commands_go_to_the_engine():
    assert client.parse_root(["--config", "x.toml", "sql", "SELECT 1"]) == ("x.toml", False, ["sql", "SELECT 1"])
    assert client.parse_root(["-c", "y.toml", "--no-engine", "cdc", "apply"]) == ("y.toml", True, ["cdc", "apply"])
    assert client.parse_root(["--config=z.toml", "ingest", "d"])[0] == "z.toml"
    assert client.parse_root(["--help"])[2] is None
    assert client.parse_root(["--config"])[2] is None
    delegated = [["sql", "q"], ["cdc", "apply", "s"], ["ingest", "d"], ["extract"], ["search", "x"]]
    delegated += [["workflow", "run", "f"], ["recipe", "run", "j"]]
    assert all(client.is_delegated(w) for w in delegated)
    for words in (["cdc", "files", "t"], ["engine", "start"], ["serve"], ["sql", "--help"], ["workflow", "list"], []):
        assert not client.is_delegated(words), words


def test_workspace_found_like_load_settings(tmp_path):
    from shoal.config import load_settings

    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "shoal.toml").write_text('workspace = "../lake"\n')
    env = {"SHOAL_CONFIG": str(tmp_path / "conf" / "shoal.toml")}
    assert client.workspace_dir(None, env, tmp_path) == (tmp_path / "lake").resolve()
    assert client.workspace_dir("conf/shoal.toml", {}, tmp_path) == (tmp_path / "lake").resolve()
    assert client.workspace_dir(None, {"SHOAL_WORKSPACE": "w"}, tmp_path) == (tmp_path / "w").resolve()
    assert client.workspace_dir(None, {}, tmp_path) == (tmp_path / ".shoal").resolve()
    assert load_settings(tmp_path / "conf" / "shoal.toml").workspace_dir == (tmp_path / "lake").resolve()
    long_ws = tmp_path / ("x" * 120)
    path = client.socket_path(long_ws)
    assert len(str(path)) < 108 and path != client.socket_path(tmp_path / ("y" * 120))


_LOOP = """
import socket, sys
from shoal.cli.warm.server import Engine
from shoal.private import private_dir
owner = int(sys.argv[1]) if sys.argv[1] != "-" else None
engine = Engine(None, owner_pid=owner, idle_timeout_s=float(sys.argv[2]))
private_dir(engine.socket_path.parent)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(str(engine.socket_path))
listener.listen(4)
engine._listener = listener
print("serving", flush=True)
engine.serve_forever()
print("stopped:", engine.stop_reason, flush=True)
"""


def _serve_loop(workspace: Path, owner: int | None, idle_s: float) -> subprocess.Popen:
    """The engine's serving loop in its own process (no Spark: the loop's lifetime is under test)."""
    # The workspace exists, as a real one would: with a long path the socket lives elsewhere
    # (client.socket_path), so nothing else would create the folder the test later deletes.
    workspace.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SHOAL_WORKSPACE": str(workspace)}
    env.pop("SHOAL_CONFIG", None)
    args = [sys.executable, "-c", _LOOP, str(owner) if owner else "-", str(idle_s)]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "serving"
    return proc


def test_engine_ends_with_its_owner_its_workspace_or_an_idle_time(tmp_path):
    owner = subprocess.Popen(["sleep", "60"])
    owned = _serve_loop(tmp_path / "a", owner.pid, 0)
    gone = _serve_loop(tmp_path / "b", None, 0)
    idle = _serve_loop(tmp_path / "c", None, 1.5)
    forever = _serve_loop(tmp_path / "d", None, 0)
    try:
        owner.kill()
        owner.wait()
        import shutil

        shutil.rmtree(tmp_path / "b")
        outs = {name: p.communicate(timeout=30)[0] for name, p in (("owned", owned), ("gone", gone), ("idle", idle))}
        assert f"the process that started it ({owner.pid}) has ended" in outs["owned"]
        assert "workspace" in outs["gone"] and "is gone" in outs["gone"]
        assert "idle for" in outs["idle"] and "idle timeout 1.5 s" in outs["idle"]
        assert forever.poll() is None  # no owner, no idle timeout, workspace still there: it serves on
    finally:
        for p in (owner, owned, gone, idle, forever):
            p.kill()
            p.wait()


def test_client_path_imports_nothing_heavy():
    code = (
        "import sys; import shoal.cli.entry, shoal.cli.warm.client as c; c._program_name(); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'pydantic', 'rich', 'typer', 'py4j'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---- a real engine ---------------------------------------------------------------------------------


class Running:
    def __init__(self, env: dict[str, str], workspace: Path, cwd: Path) -> None:
        self.env, self.workspace, self.cwd = env, workspace, cwd

    def run(self, args: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None):
        return subprocess.run(
            [sys.executable, "-m", "shoal", *args],
            env=env or self.env,
            cwd=cwd or self.cwd,
            capture_output=True,
            text=True,
            timeout=600,
        )

    def popen(self, args: list[str], **kw) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "shoal", *args],
            env=self.env,
            cwd=kw.pop("cwd", self.cwd),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **kw,
        )

    def status(self) -> dict:
        answer = client.control(self.workspace, "status")
        assert answer is not None, "the engine stopped answering"
        return answer


@pytest.fixture(scope="module")
def engine(settings, spark, tmp_path_factory):
    """An engine on the session's workspace (the in-process runs below share it)."""
    ws = settings.workspace_dir
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env |= {"SHOAL_WORKSPACE": str(ws), "SHOAL_SPARK__SHUFFLE_PARTITIONS": "2", "SHOAL_SPARK__MASTER": "local[2]"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[2]), env.get("PYTHONPATH", "")])
    cwd = tmp_path_factory.mktemp("engine-cwd")
    running = Running(env, ws, cwd)
    started = running.run(["engine", "start", "--json"])
    assert started.returncode == 0, started.stderr
    info = json.loads(started.stdout)
    assert info["running"] and info["workspace"] == str(ws) and not info["already_running"]
    yield running
    stopped = running.run(["engine", "stop", "--json"])
    assert stopped.returncode == 0 and json.loads(stopped.stdout)["stopped"] is True
    assert not client.socket_path(ws).exists()
    after = running.run(["engine", "status", "--json"])
    assert after.returncode == 3 and json.loads(after.stdout)["running"] is False


def _untimed(result: tuple[int, str, str]) -> tuple[int, str, str]:
    """Progress lines off a terminal start with the time of day, which two runs never share."""
    code, out, err = result
    return code, out, re.sub(r"(?m)^\d\d:\d\d:\d\d ", "", err)


def _delegated(engine: Running, args: list[str]) -> tuple[int, str, str]:
    """Run through the client and check that the engine (not the client) ran it."""
    before = engine.status()["requests"]
    done = engine.run(args)
    assert engine.status()["requests"] == before + 1, done.stderr
    return done.returncode, done.stdout, done.stderr


@pytest.mark.slow
def test_channel_is_private(engine):
    sock = client.socket_path(engine.workspace)
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    assert engine.run(["engine", "status"]).returncode == 0
    again = engine.run(["engine", "start", "--json"])
    assert again.returncode == 0 and json.loads(again.stdout)["already_running"] is True


@pytest.mark.slow
def test_sql_prints_the_same_as_in_process(engine, cli_env, capsys, monkeypatch):
    name = f"e{uuid.uuid4().hex[:8]}.items"
    for sql in (
        f"CREATE TABLE {name} (id BIGINT, label STRING, tags ARRAY<STRING>) USING iceberg",
        f"INSERT INTO {name} VALUES (1, 'a', array('x')), (2, NULL, array()), (3, '[bold]b[/]', NULL)",
    ):
        assert run_cli(["sql", sql], capsys, monkeypatch)[0] == 0
    query = f"SELECT * FROM {name} ORDER BY id"
    for args in (
        ["sql", query],
        ["sql", query, "-f", "json"],
        ["sql", query, "--format", "csv", "--limit", "2"],
        ["sql", f"SELECT label, count(*) AS n FROM {name} GROUP BY label ORDER BY label", "-f", "json"],
        ["sql", "SELECT * FROM nope.nothing"],
        ["sql", "SELECT * FROM nope.nothing", "-f", "json"],
    ):
        here = run_cli(args, capsys, monkeypatch)
        there = _delegated(engine, args)
        assert there == here, args
    assert here[0] != 0  # the error cases are errors in both
    # Settings that cannot be read: the engine is not asked; the process reports it.
    args = ["--config", "missing.toml", "sql", "SELECT 1"]
    before = engine.status()["requests"]
    done = engine.run(args)
    assert engine.status()["requests"] == before
    monkeypatch.chdir(engine.cwd)
    assert (done.returncode, done.stdout, done.stderr) == run_cli(args, capsys, monkeypatch)
    assert done.returncode == 1 and "missing.toml does not exist" in done.stderr


@pytest.mark.slow
def test_cold_process_and_engine_agree_byte_for_byte(engine):
    """The same `python -m shoal` call with SHOAL_ENGINE=off (a cold Spark in the process)."""
    cold_env = engine.env | {"SHOAL_ENGINE": "off"}
    for args in (
        ["sql", "SELECT 1 AS one, 'x' AS s", "-f", "json"],
        ["sql"],
        ["sql", "SELECT 1", "-f", "xml", "--json"],  # a usage error in the JSON shape
        ["sql", "SELECT 1", "-f", "xml"],
    ):
        before = engine.status()["requests"]
        cold = engine.run(args, env=cold_env)
        assert engine.status()["requests"] == before  # not delegated
        warm = _delegated(engine, args)
        assert warm == (cold.returncode, cold.stdout, _without_jvm_noise(cold.stderr)), args
    assert warm[0] == 2 and "Usage: python -m shoal sql" in warm[2]


def _without_jvm_noise(err: str) -> str:
    # A cold JVM prints start-up lines of its own on stderr (not Shoal's output).
    noise = re.compile(r"^(WARNING: |Setting default log level|To adjust logging level|\d\d/\d\d/\d\d .* WARN )")
    return "".join(line for line in err.splitlines(keepends=True) if not noise.match(line))


_VOLATILE = re.compile(r"(^|_)(id|ids|at|s|seconds|ms|per_s|name)$")


def _stable(value, *subs: tuple[str, str]):
    """A result without values that differ between any two runs (ids, times, names)."""
    if isinstance(value, dict):
        return {k: _stable(v, *subs) for k, v in value.items() if not _VOLATILE.search(k)}
    if isinstance(value, list):
        return [_stable(v, *subs) for v in value]
    if isinstance(value, str):
        for a, b in subs:
            value = value.replace(a, b)
    return value


@pytest.mark.slow
def test_cdc_workflow_and_recipe_results_match(engine, cli_env, capsys, monkeypatch, tmp_path):
    for side in ("here", "there"):
        src = tmp_path / side / "changes"
        src.mkdir(parents=True)
        write_csv(src, "LOAD00000001.csv", [[None, 1, "tools", "hammer", 3, T1], [None, 2, "tools", "saw", 1, T1]])
        flow = tmp_path / side / "hello.json"
        flow.write_text(
            json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "Result": {"n": 1}, "End": True}}})
        )
        (tmp_path / side / "in.csv").write_text("id,amount\n1,2.5\n2,4\n")
        (tmp_path / side / "recipe.json").write_text("[]")
        job = {"Name": f"job-{side}", "Input": {"Path": "in.csv", "Format": "csv"}, "Recipe": "recipe.json"}
        job["Outputs"] = [{"path": "out", "format": "csv", "mode": "replace"}]
        (tmp_path / side / "job.json").write_text(json.dumps(job))
    ns = f"e{uuid.uuid4().hex[:8]}"
    here_t, there_t = f"{ns}.here", f"{ns}.there"
    subs = ((str(tmp_path / "there"), str(tmp_path / "here")), (there_t, here_t), ("job-there", "job-here"))

    def both(args_for):
        here = run_cli(args_for("here", here_t), capsys, monkeypatch)
        there = _delegated(engine, args_for("there", there_t))
        assert there[0] == here[0] == 0, (here, there)
        assert _stable(json.loads(there[1]), *subs) == _stable(json.loads(here[1])), args_for("x", "y")
        return json.loads(there[1])

    cdc = both(
        lambda side, t: (
            ["cdc", "apply", str(tmp_path / side / "changes"), "--table", t, "--key", "product_id"]
            + ["--sequence", "updated_at", "--json"]
        )
    )
    assert cdc["inserted"] == 2 and cdc["files_applied"] == ["LOAD00000001.csv"] and cdc["committed"]
    flow = both(lambda side, t: ["workflow", "run", str(tmp_path / side / "hello.json"), "--json"])
    assert flow["status"] == "SUCCEEDED" and flow["output"] == {"n": 1}
    recipe = both(lambda side, t: ["recipe", "run", str(tmp_path / side / "job.json"), "--json"])
    assert recipe["rows_in"] == 2 and (tmp_path / "there" / "out").is_dir()
    # What the engine wrote is in the lake for everyone.
    code, out, _ = run_cli(["sql", f"SELECT count(*) AS n FROM {there_t}", "-f", "json"], capsys, monkeypatch)
    assert code == 0 and json.loads(out) == [{"n": 2}]


@pytest.mark.slow
def test_ingest_extract_and_search(engine, cli_env, capsys, monkeypatch, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / f"note-{uuid.uuid4().hex[:6]}.txt").write_text(f"The espresso grinder {uuid.uuid4().hex} works well.\n")
    code, out, err = _delegated(engine, ["ingest", str(docs), "--json"])
    assert code == 0, err
    assert json.loads(out)["new"] == 1
    code, out, err = _delegated(engine, ["extract", "--json"])
    assert code == 0 and json.loads(out)["objects"] >= 1, err
    for args in (["extract"], ["search", "espresso grinder", "--json"]):
        here = run_cli(args, capsys, monkeypatch)
        assert _untimed(_delegated(engine, args)) == _untimed(here), args


@pytest.mark.slow
def test_two_clients_at_once(engine, cli_env, capsys, monkeypatch, tmp_path):
    name = f"e{uuid.uuid4().hex[:8]}.pair"
    assert (
        run_cli(["sql", f"CREATE TABLE {name} USING iceberg AS SELECT id FROM range(0, 1000)"], capsys, monkeypatch)[0]
        == 0
    )
    other = tmp_path / "elsewhere"  # a different folder: the engine runs that one after the others
    other.mkdir()
    calls = {
        "json": (["sql", f"SELECT sum(id) AS s FROM {name}", "-f", "json"], engine.cwd),
        "table": (["sql", f"SELECT count(*) AS n FROM {name}"], engine.cwd),
        "csv": (["sql", f"SELECT max(id) AS m FROM {name}", "-f", "csv"], other),
    }
    before = engine.status()["requests"]
    procs = {k: engine.popen(args, cwd=cwd) for k, (args, cwd) in calls.items()}
    results = {k: (p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for k, p in procs.items()}
    for p in procs.values():
        p.stdout.close()
        p.stderr.close()
    assert engine.status()["requests"] == before + 3
    assert results["json"][:2] == (0, '[\n  {\n    "s": 499500\n  }\n]\n')
    assert results["csv"][:2] == (0, "m\n999\n")
    assert results["table"][0] == 0 and "1000" in results["table"][1] and "1 row(s)" in results["table"][1]
    for k, (args, _) in calls.items():
        assert results[k] == run_cli(args, capsys, monkeypatch), k


@pytest.mark.slow
def test_client_killed_mid_query_leaves_the_engine_healthy(engine):
    slow = "SELECT count(*) FROM range(0, 300000) a CROSS JOIN range(0, 300000) b WHERE a.id + b.id < 0"
    proc = engine.popen(["sql", slow])
    deadline = time.monotonic() + 120
    while engine.status()["active"] == 0:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    time.sleep(2)  # well inside the Spark job
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    deadline = time.monotonic() + 120
    while engine.status()["active"]:  # the job was cancelled: the command ended
        assert time.monotonic() < deadline, "the killed client's command is still running"
        time.sleep(0.2)
    code, out, _ = _delegated(engine, ["sql", "SELECT 6 * 7 AS answer", "-f", "json"])
    assert (code, out) == (0, '[\n  {\n    "answer": 42\n  }\n]\n')


@pytest.mark.slow
def test_engine_refuses_a_request_for_other_spark_settings(engine):
    sock = client.connect(client.socket_path(engine.workspace))
    assert sock is not None
    sock.settimeout(120)
    with sock:
        env = {k: v for k, v in engine.env.items() if k.startswith("SHOAL_")} | {"SHOAL_SPARK__SHUFFLE_PARTITIONS": "3"}
        request = {"op": "run", "v": client.PROTOCOL, "argv": ["sql", "SELECT 1"], "prog": "shoal"}
        request |= {"cwd": str(engine.cwd), "env": env, "encoding": None}
        client.send_message(sock, request, [0, 1, 2])
        reply = client.recv_message(sock)
    assert reply is not None and reply["ready"] is False and "Spark settings" in reply["reason"]
    assert engine.status()["refused"] >= 1


@pytest.mark.slow
def test_progress_follows_the_clients_terminal(engine, tmp_path):
    """The engine draws its bars on the client's terminal, and logs lines to the client's pipe."""
    import pty

    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(30):
        (folder / f"n{i:02d}-{uuid.uuid4().hex[:6]}.txt").write_text(f"{i} {uuid.uuid4().hex}\n")
    # A terminal: stderr (and stdout) are a pty's slave side, as in an interactive shell.
    master, slave = pty.openpty()
    before = engine.status()["requests"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "shoal", "ingest", str(folder)],
        env=engine.env | {"COLUMNS": "120"},
        cwd=engine.cwd,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the last holder of the slave side went away
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    drawn = b"".join(chunks).decode("utf-8", "replace")
    assert proc.wait(timeout=300) == 0, drawn
    assert engine.status()["requests"] == before + 1  # the engine ran it
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn)
    assert re.search(r"hashing.*100%.*30/30 files", text), text[-2000:]
    assert re.search(r"copying.*30/30 files", text), text[-2000:]
    assert "Ingested" in text and not re.search(r"(?m)^\d\d:\d\d:\d\d ", text)
    # A pipe: timestamped lines, the first count and the end of each phase.
    (folder / "one-more.txt").write_text(uuid.uuid4().hex)
    code, out, err = _delegated(engine, ["ingest", str(folder)])
    assert code == 0 and "\x1b[" not in err
    assert re.search(r"(?m)^\d\d:\d\d:\d\d ingest: hashing: 31/31 files in \d:\d\d:\d\d", err), err
