"""Issue 10: faults while saving checkpoints — kill -9 in the middle of saves, a full disk, a
crash while replacing an interrupted save — and exact resume after a kill.

The kill tests run this file as a child process (``python tests/test_faults.py CKPT SLOW``): it
resumes from CKPT when there is one, then trains and saves after every step, announcing each save
before it starts ("begin STEP DIGEST LOSS") and after it returns ("done STEP").
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from core.bundle import new_bundle
from core.checkpoint import load_checkpoint, load_trainer_state, shards, trainer_state
from core.data.batching import encode_pairs
from core.data.tasks import make_task
from core.data.tokenizer import Tokenizer
from core.training.trainer import TrainConfig, Trainer

ROOT = Path(__file__).resolve().parents[2]

STEPS = 12
TIMEOUT = 120.0  # seconds a child may take to say something (a busy 2-core machine)


# ----- the training run every test shares ------------------------------------------------------
def make_trainer(bundle=None) -> Trainer:
    """A tiny seeded run with dropout on (so exact resume needs the RNG state too)."""
    corpus = make_task("copy", seed=0, n_train=200, n_valid=10, n_test=10)
    if bundle is None:
        torch.manual_seed(0)
        bundle = new_bundle(corpus.train, "tiny", vocab_size=100, tokenizer_kind="word", dropout=0.1)
    examples, _ = encode_pairs(corpus.train, bundle.tokenizer, bundle.model.config.max_len)
    config = TrainConfig(max_steps=STEPS, max_tokens=256, warmup=20, lr_factor=0.5, seed=0, device="cpu",
                         amp="off")
    return Trainer(bundle, examples, config)


def resume_or_start(path: Path) -> Trainer:
    """The run continued from the checkpoint at path, or a fresh one when there is none."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "interrupted save; using the previous copy"
            bundle = load_checkpoint(path)
            state = load_trainer_state(path)
    except FileNotFoundError:
        return make_trainer()
    trainer = make_trainer(bundle)
    trainer.load_state_dict(state)
    return trainer


def digest(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().float().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


# One torch thread, as in the children: results then match bit for bit, and on a busy 2-core
# machine a 2-thread step of this tiny model takes ~2 s instead of ~20 ms.


@pytest.fixture(scope="module")
def straight() -> list[tuple[str, float]]:
    """(weights digest, loss) after each step of the uninterrupted run."""
    trainer = make_trainer()
    return [_step(trainer) for _ in range(STEPS)]


def _step(trainer: Trainer) -> tuple[str, float]:
    loss = trainer.step().loss
    return digest(trainer.model), loss


def load(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_checkpoint(path), load_trainer_state(path)


# ----- the child process -------------------------------------------------------------------------
def _slow_down_saves(seconds: float) -> None:
    """Widen the windows a kill can land in: after writing the weights and before each rename."""
    write, rename = shards.save_file, os.rename

    def slow_write(*args, **kwargs):
        write(*args, **kwargs)
        time.sleep(seconds)

    def slow_rename(src, dst):
        time.sleep(seconds)
        rename(src, dst)

    shards.save_file, os.rename = slow_write, slow_rename


def child(path: Path, slow: float) -> None:
    torch.set_num_threads(1)
    if slow:
        _slow_down_saves(slow)
    trainer = resume_or_start(path)
    print(f"start {trainer.step_count}", flush=True)
    while trainer.step_count < STEPS:
        loss = trainer.step().loss
        print(f"begin {trainer.step_count} {digest(trainer.model)} {loss!r}", flush=True)
        trainer.save(path)
        print(f"done {trainer.step_count}", flush=True)


@dataclass
class Child:
    """A child run and what it said so far."""

    proc: subprocess.Popen
    lines: queue.Queue = field(default_factory=queue.Queue)
    begun: dict[int, tuple[str, float]] = field(default_factory=dict)
    done: list[int] = field(default_factory=list)

    @classmethod
    def spawn(cls, path: Path, slow: float) -> "Child":
        # The child runs this file as a script: the project's packages are found through PYTHONPATH.
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, __file__, str(path), str(slow)], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        me = cls(proc)
        threading.Thread(target=lambda: [me.lines.put(line) for line in proc.stdout] + [me.lines.put(None)],
                         daemon=True).start()
        return me

    def wait_for(self, prefix: str, at_least: int = 0) -> bool:
        """Read lines until one starts with prefix and names a step >= at_least; False if the
        child finished its run first."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if line is None:
                assert self.proc.wait() == 0, "the child failed (its output is above)"
                return False
            if self._note(line) == prefix and int(line.split()[1]) >= at_least:
                return True
        raise TimeoutError(f"no '{prefix}' from the child within {TIMEOUT} s")

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        time.sleep(0.05)  # let the reader thread drain the pipe
        while not self.lines.empty():
            line = self.lines.get()
            if line is not None:
                self._note(line)

    def _note(self, line: str) -> str:
        words = line.split()
        if words and words[0] == "begin":
            self.begun[int(words[1])] = (words[2], float(words[3]))
        elif words and words[0] == "done":
            self.done.append(int(words[1]))
        elif words and words[0] not in ("start",):
            print("child:", line.rstrip())  # a traceback: shown with the failure
        return words[0] if words else ""


def check_after_kill(path: Path, run: Child, straight: list[tuple[str, float]], last_done: int) -> int:
    """The checkpoint loads, is one of the complete saves (never older than the last one that
    finished) and its weights and trainer state belong together; returns its step."""
    bundle, state = load(path)
    step = bundle.info["step"]
    newest_begun = max(run.begun, default=last_done)
    assert last_done <= step <= newest_begun, (last_done, step, newest_begun)
    assert digest(bundle.model) == straight[step - 1][0]
    assert state["step"] == step
    return step


# ----- kill -9 -----------------------------------------------------------------------------------
def kill_at_random(path: Path, straight, kills: int, rng: random.Random) -> dict[str, int]:
    """kills child runs, each killed at a random moment after it began a save; returns where the
    kills left the folder (a half-written hidden copy, only the previous copy, or neither)."""
    landed = {"mid-write": 0, "mid-swap": 0, "between saves": 0}
    last_done = 0
    for _ in range(kills):
        run = Child.spawn(path, slow=0.02)
        if not run.wait_for("done" if last_done == 0 else "begin"):
            break  # the run reached its last step before this kill
        time.sleep(rng.uniform(0.0, 0.12))
        run.kill()
        last_done = max([last_done, *run.done])
        names = {p.name for p in path.parent.iterdir()}
        if path.name not in names:
            landed["mid-swap"] += 1
        elif any(".saving-" in n for n in names):
            landed["mid-write"] += 1
        else:
            landed["between saves"] += 1
        step = check_after_kill(path, run, straight, last_done)
        for s, (d, loss) in run.begun.items():  # a resumed run retraces the uninterrupted one exactly
            assert (d, loss) == straight[s - 1], f"step {s} differs after resuming from step {step}"
    return landed


def finish(path: Path, straight) -> None:
    run = Child.spawn(path, slow=0.0)
    assert run.proc.wait(timeout=TIMEOUT) == 0
    bundle, state = load(path)
    assert bundle.info["step"] == STEPS and digest(bundle.model) == straight[-1][0]
    leftovers = [p.name for p in path.parent.iterdir() if p.name != path.name]
    assert leftovers == [], f"hidden copies left behind: {leftovers}"


def kill_seed() -> int:
    """Fresh each run (the trainer seeds the global random module), or FAULTS_SEED to replay one."""
    seed = int(os.environ.get("FAULTS_SEED") or int.from_bytes(os.urandom(3), "little"))
    print(f"kill moments: FAULTS_SEED={seed}")
    return seed


def test_kill_9_during_saves_always_leaves_a_complete_checkpoint(tmp_path, straight):
    seed = kill_seed()
    landed = kill_at_random(tmp_path / "ckpt", straight, kills=3, rng=random.Random(seed))
    print(f"kills landed: {landed}")
    finish(tmp_path / "ckpt", straight)


@pytest.mark.slow
def test_kill_9_many_times(tmp_path, straight):
    seed = kill_seed()
    landed = kill_at_random(tmp_path / "ckpt", straight, kills=10, rng=random.Random(seed))
    print(f"kills landed: {landed}")
    finish(tmp_path / "ckpt", straight)


def test_resume_after_kill_9_reproduces_the_uninterrupted_run(tmp_path, straight):
    path = tmp_path / "ckpt"
    run = Child.spawn(path, slow=0.0)
    assert run.wait_for("done", at_least=STEPS // 2)
    run.kill()
    assert all(run.begun[s] == straight[s - 1] for s in run.begun)  # the child's own steps
    trainer = resume_or_start(path)
    resumed_from = trainer.step_count
    tail = [_step(trainer) for _ in range(STEPS - resumed_from)]
    assert STEPS // 2 <= resumed_from < STEPS
    assert tail == straight[resumed_from:]  # same weights and the same losses, bit for bit


def interrupted_train_loop(trainer: Trainer, out: Path) -> None:
    """train_cli's loop over trainer, into out, ended by a SIGINT the trainer sends itself: it exits 130."""
    import cli.common
    import cli.loop

    args = cli.loop.Saving(out, every=1000, keep_last=3)
    try:
        with pytest.raises(SystemExit) as exited:
            cli.loop.train_loop(trainer, args, rank=0)
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    assert exited.value.code == 130


def test_ctrl_c_inside_a_step_saves_the_run_after_that_step_and_resumes_it_exactly(tmp_path, straight):
    """A Ctrl-C that lands in a step's forward pass (its batches taken, the weights not yet updated):
    the step ends, then train_cli saves, and a resume retraces the uninterrupted run. (It used to save
    at once: "step 2" with step 3's batches and dropout draws used up, which a resume then skipped.)"""
    import cli.common
    import cli.loop

    trainer = make_trainer()
    forward = trainer.objective.forward

    def pressed_in_step_3(*args, **kwargs):
        if trainer.step_count == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return forward(*args, **kwargs)

    trainer.objective.forward = pressed_in_step_3
    interrupted_train_loop(trainer, tmp_path)
    saved = cli.common.run_checkpoints(tmp_path)
    assert [p.name for p in saved] == ["step-0000003"]
    resumed = resume_or_start(saved[-1])
    assert resumed.step_count == 3 and digest(resumed.model) == straight[2][0]
    assert [_step(resumed) for _ in range(STEPS - 3)] == straight[3:]


def test_ctrl_c_during_an_evaluation_keeps_that_steps_line_in_the_log(tmp_path):
    """The evaluation after step 2 is abandoned, but step 2 was taken and is saved: its line in
    metrics.jsonl must be there too (a resume starts at step 3 and would never log step 2)."""
    import dataclasses

    import cli.common
    import cli.loop

    trainer = make_trainer()
    trainer.config = dataclasses.replace(trainer.config, eval_every=2)

    def pressed_in_the_evaluation():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the signal handler interrupts this
        raise AssertionError("Ctrl-C did not interrupt the evaluation")

    trainer.evaluate = pressed_in_the_evaluation
    interrupted_train_loop(trainer, tmp_path)
    assert [p.name for p in cli.common.run_checkpoints(tmp_path)] == ["step-0000002"]
    logged = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged] == [1, 2] and "validation" not in logged[1]


# ----- a full disk -------------------------------------------------------------------------------
def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _fill_disk(monkeypatch, where: str) -> None:
    """Make one step of save_checkpoint fail with ENOSPC, as a full disk would."""
    if where == "model.safetensors":
        def half_written(state, filename, *args, **kwargs):
            Path(filename).write_bytes(b"\0" * 100)  # what fit before the disk filled up
            _enospc()

        monkeypatch.setattr(shards, "save_file", half_written)
    elif where == "config.json":
        original = Path.write_text
        monkeypatch.setattr(Path, "write_text",
                            lambda self, *a, **k: _enospc() if self.name == "config.json" else original(self, *a, **k))
    elif where == "tokenizer.json":
        monkeypatch.setattr(Tokenizer, "save", _enospc)
    elif where == "trainer.pt":
        monkeypatch.setattr(trainer_state.torch, "save", _enospc)
    elif where == "fsync":
        monkeypatch.setattr(os, "fsync", _enospc)
    elif where == "rename":
        original_rename = os.rename
        monkeypatch.setattr(os, "rename", lambda src, dst: _enospc() if ".saving-" in str(src)
                            else original_rename(src, dst))


@pytest.mark.parametrize("where", ["model.safetensors", "config.json", "tokenizer.json", "trainer.pt", "fsync",
                                   "rename"])
def test_disk_full_while_saving_keeps_the_previous_checkpoint(tmp_path, monkeypatch, where):
    path = tmp_path / "ckpt"
    trainer = make_trainer()
    trainer.step()
    trainer.save(path)
    before = digest(trainer.model)
    trainer.step()
    with monkeypatch.context() as m:
        _fill_disk(m, where)
        with pytest.raises(OSError, match=r"saving checkpoint .*ckpt failed \(No space left on device\); "
                                          r"the previous checkpoint there, if any, is unchanged") as caught:
            trainer.save(path)
    assert caught.value.errno == errno.ENOSPC
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]  # no hidden half-written copy left
    bundle, state = load(path)
    assert bundle.info["step"] == 1 and state["step"] == 1 and digest(bundle.model) == before
    trainer.save(path)  # space again: the next save works
    assert load(path)[0].info["step"] == 2


def test_disk_full_reaches_the_train_tab_as_a_message(tmp_path, monkeypatch):
    from studio.server.registry import ModelRegistry
    from studio.train import job as training
    from studio.train import setup as run_setup
    from studio.train import tab

    monkeypatch.setattr(run_setup, "EVAL_SENTENCES", 5)
    job = training.TrainingJob(ModelRegistry(None), tmp_path / "checkpoints")
    job.start(training.Settings(max_steps=2, max_tokens=256, warmup=10, eval_every=100, attention_every=5))
    assert job.wait(120)
    monkeypatch.setattr(shards, "save_file", _enospc)
    shown, picker, download = tab.save(job, "full", None)
    assert shown.startswith("**Not saved:**") and "previous checkpoint" in shown and not download.visible
    assert "No space left on device" in shown
    assert list((tmp_path / "checkpoints").iterdir()) == []
    assert not any(str(choice[0]).startswith("full-") for choice in picker.choices)  # nothing half-saved offered


# ----- a crash while replacing an interrupted save ----------------------------------------------
class Crash(BaseException):
    """Stands for the process dying at that line (not an OSError: no clean-up handler runs)."""


def test_a_crash_while_replacing_an_interrupted_save_keeps_the_previous_copy(tmp_path, monkeypatch):
    path = tmp_path / "ckpt"
    trainer = make_trainer()
    trainer.step()
    trainer.save(path)
    before = digest(trainer.model)
    os.rename(path, tmp_path / ".ckpt.previous")  # an earlier save died between its two renames
    trainer.step()
    original_rename = os.rename

    def die_on_the_final_rename(src, dst):
        if ".saving-" in str(src):
            raise Crash()
        original_rename(src, dst)

    monkeypatch.setattr(os, "rename", die_on_the_final_rename)
    with pytest.raises(Crash):
        trainer.save(path)
    monkeypatch.undo()
    with pytest.warns(UserWarning, match="interrupted save"):
        bundle = load_checkpoint(path)  # the only complete copy was not deleted first
    assert bundle.info["step"] == 1 and digest(bundle.model) == before


def test_hidden_copies_of_dead_saves_are_cleaned_up(tmp_path):
    path = tmp_path / "ckpt"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".ckpt.saving-{int(dead.stdout)}"
    live = tmp_path / f".ckpt.saving-{os.getppid()}"  # a process still running: maybe saving now
    for folder in (stale, live):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"\0" * 1000)
    trainer = make_trainer()
    trainer.save(path)
    assert not stale.exists() and live.exists()


def test_a_save_never_deletes_a_folder_that_is_not_a_checkpoint(tmp_path):
    runs = tmp_path / "runs"
    (runs / "step-1").mkdir(parents=True)
    (runs / "notes.txt").write_text("keep me")
    trainer = make_trainer()
    with pytest.raises(ValueError, match=r"runs: the folder holds other files \(notes.txt, step-1\)"):
        trainer.save(runs)
    assert (runs / "notes.txt").read_text() == "keep me" and (runs / "step-1").is_dir()
    with pytest.raises(ValueError, match="it is a file"):
        trainer.save(runs / "notes.txt")
    trainer.save(tmp_path / "ckpt")
    trainer.step()
    trainer.save(tmp_path / "ckpt")  # replacing a checkpoint with a newer one is what saving is for
    assert load_checkpoint(tmp_path / "ckpt").info["step"] == 1


if __name__ == "__main__":
    child(Path(sys.argv[1]), float(sys.argv[2]))
