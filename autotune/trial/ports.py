"""The ports of one trial's server: its HTTP port and its distributed-init (rendezvous) port.

Slots of one run launch in the same instant, so every port is handed out here, under one lock,
and held for the trial's whole life (`PortLease.release` at its end): two live trials of this
process never get the same port, even before their servers have bound them.

- The HTTP port comes from the kernel (bind to port 0), as before.
- The distributed-init port is where the engine's rank 0 listens for the other ranks (SGLang's
  `--nccl-port`, a torch TCPStore). It is drawn below the kernel's ephemeral range, as SGLang
  0.5.23 draws its own (`get_free_port_below_ephemeral`): the server binds it seconds after
  the check, and a port in the ephemeral range could meanwhile become some connection's source
  port — the tool's own requests to another slot's server included.

Each port is checked free (`in_use`, which may ask the target) when handed out; the trial
checks again just before launching, as it does the HTTP port.
"""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

INIT_LOW, INIT_HIGH = 22000, 29999  # SGLang's range for its own rendezvous port (utils/network.py)
TRIES = 64

_LOCK = threading.Lock()
_HELD: set[int] = set()  # ports of this process's live trials


def port_in_use(host: str, port: int) -> bool:
    """Whether `port` on `host` cannot be bound here (something listens on it, or holds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
            return False
        except OSError:
            return True


def kernel_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 where it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


@dataclass
class PortLease:
    """Ports held for one trial until `release` (idempotent)."""

    ports: list[int] = field(default_factory=list)

    def http(self, host: str, in_use: Callable[[int], bool]) -> int:
        """A free port from the kernel that no live trial of this process holds."""
        for _ in range(TRIES):
            port = kernel_port(host)
            if self._take(port, in_use):
                return port
        raise OSError(f"no free HTTP port on {host} after {TRIES} tries")

    def init(self, in_use: Callable[[int], bool]) -> int:
        """A free distributed-init port below the ephemeral range, held by no live trial here."""
        high = min(INIT_HIGH, ephemeral_low() - 1)
        candidates = random.sample(range(INIT_LOW, high + 1), min(TRIES, max(0, high - INIT_LOW + 1)))
        for port in candidates:
            if self._take(port, in_use):
                return port
        raise OSError(f"no free distributed-init port in {INIT_LOW}-{high} after {len(candidates)} tries")

    def _take(self, port: int, in_use: Callable[[int], bool]) -> bool:
        with _LOCK:
            if port in _HELD:
                return False
            _HELD.add(port)  # before the check: a slot checking in the same instant skips it
        if in_use(port):
            with _LOCK:
                _HELD.discard(port)
            return False
        self.ports.append(port)
        return True

    def release(self) -> None:
        with _LOCK:
            _HELD.difference_update(self.ports)
        self.ports = []


def held() -> set[int]:
    """The ports live trials of this process hold (for tests and diagnostics)."""
    with _LOCK:
        return set(_HELD)
