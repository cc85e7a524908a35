"""Is a thread or page already in a corpus? The check a helper runs on every candidate before it gathers a batch
(docs/corpus-gathering.md).

    python -m tools.accuracy.known_threads vllm-project/vllm#12345 https://github.com/sgl-project/sglang/issues/7691

A thread is compared by repository and number whatever form a corpus's index holds it in (`owner/repo#N`,
`owner/repo#N (comment)`, an issue, pull-request or discussion URL), with a renamed repository's old and new names taken
as one; a file committed to a repository by repository and path, at whatever commit (`owner/repo:path`, a `blob/`
or `raw.githubusercontent.com` URL: F64's helper found 23 such files called new that the indexes held); any other page
by its URL. Each answer says how many threads of that repository the corpora hold. The known
set is read from every corpus's index here (../shared/corpus/logs where present, tests/data/corpus-extra, each
tests/data/corpus-fresh-*), so it is never out of date after a merge. F59's helpers compared exact lines of a list and
took three known threads; F61's took two logs posted again under other threads, which only a grep of the lines finds.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from tools.accuracy import DEFAULT_DIR, EXTRA_DIR, FRESH_DIRS

INDEXES = tuple(directory / "index.jsonl" for directory in (DEFAULT_DIR, EXTRA_DIR, *FRESH_DIRS))
# repositories renamed or moved: either name may be in an index
ALIASES = {"volcengine/verl": "verl-project/verl", "hiyouga/llama-factory": "hiyouga/llamafactory",
           "vllm-project/vllm-spyre": "torch-spyre/sendnn-inference", "thudm/glm-4": "zai-org/glm-4",
           "thudm/glm-4.1v-thinking": "zai-org/glm-v", "qwenlm/qwen2.5": "qwenlm/qwen3",
           "qwenlm/qwen2.5-vl": "qwenlm/qwen3-vl"}
_SHORT = re.compile(r"([\w.-]+/[\w.-]+)#(\d+)")
_URL = re.compile(r"github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull|discussions)/(\d+)")
# a committed file: `owner/repo:path`, or a URL of it at some commit or branch
_FILE = re.compile(r"^([\w.-]+/[\w.-]+):(?!//)(\S+)$")
_FILE_URL = re.compile(r"(?:github\.com/([\w.-]+/[\w.-]+)/(?:blob|raw)|raw\.githubusercontent\.com/([\w.-]+/[\w.-]+))"
                       r"/[^/\s]+/(\S+?)(?:[?#]\S*)?$")


def _repo(name: str) -> str:
    name = name.lower()
    return ALIASES.get(name, name)


def threads(text: str) -> set[tuple[str, str]]:
    """The (repository, number) pairs `text` names, in either form; a committed file's as (repository, "file:" path)."""
    found = {(_repo(m[1]), m[2]) for pattern in (_SHORT, _URL) for m in pattern.finditer(text)}
    text = text.strip()
    if (m := _FILE.match(text)) is not None:
        found.add((_repo(m[1]), f"file:{m[2]}"))
    if (m := _FILE_URL.search(text)) is not None:
        found.add((_repo(m[1] or m[2]), f"file:{m[3]}"))
    return found


class Known:
    """The threads and pages every corpus's index holds."""

    def __init__(self, indexes: Iterable[Path] = INDEXES) -> None:
        self.threads: set[tuple[str, str]] = set()
        self.pages: set[str] = set()
        for index in indexes:
            if not index.is_file():
                continue
            for line in index.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    for text in (str(row.get("source", "")), str(row.get("url", ""))):
                        self.threads |= threads(text)
                        self.pages.add(text.strip().lower().rstrip("/"))

    def has(self, source: str) -> bool:
        named = threads(source)
        return bool(named & self.threads) if named else source.strip().lower().rstrip("/") in self.pages

    def of_repository(self, source: str) -> int:
        """How many threads of `source`'s repository are known (0 for a page that is no thread)."""
        repos = {repo for repo, _ in threads(source)}
        return sum(1 for repo, _ in self.threads if repo in repos)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    known = Known()
    for source in argv:
        print(f"{'KNOWN' if known.has(source) else 'new  '} {source} (its repository: {known.of_repository(source)} known)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
