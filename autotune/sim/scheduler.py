"""The simulated SGLang server's scheduler: continuous batching whose memory is charged while it runs.

As SGLang's scheduler does, waiting requests are admitted while the running batch has room
(`max_running_requests`, counting the requests being prefilled) and the KV pool has tokens
for their prompt and output; the admitted prompts are packed, in arrival order, into
prefill forwards of at most `--chunked-prefill-size` tokens (a long prompt spans several
forwards) while the requests already running hold their decode memory; a request joins the
running batch in the forward that completes its prompt; then every running request decodes
one token a step and leaves when done, giving back its memory and its KV tokens. The
serving peak is therefore a full chunked-prefill forward on top of a full running batch —
the worst case a launch configuration permits. A CUDA OOM anywhere kills the scheduler, and
with it the server (SGLang's runtime OOM).

The memory charged is a function of what was admitted together, never of thread timing:
`submit_all` hands a whole load over in one piece (the worst-case description), so its
peak is the same however fast the client is. Only requests that arrived together are packed
into one forward: requests on separate connections are prefilled one by one, so how many
happened to arrive between two steps (the probe's burst) does not change a forward's size. HTTP handler threads call `submit` (one
request) or `submit_all` and block until their requests are done.
"""

from __future__ import annotations

import collections
import queue
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from autotune.sim import costs
from autotune.sim import faults as sim_faults
from autotune.sim import sglang_batch_log as batch_log
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
    held_bytes: int = 0
    started_s: float = 0.0
    arrival: int = 0  # which submission it came in: forwards pack only requests that arrived together


class Scheduler(threading.Thread):
    """Continuous batching over `engine`; see the module docstring."""

    def __init__(self, launcher: Launcher, engine: SglangEngine) -> None:
        super().__init__(daemon=True, name="scheduler")
        self.launcher, self.engine = launcher, engine
        self.queue: queue.Queue[list[Request]] = queue.Queue()
        self.waiting: collections.deque[Request] = collections.deque()
        self.running: list[Request] = []
        self.leaving: dict[int, list[Request]] = {}  # decode step -> requests whose last token it is
        self.kv_held = 0  # KV tokens the running requests hold (prompt + output)
        self.modelled_s = 0.0
        self.steps = 0
        self.slowdown = sim_faults.serve_slowdown()
        self.arrivals = 0
        self.arrivals_lock = threading.Lock()

    def submit(self, req: Request) -> Request:
        return self.submit_all([req])[0]

    def submit_all(self, reqs: list[Request]) -> list[Request]:
        """Queue `reqs` as one arrival (the scheduler sees all or none of them), wait for all."""
        with self.arrivals_lock:
            self.arrivals += 1
            for req in reqs:
                req.arrival = self.arrivals
        self.queue.put(reqs)
        for req in reqs:
            req.done.wait()
        return reqs

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
            self.waiting.extend(self.queue.get())
        while True:
            try:
                self.waiting.extend(self.queue.get_nowait())
            except queue.Empty:
                return

    def step(self) -> None:
        admitted = self.admissible()
        if admitted:
            self.prefill(admitted)
        if self.running:
            self.decode_step()

    def kv_in_use(self) -> int:
        return self.kv_held

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
        seconds *= self.slowdown
        self.engine.io.advance(seconds)
        self.modelled_s += seconds

    def forwards(self, batch: list[Request]) -> list[tuple[int, int, list[Request]]]:
        """The prefill forwards of `batch`: (tokens, sequences, requests it completes) each. Prompts
        are packed in order up to the chunk; without chunked prefill a prompt goes whole, and
        forwards pack up to `max_prefill_tokens`."""
        chunk = self.engine.args.chunked_prefill_size
        limit = chunk if chunk > 0 else max(1, self.engine.args.max_prefill_tokens)
        out: list[tuple[int, int, list[Request]]] = []
        tokens, seqs, done = 0, 0, []
        for req in batch:
            left = req.tokens
            while left > 0:
                if chunk <= 0 and tokens and tokens + left > limit:
                    take = 0  # a whole prompt that does not fit this forward starts the next
                else:
                    take = min(left, limit - tokens) if chunk > 0 else left
                    tokens, seqs, left = tokens + take, seqs + 1, left - take
                    if left == 0:
                        done.append(req)
                if take == 0 or tokens >= limit:
                    out.append((tokens, seqs, done))
                    tokens, seqs, done = 0, 0, []
        if tokens:
            out.append((tokens, seqs, done))
        return out

    def prefill(self, batch: list[Request]) -> None:
        """Run the forwards of `batch`: each charges its activations on top of what the running
        requests hold; the requests a forward completes then join the running batch (one
        allocation for all of them), so later forwards run on top of them."""
        queued = len(self.waiting) + self.queue.qsize()
        left = len(batch)
        runs: list[list[Request]] = []
        for req in batch:  # requests that came separately are prefilled separately, as they always were
            if runs and runs[-1][-1].arrival == req.arrival:
                runs[-1].append(req)
            else:
                runs.append([req])
        forwards = [f for run in runs for f in self.forwards(run)]
        pending = sum(tokens for tokens, _, _ in forwards)
        for tokens, seqs, done in forwards:
            started = self.modelled_s
            self.advance(self.engine.forward(tokens))
            pending -= tokens
            self.engine.io.log(0, batch_log.prefill_line(
                self.engine, seqs=seqs, tokens=tokens, kv_used=self.kv_in_use() + tokens, running=len(self.running),
                queued=left - len(done) + queued, pending=pending,
                throughput=tokens / max(1e-9, self.modelled_s - started)))
            left -= len(done)
            if done:
                held = self.engine.admit(len(done))
                finish_at = self.steps + 1
                for req in done:
                    req.held_bytes, req.started_s = held, started
                    self.leaving.setdefault(finish_at + max(1, req.max_new) - 1, []).append(req)
                self.running.extend(done)
                self.kv_held += sum(r.tokens + r.max_new for r in done)

    def decode_step(self) -> None:
        self.advance(costs.DECODE_STEP_S)
        self.steps += 1
        if self.steps % DECODE_LOG_INTERVAL == 0:
            n = len(self.running)
            self.engine.io.log(0, batch_log.decode_line(
                self.engine, running=n, kv_used=self.kv_in_use(), queued=len(self.waiting) + self.queue.qsize(),
                throughput=n / costs.DECODE_STEP_S))
        finished = self.leaving.pop(self.steps, [])
        if not finished:
            return
        gone = {id(r) for r in finished}
        self.running = [r for r in self.running if id(r) not in gone]
        self.kv_held -= sum(r.tokens + r.max_new for r in finished)
        self.engine.finish(sum(r.held_bytes for r in finished))
        for req in finished:
            req.seconds = self.modelled_s - req.started_s
            req.done.set()
