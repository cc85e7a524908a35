"""The worst case a launch configuration permits, sent over HTTP to a ready server.

`max_running_requests` requests at once — the engine's cap, counting the one being
prefilled — whose prompts together fill the KV pool: `max_running_requests - 1` running
requests, then one at the full context length. The long prompt is prefilled in full chunks
(`--chunked-prefill-size`) while the rest of the batch holds its decode memory, which is
the serving peak the flags allow. The batch is sent first, its bodies written before the
long request leaves, so the engine has it running when the long prefill starts (it decodes
`BATCH_DECODE_FACTOR` times the probe's output, enough to outlast the long prefill). (A
batch of `max_running_requests` plus the long one would leave the long one waiting for a
free slot, prefilled when the batch is already leaving.) A server that survives this
serves whatever its flags let in; one that dies under it would die in production.

Requests are the probe's (OpenAI-compatible completions with token-id prompts, at the engine
adapter's `probe_path`: the same body, so every engine serves it), one connection each, on
plain `http.client` connections so that "sent" and "answered" are two separate steps.

The whole worst case has one deadline. A request unanswered by then — the server still up —
is counted as timed out, not failed: it says the machine computes slower than the deadline
allows, not that the config does not fit (`ProbeResult.timed_out`).

The simulated SGLang server also takes the same load as one description (at the path its
`/server_info` names under `records.WORST_CASE_INFO_KEY`): it admits the whole load in one step, so the peak does not
depend on how fast thousands of connections reach it, and no thread per request is needed.
A real engine never advertises it and always gets the real concurrent requests.
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from autotune.records import ProbeResult
from autotune.trial.probe import BodyOf, completion_body, token_ids

MARGIN_TOKENS = 8  # what the engine adds around a prompt (BOS, template): keep under the limits
BATCH_DECODE_FACTOR = 16


@dataclass(frozen=True)
class WorstCase:
    """The load: `requests` prompts of `prompt_tokens` decoding `batch_new_tokens` (the running
    batch, `max_running_requests - 1`), then one of `long_tokens` decoding `max_new_tokens`."""

    requests: int
    prompt_tokens: int
    batch_new_tokens: int
    long_tokens: int
    max_new_tokens: int


def plan(*, kv_tokens: int, context_len: int, max_running_requests: int, max_new_tokens: int) -> WorstCase:
    """The long request takes the full context (or the pool, if smaller); the other
    `max_running_requests - 1` share what is left of the pool, so the two together fill it."""
    n = max(1, max_running_requests) - 1
    batch_new = max_new_tokens * BATCH_DECODE_FACTOR
    long_n = max(1, min(context_len, kv_tokens) - max_new_tokens - MARGIN_TOKENS)
    if n == 0:  # one request at a time: the long one is the whole worst case
        return WorstCase(0, 1, 1, long_n, max_new_tokens)
    rest = kv_tokens - long_n - max_new_tokens
    per = rest // n - batch_new - MARGIN_TOKENS
    if per < 1:  # a pool that holds little beyond the long request: short outputs, one-token prompts
        batch_new = max(1, rest // n - 1 - MARGIN_TOKENS)
        per = 1
    per = min(per, context_len - batch_new - MARGIN_TOKENS)
    return WorstCase(n, per, batch_new, long_n, max_new_tokens)


@dataclass(frozen=True)
class Endpoint:
    """Where the requests go: the server's base URL, the completions path its adapter names,
    the served model name and any auth headers."""

    base_url: str
    path: str
    model: str
    headers: dict[str, str]


def _connection(to: Endpoint, timeout_s: float) -> http.client.HTTPConnection:
    parts = urlsplit(to.base_url)
    return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=max(0.001, timeout_s))


def _send(to: Endpoint, path: str, body: dict[str, Any], timeout_s: float) -> http.client.HTTPConnection:
    """Write one request; the answer is read by `_answer`."""
    conn = _connection(to, timeout_s)
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json", **to.headers})
    return conn


TIMED_OUT = "timed out"


def _answer(conn: http.client.HTTPConnection, end: float) -> str:
    """'' on a 200, `TIMED_OUT` when no answer came by `end` (monotonic), else what went wrong."""
    try:
        if conn.sock is not None:  # the deadline is the whole worst case's, not each read's
            conn.sock.settimeout(max(0.001, end - time.monotonic()))
        resp = conn.getresponse()
        text = resp.read()[:300].decode(errors="replace")
        return "" if resp.status == 200 else f"HTTP {resp.status}: {text}"
    except TimeoutError:
        return TIMED_OUT
    except (OSError, http.client.HTTPException) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()


def run_worst_case(base_url: str, load: WorstCase, *, deadline_s: float, model: str, path: str = "/v1/completions",
                   headers: dict[str, str] | None = None, description_path: str | None = None,
                   body: BodyOf = completion_body) -> ProbeResult:
    """Send the batch, then the long request, to `base_url` + `path` (the adapter's `probe_path`)
    naming `model` (the served model name); ok only if every request came back 200 within
    `deadline_s` of the first being sent. With `description_path` (the simulator's) the load
    goes as one description instead."""
    to = Endpoint(base_url, path, model, headers or {})
    t0 = time.monotonic()
    end = t0 + deadline_s
    if description_path:
        results = _described(to, description_path, load, end)
    else:
        results = _concurrent(to, load, end, body)
    return _result(load, results, time.monotonic() - t0, deadline_s)


def _concurrent(to: Endpoint, load: WorstCase, end: float, body: BodyOf = completion_body) -> list[str]:
    """The real thing: one connection per request, all written before any answer is read."""
    conns: list[http.client.HTTPConnection | str] = []
    sizes = [(load.prompt_tokens, load.batch_new_tokens)] * load.requests + [(load.long_tokens, load.max_new_tokens)]
    for i, (n, new) in enumerate(sizes):
        try:
            conns.append(_send(to, to.path, body(to.model, token_ids(n, seed=i), new), end - time.monotonic()))
        except TimeoutError:
            conns.append(TIMED_OUT)
        except (OSError, http.client.HTTPException) as exc:
            conns.append(f"{type(exc).__name__}: {exc}")
    return [c if isinstance(c, str) else _answer(c, end) for c in conns]


def _described(to: Endpoint, path: str, load: WorstCase, end: float) -> list[str]:
    """The simulator's form: one request naming the load; every request shares its answer."""
    body = {"model": to.model, "batch": {"requests": load.requests, "prompt_tokens": load.prompt_tokens,
                                         "max_tokens": load.batch_new_tokens},
            "long": {"prompt_tokens": load.long_tokens, "max_tokens": load.max_new_tokens}}
    try:
        err = _answer(_send(to, path, body, end - time.monotonic()), end)
    except TimeoutError:
        err = TIMED_OUT
    except (OSError, http.client.HTTPException) as exc:
        err = f"{type(exc).__name__}: {exc}"
    return [err] * (load.requests + 1)


def _result(load: WorstCase, results: list[str], elapsed: float, deadline_s: float) -> ProbeResult:
    errors = [err for err in results if err and err != TIMED_OUT]
    late = sum(err == TIMED_OUT for err in results)
    ok = sum(not err for err in results[:-1])
    if errors:
        return ProbeResult(False, load.long_tokens, load.requests, ok, elapsed,
                           f"worst case: {len(errors)} of {len(results)} requests failed, first: {errors[0]}", late)
    if late:
        long_late = results[-1] == TIMED_OUT
        return ProbeResult(False, load.long_tokens, load.requests, ok, elapsed,
                           f"worst case: {late} of {len(results)} requests unanswered at the {deadline_s:g} s deadline"
                           + (f" (the {load.long_tokens}-token request among them)" if long_late else ""), late)
    return ProbeResult(True, load.long_tokens, load.requests, load.requests, elapsed)
