"""Language models behind an OpenAI-compatible chat endpoint, asked for JSON.

A call renders a prompt template (Jinja2, sandboxed: templates cannot reach Python
objects), posts `/chat/completions` with the JSON schema as the response format, and
validates the answer against that schema before anything is stored. Timeouts, HTTP 429/5xx,
broken connections and answers that are not valid JSON for the schema are retried with
exponential backoff; other HTTP errors are not. Endpoints come only from configuration
(`[llm.endpoints.NAME]`); redirects are not followed, so text never leaves for a host the
configuration does not name. The API key is sent as a bearer token and never logged.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass
from typing import Any

import httpx
import jsonschema
from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from shoal.exceptions import ShoalError

_env = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


class LlmError(ShoalError):
    """An LLM step is misconfigured, or its endpoint cannot be used."""


class _Retryable(Exception):
    """A failure worth another attempt (timeout, 429/5xx, connection, invalid answer)."""


@dataclass
class Answer:
    output: Any
    valid: bool
    error: str | None
    attempts: int
    latency_ms: int
    model: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_template(template: str, where: str) -> None:
    try:
        _env.parse(template)
    except TemplateError as exc:
        raise LlmError(f"{where}: invalid prompt template: {exc}") from None


def render(template: str, **values: Any) -> str:
    return _env.from_string(template).render(**values)


def check_schema(schema: dict[str, Any], where: str) -> None:
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise LlmError(f"{where}: invalid JSON schema: {exc.message}") from None


def prompt_sha(system: str | None, template: str, schema: dict[str, Any]) -> str:
    """Identifies the prompt version a result came from (template + system + schema)."""
    return hashlib.sha256(json.dumps([system, template, schema], sort_keys=True).encode()).hexdigest()[:16]


def parse_answer(content: str, schema: dict[str, Any]) -> Any:
    """The answer's JSON, validated against the schema; a ValueError says what is wrong."""
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"answer is not JSON ({exc.msg} at character {exc.pos}): {text[:120]!r}") from None
    errors = sorted(jsonschema.validators.validator_for(schema)(schema).iter_errors(value), key=lambda e: e.path)
    if errors:
        e = errors[0]
        where = "/".join(str(p) for p in e.path) or "(root)"
        raise ValueError(f"answer does not match the schema at {where}: {e.message[:200]}")
    return value


class ChatClient:
    """One configured endpoint. `endpoint` is `LlmEndpoint.model_dump()` with the key revealed."""

    def __init__(self, name: str, endpoint: dict[str, Any]) -> None:
        self.name = name
        self.url = endpoint["base_url"].rstrip("/") + "/chat/completions"
        self.model = endpoint.get("model") or "default"
        self.timeout = float(endpoint.get("timeout_s") or 60)
        self.attempts = int(endpoint.get("max_retries") or 0) + 1
        self.response_format = endpoint.get("response_format") or "json_schema"
        self.temperature = float(endpoint.get("temperature") or 0)
        self.max_tokens = int(endpoint.get("max_tokens") or 512)
        headers = {"Content-Type": "application/json"}
        if endpoint.get("api_key"):
            headers["Authorization"] = f"Bearer {endpoint['api_key']}"
        self.http = httpx.Client(timeout=self.timeout, headers=headers, follow_redirects=False)

    def close(self) -> None:
        self.http.close()

    def _body(self, system: str | None, user: str, schema: dict[str, Any]) -> dict[str, Any]:
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": user})
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.response_format == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "shoal_output", "schema": schema, "strict": True},
            }
        elif self.response_format == "json_object":
            body["response_format"] = {"type": "json_object", "schema": schema}
        return body

    def _once(self, body: dict[str, Any], schema: dict[str, Any]) -> Any:
        try:
            resp = self.http.post(self.url, json=body)
        except httpx.TimeoutException:
            raise _Retryable(f"no answer within {self.timeout:g} s") from None
        except httpx.TransportError as exc:
            raise _Retryable(f"cannot reach {self.url}: {type(exc).__name__}") from None
        if resp.status_code == 429 or resp.status_code >= 500:
            raise _Retryable(f"HTTP {resp.status_code}: {resp.text[:200]}")
        if resp.status_code != 200:
            raise LlmError(f"endpoint {self.name} ({self.url}) answered HTTP {resp.status_code}: {resp.text[:200]}")
        try:
            content = resp.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise _Retryable(f"not an OpenAI chat completion: {resp.text[:200]}") from None
        try:
            return parse_answer(content, schema)
        except ValueError as exc:
            raise _Retryable(str(exc)) from None

    def ask(self, system: str | None, user: str, schema: dict[str, Any]) -> Answer:
        body = self._body(system, user, schema)
        started = time.monotonic()
        attempts = 0
        retrying = Retrying(
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=0.5, max=8),
            retry=retry_if_exception_type(_Retryable),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    attempts += 1
                    output = self._once(body, schema)
        except (_Retryable, LlmError) as exc:
            return Answer(None, False, f"{exc} (after {attempts} attempt(s))", attempts, _ms(started), self.model)
        return Answer(output, True, None, attempts, _ms(started), self.model)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
