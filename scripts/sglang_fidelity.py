"""The SGLang simulator and adapter against SGLang's real source, per supported version.

    python scripts/sglang_fidelity.py [0.5.23 0.5.9] [--no-download] [--no-servers]

Reads each version's wheel (`scripts/sglang_source.py`: cached, downloaded once with pip,
never imported) and shows, as tables:
- messages: every line the simulated server prints has its format string in that
  version's source, or is built there with `msg += ...`, or (traceback frames, the
  server_args line) matches that version's functions and ServerArgs fields
  (sglang_structure.py); else it is third-party text or listed as simulator-only. The
  table gives the share traced: ok / (ok + mismatch);
- flags: every flag the adapter emits and every flag of our shipped table is registered
  by that version's ServerArgs;
- defaults: the public rules (GPU-size defaults, graph batch sizes, prefill buckets, the
  default mem_fraction_static, the speculative request cap, req_to_token, KV bytes per
  dtype, the state pool) agree with the source, evaluated on a grid of inputs.
Exit status 1 when anything disagrees.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `scripts` and `autotune` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts import sglang_structure as structure  # noqa: E402
from scripts.sglang_source import Source, SourceUnavailable, fetch  # noqa: E402

VERSIONS = ("0.5.23", "0.5.9")

# Lines that are not SGLang's own text: (regex, origin). Nothing in SGLang's source to find.
THIRD_PARTY = (
    (r"^(INFO|ERROR|WARNING):     ", "uvicorn's own log line"),
    (r"^Traceback \(most recent call last\):$|^  File \"", "Python's traceback (frames of SGLang's files are checked)"),
    (r"^torch\.OutOfMemoryError: CUDA out of memory\.", "torch's CUDA OOM text"),
)
# Lines SGLang builds from several literals (`msg += ...`) or from a repr: each listed
# fragment must be a literal (or a literal's constant part) of that version's source.
# (Lines composed with `msg += ...` in one function, such as the batch lines, are matched
# against the source's own composition: sglang_structure.composed_templates.)
COMPOSED = (
    (r"^Scheduler hit an exception: ", ("Scheduler hit an exception: ",)),
    # 0.5.23: msg = "Not enough memory. ..."; msg += f" Current value: mem_fraction_static={...}"
    (r"^RuntimeError: Not enough memory\. .* Current value: mem_fraction_static=",
     ("Not enough memory. Please try to increase --mem-fraction-static.", " Current value: mem_fraction_static=")),
    # f"{msg} To allow overriding ...", msg being the "Warning: ..." text logged when allowed
    (r"^ValueError: Warning: User-specified context_length \(",
     ("Warning: ", " context_length (", ") is greater than the derived context_length (",
      "This may lead to incorrect model outputs or CUDA errors. Note that the derived context_length may differ",
      " To allow overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")),
    # f"Capture cuda graph failed: {e}" around torch's OOM text
    (r"^Exception: Capture cuda graph failed: CUDA out of memory\.", ("Capture cuda graph failed: ",)),
)
# Simulator-only lines, on purpose: (regex, reason).
SIM_ONLY: tuple[tuple[str, str], ...] = (
    (r"^ValueError: speculative decoding with NEXTN/EAGLE needs --speculative-draft-model-path",
     "SGLang has no such check: without a draft path or MTP layers it fails later, loading the draft; "
     "the simulator fails at once with its own text"),
)
EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception)|Exception|Warning): ")


@dataclass
class Section:
    """One table: rows of (item, verdict, where/why) and the mismatches among them."""

    title: str
    rows: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, item: str, ok: bool | None, where: str) -> None:
        self.rows.append((item, {True: "ok", False: "MISMATCH", None: "n/a"}[ok], where))

    @property
    def mismatches(self) -> list[tuple[str, str, str]]:
        return [r for r in self.rows if r[1] == "MISMATCH"]


def check_messages(src: Source, lines: list[str]) -> Section:
    sec = Section("messages")
    for line in lines:
        sec.add(*_message_verdict(src, line))
    return sec


def traced(sec: Section) -> tuple[int, int]:
    """(lines traced to the source, lines that claim to be SGLang's): third-party and
    simulator-only lines are out of the count."""
    ok = sum(1 for r in sec.rows if r[1] == "ok")
    return ok, ok + sum(1 for r in sec.rows if r[1] == "MISMATCH")


def _message_verdict(src: Source, line: str) -> tuple[str, bool | None, str]:
    shown = line if len(line) <= 110 else line[:107] + "..."
    for check in (structure.frame_verdict, structure.server_args_verdict):
        verdict = check(src, line)
        if verdict is not None:
            return shown, *verdict
    for pattern, origin in THIRD_PARTY:
        if re.search(pattern, line):
            return shown, None, f"third-party: {origin}"
    for pattern, reason in SIM_ONLY:
        if re.search(pattern, line):
            return shown, None, f"simulator-only: {reason}"
    for pattern, fragments in COMPOSED:
        if re.search(pattern, line):
            missing = [f for f in fragments if not src.has_fragment(f)]
            return shown, not missing, f"composed; missing {missing}" if missing else "composed: pieces found"
    body = EXCEPTION.sub("", line)
    lit = src.find(line) or (src.find(body) if body != line else None)
    if lit is None:
        templates = structure.composed_templates(src)
        composed = structure.composed_verdict(src, line, templates) or structure.composed_verdict(src, body, templates)
        return (shown, *composed) if composed else (shown, False, "no format string in the source")
    return shown, True, f"{lit.path.removeprefix('sglang/srt/')}:{lit.lineno}"


def render(version: str, sections: list[Section], verbose: bool) -> str:
    out = [f"== SGLang {version}"]
    for sec in sections:
        counts = {v: sum(1 for r in sec.rows if r[1] == v) for v in ("ok", "MISMATCH", "n/a")}
        out.append(f"-- {sec.title}: {len(sec.rows)} checked, {counts['ok']} ok, {counts['MISMATCH']} mismatch, "
                   f"{counts['n/a']} not SGLang's")
        if sec.title == "messages":
            ok, claimed = traced(sec)
            out.append(f"   traced to {version}'s source: {ok}/{claimed} ({100 * ok / max(1, claimed):.1f} %)")
        for item, verdict, where in sec.rows:  # every rule row; message rows only when off
            if verbose or verdict != "ok" or sec.title == "defaults":
                out.append(f"   {verdict:8} {item}  [{where}]")
    return "\n".join(out)


def run_version(version: str, *, download: bool, servers: bool) -> list[Section]:
    from scripts.sglang_checks import check_defaults, check_flags
    from scripts.sglang_messages import sim_lines

    src = Source(fetch(version, download=download), version)
    return [check_messages(src, sim_lines(version, servers=servers)), check_flags(src), check_defaults(src)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("versions", nargs="*", default=list(VERSIONS))
    ap.add_argument("--no-download", action="store_true", help="use only cached wheels")
    ap.add_argument("--no-servers", action="store_true", help="skip the two real simulated servers per version")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every row, not only mismatches")
    ns = ap.parse_args(argv)
    bad = 0
    for version in ns.versions:
        try:
            sections = run_version(version, download=not ns.no_download, servers=not ns.no_servers)
        except SourceUnavailable as exc:
            print(f"== SGLang {version}: source unavailable: {exc}")
            return 2
        print(render(version, sections, ns.verbose))
        bad += sum(len(s.mismatches) for s in sections)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
