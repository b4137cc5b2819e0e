"""bertviz's views, offline (studio/plots/bertviz_offline.py): the libraries' licence notices kept, each view open
on the stack asked for, its selects named for screen readers."""
from __future__ import annotations

import html
import re

import torch

from studio.plots import bertviz_offline


def test_bertviz_page_keeps_licence_notices():
    page = bertviz_offline._libraries()
    assert "Mike Bostock" in page and "jquery.org/license" in page


def test_bertviz_views_open_on_the_stack_asked_for():
    maps = [torch.rand(1, 2, 3, 3)]
    for view in (bertviz_offline.head_view, bertviz_offline.model_view):
        page = html.unescape(view({"encoder": maps, "decoder": maps, "cross": maps}, list("abc"), list("xyz")))
        assert '"default_filter": "2"' in page  # bertviz's stacks: encoder 0, decoder 1, cross 2
        assert '<option value="2" selected>Cross</option>' in page
        page = html.unescape(view({"encoder": maps, "decoder": maps, "cross": maps}, list("abc"), list("xyz"),
                                  "decoder"))
        assert '"default_filter": "1"' in page and '<option value="1" selected>Decoder</option>' in page
        assert '"default_filter": "0"' in html.unescape(view({"encoder": maps}, list("abc"), list("xyz")))


def test_bertviz_selects_are_named_for_screen_readers():
    maps = [torch.rand(1, 2, 3, 3)]
    head = html.unescape(bertviz_offline.head_view({"encoder": maps, "cross": maps}, list("abc"), list("xyz")))
    assert '<select id="layer" aria-label="Layer">' in head
    for view in (bertviz_offline.head_view, bertviz_offline.model_view):
        page = html.unescape(view({"encoder": maps, "cross": maps}, list("abc"), list("xyz")))
        assert '<select id="filter" aria-label="Attention stack">' in page
        assert re.findall(r"<select id=\"(?![^>]*aria-label)[^>]*>", page) == []  # (jQuery's code holds bare ones)
