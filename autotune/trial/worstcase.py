"""The worst case a launch configuration permits, sent over HTTP to a ready server.

`max_running_requests` concurrent requests whose prompts together fill the KV pool, then one
request at the full context length: the long prompt is prefilled in full chunks
(`--chunked-prefill-size`) while the whole running batch holds its decode memory, which is
the serving peak the flags allow. The batch is sent first, its bodies written before the
long request leaves, so the engine has it running when the long prefill starts (it decodes
`BATCH_DECODE_FACTOR` times the probe's output, enough to outlast the long prefill). A
server that survives this serves whatever its flags let in; one that dies under it would
die in production.

Requests are the probe's: the OpenAI-compatible completions request with token-id prompts at the
engine adapter's `probe_path` (SGLang and vLLM both serve it, neither needs a tokenizer for it;
vLLM has no `/generate`), on plain `http.client` connections so that "sent" and "answered" are
two separate steps.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from autotune.records import ProbeResult
from autotune.trial.probe import token_ids

MARGIN_TOKENS = 8  # what the engine adds around a prompt (BOS, template): keep under the limits
BATCH_DECODE_FACTOR = 16


@dataclass(frozen=True)
class WorstCase:
    """The load: `requests` prompts of `prompt_tokens` decoding `batch_new_tokens`, then one of
    `long_tokens` decoding `max_new_tokens`."""

    requests: int
    prompt_tokens: int
    batch_new_tokens: int
    long_tokens: int
    max_new_tokens: int


def plan(*, kv_tokens: int, context_len: int, max_running_requests: int, max_new_tokens: int) -> WorstCase:
    """The long request takes the full context (or the pool, if smaller); the running batch
    shares what is left of the pool, so the two together fill it."""
    n = max(1, max_running_requests)
    batch_new = max_new_tokens * BATCH_DECODE_FACTOR
    long_n = max(1, min(context_len, kv_tokens) - max_new_tokens - MARGIN_TOKENS)
    rest = kv_tokens - long_n - max_new_tokens
    per = rest // n - batch_new - MARGIN_TOKENS
    if per < 1:  # a pool that holds little beyond the long request: short outputs, one-token prompts
        batch_new = max(1, rest // n - 1 - MARGIN_TOKENS)
        per = 1
    per = min(per, context_len - batch_new - MARGIN_TOKENS)
    return WorstCase(n, per, batch_new, long_n, max_new_tokens)


def _send(base_url: str, target: Target, ids: list[int], max_new: int, timeout_s: float) -> http.client.HTTPConnection:
    """Write one completions request (the probe's body); the answer is read by `_answer`."""
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout_s)
    body = {"model": target.model, "prompt": ids, "max_tokens": max_new, "temperature": 0, "ignore_eos": True}
    conn.request("POST", target.path, body=json.dumps(body),
                 headers={"Content-Type": "application/json", **target.headers})
    return conn


def _answer(conn: http.client.HTTPConnection) -> str:
    """'' on a 200, else what went wrong."""
    try:
        resp = conn.getresponse()
        text = resp.read()[:300].decode(errors="replace")
        return "" if resp.status == 200 else f"HTTP {resp.status}: {text}"
    except (OSError, http.client.HTTPException) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()


@dataclass(frozen=True)
class Target:
    """Where the requests go: the served `model` name, the adapter's `probe_path`, extra headers."""

    model: str
    path: str = "/v1/completions"
    headers: Mapping[str, str] = field(default_factory=dict)


def run_worst_case(base_url: str, load: WorstCase, target: Target, *, timeout_s: float) -> ProbeResult:
    """Send the batch, then the long request; ok only if every request came back 200."""
    t0 = time.monotonic()
    conns: list[http.client.HTTPConnection | str] = []
    sizes = [(load.prompt_tokens, load.batch_new_tokens)] * load.requests + [(load.long_tokens, load.max_new_tokens)]
    for i, (n, new) in enumerate(sizes):
        try:
            conns.append(_send(base_url, target, token_ids(n, seed=i), new, timeout_s))
        except (OSError, http.client.HTTPException) as exc:
            conns.append(f"{type(exc).__name__}: {exc}")
    results = [c if isinstance(c, str) else _answer(c) for c in conns]
    elapsed = time.monotonic() - t0
    errors = [err for err in results if err]
    ok = sum(not err for err in results[:-1])
    if errors:
        return ProbeResult(False, load.long_tokens, load.requests, ok, elapsed,
                           f"worst case: {len(errors)} of {len(sizes)} requests failed, first: {errors[0]}")
    return ProbeResult(True, load.long_tokens, load.requests, load.requests, elapsed)
