"""The worst case a launch configuration permits, sent over HTTP to a ready server.

`max_running_requests` concurrent requests whose prompts together fill the KV pool (each
prefilled at the chunked-prefill size), plus one request at the full context length, all at
once and each decoding `max_new_tokens`: so the engine runs full prefill chunks on top of a
full running batch. A server that survives this serves whatever its flags let in; one that
dies under it would die in production. Requests go through the probe's helpers (one place
for how a request is sent).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from autotune.records import ProbeResult
from autotune.trial.probe import _generate, _session, token_ids

MARGIN_TOKENS = 8  # what the engine adds around a prompt (BOS, template): keep under the limits


@dataclass(frozen=True)
class WorstCase:
    """The load: `requests` prompts of `prompt_tokens`, plus one of `long_tokens`."""

    requests: int
    prompt_tokens: int
    long_tokens: int
    max_new_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.requests * (self.prompt_tokens + self.max_new_tokens) + self.long_tokens + self.max_new_tokens


def plan(*, kv_tokens: int, context_len: int, max_running_requests: int, max_new_tokens: int) -> WorstCase:
    """The worst case for a pool of `kv_tokens`: the long request takes the full context (or
    the pool, if smaller), the running batch shares what is left of the pool."""
    n = max(1, max_running_requests)
    long_n = max(1, min(context_len, kv_tokens) - max_new_tokens - MARGIN_TOKENS)
    rest = kv_tokens - long_n - max_new_tokens
    per = rest // n - max_new_tokens - MARGIN_TOKENS
    per = max(1, min(per, context_len - max_new_tokens - MARGIN_TOKENS))
    return WorstCase(n, per, long_n, max_new_tokens)


def run_worst_case(base_url: str, load: WorstCase, *, timeout_s: float,
                   headers: dict[str, str] | None = None) -> ProbeResult:
    """Send the whole load at once; ok only if every request came back 200."""
    t0 = time.monotonic()
    url = base_url + "/generate"
    sizes = [load.long_tokens] + [load.prompt_tokens] * load.requests
    with ThreadPoolExecutor(max_workers=len(sizes)) as pool:
        futures = [pool.submit(_generate, _session(headers), url, token_ids(n, seed=i), load.max_new_tokens, timeout_s)
                   for i, n in enumerate(sizes)]
        results = [f.result() for f in futures]
    elapsed = time.monotonic() - t0
    errors = [err for err in results if err]
    ok = sum(not err for err in results[1:])
    if errors:
        return ProbeResult(False, load.long_tokens, load.requests, ok, elapsed,
                           f"worst case: {len(errors)} of {len(sizes)} requests failed, first: {errors[0]}")
    return ProbeResult(True, load.long_tokens, load.requests, load.requests, elapsed)
