"""The estimator must learn the simulator's hidden costs from logs, never import them."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import autotune.estimate as est

PACKAGE = Path(est.__file__).resolve().parent
REPO = PACKAGE.parents[1]


def test_importing_and_using_the_estimator_loads_no_sim_module() -> None:
    code = (
        "import sys\n"
        "from autotune.estimate import estimate, learn, Launch, Machine\n"
        f"e = estimate({str(REPO / 'configs/models/Qwen3.6-27B')!r}, gpu_mem_gib=48, gpus=2, tp=2, speculative=True)\n"
        "m = learn(Machine(), {'avail_before_weights_gib': 46.8, 'weights_gib': 26.1}, "
        f"{str(REPO / 'configs/models/Qwen3.6-27B')!r}, Launch(gpu_mem_gib=48, gpus=2, tp=2))\n"
        "bad = sorted(n for n in sys.modules if n == 'autotune.sim' or n.startswith('autotune.sim.'))\n"
        "assert not bad, bad\n"
        "print('ok', e.verdict.value)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


def test_no_source_file_of_the_estimator_imports_the_simulator() -> None:
    sources = [*sorted(PACKAGE.glob("*.py")), *sorted((REPO / "autotune" / "modelshape").glob("*.py"))]
    assert len(sources) > 5
    statement = re.compile(r"^\s*(from\s+autotune(\.sim\b|\s+import\s+.*\bsim\b)|import\s+autotune\.sim\b)", re.M)
    for path in sources:
        text = path.read_text()
        assert not statement.search(text), f"{path} imports autotune.sim"
        assert not any(n == "autotune.sim" or n.startswith("autotune.sim.") for n in _imports(path)), path
