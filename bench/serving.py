"""Starting a server for a benchmark or a test: a free local port, and waiting until it answers."""
from __future__ import annotations

import socket
import subprocess
import time
import urllib.request


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, proc: subprocess.Popen, timeout: float) -> float:
    """Seconds until url answers; a clear error if proc exits first (with its output, when
    piped) or nothing answers within timeout seconds."""
    def check() -> None:
        if proc.poll() is not None:
            output = f":\n{proc.stdout.read()}" if proc.stdout else ""
            raise RuntimeError(f"the studio exited with {proc.returncode}{output}")
    return wait_for_url(url, timeout, check)


def wait_for_url(url: str, timeout: float, check=lambda: None) -> float:
    """Seconds until url answers (check() first, each try: it raises when the server is gone);
    TimeoutError after timeout seconds."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        check()
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return time.monotonic() - start
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer within {timeout} s")
