"""autotune: find the largest LLM-server launch configuration that fits your GPUs.

The public surface is small on purpose: the values a caller passes and gets back. The
commands (`autotune run`, `trial`, `classify`, `estimate`, `report`, `best`, `regress`)
are the stable interface; their JSON output is documented in the README.
"""

from autotune.config import LaunchConfig
from autotune.errors import AutotuneError
from autotune.records import Classification, Outcome, Phase, TrialResult

__version__ = "0.1.0"

__all__ = ["AutotuneError", "Classification", "LaunchConfig", "Outcome", "Phase", "TrialResult", "__version__"]
