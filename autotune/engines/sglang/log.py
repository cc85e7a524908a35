"""SGLang's log lines (0.5.23, 0.5.9, 0.4.x) and the remedies for its failures.

Formats are from reference/engines.md §1-2 and reference/log-patterns.json. Facts that
shape the rules:
- every "GB" SGLang logs is GiB;
- each TP rank logs its own progress lines (`[... TP1]`), so per-rank tallies tell the
  target's weight load from the draft's (the second `Load weight end` of a rank) and the
  target pool from the draft pool (anything after a rank's first `Memory pool end`);
- 0.5.9 loads the draft model after the target pool and graphs (flag `pool_done`);
- "Uvicorn running" / "Application startup complete" are not ready: warm-up still runs;
  only "The server is fired up and ready to roll!" is;
- "Scheduler hit an exception", "Received sigquit ...", "SIGQUIT received" carry no class, and none at
  all after "SIGTERM received" (a stop asked for: 0.5.23 then calls its children's exit by that signal a
  crash and SIGQUITs itself);
- on the CPU path (tests/data/sglang-cpu) the knobs this device cannot run die in the engine's words
  ("... only supports CUDA device"), in the graph runner (an attention backend without its graph methods),
  in Triton ("0 active drivers") or on a kernel op the package lacks: CONFIG_ERROR with the knob to turn
  off where the config asked for that knob, never an OOM.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from autotune.classifier.rules import (
    IMPORT_ERROR,
    SHARED_FAILURES,
    SHARED_HINTS,
    SHARED_PROGRESS,
    SHARED_SERVING,
    STOP_REQUESTED,
    EngineLog,
    FigureBook,
    Rule,
    RuleKind,
    Strength,
    fill,
    record_arch_refused,
    record_import_failed,
    rule,
)
from autotune.records import Outcome, Phase

_DRAFT_TYPE = re.compile(r"MTP|NextN|Eagle|EAGLE|Draft|draft")
_HYBRID_TYPE = re.compile(r"Qwen3Next|Qwen3_5|Qwen3\.5|Mamba|Jamba|NemotronH|FalconH1|KimiLinear|Lfm2"
                          r"|MiniMaxM1|Bamba|Zamba|Plamo2|GraniteMoeHybrid")
_NUM = r"(-?[\d.]+)"
P, K = RuleKind.PROGRESS, RuleKind.FAILURE


def _server_args(m: re.Match[str], book: FigureBook, source: str) -> None:
    for name, figure in (("mem_fraction_static", "mem_fraction_static"), ("context_length", "context_len"),
                         ("chunked_prefill_size", "chunked_prefill_size"),
                         ("max_running_requests", "max_running_requests")):
        found = re.search(rf"\b{name}(?:=|': ){_NUM}[,)}}]", m.string)
        if found:
            book.set(figure, float(found[1]))
            if name == "max_running_requests" and float(found[1]) == 0:
                book.flags.add("requests_zero")
    if re.search(r"\bspeculative_algorithm(?:=|': )'\w+'", m.string):
        book.flags.add("spec")
    if re.search(r"\benable_torch_compile(?:=|': )True\b", m.string):
        book.flags.add("torch_compile")
    # a setting that brings GPU kernels with it: a quantization, a low-precision KV cache
    if re.search(r"\b(?:quantization(?:=|': )'\w+'|kv_cache_dtype(?:=|': )'fp[48]\w*')", m.string):
        book.flags.add(_GPU_KNOB)


def _init_usage(m: re.Match[str], book: FigureBook, source: str) -> None:
    book.highest("init_mem_usage_gib", float(m["usage"]))


def _load_begin(m: re.Match[str], book: FigureBook, source: str) -> None:
    if book.tally(source, "load_begin") == 1:
        book.lowest("avail_before_weights_gib", float(m["avail"]))
    else:
        book.flags.add("draft_loading")


def _load_end(m: re.Match[str], book: FigureBook, source: str) -> None:
    draft = book.tally(source, "load_end") > 1 or bool(_DRAFT_TYPE.search(m["type"]))
    if draft:
        book.highest("draft_weights_gib", float(m["usage"]))
        book.flags.add("spec")
    else:
        book.highest("weights_gib", float(m["usage"]))
        if m["elapsed"]:
            book.first("weights_load_s", float(m["elapsed"]))
    if _HYBRID_TYPE.search(m["type"]):
        book.flags.add("hybrid")
    if not book.seen(source, "pool_end"):  # 0.5.9's late draft does not shrink the KV budget
        book.lowest("avail_after_weights_gib", float(m["avail"]))


def _mamba(m: re.Match[str], book: FigureBook, source: str) -> None:
    book.flags.add("hybrid")
    if m["inter"]:
        book.flags.add("spec")
    if not book.seen(source, "pool_end"):
        sizes = (m["conv"], m["ssm"], m["inter"], m["inter_conv"])
        book.first("mamba_slots", float(m["slots"]))
        book.highest("mamba_gib", round(sum(float(s) for s in sizes if s), 4))


def _kv_pool(m: re.Match[str], book: FigureBook, source: str) -> None:
    if book.seen(source, "pool_end"):
        return  # a draft pool: same #tokens, not the target's KV size
    size = float(m["kv"]) if m["kv"] else float(m["k"]) + float(m["v"])
    book.accumulate(source, "kv_gib", size)  # Full + SWA pools of a hybrid-SWA model add up
    if m["label"] != "SWA":
        book.first("kv_tokens", float(m["tokens"]))


def _post_capture_kv(m: re.Match[str], book: FigureBook, source: str) -> None:
    book.set("kv_tokens", float(m["tokens"]))
    book.set("kv_gib", float(m["kv"]))


def _pool_end(m: re.Match[str], book: FigureBook, source: str) -> None:
    if book.tally(source, "pool_end") == 1:
        book.lowest("pool_end_avail_gib", float(m["avail"]))
    book.flags.add("pool_done")


def _capture_end(m: re.Match[str], book: FigureBook, source: str) -> None:
    book.accumulate(source, "graph_gib", float(m["usage"]))
    if m["elapsed"]:
        book.accumulate(source, "graph_s", float(m["elapsed"]))


def _summary(m: re.Match[str], book: FigureBook, source: str) -> None:
    book.set("kv_tokens", float(m["tokens"]))
    for name in ("chunked_prefill_size", "max_running_requests", "context_len"):
        if m[name] not in (None, "None"):
            book.set(name, float(m[name]))
    if m["available"]:
        book.set("available_gpu_mem_gib", float(m["available"]))


def _kv_below_context(m: re.Match[str], book: FigureBook, source: str) -> None:
    tokens, context = float(m["tokens"]), float(m["context"])
    book.first("kv_tokens", tokens)
    book.set("kv_short_of_context_tokens", context - tokens)
    book.flags.add("kv_below_context")


def _mfs(m: re.Match[str], book: FigureBook, source: str) -> None:
    groups = m.groupdict()
    if groups.get("mfs"):
        book.set("mem_fraction_static", float(groups["mfs"]))
    if groups.get("above"):
        book.set("min_mem_fraction_static", float(groups["above"]))
    if "mamba" in m.string.lower():
        book.flags.add("hybrid")


PROGRESS: tuple[Rule, ...] = (
    # 0.5.9 logs the ServerArgs repr (`name=value`), 0.5.23 its resolved dict (`'name': value`)
    rule("server_args", "server_args=", r"server_args=(?:ServerArgs\(|\{)", P, phase=Phase.ARGS, record=_server_args),
    rule("spec_reset", "Max running requests is reset", r"reset to \d+ for speculative decoding",
         RuleKind.FLAG, flag="spec"),
    rule("init_begin", ("Init parallel begin", "Init torch distributed begin"), r"^Init (?:parallel|torch"
         r" distributed) begin", P, phase=Phase.INIT),
    rule("init_end", "Init torch distributed ends", r"Init torch distributed ends\..*?mem usage="
         r"(?P<usage>-?[\d.]+) GB", P, phase=Phase.INIT, record=_init_usage, flag="fmt_old"),
    rule("init_end_new", "Init parallel ends", r"Init parallel ends", P, phase=Phase.INIT, flag="fmt_new"),
    rule("baseline", "Memory baseline taken", r"Memory baseline taken\. mem usage=(?P<usage>-?[\d.]+) GB", P,
         phase=Phase.INIT, record=_init_usage),
    rule("load_begin", "Load weight begin", r"Load weight begin\. avail mem=(?P<avail>-?[\d.]+) GB", P,
         phase=Phase.WEIGHTS, record=_load_begin),
    rule("load_end", "Load weight end", r"Load weight end\. (?:elapsed=(?P<elapsed>[\d.]+) s, )?type="
         r"(?P<type>[\w.]+), .*?avail mem=(?P<avail>-?[\d.]+) GB, mem usage=(?P<usage>-?[\d.]+) GB", P,
         phase=Phase.KV_POOL, record=_load_end),
    rule("swa_pool", ("Use sliding window", "Use Sliding window"), r"(?i)Use sliding window memory pool", P,
         phase=Phase.KV_POOL),
    rule("mamba_pool", "Mamba Cache is allocated", r"max_mamba_cache_size: (?P<slots>\d+), conv_state size:"
         r" (?P<conv>[\d.]+) ?GB, ssm_state size: (?P<ssm>[\d.]+) ?GB(?: intermediate_ssm_state_cache size:"
         r" (?P<inter>[\d.]+) ?GB intermediate_conv_window_cache size: (?P<inter_conv>[\d.]+) ?GB)?", P,
         phase=Phase.KV_POOL, record=_mamba),
    rule("kv_pool", "KV Cache is allocated", r"(?:(?P<label>\w+) )?KV Cache is allocated\. (?:dtype: \S+, )?"
         r"#tokens: (?P<tokens>\d+), (?:K size: (?P<k>[\d.]+) GB, V size: (?P<v>[\d.]+) GB|KV size: "
         r"(?P<kv>[\d.]+) GB)", P, phase=Phase.KV_POOL, record=_kv_pool),
    rule("post_capture_kv", "Post-capture KV sizing", r"KV cache allocated\. dtype: \S+, #tokens: (?P<tokens>\d+)"
         r", KV size: (?P<kv>[\d.]+) GB", P, phase=Phase.CUDA_GRAPH, record=_post_capture_kv),
    rule("pool_end", "Memory pool end", r"Memory pool end\. avail mem=(?P<avail>-?[\d.]+) GB", P,
         phase=Phase.KV_POOL, record=_pool_end),
    rule("capture_begin", "Capture", r"Capture (?:[\w-]+ )*?(?:CUDA|cuda|CPU|cpu|NPU|npu|XPU|xpu) graph begin|"
         r"Capture cuda graph bs \[", P, phase=Phase.CUDA_GRAPH),
    rule("capture_end", "Capture", r"Capture (?:[\w-]+ )*?(?:CUDA|cuda|CPU|cpu|NPU|npu|XPU|xpu) graph end\..*?"
         r"(?:elapsed(?:=|: )(?P<elapsed>[\d.]+) s)?[.,] mem usage=(?P<usage>-?[\d.]+) GB", P,
         phase=Phase.CUDA_GRAPH, record=_capture_end),
    # The capture progress bars of every version ("Capturing batches (bs=..", "Capturing num tokens ..").
    rule("capturing", "Capturing", r"\bCapturing\b", P, phase=Phase.CUDA_GRAPH),
    rule("fmt_new", ("Capture target", "Capture draft decode"), r"Capture (?:target|draft decode)",
         RuleKind.FLAG, flag="fmt_new"),
    rule("fmt_old", ("Capture cuda graph begin", "Capture cuda graph bs"), r"Capture cuda graph (?:begin|bs)",
         RuleKind.FLAG, flag="fmt_old"),
    rule("summary", "_total_num_tokens=", r"max_total_num_tokens=(?P<tokens>\d+), chunked_prefill_size="
         r"(?P<chunked_prefill_size>-?\d+|None), max_prefill_tokens=\d+, max_running_requests="
         r"(?P<max_running_requests>\d+|None), context_len=(?P<context_len>\d+)(?:, available_(?:gpu|cpu)_mem="
         r"(?P<available>-?[\d.]+) GB)?", P, phase=Phase.HTTP, record=_summary),
    rule("kv_below_context", "KV pool holds", r"KV pool holds (?P<tokens>\d+) tokens, fewer than "
         r"--context-length (?P<context>\d+)", RuleKind.FLAG, record=_kv_below_context, note=True),
    rule("http_start", "Started server process", r"Started server process", P, phase=Phase.HTTP),
    rule("uvicorn", ("Uvicorn running on", "Application startup complete", "Waiting for application startup"),
         r"Uvicorn running on|Application startup complete|Waiting for application startup", P,
         phase=Phase.WARMUP),
    rule("ready", "The server is fired up", r"The server is fired up and ready to roll", RuleKind.READY,
         phase=Phase.READY),
    # The launcher's SIGTERM handler: someone asked the server to stop (the tool, once it is done with it).
    # 0.5.23 then reports its children's exit by that signal as crashes and SIGQUITs itself: an echo of
    # the stop, not a failure (tests/data/sglang-cpu/0.5.23-ready-sigterm.log).
    rule("stop_requested", "SIGTERM received", r"^SIGTERM received(?:\. signum=| on node_rank)", RuleKind.FLAG,
         flag=STOP_REQUESTED),
    # A model module that failed to import: a broken environment, when its architecture is then refused. Not where
    # the reason is what this device lacks ("...nemotron_h: CPU requires AMX support for hybrid linear attn
    # backend", every start on a CPU without AMX): that module is left out on purpose, and a model that needs it is
    # one this device does not run (tests/data/launch-census, unknown-arch).
    rule("import_error", "Ignore import error", r"Ignore import error when loading (?P<module>[\w.]+?)(?:[.:] (?!\w+ "
         r"requires \w+ support\b)|[.:]?$)", RuleKind.FLAG, record=record_import_failed),
)

_RAISE = ("raise --mem-fraction-static above {min_mem_fraction_static}: at {mem_fraction_static} the loaded "
          "weights leave no GPU memory for the KV cache",
          "raise --mem-fraction-static (now {mem_fraction_static}) so the KV pool gets room, or cut the "
          "weights per GPU (more --tp-size, quantisation)",
          "raise --mem-fraction-static so the KV pool gets room, or cut the weights per GPU (more "
          "--tp-size, quantisation)")
_GPU_KNOB = "gpu_knob"
_KNOB_OFF = ("{what}: the quantization or the fp8/fp4 KV cache the config asks for brings it, and this device cannot "
             "run it; turn that setting off (lowering memory will not help)")
_SPEC_OFF = ("speculative decoding needs {what}: turn it off (no --speculative-algorithm); lowering memory "
             "will not help")
_MAMBA = ("the hybrid model's recurrent-state pool does not fit: lower --max-running-requests (and "
          "--speculative-num-draft-tokens), or raise --mem-fraction-static",)

FAILURES: tuple[Rule, ...] = (
    rule("kv_weights_leave_none", "Loaded weights leave no GPU memory",
         # (a message wrapped before its figures is still this one)
         r"Loaded weights leave no GPU memory for the KV cache(?: under --mem-fraction-static=(?P<mfs>[\d.]+?)\.?"
         r"(?: Raise --mem-fraction-static above (?P<above>[\d.]+?)\.?(?: |$)|\s|$)|(?: under)?\s*$)",
         K, outcome=Outcome.OOM_KV_POOL, mfs_direction=1, remedy=_RAISE, record=_mfs),
    rule("not_enough_memory", "Not enough memory", r"Not enough memory\. Please try to increase "
         r"--mem-fraction-static\.?(?: Current value: (?:self\.server_args\.)?mem_fraction_static=(?P<mfs>[\d.]+))?",
         K, outcome=Outcome.OOM_KV_POOL, mfs_direction=1, remedy=_RAISE, record=_mfs),
    rule("mamba_budget", ("Not enough GPU memory for hybrid", "Hybrid (mamba"),
         r"Not enough GPU memory for hybrid \(mamba/linear-attention\) state cache|Hybrid \(mamba/linear-attention\)"
         r" state cache is too small", K, outcome=Outcome.OOM_KV_POOL, mfs_direction=1, remedy=_MAMBA, record=_mfs),
    rule("swa_pool_small", "SWA pool", r"SWA pool \((?P<swa_tokens>\d+) tokens\) cannot hold even one request", K,
         outcome=Outcome.OOM_KV_POOL, mfs_direction=1,
         remedy=("the sliding-window pool is too small: raise --swa-full-tokens-ratio or --mem-fraction-static",)),
    rule("pool_too_small", ("Memory pool size is too small", "Error"),
         r"Memory pool size is too small", K, outcome=Outcome.OOM_KV_POOL, mfs_direction=1, remedy=_RAISE[1:]),
    # The request slots the pool left (or --max-running-requests 0 asked for: then the flag is the fault).
    rule("no_request_slots", "max_running_request is zero", r"max_running_request is zero", K,
         outcome=Outcome.OOM_KV_POOL, mfs_direction=1, remedy=_RAISE[1:],
         unless=("requests_zero", Outcome.CONFIG_ERROR, "--max-running-requests 0 leaves no request slot: set it to 1 "
                 "or more, or leave it out (lowering memory will not help)")),
    rule("profiled_negative", "_total_tokens=", r"is larger than the profiled value (?P<profiled>-\d+|0)\.", K,
         outcome=Outcome.OOM_KV_POOL, mfs_direction=1, remedy=_RAISE[1:]),
    rule("unbalanced", "The memory capacity is unbalanced", r"The memory capacity is unbalanced", K,
         outcome=Outcome.GPU_BUSY,
         remedy=("another process holds memory on one of the GPUs (memory is unbalanced across ranks): free "
                 "the GPUs or wait for the previous server to release them; this says nothing about the config",)),
    # The scheduler's token and request-slot allocators only run when a batch is scheduled: these say memory
    # ran out while serving (the warm-up request included). 0.5.x also words the first one without a phase.
    rule("runtime_kv_full", ("Decode out of memory", "Prefill out of memory", "Failed to allocate token",
                             "Out of memory. Try"),
         r"(?:Prefill |Decode |\b)[Oo]ut of memory\. Try to lower your batch size|Error: Failed to allocate token", K,
         outcome=Outcome.OOM_RUNTIME,
         mfs_direction=-1,
         remedy=("the KV pool ran out while serving: lower --max-running-requests or --chunked-prefill-size, "
                 "or give the pool more room",)),
    # (retracting decode requests, the scheduler asserts the pool still holds one: "No space left for only one request")
    # The weight-loading barrier gave up on the other ranks ("TP rank 1 could finish the model loading, but there are
    # other ranks that didn't finish loading. It is likely due to unexpected failures (e.g., OOM) or a slow node."):
    # a wait that ran out; the other ranks' own logs say why.
    rule("load_barrier_timeout", "could finish the model loading", r"could finish the model loading, but there are "
         r"other ranks", K, outcome=Outcome.TIMEOUT,
         remedy=("this rank loaded its weights but the others did not in time: their own logs say why (an OOM, a "
                 "crash) or they are slow (disk, network); not this rank's memory",)),
    # The watchdog found a process stuck and dumps its stacks before it says so ("Pyspy dump for PID 499:" after the
    # stuck batch's debug info, then "Scheduler watchdog timeout"): the dump alone, its last line cut, is the same hang.
    rule("watchdog_dump", "Pyspy dump for PID", r"Pyspy dump for PID \d+", K, outcome=Outcome.TIMEOUT,
         strength=Strength.GENERIC, derived_from=("2911",),
         remedy=("SGLang's watchdog dumped a stuck process's stacks: a batch (or a wait on a peer) that never finished; "
                 "the dump shows where it sat. Not memory",)),
    rule("runtime_req_slots", ("alloc_req_slots runs out of memory", "No space left for only one request"),
         r"alloc_req_slots runs out of memory|No space left for only one request", K,
         outcome=Outcome.OOM_RUNTIME, mfs_direction=-1, derived_from=("713",),
         remedy=("the request-slot pool ran out while serving: lower --max-running-requests",)),
    # 0.4.x only logs this as a warning ("Warning: User-specified ..."), and later ones with the override set (then
    # "Target model's ..."), wherever on the line a progress bar left it; only the raised text is a refusal.
    rule("context_too_long", ("User-specified context_length", "Target model's context_length"),
         r"(?<!Warning: )(?:User-specified|Target model's) "
         r"context_length \((?P<requested>\d+)\) is greater than the derived context_length \((?P<derived>\d+)\)",
         K, outcome=Outcome.CONFIG_ERROR, shorter_context=True,
         remedy=("lower --context-length to at most {derived} (the model's maximum); {requested} was asked",)),
    rule("arch_unsupported", "Model architectures", r"Model architectures \[(?:'(?P<arch>\w+)'|(?!'\w+'\])[^\]]*)\] are not supported"
         r"(?!.*?Supported architectures: .*?'(?P=arch)')", K,  # (rules.arch_listed_as_supported)
         outcome=Outcome.CONFIG_ERROR, remedy=("this SGLang does not support the model's architecture",),
         record=record_arch_refused,
         unless=(IMPORT_ERROR, Outcome.CRASH, "the model's module failed to import (see 'Ignore import error when "
                 "loading' above): a broken environment (toolchain, libcuda, kernels), not the config")),
    rule("bad_spec", ("Unknown speculative algorithm", "Error"),
         r"Unknown speculative algorithm|needs --speculative-draft-model-path", K, outcome=Outcome.CONFIG_ERROR,
         remedy=("the speculative-decoding settings are invalid for this model or version",)),
    rule("no_model", "Error", r"does not appear to have a file named "
         r"config\.json", K, outcome=Outcome.CONFIG_ERROR,
         remedy=("the model path holds no config.json: fix --model-path",)),
    # What the config asks for that this engine cannot do on this device (measured on the CPU path,
    # tests/data/sglang-cpu): the engine says so in its own words, or dies where the feature's code
    # meets a device it does not support. CONFIG_ERROR, with the knob to turn off (`special_remedy`).
    # A feature the engine restricts to a device kind or a CPU's capability: "Ngram speculative decoding only supports
    # CUDA device.", 0.5.23's "CPU FP8 KV cache requires Intel AMX support." (tests/data/launch-census).
    rule("device_only_feature", ("only support", "requires", "only supported"),
         r"^\s*(?:[A-Za-z_]\w*\.)*(?:ValueError|NotImplementedError|RuntimeError|AssertionError): "
         r"(?P<feature>[^:'\"]+?) (?:only supports?|(?:is )?only supported on(?: the)?|(?:currently )?requires)"
         r" (?:--device |that (?:the )?CPU has )?(?P<device>CUDA|cuda|GPU|GPUs|ROCm|HIP|NPU|XPU|(?:Intel )?AMX)\b"
         r"(?! tensors?\b)", K, outcome=Outcome.CONFIG_ERROR,
         remedy=("{feature} needs {device}, which this device does not have: turn it off",)),
    # An attention backend without the graph runner's interface (the CPU graph runner that torch.compile
    # brings, or a CUDA-graph runner): graphs cannot run with this backend.
    rule("graph_backend_missing", "object has no attribute",
         r"^\s*AttributeError: '(?P<backend>\w*(?:Attn|Attention)\w*Backend)' object has no attribute "
         r"'(?P<attr>\w*graph\w*)'", K, outcome=Outcome.CONFIG_ERROR,
         remedy=("the attention backend {backend} has no {attr}, which the graph runner needs: turn graphs off",)),
    # A Triton kernel launched where no GPU driver is active: the path that launched it needs a GPU.
    rule("triton_no_driver", "active drivers", r"^\s*RuntimeError: 0 active drivers \(\[\]\)", K,
         outcome=Outcome.CRASH,
         remedy=("a Triton (GPU) kernel was launched but no GPU driver is active: this build needs a GPU for "
                 "this model; lowering memory will not help",),
         unless=(("spec", Outcome.CONFIG_ERROR, _SPEC_OFF.format(what="a Triton (GPU) kernel, and no GPU driver "
                                                                      "is active here")),
                 (_GPU_KNOB, Outcome.CONFIG_ERROR, _KNOB_OFF.format(what="a Triton (GPU) kernel was launched and no "
                                                                        "GPU driver is active here")))),
    # The kernel package has no such op (torch.ops.<ns>.<op>): on this device, or in this build.
    rule("kernel_op_missing", "_OpNamespace",
         r"^\s*AttributeError: '_OpNamespace' '(?P<ns>\w+)' object has no attribute '(?P<op>\w+)'", K,
         outcome=Outcome.CRASH,
         remedy=("the kernel package {ns} has no op {op}: it does not match this SGLang or this device "
                 "(reinstall matching builds); lowering memory will not help",),
         unless=(("spec", Outcome.CONFIG_ERROR, _SPEC_OFF.format(what="a kernel op that this build's kernel "
                                                                      "package lacks on this device")),
                 (_GPU_KNOB, Outcome.CONFIG_ERROR, _KNOB_OFF.format(what="the kernel package {ns} has no op {op} on "
                                                                        "this device")))),
    rule("died_sigkill", "Rank ", r"Rank (?P<rank>\d+) scheduler died during initialization \(exit code:"
         r" -9\)", K, outcome=Outcome.CRASH, strength=Strength.GENERIC,
         remedy=("scheduler rank {rank} was SIGKILLed while initialising: most likely the host OOM killer (host "
                 "RAM, not GPU memory; check `dmesg -T | grep -i oom`): reduce host memory use",)),
    rule("died", "Rank ", r"Rank (?P<rank>\d+) scheduler (?:died during "
         r"initialization \(exit code: (?P<code>-?\d+|None)\)|is dead)", K, outcome=Outcome.CRASH,
         strength=Strength.GENERIC,
         remedy=("scheduler rank {rank} died without a Python error (exit code {code}): a segfault or a kill "
                 "from outside; if it was SIGKILL, suspect the host OOM killer",
                 "scheduler rank {rank} died; its own error, if any, is above")),
    # 0.1-0.3's model server said it as "Exception in ModelTpServer:" before its traceback.
    # The launcher's SIGCHLD handler: "Child process unexpectedly failed with an exit code 256. pid=97721"; its
    # watchdog (0.5.x, utils/watchdog.py): "Subprocess scheduler_0 (pid=12345) crashed with exit code -6. Triggering
    # SIGQUIT for cleanup..." (read from the source census, docs/corpus-protocol.md).
    # Every SGLang process reports its own failure alike: "DetokenizerManager hit an exception", "DataParallelController
    # hit an exception", 0.4's overlap thread "TpModelWorkerClient hit an exception" (read from the 0.4 source census).
    # 0.4.10's engine, when a scheduler process exits during start-up: "Scheduler or DataParallelController 48213
    # terminated with 1" (its 0.4.10 source census).
    rule("generic", ("hit an exception", "Received sigquit", "SIGQUIT received", "Initialization failed",
                     "Exception in ModelTpServer", "Child process unexpectedly failed", "crashed with exit code",
                     "DataParallelController"),
         r"\b[A-Z]\w+ hit an exception|Exception in ModelTpServer|Child process unexpectedly failed with an exit code"
         r"|Scheduler or DataParallelController \d+ terminated with -?\d+"
         r"|Subprocess \w+ \(pid=\d+\) crashed with exit code"
         r"|Received sigquit from a child|SIGQUIT received\.|Initialization failed\. "
         r"(?:warmup error|Please see the error messages above)", K,
         outcome=Outcome.CRASH, strength=Strength.GENERIC),
)


_KNOBS = ((re.compile(r"(?i)speculative|\b(?:ngram|eagle\d?|nextn|standalone|mtp)\b"), "no --speculative-algorithm"),
          (re.compile(r"(?i)torch[. _]?compile"), "no --enable-torch-compile"),
          (re.compile(r"(?i)\bgraphs?\b"), "disable graphs"),
          (re.compile(r"(?i)kv[ _-]?cache"), "--kv-cache-dtype auto"),
          (re.compile(r"(?i)fp8|fp4|int8|int4|awq|gptq|quant|LinearMethod"), "no --quantization"),
          (re.compile(r"(?i)watermark"), "no --enable-watermark"))


def _knob_of(feature: str) -> str:
    """The flag that asked for `feature`, read from its words (the engine names the feature, not the flag)."""
    for words, knob in _KNOBS:
        if words.search(feature):
            return knob
    return "the setting that asks for it"


def special_remedy(outcome: Outcome, direction: int, rule_name: str, values: Mapping[str, object],
                   flags: frozenset[str]) -> str:
    """SGLang's wording where it depends on more than the deciding line ('' otherwise):
    the 0.5.9 hybrid + speculative budget, lowering the fraction, graph flags per version."""
    old, new = "fmt_old" in flags, "fmt_new" in flags
    graph_bs = "--cuda-graph-max-bs-decode" if new else "--cuda-graph-max-bs" if old else "--cuda-graph-max-bs(-decode)"
    graph_off = ("--cuda-graph-backend-decode/prefill=disabled" if new else "--disable-cuda-graph" if old
                 else "--disable-cuda-graph, or --cuda-graph-backend-decode/prefill=disabled on 0.5.23")
    if outcome is Outcome.OOM_KV_POOL and rule_name == "not_enough_memory" and {"hybrid", "spec"} <= flags:
        return ("hybrid model with speculative decoding: the verification state (per-request state x running "
                "requests x draft tokens) is reserved before the KV pool; lower --max-running-requests (48 by "
                "default with speculative decoding) or --speculative-num-draft-tokens, which frees far more than "
                "raising --mem-fraction-static")
    if outcome is Outcome.OOM_KV_POOL and direction < 0:
        if "pool_done" in flags and "draft_loading" in flags:
            return ("lower --mem-fraction-static: this SGLang loads the draft model's weights and KV cache after "
                    "the target pool, out of the (1 - mem_fraction_static) slack, and it ran out")
        return fill(("lower --mem-fraction-static (now {mem_fraction_static}): the KV pool was sized for more "
                     "memory than was really free when it was allocated",
                     "lower --mem-fraction-static: the KV pool was sized for more memory than was really free "
                     "when it was allocated"), values)
    if outcome is Outcome.CONFIG_ERROR and rule_name == "device_only_feature":
        feature, device = str(values.get("feature", "this feature")), values.get("device", "another device")
        knob = _knob_of(feature)
        return (f"{feature} needs {device}, which this device does not have: turn it off ({knob}); lowering "
                "memory will not help")
    if outcome is Outcome.CONFIG_ERROR and rule_name == "graph_backend_missing":
        why = (f"the attention backend {values.get('backend', '')} has no {values.get('attr', '')}, which the "
               "graph runner needs")
        if "torch_compile" in flags:
            return (f"{why}: turn torch.compile off (no --enable-torch-compile; on SGLang's CPU path it is what "
                    "brings the graph runner); lowering memory will not help")
        return f"{why}: disable graphs ({graph_off}) or pick another --attention-backend; lowering memory will not help"
    if outcome is Outcome.CRASH and rule_name == "graph_capture_failed":
        off = "--disable-piecewise-cuda-graph" if values.get("piecewise") else graph_off
        return (f"CUDA-graph capture failed without running out of memory: disable CUDA graphs ({off}) or "
                "torch.compile for this model; lowering memory will not help")
    if outcome is Outcome.OOM_CUDA_GRAPH:
        if direction == 0:
            return (f"CUDA-graph capture failed without running out of memory: disable CUDA graphs ({graph_off}) or "
                    "torch.compile for this model; lowering memory will not help")
        return fill((f"lower --mem-fraction-static, or {graph_bs}, or turn torch.compile off: graphs are captured "
                     "from the slack left after the pool ({pool_end_avail_gib} GiB)",
                     f"lower --mem-fraction-static, or {graph_bs}, or turn torch.compile off"), values)
    return ""


_BY_OUTCOME: dict[Outcome, tuple[str, ...]] = {
    Outcome.OOM_WEIGHTS: (
        "the weights do not fit: {avail_before_weights_gib} GiB was free per GPU when loading began; raise "
        "--tp-size or use a quantised checkpoint (no --mem-fraction-static can fix this)",
        "the weights do not fit in GPU memory: raise --tp-size or use a quantised checkpoint (no "
        "--mem-fraction-static can fix this)"),
    Outcome.OOM_KV_POOL: _RAISE,
    Outcome.OOM_RUNTIME: ("memory ran out while serving: lower --mem-fraction-static (more activation headroom), "
                          "--chunked-prefill-size or --max-running-requests",),
    Outcome.CONFIG_ERROR: ("SGLang rejected the arguments (see the evidence): fix the flags",),
}

# A line SGLang alone writes: its logger's header with the rank tags its scheduler sets (utils/common.py:
# `[%Y-%m-%d %H:%M:%S TP1]`, ` DP0 PP0 TP1 EP1`; untagged, with TP=1, the header is any logger's), its package in a
# traceback frame, its entry points named. SGLang runs vLLM's code in its own processes (its layers, loaders and
# parallel state up to 0.4, some quantisation kernels since), and vLLM's logger then writes its own lines into SGLang's
# log ("INFO 02-19 15:51:07 weight_utils.py:164] Using model weights format"); vLLM runs no SGLang code.
SIGNATURE = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: (?:DP|PP|TP|EP|CP)\d+)+\] "
                       r'|File "[^"]*/sglang/|\bsglang\.(?:launch_server|srt)\b')

SGLANG = EngineLog("sglang", (*FAILURES, *SHARED_FAILURES, *PROGRESS, *SHARED_PROGRESS, *SHARED_SERVING, *SHARED_HINTS),
                   special_remedy, _BY_OUTCOME, SIGNATURE, imports=("vllm",))
