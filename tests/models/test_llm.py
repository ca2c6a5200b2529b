"""LLM steps against real HTTP servers: a scripted OpenAI-compatible one for the failure paths
(retries, timeouts, concurrency, what is sent), and llama.cpp with a small model (slow)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from shoal import storage
from shoal.config import LlmEndpoint, LlmSettings
from shoal.enrich import EnrichError, load_job, run_job
from shoal.extract import run_extract
from shoal.ingest import ingest
from shoal.models import llm

SCHEMA = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "enum": ["invoice", "contract", "resume", "support_email", "other"]},
        "summary": {"type": "string"},
    },
    "required": ["category", "summary"],
    "additionalProperties": False,
}
DOCS = {
    "invoice.txt": "INVOICE 7001. Bill to: Northwind Traders. Subtotal 200 EUR, VAT 42 EUR, amount due 242 EUR.",
    "ticket.txt": "Dear support, my espresso machine is not working. Please help. Reach me at mia.klein@example.com. "
    "Mia Klein",
    "cv.txt": "Curriculum vitae of Tom Baker. Education: history. Work experience: archivist. Skills: cataloguing.",
}
KEY = "sk-test-" + uuid.uuid4().hex


class Chat:
    """A real HTTP server speaking the chat-completions shape; `answer(body, n)` scripts replies."""

    def __init__(self, answer, delay: float = 0.0):
        self.answer, self.delay = answer, delay
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()
        chat = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with chat.lock:
                    chat.requests.append(body)
                    chat.headers.append(dict(self.headers))
                    n = len(chat.requests)
                    chat.in_flight += 1
                    chat.max_in_flight = max(chat.max_in_flight, chat.in_flight)
                try:
                    time.sleep(chat.delay)
                    status, content = chat.answer(body, n)
                    if isinstance(content, str) and status == 200:
                        payload = {"choices": [{"message": {"role": "assistant", "content": content}}]}
                    else:
                        payload = {"error": content}
                    data = json.dumps(payload).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with chat.lock:
                        chat.in_flight -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _endpoint(url: str, **kw) -> dict:
    return {**LlmEndpoint(base_url=url, model="m", **kw).model_dump(exclude={"api_key"}), "api_key": KEY}


def test_retries_until_the_answer_is_valid_json_for_the_schema():
    replies = [
        (503, "loading"),
        (200, '{"category": "bill", "summary": "x"}'),  # not in the enum
        (200, '```json\n{"category": "invoice", "summary": "An invoice."}\n```'),
    ]
    chat = Chat(lambda body, n: replies[n - 1])
    try:
        client = llm.ChatClient("local", _endpoint(chat.url, max_retries=3))
        answer = client.ask("sys", "classify this", SCHEMA)
    finally:
        chat.close()
    assert answer.valid and answer.output == {"category": "invoice", "summary": "An invoice."}
    assert answer.attempts == 3 and answer.error is None
    body = chat.requests[0]
    assert body["messages"] == [{"role": "system", "content": "sys"}, {"role": "user", "content": "classify this"}]
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA and body["temperature"] == 0
    assert chat.headers[0]["Authorization"] == f"Bearer {KEY}"


def test_gives_up_with_a_clear_error():
    invalid = Chat(lambda body, n: (200, '{"category": "invoice"}'))
    slow = Chat(lambda body, n: (200, '{"category": "other", "summary": ""}'), delay=1.5)
    refused = Chat(lambda body, n: (400, "bad request: context too long"))
    try:
        a = llm.ChatClient("local", _endpoint(invalid.url, max_retries=1)).ask(None, "q", SCHEMA)
        assert not a.valid and a.attempts == 2 and "'summary' is a required property" in a.error
        b = llm.ChatClient("local", _endpoint(slow.url, max_retries=1, timeout_s=0.3)).ask(None, "q", SCHEMA)
        assert not b.valid and b.attempts == 2 and "no answer within 0.3 s" in b.error
        c = llm.ChatClient("local", _endpoint(refused.url, max_retries=3)).ask(None, "q", SCHEMA)
        assert not c.valid and c.attempts == 1 and "HTTP 400" in c.error and len(refused.requests) == 1
        assert all(KEY not in (x.error or "") for x in (a, b, c))
    finally:
        for s in (invalid, slow, refused):
            s.close()


def test_job_validation(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"name": "x", "steps": [{"type": "llm", "endpoint": "e", "prompt": "{{ text"}]}))
    with pytest.raises(EnrichError, match="needs schema"):
        load_job(bad)
    bad.write_text(
        yaml.safe_dump(
            {"name": "x", "steps": [{"type": "llm", "endpoint": "e", "prompt": "{{ text", "schema": SCHEMA}]}
        )
    )
    with pytest.raises(EnrichError, match="invalid prompt template"):
        load_job(bad)
    bad.write_text(
        yaml.safe_dump(
            {"name": "x", "steps": [{"type": "llm", "endpoint": "e", "prompt": "q", "schema": {"type": "wrong"}}]}
        )
    )
    with pytest.raises(EnrichError, match="invalid JSON schema"):
        load_job(bad)


@pytest.fixture(scope="module")
def corpus(spark, settings, tmp_path_factory):
    folder = tmp_path_factory.mktemp("llm-docs")
    source = f"llm-{uuid.uuid4().hex[:6]}"
    for name, text in DOCS.items():
        (folder / name).write_text(text)
    ingest(spark, settings, str(folder), source_name=source)
    run_extract(spark, settings, only=["text/plain"])
    return source, {
        r.source_path: r.object_id
        for r in spark.sql(
            "SELECT source_path, object_id FROM shoal.objects WHERE source_name = :s", args={"s": source}
        ).collect()
    }


def _job(tmp_path, source: str, name: str, endpoint: str, **step) -> object:
    path = tmp_path / f"{name}.yaml"
    spec = {
        "type": "llm",
        "name": "doctype",
        "endpoint": endpoint,
        "system": "You classify business documents. Answer with JSON only.",
        "prompt": "Document {{ object_id }}:\n{{ text }}\n\nGive its category and a one-sentence summary.",
        "schema": SCHEMA,
        **step,
    }
    path.write_text(yaml.safe_dump({"name": name, "sources": [source], "steps": [spec]}))
    return load_job(path)


def test_llm_step_on_spark_respects_limits_and_sends_only_redacted_text(spark, settings, corpus, tmp_path):
    def answer(body, n):
        text = body["messages"][-1]["content"]
        if "espresso" in text:
            return 200, '{"category": "support_email"}'  # always invalid: no summary
        category = "invoice" if "INVOICE" in text else "resume"
        return 200, json.dumps({"category": category, "summary": text.splitlines()[1][:40]})

    chat = Chat(answer, delay=0.3)
    try:
        s = settings.model_copy(
            update={"llm": LlmSettings(endpoints={"local": LlmEndpoint(base_url=chat.url, api_key=KEY, concurrency=2)})}
        )
        source, corpus = corpus
        job = _job(tmp_path, source, f"llm-{uuid.uuid4().hex[:6]}", "local", redact_pii=True)
        result = run_job(spark, s, job)
    finally:
        chat.close()
    assert result.objects == 3 and result.invalid["doctype"] == 1
    assert 1 <= chat.max_in_flight <= 2
    prompts = "\n".join(b["messages"][-1]["content"] for b in chat.requests)
    assert "mia.klein@example.com" not in prompts and "<EMAIL_ADDRESS>" in prompts
    rows = {
        r.object_id: r
        for r in spark.sql("SELECT * FROM shoal.llm_results WHERE job = :j", args={"j": job.name}).collect()
    }
    good = rows[corpus["invoice.txt"]]
    assert good.valid and json.loads(good.output)["category"] == "invoice" and good.attempts == 1
    assert good.endpoint == "local" and good.step == "doctype" and len(good.prompt_sha) == 16
    bad = rows[corpus["ticket.txt"]]
    assert not bad.valid and bad.output == "null" and "required property" in bad.error and bad.attempts == 3
    assert json.loads(rows[corpus["cv.txt"]].output)["category"] == "resume"
    stored = json.dumps([r.asDict() for r in rows.values()], default=str)
    paths = spark.sql(
        "SELECT enriched_paths FROM shoal.object_index WHERE object_id = :o", args={"o": corpus["invoice.txt"]}
    ).first()[0]
    files = [storage.read_bytes(p).decode() for p in paths if f"/{job.name}." in p]
    assert files and json.loads(files[0])["result"]["output"]["category"] == "invoice"
    assert KEY not in stored and all(KEY not in f for f in files)


def test_unconfigured_endpoint_is_refused_before_any_work(spark, settings, corpus, tmp_path):
    job = _job(tmp_path, corpus[0], "nowhere", "elsewhere")
    with pytest.raises(EnrichError, match="endpoint 'elsewhere', which is not configured"):
        run_job(spark, settings, job)


@pytest.mark.slow
def test_llama_cpp_server_answers_schema_valid_json(spark, settings, corpus, tmp_path):
    from tests.support.servers import llama_server

    with llama_server(tmp_path) as server:
        endpoint = LlmEndpoint(
            base_url=server.base_url, model="qwen", response_format="json_object", timeout_s=120, max_tokens=160
        )
        s = settings.model_copy(update={"llm": LlmSettings(endpoints={"llama": endpoint})})
        job = _job(tmp_path, corpus[0], f"llama-{uuid.uuid4().hex[:6]}", "llama")
        result = run_job(spark, s, job)
    assert result.objects == 3 and result.invalid["doctype"] == 0
    rows = spark.sql("SELECT object_id, output, valid FROM shoal.llm_results WHERE job = :j", args={"j": job.name})
    got = {r.object_id: json.loads(r.output) for r in rows.collect()}
    for name, oid in corpus[1].items():
        answer = got[oid]
        assert answer["category"] in SCHEMA["properties"]["category"]["enum"], name
        assert isinstance(answer["summary"], str) and answer["summary"].strip(), name
