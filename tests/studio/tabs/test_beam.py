"""The Beam search tab's callbacks: Step / Back / Run to end / Reset on a per-session search,
equivalence with one-shot beam search (the Translate tab), bad input, the tree and table."""
from __future__ import annotations

import copy
import threading

import gradio as gr
import pytest
import torch

from core.inference.options import DecodeOptions
from core.inference.translation import translate_detailed
from studio import plots
from studio.numbers import beam_tree
from studio.server import limits
from studio.tabs import beam
from tests.helpers.studio import SENTENCES, studio_bundle, studio_registry

SETTINGS = dict(name="studio-tiny", text=SENTENCES[0], beam_size=3, alpha=0.6, penalty="gnmt", max_extra=6)




@pytest.fixture(scope="module")
def registry():
    return studio_registry()


def act(registry, action, search, **changes):
    s = {**SETTINGS, **changes}
    return beam.act(action, registry, search, s["name"], s["text"], s["beam_size"], s["alpha"], s["penalty"],
                    s["max_extra"])


def test_run_to_end_equals_one_shot_beam_search(registry):
    search = act(registry, "run", None)
    options = DecodeOptions(method="beam", beam_size=3, alpha=0.6, max_len_b=6, n_best=3)
    expected = translate_detailed(studio_bundle(), [SENTENCES[0]], options)[0]
    best = search.view.finished[0]
    assert search.view.done and best.score == pytest.approx(expected.score, abs=1e-5)
    assert studio_bundle().tokenizer.decode(best.ids[:-1]) == expected.text
    mine, theirs, verdict = beam.comparison(registry, search)
    assert "Same result" in verdict and mine.split("  (")[0] == theirs.split("  (")[0] == expected.text


def test_step_back_and_reset_retrace_the_same_views(registry):
    search = act(registry, "step", None)  # starts with these settings, then steps
    assert search.view.step == 1 and len(search.views) == 2
    first = search.view
    search = act(registry, "step", search)
    assert search.view.step == 2
    search = act(registry, "back", search)
    assert search.view == first and search.stepper.view == first
    search = act(registry, "step", search)
    stepped = search.view
    again = act(registry, "step", act(registry, "reset", search))
    assert again.view == first and stepped.step == 2
    changed = act(registry, "step", search, beam_size=2)  # new settings: a fresh search
    assert changed is not search and changed.view.step == 1


def test_bad_input_is_clamped_or_refused_with_notices(registry, capsys):
    with pytest.raises(beam.Refused, match="Type a source"):
        act(registry, "step", None, text="  ")
    search, *page = beam.act_and_render("step", registry, None, None, None, "  ", 4, 0.6, "gnmt", 50)
    assert search is None and "Type a source sentence first" in page[-1]  # on the page, not in a toast
    search = act(registry, "reset", None, beam_size=40)
    assert search.stepper.options.beam_size == 16 and "beam size 40 is above the maximum 16; using 16" in search.notices
    search = act(registry, "reset", None, beam_size=0)
    assert search.stepper.options.beam_size == 1 and "below the minimum 1; using 1" in search.notices[0]
    assert limits.clamp_beam(None) == (4, "beam size was empty; using the default 4")  # a cleared box, not "None"
    assert limits.clamp_beam("x") == (4, "beam size 'x' is not a number; using the default 4")
    assert limits.clamp_beam(2.5) == (2, "beam size must be a whole number; 2.5 → 2")
    assert limits.clamp_beam(float("inf"))[0] == 16 and limits.clamp_beam(3.0) == (3, None)
    done = act(registry, "run", None)
    views = len(done.views)
    act(registry, "step", done)  # Step past the end: a notice, nothing changes
    assert "finished" in capsys.readouterr().out and len(done.views) == views
    start = act(registry, "reset", None)
    act(registry, "back", start)
    assert "Already at the start" in capsys.readouterr().out
    shown = act(registry, "step", act(registry, "step", start))
    walked = act(registry, "back", shown, beam_size=2)  # Back after changed settings: walks the search shown
    assert walked is shown and walked.view.step == 1 and walked.stepper.options.beam_size == 3
    with pytest.raises(beam.Refused, match="Cannot search: .*no model"):
        act(registry, "reset", None, name="gone")


def test_the_box_shows_the_beam_size_used_and_notices_stay_on_the_page(registry):
    for typed, used, said in ((99, 16, "beam size 99 is above the maximum 16; using 16"),
                              (None, 4, "beam size was empty; using the default 4"),
                              (2.5, 2, "beam size must be a whole number; 2.5 → 2")):
        search = act(registry, "step", None, beam_size=typed)
        *_, box, notices = beam.render(registry, search)
        assert box.value == used and search.stepper.options.beam_size == used and said in notices.replace("\\", "")
        assert act(registry, "step", search, beam_size=used) is search  # the box's new value: the same search
    search = act(registry, "step", None, text="Hund " * 1000, beam_size=0)  # notices on the page, no toast
    notices = beam.render(registry, search)[-1]
    assert "truncated" in notices and "below the minimum" in notices
    box, notices = beam.render(registry, act(registry, "step", None))[-2:]
    assert box.value == 3 and notices == ""  # the settings' beam size, as typed: nothing to say
    again = act(registry, "step", search, text="Hund " * 1000, beam_size=-1)  # -1 means 1 too: the same search
    notices = beam.render(registry, again)[-1].replace("\\", "")
    assert again is search and "beam size -1 is below the minimum 1" in notices and "beam size 0" not in notices


def test_render_draws_tree_table_attention_and_button_states(registry):
    blank = beam.render(registry, None)
    assert blank[9].interactive is False and blank[2].choices == []
    search = act(registry, "step", act(registry, "step", None))
    tree, table, choice, attention, explanation, mine, theirs, verdict, step, back, run, box, notices = beam.render(
        registry, search)
    rows = [line for line in table.splitlines() if line.startswith("| ")][2:]  # under the header and alignment
    nodes = beam_tree.tree_nodes(search.views)
    assert len(nodes) == 1 + sum(len(v.candidates) for v in search.views)
    statuses = {trace.name for trace in tree.data if trace.name}
    assert {"start", "kept (live)", "pruned"} <= statuses
    assert len(rows) == len(search.view.live) + len(search.view.finished) and rows[0].startswith("| live 1 | ")
    assert choice.value == "live 1" and "Step 2" in explanation
    c = studio_bundle().model.config
    assert attention.data[0].z.shape == (1 + c.decoder_layers * c.n_heads, len(search.stepper.source_tokens))
    assert step.interactive and back.interactive and run.interactive and "Run the search" in verdict
    done = act(registry, "run", search)
    shown = beam.render(registry, done)
    assert shown[8].interactive is False and shown[10].interactive is False  # Step and Run to end
    finished = beam.attention_figure(done, "finished 1")
    assert "<eos>" in finished.layout.title.text or "&lt;eos&gt;" in finished.layout.title.text


def test_tree_layout_keeps_words_apart_and_chains_straight(registry):
    """Every written word (kept, finished, the start) has a row of its own in its step's column; a
    hypothesis sits on its best kept child's line; pruned children lie just below their parent."""
    nodes = beam_tree.tree_nodes(act(registry, "run", None, beam_size=5).views)
    by_key = {n["key"]: n for n in nodes}
    for step in {n["step"] for n in nodes}:
        rows = sorted(n["y"] for n in nodes if n["step"] == step and n["status"] != "pruned")
        assert all(b - a >= 1 for a, b in zip(rows, rows[1:])), (step, rows)
    for n in nodes:
        kids = [k for k in nodes if k["key"][:-1] == n["key"] and len(k["key"]) == len(n["key"]) + 1]
        kept = [k for k in kids if k["status"] != "pruned"]
        if kept:
            assert n["y"] == max(kept, key=lambda k: k["logprob"])["y"]
        for k in kids:
            if k["status"] == "pruned":
                assert n["y"] < k["y"] <= n["y"] + beam_tree.PRUNED_FAN < n["y"] + 0.3  # clear of the next row's word
            assert k["parent_y"] == by_key[n["key"]]["y"]


def test_once_done_the_tree_marks_the_results_path_instead_of_the_last_step(registry):
    def band(search):
        tree = beam.render(registry, search)[0]
        return next((t for t in tree.data if t.name == "best translation"), None), tree

    stepped = act(registry, "step", None)
    assert band(stepped)[0] is None and "shaded: this step" in band(stepped)[1].layout.title.text
    done = act(registry, "run", None)
    path, tree = band(done)
    best = done.view.finished[0]
    by_key = {n["key"]: n for n in beam_tree.tree_nodes(done.views)}
    on_path = [by_key[tuple(best.ids[:i])] for i in range(len(best.ids) + 1)]  # the root, then each token
    assert list(path.x) == [n["step"] for n in on_path] and list(path.y) == [n["y"] for n in on_path]
    assert on_path[-1]["status"] == "finished" and "band: the result" in tree.layout.title.text
    assert not tree.layout.shapes  # no shaded last step pointing elsewhere


def test_word_start_marker_is_drawn_as_a_visible_space():
    """The tokenizer's "▁" reads as "_" in most fonts: plot text shows a grey "␣" (escaped text
    around it), hover boxes and plain text a plain one; titles explain it only when it occurs."""
    assert plots.label("▁a<b>") == '<span style="color:#999">␣</span>a&lt;b&gt;'
    assert plots.hover_text("▁a<b>") == "␣a&lt;b&gt;" and plots.shown("▁a<b>") == "␣a<b>"
    assert plots.word_start_note(["<bos>", "▁Ein", "e"]) and not plots.word_start_note(["<bos>", "ein"])
    nodes = [{"key": (), "step": 0, "y": 0.0, "parent_y": None, "token": "<bos>", "status": "root",
              "token_logprob": 0.0, "logprob": 0.0, "score": 0.0},
             {"key": (5,), "step": 1, "y": 0.0, "parent_y": 0.0, "token": "▁dog", "status": "live",
              "token_logprob": -0.1, "logprob": -0.1, "score": -0.1},
             {"key": (6,), "step": 1, "y": 0.6, "parent_y": 0.0, "token": "cat", "status": "pruned",
              "token_logprob": -2.0, "logprob": -2.0, "score": -2.0}]
    tree = plots.beam_tree(nodes, 1)
    assert "␣ starts a word" in tree.layout.title.text
    assert "starts a word" not in plots.beam_tree([{**n, "token": "dog"} if n["key"] else n for n in nodes], 1
                                                  ).layout.title.text
    low, high = sorted(tree.layout.yaxis.range)
    assert low < 0 - 0.5 and high > 0.6  # room above the top word and below the last pruned mark
    named = [t for t in tree.data if t.name]
    assert [t.name for t in sorted(named, key=lambda t: t.legendrank)] == ["start", "kept (live)", "pruned"]
    assert named[0].name == "pruned"  # drawn first, under the words
    # On a phone a step is narrower than a word: words alternate above and below, rows further apart.
    phone = tree.layout.meta["narrow"]
    worded = [i for i, t in enumerate(tree.data) if t.mode == "markers+text"]
    assert worded and phone["height"] == int(1.5 * tree.layout.height)
    for i in worded:
        assert phone[f"data[{i}].textposition"] == ["top center" if step % 2 == 0 else "bottom center"
                                                    for step in tree.data[i].x]
        assert phone[f"data[{i}].textfont.size"] < tree.data[i].textfont.size
    # ...and an odd step's pruned marks fan out above their parent's row, clear of that step's word below it.
    marks = next(i for i, t in enumerate(tree.data) if t.name == "pruned")
    edges = next(i for i, t in enumerate(tree.data) if t.mode == "lines" and t.line.dash == "dot")
    assert list(tree.data[marks].y) == [0.6] and phone[f"data[{marks}].y"] == [-0.6]
    assert phone[f"data[{edges}].y"] == [0.0, -0.6, None]
    # A long search crowds a wide screen too: its words alternate there, rows further apart, as on a phone
    # (the phone's rows no further still).
    def chain(steps: int) -> list[dict]:
        return [{**nodes[0]}] + [{**nodes[1], "key": tuple(range(s)), "step": s} for s in range(1, steps + 1)]
    short, long = plots.beam_tree(chain(plots.CROWDED_STEPS - 1), 1), plots.beam_tree(chain(plots.CROWDED_STEPS), 1)
    worded = next(t for t in long.data if t.mode == "markers+text" and len(t.x) > 1)
    assert list(worded.textposition) == ["top center" if step % 2 == 0 else "bottom center" for step in worded.x]
    assert next(t for t in short.data if t.mode == "markers+text" and len(t.x) > 1).textposition == "top center"
    assert long.layout.height == int(1.5 * short.layout.height) == long.layout.meta["narrow"]["height"]


def test_example_picker_offers_the_models_sentences(registry):
    picker = beam.example_choices(registry, "studio-tiny")
    assert [choice[0] for choice in picker.choices] == SENTENCES and picker.visible
    assert beam.example_choices(registry, "no-such-model").visible is False


def test_an_empty_sentence_box_takes_the_translate_tabs_sentence():
    translated = beam.Current("studio-tiny", SENTENCES[1])
    assert beam.carry_over(translated, "") == SENTENCES[1] and beam.carry_over(translated, "  ") == SENTENCES[1]
    assert beam.carry_over(translated, "typed here") == gr.skip()  # never over the user's own sentence
    assert beam.carry_over(beam.Current(), "") == gr.skip() and beam.carry_over(None, None) == gr.skip()


def settings_changed(registry, search, **changes):
    return beam.settings_changed(registry, search, *{**SETTINGS, **changes}.values())


def test_changed_settings_mark_the_shown_search_as_the_previous_one(registry):
    step, run, *shown = settings_changed(registry, None)  # nothing searched yet: nothing to mark
    assert step.interactive and run.interactive and shown == [gr.skip()] * 4
    done = act(registry, "run", None)
    step, run, note, verdict, mine, theirs = settings_changed(registry, done, alpha=1.0)
    assert step.interactive and run.interactive and "Settings changed" in note and verdict == mine == theirs == ""
    # Back to the search's own settings (another model picked, then this one again): it stands as it was.
    step, run, note, verdict, mine, theirs = settings_changed(registry, done)
    assert not step.interactive and not run.interactive and "Settings changed" not in note
    assert (mine, theirs, verdict) == beam.comparison(registry, done) and verdict
    assert beam.comparison(registry, done) is beam.comparison(registry, done)  # the Translate side decoded once
    # Another model picked: the note names the model the shown search was made with.
    registry.add("other", studio_bundle())
    note = settings_changed(registry, done, name="other")[2]
    assert "Another model picked" in note and "made with **studio\\-tiny**" in note


def test_back_after_changed_settings_still_says_they_changed(registry):
    search = act(registry, "step", act(registry, "step", act(registry, "reset", None)))
    changed = {**SETTINGS, "alpha": 1.0}
    act(registry, "back", search, alpha=1.0)
    *_, explanation, mine, theirs, verdict, step, back, run, box, _ = beam.render(registry, search, None,
                                                                                 *changed.values())
    assert search.view.step == 1 and "Settings changed" in explanation and "Back still walks" in explanation
    assert step.interactive and run.interactive and back.interactive and box == gr.skip()  # the typed size stays
    *_, explanation, mine, theirs, verdict, step, back, run, box, _ = beam.render(registry, search, None,
                                                                                 *SETTINGS.values())
    assert "Settings changed" not in explanation and box.value == 3
    fresh = act(registry, "step", search, alpha=1.0)  # Step then starts the new search
    assert fresh is not search and fresh.view.step == 1 and fresh.stepper.options.alpha == 1.0


def test_comparison_uses_the_weights_searched_while_a_model_trains_on(registry):
    """A model training live publishes new weights under its name: the search keeps those it started
    with, and so does the comparison, which says the model has moved on."""
    registry.add("live", studio_bundle())
    search = act(registry, "run", None, name="live")
    newer = copy.deepcopy(studio_bundle())  # studio_bundle() is shared: never change its weights
    noise = torch.Generator().manual_seed(0)
    for p in newer.model.parameters():
        p.data.add_(0.05 * torch.randn(p.shape, generator=noise))
    newer.info["step"] = 99
    registry.add("live", newer, same_model=True)
    mine, theirs, verdict = beam.comparison(registry, search)
    assert "Same result" in verdict and "step 99" not in verdict and "trained on since" in verdict


def test_steps_and_backs_at_once_keep_the_views_in_step_with_the_search(registry):
    """Step and Back are separate events, two of which may run at once: interleaved, views stopped
    following the stepper's history, and the tree drawn from them read the wrong parents."""
    search = act(registry, "step", None)
    errors = []

    def press(action):
        try:
            for _ in range(40):
                act(registry, action, search)
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=press, args=(action,)) for action in ("step", "back", "step", "back")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and search.views[-1] is search.stepper.view
    assert all(a.step + 1 == b.step for a, b in zip(search.views, search.views[1:]))
