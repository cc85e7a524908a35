"""The vocabulary of engine log rules, shared by `sglang_log`, `vllm_log` and `classify`.

A `Rule` is data: literal `keys` that a line must contain before its regex is tried (the
cheap prefilter), the regex, what a match means (`kind`), and for failures the outcome,
how strongly the line decides it (`Strength`), the direction in which
`--mem-fraction-static` / `--gpu-memory-utilization` would help, and remedy templates.
`FigureBook` collects the figures the rules extract, with per-rank tallies, in bounded
memory. The rules every engine shares (torch/CUDA OOM text, argparse, port already in
use, CUDA faults, NCCL, Python exception lines, traceback frames) live here too.
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum, IntEnum

from autotune.records import Outcome, Phase


class RuleKind(str, Enum):
    PROGRESS = "progress"  # the launch reached `phase`; figures may be recorded
    READY = "ready"  # the engine's own ready line
    FAILURE = "failure"  # evidence of how the launch ends
    FLAG = "flag"  # a fact worth remembering (hybrid model, import error seen, ...)
    HINT = "hint"  # a traceback frame showing the phase that raised (phase None: a new traceback)
    SERVING = "serving"  # behaviour only a running server shows (batch lines, metrics, HTTP 2xx)


class Strength(IntEnum):
    """How much a failure line decides by itself; the strongest evidence wins."""

    TENTATIVE = 0  # an exception we do not know: a crash only if nothing better shows up
    GENERIC = 1  # a fatal marker without a class ("Scheduler hit an exception"): look above
    OOM = 2  # a raw CUDA OOM: its class comes from the phase it happened in
    SPECIFIC = 3  # the line names its class


Recorder = Callable[[re.Match[str], "FigureBook", str], None]


@dataclass(frozen=True)
class Rule:
    """One kind of log line.

    `keys`: literals (no digits), one of which the cleaned line must contain before
    `pattern` is searched; `^key` must start the line. On a match `record(match, book,
    source)` stores figures and `flag` is set. Failure rules are tried in order and the
    first to match a line wins. Templates in `remedy` use figure names and the regex's
    named groups; the first template whose fields are all known is used.
    """

    name: str
    keys: tuple[str, ...]
    pattern: re.Pattern[str]
    kind: RuleKind
    phase: Phase | None = None
    outcome: Outcome | None = None
    strength: Strength = Strength.SPECIFIC
    mfs_direction: int = 0
    shorter_context: bool = False  # the line says the context is above what is allowed (Need.SHORTER_CONTEXT)
    remedy: tuple[str, ...] = ()
    record: Recorder | None = None
    flag: str = ""
    note: bool = False  # worth showing as evidence even when nothing failed
    every_writer: bool = False  # a hint that speaks for every process, not only the one that logged it
    # a frame that runs whatever it is sent (vLLM's worker loop runs start-up steps and requests alike): it places a
    # failure only where no start-up function is named under it in the same traceback
    dispatcher: bool = False
    # (flag, outcome, remedy), or several: when `flag` was seen, the line means `outcome` instead (the first that holds).
    unless: tuple[tuple[str, Outcome, str], ...] = ()
    # a stop from outside the server (the batch system's clock): it ends the launch only before the ready line; after
    # it, a server that came up was stopped, and the launch stays ready
    before_ready: bool = False
    # progress any program prints alike (a loading bar over a checkpoint's shards): after the engine's own start-up is
    # done, it is another program's (a training library loading its copy of the model), not the launch starting over
    anyones: bool = False
    # Corpus case ids this rule was written from after they were added (docs/corpus-protocol.md):
    # the corpus score switches the rule off for those cases' sources, so fitting never counts.
    derived_from: tuple[str, ...] = ()


def rule(name: str, keys: str | tuple[str, ...], regex: str, kind: RuleKind, **kw: object) -> Rule:
    """Shorthand constructor: compiles `regex`, accepts one key or several."""
    key_tuple = (keys,) if isinstance(keys, str) else keys
    unless = kw.get("unless")
    if isinstance(unless, tuple) and unless and isinstance(unless[0], str):
        kw["unless"] = (unless,)  # one (flag, outcome, remedy)
    return Rule(name, key_tuple, re.compile(regex), kind, **kw)  # type: ignore[arg-type]


class FigureBook:
    """Figures seen so far (units in the names) plus flags and per-source tallies.

    Per-source state is kept for at most `max_sources` writers (ranks, processes); more
    are pooled under one key, so memory stays bounded whatever the log holds.
    """

    def __init__(self, max_sources: int = 64) -> None:
        self.values: dict[str, float] = {}
        self.flags: set[str] = set()
        self._per_source: dict[tuple[str, str], float] = {}
        self._sources: set[str] = set()
        self._max_sources = max_sources

    def _key(self, source: str) -> str:
        if source in self._sources or len(self._sources) < self._max_sources:
            self._sources.add(source)
            return source
        return "<other>"

    def set(self, name: str, value: float) -> None:
        self.values[name] = value

    def first(self, name: str, value: float) -> None:
        self.values.setdefault(name, value)

    def lowest(self, name: str, value: float) -> None:
        self.values[name] = min(value, self.values.get(name, value))

    def highest(self, name: str, value: float) -> None:
        self.values[name] = max(value, self.values.get(name, value))

    def tally(self, source: str, event: str) -> int:
        """Count `event` for `source`; returns the new count (1 for the first)."""
        key = (self._key(source), event)
        self._per_source[key] = self._per_source.get(key, 0) + 1
        return int(self._per_source[key])

    def seen(self, source: str, event: str) -> int:
        return int(self._per_source.get((self._key(source), event), 0))

    def accumulate(self, source: str, name: str, value: float) -> None:
        """Add `value` to `source`'s running sum; the figure is the largest sum over sources."""
        key = (self._key(source), name)
        self._per_source[key] = self._per_source.get(key, 0.0) + value
        self.highest(name, round(self._per_source[key], 4))


_UNIT_GIB = {"": 2.0**-30, "b": 2.0**-30, "bytes": 2.0**-30, "kib": 2.0**-20, "kb": 2.0**-20, "mib": 2.0**-10,
             "mb": 2.0**-10, "gib": 1.0, "gb": 1.0, "tib": 1024.0, "tb": 1024.0}


def to_gib(value: str, unit: str) -> float:
    """A size as logged ('448.00', 'MiB') in GiB. SGLang's and torch's 'GB'/'MB' are GiB/MiB."""
    return round(float(value) * _UNIT_GIB[unit.lower()], 4)


def number(text: str) -> float:
    """A logged number, thousands separators allowed ('1,234,560')."""
    return float(text.replace(",", ""))


def fill(templates: tuple[str, ...], values: Mapping[str, object]) -> str:
    """The first template whose fields are all in `values`, formatted; '' if none fits."""
    for template in templates:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f}
        if fields <= values.keys():
            return template.format(**{k: _show(values[k]) for k in fields})
    return ""


def _show(value: object) -> object:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# -- rules every engine shares --------------------------------------------------------------

_SIZE = r"(?P<{0}>[\d.]+) ?(?P<{0}_unit>[KMGT]i?B|bytes|B)\b"
# ... or a bare count of bytes (vLLM 0.6's "Initial free memory 41006317568": no unit, seven digits or more)
_SIZE_OR_BYTES = r"(?P<{0}>[\d.]+) ?(?P<{0}_unit>(?:[KMGT]i?B|bytes|B)\b|(?<=\d{{7}})(?!\.?\d))"
# Memory is read from the exception, in every wording torch, the drivers and the allocators use:
# the device's "out of memory", torch's exception class, "Tried to allocate" (torch's own figure),
# the driver and library status codes, XLA's RESOURCE_EXHAUSTED and allocators' "... failed with OOM".
# An allocator's guard against an absurd request ("CUDA out of memory. Tried to allocate more than 1EB memory.", torch's
# CUDA, NPU, MUSA and GCU allocators: an overflowed or negative size) says out of memory in an OOM's type: a size error,
# not memory that ran out (the runtime census, after F63). No OOM is read on a line that says so after its words.
OOM_TEXT = re.compile(
    r"(?:"
    r"(?:CUDA|HIP|NPU|XPU|MUSA|MPS|GPU|[Dd]evice) out of memory|(?:CUDA|HIP|cuda|hip) (?:driver |runtime )?error:"
    r" out of memory|\bOutOfMemoryError\b|Tried to allocate [\d.]+ ?[KMGT]i?B"
    # the libraries' allocation status, snake or camel case (cuBLAS's CUBLAS_STATUS_ALLOC_FAILED, MIOpen's
    # miopenStatusAllocFailed)
    r"|_STATUS_ALLOC_FAILED|[a-z]StatusAllocFailed\b"
    r"|cudaErrorMemoryAllocation"
    # XLA (TPU, JAX) out of device memory: "RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate
    # 2.00G", "...: Attempting to reserve 6.14G at the bottom of memory", "Ran out of memory in memory space hbm"
    r"|(?i:RESOURCE[_ ]EXHAUSTED):[^\n]{0,80}?(?:[Oo]ut of memory|Attempting to (?:allocate|reserve)|allocating device)"
    r"|Ran out of memory in memory space \w+"
    r"|FAILED TO ALLOC MEMORY"  # Ascend CANN's runtime (EL0004)
    # CANN's own code for it, whatever words follow (the manual's EL0004, Memory_Allocation_Failure; the runtime's
    # ACL_ERROR_RT_MEMORY_ALLOCATION), as torch_npu and ggml's CANN back end print it
    r"|\bEL0004\b|\bACL_ERROR_RT_MEMORY_ALLOCATION\b"
    # ROCm's HSA runtime out of resources: what a queue reports when a kernel's scratch memory cannot be backed by the
    # device's (ROCr, read for the runtime census; the callback prints "Available Free mem" after it). After F64, whose
    # 19200 (MI350X, "Available Free mem: 30 MB") its thread calls an OOM. Not Intel's UR_RESULT_ERROR_OUT_OF_RESOURCES
    # (code 40), which the corpora's threads call crashes as often as not.
    r"|\bHSA_STATUS_ERROR_OUT_OF_RESOURCES\b"
    r"|\bnrt_tensor_allocate\b[^\n]{0,60}?Allocation Failure"  # the Neuron runtime (AWS Inferentia / Trainium)
    # any runtime's status or error code that spells it, CamelCase or upper snake case, the device's memory named or not
    # (HIP's hipErrorOutOfMemory, the CUDA driver's CUDA_ERROR_OUT_OF_MEMORY, Apple Metal's
    # "kIOGPUCommandBufferCallbackErrorOutOfMemory", after F61; Level Zero's and the unified runtime's
    # ZE_/UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY, Vulkan's ErrorOutOfDeviceMemory; not the host's)
    r"|\b\w*(?:ErrorOutOf(?:Device)?Memory|ERROR_OUT_OF_(?:DEVICE_)?MEMORY)\b"
    r"|\bOOM\b[^\n]*\b(?:allocat\w*|device)\b|allocation failed[^\n]*\bOOM\b|NCCL[^\n]*out of memory"
    r"|(?:[Ff]ailed|[Ee]rror)[:,]? out of memory|can't allocate memory: you tried to allocate"
    # Any library's error or failure that says out of memory in the same clause: the CUDA driver's text through
    # a kernel compiler's error type (`Triton Error [CUDA]: out of memory`), an extension's allocator
    # (`CUDA Error: out of memory at csrc/x.cpp:62`), NCCL's `Cuda failure 'out of memory'`, `cudaError
    # error: 2 (out of memory)`. The form (an error word, then out of memory before the clause ends), not
    # a library's name, decides; a hyphenated "out-of-memory" in advice ("If out-of-memory error occurs")
    # is not an error. The error word may end an exception's class name: an engine's own allocator raising
    # `RuntimeError: alloc_req_slots runs out of memory` is the same fact; so may a name or code joined with
    # underscores (Ascend's `Memory_Allocation_Failure(EL0004): Failed to allocate memory.`, after F60).
    # (not where the clause names the host's memory: torch_npu's "Malloc pin memory failed, host out of memory")
    r"|(?i:(?:\b|(?<=[a-z_]))(?:error|failure)\b)(?![^\n.]{0,40}?\b(?i:host|pin(?:ned)?)\b)[^\n.]{0,40}?\bout of memory\b"
    # an allocation call whose result is out of memory ("CUDA runtime error in cudaMalloc((void**)(ptr), sizeof(T) *
    # size): out of memory", TensorRT-LLM's)
    r"|[Mm]alloc\w*\([^\n]{0,80}?\):? out of memory\b"
    # a device allocation that failed, told by an allocator's log line rather than a status: ROCclr's "Allocation
    # failed : Device memory : required :N | free :N", "Video memory allocation failed!", ggml's Vulkan back end's
    # "Device memory allocation of size N failed.", Habana's device-memory module "PT_DEVMEM Allocation failed for
    # size", ggml's SYCL back end's "can't allocate N Bytes of memory on device". Not NCCL's "Failed to CUDA calloc N
    # bytes": it follows whatever the CUDA call returned, on the line above it ("Cuda failure 1 'invalid argument'",
    # 17917; "Cuda failure 'out of memory'", read there)
    # (case by case rather than case-insensitive: a literal start is what keeps these cheap on every error line)
    r"|[Aa]llocation failed\W{0,3}(?:[Dd]evice|[Vv]ideo|GPU|VRAM|HBM) memory\b"
    r"|(?:[Dd]evice|[Vv]ideo|GPU|VRAM|HBM) memory allocation (?:of size \d+ ?\w* )?failed\b"
    r"|DEVMEM\b[^\n]{0,20}?(?:\bOOM\b|\b[Aa]llocation failed\b)"
    r"|(?:[Ff]ailed to|[Cc]an't|[Cc]annot|[Cc]ould not|[Uu]nable to) allocate\b[^\n]{0,40}?\bon (?:the )?(?:device|GPU|gpu)\b"
    # The same fact told as an allocation that failed ("RuntimeError: Failed to allocate memory for KV cache: requested
    # 10.0 GiB", "Error: unable to allocate 2147483648 bytes on device 0") or as device memory that is too little
    # ("insufficient GPU memory"): an error's words, the device's memory (not the host's, not shared memory).
    r"|(?i:(?:\b|(?<=[a-z_]))(?:error|failure|exception)\b[^\n]{0,60}?\b(?:failed|unable|could not|couldn't) to "
    r"allocate\b(?![^\n]*\b(?:host|cpu|pinned|shared memory|shm)\b)[^\n]{0,60}?(?:\bmemory\b|\bbytes\b|\d ?[kmgt]i?b\b))"
    r"|(?i:\b(?:not enough|insufficient) (?:GPU|device|CUDA|VRAM|HBM|NPU|XPU|MPS|Metal|unified) memory\b)"
    # a device's allocator with no vendor's word in it: "Out of Memory: Not enough space to allocate 117440512 B DRAM
    # buffer across 12 banks" (Tenstorrent's, after F62); not the host's, the disk's or shared memory
    r"|(?i:\bnot enough (?:space|memory) to allocate\b)(?![^\n]*\b(?i:host|cpu|pinned|shared memory|shm|disk)\b)"
    # torch's caching allocator, out of memory, asks NVML which processes hold the device to write its message; where
    # NVML cannot answer (a container) its assert fails instead: "NVML_SUCCESS == r INTERNAL ASSERT FAILED at
    # ../c10/cuda/CUDACachingAllocator.cpp" (only that path queries NVML: the OOM without its words)
    r"|NVML_SUCCESS == (?:r\b|DriverAPI::get\(\)->nvml\w+\(\)) ?INTERNAL)"
    r"(?![^\n]*\bmore than 1 ?EB\b)")  # (after the match: looked for once a match is found, not at every position)
_ALLOCATED = re.compile(_SIZE.format("alloc") + r" is allocated by PyTorch|; " + _SIZE.format("alloc2")
                        + r" already allocated")
# torch 2.1 wrote "total capacty" (sic).
_TOTAL = re.compile(r"total capac(?:i)?ty of " + _SIZE.format("total") + r"|; " + _SIZE.format("total2")
                    + r" total capacity")
_TRIED = re.compile(r"Tried to allocate " + _SIZE.format("tried"))
# "with 46.00 MiB allocated in private pools (e.g., CUDA Graphs)": memory of captured graphs
_PRIVATE = re.compile(r"with " + _SIZE.format("pool") + r" allocated in private pools")
_FREE = re.compile(r"of which " + _SIZE.format("free") + r" is free|; " + _SIZE.format("free2") + r" free;")
# The caching allocator's warning: "memory allocation failed with OOM on device 1 while trying to allocate 4334813184
# bytes (free: 3779919872, total: 287431131136)".
_BYTES = re.compile(r"trying to allocate (?P<tried>\d+) bytes \(free: (?P<free>\d+), total: (?P<total>\d+)\)")
# What the failing process itself holds: torch counts it ("this process has X memory in use", including memory
# outside PyTorch), and PyTorch's own share ("X is reserved by PyTorch but unallocated" on top of what is allocated;
# older torch: "X reserved in total by PyTorch"). In a container torch may see the process as holding 0 bytes.
_OWN = re.compile(r"this process has " + _SIZE.format("own") + r" memory in use")
_RESERVED = re.compile(_SIZE.format("spare") + r" is reserved by PyTorch but unallocated|; "
                       + _SIZE.format("reserved") + r" reserved in total by PyTorch")


def record_oom(m: re.Match[str], book: FigureBook, source: str) -> None:
    """Figures of a torch OOM message: the allocation that failed, what was free, the device's
    total and what PyTorch itself had allocated (every torch wording, old and new)."""
    text = m.string
    tried = _TRIED.search(text)
    if tried:
        book.first("oom_tried_gib", to_gib(tried["tried"], tried["tried_unit"]))
    free = _FREE.search(text)
    if free:
        name = "free" if free["free"] else "free2"
        book.first("oom_free_gib", to_gib(free[name], free[f"{name}_unit"]))
    total = _TOTAL.search(text)
    if total:
        name = "total" if total["total"] else "total2"
        book.first("oom_total_gib", to_gib(total[name], total[f"{name}_unit"]))
    pool = _PRIVATE.search(text)
    if pool:
        book.first("oom_private_pool_gib", to_gib(pool["pool"], pool["pool_unit"]))
    allocated = _ALLOCATED.search(text)
    if allocated:
        name = "alloc" if allocated["alloc"] else "alloc2"
        book.first("oom_allocated_gib", to_gib(allocated[name], allocated[f"{name}_unit"]))
    own = _OWN.search(text)
    held = [to_gib(own["own"], own["own_unit"])] if own else []
    reserved = _RESERVED.search(text)
    if reserved and reserved["reserved"]:
        held.append(to_gib(reserved["reserved"], reserved["reserved_unit"]))
    elif allocated and reserved:
        held.append(round(book.values["oom_allocated_gib"] + to_gib(reserved["spare"], reserved["spare_unit"]), 4))
    if held:
        book.first("oom_own_gib", max(held))


def record_oom_bytes(m: re.Match[str], book: FigureBook, source: str) -> None:
    """The caching allocator's figures in bytes (`_BYTES`), wherever its warning put them."""
    for name in ("tried", "free", "total"):
        book.first(f"oom_{name}_gib", round(int(m[name]) / (1 << 30), 4))


def memory_outside_gib(figures: Mapping[str, float]) -> float | None:
    """GiB of the device an OOM message shows held outside the failing process (other processes, seen or
    not: containers hide them), from its own figures: the device's total less what was free and what the
    process held. None when the message does not give all three."""
    total, free, own = (figures.get(k) for k in ("oom_total_gib", "oom_free_gib", "oom_own_gib"))
    if total is None or free is None or own is None:
        return None
    return round(max(0.0, total - free - own), 4)


# A message that blames memory held by others may carry the figures that would show it: the free memory before and
# after (vLLM's profiling check: "Initial free memory 30.3 GiB, current free memory 30.3 GiB"), or the free memory of
# the device's total ("Free memory on device (47.10/47.38 GiB)"). Those figures decide, not the sentence.
# A model module that failed to import (SGLang: "Ignore import error when loading sglang.srt.models.deepseek_v2: ..."),
# kept as `IMPORT_FAILED` + its name: a healthy install has several (optional libraries absent, kernels this device
# lacks), so an architecture refused is a broken environment only where its own module is one of them.
IMPORT_FAILED = "import_failed:"
IMPORT_ERROR = "import_error"
BACKEND_BUILT = "backend_built"  # a traceback frame inside an attention backend's constructor
_ARCH_SUFFIX = re.compile(r"(?:For(?:CausalLM|ConditionalGeneration|SequenceClassification|MaskedLM)|LMHeadModel|Model)$")


def _stem(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", _ARCH_SUFFIX.sub("", name).lower())


def record_import_failed(m: re.Match[str], book: FigureBook, source: str) -> None:
    book.flags.add(IMPORT_FAILED + _stem(m["module"].rsplit(".", 1)[-1]))


def record_arch_refused(m: re.Match[str], book: FigureBook, source: str) -> None:
    """Flag `IMPORT_ERROR` when a module that failed to import is the refused architecture's (the same stem, or one
    shared for five letters: DeepseekV3ForCausalLM lives in deepseek_v2)."""
    arch = next((v for k, v in m.groupdict().items() if k.startswith("arch") and v), None)
    if arch is None:
        return
    want = _stem(arch)
    for flag in [f for f in book.flags if f.startswith(IMPORT_FAILED)]:
        module = flag[len(IMPORT_FAILED):]
        shared = len(os.path.commonprefix([want, module]))
        if module and (shared >= min(5, len(want), len(module))):
            book.flags.add(IMPORT_ERROR)
            return


_FREE_FIGURE = re.compile(r"(?i:\bfree\b)(?: [A-Za-z]+){0,3}:? " + _SIZE_OR_BYTES.format("free"))
_FREE_OF_TOTAL = re.compile(r"(?i:\bfree\b)[^()\n]{0,40}\((?P<free>[\d.]+)/(?P<total>[\d.]+) ?(?P<unit>[KMGT]i?B)\)")
FIGURE_ROUNDING_GIB = 0.1  # two free figures this close are the same (messages round to a tenth of a GiB)
# What the engine's own CUDA context holds of an idle device is well below this share (about 0.5 GiB of 80): a device
# with no more than it taken holds nothing of anyone else's. Small devices, where a context is a larger share, keep
# the engine's word.
IDLE_SHARE = 0.02


def others_disproved(text: str) -> str:
    """Why the figures in a message that blames memory held by other processes show that none was ('' when they
    do not, or it gives none): its free memory before and after are the same (no one took or released any), or
    what is not free of the device's total is no more than the engine's own CUDA context (no one holds any)."""
    found = [(m["free"], m["free_unit"] or "") for m in _FREE_FIGURE.finditer(text)]
    frees = [to_gib(value, unit) for value, unit in found]
    # figures in bytes are exact (any change moved memory); in GiB they are rounded to a tenth
    exact = all("." not in value and unit in ("", "B", "bytes") for value, unit in found)
    same = len({value for value, _ in found}) == 1 if exact else max(frees, default=0) - min(frees, default=0) < \
        FIGURE_ROUNDING_GIB
    if len(frees) >= 2 and same:
        return f"free memory was {frees[0]:g} GiB before and {frees[-1]:g} GiB after"
    of_total = _FREE_OF_TOTAL.search(text)
    if of_total is not None:
        free, total = (to_gib(of_total[k], of_total["unit"]) for k in ("free", "total"))
        if total - free <= IDLE_SHARE * total:
            return f"{free:g} of the device's {total:g} GiB was free"
    return ""


NOT_HELD_BY_OTHERS = ("the engine blames memory held by other processes, but its own figures show none ({figures_say}): "
                      "a check that failed for another reason, not a busy GPU (see the evidence)")
OOM_KEYS = ("out of memory", "Out of memory", "Error", "Tried to allocate", "ALLOC_FAILED", "AllocFailed", "OOM",
            "HSA_STATUS_ERROR_OUT_OF_RESOURCES",
            "EL", "MEMORY_ALLOCATION", "llocation failed", "llocation of size", "DEVMEM", "malloc", "Malloc", "allocate",
            "Ran out of memory",
            "RESOURCE_EXHAUSTED", "esource exhausted", "ALLOC MEMORY", "Allocation Failure", "OUT_OF_DEVICE_MEMORY",
            "ERROR_OUT_OF_MEMORY", "can't allocate memory", "NVML_SUCCESS", "to allocate", "to Allocate",
            "nsufficient", "ot enough", "NSUFFICIENT", "OT ENOUGH")
PORT_REMEDY = ("port {port} is already taken by another process: stop whatever listens on it, or leave the "
               "spec's port unset (each trial then draws its own free HTTP and distributed-init ports)",
               "a port the server needs (its HTTP port or its distributed-init port) is already in use (a "
               "leftover server?): stop the process holding it, or leave the spec's port unset so each trial "
               "draws its own free ports")

# The flag an engine's rule sets when the server was asked to stop (its SIGTERM handler's line): what it logs
# afterwards about children dying or SIGQUIT is that stop's echo, not a failure (see `LogClassifier`).
STOP_REQUESTED = "stop_requested"

SHARED_FAILURES: tuple[Rule, ...] = (
    rule("argparse", (": error: ", "^error: "),
         r"(?:^|: )error: (?P<argerror>(?:unrecognized arguments|ambiguous option|argument [-\w/ ]+:"
         r"|the following arguments are required|invalid choice).*)",
         RuleKind.FAILURE, outcome=Outcome.CONFIG_ERROR,
         remedy=("the engine's argument parser rejected the command line ({argerror}): fix the flags",)),
    # A dtype the quantization method cannot run in ("torch.bfloat16 is not supported for quantization method awq.
    # Supported dtypes: [torch.float16]"): the dtype asked for (or the checkpoint's default) against the method's.
    rule("dtype_for_quantization", "is not supported for quantization method",
         r"(?P<dtype>(?:torch\.)?\w+) is not supported for quantization method (?P<method>[\w-]+)",
         RuleKind.FAILURE, outcome=Outcome.CONFIG_ERROR, derived_from=("2804",),
         remedy=("the quantization method {method} cannot run in {dtype}: pass --dtype with one it supports (float16 "
                 "for most), or another quantization",)),
    # An op with no kernel for the low-precision dtype it was given (torch: '"index_cpu" not implemented for
    # 'Float8_e4m3fn'', '"addmm_impl_cpu_" not implemented for 'Half''): the dtype, KV-cache dtype or quantization the
    # config chose does not run on this device or build, and every launch with it fails the same way. Not an integer
    # or bool dtype: an op without those is the code's fault (tests/data/launch-census, kv-fp8).
    rule("dtype_without_kernel", "not implemented for '",
         r"\"(?P<op>\w+)\" not implemented for '(?P<dtype>Float8_\w+|Float4_\w+|Half|BFloat16|ComplexHalf)'",
         RuleKind.FAILURE, outcome=Outcome.CONFIG_ERROR,
         remedy=("{op} has no kernel for {dtype} on this device or build: the dtype, KV-cache dtype or quantization "
                 "the config asks for cannot run here; choose another (lowering memory will not help)",)),
    # An op this build registered as a stub, without its kernel (vLLM's CPU build: "_C::static_scaled_fp8_quant()
    # expected at most 0 argument(s) but received 4 argument(s). Declaration: _C::static_scaled_fp8_quant() -> ()"): what
    # calls it (a quantization, a KV-cache dtype the config or the checkpoint asks for) cannot run on this build
    # (tests/data/launch-census, quant-fp8).
    rule("op_stub_in_build", "expected at most ",
         r"(?P<op>\w+::\w+)\(\) expected at most 0 argument\(s\) but received \d+ argument\(s\)\. Declaration: "
         r"(?P=op)\(\) -> \(\)", RuleKind.FAILURE, outcome=Outcome.CONFIG_ERROR,
         remedy=("{op} has no kernel in this build (a stub): the quantization or dtype that calls it cannot run here; "
                 "turn it off or use a build for this device (lowering memory will not help)",)),
    # A value above the limit a flag sets, in the engine's words ("LoRA rank 32 is greater than max_lora_rank 16"):
    # the flag, or the value, is the config's.
    rule("above_configured_max", "than max_", r"\b(?P<what>\w+(?: \w+)?) \d+ is (?:greater|larger) than "
         r"(?P<limit>max_\w+)(?: \(?\d+\)?)?", RuleKind.FAILURE, outcome=Outcome.CONFIG_ERROR, derived_from=("3410",),
         remedy=("the {what} asked for is above {limit}: raise --{limit} (its flag) or lower the {what}",)),
    # The banner comes first; the "error:" line after it says more, so the banner is weaker.
    rule("usage_banner", ("^usage: ",), r"^usage: \S+(?: \S+)? \[-h\]", RuleKind.FAILURE,
         outcome=Outcome.CONFIG_ERROR, strength=Strength.GENERIC,
         remedy=("the engine printed its usage banner: argparse rejected the command line; fix the flags",)),
    # torch's c10d *warns* "(errno: 98 - Address already in use)" when only IPv6 fails: not fatal.
    rule("port_in_use", ("Errno", "EADDRINUSE", "failed to listen"),
         r"error while attempting to bind on address \('[^']*', (?P<port>\d+)\)|Error: \[Errno 98\] "
         r"[Aa]ddress already in use|failed to listen on any local network address", RuleKind.FAILURE,
         outcome=Outcome.CRASH, remedy=PORT_REMEDY),
    # The engine's own watchdogs gave up on a hang: torch's NCCL watchdog on a collective that never finished, SGLang's
    # scheduler watchdog on a batch that never did. A hang, not memory and not the config.
    # torch's c10d store gives up on peers that never joined the rendezvous the same way ("waitForInput: socket ...
    # timed out after 1800000ms", "DistStoreError: Timed out after 1801 seconds waiting for clients").
    rule("engine_timeout", ("Watchdog caught collective operation timeout", "watchdog timeout", "Watchdog timeout",
                            "failed or timed out", "Timeout at NCCL work", "imed out after", "Timed out waiting",
                            "Engine iteration timed out", "watchdog got stuck"),
         r"Watchdog caught collective operation timeout|(?:Scheduler )?[Ww]atchdog timeout \(self\.watchdog_timeout="
         r"|Some NCCL operations have failed or timed out|Timeout at NCCL work: \d+"
         r"|waitForInput: socket .{0,200}? timed out after \d+ ?ms|Timed out after \d+ seconds waiting for clients"
         r"|DistStoreError: Timed out after \d+ seconds"
         # (vLLM V0's engine loop, on a step that never returned: "Engine iteration timed out. This should never happen!")
         r"|Engine iteration timed out"
         # (torch's heartbeat monitor, when the NCCL watchdog itself stopped: "ProcessGroupNCCL's watchdog got stuck for
         # 600 seconds without making progress in monitoring enqueued collectives", a NCCL or CUDA call that never returned)
         r"|watchdog got stuck for \d+ seconds without making progress"
         # gloo's words, wherever its source path went (a paste may put it on the line above)
         r"|Timed out waiting \d+ ?ms for (?:send|recv) operation",
         RuleKind.FAILURE, outcome=Outcome.TIMEOUT,
         remedy=("the engine's own watchdog gave up on a hang (a collective or a batch that never finished): check "
                 "the interconnect, NCCL_* settings and peers that never joined; this says nothing about memory",)),
    # Something the launch waited on could not be had in the time it allowed ("Cannot provide a placement group of
    # placement_group_specs=[...] within 1800 seconds"): a wait that ran out, whatever the exception's type.
    rule("not_within", ("within",),
         r"(?i:\b(?:cannot|can't|could not|couldn't|unable to|did not|didn't|never)\b[^\n]{0,300}?\bwithin \d+(?:\.\d+)? ?"
         r"(?:s|secs?|seconds|min|minutes)\b)", RuleKind.FAILURE, outcome=Outcome.TIMEOUT, derived_from=("3512",),
         remedy=("what the launch waited for (GPUs from Ray, a peer, a file) did not come in the time allowed: check "
                 "that the resources it asks for exist and are free; not memory",)),
    # The batch system ended the job at its time limit (slurm: "*** JOB 1422882 ON ac045 CANCELLED AT 2026-01-30T23:14:08
    # DUE TO TIME LIMIT ***"; PBS: "job killed: walltime 3605 exceeded limit 3600"): the launch ran out of time.
    rule("job_time_limit", ("DUE TO TIME LIMIT", "walltime"),
         r"CANCELLED AT \S+ DUE TO TIME LIMIT|job killed: walltime \d+ exceeded limit \d+", RuleKind.FAILURE,
         outcome=Outcome.TIMEOUT, derived_from=("3007",), before_ready=True,
         remedy=("the batch system killed the job at its time limit: the launch (a download, the weights, a compile) "
                 "took longer than the job's wall time, or hung; give the job more time or look where it stopped",)),
    # A launcher that waited for the server to come up and gave up ("sglang server did not become ready after waiting",
    # "Server failed to become ready within 600 s", "vLLM server not ready after 900 seconds"): a hang seen from outside.
    # Tentative: a waiter that retries says so too, and a server that comes up after it was only slow.
    rule("never_ready", ("become ready", "become healthy", "not ready after", "not ready within"),
         r"(?i:\b(?:did not|didn't|never|failed to|could not) become (?:ready|healthy)\b|\bnot (?:ready|healthy) "
         r"(?:after|within)\b)", RuleKind.FAILURE, outcome=Outcome.TIMEOUT, strength=Strength.TENTATIVE,
         derived_from=("2022",),
         remedy=("the launcher waited for the server to become ready and gave up: a start-up that hangs or is slower "
                 "than the wait (look at the server's own log for where it stopped); not memory by itself",)),
    # A launcher that watched the server's output and saw it end before the server was ready ("Stdout stream ended
    # before readiness message detected.", "server process exited before it became ready"): the server died starting,
    # its cause above if in view. Tentative, as an exception we do not know.
    rule("ended_before_ready", ("before",),
         r"(?i:\b(?:stream|output|stdout|stderr|process|server|subprocess|engine)\b[^\n]{0,40}?\b(?:ended|exited|closed"
         r"|died|terminated|stopped)\b[^\n]{0,20}?\bbefore\b[^\n]{0,40}?\b(?:ready|readiness|it became ready"
         r"|becoming ready|start-?up (?:was |is )?complete)\b)", RuleKind.FAILURE, outcome=Outcome.CRASH,
         strength=Strength.TENTATIVE, derived_from=("6921",),
         remedy=("the launcher saw the server's output end before it was ready: the server died starting (its cause, "
                 "if logged, is above); not memory by itself",)),
    # "Model architectures ['X'] are not supported for now. Supported architectures: [..., 'X', ...]": the message
    # lists the architecture it rejects, so the registry knew it and its module failed to import: a broken
    # environment, as the engines' own import-error lines say (the engines' `arch_unsupported` leaves it).
    rule("arch_listed_as_supported", "Supported architectures",
         r"Model architectures \['(?P<arch>\w+)'\] (?:are|is) not supported.*?Supported architectures: .*?'(?P=arch)'",
         RuleKind.FAILURE, outcome=Outcome.CRASH, derived_from=("1323",),
         remedy=("the engine rejects {arch} though its own list of supported architectures holds it: the model's code "
                 "failed to import (a broken environment: toolchain, kernels, libraries), not the config",)),
    # The engines' Transformers fallback finding no implementation of the model's architecture: "Cannot find model
    # module. 'X' is not a registered model in the Transformers library ...", "X has no vLLM implementation and the
    # Transformers implementation is not compatible with vLLM" (SGLang's census row says the same): the model the user
    # chose is not one this engine runs, as `arch_unsupported` says in the engines' other words; SGLang 0.3-0.4's own
    # registry said "Unsupported architectures: X. Supported list: [...]" (its 0.4 source census).
    rule("no_implementation", ("registered model", "implementation", "Unsupported architecture"),
         r"'?(?P<arch>\w+)'? is not a registered model in the Transformers library"
         r"|(?P<arch2>\w+) has no (?:vLLM|SGLang|SGlang|sglang) implementation and the Transformers implementation is not"
         r" compatible"
         r"|Unsupported architectures?: (?P<arch3>\w+)", RuleKind.FAILURE, outcome=Outcome.CONFIG_ERROR,
         remedy=("this engine has no implementation of the model's architecture (nor does its Transformers fallback run "
                 "it): another engine version or model",), record=record_arch_refused,
         unless=(IMPORT_ERROR, Outcome.CRASH, "the model's code failed to import: a broken environment, not the config")),
    # Transformers not knowing the checkpoint's model type ("The checkpoint you are trying to load has model type `X` but
    # Transformers does not recognize this architecture."; before 4.4x: "Unrecognized model in PATH. Should have a
    # `model_type` key in its config.json, or contain one of the following strings in its name"): the model the user
    # chose is newer than the installed stack knows, or its config is not a model's. The engines meet it reading the
    # model's config, chained to the KeyError of transformers' own lookup, which is not the failure.
    rule("model_type_unknown", ("does not recognize this architecture", "Unrecognized model in"),
         r"has model type `?(?P<arch>[\w.-]+)`? but Transformers does not recognize this architecture"
         r"|Unrecognized model in (?P<path>\S+?)\.? Should have a `model_type` key", RuleKind.FAILURE,
         outcome=Outcome.CONFIG_ERROR, derived_from=("8710",),
         remedy=("the installed transformers does not know the model type {arch}: a transformers (or engine release) "
                 "that has it, or another model; not memory",
                 "transformers finds no model type in {path}'s config.json: fix the model path or its config; not "
                 "memory")),
    # The interpreter itself, asked to run a module it cannot find (`python -m vllm.entrypoints.openai.api_server` in an
    # environment without the engine): "/venv/bin/python: Error while finding module specification for 'vllm.x'
    # (ModuleNotFoundError: No module named 'vllm')", "/usr/bin/python3: No module named sglang". Nothing started.
    rule("no_module_to_run", "python",
         r"python[\d.]*: (?:Error while finding module specification for '(?P<module>[\w.]+)' \((?P<exc>\w+): [^)]*\)"
         r"|No module named (?P<bare>[\w.]+))", RuleKind.FAILURE, outcome=Outcome.CRASH,
         remedy=("the Python that ran the launch cannot find the engine's module: it is not installed in that "
                 "environment (or another interpreter ran); not the config, not memory",)),
    # Triton's kernel asking for more on-chip shared memory than the GPU has ("triton.runtime.errors.OutOfResources: out
    # of resource: shared memory, Required: 163840, Hardware limit: 101376"): a kernel configuration too big for this GPU,
    # not device memory; no memory setting changes it.
    rule("out_of_resources", ("out of resource", "OutOfResources"),
         r"(?i:out of resources?): (?P<what>shared memory|registers|\w+)(?:, Required: (?P<need>\d+), Hardware limit: "
         r"(?P<limit>\d+))?", RuleKind.FAILURE, outcome=Outcome.CRASH,
         remedy=("a Triton kernel needs more {what} than this GPU has on chip: not device memory, no memory setting "
                 "helps; another attention/MoE backend or a kernel build for this GPU",)),
    rule("nccl", "NCCL", r"NCCL error(?![^\n]*(?:out of memory|unhandled cuda error))|nccl(?!UnhandledCuda)\w*Error"
         r"|ncclInternalError",
         RuleKind.FAILURE, outcome=Outcome.CRASH,
         remedy=("NCCL failed (not a memory problem): check the interconnect, NCCL_* settings and that "
                 "no stale process holds the GPUs",)),
    # NCCL relaying a CUDA call that failed ("NCCL error in: ...ProcessGroupNCCL.cpp:1970, unhandled cuda error",
    # `ncclUnhandledCudaError: Call to CUDA function failed.`) names no cause itself: its "Last error:" or its own WARN
    # line ("NCCL WARN Cuda failure 2 'out of memory'") says which, and an OOM there is the launch's.
    rule("nccl_cuda", ("unhandled cuda error", "ncclUnhandledCudaError"),
         r"NCCL error[^\n]*unhandled cuda error|ncclUnhandledCudaError", RuleKind.FAILURE, outcome=Outcome.CRASH,
         strength=Strength.GENERIC,
         remedy=("NCCL says a CUDA call failed under it; the CUDA error (its \"Last error:\" or an NCCL WARN line above) "
                 "says which: not memory unless that says out of memory",)),
    # (SGLang 0.5's piecewise graphs: "Piecewise CUDA Graph failed with error: <cause>", its source census)
    rule("graph_capture_failed", ("Capture", "CUDA", "Fail when using backend", "StreamCapture", "Piecewise"),
         r"(?:Capture [\w ]*?(?:cuda|CUDA|CPU|NPU|XPU|cpu) graph failed|(?P<piecewise>Piecewise) CUDA Graph failed with error): "
         r"(?P<cause>.*)|Fail when using backend:"
         r" \w+ for prefill runner|operation not permitted when stream is capturing"
         r"|cudaErrorStreamCapture\w*",
         RuleKind.FAILURE, outcome=Outcome.OOM_CUDA_GRAPH, record=record_oom),
    # Memory held by others, said in words (any engine, any check): an exception whose message names other
    # processes (or instances) and memory, or asks to release / free GPU memory. A pid in torch's OOM text
    # ("Process 691170 has ... memory in use") is not this: in a container that is the engine's own pid.
    rule("memory_held_by_others", ("other process", "another process", "other instance", "another instance",
                                   "release", "occupied by", "used by other", "held by other", "free up", "other program",
                                   "another program", "other application", "another application"),
         r"^\s*(?:[\w.]*(?:Error|Exception|Failure))\b:?.*?(?P<held>(?:other|another) (?:process(?:es)?|instances?"
         r"|programs?|applications?)[^\n]{0,80}?\b(?:GPU |device |CUDA )?memory\b"
         r"|(?:other|another) (?:process(?:es)?|programs?|applications?) (?:is|are) using (?:the )?(?:GPU|device|NPU)s?\b"
         r"|(?:GPU|device|CUDA) memory[^\n]{0,60}?"
         r"\b(?:used|occupied|held|taken) by (?:other|another)\b|\b(?:release|free up) (?:the |some )?(?:GPU|device|CUDA)"
         r" memory\b)", RuleKind.FAILURE, outcome=Outcome.GPU_BUSY,
         remedy=("the engine says memory is held by others ({held}): " + Outcome.GPU_BUSY.facts.remedy[0],)),
    # The same family from its figures alone: a check that free memory moved while the engine profiled its own use
    # (vLLM: "Error in memory profiling. Initial free memory 30.3 GiB, current free memory 34.2 GiB. This happens
    # when the GPU memory was not properly cleaned up ..."): memory someone else held, released or took meanwhile.
    # Figures that did not move disprove it (`others_disproved`, in the classifier).
    # (vLLM 0.8's V0 worker says it of the memory used: "Initial used memory 42143031296, currently used memory
    # 40021213184", its source census)
    rule("free_memory_moved", ("Initial free memory", "Initial used memory"),
         r"^\s*(?:[\w.]*(?:Error|Exception))\b:?.*?Initial (?:free|used) memory "
         + _SIZE_OR_BYTES.format("before") + r", current(?:ly)? (?:free|used) memory " + _SIZE_OR_BYTES.format("after"),
         RuleKind.FAILURE,
         outcome=Outcome.GPU_BUSY,
         remedy=("free GPU memory moved while the engine profiled its own use: another process took or released "
                 "memory meanwhile (a previous server still exiting?); free the GPU and relaunch; this says nothing "
                 "about the config",)),
    # CUDA's cudaErrorDevicesUnavailable: the device is in exclusive-process mode and another process has it, or is
    # prohibited to compute. Not memory, not the config: the GPU is taken.
    # (JAX on a TPU another process has: "The TPU is already in use by process with pid 2718466")
    rule("devices_unavailable", ("busy or unavailable", "already in use by", "being used by", "DevicesUnavailable",
                                 "DEVICE_UNAVAILABLE"),
         r"CUDA-capable device(?:\(s\) is/are|s are) busy or unavailable"  # (CUDA 10-11: "all ... devices are")
         # (the same error by its code's name: the runtime's and the driver's)
         r"|\b(?:cuda|hip)ErrorDevicesUnavailable\b|\bCUDA_ERROR_DEVICE_UNAVAILABLE\b"
         r"|\b(?:TPU|GPU|NPU|XPU|device|accelerator)s?(?: \d+)? (?:is|are) (?:already in use|being used) by "
         r"(?:another |other )?process",
         RuleKind.FAILURE, outcome=Outcome.GPU_BUSY,
         remedy=("the device is busy or unavailable: another process holds it (a GPU in exclusive-process compute "
                 "mode, or with compute prohibited: `nvidia-smi -q -d COMPUTE`; a TPU another process opened); free it "
                 "or change the mode",)),
    # The host, not the device, out of memory: Ray's memory monitor kills a task when the node's RAM runs low
    # ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory."); a crash, as the
    # kernel's OOM killer is, that no GPU memory setting changes.
    rule("host_oom", ("running low on memory", "memory usage threshold"),
         r"\bnode (?:was )?running low on memory\b|exceeds the memory usage threshold", RuleKind.FAILURE,
         outcome=Outcome.CRASH,
         remedy=("the host ran out of RAM (Ray's memory monitor killed a task), not the GPU: give the node more memory "
                 "or run fewer processes on it; no GPU memory setting helps",)),
    # The same, reported afterwards by the layer around the engine: Slurm once the kernel's OOM killer acted in a job's
    # cgroup ("error: Detected 2 oom_kill events in StepId=1454668.batch. Some of the step tasks have been OOM
    # Killed.", F68's 20216), Kubernetes' container status ("Reason: OOMKilled"), Docker's ("OOMKilled": true), systemd's
    # unit ("Failed with result 'oom-kill'"). A marker, not a cause: a device's own out-of-memory above it decides
    # (corpus 9509: CUDA's OOM while the weights load, then Slurm's kill report); alone it names host RAM, as the
    # kernel's own line does (`trial.oomkill` reads the kernel's count so on a GPU engine).
    rule("host_oom_reported", ("oom_kill event", "oom-kill event", "OOM Killed", "OOMKilled", "oom-kill"),
         r"\bDetected \d+ oom[_-]kill events?\b|\bhave been OOM Killed\b|result '?oom-kill'?"
         r'|\b(?:[Rr]eason|[Ss]tatus|[Ss]tate)"?\s*[:=]\s*"?OOMKilled\b|"OOMKilled":\s*true\b',
         RuleKind.FAILURE, outcome=Outcome.CRASH, strength=Strength.GENERIC,
         remedy=("the host ran out of RAM (the batch system or the container runtime says its OOM killer acted), not "
                 "the GPU: give the host more memory or run fewer processes on it; no GPU memory setting helps",)),
    rule("cuda_oom", OOM_KEYS, OOM_TEXT.pattern, RuleKind.FAILURE, strength=Strength.OOM, record=record_oom),
    # torch's allocator warning gives its figures in bytes, on a line of their own when the warning wraps
    rule("oom_bytes", "trying to allocate", _BYTES.pattern, RuleKind.FLAG, record=record_oom_bytes),
    # Exception types that only a bad argument raises: the model id / path or the engine's config
    # dataclasses (pydantic) were rejected before any GPU work.
    # (the hub's own errors for a model it cannot give: no such repository, revision or file, a gated one, or one not
    # in the local cache while the hub is offline by choice, "outgoing traffic has been disabled"; not cached where the
    # hub could not be reached, "Please check your connection", is the network's fault, a crash)
    rule("config_exception", ("HFValidationError", "RepositoryNotFoundError", "GatedRepoError", "ArgumentTypeError",
                              "ArgumentError", "EntryNotFoundError", "RevisionNotFoundError",
                              "not a valid model identifier"),
         r"^\s*(?:[A-Za-z_]\w*\.)*(?P<exc>HFValidationError|RepositoryNotFoundError|GatedRepoError|EntryNotFoundError"
         r"|LocalEntryNotFoundError(?=:[^\n]*?(?:outgoing traffic has been disabled|local_files_only))"
         r"|RevisionNotFoundError|ArgumentTypeError|ArgumentError)"
         r"\b(?!\w)|is not a local folder and is not a valid model identifier", RuleKind.FAILURE,
         outcome=Outcome.CONFIG_ERROR,
         remedy=("the model path or an argument was rejected before any GPU work ({exc}): fix the command line",
                 "the model path is neither a local folder nor a valid model id: fix --model-path / --model",)),
    # transformers, asked for a file the model needs that its path or repository does not hold, raises
    # "OSError: <path> does not appear to have a file named configuration_phi3.py" (config.json, the remote code's
    # modules, preprocessor_config.json): the model given is incomplete or not what it should be. Only as an exception:
    # a missing generation_config.json is logged as a warning, and the launch goes on.
    rule("model_file_missing", "does not appear to have a file named",
         r"^\s*(?:[A-Za-z_]\w*\.)*(?P<exc>OSError|EnvironmentError|FileNotFoundError|ValueError): (?P<path>\S+) does "
         r"not appear to have a file named (?P<file>[\w.-]+?)\.?(?:\s|$)", RuleKind.FAILURE,
         outcome=Outcome.CONFIG_ERROR, derived_from=("12813",),
         remedy=("the model at {path} has no {file}, which loading it needs: fix the model path, or fetch the model "
                 "whole; not memory",)),
    # Both engines' loaders, when the model path holds no weight file of the format asked for (vLLM's and SGLang's
    # DefaultModelLoader: "Cannot find any model weights with `/models/x`"; read from SGLang's source census).
    # (SGLang 0.4.10's bitsandbytes loader: "No model weights found in: `/models/x`", its source census)
    rule("no_weights_at_path", ("Cannot find any model weights", "No model weights found"),
         r"(?:Cannot find any model weights with|No model weights found in:) `?(?P<path>[^`\s]+)",
         RuleKind.FAILURE, outcome=Outcome.CONFIG_ERROR,
         remedy=("no weight files at {path} (a wrong model path, an unfinished download, or a --load-format that does not "
                 "match the files): fix the path",)),
    # A LoRA adapter the launch names that the engine could not load (SGLang's "Failed to load LoRA adapter ad: <why>",
    # vLLM's "Loading lora ad failed: No adapter found for /x", the launch census's third part): a path with nothing
    # there, an id not fetched, an adapter that does not fit the flags. Every memory setting fails alike; a memory
    # text in the reason is read by the OOM rules, tried first.
    rule("adapter_unloadable", ("Failed to load LoRA adapter", "Loading lora"),
         # (with the reason it gives: a bare "Loading lora X failed" raised over a chained cause says no more than a
         # raw error does)
         r"Failed to load LoRA adapter (?P<name>[^\s:]+): \S|Loading lora (?P<name2>\S+) failed: \S", RuleKind.FAILURE,
         outcome=Outcome.CONFIG_ERROR,
         remedy=("the LoRA adapter {name} the launch names could not be loaded (see the evidence: a path with nothing "
                 "there, an id not fetched, a rank above the maximum asked): fix the adapter's path or flags",
                 "the LoRA adapter {name2} the launch names could not be loaded (see the evidence: a path with nothing "
                 "there, an id not fetched, a rank above the maximum asked): fix the adapter's path or flags")),
    # A quantization asked for that the checkpoint has no config of ("Cannot find the config file for awq", both
    # engines' weight_utils), and more GPUs asked for than Ray's placement group holds ("The number of required GPUs
    # exceeds the total number of available GPUs in the placement group"): read from the vLLM source census.
    rule("no_quant_config", "Cannot find the config file for", r"Cannot find the config file for (?P<method>[\w-]+)",
         RuleKind.FAILURE, outcome=Outcome.CONFIG_ERROR,
         remedy=("--quantization {method} was asked, but the checkpoint has no {method} config: drop the flag or use a "
                 "{method} checkpoint",)),
    rule("gpus_exceed", "Required number of devices",
         # (the raised form, with its figures; Ray's warning of the same words waits for GPUs that never come: a hang)
         r"number of required GPUs exceeds the total number of available GPUs[^\n]*?Required number of devices: \d+",
         RuleKind.FAILURE,
         outcome=Outcome.CONFIG_ERROR,
         remedy=("the tensor x pipeline parallel size asks for more GPUs than the cluster offers: lower it or add GPUs",)),
    # A check that ends by asking for smaller parallel sizes states a limit of this machine against the launch's
    # choice: vLLM's CPU build, "Not enough allowed NUMA nodes to bind threads of 2 local CPUWorkers. Allowed NUMA nodes
    # are [0]. Please try to bind threads manually or decrease DP/TP/PP." (the launch census, tp-two).
    rule("parallel_too_large", ("decrease ", "reduce ", "lower "),
         r"\b(?i:decrease|reduce|lower)\s+(?:the\s+)?(?P<what>DP/TP/PP|TP/PP|DP/TP|TP/DP|"
         r"(?i:tensor|pipeline|data)[-_ ]parallel(?:[-_ ]size|ism)?|tp[-_]size|--tp\b|--tensor-parallel-size)",
         RuleKind.FAILURE, outcome=Outcome.CONFIG_ERROR,
         remedy=("the engine asks for a smaller parallel size ({what}) on this machine: lower the tensor/pipeline/data "
                 "parallel size; not memory",)),
    # A weights file that is not what its name says: safetensors cannot read its header ("SafetensorError: Error
    # while deserializing header: header too large"; "incomplete metadata, file not fully covered"), raised by
    # the loader of either engine (the launch census, weights-garbage). A cut or corrupted download: every launch
    # of this model fails the same way. (SGLang's own notice of it, "Corrupted safetensors file detected: ... -
    # SafetensorError: ...", is logged where it fetches the file again: not this line.)
    rule("weights_unreadable", "SafetensorError",
         r"^\s*(?:[A-Za-z_]\w*\.)*SafetensorError: (?P<why>[^\n]{0,160})", RuleKind.FAILURE,
         outcome=Outcome.CONFIG_ERROR,
         remedy=("a weights file of the model is not readable safetensors ({why}): a cut or corrupted download; fetch "
                 "the model again. No memory setting changes this",)),
    # pydantic's header ("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig") says the
    # engine's config classes refused their input; the error's own line under it ("Value error, <why>") says why, and
    # decides where a rule reads it (`config_validation`, or a raw failure carried as a validation error): the header
    # alone reads as the config's, as a marker does.
    rule("validation_header", "ValidationError",
         r"^\s*(?:[A-Za-z_]\w*\.)*(?P<exc>ValidationError)\b(?!\w)", RuleKind.FAILURE, outcome=Outcome.CONFIG_ERROR,
         strength=Strength.GENERIC,
         remedy=("the engine's config classes rejected their input before any GPU work ({exc}; its reason is the line "
                 "under it): fix the command line",)),
    # The labelling rule of CONFIG_ERROR and CRASH (docs/corpus-protocol.md, "The labelling rule"): a line that states a
    # rule about the launch's choices is the config's; a raw error is a crash, whatever root cause is found later.
    # - a checkpoint that holds a weight the engine's model code has no place for ("ValueError: There is no module or
    #   parameter named 'image_newline' in LlavaForConditionalGeneration"): the checkpoint and the release do not match,
    #   a loader's raw error and not a rule the arguments broke;
    rule("weight_without_place", "There is no module or parameter named",
         r"There is no module or parameter named '(?P<param>[^']{1,200})'", RuleKind.FAILURE, outcome=Outcome.CRASH,
         derived_from=("4408", "7103"),
         remedy=("the checkpoint holds a weight ({param}) the engine's model code has no place for: a checkpoint newer "
                 "or other than this release's model code (upgrade the engine or use a matching checkpoint); not "
                 "memory",)),
    # - an exception whose message says it is the engine's own bug ("This should not happen.", "please report this
    #   issue on GitHub"), whatever setting it also names;
    rule("engine_says_bug", ("should not happen", "report this", "report it"),
         r"^\s*(?:[A-Za-z_]\w*\.)*(?P<exc>[A-Z]\w*(?:Error|Exception)): [^\n]*?(?:\bThis should not happen\b"
         r"|(?i:\bplease report (?:this|it)\b|\breport this (?:issue|bug)\b))", RuleKind.FAILURE,
         outcome=Outcome.CRASH, strength=Strength.TENTATIVE, derived_from=("6912",),
         remedy=("the engine raised {exc} saying it should not happen (its own bug): report it or change engine "
                 "version; not the config, not memory",)),
    # - a compiler refusing the data type asked for on this GPU (Triton: 'type fp8e4nv not supported in this
    #   architecture. The supported fp8 dtypes are (...)', an FP8 KV cache or quantization on a GPU older than FP8
    #   needs): the dtype is the launch's choice.
    rule("dtype_not_on_gpu", "not supported in this architecture",
         r"\btype (?P<dtype>\w+) not supported in this architecture", RuleKind.FAILURE, outcome=Outcome.CONFIG_ERROR,
         derived_from=("6130",),
         remedy=("this GPU cannot run the {dtype} type the launch asked for (an FP8 KV cache or quantization needs a "
                 "newer GPU): choose another --kv-cache-dtype / quantization",)),
    # pydantic's report of the same (the engines' config classes are pydantic models and dataclasses): its header
    # `N validation error(s) for <Model>` and each error's line, `  Value error, <why> [type=value_error, ...]`
    # for a ValueError a validator raised, `  Assertion failed, <why>` for an assert; either alone is enough
    # (a thread may quote only the error line). An argument-time ValueError, in pydantic's form.
    rule("config_validation", ("validation error", "Value error, ", "Assertion failed, "),
         r"^\s*(?:\d+ validation errors? for (?P<model>[A-Za-z_]\w*)|(?:Value error|Assertion failed), "
         r"(?P<why>.+?)(?: \[type=|$))", RuleKind.FAILURE, outcome=Outcome.CONFIG_ERROR,
         remedy=("the engine's config validation rejected the arguments ({why}): fix the flags",
                 "the engine's config validation rejected the arguments ({model}): fix the flags"),
         derived_from=("806",)),
    # A process that dies in native code: no Python exception names the class (OOM text on the
    # same line is read by cuda_oom above, which wins the line).
    # (a C/C++ assert that failed aborts too: "file.cpp:40: f(...): Assertion `cond' failed."; HIP's kernels say
    # "skinny_gemms.hip:497: void wvSplitK_hf_sml_(...) [...]: Device-side assertion `false' failed.")
    # (C++'s abort on an uncaught exception in either runtime: GNU's "terminate called after throwing an instance of
    # 'X'", LLVM libc++'s "libc++abi: terminating due to uncaught exception of type X"; Rust's panic, from a launcher
    # or a library written in it: "thread 'tokio-runtime-worker' panicked at lib/llm/src/engines/vllm/worker.rs:247:17:")
    rule("native_crash", ("terminate called after", "terminating due to uncaught", "Fatal Python error",
                          "Segmentation fault", "core dumped", "SIGSEGV", "SIGABRT", "^Killed", "Assertion `",
                          "assertion `", "' panicked at", "Killed process"),
         r"(?P<what>terminate called after throwing an instance of '[^']*'|terminating due to uncaught exception of "
         r"type [\w:<>]+|Fatal Python error: \"?\w+|thread '[^']*' panicked at|Out of memory: Killed process \d+ \([^)]*\)"
         r"|Segmentation fault|core dumped|SIGSEGV|SIGABRT|^Killed$|[Aa]ssertion `.{0,300}?' failed)", RuleKind.FAILURE,
         outcome=Outcome.CRASH,
         strength=Strength.GENERIC,
         remedy=("the process aborted in native code ({what}): a kernel, compiler or build problem, not GPU "
                 "memory; a bare 'Killed', or the kernel's 'Out of memory: Killed process', is the host OOM killer "
                 "(host RAM: check `dmesg -T | grep -i oom`)",)),
    # Ray, when a worker it ran the engine in is gone ("A worker died or was killed while executing a task by an
    # unexpected system error. To troubleshoot the problem, check the logs for the dead worker."): the launch died;
    # why is in the worker's own lines, which any stronger rule reads first.
    rule("ray_worker_died", "worker died or was killed", r"\bA worker died or was killed while\b", RuleKind.FAILURE,
         outcome=Outcome.CRASH, strength=Strength.GENERIC, derived_from=("13003",),
         remedy=("a Ray worker running the engine died (Ray's word; the cause is in the worker's own log, often a "
                 "segfault or the host OOM killer): not a GPU memory setting",)),
    # A serving wrapper's own last word (KServe: "kserve ERROR [__main__.py:<module>():254] Failed to start model server:
    # integer division or modulo by zero"): the launch died, its cause above or in the message; logged as an error,
    # so a warning that some side server did not start is not it.
    rule("wrapper_failed", ("Failed to start", "Failed to launch", "Failed to initiali"),
         r"\b(?:ERROR|CRITICAL|FATAL)\b.{0,160}?\bFailed to (?:start|launch|initiali[sz]e) (?:the )?"
         r"(?:model(?: server)?|server|(?:LLM |inference |serving )?engine)\b", RuleKind.FAILURE, outcome=Outcome.CRASH,
         strength=Strength.GENERIC, derived_from=("1705",)),
    # A feature the engine runs only elsewhere, raised as an error ("NotImplementedError: Pipeline parallelism is only
    # supported for the following architectures: [...]", "TRTLLM MLA backend is only supported on Blackwell GPUs"): the
    # combination asked for is the config's. Every such site in the four source censuses is CONFIG_ERROR, as is every
    # corpus log that raises one.
    rule("only_supported", "only supported", r"^\s*(?:[\w.]*(?:Error|Exception))\b:?.*?(?P<what>\b(?:is|are) only "
         r"supported (?:on|for|with|when|by|in)\b[^.\n]{0,80}|\bthe only supported\b[^.\n]{0,80})",
         RuleKind.FAILURE, outcome=Outcome.CONFIG_ERROR,
         remedy=("the engine supports what was asked only elsewhere ({what}): change the flags (backend, parallelism, "
                 "dtype, model) to a supported combination",)),
    # A method the GPU is too old for: "The quantization method fp8 is not supported for the current GPU. Minimum
    # capability: 90. Current capability: 86." The launch asked for it: the config, not memory.
    rule("capability_below", "Minimum capability", r"Minimum capability: (?P<min>\d+)\.? Current capability: "
         r"(?P<cur>\d+)", RuleKind.FAILURE, outcome=Outcome.CONFIG_ERROR,
         remedy=("the GPU's compute capability ({cur}) is below the {min} what was asked for needs (a quantization, a "
                 "dtype, a kernel): choose another or another GPU",)),
    # ROCm's runtime says an illegal access this way: "Memory access fault by GPU node-1 (Agent handle: ...) on address
    # 0x7a41d2c11000. Reason: Unknown." Not an allocation failure.
    rule("rocm_memory_fault", "Memory access fault by GPU", r"Memory access fault by GPU node-?\d*", RuleKind.FAILURE,
         outcome=Outcome.CRASH,
         remedy=("the GPU faulted on an illegal memory access (ROCm): a kernel or build problem, not a lack of memory; "
                 "lowering memory will not help",)),
    # ROCm's runtime aborting a queue on a fault of the GPU ("Callback: Queue 0x7ee7b4200000 aborting with error :
    # HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond the largest legal address",
    # F64's 19201): the process is aborted; a kernel's fault, not memory, unless the status is out of resources (above).
    rule("hsa_queue_abort", ("borting with error",),
         r"\bQueue 0x[0-9a-fA-F]+ [Aa]borting with error ?: ?(?!HSA_STATUS_ERROR_OUT_OF_RESOURCES)(?P<status>HSA_STATUS_\w+)",
         RuleKind.FAILURE, outcome=Outcome.CRASH,
         remedy=("ROCm's runtime aborted a GPU queue ({status}): a kernel or build problem, not a lack of memory; "
                 "lowering memory will not help",)),
    rule("cuda_fault", ("CUDA", "HIP"),
         r"(?:CUDA|HIP) [Ee]rror(?: \([^)\n]*\))?: (?P<fault>an illegal memory access was encountered|no kernel image is available"
         r"[^\n]*|device-side assert triggered|misaligned address|unspecified launch failure|invalid device"
         r" function|an illegal instruction was encountered)",
         RuleKind.FAILURE, outcome=Outcome.CRASH,
         remedy=("a CUDA fault that is not memory ({fault}): a kernel or build problem; lowering memory "
                 "will not help",)),
    # Ascend's device says a kernel faulted ("... there is an exception of aivec error", "errorStr: The MPU address
    # access is invalid", "Kernel task happen error", "AIV Kernel happen error"): its illegal memory access, not memory.
    rule("npu_kernel_fault", ("happen error", "MPU address access is invalid", "aivec error", "aicore error"),
         r"(?P<fault>The MPU address access is invalid|\b(?:AI[CV]|Kernel task) (?:Kernel )?happen error"
         r"|exception of ai(?:vec|core) error)", RuleKind.FAILURE, outcome=Outcome.CRASH,
         remedy=("the NPU faulted in a kernel ({fault}): a kernel or build problem, not a lack of memory; lowering "
                 "memory will not help",)),
    # Ascend's runtime saying a task on the device never finished in its time: its kernel or collective hung, and the
    # device's watchdog stopped it ("[Error]: Vector core execution timed out.", "The aicore execution times out.",
    # "The execution of the internal task times out.", "hccl fftsplus task timeout occurred during task execution",
    # the reason it gives a failed synchronise, "reason=[fftsplus timeout]", "reason=vector core timeout"). A hang, not
    # a fault: it is read before the "Inner Error!" that follows it.
    rule("npu_task_timeout", ("execution timed out", "execution times out", "task times out", "task timeout occurred",
                              "timeout]", "core timeout"),
         r"(?P<what>\b(?:[Vv]ector core|aicore|AI ?Core|[Cc]ube core) execution (?:timed|times) out"
         r"|\bexecution of the internal task times out|\b\w+ task timeout occurred during task execution"
         r"|\breason=\[?(?:aicore|aiv|vector core|fftsplus|sdma|hccl|notify) timeout\]?)", RuleKind.FAILURE,
         outcome=Outcome.TIMEOUT, derived_from=("4312", "6104", "9710", "9711"),
         remedy=("a task on the NPU never finished in the device's time ({what}): a kernel or a collective hung (a peer "
                 "that never joined, a stuck link); not memory",)),
    # Ascend's runtime ends on its own words, the cause on the lines around them ("EE9999: Inner Error!", "The Inner
    # error is reported as above. The process exits for this inner error"), and CANN's reporter of inner errors signs
    # each of its lines (`Init compiler failed[FUNC:ReportInnerError][FILE:log_inner.cpp][LINE:145]`): a marker, like
    # an engine's.
    rule("npu_inner_error", ("Inner Error!", "exits for this inner error", "[FUNC:ReportInnerError]"),
         r"\b[A-Z]{2}9999: Inner Error!|The process exits for this inner error|\[FUNC:ReportInnerError\]",
         RuleKind.FAILURE, outcome=Outcome.CRASH, strength=Strength.GENERIC),
    rule("invalid_device", ("CUDA", "HIP"), r"(?:CUDA|HIP) error: invalid device ordinal", RuleKind.FAILURE,
         outcome=Outcome.CONFIG_ERROR,
         remedy=("a GPU index is out of range: the tensor-parallel size exceeds the visible GPUs",)),
    # Tentative: optional kernels fail to import with a warning and the server goes on.
    rule("undefined_symbol", "Error", r"undefined symbol: (?P<symbol>\S+)", RuleKind.FAILURE,
         outcome=Outcome.CRASH, strength=Strength.TENTATIVE,
         remedy=("a compiled extension does not match the installed torch/engine (undefined symbol "
                 "{symbol}): reinstall matching builds",)),
    # An exception whose type says it timed out (TimeoutError, asyncio's, urllib3's ReadTimeoutError, httpx's
    # ReadTimeout): something the server waited for never answered. Tentative as any exception we do not know.
    # So is one whose message says it timed out ("RuntimeError: ModelExpress: timed out waiting for seed ready").
    # So is one whose message says its time ran out in other words: a time limit reached or exceeded ("Server failed to
    # start within the timeout period", "timeout exceeded", "startup timeout expired"), gRPC's deadline
    # ("StatusCode.DEADLINE_EXCEEDED", "Deadline Exceeded"); not a message that only names a timeout setting.
    rule("timeout_exception", ("Timeout", "TimedOut", "timed out", "Timed out", "times out", "timeout", "DEADLINE_EXCEEDED",
                               "eadline Exceeded", "eadline exceeded"),
         # (with its code in parentheses too: Ascend's HCCL "Get_Socket_Timeout(EI0006): Getting socket times out")
         r"^\s*(?:[A-Za-z_]\w*\.)*(?:(?P<exc>[A-Z]?\w*Time(?:out|dOut)\w*)(?:\(\w+\))?(?::|$)"
         # (torch's store: "... but store->get('0') got error: Socket Timeout")
         # (its type may carry its arguments, as a repr does: "KVTransferError(bootstrap_room=5975): Request ... timed
         # out after 300.0s")
         r"|(?P<exc2>_?[A-Z]\w*(?:Error|Exception))(?:\([^()\n]{0,200}\))?: [^\n]*?(?:\b(?:[Tt]imed out|times out|Socket Timeout)\b"
         r"|(?i:\b(?:within|exceeded|reached|hit|past|after) (?:the |its |a )?(?:[\w-]+ )?time-?out\b"
         r"|\btime-?out (?:period |limit )?(?:exceeded|expired|reached|elapsed)\b|\bdeadline[ _]exceeded\b)))", RuleKind.FAILURE,
         outcome=Outcome.TIMEOUT, strength=Strength.TENTATIVE,
         remedy=("the server raised {exc}: something it waited for (a peer, a request, a download) never answered; "
                 "not memory",
                 "the server raised {exc2}, saying it timed out: something it waited for (a peer, a request, a download) "
                 "never answered; not memory")),
    # A peer that never answered on the distributed socket, said without an exception's type (torch's store client:
    # "[c10d] The client socket has timed out after 600000ms while trying to connect to (host, 8000)"; Ascend's HCCL:
    # "EI0006: ... Getting socket times out. Reason: Remote Rank did not send the data in time").
    # (torch's store, counting the ranks that came: "torch.distributed.DistStoreError: Timed out after 901 seconds
    # waiting for clients. 16/32 clients joined.", a poster may quote only its end)
    rule("socket_timeout", ("client socket has timed out", "socket times out", "clients joined"),
         r"client socket has timed out after \d+ ?ms|\bGetting socket times out\b"
         r"|DistStoreError\b[^\n]{0,120}?\b\d+/\d+ clients joined", RuleKind.FAILURE,
         outcome=Outcome.TIMEOUT,
         remedy=("a peer never answered on the distributed socket (a rank that never started, or the network between "
                 "nodes): check every rank's log and the interconnect; not memory",)),
    # A wait that ran out, told by the layer that waited in its own words rather than by an exception's type: the
    # communication and transfer layers beneath the engines (the runtime census, after F63: NCCL's and RCCL's "exceeded
    # timeouts (3)" and "Connection timed out", gloo's "Connect timeout", "Read timeout", "Wait timeout for key(s)" and
    # "Application timeout caused pair closure", TCPStore's "wait timeout after 600000ms", torch's "timed out in blocking
    # wait", "due to a collective timeout", "watchdog hang", Ascend HCCL's "The wait execution of the Notify register
    # times out", "wait socket establish timeout", Mooncake's "Sync data transfer timeout after", NIXL's "Watch timed
    # out", oneCCL's "timeout limit:", Neuron's "suspected hang in collectives", Ray's "still alive, probably it's
    # hanging"; not Ray's "not registered within the timeout" alone, which it says of a worker that crashed too). The
    # words are an event (timed out, a timeout after, detected, exceeded; a wait, a read, a connection, a transfer that
    # timed out; a hang suspected), not a setting ("connect timeout: 30", `--read-timeout`, `HCCL_CONNECT_TIMEOUT=120`);
    # not a kernel that a GPU's watchdog stopped ("the launch timed out and was terminated": a fault of the kernel).
    # Tentative: any named failure says more.
    rule("wait_timed_out", ("timed out", "Timed out", "times out", "imeout", "IMEOUT", " hang", "hanging", " in time",
                            "check failed after"),
         # (not a line that says it tries again: "request timed out earlier, retried", Neuron's "Timeout waiting for RX
         # (waited 120 sec) - retrying")
         r"(?:(?<!launch )\b(?:[Tt]imed|[Tt]imes|TIMED) out\b"
         r"|(?i:\b(?:connect(?:ion)?|read|write|wait|watch|poll|transfer|slice|establish|socket|collective|application"
         r"|execution|rendezvous|barrier|heartbeat|notify) time-?out\b"
         # (a bare figure after it is its setting: "Set transfer timeout to:120000", "timeout (600 s)"; not an address)
         r"(?! ?(?:[=:(]|to:?|is|of) ?\d+(?:\.\d+)? ?(?:m?s|sec\w*|min\w*)?(?:[\s,;)]|$))"
         r"|\btime-?out (?:after \d|occur\w*|detected|expired|exceeded|limit:|waiting\b)"
         r"|\bexceeded (?:\w+ ){0,2}time-?outs?\b"
         r"|\b(?:suspected|possible|detected)\b[^\n]{0,40}?\bhang\b|\bwatchdog hang\b|\bprobably it's hanging\b"
         # (a launcher's deadline for the server it started: sgl-router's "Timeout 300s waiting for workers [...] to
         # become healthy", vLLM's test helper's "Server failed to start in time.", verl's "Router health check failed
         # after 300 seconds.": the census's second part)
         r"|\b(?:Timeout|Timed out) \d+(?:\.\d+)? ?s(?:ec\w*)? waiting for\b|\bfailed to start in time\b"
         r"|\bcheck failed after \d+(?:\.\d+)? ?(?:s|sec\w*|min\w*)\b))"
         r"(?![^\n]*\bretr(?:y|ies|ied|ying)\b)",
         RuleKind.FAILURE, outcome=Outcome.TIMEOUT, strength=Strength.TENTATIVE,
         remedy=("a wait timed out in the layer beneath the engine (a collective, a connection, a transfer, a "
                 "rendezvous): a peer that never came or a link that stalled; not memory",)),
    # An exception whose message says a package is missing or must be installed or upgraded ("Failed to import Ray: No
    # module named 'ray'. Please install Ray", "FlashInfer mamba module not available, please check flashinfer
    # installation", "Transformers version 4.57.1 is not supported ... Please upgrade transformers"): the environment,
    # whatever the exception's type and wherever it is raised (an argument check that needs a package included), or
    # printed as a bare "Error: No module named 'outlines.fsm.regex'. Please install a new version of outlines".
    rule("missing_package", ("Error:", "Exception:"),
         r"^\s*(?:[A-Za-z_]\w*\.)*(?P<exc>(?:[A-Z]\w*)?Error|(?:[A-Z]\w*)?Exception): (?P<msg>[^\n]*?(?:\bNo module named\b"
         r"|\bmodule (?:was )?not (?:found|available)\b|\b(?i:please (?:install|upgrade|reinstall))\b|\bpip install\b"
         r"|\bis not installed\b|\bminimum required version\b"
         r"|\b(?i:check (?:the |your )?\w+ installation)\b)[^\n]*)", RuleKind.FAILURE, outcome=Outcome.CRASH,
         strength=Strength.TENTATIVE,
         remedy=("a package the launch needs is missing or too old ({exc}: {msg}): install or upgrade it; not the "
                 "config, not memory",)),
    # An exception that rejects a setting: its message states the rule the settings broke (a combination not supported,
    # what one setting may be used with, a size that must divide another, an invalid named value) or tells the user which
    # flag to pass instead. Python's value errors and assertions carry the engines' argument and config checks (so does
    # an AttributeError, from the BitsAndBytes loader's check of the model), wherever in start-up the check runs (loader,
    # quantization, attention backend, speculative decoding): the arguments asked for what the engine cannot do. A
    # check of the hardware alone (a compute capability, a platform) names no setting to change: a crash, unless it
    # names the flag. Read from SGLang's own raise sites (docs/corpus-protocol.md, "The source census"). (A bare "must be"
    # was tried after F59 and taken back: it mended the log it was written from and broke a source-census raise site,
    # SGLang's "kv_lora_rank 448 must be multiple of quant_block_size 128", a model-shape invariant.)
    rule("setting_rejected", ("Error:",),
         r"^\s*(?:[A-Za-z_]\w*\.)*(?P<exc>ValueError|AssertionError|NotImplementedError|RuntimeError|TypeError|KeyError|AttributeError): "
         r"(?P<msg>"
         # it names a setting (a flag, an argument's name, a feature one turns on; not a kernel's own check) ...
         r"(?:(?![^\n]*\bcheck failed at\b)(?=[^\n]*?(?:`?--[a-z][a-z0-9-]+|\b\w+_(?:size|len|length|backend|dtype|mode)\b"
         # (an argument's name printed with its value: "max_num_batched_tokens (8192)")
         r"|\b[a-z]+(?:_[a-z]+)+ \(\d"
         r"|\b[a-z]+(?:_[a-z]+)+=|\b(?i:backend|dtype|quantization|tensor[ _]parallel\w*|pipeline[ _]parallel\w*"
         r"|data[ _]parallel\w*|expert[ _]parallel\w*|speculative\w*|spec[ _-]decod\w*|eagle\d?|mtp|lora|kv[ _-]cache\w*|sleep[ _-]mode"
         r"|cuda[ _-]?graphs?|\w+ parser|load[ _-]format|quantizations|chat[ _-]?templates?|context length"
         r"|rope(?:[ _-]?(?:scaling|type|theta))?)\b|\b(?:TP|PP|DP|EP)\b))"
         # ... and a value of it it does not know ("Invalid attention backend: x"), the rule it broke, or what to pass
         r"(?=['\"]?(?i:invalid|unknown|unsupported|unexpected) [\w ]{1,40}(?:: |\s['\"`])"
         # ("Unknown RoPE scaling type nope": a kind of thing, then the value given)
         r"|['\"]?(?i:invalid|unknown|unsupported|unexpected) [\w ]{1,40}? (?:type|method|mode|kind|format) ['\"`]?\w"
         r"|[^\n]*?(?i:\b(?:invalid|unknown|unsupported|illegal) (?:value|argument|option|choice)s? (?:for|of) )"
         r"|[^\n]*?(?:\b(?:is|are) not (?:yet )?supported\b"
         r"|\bnot (?:yet )?supported (?:for|with|in|when)\b|\bdoes not support\b|\bonly supports?\b"
         # ("Only {'triton', 'fa4'} backends are supported on Blackwell GPUs for hybrid GDN models. Got
         # attention_backend=flashinfer.": what is allowed, then the value it got)
         r"|\b(?i:only)\b[^\n]{0,120}?\b(?:is|are) supported (?:on|for|with|in|when)\b|\bGot [a-z]+(?:_[a-z]+)+="
         r"|\bcan only be used (?:with|for|when)\b|\b(?:is|are) (?:\w+ )?(?:not compatible|incompatible) with\b"
         r"|\bis not an? (?:valid|known|built-in)\b"
         r"|\bmust be divisible by\b|\bis not divisible by\b|\b(?:must|should) be (?:greater|larger|bigger|smaller|less|more|higher|lower)(?: than| or equal)|\bmust be (?:\d+-)?aligned\b|\btoo (?:large|small|big|many|few)\b|\brequires `?--[a-z]"
         # a size stated against another ("max_tokens_per_mm_item (16384) is larger than max_num_batched_tokens")
         r"|\b(?:is|are) (?:larger|greater|bigger|smaller|less|more|higher|lower) than\b"
         r"|\b(?i:use|pass|set|setting|specify|try|provide)\s+`?(?:--[a-z]|[a-z]+(?:_[a-z]+)+=)"
         r"|\b(?i:please (?:make sure|ensure))\b"
         r"|\b(?i:set|specify|provide)\s+`?[a-z]+(?:_[a-z]+)+`? \(?\d))[^\n]*))",
         RuleKind.FAILURE, outcome=Outcome.CONFIG_ERROR, strength=Strength.TENTATIVE,
         remedy=("the engine rejected a setting ({exc}: {msg}): change the argument it names; not memory",)),
    # ninja, which builds the engines' just-in-time kernels (sgl-kernel's JIT, FlashInfer, DeepGEMM), names the target it
    # failed to build (`FAILED: [code=139] cuda_0.o`, older ninja without the code) and then stops (`ninja: build
    # stopped: subcommand failed.`). A kernel the launch needed did not build: a crash, unless the engine falls back and
    # comes up anyway (FlashInfer's all-reduce does, with a warning): tentative, as an exception is.
    rule("kernel_build_failed", ("FAILED: ", "build stopped"),
         r"^FAILED: (?:\[code=(?P<code>\d+)\] )?(?P<target>\S+)|^ninja: build stopped: subcommand failed",
         RuleKind.FAILURE, outcome=Outcome.CRASH, strength=Strength.TENTATIVE,
         remedy=("a kernel compiled at start-up failed to build (ninja: {target}): the toolkit, the compiler or the "
                 "kernel's source, not memory; read the compiler's error above it",)),
    # torch.compile's tracer (Dynamo) ends every error it raises with the same footer: "Set TORCHDYNAMO_VERBOSE=1 for the
    # internal stack trace (please do this especially if you're reporting a bug to PyTorch)". Compiling the model
    # failed; a memory text in the same exception is read by the OOM rules, which win.
    rule("compile_failed", "TORCHDYNAMO_VERBOSE", r"Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace",
         RuleKind.FAILURE, outcome=Outcome.CRASH, strength=Strength.TENTATIVE,
         remedy=("torch.compile failed tracing or compiling the model (Dynamo's error): a compiler or model-code "
                 "problem, not memory; launch without torch.compile (vLLM --enforce-eager or a compilation level of 0, "
                 "SGLang without --enable-torch-compile)",)),
    # vLLM V0's worker states its exception's message on its error line ("Exception in worker VllmWorkerProcess while
    # processing method load_model: Torch SPDA does not support logits soft cap."), its type only in the traceback
    # below: the message is the failure's own words, so a traceback cut after it is not guessed as memory (a memory
    # message on that line is read by the OOM rules above, which win it).
    rule("worker_exception_message", "while processing method",
         r"Exception in worker \S+ while processing method \w+: (?P<msg>\S[^\n]*)", RuleKind.FAILURE,
         outcome=Outcome.CRASH, strength=Strength.TENTATIVE,
         remedy=("a worker failed with \"{msg}\" (its traceback has the type): not a memory failure",)),
    # Native code reporting its own failure by source location, as C and CUDA libraries do ("/tmp/nvshmem_src/src/host/
    # init/init.cu:1034: non-zero status: 28 nvshmem detect topo failed"), its function's name after the line number or
    # not, and "cannot", "could not" or "unable to" saying the failure as "failed" does (AITER's kernel selection:
    # ".../asm_mla.cu:193 get_heuristic_kernel_mla: cannot get heuristic kernel!"): a library failed, not memory.
    # Tentative, as an exception we do not know is.
    rule("native_status", ("failed", "non-zero status", "cannot", "can't", "could not", "unable to"),
         # (not a compiler's diagnostic, `file.c:5:10: fatal error: ...`, nor a kernel's device-side assertion, which
         # the rules of faults read)
         r"(?P<where>[\w./-]+\.(?:cu|cuh|cpp|cc|cxx|c|h|hpp)):\d+(?::| \w+:) (?!.*(?i:out of memory|warn|assertion))"
         r"(?P<msg>[^\n]{0,120}?(?:\bfailed\b|\bnon-zero status\b(?![^\n]{0,80}?\bfailed\b)"
         r"|\b(?:cannot|can't|could not|unable to)\b[^\n]{0,80}))",
         RuleKind.FAILURE,
         outcome=Outcome.CRASH, strength=Strength.TENTATIVE, derived_from=("7409", "17606"),
         remedy=("native code failed ({where}: {msg}): a library, driver or topology problem, not memory",)),
    # Transformers refusing to register a config or model class the engine brings, as the name is already taken
    # ("ValueError: '<class 'sglang...Qwen2_5_VLConfig'>' is already used by a Transformers model."): the installed
    # transformers is newer or older than this engine release was written for, a broken installation.
    rule("registration_clash", "is already used by a Transformers",
         r"is already used by a Transformers (?:model|config)", RuleKind.FAILURE, outcome=Outcome.CRASH,
         derived_from=("7206",),
         remedy=("transformers refuses the engine's own registration of a class it now has: the installed transformers "
                 "does not match this engine release (pin the version the engine asks for); not the config",)),
    # A name the engine's code uses but never bound: a bug, or an optional library whose import the engine skipped on
    # this platform (SGLang imports FlashInfer's wrappers only where FlashInfer is installed, so asking for that backend
    # without it raises "NameError: name 'BatchPrefillWithRaggedKVCacheWrapper' is not defined" from the backend's
    # constructor: the launch census's attn-flashinfer, SGLang 0.5.9 and 0.5.23 on a CPU). Raised while an attention
    # backend is being built, it is that backend the launch asked for that this install cannot run.
    rule("name_unbound", "NameError", r"^\s*NameError: name '(?P<name>\w+)' is not defined", RuleKind.FAILURE,
         outcome=Outcome.CRASH, strength=Strength.TENTATIVE,
         remedy=("the server's code used a name it never bound (NameError: {name}): a bug or a library its import "
                 "skipped; not the config, not memory",),
         unless=(BACKEND_BUILT, Outcome.CONFIG_ERROR,
                 "the attention backend the launch asked for needs a library this install does not have (its "
                 "constructor met an unbound name): choose another with --attention-backend (older vLLM: the "
                 "VLLM_ATTENTION_BACKEND variable), or install that backend's library")),
    rule("exception", ("Error", "Exception"),
         # (a bare `Exception: ...` too: the engines raise it for a version check, a dead worker)
         # (Ray re-raises a worker's exception as `RayTaskError(KeyError): ray::RayWorkerWrapper.execute_method() ...`)
         # (or after a logger's location tag that prose or a cut header left mid-line, `...报错: worker_utils.py:242]
         # RuntimeError: ...`, or opening a quote in a poster's sentence, `I get this error: "RuntimeError: ..."`)
         r"(?:^\s*|\b\w+\.py:\d+\] |[:,] [\"“'`])(?:[A-Za-z_]\w*\.)*(?P<exc>[A-Z]\w*Error|(?:[A-Z]\w*)?Exception)"
         r"(?:\((?P<cause>[A-Z]\w*)\))?(?::|$)",
         RuleKind.FAILURE,
         outcome=Outcome.CRASH, strength=Strength.TENTATIVE,
         remedy=("the server raised {exc} (see the evidence); it is not a memory failure",)),
)

# An engine saying it still waits for its own processes, every few seconds until they answer (vLLM's API server:
# "Waiting for 1 local, 0 remote core engine proc(s) to start."): a finished log whose last line it is stopped there.
# vLLM's message queue says the same of a process it waits on: "No available shared memory broadcast block found in 60
# seconds. This typically happens when some processes are hanging" (every minute, until the block frees).
# Any launcher's or engine's "waiting for <it> to be ready / to start / to signal that it's ready" says the same, and
# vLLM's wait for Ray to place its workers ("Waiting for creating a placement group of specs for 10 seconds").
STILL_WAITING = re.compile(r"(?i:\bwaiting for\b[^\n]{0,80}?(?:\bready\b|\bto start\b|\bplacement group\b))"
                           r"|No available shared memory broadcast block found in \d+ seconds")
NON_MEMORY_FAULT = "non_memory_fault"  # the flag of a CUDA / NCCL failure that names a cause other than memory
PARALLEL_DIVIDES = "parallel_divides"  # the flag of a quoted check that a parallel size divides a model dimension
POSTER_SAYS_HANG = "poster_says_hang"  # the flag of a posted excerpt's own prose saying the server hangs
SERVER_STALLED = "server_stalled"  # the flag of a wait that went unanswered (a health check, a peer, a queue)
# vLLM's stats line when requests run and nothing was produced in its interval: no step of the engine ended (written
# after F67's first score, from its 20012 and the fresh corpus's 9718)
NOTHING_PRODUCED = r"Avg prompt throughput: 0\.0 tokens/s, Avg generation throughput: 0\.0 tokens/s, Running: [1-9]"
# The source line a traceback quotes under its innermost frame, when it raises a timeout: by the exception's class
# (`raise TimeoutError(`, `raise RayChannelTimeoutError(`, `raise asyncio.TimeoutError`) or its message's first words
# (`raise RuntimeError("Barrier timed out after %f seconds"`, `raise RuntimeError("Timeout waiting for KV Cache thread`).
# A log that ends there lost its exception line; the frame says it was a wait that ran out (the census's second part:
# the frames of the engines' and launchers' waits).
TIMEOUT_RAISED = re.compile(r"raise (?:[\w.]*Timeout\w*\b|[\w.]+\(f?[\"'][^\"'\n]{0,60}?"
                            r"(?i:timed out|time-?out)\b)")
ENVIRONMENT_BROKEN = "environment_broken"  # the flag of an engine saying its build does not run here


# Progress every engine (and every fork of one) shows alike: a loading bar over the checkpoint's shards or weights
# ("Loading safetensors checkpoint shards:  3% Completed | 1/37", transformers' "Loading checkpoint shards: 100%|",
# a fork's "Multi-thread loading shards: 100% Completed | 142/142"): a description that says loading and names
# what is loaded, then a percentage. The weights are being loaded, or were just loaded and are being set up.
SHARED_PROGRESS: tuple[Rule, ...] = (
    rule("loading_bar", ("Loading", "loading"),
         r"(?i:\bload(?:ing)?\b)[\w ()./-]{0,40}?\b(?i:shards?|weights?|checkpoints?|safetensors)\b[\w ()./-]{0,20}:"
         r"\s*\d{1,3}(?:\.\d+)?%", RuleKind.PROGRESS, phase=Phase.WEIGHTS, anyones=True, derived_from=("807",)),
    # CUDA or NCCL stating a failure whose cause is not memory (NCCL's `Cuda failure 'dependency created on
    # uncaptured work in another stream'`, torch's `CUDA error: operation not supported`, a driver's
    # `CUDA_ERROR_ILLEGAL_ADDRESS`): not a failure line by itself (NCCL warns, and may go on), but a traceback
    # that the log cuts after it was more likely that fault's than a lack of memory (verdict._cut_guess).
    # (Ascend's runtime says it of a call it ran: "rtGetDevMsg execute failed, reason=[context pointer null]", "...
    # execution failed, reason=driver error:internal error"; a timeout is a hang, `npu_task_timeout`)
    rule("non_memory_fault", ("Cuda failure", "CUDA failure", "cuda failure", "CUDA error", "CUDA Error", "Cuda error",
                              "cuda error", "cudaError", "CUDA_ERROR_", "hipError", "Assertion", "failed, reason="),
         r"^(?!.*(?i:out of memory|out_of_memory|outofmemory|memoryallocation|alloc_failed))"
         r".*?(?:(?i:cuda (?:failure|error))(?: \([^)\n]*\)| [\w./~-]+:\d+)?(?:: | (?:\d+ )?'| \d+: )(?P<cause>[A-Za-z][^'\n]*)"
         r"|\b(?:cudaError|CUDA_ERROR_|hipError)\w+"
         r"|\bexecut(?:e|ion) failed, reason=\[?(?![^\]\[\n]*timeout)(?P<npu>[a-z][^\]\[\n]*)"
         # a kernel's device-side assertion, one line per failing thread: "IndexKernel.cu:93: operator(): block: [0,0,0],
         # thread: [127,0,0] Assertion `-sizes[i] <= index && index < sizes[i]` failed."
         r"|\.cu:\d+: [^\n]{0,80}?\bblock: [^\n]{0,30}?\bthread: [^\n]{0,30}?\bAssertion\b)",
         RuleKind.FLAG, flag=NON_MEMORY_FAULT, derived_from=("819",)),
    # An engine saying its own build cannot run on this machine: vLLM's compiled ops failing to import ("Failed to import
    # from vllm._C with ImportError('libcuda.so.1: cannot open shared object file ...')") and its platform detection
    # finding none ("No platform detected, vLLM is running on UnspecifiedPlatform"). What fails after it, even while
    # the config is built, is the environment, not the arguments (the 0.6 source census; 4911's config check).
    rule("environment_broken", ("Failed to import from vllm._C", "No platform detected"),
         r"Failed to import from vllm\._C with|No platform detected, vLLM is running on UnspecifiedPlatform",
         RuleKind.FLAG, flag=ENVIRONMENT_BROKEN),
    # Model code checks that a parallel size divides a dimension with a bare assert, quoted under its frame
    # (`assert self.total_num_heads % tp_size == 0`): a bare AssertionError after it is that check failing, the
    # parallel size the user chose (`ensure_divisibility`'s frame says the same, see the ARGS hints).
    rule("parallel_divides", "assert ",
         r"^\s*assert\s+[\w.\[\]()]+\s*%\s*(?:self\.)?\w*(?:tp|tensor_parallel|pp|pipeline_parallel|dp|data_parallel|ep"
         r"|expert_parallel|attn_tp|world)\w*\s*==\s*0\b", RuleKind.FLAG, flag=PARALLEL_DIVIDES, derived_from=("3009",)),
    # SGLang's health check, once the server is up, sends a one-token request and logs this when no output came back in
    # its time ("Health check failed. Server couldn't get a response from detokenizer for last 20 seconds. tic start
    # time: ... last_heartbeat time: ..."; engines.md, HTTP endpoints): the server stopped making progress. A symptom,
    # not a cause: where no line of the log names a failure, a server at work that logged it is read as hung, low,
    # with READY the alternative (it may answer again after one long step).
    rule("server_stalled", "Health check failed",
         r"Health check failed\. Server couldn't get a response from detokenizer for last \d+ seconds",
         RuleKind.FLAG, flag=SERVER_STALLED, derived_from=("17719",)),
    # A wait that goes unanswered, said by the engine, its connectors or its launcher while it goes on waiting (the
    # runtime census's second part, read from their sources): vLLM's shared-memory queue, every minute ("No available
    # shared memory broadcast block found in 60 seconds", 0.6's "No available block found in 60 second.", 0.8's DEBUG
    # wording); SGLang's disaggregation ("Some requests timed out when bootstrapping", "Some requests fail to receive
    # KV Cache transfer done signal after bootstrapping", "Attempting to reconnect to 10.0.0.11:8998...", "Lost
    # connection with prefill instance"); KV connectors giving up on a peer ("Releasing expired KV blocks for request",
    # vllm-ascend's "Force freed expired request", "Checking query_register_mem_status again"); health and readiness
    # checks that failed or went unanswered (GPUStack's "inference health check failed 3 times", Ray Serve's "Didn't
    # receive health check response for replica", kubelet's "Readiness probe failed: ... context deadline exceeded",
    # Compose's "container vllm-server-1 is unhealthy", SkyPilot's "Replica 1 is not ready for too long", KServe's
    # "Max retries reached. Node count did not match the expected Ray node count"); and vLLM's own figures of requests
    # running while nothing was produced in the interval (`NOTHING_PRODUCED`, after F67's first score). A symptom, not
    # a cause: where no failure line decides, a finished log with no sign of work after it stopped there (a hang, low;
    # verdict.py). Not a probe refused because nothing listens yet ("connect: connection refused": the server is still
    # loading, or dead).
    rule("wait_unanswered", ("No available", "Some requests", "reconnect to", "connection with prefill",
                             "query_register_mem_status", "expired", "ealth check", "probe failed", "is unhealthy",
                             "not ready", "Node count did not match", "Avg prompt throughput"),
         r"No available (?:shared memory broadcast )?block found in \d+ seconds?"
         r"|Some requests (?:timed out when bootstrapping|fail to receive KV Cache transfer done signal)"
         r"|\bAttempting to reconnect to \S|\b(?:Lost|Losing) connection with prefill instance"
         r"|\bChecking query_register_mem_status again|\bReleasing expired KV blocks for request"
         r"|\bForce freed expired request|(?i:\bhealth check\b)[^\n]{0,40}?\b(?:failed|timed out)\b"
         r"(?![^\n]*\bstatus(?: code)?:? \d{3})"  # (a status the server answered with: it answered, loading or dead)
         r"|\bDidn't receive health check response\b|\b(?:Liveness|Readiness|Startup) probe failed:[^\n]*?"
         r"(?:deadline exceeded|[Tt]ime-?out)|\bcontainer \S+ is unhealthy\b"
         r"|\bis +not ready (?:and exceeding initial delay|for too long)\b"
         r"|\bNode count did not match the expected Ray node count\b|" + NOTHING_PRODUCED,
         RuleKind.FLAG, flag=SERVER_STALLED),
    # A posted excerpt carries its poster's words between the log's lines ("It hangs at this point.", "Vllm is stuck on
    # this message:"): a line with no log prefix that says the server hangs or is stuck. The engine never writes it;
    # where no line of the log decides, it says how the launch ended (a hang), at low confidence.
    rule("poster_says_hang", ("hang", "stuck", "freez", "frozen", "hung"),
         r"^(?![^\n]*(?:INFO|WARN|ERROR|DEBUG|\d\d:\d\d|\.py\b|File \"|[\[\]|=]))\W{0,3}(?i:[^\n]{0,60}?\b(?:it|this|vllm"
         r"|sglang|server|service|process|engine|launch|startup|start-up|model)\s+(?:is |was |just |always |then |still |"
         r"gets |got |seems to |keeps? )*(?:hangs?|hanging|hung|stuck|freez(?:es|ing)|frozen)\b)",
         RuleKind.FLAG, flag=POSTER_SAYS_HANG, derived_from=("7002",)),
    # A traceback frame inside an attention backend's constructor: SGLang's registry (`attention_registry.py`, in
    # create_flashinfer_backend), a backend module's `__init__` (`layers/attention/flashinfer_backend.py`, vLLM's
    # `attention/backends/flashinfer.py`). What is raised under it is the backend the launch chose failing to be built.
    rule("backend_built", "attention",
         r"/attention/(?:backends/\w+|\w+_backend|attention_registry)\.py(?:\", line |:)\d+\]?[^\n]{0,60}?, in "
         r"(?:[A-Za-z_]\w*\.)?(?:__init__|create_\w+_backend)\b",
         RuleKind.FLAG, flag=BACKEND_BUILT),
    # A kernel build (torch.compile's Triton, a JIT extension) that failed to compile or link says the same of the
    # traceback after it: `collect2: error: ld returned 1 exit status`, `/usr/bin/ld: cannot find -lcuda`,
    # `fatal error: cuda.h: No such file or directory`.
    rule("build_fault", ("ld returned", "/ld: cannot find", "fatal error:", "ptxas"),
         r"\bld returned \d+ exit status|\bld: cannot find -l\w+|\bfatal error: [\w./-]+\.h(?:pp)?: No such file"
         r"|\bptxas\b[^\n]{0,300}?(?:returned non-zero exit status|(?i:fatal|error))",
         RuleKind.FLAG, flag=NON_MEMORY_FAULT),
)

# A traceback frame as Python prints it (`File "path", line N, in func`) or as IPython / Jupyter
# does (`File [~/path/file.py:64](link), in Class.func(args)`, `File ~/path/file.py:64, in func(`),
# real line: QwenLM/Qwen3#458 (tests/data/corpus-extra/204).
# A frame rendered short (rich's tracebacks, a hand-condensed paste) drops `File` and the quotes: `gpu_model_runner.py:3471,
# in _bookkeeping_sync`.
_FRAME = (r'^\s*(?:File (?:"[^"]*", line \d+|\[?~?[^\s"\[\]]+\.py:\d+\]?(?:\([^)\s]*\))?),|[\w./~-]+\.py:\d+,) in '
          r'(?:[A-Za-z_]\w*\.)?')
_FILE = r'^\s*File "[^"]*'
_FRAME_KEYS = ('File "', "File [", "File ~", ", in ")
# A worker's error line names the method it ran, as a frame would: vLLM V0's "Exception in worker VllmWorkerProcess
# while processing method load_model: ...", "Error executing method 'determine_num_available_blocks'".
_METHOD = r"(?:while processing method|[Ee]rror executing method:?) '?"
_METHOD_KEYS = ("processing method", "executing method")
# Under each frame Python quotes the source line: in the frame of the deepest engine function shown,
# that line is the call into the next phase (`self._initialize_kv_caches()`), which a log cut there
# shows though the callee's own frame is missing (vllm#9011: tests/data/corpus-extra/208).
_RPC = r"^\s+(?:[\w.,\[\]() ]+ = )?(?:await )?self\.(?:\w+\.)*(?:collective_rpc|_run_workers)\([\"']"
_CALL = r"^\s+(?:[\w.,\[\]() ]+ = )?(?:await )?self\.(?:\w+\.)*"
# The engine functions whose frames say the phase (SGLang, vLLM V0/V1 and their forks share these):
# the top-level serving loops, graph capture and compilation, the KV / state pool and the profile
# run that sizes it, weight creation and loading, argument parsing.
_SERVING_FN = (r"event_loop_\w+|run_batch|forward_thread_func\w*|run_engine_loop|engine_step|run_busy_loop"
               r"|_process_engine_step\w*|step_with_batch_queue|process_input_requests|process_batch_result\w*"
               r"|forward_batch_generation|run_step|_run_workers_async|execute_model_async"
               r"|handle_generate_request|generate_request"
               # vLLM V0's workers run requests in this loop (the profile and the capture are called by name)
               r"|start_worker_execution_loop"
               # V1's per-step bookkeeping of scheduled requests (their prompt logprobs too): never in a dummy run
               r"|_bookkeeping_sync|_get_prompt_logprobs_dict"
               # sleep mode's wake-up re-maps the memory of an engine that was up (vLLM, SGLang's RL API)
               r"|wake_up|resume_memory_occupation")
_CAPTURE_FN = (r"\w*capture\w*|init_cuda_graphs?|init_device_graphs|compile_or_warm_up_model|warmup_compile\w*"
               # vLLM's estimate of the graphs' memory, inside the memory profile, captures them (not every function
               # named for the graphs: SGLang's argument checks and piecewise forward passes are named so too)
               r"|_warmup_\w*graph\w*|profile_cuda_?graphs?_memory")
_KV_FN = (r"init_memory_pool|_create_buffers|_profile_available_bytes|\w*kv_caches?|\w*kv_cache_\w+"
          r"|init_cache_engine|_init_cache_engine|_allocate_kv_cache\w*|determine_available_memory"
          r"|determine_num_available_blocks|profile_run|\w*mamba_cache\w*|profile_max_num_token|initialize_cache"
          r"|init_kv_cache\w*|_allocate\w*pool\w*|\w*_pool_init\w*|_?init_\w*pools?"
          # SGLang sets the attention backend (its workspace) and cuBLAS up right after the pool, out of what the pool
          # left (its 0.4 source census)
          r"|init_attention_backend|init_cublas")
_WEIGHTS_FN = (r"load_model\w*|load_weights\w*|\w*load_\w*weights?\w*|process_weights_after_loading|weight_loader\w*"
               r"|\w*repack\w*|_?initialize_model|get_model|create_weights|_create_\w*weights?\w*"
               r"|from_pretrained_model|_load_model\w*")
# Each phase's functions, by the name its hint rules carry.
_PHASE_FUNCTIONS = (("serving", _SERVING_FN, Phase.READY), ("capture", _CAPTURE_FN, Phase.CUDA_GRAPH),
                    ("kv_pool", _KV_FN, Phase.KV_POOL), ("weights", _WEIGHTS_FN, Phase.WEIGHTS))
# A frame whose function itself names a start-up phase (not a file that also runs in other phases, not a forward pass):
# what a dispatcher above it was running.
_NAMED_START_UP = re.compile(_FRAME + r"(?:(?P<weights>" + _WEIGHTS_FN + r")|(?P<kv_pool>" + _KV_FN + r")|(?P<capture>"
                             + _CAPTURE_FN + r"))\b")
_NAMED_PHASES = {"weights": Phase.WEIGHTS, "kv_pool": Phase.KV_POOL, "capture": Phase.CUDA_GRAPH}


# A function named for checking that there is enough memory (vLLM's `check_enough_kv_cache_memory`, each of whose raises
# its source census reads OOM_KV_POOL): an exception it raises itself, under its frame, is that shortage in the phase the
# frames show, however its message reads or where a window cut it ("ValueError: To").
MEMORY_CHECK_FRAME = re.compile(_FRAME + r"_?(?:check|ensure|verify|assert)_(?:\w+_)?(?:enough|sufficient)_\w*mem(?:ory)?\b")
FRAME_LINE = re.compile(_FRAME)
# Python's multiprocessing prints an exception nothing in a child process caught under that process's own top frame
# (`File ".../multiprocessing/process.py", line 314, in _bootstrap`), and the child then exits: a traceback that begins
# there is that process's death, whatever the log shows after it (a front end still answering /health). An exception an
# engine caught and logged begins at the engine's own frames ("Scheduler hit an exception: Traceback ... in
# run_scheduler_process").
PROCESS_TOP_FRAME = re.compile(r'multiprocessing[/\\]process\.py", line \d+, in _bootstrap\b')


def named_start_up(line: str) -> Phase | None:
    """The start-up phase a frame's own function name says, or None."""
    m = _NAMED_START_UP.search(line)
    return next((_NAMED_PHASES[k] for k, v in m.groupdict().items() if v), None) if m else None


# The engine module a log header names (vLLM: `INFO 04-27 16:27:59 [profiling.py:245] ...`, older
# `model_runner.py:1067] ...`) says which code was running, as a frame does: modules that belong to
# one phase only. Modules that serve several (gpu_model_runner.py loads, profiles and captures;
# engine.py, core.py wrap everything) place nothing.
HEADER_MODULE = re.compile(r"^[^\[\]]{0,120}?(?:\[|\s)(?P<module>\w+)\.py:\d+\]")
HEADER_PHASES: dict[str, Phase] = {
    "profiling": Phase.KV_POOL,  # the memory profile's dummy inputs (multimodal): the profile run sizes the KV cache
    "kv_cache_utils": Phase.KV_POOL, "cache_engine": Phase.KV_POOL, "block_manager": Phase.KV_POOL,
    "weight_utils": Phase.WEIGHTS, "loader": Phase.WEIGHTS, "default_loader": Phase.WEIGHTS,
    "base_loader": Phase.WEIGHTS, "sharded_state_loader": Phase.WEIGHTS,
    "cuda_graph": Phase.CUDA_GRAPH, "cudagraph_dispatcher": Phase.CUDA_GRAPH,
    "serving_chat": Phase.READY, "serving_completion": Phase.READY, "serving_engine": Phase.READY,
    "serving_responses": Phase.READY, "serving_embedding": Phase.READY,
}
SHARED_HINTS: tuple[Rule, ...] = (
    rule("traceback_start", ("Traceback",), r"Traceback \(most recent call last\)", RuleKind.HINT),
    rule("frame_serving", _FRAME_KEYS, _FRAME + rf"(?:{_SERVING_FN})\b", RuleKind.HINT, phase=Phase.READY),
    rule("frame_capture", _FRAME_KEYS, _FRAME + rf"(?:{_CAPTURE_FN})\b"
         r'|torch/cuda/graphs\.py", line \d+, in (?:capture_\w+|__enter__|__exit__)'
         r'|' + _FILE + r'(?:cuda_graph_runner|cudagraph\w*|piecewise\w*|graph_runner)\.py"'
         r'|' + _FILE + r'torch/_(?:dynamo|inductor)/', RuleKind.HINT, phase=Phase.CUDA_GRAPH),
    rule("frame_kv_pool", _FRAME_KEYS, _FRAME + rf"(?:{_KV_FN})\b"
         r'|' + _FILE + r'(?:memory_pool|cache_engine|kv_cache_\w+)\.py", line \d+, in __init__',
         RuleKind.HINT, phase=Phase.KV_POOL),
    # Setting the device and the process groups up comes before any weight: an OOM there (a CUDA context that finds no
    # room, vLLM V0's `init_device` on a full GPU: its 0.6 source census) is a device full before the launch took any.
    rule("frame_device_init", _FRAME_KEYS, _FRAME + r"(?:init_device|init_worker_distributed_environment"
         r"|init_torch_distributed|initialize_model_parallel|init_distributed_environment)\b", RuleKind.HINT,
         phase=Phase.INIT),
    rule("frame_weights", _FRAME_KEYS, _FRAME + rf"(?:{_WEIGHTS_FN})\b"
         r'|torch/utils/_device\.py"|/(?:model_)?loader/|/safetensors/|weight_utils\.py"|/model_executor/layers/[\w/]*\.py", line \d+, in __init__'
         # (torch moving a model's parameters to the device: `module.py", line 1370, in convert` under `.to(`)
         r'|torch/nn/modules/module\.py", line \d+, in (?:convert|_apply|to)\b'
         # (a model's or a layer's constructor; not a tokenizer's, which transformers keeps beside its model's code)
         r'|/(?:models|layers)/(?:[\w/]*/)?(?!tokenization_)\w+\.py", line \d+, in __init__', RuleKind.HINT, phase=Phase.WEIGHTS),
    # The method a worker's error line names (see _METHOD): the same phases, read from its name. The driver names the
    # method it had every worker run (`Error executing method 'load_model'`), so it places an OOM any of them logged.
    *(rule(f"method_{name}", _METHOD_KEYS, _METHOD + rf"(?:{functions})\b", RuleKind.HINT, phase=phase, every_writer=True,
           derived_from=("1036",)) for name, functions, phase in _PHASE_FUNCTIONS),
    # The quoted call under a frame (see _CALL): the same phases, read from the callee's name.
    *(rule(f"call_{name}", ("self.",), _CALL + rf"(?:{functions})\(", RuleKind.HINT, phase=phase)
      for name, functions, phase in _PHASE_FUNCTIONS),
    # vLLM runs a phase on its workers by name: `self.collective_rpc("compile_or_warm_up_model")`;
    # tuned on shared 132.
    *(rule(f"call_rpc_{name}", ("collective_rpc", "_run_workers"), _RPC + rf"(?:{functions})[\"']", RuleKind.HINT,
           phase=phase, derived_from=("132",)) for name, functions, phase in _PHASE_FUNCTIONS if phase is not Phase.READY),
    # Tuned on logs 101-145 (docs/corpus-protocol.md): vLLM V1's multiproc worker loop, and the
    # frames of a forward pass. A forward pass with no start-up frame around it (profile run,
    # capture, loading) ran for a request; it ranks below every start-up frame.
    rule("frame_worker_loop", _FRAME_KEYS, _FRAME + r"worker_busy_loop\b", RuleKind.HINT, phase=Phase.READY,
         dispatcher=True, derived_from=("135",)),
    # The sampler (top-k/top-p over the logits) runs at the end of every forward pass: a request's, the warm-up's.
    rule("frame_forward", _FRAME_KEYS, _FRAME + r"(?:execute_model|_?model_forward|forward_(?:extend|decode|idle)"
         r"|\w*prefill\w*|_run_forward\w*|apply_top_k_top_p\w*)\b|" + _FILE
         + r'(?:/attention/backends/|/sample/|/sampler\.py")', RuleKind.HINT, phase=Phase.WARMUP,
         derived_from=("066", "135", "2603")),
    # SGLang 0.2.x's serving loop (controller -> tp_server.exposed_step -> forward_step), written from
    # corpus-extra 206 (sglang#1087).
    rule("frame_serving_old", _FRAME_KEYS, _FRAME + r"(?:loop_for_forward|exposed_step|forward_step"
         r"|forward_decode_batch)\b", RuleKind.HINT, phase=Phase.READY, derived_from=("206",)),
    rule("frame_args", _FRAME_KEYS, _FRAME + r"(?:parse_args|from_cli_args|check_server_args|create_engine_config"
         r"|create_model_config|_verify_args|verify_with_parallel_config|validate_repo_id"
         r"|get_hf_text_config|get_config|__post_init__"
         # the engines' check that a parallel size divides a model dimension (heads, experts, vocab): the size given
         r"|ensure_divisibility)\b|" + _FILE + r'huggingface_hub/utils/_validators\.py"'
         # transformers reading the model's config.json (a file that is not JSON, not text, a key it lacks)
         r'|' + _FILE + r'transformers/configuration_utils\.py", line \d+, in (?:_?get_config_dict|_dict_from_json_file)\b'
         # ... and its tokenizer (files missing, a tokenizer.json that is not JSON: the launch census's third part),
         # the engines' calls of it, and the hub resolving the model or its files (offline, not cached, no such repo)
         r'|' + _FILE + r'transformers/(?:models/auto/tokenization_auto|tokenization_utils_base)\.py", line \d+, in '
         r'_?from_pretrained\b|' + _FILE + r'(?:sglang|vllm)/[^"]*", line \d+, in (?:cached_)?get_tokenizer\b'
         r'|' + _FILE + r'huggingface_hub/(?:_snapshot_download|file_download)\.py"'
         r'|' + _FILE + r'transformers/utils/hub\.py", line \d+, in cached_files?\b'
         # a config's or the arguments' own `_validate_*` (vllm/config/, arg_utils.py, server_args.py); elsewhere one
         # checks a request or a tensor while serving (serving_engine.py's _validate_input, tensor_schema.py's
         # _validate_tensor_shape_expected), or the blocks the KV cache got (cpu_worker.py's _validate_num_cpu_blocks)
         r'|' + _FILE + r'/(?:\w*config\w*/[^"]*|\w*config\w*\.py|\w*args\.py|arg_utils\.py)", line \d+, in '
         r'(?:[A-Za-z_]\w*\.)?_validate_\w+',
         RuleKind.HINT, phase=Phase.ARGS),
)

# A server at work, whatever its version: batch lines with their figures, periodic metrics,
# successful HTTP responses, and the notices of a busy server (retraction, preemption, high KV
# usage) that are figures, not failures. None of these appears before a server can serve.
SHARED_SERVING: tuple[Rule, ...] = (
    rule("serving_batch", ("Prefill batch", "Decode batch", "Extend batch", "Mixed batch", "#running-req",
                           "gen throughput", "#new-seq", "#retracted"),
         r"(?:Prefill|Decode|Extend|Mixed) batch\b|#running-req\b|gen throughput \(token/s\)|#new-seq\b"
         r"|#retracted_reqs\b", RuleKind.SERVING),
    rule("serving_metrics", ("Avg prompt throughput", "Avg generation throughput", "KV cache usage", "Running: ",
                             "Pending: "),
         r"Avg (?:prompt|generation) throughput: [\d.]+|KV cache usage: [\d.]+ ?%|Running: \d+ reqs", RuleKind.SERVING),
    rule("serving_http", ("HTTP/",), r'"(?:GET|POST|PUT) /[^"\s]* HTTP/[\d.]+" 2\d\d\b', RuleKind.SERVING),
    # an offline engine (vLLM's `LLM(...).generate`) at work: its bar over the prompts it processed, past 0 %
    rule("serving_offline", "Processed prompts", r"Processed prompts:\s+[1-9]\d{0,2}%", RuleKind.SERVING,
         derived_from=("2225",)),
    # a request's own timing, end to end, as a fork's metrics log it once the request is done ("[OmniTiming]
    # req=chatcmpl-a1a0742ab3ad9655 total=27.55s ...", a dict's "'e2e_time_ms': 2498.33")
    rule("serving_request_timing", ("total=", "e_time", "e_latency"),
         r"\b(?:chat)?cmpl-[0-9a-f]{8,}\b[^\n]{0,80}?\btotal=[\d.]+ ?m?s\b|\be2e_(?:time|latency)\w*['\"]?\s*[=:]\s*[\d.]+",
         RuleKind.SERVING, derived_from=("9112", "10320")),
    rule("serving_notice", ("preempted", "Retract", "retract", "Added request", "Finished request",
                            "Received request", "out of memory happened"),
         r"is preempted by \w+|(?:Retract|retract)(?:ed)? \w*\s*req|Added request|Finished request|Received request"
         r"|(?:Prefill|Decode) out of memory happened", RuleKind.SERVING),
)

# (ValueError's own kinds too: a config file that is not text or not JSON, read while the arguments are)
_CONFIG_EXCEPTIONS = frozenset({"ValueError", "TypeError", "KeyError", "AssertionError", "NotImplementedError",
                                "HFValidationError", "ValidationError", "RepositoryNotFoundError", "OSError",
                                "UnicodeDecodeError", "UnicodeError", "JSONDecodeError"})


def config_exception(exc: str) -> bool:
    """Whether an exception raised while the arguments were read means the arguments were wrong."""
    return exc in _CONFIG_EXCEPTIONS


def resolve_oom(phase: Phase, flags: frozenset[str]) -> tuple[Outcome, int] | None:
    """Outcome and mfs direction of a raw CUDA OOM raised in `phase`; None if the phase is unknown.

    Before any weights, the device was already full: someone else's memory (GPU_BUSY).
    While loading weights no fraction helps (0), except when the target's pool already
    exists (`pool_done`: SGLang 0.5.9 initialises and loads the draft model out of the (1-mfs)
    slack after it, its distributed init first), which lowering the fraction fixes. Inside pool allocation, capture or serving,
    the slack was too small: lower the fraction (-1).
    """
    if phase in (Phase.SPAWN, Phase.ARGS):
        return None
    if phase in (Phase.INIT, Phase.WEIGHTS) and "pool_done" in flags:
        return Outcome.OOM_KV_POOL, -1  # a draft model set up after the target's pool, out of the slack the pool left
    if phase is Phase.INIT:
        return Outcome.GPU_BUSY, 0
    if phase is Phase.WEIGHTS:
        return Outcome.OOM_WEIGHTS, 0
    if phase is Phase.KV_POOL:
        return Outcome.OOM_KV_POOL, -1
    if phase is Phase.CUDA_GRAPH:
        return Outcome.OOM_CUDA_GRAPH, -1
    return Outcome.OOM_RUNTIME, -1


RemedyFn = Callable[[Outcome, int, str, Mapping[str, object], frozenset[str]], str]


@dataclass(frozen=True)
class EngineLog:
    """One engine's log knowledge: its rules (engine-specific first: for failures the first
    rule to match a line wins) and its remedy wording (flag names differ per engine).

    A verdict's remedy is `special(outcome, mfs_direction, rule_name, values, flags)` when
    that is not empty, else the deciding rule's templates, else `fallback(outcome)`;
    `values` holds the figures and the deciding line's named groups.
    """

    name: str
    rules: tuple[Rule, ...]
    special: RemedyFn
    fallbacks: Mapping[Outcome, tuple[str, ...]]  # in this engine's words (its flags); the rest: records.OUTCOMES
    # What in a line says this engine wrote the log (its logger's header, its processes' tags, its package in a
    # traceback frame): `classify.which_engine` counts such lines to read a log whose engine nobody named.
    signature: re.Pattern[str] = re.compile(r"(?!)")
    # Engines whose code this one runs in its own processes, and whose logger then writes lines into its log.
    imports: tuple[str, ...] = ()

    def fallback(self, outcome: Outcome) -> tuple[str, ...]:
        """The outcome's remedy templates in this engine's words, else its default (records.OUTCOMES)."""
        return self.fallbacks.get(outcome) or outcome.facts.remedy
