"""The models whose decoding step is compiled and warm (``python -m studio --compiled``; core/inference/compiled.py),
warmed in the background before any request uses them. batching.py sends a sentence that arrives alone through
the compiled step of a model that is ready."""
from __future__ import annotations

import sys
import threading
import weakref
from typing import Any, Iterable

from core.inference.compiled import compiler_available
from core.inference.options import DecodeOptions
from core.inference.translation import translate_detailed

from .priority import PRIORITY


class CompiledModels:
    """The models whose decoding step is compiled and warm (`python -m studio --compiled`): a sentence that
    arrives alone is decoded through the compiled step (core/inference/compiled.py: ~1.3x on one sentence,
    bench/compiled_step.py), a group by the batched eager decoders (faster for several). A model is warmed in
    the background, on its example sentences (beam search and greedy), before any request uses it: nobody waits
    for a compile at the first click. A shape the examples did not compile (a long sentence) compiles at its
    first use (seconds); inductor keeps the graphs on disk, so a restart warms up quicker."""

    def __init__(self) -> None:
        self._ready: weakref.WeakSet = weakref.WeakSet()

    def warm(self, bundles: Iterable[Any]) -> threading.Thread | None:
        """Compile each bundle's steps in a background thread, which also reads them (a lazy iterable: models
        are loaded there, not before the page is served); None: no C++ compiler, the eager step stays."""
        if not compiler_available():
            return None
        thread = threading.Thread(target=self._warm, args=(bundles,), name="compile-decoder", daemon=True)
        thread.start()
        return thread

    def _warm(self, bundles: Iterable[Any]) -> None:
        for bundle in bundles:
            examples = list((getattr(bundle, "info", None) or {}).get("examples", []))[:3] or ["a"]
            try:
                for method in ("beam", "greedy"):
                    with PRIORITY.serving():  # as a request: the live training run waits
                        translate_detailed(bundle, examples, DecodeOptions(method=method, compiled=True))
            except Exception as exc:  # noqa: BLE001 (the eager step is the reference: the model stays with it)
                print(f"--compiled: {getattr(bundle, 'name', 'a model')} did not compile ({type(exc).__name__}: "
                      f"{exc}); it decodes eager", file=sys.stderr)
                continue
            self._ready.add(bundle.model)

    def ready(self, model: Any) -> bool:
        return model in self._ready


COMPILED = CompiledModels()
