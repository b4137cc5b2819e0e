"""Issue #53: the repository runs as a Hugging Face Space. This does what the Space does: a fresh virtual
environment, torch and requirements.txt installed into it, the repository's files alone (no ../shared data),
then `SPACE_ID=... python app.py`, which must serve the public studio on 0.0.0.0:7860 and translate through
the /translate endpoint.

Slow (minutes, most of them pip's; its cache makes a second run faster): run it with --runslow. torch is
installed first with .ci/run's pin, which pip must find as a CPU wheel (CI's mirror holds one; elsewhere
e.g. PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu): PyPI's Linux wheel is the CUDA build."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PORT = 7860  # where a Space's Gradio app must listen
TORCH = "torch==2.13.0"  # .ci/run's pin
INSTALL_TIMEOUT_S = 1800
START_TIMEOUT_S = 300
SOURCE = "Ein Hund rennt durch den Schnee."
# /train_start's set-up fields (docs/api.md) for a paper-base model, 48M parameters: over a public studio's 10M cap.
TOO_LARGE_FOR_PUBLIC = ["Synthetic task", "numbers", "", None, "", "", "", 0, "too-large", "paper-base", 6, 512, 8,
                        2048, 0.1, 8000, "sinusoidal", False, 100, 10, 1.0, "noam", 0.001, 0.1, 1024, 0.0, 50, 10,
                        "off", 0]
# Straight to the server: a proxy from the environment must not stand between the test and localhost.
LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))

pytestmark = pytest.mark.slow


def copy_repository(target: Path) -> Path:
    """What a deploy gives the Space (docs/space.md): the files a commit of the working tree would hold
    (tracked ones, and new ones .gitignore does not exclude), copied to target; no ../shared, no runs/."""
    from test_repository import committable_files

    for file in committable_files():
        destination = target / file.relative_to(ROOT)
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(file.read_bytes())
    return target


def run(command: list[str], cwd: Path) -> None:
    """Run command; on failure, fail the test with the end of what it printed."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(command)} exited with {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")


def space_environment() -> dict[str, str]:
    """This process's environment as a fresh one: none of the test run's Python paths, and SPACE_ID set."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return {**env, "SPACE_ID": "test/space", "GRADIO_ANALYTICS_ENABLED": "False", "OMP_NUM_THREADS": "1"}


def port_in_use(port: int) -> bool:
    return any(listeners(port).values())


def listeners(port: int) -> dict[str, bool]:
    """Whether something listens on port on all interfaces ("all") or on some address only ("some"), from
    the kernel's socket tables: a server bound to 127.0.0.1 would answer the test but not the Space's proxy."""
    found = {"all": False, "some": False}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:] if Path(table).exists() else []:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found["all" if set(address) == {"0"} else "some"] = True
    return found


def wait_until_serving(server: subprocess.Popen, log: Path) -> None:
    """Poll the server's API page until it answers, the process dies, or the deadline passes."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"app.py exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with LOCAL.open(f"http://127.0.0.1:{PORT}/gradio_api/info", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:  # not listening yet, or not answering yet
            pass
        time.sleep(0.5)
    pytest.fail(f"app.py did not answer on port {PORT} within {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


def call(api: str, data: list) -> tuple[str, list]:
    """Gradio's REST API: POST /gradio_api/call/API, then read its event stream; (last event, its data)."""
    url = f"http://127.0.0.1:{PORT}/gradio_api/call/{api}"
    request = urllib.request.Request(url, json.dumps({"data": data}).encode(), {"Content-Type": "application/json"})
    with LOCAL.open(request, timeout=30) as response:
        event_id = json.load(response)["event_id"]
    with LOCAL.open(f"{url}/{event_id}", timeout=120) as response:
        lines = response.read().decode().splitlines()
    events = [(lines[i][6:].strip(), lines[i + 1][5:].strip()) for i in range(len(lines) - 1)
              if lines[i].startswith("event:") and lines[i + 1].startswith("data:")]
    event, payload = events[-1]
    return event, json.loads(payload)


def stop(server: subprocess.Popen) -> None:
    """End the server and whatever it started (its own process group), politely first."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_a_fresh_install_serves_the_public_studio_on_port_7860_and_translates(tmp_path):
    if sys.platform != "linux":
        pytest.skip("a Space runs Linux")
    if port_in_use(PORT):
        pytest.skip(f"port {PORT} is in use on this machine")
    started = time.monotonic()
    space = copy_repository(tmp_path / "space")
    python = tmp_path / "venv" / "bin" / "python"
    run([sys.executable, "-m", "venv", str(tmp_path / "venv")], tmp_path)
    run([str(python), "-m", "pip", "install", "--quiet", TORCH], space)
    run([str(python), "-m", "pip", "install", "--quiet", "-r", "requirements.txt"], space)
    installed = time.monotonic()
    log = tmp_path / "app.log"
    with open(log, "w") as output:
        server = subprocess.Popen([str(python), "app.py"], cwd=space, env=space_environment(), stdout=output,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_serving(server, log)
        assert listeners(PORT) == {"all": True, "some": False}, "a Space's proxy reaches 0.0.0.0:7860 only"
        event, outputs = call("translate", ["multi30k-de-en-small", SOURCE, "greedy", 1, 0.6, 50, 1, 1.0, 0, 1.0,
                                            "", "fp32"])
        assert event == "complete", outputs
        translation = outputs[0]
        assert "dog" in translation.lower() and "snow" in translation.lower(), translation
        event, outputs = call("train_start", TOO_LARGE_FOR_PUBLIC)  # public mode: refused, not started
        assert event == "complete" and "this public studio trains models of at most 10M" in outputs[1], outputs
    finally:
        stop(server)
    print(f"\ninstall {installed - started:.0f} s, start and translate {time.monotonic() - installed:.0f} s: "
          f"{SOURCE!r} -> {translation!r}")
