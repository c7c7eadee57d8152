"""Keep a child process running: `orrery serve` restarts its worker whenever it dies.

A worker that dies (killed, out of memory, a crash at start-up) is started again after a
delay that doubles with each quick death (1 s up to 30 s) and resets once a worker has lived
for a minute, so a worker that cannot start does not spin. Trainings it held are taken back
by the lease reconciler; this only makes sure a worker is there to take them.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Sequence

FIRST_DELAY = 1.0
MAX_DELAY = 30.0
HEALTHY_AFTER = 60.0


class Supervisor:
    def __init__(self, command: Sequence[str]) -> None:
        self.command = list(command)
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="supervisor", daemon=True)

    def start(self) -> None:
        self._spawn()
        self._thread.start()

    def _spawn(self) -> None:
        with self._lock:
            if not self._stopping.is_set():
                self.process = subprocess.Popen(self.command)

    def _watch(self) -> None:
        delay = FIRST_DELAY
        while not self._stopping.is_set():
            process = self.process
            assert process is not None
            started = time.monotonic()
            code = process.wait()
            if self._stopping.is_set():
                return
            if time.monotonic() - started >= HEALTHY_AFTER:
                delay = FIRST_DELAY
            print(
                f"worker pid {process.pid} exited with {code}; restarting in {delay:g} s",
                file=sys.stderr,
                flush=True,
            )
            if self._stopping.wait(delay):
                return
            delay = min(delay * 2, MAX_DELAY)
            self.restarts += 1
            self._spawn()

    def stop(self, timeout: float = 30) -> None:
        with self._lock:
            self._stopping.set()
            process = self.process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
