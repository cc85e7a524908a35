"""The spec's `target:` block: the seed's own form parses; what ssh would misread is refused, naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from autotune import spec as spec_mod
from autotune.errors import SpecError
from autotune.settings import Target
from tests.test_spec import GOOD


def load(tmp_path: Path, target: Any) -> spec_mod.Spec:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**GOOD, "target": target}))
    return spec_mod.load(path)


def test_local_is_the_default(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(GOOD))
    spec = spec_mod.load(path)
    assert spec.target.local and spec.trial_settings().target == Target()


def test_the_seeds_form_parses(tmp_path: Path) -> None:
    spec = load(tmp_path, {"ssh": "root@pve:22", "ssh_options": ["-i", "~/.ssh/id_ed25519"],
                           "exec_prefix": ["pct", "exec", "101", "--"], "network": "container"})
    assert spec.target == Target(ssh="root@pve:22", ssh_options=("-i", "~/.ssh/id_ed25519"),
                                 exec_prefix=("pct", "exec", "101", "--"), network="container")
    assert spec.target.destination() == ("root@pve", 22) and spec.trial_settings().target == spec.target


@pytest.mark.parametrize("target,field", [
    ({"ssh": "-oProxyCommand=touch /tmp/x"}, "target.ssh"),  # an option, not a host
    ({"ssh": "root@pve:99999"}, "target.ssh"),
    ({"ssh": "root@pve;reboot"}, "target.ssh"),
    ({"exec_prefix": ["pct", "", "101"]}, "target.exec_prefix"),
    ({"exec_prefix": "pct exec 101 --"}, "target.exec_prefix"),  # a string, not argv: refused, never split
    ({"ssh": "root@pve", "port": 22}, "target"),  # unknown key
    ({"ssh": "root@pve", "network": "bridge"}, "target.network"),  # auto, shared or container
])
def test_bad_targets_name_the_field(tmp_path: Path, target: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as info:
        load(tmp_path, target)
    assert field in str(info.value), str(info.value)
