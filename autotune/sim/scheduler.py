"""The simulated SGLang server's scheduler: continuous batching whose memory is charged while it runs.

As SGLang's scheduler does, waiting requests are admitted while the running batch has room
(`max_running_requests`) and the KV pool has tokens for their prompt and output; each
admitted group is prefilled chunk by chunk (`--chunked-prefill-size`) while the requests
already running hold their decode memory; then every running request decodes one token a
step and leaves when done, giving back its memory and its KV tokens. The serving peak is
therefore a full chunked-prefill forward on top of a full running batch — the worst case a
launch configuration permits. A CUDA OOM anywhere kills the scheduler, and with it the
server (SGLang's runtime OOM).

HTTP handler threads call `submit` concurrently and block until their request is done.
"""

from __future__ import annotations

import collections
import queue
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from autotune.sim import costs
from autotune.sim.sglang_engine import SchedulerFailure, SglangEngine

if TYPE_CHECKING:
    from autotune.sim.sglang import Launcher

DECODE_LOG_INTERVAL = 40  # SGLang's --decode-log-interval default


@dataclass
class Request:
    tokens: int
    max_new: int
    done: threading.Event = field(default_factory=threading.Event)
    error: str = ""
    seconds: float = 0.0  # modelled seconds from admission to the last token
    steps_left: int = 0
    held_bytes: int = 0
    started_s: float = 0.0


class Scheduler(threading.Thread):
    """Continuous batching over `engine`; see the module docstring."""

    def __init__(self, launcher: Launcher, engine: SglangEngine) -> None:
        super().__init__(daemon=True, name="scheduler")
        self.launcher, self.engine = launcher, engine
        self.queue: queue.Queue[Request] = queue.Queue()
        self.waiting: collections.deque[Request] = collections.deque()
        self.running: list[Request] = []
        self.modelled_s = 0.0
        self.steps = 0

    def submit(self, req: Request) -> Request:
        self.queue.put(req)
        req.done.wait()
        return req

    def run(self) -> None:
        first = True
        while True:
            self.take(block=not self.running and not self.waiting)
            try:
                if first:
                    first = False
                    self.engine.io.enter("serve")
                self.step()
            except SchedulerFailure as exc:
                self.launcher.fail_schedulers(exc)

    def take(self, *, block: bool) -> None:
        """Move what arrived into the waiting line (blocking while there is nothing to do)."""
        if block:
            self.waiting.append(self.queue.get())
        while True:
            try:
                self.waiting.append(self.queue.get_nowait())
            except queue.Empty:
                return

    def step(self) -> None:
        admitted = self.admissible()
        if admitted:
            self.prefill(admitted)
        if self.running:
            self.decode_step()

    def kv_in_use(self) -> int:
        return sum(r.tokens + r.max_new for r in self.running)

    def admissible(self) -> list[Request]:
        """First come, first served, while the batch and the KV pool have room."""
        limit = max(1, self.engine.state.max_running_requests)
        free_kv = self.engine.state.kv_tokens - self.kv_in_use()
        out: list[Request] = []
        while self.waiting and len(self.running) + len(out) < limit:
            need = self.waiting[0].tokens + self.waiting[0].max_new
            if need > free_kv:
                break
            free_kv -= need
            out.append(self.waiting.popleft())
        return out

    def advance(self, seconds: float) -> None:
        self.engine.io.advance(seconds)
        self.modelled_s += seconds

    def prefill(self, batch: list[Request]) -> None:
        """Prefill the admitted requests in turn (forwards of at most a chunk each); each joins the
        running batch, holding its decode memory, as soon as its prompt is done — so the last
        prompts are prefilled on top of the ones before them, as SGLang's chunked prefill does."""
        for i, req in enumerate(batch):
            started = self.modelled_s
            self.advance(self.engine.forward(req.tokens))
            used = (self.kv_in_use() + req.tokens) / max(1, self.engine.state.kv_tokens)
            self.engine.io.log(0, f"Prefill batch. #new-seq: 1, #new-token: {req.tokens}, #cached-token: 0, "
                                  f"token usage: {used:.2f}, #running-req: {len(self.running)}, "
                                  f"#queue-req: {len(batch) - i - 1 + len(self.waiting) + self.queue.qsize()},")
            req.held_bytes = self.engine.admit()
            req.steps_left = max(1, req.max_new)
            req.started_s = started
            self.running.append(req)

    def decode_step(self) -> None:
        self.advance(costs.DECODE_STEP_S)
        self.steps += 1
        for req in self.running:
            req.steps_left -= 1
        if self.steps % DECODE_LOG_INTERVAL == 0:
            kv = self.engine.state.kv_tokens
            n = len(self.running)
            self.engine.io.log(0, f"Decode batch. #running-req: {n}, #token: {self.kv_in_use()}, "
                                  f"token usage: {self.kv_in_use() / max(1, kv):.2f}, "
                                  f"gen throughput (token/s): {n / costs.DECODE_STEP_S:.2f}, "
                                  f"#queue-req: {len(self.waiting) + self.queue.qsize()},")
        finished = [r for r in self.running if r.steps_left <= 0]
        self.running = [r for r in self.running if r.steps_left > 0]
        for req in finished:
            self.engine.finish(req.held_bytes)
            req.seconds = self.modelled_s - req.started_s
            req.done.set()
