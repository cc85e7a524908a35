"""The post-ready load probe: a server that is "ready" must also survive real requests.

One request near the context length, sent as token ids (so no tokenizer is involved and
the length is exact), then a burst of concurrent requests. A server that dies under this
is OOM_RUNTIME (or CRASH), not READY: its first long request in production would kill it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

from autotune.engines.base import completion_body
from autotune.records import ProbeResult
from autotune.settings import ProbeSpec


def token_ids(n: int, seed: int = 0) -> list[int]:
    """A deterministic, unremarkable sequence of ids inside any vocabulary (>= 32k)."""
    return [1000 + (i * 7919 + seed) % 30000 for i in range(n)]


BodyOf = Callable[[str, list[int], int], dict[str, Any]]  # (model, token ids, new tokens) -> the request


def _generate(session: requests.Session, url: str, model: str, ids: list[int], max_new: int, timeout_s: float,
              body: BodyOf = completion_body) -> str:
    """'' on success, else what went wrong (one request, as the engine adapter's `probe_body` writes it)."""
    try:
        resp = session.post(url, json=body(model, ids, max_new), timeout=timeout_s)
    except requests.RequestException as exc:
        return f"{type(exc).__name__}: {exc}"
    if resp.status_code != 200:
        return f"HTTP {resp.status_code}: {resp.text[:300]}"
    return ""


def _session(headers: dict[str, str] | None) -> requests.Session:
    session = requests.Session()
    session.headers.update(headers or {})
    return session


def run_probe(base_url: str, spec: ProbeSpec, *, context_len: int, kv_tokens: int, model: str,
              path: str = "/v1/completions", headers: dict[str, str] | None = None,
              body: BodyOf = completion_body) -> ProbeResult:
    """Probe the server at `base_url` + `path` (the engine adapter's `probe_path`), naming `model`
    (its served model name: the model path unless the launch renames it)."""
    t0 = time.monotonic()
    url = base_url + path
    session = _session(headers)
    long_n = 0
    if spec.long_request:
        long_n = max(1, min(context_len, kv_tokens) - spec.max_new_tokens - 8)
        error = _generate(session, url, model, token_ids(long_n), spec.max_new_tokens, spec.timeout_s, body)
        if error:
            return ProbeResult(False, long_n, spec.burst, 0, time.monotonic() - t0, f"long request: {error}")
    burst_n = max(1, min(spec.burst_tokens, context_len - spec.max_new_tokens - 8))
    ok = 0
    errors: list[str] = []
    if spec.burst:
        with ThreadPoolExecutor(max_workers=spec.burst) as pool:
            futures = [pool.submit(_generate, _session(headers), url, model, token_ids(burst_n, seed=i),
                                   spec.max_new_tokens, spec.timeout_s, body) for i in range(spec.burst)]
            for fut in futures:
                err = fut.result()
                ok += not err
                if err:
                    errors.append(err)
    elapsed = time.monotonic() - t0
    if errors:
        return ProbeResult(False, long_n, spec.burst, ok, elapsed, f"burst: {len(errors)} failed, first: {errors[0]}")
    return ProbeResult(True, long_n, spec.burst, ok, elapsed)
