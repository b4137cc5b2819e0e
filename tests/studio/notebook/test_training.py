"""A run trained from a notebook (studio.notebook.train: the Train tab's job, watched in the cell): it trains to
its end and saves a checkpoint that loads; the kernel's stop button (SIGINT, KeyboardInterrupt in the main thread)
stops it between two steps and what it saves is whole; its curves and its model serve every other view."""
from __future__ import annotations

import signal
import threading
import time

import pytest

import studio.notebook as nb
from core.checkpoint import load_checkpoint


def test_a_run_trains_to_its_end_and_saves_a_checkpoint_that_loads(tmp_path, capsys):
    run = nb.train(max_steps=30, eval_every=10, out=tmp_path, name="lecture", every_s=0.2)
    view = run.view
    assert view.state == "finished" and view.step == 30 and [e.step for e in view.evaluations] == [10, 20, 30]
    assert "finished: step 30/30" in capsys.readouterr().out  # outside a kernel, a line per update
    saved = run.save()
    assert saved.parent == tmp_path and saved.name == "lecture-step30"
    assert load_checkpoint(saved).info["step"] == 30
    assert nb.curves(run).figure.data and nb.attention(run, "twenty - one").figure.data
    assert run.attention(layer=2, head=0).figure.data


@pytest.fixture
def kernels_sigint():
    """SIGINT as a kernel handles it (KeyboardInterrupt in the main thread): a suite started from a background shell
    has it ignored (POSIX shells do so for background jobs), and the test's press was lost; put back after."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_the_stop_button_stops_the_run_between_two_steps_and_it_saves_whole(tmp_path, kernels_sigint):
    run = nb.train(max_steps=100_000, out=tmp_path, name="stopped", watch=False)

    def press_once_it_trains() -> None:  # the kernel's interrupt (SIGINT), while watch() waits: never before it
        deadline = time.monotonic() + 120
        while run.view.step < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        signal.raise_signal(signal.SIGINT)
    press = threading.Thread(target=press_once_it_trains, daemon=True)
    press.start()
    run.watch(every_s=0.1)  # returns once the interrupt has stopped the run
    view = run.view
    assert view.state == "stopped" and 0 < view.step < 100_000
    assert "Stopped at step" in view.message
    saved = run.save()
    assert sorted(p.name for p in tmp_path.iterdir()) == [saved.name]  # nothing half-written beside it
    assert load_checkpoint(saved).info["step"] == view.step


def test_unknown_settings_are_refused_with_the_allowed_ones():
    with pytest.raises(TypeError, match="unknown training settings max_step; allowed: data, "):
        nb.train(max_step=10)
