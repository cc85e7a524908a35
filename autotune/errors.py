"""The exception family for set-up and environment problems.

An engine failing to start (OOM, bad flag, crash) is never an exception: it is an
`Outcome` in a `TrialResult`. Exceptions are for what stops the *tool* from doing
its job — a broken spec, a missing model, busy GPUs, no driver — and each carries
a `hint` that tells the user what to do about it.

    AutotuneError
     ├── SpecError            the tuning spec is wrong (names the field: an unknown engine, strategy...)
     ├── ModelConfigError     config.json missing or lacking a field we need
     ├── GpuError             no driver / NVML failure / simulated node missing
     │    └── GpuBusyError    every slot's GPUs stay busy with someone else's memory (a certification's
     │                        boots); one trial on a busy GPU is a result, Outcome.GPU_BUSY
     ├── LaunchError          the server could not be started at all
     ├── StoreError           the results storage cannot be used
     ├── TransportError       the target cannot be reached or entered (names the field)
     └── flagtable.FlagError  an argv the engine's own parser rejects
"""

from __future__ import annotations


class AutotuneError(Exception):
    """Base of every error the tool raises on purpose. `hint` says how to fix it."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class SpecError(AutotuneError):
    """The tuning spec is invalid. `field` is the dotted path of the offending field."""

    def __init__(self, field: str, message: str, hint: str = "") -> None:
        super().__init__(f"spec field '{field}': {message}", hint)
        self.field = field
        self.detail = message


class ModelConfigError(AutotuneError):
    """A model directory has no usable config.json."""


class GpuError(AutotuneError):
    """The GPU backend cannot be used."""


class GpuBusyError(GpuError):
    """GPUs hold memory that belongs to someone else."""


class LaunchError(AutotuneError):
    """The engine process could not be spawned (binary missing, port taken...)."""


class StoreError(AutotuneError):
    """The results storage cannot be opened or written."""


class TransportError(AutotuneError):
    """The target cannot be reached or entered (ssh, exec prefix): never a verdict on the config."""

    def __init__(self, field: str, message: str, hint: str = "") -> None:
        super().__init__(f"{field}: {message}", hint)
        self.field = field
