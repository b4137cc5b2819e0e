"""Forgetting sessions: Gradio keeps each session's state (a copy of every component's configuration, ~450
KB for this page, plus every value shown: figures, tables, bertviz's pages) for up to 10,000 sessions, and a
script's session (gradio_client, the REST API) is never closed, so 330 API sessions grew the studio from 1.64
to 2.07 GB. Here a session is forgotten once its page has been closed for CLOSED_S, once a page has been idle
for PAGE_IDLE_S, or once a script's session (one that never loaded the page) has been idle for API_IDLE_S. A page
whose states all still hold their first values (it was loaded, nothing more: a probe, a visitor who left without
the page telling) has nothing to keep and goes after API_IDLE_S too: its next event would start it afresh the
same. With a session go Gradio's per-session messages and caches (Queue.pending_messages_per_session keeps up to
2,000 sessions' undelivered answers, plots and pages included).

A session also begins lighter (issue 64): Gradio's SessionState copies every block's configuration when it is made,
57 ms and 680 KB for this page's 456 blocks, so a REST call without a session_hash (each its own new session, as
Gradio's curl examples make it) cost 89 ms of server CPU against 33 ms with one. Gradio reads that copy only to save a
gr.DeepLinkButton's snapshot; LightSession makes each block's copy when it is first asked for.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import datetime
import gc
import threading
import time
from typing import Any, Iterator

import gradio as gr
import gradio.state_holder
from gradio.state_holder import SessionState

CLOSED_S = 60  # a closed (or reloaded) page's session: Gradio's own wait is an hour
PAGE_IDLE_S = 30 * 60  # an open page, untouched through a long explanation, keeps its translation and search
API_IDLE_S = 120  # a script's session: forgotten a few minutes after its last call
SWEEP_EVERY_S = 15.0


class LightSession(SessionState):
    """Gradio's SessionState less its up-front copy of every block's configuration: a block's copy is made when an
    event first updates it (as before) or when the whole page is asked for (`components`: Gradio's deep-link
    snapshot), from the session's blocks as they are then, which is what the up-front copy would hold by then."""

    def __init__(self, blocks: gr.Blocks):
        super().__init__(_Unlisted(blocks))  # the same session, the comprehension over no blocks
        self._page_blocks = blocks.blocks

    @property
    def components(self) -> Iterator[dict]:
        for key, block in self.blocks_config.blocks.items():
            if key in self._page_blocks and key not in self.config_values:
                self.config_values[key] = self.blocks_config.config_for_block(key, [], block)
        return super().components


class _Unlisted:
    """The Blocks as SessionState's constructor reads it, with no blocks listed to copy the configuration of."""

    def __init__(self, blocks: gr.Blocks):
        self.default_config, self.blocks = blocks.default_config, {}


def light_sessions() -> None:
    """Every session Gradio makes from now on in this process is a LightSession (Gradio's StateHolder makes them by
    this module-level name)."""
    gradio.state_holder.SessionState = LightSession


class Forgetter:
    """Built inside the Blocks (it listens to page loads to tell pages from scripts); start() sweeps, every
    SWEEP_EVERY_S, the sessions of the launched app."""

    def __init__(self, demo: gr.Blocks):
        self.demo = demo
        self.pages: set[str] = set()  # sessions that loaded the page (a browser tab)
        demo.load(self.page_opened, show_progress="hidden", api_visibility="private")

    def page_opened(self, request: gr.Request) -> None:
        if request is not None and request.session_hash:
            self.pages.add(request.session_hash)

    def start(self) -> threading.Thread:
        def sweep_forever() -> None:
            while True:
                time.sleep(SWEEP_EVERY_S)
                self.sweep()
        thread = threading.Thread(target=sweep_forever, name="studio-forget-sessions", daemon=True)
        thread.start()
        return thread

    def sweep(self, now: datetime.datetime | None = None) -> int:
        """Forget every session past its time (State delete callbacks run); returns how many were."""
        holder = getattr(self.demo, "state_holder", None)
        if holder is None:  # not launched yet
            return 0
        now = now or datetime.datetime.now()
        reloaded = self._written_on_load()
        with holder.lock:
            stale = [session for session, state in holder.session_data.items()
                     if self._idle_past_limit(session, state, holder.time_last_used.get(session), now, reloaded)]
        for session in stale:
            holder.delete_state(session)
            with holder.lock:
                holder.session_data.pop(session, None)
                holder.time_last_used.pop(session, None)
            self.pages.discard(session)
            forget_gradio_leftovers(self.demo, session)
        if stale:
            give_back_memory()
        return len(stale)

    def _written_on_load(self) -> set[int]:
        """The ids of the States that the page's load events write."""
        return {block._id for fn in self.demo.fns.values() if any(event == "load" for _, event in fn.targets)
                for block in fn.outputs if isinstance(block, gr.State)}

    def _idle_past_limit(self, session: str, state: Any, last_used: datetime.datetime | None,
                         now: datetime.datetime, reloaded: set[int]) -> bool:
        idle = (now - last_used).total_seconds() if last_used else float("inf")
        kept_open = session in self.pages and not untouched(state, reloaded)
        limit = CLOSED_S if state.is_closed else PAGE_IDLE_S if kept_open else API_IDLE_S
        return idle > limit


def untouched(state: Any, ignored: set[int] = frozenset()) -> bool:
    """Whether every State of a session (Gradio's SessionState) an event has set, but those whose ids are ignored,
    still equals its first value."""
    return all(_same(value, component.value) for component, value, _ in state.state_components
               if component._id not in ignored)


def _same(value: object, first: object) -> bool:
    try:
        return value is first or bool(value == first)
    except Exception:  # an array, or a value that cannot tell: kept as changed
        return False


def forget_gradio_leftovers(demo: gr.Blocks, session: str) -> None:
    """Gradio's own per-session records of a forgotten session: its undelivered messages (answers whose client
    never read them), its finished events' ids and its cached values."""
    queue = getattr(demo, "_queue", None)
    waiting = [e for q in getattr(queue, "event_queue_per_concurrency_id", {}).values() for e in q.queue]
    running = [e for jobs in getattr(queue, "active_jobs", ()) for e in jobs or ()]
    if queue is not None and not any(e.session_hash == session for e in waiting + running):  # its answers to come
        queue.pending_messages_per_session.pop(session, None)
        queue.pending_event_ids_session.pop(session, None)
    from gradio import caching

    caching.clear_session_caches(session)


M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)
MALLOC_ARENAS = 2


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """At most `arenas` glibc malloc arenas (what MALLOC_ARENA_MAX sets), for the threads made afterwards. Gradio
    serves each request on a worker thread, and glibc gives threads arenas of their own (up to 8 per core): a
    forgotten session's freed memory, spread over them, stayed with the process (0.41 MB a session with the
    default, 0.12 MB with 2 arenas, measured side by side by bench/abuse.py). Whether it was set (glibc only)."""
    name = ctypes.util.find_library("c")
    mallopt = getattr(ctypes.CDLL(name), "mallopt", None) if name else None
    return bool(mallopt is not None and mallopt(M_ARENA_MAX, arenas) == 1)


def give_back_memory() -> None:
    """Return the freed sessions' memory to the system: glibc's malloc keeps freed blocks for reuse, so without
    malloc_trim the process's RSS never falls after a wave of sessions goes (it is only reused by the next)."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if name is None:  # not a C library ctypes can find (e.g. Windows): nothing to trim
        return
    trim = getattr(ctypes.CDLL(name), "malloc_trim", None)  # glibc only (musl and macOS have none)
    if trim is not None:
        trim(0)
