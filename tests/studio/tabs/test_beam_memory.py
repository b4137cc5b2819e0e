"""Issue 67's /beam_run holding its whole search in the session (~3.2 GB each with beam 16, 200 extra tokens and
2,000 characters): a search stops once the steps it keeps for Back would hold more than the request budget's
memory, with a notice; the estimate is checked against the search's own tensors."""
from __future__ import annotations

from studio.server import limits
from studio.tabs import beam
from tests.helpers.studio import SENTENCES

RUN = dict(name="studio-tiny", text=SENTENCES[0], beam_size=16, alpha=0.6, penalty="gnmt", max_extra=200)


def _act(action, registry, search=None):
    return beam.act(action, registry, search, *RUN.values())


def test_a_search_stops_within_the_budgets_memory(registry, monkeypatch, toasts):
    whole = _act("run", registry)
    assert whole.view.done
    config, source = whole.stepper.model.config, len(whole.stepper.source.ids)
    steps = len(whole.views) - 1
    budget_mb = limits.beam_search_megabytes(config, 16, source, steps // 2)
    monkeypatch.setenv("STUDIO_REQUEST_MEMORY_MB", str(budget_mb))
    cut = _act("run", registry)
    assert not cut.view.done and len(cut.views) - 1 <= steps // 2 + 1
    assert limits.beam_search_megabytes(config, 16, source, len(cut.views) - 2) <= budget_mb
    assert toasts[-1].startswith(f"Stopped at step {len(cut.views) - 1}: the search holds ~")
    assert "(every step is kept for Back)" in toasts[-1] and toasts[-1].endswith(
        "A shorter sentence or a smaller beam goes further.")
    said = len(toasts)
    _act("step", registry, cut)  # Step says the same, and takes none
    assert len(toasts) == said + 1 and not cut.view.done


def test_the_estimate_bounds_the_tensors_a_search_keeps(registry):
    """Every kept step's decoder cache (keys and values) and every view's cross-attention, counted from the
    search's own tensors: within the estimate."""
    search = _act("run", registry)
    held = 0
    for state, view in search.stepper._history:
        if state is not None:
            for layer in state.cache.self_kv:
                held += sum(t.numel() * t.element_size() for t in layer or ())
        for hypothesis in view.live + view.finished:
            held += sum(a.numel() * a.element_size() for a in hypothesis.cross_attention or [])
    estimate = limits.beam_search_megabytes(search.stepper.model.config, 16, len(search.stepper.source.ids),
                                            len(search.views) - 1)
    assert 0 < held / 2**20 <= estimate
