"""How well vLLM's public budget rules (engines/vllm/rules.py) predict real vLLM-CPU launches from one.

Reads a study's trial directories (result.json + server.log). From the first launch that printed
vLLM's "Auto set (K/T) GiB for KV cache ... N GiB memory was consumed by non-kv usages." line it takes
the non-KV memory N; for every other launch it predicts, at that launch's utilization and node total,
the KV tokens (and so the largest max_model_len one request can have) and compares with what the engine
printed: "CPU KV cache size: X tokens" or, for a refused one, "the estimated maximum model length is X".

    python scripts/vllm_cpu_predict.py results/vllm-cpu/trials
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from autotune.engines.vllm import rules

AUTO_SET = re.compile(r"Auto set \(([\d.]+)/([\d.]+)\) GiB for KV cache on node \d+, with ([\d.]+) GiB requested "
                      r"memory for the worker\. ([\d.]+) GiB memory was consumed by non-kv usages")
KV_SIZE = re.compile(r"CPU KV cache size: ([\d,]+) tokens")
EST_MAX = re.compile(r"the estimated maximum model length is (\d+)")
KV_BYTES_PER_TOKEN = 8192  # configs/models/tiny-llama-cpu: 2 x 16 layers x 2 KV heads x 64 x 2 bytes


def launches(trials: Path) -> list[dict[str, object]]:
    out = []
    for result_file in sorted(trials.glob("*/result.json")):
        result = json.loads(result_file.read_text())
        log = result_file.parent / "server.log"
        text = log.read_text(errors="replace") if log.is_file() else ""
        auto = AUTO_SET.search(text)
        actual = KV_SIZE.search(text) or EST_MAX.search(text)
        if not auto or not actual:
            continue
        out.append({"trial": result_file.parent.name, "util": result["config"]["mem_fraction_static"],
                    "context": result["config"]["context_length"], "outcome": result["outcome"],
                    "total_gib": float(auto[2]), "non_kv_gib": float(auto[4]),
                    "actual_tokens": int(actual[1].replace(",", "")), "started_at": result.get("started_at", "")})
    return sorted(out, key=lambda r: str(r["started_at"]))


def main(argv: list[str]) -> None:
    rows = launches(Path(argv[0]))
    if len(rows) < 2:
        sys.exit("need at least two launches that reached the KV budget")
    first = rows[0]
    print(f"from {first['trial']} (util {first['util']}): non-KV {first['non_kv_gib']} GiB\n")
    print("| trial | util | max_model_len | outcome | engine's tokens | predicted | error |")
    print("|---|---|---|---|---|---|---|")
    for r in rows[1:]:
        b = rules.Budget(total_bytes=int(float(r["total_gib"]) * rules.GIB), free_bytes=1 << 62,  # type: ignore[arg-type]
                         utilization=float(r["util"]), non_kv_bytes=int(float(first["non_kv_gib"]) * rules.GIB),  # type: ignore[arg-type]
                         kv_bytes_per_token=KV_BYTES_PER_TOKEN, max_model_len=int(r["context"]))  # type: ignore[call-overload]
        err = (b.kv_tokens - int(r["actual_tokens"])) / int(r["actual_tokens"])  # type: ignore[call-overload]
        print(f"| {r['trial']} | {r['util']} | {r['context']} | {r['outcome']} | {r['actual_tokens']:,} | "
              f"{b.kv_tokens:,} | {err:+.1%} |")


if __name__ == "__main__":
    main(sys.argv[1:])
