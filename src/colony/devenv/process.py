"""A child process that never outlives the Python process that started it."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the child before exec: ask the kernel to SIGKILL it when its parent dies, so a
    crashed or killed test run leaves no etcd or kube-apiserver behind."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ProcessFailed(RuntimeError):
    """A managed process exited or did not become ready; the message ends with its log tail."""


class ManagedProcess:
    """One long-running binary with its output in a log file."""

    def __init__(
        self, name: str, argv: list[str], log_path: Path, env: Mapping[str, str] | None = None
    ) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self._popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the process (its own session, killed with its parent)."""
        with self.log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
                # preexec_fn is not thread-safe; clusters are started from the main thread.
                preexec_fn=_die_with_parent,
            )

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    def running(self) -> bool:
        """Whether the process has been started and has not exited."""
        return self._popen is not None and self._popen.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the process's log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def wait_until(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll `ready` until it is true; fail early if the process exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                raise ProcessFailed(f"{self.name} exited before {what}:\n{self.log_tail()}")
            with contextlib.suppress(Exception):
                if ready():
                    return
            time.sleep(0.2)
        raise ProcessFailed(f"{self.name}: no {what} after {timeout:.0f}s:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL the process group at once (a crash, as far as the process can tell)."""
        if self._popen is None or self._popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._popen.pid, signal.SIGKILL)
        self._popen.wait()

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM the process group, then SIGKILL it after `timeout` seconds."""
        if self._popen is None or self._popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._popen.pid, signal.SIGTERM)
        try:
            self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._popen.pid, signal.SIGKILL)
            self._popen.wait()
