"""Several processes opening one fresh SQLite study at the same instant (a run and `autotune report`,
or a test polling a run it just started): Optuna's schema is created by one of them and the others
open it; none fails with "table ... already exists" (seen in a loaded make test: the run died with
`cannot open storage ... table trial_user_attributes already exists`)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.test_shared_study import OPEN_STUDY


def test_processes_opening_a_fresh_sqlite_study_together_all_join_it(tmp_path: Path) -> None:
    for attempt in range(3):  # each round is a fresh file: the race is on the schema's creation
        url, go = f"sqlite:///{tmp_path / f'study{attempt}.db'}", tmp_path / f"go{attempt}"
        procs = [subprocess.Popen([sys.executable, "-c", OPEN_STUDY, url, str(go)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(4)]
        time.sleep(1.0)  # all four imported and waiting; the start below is one instant for all
        go.touch()
        outs = [p.communicate(timeout=120) for p in procs]
        errors = [err[-400:] for p, (_, err) in zip(procs, outs, strict=True) if p.returncode != 0]
        assert not errors, errors[0]
        assert len({json.loads(out)["id"] for out, _ in outs}) == 1
