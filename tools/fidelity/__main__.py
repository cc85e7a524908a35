"""The SGLang simulator and adapter against SGLang's real source, per supported version.

    python -m tools.fidelity [0.5.23 0.5.9] [--no-download] [--no-servers]

Reads each version's wheel (`tools/fidelity/source.py`: cached, downloaded once with pip,
never imported) and shows, as tables:
- messages: every line the simulated server prints has its format string in that
  version's source, or is built there with `msg += ...`, or (traceback frames, the
  server_args line) matches that version's functions and ServerArgs fields
  (structure.py); else it is third-party text or listed as simulator-only. The
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
import sys

from tools.fidelity.checks import check_defaults, check_flags
from tools.fidelity.messages import check_messages, sim_lines
from tools.fidelity.section import Section, render
from tools.fidelity.source import Source, SourceUnavailable, fetch

VERSIONS = ("0.5.23", "0.5.9")


def run_version(version: str, *, download: bool, servers: bool) -> list[Section]:
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
