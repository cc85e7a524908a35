"""SGLang's start-up, memory accounting and failures, step by step, against an `EngineIO`.

The same procedure drives the simulated server (where `EngineIO` is a set of real rank
processes allocating on the simulated node, printing real log lines and sleeping scaled
time) and the ground-truth evaluation of the benchmark (where it is plain arithmetic).

Memory follows SGLang's accounting (reference/engines.md §3): the KV budget is
`min_free_after_weights − pre_model_load_free · (1 − mfs)`, hybrid models carve their
recurrent-state pool out of it first, 0.5.23 counts draft weights before the pool while
0.5.9 loads the draft afterwards from the slack, and CUDA graphs, torch.compile, the
req_to_token pool and activations all come out of the slack — plus the hidden costs of
`costs.py`. Failures raise `SchedulerFailure` with the exception text SGLang prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from autotune.engines.sglang import rules
from autotune.modelshape import ModelShape, state_bytes_per_request
from autotune.records import GIB, MIB
from autotune.sim import costs
from autotune.sim.node import SimOutOfMemory
from autotune.sim.sglang_args import Resolved, captured_bs
from autotune.sim.sglang_frames import SRT, frames


class EngineIO(Protocol):
    """What the procedure needs from the machine. Ranks are 0..tp-1."""

    tp: int

    def free(self, rank: int) -> int: ...
    def total(self, rank: int) -> int: ...
    def gpu_index(self, rank: int) -> int: ...
    def alloc(self, rank: int, nbytes: int) -> None: ...  # raises SimOutOfMemory
    def release(self, rank: int, nbytes: int) -> None: ...
    def log(self, rank: int | None, message: str) -> None: ...  # rank None: the launcher
    def advance(self, seconds: float) -> None: ...  # modelled time passes
    def enter(self, phase: str) -> None: ...  # fault hooks (hang/crash at a phase)

    def rendezvous(self) -> str | None:
        """Rank 0 opens the distributed-init store on its port and holds it for the server's life;
        torch's exception line when the port is taken, else None."""
        ...


class SchedulerFailure(Exception):
    """An exception inside the scheduler processes of `ranks`: what SGLang's traceback ends with."""

    def __init__(self, exc_line: str, frames: tuple[str, ...], ranks: tuple[int, ...], phase: str) -> None:
        super().__init__(exc_line)
        self.exc_line, self.frames, self.ranks, self.phase = exc_line, frames, ranks, phase
        self.per_rank: dict[int, str] = {}  # a rank's own text where it differs (its GPU in an OOM)

    def line_for(self, rank: int) -> str:
        return self.per_rank.get(rank, self.exc_line)


@dataclass
class EngineState:
    """What the start-up established; /server_info and the summary line report it."""

    pre_free_bytes: int = 0
    weights_bytes: int = 0
    draft_bytes: int = 0
    kv_tokens: int = 0
    kv_bytes: int = 0
    mamba_slots: int = 0
    max_running_requests: int = 0
    graph_bytes: dict[str, int] = field(default_factory=dict)
    phase_seconds: dict[str, float] = field(default_factory=dict)
    graph_seconds: dict[str, float] = field(default_factory=dict)  # capture seconds by SGLang's phase key
    available_after_bytes: int = 0


class SglangEngine:
    def __init__(self, shape: ModelShape, args: Resolved, io: EngineIO, boot_jitter_bytes: int = 0) -> None:
        """`boot_jitter_bytes`: extra memory this boot's CUDA context and driver take (real cold
        boots differ by tens of MiB); 0 in the deterministic tests and the ground truth."""
        self.shape, self.args, self.io = shape, args, io
        self.boot_jitter_bytes = max(0, int(boot_jitter_bytes))
        self.state = EngineState()
        self.t = args.traits  # what differs between releases (engines/sglang/traits.py)
        self._mamba_ratio = 1

    # -- helpers ------------------------------------------------------------------------

    def fail(self, exc_line: str, phase: str, ranks: tuple[int, ...] | None = None, *,
             site: str | None = None) -> SchedulerFailure:
        """`site`: the frames of a failure raised elsewhere than the phase's usual place."""
        ranks = tuple(range(self.io.tp)) if ranks is None else ranks
        return SchedulerFailure(exc_line, frames(self.args.version, site or phase), ranks, phase)

    def min_free(self) -> int:
        return min(self.io.free(r) for r in range(self.io.tp))

    def alloc_all(self, nbytes: int, phase: str, chunks: int = 1) -> None:
        """Allocate `nbytes` on every rank (in `chunks` pieces); OOM on any rank fails them."""
        failed: list[tuple[int, SimOutOfMemory]] = []
        piece = max(1, nbytes // chunks)
        for rank in range(self.io.tp):
            left = nbytes
            try:
                while left > 0:
                    step = min(piece, left)
                    self.io.alloc(rank, step)
                    left -= step
            except SimOutOfMemory as oom:
                failed.append((rank, oom))
        if failed:
            exc = self.fail(self.torch_oom(failed[0][1]), phase, tuple(r for r, _ in failed))
            exc.per_rank = {r: self.torch_oom(oom) for r, oom in failed}
            raise exc

    def torch_oom(self, oom: SimOutOfMemory) -> str:
        reserved = max(0, oom.held_by_self - int(oom.held_by_self * 0.985))
        return (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {_gib(oom.requested)} GiB. "
                f"GPU {oom.gpu} has a total capacity of {_gib(oom.total)} GiB of which {_gib(oom.free)} GiB is free. "
                f"Including non-PyTorch memory, this process has {_gib(oom.held_by_self)} GiB memory in use. "
                f"Of the allocated memory {_gib(oom.held_by_self - reserved)} GiB is allocated by PyTorch, and "
                f"{reserved / MIB:.2f} MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory "
                "is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")

    def log_all(self, message: str) -> None:
        for rank in range(self.io.tp):
            self.io.log(rank, message)

    def log_each(self, message: Callable[[int], str], ranks: Sequence[int] | None = None) -> None:
        """A line each rank prints with its own figures (its own GPU's free memory)."""
        for rank in range(self.io.tp) if ranks is None else ranks:
            self.io.log(rank, message(rank))

    def frees(self) -> list[int]:
        return [self.io.free(r) for r in range(self.io.tp)]

    def timed(self, phase: str, seconds: float) -> None:
        self.io.advance(seconds)
        self.state.phase_seconds[phase] = self.state.phase_seconds.get(phase, 0.0) + seconds

    # -- the start-up, in SGLang's order ---------------------------------------------------

    def start(self) -> None:
        """Everything the schedulers do before reporting ready. Raises SchedulerFailure."""
        self.init_dist()
        self.load_weights(draft=False)
        if self.args.spec_algorithm and self.t.draft_weights_before_pool:
            self.load_weights(draft=True)
        self.kv_pool()
        self.capture_graphs()
        if self.args.spec_algorithm and not self.t.draft_weights_before_pool:
            self.late_draft()
        self.summary()

    def init_dist(self) -> None:
        io, tp = self.io, self.io.tp
        io.enter("init_dist")
        before = [io.free(r) for r in range(tp)]
        self.log_all("Init torch distributed begin." if self.t.legacy_log_wording else "Init parallel begin.")
        taken = io.rendezvous()  # init_distributed_environment: rank 0's TCPStore on --nccl-port
        if taken:
            raise self.fail(taken, "init_dist_store", (0,))
        self.alloc_all(costs.CUDA_CONTEXT_BYTES + self.boot_jitter_bytes + costs.nccl_bytes(tp), "init_dist")
        self.timed("init_dist", costs.init_seconds(tp))
        local = [io.free(r) for r in range(tp)]
        pre = min(local)
        for r in range(tp):
            usage = (before[r] - local[r]) / GIB
            if self.t.legacy_log_wording:
                io.log(r, f"Init torch distributed ends. elapsed={costs.init_seconds(tp):.2f} s, mem usage={usage:.2f} GB")
            else:
                io.log(r, f"Init parallel ends. elapsed={costs.init_seconds(tp):.2f} s")
        unbalanced = tuple(r for r in range(tp) if tp > 1 and pre < 0.9 * local[r])
        if unbalanced:
            r = unbalanced[0]
            raise self.fail(
                "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
                f"{'min_per_gpu_memory' if self.t.legacy_log_wording else 'pre_model_load_memory'}={pre / GIB:.3f}, "
                f"local_gpu_memory={local[r] / GIB:.3f}, "
                f"local_gpu_memory * 0.9={0.9 * local[r] / GIB:.3f}", "init_dist", unbalanced)
        if not self.t.legacy_log_wording:
            for r in range(tp):
                io.log(r, f"Memory baseline taken. mem usage={(before[r] - local[r]) / GIB:.2f} GB")
        self.state.pre_free_bytes = pre

    def load_weights(self, *, draft: bool) -> None:
        io, shape = self.io, self.shape
        io.enter("load_weights")
        param_bytes = shape.weight_bytes_per_rank(io.tp, draft=draft)
        resident = costs.weights_resident_bytes(param_bytes)
        before = [io.free(r) for r in range(io.tp)]
        self.log_each(lambda r: f"Load weight begin. avail mem={before[r] / GIB:.2f} GB")
        if not draft and shape.tp_split_problem(io.tp):
            raise self.tp_split_failure()
        seconds = costs.weight_load_seconds(param_bytes)
        self.alloc_all(resident, "load_weights", chunks=16)
        self.timed("load_weights", seconds)
        arch = _draft_class(shape.architecture) if draft else shape.architecture
        for r in range(io.tp):
            after = io.free(r)
            detail = f"dtype=torch.{shape.dtype}" if self.t.legacy_log_wording else _quant_str(shape)
            detail = f"{detail}, " if detail else ""
            io.log(r, f"Load weight end. elapsed={seconds:.2f} s, type={arch}, {detail}"
                      f"avail mem={after / GIB:.2f} GB, mem usage={(before[r] - after) / GIB:.2f} GB.")
        if draft:
            self.state.draft_bytes = resident
        else:
            self.state.weights_bytes = resident

    def tp_split_failure(self) -> SchedulerFailure:
        """SGLang builds the model before loading weights; its attention layer asserts that
        the heads split over the TP ranks (bare asserts: the source line is the message)."""
        shape, tp = self.shape, self.io.tp
        kv = shape.num_kv_heads
        if shape.num_attention_heads % tp:
            check = "assert self.total_num_heads % tp_size == 0"
        elif kv >= tp:
            check = "assert self.total_num_kv_heads % tp_size == 0"
        else:
            check = "assert tp_size % self.total_num_kv_heads == 0"
        # the model file's attention __init__ (its line differs per model: not checked by the fidelity script)
        model = f'{SRT}/models/{shape.model_type}.py", line 171, in __init__'
        return SchedulerFailure(f"    {check}\nAssertionError", (*frames(self.args.version, "build_model"), model),
                                tuple(range(tp)), "load_weights")

    # -- the KV pool ------------------------------------------------------------------------

    def kv_pool(self) -> None:
        io, a = self.io, self.args
        io.enter("kv_pool")
        if self.t.legacy_log_wording:  # 0.5.9's model runner, on rank 0, before it sizes the pool
            io.log(0, f"Using KV cache dtype: {a.kv_dtype_name}")
        available = self.min_free()
        slack = self.state.pre_free_bytes * (1 - a.mem_fraction_static)
        rest = available - slack
        per_req = sum(state_bytes_per_request(self.shape, io.tp))
        mamba_bytes = 0
        if per_req:
            rest, mamba_bytes = self.mamba_pool(rest, per_req)
        if rest <= 0 and self.t.fails_early_without_slots:
            min_viable = 1 - available / self.state.pre_free_bytes
            raise self.fail(
                "ValueError: Loaded weights leave no GPU memory for the KV cache under "
                f"--mem-fraction-static={a.mem_fraction_static}. Raise --mem-fraction-static above "
                f"{math.ceil(min_viable * 1000 + 1e-9) / 1000:.3f} (minimum viable = 1 - available/pre = {min_viable:.4f}). "
                "If using speculative decoding, draft weights are now counted.", "kv_pool")
        cell, draft_cell = self.cell_bytes()
        tokens = int(rest // (cell + draft_cell)) // a.page_size * a.page_size
        if a.max_total_tokens and tokens > 0:
            if a.max_total_tokens > tokens:
                self.log_all(f"max_total_tokens={a.max_total_tokens} is larger than the profiled value {tokens}. "
                             "Use the profiled value instead.")
            else:
                tokens = int(a.max_total_tokens)
        if tokens <= 0:
            value = f"self.server_args.mem_fraction_static={a.mem_fraction_static}" if self.t.legacy_log_wording else \
                f"mem_fraction_static={a.mem_fraction_static}"
            raise self.fail("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                            f"Current value: {value}", "kv_pool")
        if min(a.context_len - 1, tokens - 1) <= 0:
            raise self.fail("AssertionError: Memory pool size is too small", "kv_pool", site="pool_too_small")
        self.allocate_pools(tokens, cell, draft_cell, mamba_bytes)
        self.timed("kv_pool", 0.5 + tokens * cell / GIB / 400)

    def cell_bytes(self) -> tuple[int, int]:
        """(target, draft) KV bytes per token per rank. 0.5.23 folds the draft into the target."""
        shape, a, tp = self.shape, self.args, self.io.tp
        if shape.is_mla:
            per_layer = (shape.mla_kv_dim or 0) * a.kv_elem_bytes
        else:
            per_layer = shape.kv_heads_per_rank(tp) * (shape.head_dim + shape.v_head_dim) * a.kv_elem_bytes
        layers = shape.attention_layers
        if a.swa_ratio is not None:  # hybrid SWA: sliding layers keep fewer tokens
            cell = int(per_layer * (shape.count("full") + a.swa_ratio * shape.count("sliding")))
        else:
            cell = int(per_layer * layers)
        draft = 0
        if a.spec_algorithm and shape.mtp_layers:
            draft = int(cell * shape.mtp_layers / layers)
        if self.t.draft_weights_before_pool:
            return cell + draft, 0  # draft KV is part of the target cell; the draft pool mirrors it
        return cell, 0

    def mamba_pool(self, rest: float, per_req: int) -> tuple[float, int]:
        """Carve the recurrent-state pool out of `rest`; returns (rest left, pool bytes)."""
        a = self.args
        d = a.spec_draft_tokens
        r = a.mamba_full_memory_ratio
        ratio = 1 if a.disable_radix_cache else self.t.radix_cache_ratio
        interm = 0
        if self.t.spec_state_reserved_before_split and a.spec_algorithm:  # verification states reserved before the split
            interm = per_req * (a.max_running_requests or 48) * d
            rest -= interm
        budget = rest * r / (1 + r)
        if a.max_mamba_cache_size:
            slots = int(a.max_mamba_cache_size)
        elif a.disable_radix_cache and a.max_running_requests:  # both versions: one slot per request
            slots = int(a.max_running_requests)
        elif a.spec_algorithm and not self.t.padding_slot_from_slack:
            slots = int((budget - per_req * (1 + d)) // (per_req * (1 + d / ratio)))
        elif self.t.padding_slot_from_slack:  # 0.5.9: int(budget // per_req); its padding slot comes out of the slack
            slots = int(budget // per_req)
        else:
            slots = int((budget - per_req) // per_req)
        if slots <= 0 and self.t.fails_early_without_slots:  # 0.5.23's messages; 0.5.9 fails later, in the KV sizing
            raise self.fail(
                "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
                f"Computed max_mamba_cache_size={slots} (total_rest_memory={rest / GIB:.2f} GB, "
                f"mamba_cache_per_req={per_req / MIB:.2f} MB). Try: (1) reduce --max-running-requests, "
                "(2) increase --mem-fraction-static, (3) reduce --speculative-num-draft-tokens, or "
                "(4) use GPUs with more memory.", "kv_pool")
        self._mamba_ratio = ratio
        if slots <= 0:  # 0.5.9 goes on; the KV sizing or the request cap then fails
            return rest, interm
        if slots // ratio <= 0 and self.t.fails_early_without_slots:
            raise self.fail(
                f"RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
                f"max_mamba_cache_size={slots}, mamba_ratio={ratio}, resulting max_num_reqs=0. Try: (1) reduce "
                "--max-running-requests, (2) increase --mem-fraction-static, or (3) use GPUs with more memory.", "kv_pool")
        pool = (slots + 1) * per_req
        if a.spec_algorithm and not self.t.padding_slot_from_slack:
            interm = (slots // ratio) * d * per_req
            rest -= interm
        self.state.mamba_slots = slots
        if self.t.padding_slot_from_slack:  # 0.5.9 subtracts slots x per_req; the padding slot is allocated from the slack
            return rest - slots * per_req, pool + interm
        return rest - pool, pool + interm

    def allocate_pools(self, tokens: int, cell: int, draft_cell: int, mamba_bytes: int) -> None:
        io, a, shape = self.io, self.args, self.shape
        conv, ssm = state_bytes_per_request(shape, io.tp)
        if mamba_bytes:
            self.alloc_all(mamba_bytes, "kv_pool")
            n = self.state.mamba_slots + 1
            extra = ""
            if a.spec_algorithm:
                extra = (f"intermediate_ssm_state_cache size: {mamba_bytes / GIB - n * (conv + ssm) / GIB:.2f}GB "
                         f"intermediate_conv_window_cache size: 0.00GB ")
            self.log_all(f"Mamba Cache is allocated. max_mamba_cache_size: {self.state.mamba_slots}, "
                         f"conv_state size: {n * conv / GIB:.2f}GB, ssm_state size: {n * ssm / GIB:.2f}GB {extra}")
        target_cell = cell
        draft_part = 0
        if a.spec_algorithm and shape.mtp_layers and self.t.draft_weights_before_pool:
            target_cell = int(cell * shape.attention_layers / (shape.attention_layers + shape.mtp_layers))
            draft_part = cell - target_cell
        if a.swa_ratio is not None:
            self.allocate_swa(tokens)
        else:
            self.alloc_all(tokens * target_cell, "kv_pool")
            self.log_all(self._kv_line(tokens, target_cell))
        self.state.kv_tokens, self.state.kv_bytes = tokens, tokens * cell
        self.state.max_running_requests = self.running_requests(tokens)
        self.alloc_all(self.req_to_token_bytes(), "kv_pool")
        self.log_each(lambda r: f"Memory pool end. avail mem={self.io.free(r) / GIB:.2f} GB")
        if draft_part:
            self.alloc_all(tokens * draft_part, "kv_pool")
            self.log_all(self._kv_line(tokens, draft_part))
            self.log_each(lambda r: f"Memory pool end. avail mem={self.io.free(r) / GIB:.2f} GB")
        if tokens < a.context_len and self.t.logs_kv_smaller_than_context_warning:
            self.io.log(0, f"KV pool holds {tokens} tokens, fewer than --context-length {a.context_len}. One full-length "
                           "request cannot fit, so long requests will be refused or truncated at serving time. Lower "
                           "--context-length, raise --mem-fraction-static, or free memory taken before the pool is sized.")

    def allocate_swa(self, tokens: int) -> None:
        """Two pools: full-attention layers at `tokens`, sliding-window layers at `tokens * ratio`."""
        a, shape = self.args, self.shape
        swa_tokens = int(tokens * (a.swa_ratio or 0.8))
        window = int(shape.sliding_window or 0)
        if self.t.checks_swa_pool_fits_request and swa_tokens < window + a.page_size:
            raise self.fail(f"ValueError: SWA pool ({swa_tokens} tokens) cannot hold even one request: the prefill "
                            f"admission floor is sliding_window_size ({window}) + page_size ({a.page_size}). Increase "
                            "--swa-full-tokens-ratio or the total KV budget.", "kv_pool")
        per_layer = shape.kv_heads_per_rank(self.io.tp) * (shape.head_dim + shape.v_head_dim) * a.kv_elem_bytes
        full_cell, swa_cell = int(per_layer * shape.count("full")), int(per_layer * shape.count("sliding"))
        self.log_all(f"Use sliding window memory pool. full_layer_tokens={tokens}, swa_layer_tokens={swa_tokens}")
        self.alloc_all(tokens * full_cell + swa_tokens * swa_cell, "kv_pool")
        self.log_all(self._kv_line(tokens, full_cell, "Full"))
        self.log_all(self._kv_line(swa_tokens, swa_cell, "SWA"))

    def _kv_line(self, tokens: int, cell: int, label: str = "") -> str:
        half = tokens * cell / 2 / GIB
        dtype = "" if not self.t.logs_kv_dtype_and_pool_label else f"dtype: {self.args.kv_dtype_name}, "
        head = f"{label} KV Cache" if label and self.t.logs_kv_dtype_and_pool_label else "KV Cache"
        if self.shape.is_mla:
            return f"{head} is allocated. {dtype}#tokens: {tokens}, KV size: {2 * half:.2f} GB"
        return f"{head} is allocated. {dtype}#tokens: {tokens}, K size: {half:.2f} GB, V size: {half:.2f} GB"

    def running_requests(self, tokens: int) -> int:
        a = self.args
        n = rules.running_requests(tokens, a.context_len, a.max_running_requests, self.t)
        if a.max_running_requests and n < a.max_running_requests and self.t.logs_request_cap_reductions:
            self.io.log(0, f"max_running_requests was reduced from the requested {a.max_running_requests} to {n} "
                           "(per dp worker) due to the available KV cache capacity.")
        if self.shape.is_hybrid:
            cap = self.state.mamba_slots // self._mamba_ratio
            if cap < n and self.t.logs_request_cap_reductions:
                self.io.log(0, f"max_running_requests is capped to {cap} by the mamba state cache (max_mamba_cache_size="
                               f"{self.state.mamba_slots}, {self._mamba_ratio} state slots per request). To raise it: "
                               "increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with "
                               "--mamba-ssm-dtype bfloat16.")
            n = min(n, cap)
        if n <= 0:
            raise self.fail("AssertionError: max_running_request is zero", "kv_pool", site="no_requests")
        return n

    def req_to_token_bytes(self) -> int:
        a = self.args
        return (self.state.max_running_requests + 1) * (a.context_len + 4 + a.spec_draft_tokens) * 4

    # -- CUDA graphs, torch.compile, the late draft ------------------------------------------

    def capture_graphs(self) -> None:
        io, a, shape, tp = self.io, self.args, self.shape, self.io.tp
        io.enter("cuda_graph")
        if a.prefill_buckets:
            self.capture("target prefill", costs.prefill_graph_bytes(shape, tp, a.prefill_buckets),
                         len(a.prefill_buckets) * costs.PREFILL_GRAPH_S_PER_BUCKET,
                         f"backend=breakable, num_tokens={a.prefill_buckets}", None)
        decode_bs = self.decode_bs()
        if not decode_bs:
            return
        seconds = len(decode_bs) * costs.GRAPH_CAPTURE_S_PER_BS
        nbytes = costs.decode_graph_bytes(shape, tp, decode_bs, max(1, a.spec_draft_tokens))
        if a.torch_compile:
            compiled = [bs for bs in decode_bs if bs <= a.torch_compile_max_bs]
            nbytes += costs.compile_workspace_bytes(len(compiled))
            seconds += costs.COMPILE_BASE_S + costs.COMPILE_S_PER_BS * len(compiled)
        kind = "verify" if a.spec_algorithm else "decode"
        n_per_req = a.spec_draft_tokens if a.spec_algorithm else 1
        self.capture(f"target {kind}", nbytes, seconds, f"backend=full, num_tokens_per_req={n_per_req}", decode_bs)
        if a.spec_algorithm and self.t.draft_weights_before_pool:
            self.capture_draft()

    def decode_bs(self) -> list[int]:
        """The decode graph sizes captured: the resolved list cut to the request pool."""
        return captured_bs(self.args.decode_bs, self.state.max_running_requests)

    def capture(self, role: str, nbytes: int, seconds: float, detail: str, bs: list[int] | None) -> None:
        """One capture: begin line, allocation (OOM → 'Capture cuda graph failed'), end line.

        Draft graphs are logged by rank 0 only (SGLang's draft workers log on rank 0)."""
        ranks = [0] if role.startswith("draft") else None
        name = {"draft": "draft ", "draft extend": "draft extend "}.get(role, "")
        before = self.frees()
        if self.t.legacy_log_wording:
            self.log_each(lambda r: f"Capture {name}cuda graph begin. This can take up to several minutes. "
                                    f"avail mem={before[r] / GIB:.2f} GB", ranks)
            if bs and not name:
                self.log_all(f"Capture cuda graph bs {bs}")
        else:
            self.log_each(lambda r: f"Capture {role} CUDA graph begin. {detail}, avail mem={before[r] / GIB:.2f} GB",
                          ranks)
        try:
            self.alloc_all(nbytes, "cuda_graph", chunks=max(1, len(bs or [1])))
        except SchedulerFailure as exc:
            wrapped = self.fail(f"Exception: Capture cuda graph failed: {exc.exc_line.split(': ', 1)[1]}\n"
                                f"{self._graph_hint()}", "cuda_graph", exc.ranks)
            wrapped.per_rank = {r: f"Exception: Capture cuda graph failed: {t.split(': ', 1)[1]}\n{self._graph_hint()}"
                                for r, t in exc.per_rank.items()}
            raise wrapped from None
        self.timed("cuda_graph", seconds)
        after = self.frees()
        self.state.graph_bytes[role] = nbytes
        key = _GRAPH_TIME_KEY.get(role)
        if key:
            self.state.graph_seconds[key] = self.state.graph_seconds.get(key, 0.0) + seconds
        if self.t.legacy_log_wording:
            self.log_each(lambda r: f"Capture {name}cuda graph end. Time elapsed: {seconds:.2f} s. "
                                    f"mem usage={(before[r] - after[r]) / GIB:.2f} GB. avail mem={after[r] / GIB:.2f} GB.",
                          ranks)
        else:
            shown = f"bs={bs}, " if bs else ""
            self.log_each(lambda r: f"Capture {role} CUDA graph end. {shown}elapsed={seconds:.2f} s, mem usage="
                                    f"{(before[r] - after[r]) / GIB:.2f} GB, avail mem={after[r] / GIB:.2f} GB.", ranks)

    def _graph_hint(self) -> str:
        if self.t.legacy_log_wording:
            return ("Possible solutions:\n1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
                    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
                    "3. disable torch compile by not using --enable-torch-compile\n"
                    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
                    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ")  # sic
        return ("Possible solutions:\n1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
                "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
                "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. (Not recommended. Huge performance loss)")

    def capture_draft(self) -> None:
        a, shape = self.args, self.shape
        draft_bs = self.decode_bs()
        nbytes = costs.draft_graph_bytes(shape, draft_bs, a.spec_topk)
        secs = len(draft_bs) * costs.GRAPH_CAPTURE_S_PER_BS * 0.6
        self.capture("draft decode", nbytes, secs,
                     f"backend=full, num_tokens_per_req={a.spec_topk}, bs={draft_bs}", None)
        self.capture("draft extend", nbytes // 2, secs / 2,
                     f"backend=full, num_tokens_per_req={a.spec_steps + 1}, bs={draft_bs}", None)

    def late_draft(self) -> None:
        """0.5.9: the draft loads after the target's pool and graphs, from the slack."""
        self.load_weights(draft=True)
        shape, tokens = self.shape, self.state.kv_tokens
        self.io.enter("kv_pool")
        per_layer = shape.kv_heads_per_rank(self.io.tp) * (shape.head_dim + shape.v_head_dim) * self.args.kv_elem_bytes
        if shape.is_mla:
            per_layer = (shape.mla_kv_dim or 0) * self.args.kv_elem_bytes
        draft_kv = int(tokens * per_layer * max(1, shape.mtp_layers))
        self.alloc_all(draft_kv, "kv_pool")
        self.log_all(self._kv_line(tokens, draft_kv // tokens))
        self.log_each(lambda r: f"Memory pool end. avail mem={self.io.free(r) / GIB:.2f} GB")
        self.io.enter("cuda_graph")
        decode_bs = self.decode_bs()
        if decode_bs:
            nbytes = costs.draft_graph_bytes(shape, decode_bs, self.args.spec_topk)
            secs = len(decode_bs) * costs.GRAPH_CAPTURE_S_PER_BS * 0.6
            self.capture("draft", nbytes, secs, "", decode_bs)
            self.capture("draft extend", nbytes // 2, secs / 2, "", None)

    def summary(self) -> None:
        a = self.args
        self.state.available_after_bytes = self.min_free()
        self.io.log(0, f"max_total_num_tokens={self.state.kv_tokens}, chunked_prefill_size={a.chunked_prefill_size}, "
                       f"max_prefill_tokens={a.max_prefill_tokens}, max_running_requests={self.state.max_running_requests}, "
                       f"context_len={a.context_len}, available_gpu_mem={self.state.available_after_bytes / GIB:.2f} GB")
        if not self.t.legacy_log_wording:
            self.io.log(None, self.startup_timings())

    def startup_timings(self) -> str:
        """0.5.23's launcher line once the schedulers are up (`engine.py` `_set_startup_time`): the slowest
        rank's seconds per step, graph capture per phase in SGLang's own key order. The launcher's own time
        before the schedulers start (imports, ~15 s on a real start) is not modelled: tokenizer_e2e here is
        the schedulers' time."""
        seconds = self.state.phase_seconds
        graphs = ", ".join(f"{key}={self.state.graph_seconds.get(key, 0.0):.2f}" for key in GRAPH_TIME_KEYS)
        scheduler = sum(seconds.values())
        return (f"Engine startup timings (s): load_weight={seconds.get('load_weights', 0.0):.2f}, "
                f"kv_cache_allocation={seconds.get('kv_pool', 0.0):.2f}, scheduler_e2e={scheduler:.2f}, "
                f"cuda_graph={{{graphs}}}, tokenizer_e2e={scheduler:.2f}")

    # -- serving ------------------------------------------------------------------------------

    def admit(self, count: int = 1) -> int:
        """`count` requests start running: each holds its decode memory on every rank until `finish`.
        Returns the bytes each holds. Raises SchedulerFailure on a CUDA OOM (SGLang dies with it)."""
        nbytes = costs.decode_bytes_per_request(self.shape, self.io.tp)
        self.alloc_all(nbytes * max(1, count), "serve")
        return nbytes

    def finish(self, nbytes: int) -> None:
        for rank in range(self.io.tp):
            self.io.release(rank, nbytes)

    def forward(self, new_tokens: int) -> float:
        """One prefill forward over `new_tokens` tokens: activation peak on every rank, on top of
        what the running requests hold (`admit`).

        Returns the modelled seconds it takes. Raises SchedulerFailure on a CUDA OOM.
        """
        chunk = self.args.chunked_prefill_size
        seconds = 0.0
        left = new_tokens
        while left > 0:
            step = left if chunk <= 0 else min(left, chunk)
            nbytes = costs.activation_bytes(self.shape, self.io.tp, step)
            self.alloc_all(nbytes, "serve")
            for rank in range(self.io.tp):
                self.io.release(rank, nbytes)
            seconds += step / costs.PREFILL_TOKENS_PER_S
            left -= step
        return seconds


# 0.5.23's graph-capture phases as its startup-timings line names them, in its order
# (`graph_memory_usage.py` GRAPH_MEMORY_USAGE_KEYS), and the simulator's capture roles that fill them.
GRAPH_TIME_KEYS = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")
_GRAPH_TIME_KEY = {"target prefill": "prefill", "target decode": "decode", "target verify": "target_verify",
                   "draft decode": "draft_decode", "draft extend": "draft_extend"}


def _gib(nbytes: float) -> str:
    return f"{nbytes / GIB:.2f}"


def _quant_str(shape: ModelShape) -> str:
    method = str(shape.quantization.get("quant_method", "")) if shape.quantization else ""
    if not method:
        return ""
    fmt = shape.quantization.get("fmt")
    return f"quant={method}" + (f", fmt={fmt}" if fmt else "")


def _draft_class(arch: str) -> str:
    base = arch.replace("ForConditionalGeneration", "ForCausalLM")
    return base + ("NextN" if base.startswith("Deepseek") else "MTP")
