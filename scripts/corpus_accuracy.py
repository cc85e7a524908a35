"""Print the log classifier's accuracy on the corpus of real user logs, and every miss.

Usage: python scripts/corpus_accuracy.py [CORPUS_DIR]
CORPUS_DIR defaults to ../shared/corpus/logs next to the repository. Exit status 1 when a
clear case (high-confidence label, full log) is missed, 2 when the corpus is not found.
"""

from __future__ import annotations

import sys
from pathlib import Path

from autotune.engines import corpus

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "logs"


def main(argv: list[str]) -> int:
    directory = Path(argv[0]) if argv else DEFAULT_DIR
    try:
        cases = corpus.load(directory)
    except FileNotFoundError:
        print(f"no corpus at {directory} (expected index.jsonl there)", file=sys.stderr)
        return 2
    results = corpus.evaluate(cases)
    print(f"corpus: {directory} ({len(results)} cases)\n")
    print(corpus.accuracy_table(results))
    misses = [r for r in results if not r.right]
    print(f"misses ({len(misses)}):" if misses else "misses: none")
    for result in misses:
        print(corpus.describe_miss(result))
    return 1 if any(r.case.clear for r in misses) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
