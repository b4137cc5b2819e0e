"""bench/click_to_paint.py's arithmetic: the stages of one press add up from the marks both sides took."""
from __future__ import annotations

import pytest

from bench.click_to_paint import LONG_TASKS, stages


def test_stages_of_one_press_from_its_marks():
    t = 1_000.0  # seconds since the epoch, as the server marks; the page's marks are in milliseconds
    server = [("callback start", t + 0.100), ("decode start", t + 0.101), ("decode end", t + 0.141),
              ("figure start", t + 0.142), ("figure end", t + 0.152), ("callback end", t + 0.153),
              ("postprocess start", t + 0.154), ("postprocess end", t + 0.156)]
    page = {"press": t * 1000, "text": (t + 0.300) * 1000, "plot": (t + 0.350) * 1000,
            "tasks": [[(t + 0.050) * 1000, 60.0], [(t + 0.200) * 1000, 70.0]]}
    times = stages({"server": server, "page": page, "events": [("translate", t + 0.099, t + 0.160)]})
    assert times["the press -> the translate callback starts"] == pytest.approx(100)
    assert times["decoding"] == pytest.approx(40)
    assert times["the probability figure"] == pytest.approx(10)
    assert times["the rest of the callback"] == pytest.approx(53 - 40 - 10)
    assert times["Gradio's postprocessing"] == pytest.approx(2)
    assert times["Gradio after the callback (postprocessing included)"] == pytest.approx(7)
    assert times["-> the translation text shows"] == pytest.approx(140)
    assert times[LONG_TASKS] == pytest.approx(70)  # only the task after the answer left the server
    assert times["-> the plot is painted"] == pytest.approx(50)
    assert times["the press -> the plot"] == pytest.approx(350)
