"""bertviz's head view and model view, offline and inert inside a sandboxed iframe.

bertviz's HTML loads require.js, d3 5 and jQuery from a CDN. Here the CDN tag is dropped,
d3 5.7.0 (from the mpld3 package, BSD-3-Clause) and jQuery (from xstatic-jquery, MIT) are
inlined with their licence headers, and bertviz's ``require([...], fn)`` call is served by a
three-line shim that hands fn the already-loaded libraries. The page goes into
``<iframe srcdoc>`` with ``sandbox="allow-scripts"`` (no same-origin access to the studio).
Token strings travel inside a <script> as JSON: "</" and "<!--" are written "<\\/" and
"<\\!--" there (the same string to JavaScript; bertviz's own code has neither), so a token
such as "</script>" stays text.
"""
from __future__ import annotations

import html
import re
from functools import lru_cache
from importlib import resources
from typing import Sequence

import torch

_CDN_TAG = re.compile(r"<script[^>]*src=\"https?://[^\"]*\"[^>]*>\s*</script>")
_CDN_CONFIG = re.compile(r"require\.config\(\{.*?\}\s*\}\);", re.S)  # the CDN paths; the shim needs none
# bertviz's page ends with its one inline script; greedy, so a "</script>" token inside is covered.
_SCRIPT = re.compile(r"(<script type=\"text/javascript\">)(.*)(</script>\s*)\Z", re.S)

REQUIRE_SHIM = """
// Stand-in for require.js: bertviz asks for ['jquery', 'd3'], already loaded as globals.
window.require = window.requirejs = function (deps, fn) {
  var libs = {jquery: window.jQuery, d3: window.d3};
  return fn.apply(null, deps.map(function (d) { return libs[d]; }));
};
window.require.config = function () {};
"""

# On a narrow screen (a phone) bertviz's drawing is wider than its frame: cut off at the frame's edge with no
# sign that it scrolls, the model view showed one head of four. Scaled down to the frame's width instead.
FIT_WIDTH = """
<script>
(function () {
  var fit = function () {
    document.body.style.zoom = 1;
    // The head view clips its own labels at its drawing's edge: let each drawing be as wide as what it draws.
    document.querySelectorAll('svg').forEach(function (svg) {
      var box = svg.getBBox(), need = Math.ceil(box.x + box.width) + 4;
      if (need > svg.clientWidth) { svg.style.width = need + 'px'; svg.style.overflow = 'visible'; }
    });
    var wide = document.documentElement.scrollWidth, room = window.innerWidth;
    if (wide <= room + 4) return;
    document.body.style.zoom = room / wide;
    // Scaled down, the drawing leaves the frame's lower part blank: the page (static/bertviz_height.js) shrinks it.
    // (The body's box: the document's own height is never less than the frame's.)
    parent.postMessage({bertvizHeight: document.body.getBoundingClientRect().height + 20}, '*');
  };
  window.addEventListener('load', fit);
  window.addEventListener('resize', fit);
  document.addEventListener('change', function () { setTimeout(fit, 0); });  // another layer or stack drawn
})();
</script>
"""
MAX_FRAME_HEIGHT = 8000  # px; beyond, the frame scrolls
D3_NOTICE = "// d3 v5.7.0, BSD-3-Clause licence, Copyright 2010-2018 Mike Bostock; shipped in the mpld3 package.\n"


@lru_cache(maxsize=1)
def _libraries() -> str:
    d3 = resources.files("mpld3").joinpath("js/d3.v5.min.js").read_text(encoding="utf-8")
    jquery = resources.files("xstatic.pkg.jquery").joinpath("data/jquery.min.js").read_text(encoding="utf-8")
    return "".join(f"<script>\n{js}\n</script>\n" for js in (D3_NOTICE + d3, jquery, REQUIRE_SHIM))


def _inert_script(match: re.Match) -> str:
    """Keep the HTML parser inside bertviz's script whatever its JSON strings hold."""
    return match.group(1) + match.group(2).replace("</", "<\\/").replace("<!--", "<\\!--") + match.group(3)


# bertviz's selects stand beside plain text ("Layer:"), not in labels: a screen reader named neither.
_SELECT_NAMES = {'<select id="layer">': '<select id="layer" aria-label="Layer">',
                 '<select id="filter">': '<select id="filter" aria-label="Attention stack">'}


def _page(view_html: str) -> str:
    for select, named in _SELECT_NAMES.items():
        view_html = view_html.replace(select, named, 1)
    body, found = _SCRIPT.subn(_inert_script, _CDN_CONFIG.sub("", _CDN_TAG.sub("", view_html), count=1))
    if not found:
        raise RuntimeError("bertviz's HTML changed shape: no trailing inline script found")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'>" + _libraries() +
            "<style>body{margin:8px;background:#fff;color:#111}</style></head><body>" + body + FIT_WIDTH +
            "</body></html>")


FRAME_TITLES = {"head": "bertviz head view: each token's attention to the other tokens, one colour per head",
                "model": "bertviz model view: the attention of every layer and head, as thumbnails"}


def iframe(page: str, height: int, view: str) -> str:
    """The page in a sandboxed frame; its title names the view to a screen reader."""
    return (f'<iframe class="bertviz" sandbox="allow-scripts" data-view="{view}" title="{FRAME_TITLES[view]}" '
            f'style="width:100%;height:{height}px;'
            f'border:1px solid #ccc;border-radius:6px;background:#fff" srcdoc="{html.escape(page, quote=True)}">'
            "</iframe>")


def _stacks(attention: dict[str, Sequence[torch.Tensor]]) -> dict[str, tuple[torch.Tensor, ...]]:
    """bertviz's keyword arguments. Weights rounded to 3 decimals, in float64 so that each prints
    as written: bertviz writes every weight into its page, and float32's 0.12300000339746475 made a
    255-token sentence's page 39 MB."""
    return {f"{k}_attention": tuple(torch.as_tensor(a).double().round(decimals=3) for a in v)
            for k, v in attention.items()}


def head_view(attention: dict[str, Sequence[torch.Tensor]], source: list[str], target: list[str],
              stack: str = "cross") -> str:
    """attention: "encoder"/"decoder"/"cross" -> per layer (1, h, q, k). An <iframe> element that
    opens on `stack` (where present)."""
    from bertviz import head_view as bv_head_view  # imports IPython: keep it off the start-up path
    view = bv_head_view(**_stacks(attention), encoder_tokens=list(source), decoder_tokens=list(target),
                        html_action="return")
    rows = max(len(source), len(target))
    return iframe(_page(_open_on(view.data, attention, stack)), height=min(1400, 140 + 26 * rows), view="head")


def model_view(attention: dict[str, Sequence[torch.Tensor]], source: list[str], target: list[str],
               stack: str = "cross") -> str:
    from bertviz import model_view as bv_model_view
    view = bv_model_view(**_stacks(attention), encoder_tokens=list(source), decoder_tokens=list(target),
                         html_action="return", display_mode="light")
    rows = max(len(source), len(target))
    return iframe(_page(_open_on(view.data, attention, stack)), height=model_view_height(attention, rows), view="model")


def _open_on(view_html: str, attention: dict[str, Sequence[torch.Tensor]], stack: str) -> str:
    """bertviz opens on its first stack, the encoder; the studio opens it on the stack its own plots
    show. Its stacks come in the order encoder, decoder, cross; default_filter is the one drawn
    first, and its stack selector has to show that one too."""
    present = [name for name in ("encoder", "decoder", "cross") if name in attention]
    if stack not in present:
        return view_html
    index, name = present.index(stack), stack.capitalize()  # bertviz's names: Encoder, Decoder, Cross
    return (view_html.replace('"default_filter": "0"', f'"default_filter": "{index}"', 1)
            .replace(f'<option value="{index}">{name}</option>',
                     f'<option value="{index}" selected>{name}</option>', 1))


def model_view_height(attention: dict[str, Sequence[torch.Tensor]], rows: int) -> int:
    """The model view's height in pixels, by bertviz's model_view.js: a layer's thumbnails are
    rows * 7 * 12 / heads + 10 px high, plus a 38 px axis, or the detail view's rows * 18 + 55 px
    if taller; about 90 px more for the stack selector and margins. Every layer shows, without a
    scrollbar inside the frame (capped: a 6-layer model on 255 tokens would be 40,000 px)."""
    first = next(iter(attention.values()))
    n_layers, heads = max(len(v) for v in attention.values()), torch.as_tensor(first[0]).shape[1]
    content = max(n_layers * (rows * 7 * 12 / heads + 10) + 38, rows * 18 + 55)
    return int(min(MAX_FRAME_HEIGHT, 90 + content))
