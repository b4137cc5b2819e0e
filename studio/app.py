"""Transformer Studio's page: model picker, status line, presenter switch, one tab per topic.

The page's tabs are built by studio/tabs/, what they share by studio/shell.py; this module lays
them out, wires the picker, and serves the page from the command line:

    python -m studio [--host 127.0.0.1] [--port 7860] [--checkpoint PATH] [--checkpoints-dir DIR]
                     [--share] [--public] [--threads N]
"""
from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gradio as gr  # noqa: E402
import torch  # noqa: E402

from . import plots, training  # noqa: E402
from .limits import (DEFAULT_CONCURRENCY, MAX_UPLOAD_BYTES, MAX_UPLOAD_MB, PUBLIC_MAX_MINUTES,  # noqa: E402
                     PUBLIC_MAX_PARAMETERS, QUEUE_SIZE)
from .registry import CHECKPOINTS, ModelRegistry  # noqa: E402
from .shell import Shell, refresh, status_line  # noqa: E402
from .tabs import attention, beam, model_view, positional, train, translate  # noqa: E402
from .text import guard  # noqa: E402
from .uploads import open_checkpoint  # noqa: E402
# Gradio's default theme, with colours that read (WCAG AA, 4.5:1): white on its orange buttons was 2.8:1,
# the selected tab's orange 2.8:1, slider ends, placeholders and hints in #bbbbc2 1.9:1, and box and
# check-box borders next to invisible on the dark theme.
THEME = gr.themes.Default().set(
    button_primary_background_fill="*primary_700", button_primary_background_fill_hover="*primary_800",
    button_primary_background_fill_dark="*primary_700", button_primary_background_fill_hover_dark="*primary_800",
    button_cancel_background_fill="#b91c1c", button_cancel_background_fill_hover="#dc2626",  # red 700, 600
    button_cancel_background_fill_dark="#b91c1c", button_cancel_background_fill_hover_dark="#dc2626",
    color_accent="*primary_700", body_text_color_subdued="*neutral_500", input_placeholder_color="*neutral_500",
    input_placeholder_color_dark="*neutral_400", checkbox_border_color="*neutral_500",
    checkbox_border_color_dark="*neutral_500", input_border_color_dark="*neutral_500")
CSS = """
/* The accent (selected tab, slider) has one value for both themes: on the dark one, the lighter orange. */
:root .dark { --color-accent: var(--primary-500); }
/* Keyboard focus shows on every control: Gradio's sliders, radio buttons and several boxes showed none. */
/* (Important: the components' own "outline: none" rules load after this sheet.) */
/* (Not what only a script focuses, tabindex -1.) */
.gradio-container :is(input, textarea, button, select, [role=tab],
                      [tabindex]:not([tabindex="-1"])):focus-visible {
  outline: 3px solid #1d4ed8 !important; outline-offset: 2px; }
.dark .gradio-container :is(input, textarea, button, select, [role=tab],
                            [tabindex]:not([tabindex="-1"])):focus-visible {
  outline-color: #93c5fd !important; }
/* A box's ring inside its edge: the number boxes beside the sliders cut an outer one off. */
.gradio-container :is(input:not([type=radio], [type=checkbox], [type=range]), textarea):focus-visible {
  outline-offset: -3px !important; }
/* The page title's block scrolls (Gradio's prose), which made it a Tab stop that does nothing. */
#studio-title, #studio-title .prose { overflow: visible !important; }
/* Gradio's bundled Source Sans Pro SemiBold (600) holds a few dozen glyphs only: bold text mixed two
   fonts (the A of "Attention", the B of "Beam" drawn apart from their words). Its complete Bold serves
   600 and 700; declared once per weight, after Gradio's 600, so the browser takes it (a 600-700 range
   lost to Gradio's exact 600). */
@font-face { font-family: "Source Sans Pro"; font-weight: 600; font-style: normal;
  src: url("static/fonts/SourceSansPro/SourceSansPro-Bold.woff2") format("woff2"); }
@font-face { font-family: "Source Sans Pro"; font-weight: 700; font-style: normal;
  src: url("static/fonts/SourceSansPro/SourceSansPro-Bold.woff2") format("woff2"); }
.status-line p { margin: 0; }
/* The studio's tables (Markdown): numbers aligned right and on one line; words broken only between
   words (Gradio's prose broke them anywhere: "scor|e", "woma|n" on a phone), a table wider than its
   column scrolling inside it. */
.gradio-container .prose :is(td, th)[align=right] { text-align: right; }
.gradio-container .prose td[align=right] { white-space: nowrap; }
.gradio-container .prose :is(td, th) { overflow-wrap: normal; word-break: normal; }
.gradio-container .prose:has(table) { overflow-x: auto; }
/* (In @media, Gradio puts its container's classes before every selector, even inside :is(): plain ones.) */
@media (max-width: 640px) { .prose td, .prose th { padding: 6px 8px !important; } }
/* Notices rise from the bottom right: at the top right they covered the header's model summary and the
   presenter-mode switch for 5-10 s, just when the presenter reached for them. */
.toast-wrap { top: auto !important; bottom: var(--size-4) !important; }
/* Read out, not shown (a live region must stay on the page: Gradio's visible=False removes it). */
.visually-hidden { position: absolute !important; width: 1px; height: 1px; overflow: hidden;
  clip-path: inset(50%); white-space: nowrap; border: 0 !important; padding: 0 !important; }
/* A live region (class "announce") reads out its text only: Gradio's progress tracker inside it ticked
   "0.1s", "queue: 1/1", "processing" into it during every call. */
.block.announce > [data-testid="status-tracker"] { display: none !important; }
/* Gradio draws a disabled Start or Stop in nearly its enabled colours: on a projector nobody could
   tell which of the Train tab's buttons act. */
button:disabled { opacity: 0.35; cursor: not-allowed; filter: grayscale(1); }  /* a pale red Stop still looked live */
/* ...and on the dark theme 0.35 left their labels unreadable (2.7:1). */
.dark button:disabled { opacity: 0.55; }
/* Gradio 6.31's radio button paints itself white on hover, the chosen one too: under the pointer the
   choice vanished (its hover rule comes after, and is as specific as, its checked one). */
.gradio-container input[type="radio"]:checked:hover {
  background-color: var(--checkbox-background-color-selected); border-color: var(--checkbox-border-color-selected); }
/* A dropdown's arrow sits over the right end of its box: on a phone a long model name ran under it
   ("multi30k-de-en▾s"); the name now ends before the arrow, with an ellipsis where it is cut. */
.gradio-container input[role="combobox"] { padding-right: 28px; text-overflow: ellipsis; }
body.presenter { --text-xs: 16px; --text-sm: 18px; --text-md: 21px; --text-lg: 24px; --text-xl: 28px;
  --text-xxl: 34px; --body-text-size: 21px; --block-label-text-size: 18px; --block-title-text-size: 20px;
  --input-text-size: 22px; --section-header-text-size: 22px; --prose-text-size: 21px;
  --body-text-color: #000; --body-text-color-subdued: #111; --block-label-text-color: #000;
  --block-title-text-color: #000; --input-text-color: #000; --color-accent: #0a3d91;
  --button-primary-background-fill: #0a3d91; --button-primary-background-fill-hover: #15509f;
  --button-primary-text-color: #fff; --slider-color: #0a3d91; --checkbox-background-color-selected: #0a3d91;
  --checkbox-border-color-selected: #0a3d91; --checkbox-border-color-focus: #0a3d91;
  --border-color-primary: #333; --block-border-width: 2px; --checkbox-label-text-size: 20px;
  --button-large-text-size: 22px; --button-medium-text-size: 20px; --button-small-text-size: 18px;
  --table-text-size: 20px; --block-info-text-size: 18px; --block-info-text-color: #111; }
body.presenter .gradio-container { background: #fff; }
/* Gradio sizes a text box's height when the page loads and again only on typing: in the larger type the
   one-line source box cut the bottoms of its letters (40 px for 51) until something was typed. The
   minimum: a line of type, its padding and borders. */
body.presenter .gradio-container textarea { min-height: calc(var(--input-text-size) * 1.4 + 24px); }
/* On a projector's 720 lines the tab's content needs the room; the window's title names the app. */
body.presenter #studio-title { display: none; }
/* ...and so do the plots of every tab: opening a checkpoint is work done before the lecture. */
body.presenter #open-checkpoint { display: none; }
/* The header row one input high: the picker shows a model's name without its "Model" label (screen
   readers keep it), and the model's one-line summary keeps the normal type size. */
body.presenter #model-picker [data-testid="block-info"] { display: none; }
@media (max-width: 640px) {
  /* On a phone the picker has a line of its own: beside the summary it was 100 px wide ("multi30k-…"). */
  #model-picker, #model-summary { min-width: 100% !important; }
  /* ...plotly's toolbar, always shown on a touch screen, covered the plot's label and title there. */
  .js-plotly-plot .modebar-container { display: none !important; }
  /* ...and the beam search's table fits the screen: "finished 1" took a wide column, and the tokens, one
     a line, ran 6 px past the right edge. */
  #beam-hypotheses table { width: 100%; }
  #beam-hypotheses th, #beam-hypotheses td { padding: 6px 4px !important; }
  #beam-hypotheses td:first-child { white-space: normal; width: 4.5em; }
}
body.presenter #model-summary p { font-size: 17px; line-height: 1.35; }
/* The Translate tab's examples are for the presenter to click, not for the room to read: in normal type
   two share a line, and the probability plot below them starts ~80 px higher. */
body.presenter #translate-examples .gallery-item { font-size: 16px; }
/* bertviz's page, in its sandboxed frame, cannot see presenter mode's type sizes: the frame is zoomed
   whole, as the plots are scaled (PRESENTER_PLOT_SCALE); its width stays the column's. */
body.presenter iframe.bertviz { zoom: 1.4; }
/* ...but the model view, a row of heads, less: at 1.4 a 4-head model's was wider than a 1280 px projector. */
body.presenter iframe.bertviz[data-view="model"] { zoom: 1.15; }
body.presenter .tab-wrapper button { font-size: 21px; font-weight: 700; color: #000; }
/* bertviz draws black on white in its sandboxed frame, which cannot see the page's theme: on the dark
   theme the frame is inverted and its hues turned back, so the background goes dark, the type light,
   and a weight's colour keeps its hue (a faint line fades into the background, as on white). */
.dark iframe.bertviz { filter: invert(0.9) hue-rotate(180deg); border-color: #aaa !important; }  /* shows #5e5e5e */
"""
# Attention tab, head ablation: a row of boxes per layer, a column per head (heads-N comes with the
# choices), so narrow columns or presenter mode's large type never put "L2 H1" beside "L1 H4"; a
# group wider than its third of the row moves to a line of its own.
# On a phone four boxes do not fit a row: a layer's heads take rows of at most three, evenly (the
# largest divisor of the head count up to 3), so no row holds two layers' heads.
CSS += (".ablation-heads { min-width: fit-content !important; }\n"
        ".ablation-heads [data-testid='checkbox-group'] { display: grid; "
        "grid-template-columns: repeat(var(--heads), max-content); }\n"
        + "".join(f".heads-{n} {{ --heads: {n}; --heads-narrow: {max(d for d in (1, 2, 3) if n % d == 0)}; }}\n"
                  for n in range(1, 65))
        + "@media (max-width: 640px) { .ablation-heads [data-testid='checkbox-group'] { "
          "grid-template-columns: repeat(var(--heads-narrow), max-content); } }\n")

# Plotly figures keep their own type sizes, so presenter mode scales each figure's fonts (layout,
# annotations, trace labels) and height by PRESENTER_PLOT_SCALE and lets its axes widen their margins:
# a figure on screen is redrawn so (fit), and one drawn later is scaled before its first drawing (Gradio
# draws every new figure, a live plot's each update, into a fresh plot: redrawing it afterwards drew it
# twice). A figure remembers on its layout object whether it is enlarged; a new figure comes with a new
# layout. Switched off, every figure scales back.
PRESENTER_PLOT_SCALE = 1.4
PRESENTER_JS = """(on) => {
  document.body.classList.toggle('presenter', on);
  // Presenter mode is black on white whatever theme the browser asked for: its colours (above) would
  // otherwise put black type on the dark theme's blocks. Switched off, the visitor's theme comes back.
  const body = document.body;
  if (on) { body.dataset.wasDark = body.classList.contains('dark'); body.classList.remove('dark'); }
  else if (body.dataset.wasDark === 'true') body.classList.add('dark');
  const isAxis = (key) => /^[xy]axis[0-9]*$/.test(key);
  // Plotly attribute paths ('margin.t', 'annotations[2].font.size') and values that scale a figure by r,
  // from its current sizes; and the traces whose label size changes.
  const changes = (sizes, layout, data, r) => {
    const scaled = (size) => Math.round(size * r * 10) / 10;
    // Taller by the same factor, so rows of labels keep their room; the title's top margin grows too.
    // Plotly answers a new height by fixing the width at its current value (autosize off), and the
    // figure no longer follows the window: keep the width automatic, as Gradio draws it.
    const paths = {'font.size': scaled(sizes.font), 'hoverlabel.font.size': scaled(sizes.hover),
                   'margin.t': scaled(sizes.top), 'height': Math.round(sizes.height * r),
                   'width': null, 'autosize': true};
    // null: back to plotly's default, which the studio's figures keep
    sizes.axes.forEach((key) => { paths[key + '.automargin'] = r > 1 ? true : null; });
    // A title held below Gradio's label (pad.t), which grows with the type: clear of it still.
    if (sizes.titlePad) paths['title.pad.t'] = scaled(sizes.titlePad);
    (layout.annotations || []).forEach((a, i) => {
      if (a.font && a.font.size) paths['annotations[' + i + '].font.size'] = scaled(a.font.size);
    });
    const traces = [], labels = [];
    data.forEach((t, i) => {
      if (t.textfont && typeof t.textfont.size === 'number') { traces.push(i); labels.push(scaled(t.textfont.size)); }
    });
    return {paths, traces, labels};
  };
  const fit = (gd) => {  // Gradio loads plotly with the first plot: look it up each time
    const big = document.body.classList.contains('presenter'), P = window.Plotly;
    if (!P || !gd.layout || !gd._fullLayout || Boolean(gd.layout.studioEnlarged) === big) return;
    const full = gd._fullLayout;
    const c = changes({font: full.font.size, hover: full.hoverlabel.font.size, top: full.margin.t,
                       titlePad: full.title?.pad?.t, height: full.height, axes: Object.keys(full).filter(isAxis)},
                      gd.layout, gd.data, big ? SCALE : 1 / SCALE);
    gd.layout.studioEnlarged = big;  // before the redraw, whose plotly_afterplot calls fit again
    P.update(gd, c.traces.length ? {'textfont.size': c.labels} : {}, c.paths, c.traces.length ? c.traces : undefined);
  };
  // A figure about to be drawn in presenter mode, enlarged in place; sizes it leaves unset are plotly's
  // defaults (one without a height of its own is left to fit).
  const enlarge = (data, layout) => {
    if (layout.height === undefined) return;
    const put = (target, path, value) => {
      const keys = path.replace(/\\[(\\d+)\\]/g, '.$1').split('.'), last = keys.pop();
      keys.forEach((key) => { target = target[key] = target[key] || {}; });
      target[last] = value;
    };
    const axes = new Set(['xaxis', 'yaxis', ...Object.keys(layout).filter(isAxis)]);
    const c = changes({font: layout.font?.size ?? layout.template?.layout?.font?.size ?? 12,
                       hover: layout.hoverlabel?.font?.size ?? 13, top: layout.margin?.t ?? 100,
                       titlePad: layout.title?.pad?.t, height: layout.height, axes: [...axes]}, layout, data, SCALE);
    Object.entries(c.paths).forEach(([path, value]) => put(layout, path, value));
    c.traces.forEach((i, n) => put(data[i], 'textfont.size', c.labels[n]));
    layout.studioEnlarged = true;
  };
  const patch = () => {  // Gradio draws with Plotly.react
    const P = window.Plotly;
    if (!P || P.studioReact) return;
    const react = P.react;
    P.react = function (gd, data, layout, config) {
      const big = document.body.classList.contains('presenter');
      if (big && layout && !layout.studioEnlarged) enlarge(data || [], layout);
      return react.call(this, gd, data, layout, config);
    };
    P.studioReact = true;
  };
  const watch = (gd) => {
    patch();
    if (gd.studioWatched) return;
    gd.studioWatched = true;
    gd.on('plotly_afterplot', () => fit(gd));
    setTimeout(() => fit(gd), 0);  // its first drawing may have ended before it was watched
  };
  if (!window.studioPlotObserver) {
    window.studioPlotObserver = new MutationObserver(
      () => document.querySelectorAll('.js-plotly-plot').forEach(watch));
    window.studioPlotObserver.observe(document.body, {subtree: true, childList: true, attributes: true,
                                                      attributeFilter: ['class']});
  }
  document.querySelectorAll('.js-plotly-plot').forEach((gd) => { watch(gd); fit(gd); });
}""".replace("SCALE", str(PRESENTER_PLOT_SCALE))


# A number typed into a slider's box (Enter or leaving the box) outside its range or, on a whole-number
# step, off it: the box shows the value the slider takes (widgets.Slider clamps it on the server, and
# the callbacks round a whole-number slider down, d_model to even; without this the box kept the typed
# number: 9999 or 13 where the plots drew 512 or 12 dimensions).
CLAMP_JS = """() => {
  document.addEventListener('change', (event) => {
    const box = event.target;
    if (!(box instanceof HTMLInputElement) || box.dataset.testid !== 'number-input') return;
    if (box.value === '' || box.min === '' || box.max === '') return;
    const value = Number(box.value), low = Number(box.min), high = Number(box.max), step = Number(box.step);
    let used = Math.min(Math.max(value, low), high);
    if (Number.isInteger(step) && step > 0) used = low + Math.floor((used - low) / step) * step;
    if (used === value) return;
    box.value = String(used);
    box.dispatchEvent(new Event('input', {bubbles: true}));
  }, true);
}"""


# Each figure is drawn for the page it is on: with the layout it carries for a phone (plots.narrow) on a
# page narrower than NARROW_PX, and in light type on the page's own background under the dark theme
# (plots.TEMPLATE is black on white). The changes are applied before plotly draws a figure, to the figure
# Gradio hands over; a figure on screen when the page changes (the first one, drawn before plotly could
# be wrapped; a window narrowed or widened; the theme switched) is redrawn so. A layout keeps the values
# each kind of change replaced (studioWas.narrow, studioWas.dark) to go back to them.
PAGE_PLOTS_JS = """() => {
  const isAxis = (key) => /^[xy]axis[0-9]*$/.test(key);
  const dark = (layout) => {
    const changes = {'paper_bgcolor': 'rgba(0,0,0,0)', 'plot_bgcolor': 'rgba(0,0,0,0)', 'font.color': '#e4e4e7'};
    new Set(['xaxis', 'yaxis', ...Object.keys(layout).filter(isAxis)]).forEach((axis) => {
      Object.assign(changes, {[axis + '.gridcolor']: '#3f3f46', [axis + '.linecolor']: '#71717a',
                              [axis + '.zerolinecolor']: '#52525b'});
    });
    return changes;
  };
  const kinds = {
    narrow: {on: () => window.innerWidth < NARROW_PX, changes: (layout) => layout.meta && layout.meta.narrow},
    dark: {on: () => document.body.classList.contains('dark'), changes: dark},
  };
  const steps = (path) => path.replace(/\\[(\\d+)\\]/g, '.$1').split('.');
  const get = (target, path) => steps(path).reduce((t, key) => (t == null ? undefined : t[key]), target);
  const put = (target, path, value) => {
    const keys = steps(path), last = keys.pop();
    keys.forEach((key) => { target = target[key] = target[key] || {}; });
    target[last] = value;
  };
  // A path "data[i]...." is trace i's attribute, any other the layout's.
  const root = (path, layout, data) => (path.startsWith('data[') ? {data} : layout);
  const apply = (layout, data) => {  // true if the figure changed
    if (!layout) return false;
    let changed = false;
    Object.entries(kinds).forEach(([kind, {on, changes}]) => {
      const was = layout.studioWas = layout.studioWas || {};
      if (Boolean(was[kind]) === on()) return;
      if (on()) {
        const paths = changes(layout);
        if (!paths) return;
        was[kind] = {};
        Object.entries(paths).forEach(([path, value]) => {
          was[kind][path] = get(root(path, layout, data), path) ?? null;  // null: plotly's default
          put(root(path, layout, data), path, value);
        });
      } else {
        Object.entries(was[kind]).forEach(([path, value]) => put(root(path, layout, data), path, value));
        delete was[kind];
      }
      changed = true;
    });
    return changed;
  };
  // A zoom into a figure with a uirevision (the Train tab's curves, redrawn as a run goes on) is put back on
  // each redraw: Gradio draws every update into a new plot element, which plotly's own uirevision cannot follow.
  const zooms = {};  // uirevision -> {axis name: [from, to]}
  const remember = (gd) => gd.on && gd.on('plotly_relayout', (event) => {
    const revision = gd.layout && gd.layout.uirevision;
    if (!revision) return;
    const kept = zooms[revision] = zooms[revision] || {};
    Object.entries(event).forEach(([key, value]) => {
      const m = key.match(/^([xy]axis[0-9]*)\.(autorange|range(?:\[([01])\])?)$/);
      if (!m) return;
      if (m[2] === 'autorange') delete kept[m[1]];  // a double click: back to the whole run
      else if (m[3] === undefined) kept[m[1]] = value.slice();
      else (kept[m[1]] = kept[m[1]] || [null, null])[Number(m[3])] = value;
    });
  });
  const rezoom = (layout) => Object.entries((layout && layout.uirevision && zooms[layout.uirevision]) || {})
    .forEach(([axis, range]) => { layout[axis] = {...(layout[axis] || {}), range: range.slice(), autorange: false}; });
  const check = () => {
    const P = window.Plotly;
    if (!P) return;
    if (!P.studioPageReact) {
      const react = P.react;
      P.react = function (gd, data, layout, config) {
        apply(layout, data);
        rezoom(layout);
        return react.call(this, gd, data, layout, config);
      };
      P.studioPageReact = true;
    }
    document.querySelectorAll('.js-plotly-plot').forEach((gd) => {
      if (gd.layout && apply(gd.layout, gd.data)) P.react(gd, gd.data, gd.layout);
    });
  };
  // A plot drawn while its tab was hidden (width 0) takes plotly's default 700 px and kept it when shown,
  // titles cut: redrawn at its box's width when that changes (a tab shown, a column resized).
  const sized = new ResizeObserver((entries) => entries.forEach(({target, contentRect}) => {
    const drawn = target._fullLayout && target._fullLayout.width;
    if (contentRect.width > 0 && drawn && Math.abs(drawn - contentRect.width) > 1) window.Plotly.Plots.resize(target);
  }));
  const watched = new WeakSet();
  const watch = () => document.querySelectorAll('.js-plotly-plot').forEach((gd) => {
    if (!watched.has(gd)) { watched.add(gd); sized.observe(gd); remember(gd); }
  });
  new MutationObserver(() => { check(); watch(); }).observe(document.body, {subtree: true, childList: true});
  new MutationObserver(check).observe(document.body, {attributes: true, attributeFilter: ['class']});  // the theme
  window.addEventListener('resize', check);
}""".replace("NARROW_PX", str(plots.NARROW_PX))


# Names for assistive technology where Gradio 6.31 gives none, kept after every redraw:
# - a radio group's buttons each had a name of their own ("radio-1", "radio-2"), so the arrow keys did not
#   move between a group's options and each was a Tab stop; they get their group's one name;
# - a group (radio or checkbox) is named by the label shown above it (its <fieldset> had no legend);
# - a slider's reset button (↺) was "Reset to default value", the same for every slider; it names its slider;
# - a plot was an unnamed image read out as its tick labels; it is named by its figure's title;
# - a text that answers an action (class "announce": the beam search's step, the Translate tab's notices)
#   is a polite live region, read out when it changes (Gradio gives the class to the block and to the
#   text inside; only the block is made live, so nothing is read twice);
# - a box that shows an answer (class "readout": the translation, the beam search's results) is read-only,
#   not disabled as Gradio makes a box that takes no input: a disabled box was no Tab stop, and its text
#   could not be selected to copy; it is named by its label (a Copy button inside took the name).
NAMES_JS = """() => {
  let groups = 0, queued = false;
  const name = () => {
    queued = false;
    document.querySelectorAll('.gradio-container fieldset').forEach((set) => {
      set.dataset.group = set.dataset.group || 'studio-group-' + (groups++);
      set.querySelectorAll('input[type=radio]').forEach((r) => {
        if (r.closest('fieldset') === set && r.name !== set.dataset.group) r.name = set.dataset.group;
      });
      const info = set.querySelector('[data-testid=block-info]');
      if (info && !set.hasAttribute('aria-labelledby')) {
        info.id = info.id || set.dataset.group + '-label';
        set.setAttribute('aria-labelledby', info.id);
      }
    });
    document.querySelectorAll('.block.announce:not([aria-live])').forEach((e) => e.setAttribute('aria-live', 'polite'));
    document.querySelectorAll('.readout textarea').forEach((t) => {
      if (t.disabled) { t.disabled = false; t.readOnly = true; }
      // With a Copy button inside the box's <label>, the label named the button, not the box.
      const info = t.closest('label')?.querySelector('[data-testid=block-info]');
      if (info && !t.hasAttribute('aria-labelledby')) {
        info.id = info.id || 'studio-readout-' + (groups++);
        t.setAttribute('aria-labelledby', info.id);
        const copy = t.closest('label').querySelector('button[aria-label=Copy]');
        if (copy) copy.setAttribute('aria-label', 'Copy the ' + info.textContent.trim().toLowerCase());
      }
    });
    document.querySelectorAll('[data-testid=reset-button]').forEach((b) => {  // each was "Reset to default value"
      const label = (b.closest('.block')?.querySelector('[data-testid=block-info]')?.textContent || '').trim();
      const named = label ? 'Reset ' + label + ' to its default' : 'Reset to default value';
      if (b.getAttribute('aria-label') !== named) b.setAttribute('aria-label', named);
    });
    document.querySelectorAll('.js-plotly-plot').forEach((gd) => {
      // As drawn (entities read as text); a title on several lines is a <tspan> a line: spaced, not run together.
      const drawn = gd.querySelector('.gtitle'), lines = drawn ? [...drawn.querySelectorAll('tspan.line')] : [];
      const title = (lines.length ? lines.map((l) => l.textContent.trim()).join(' ') : drawn?.textContent || '').trim();
      if (title && gd.getAttribute('aria-label') !== title) {
        gd.setAttribute('role', 'img');
        gd.setAttribute('aria-label', title);
      }
    });
  };
  name();
  // Once a frame at most: a plot's hover redraws its labels on every move of the pointer.
  const schedule = () => { if (!queued) { queued = true; requestAnimationFrame(name); } };
  new MutationObserver(schedule).observe(document.body, {subtree: true, childList: true, attributes: true,
                                                         attributeFilter: ['name', 'disabled']});
}"""


# A button that disables itself once pressed (Start, Stop, Run to end) took the keyboard focus with it, to
# the page: a keyboard or screen-reader user had to find their way back from the top. The focus goes to
# the first enabled button of its row instead (Start: Pause; Run to end: Back).
FOCUS_JS = """() => {
  let last = null;
  document.addEventListener('focusin', (event) => { last = event.target; });
  // Focus given up by the user (a click on a plot) is theirs: only a button's own disabling hands it on.
  document.addEventListener('focusout', (event) => { if (!event.target.disabled) last = null; });
  new MutationObserver(() => {
    const lost = !document.activeElement || document.activeElement === document.body || document.activeElement === last;
    if (!last || !last.disabled || !lost) return;
    const next = last.closest('.row')?.querySelector('button:not(:disabled)');
    if (next) next.focus({preventScroll: true});
  }).observe(document.body, {subtree: true, attributes: true, attributeFilter: ['disabled']});
}"""


# A bertviz frame whose drawing was scaled down to its width (a phone) says how tall its page is now: the
# frame shrinks to it, never growing past the height it was given. Only a frame of ours is resized.
BERTVIZ_HEIGHT_JS = """() => {
  window.addEventListener('message', (event) => {
    const height = event.data && event.data.bertvizHeight;
    const frame = [...document.querySelectorAll('iframe.bertviz')].find((f) => f.contentWindow === event.source);
    if (!frame || !(typeof height === 'number' && height > 0)) return;
    frame.dataset.given = frame.dataset.given || parseFloat(frame.style.height);
    frame.style.height = Math.min(Number(frame.dataset.given), Math.ceil(height) + 4) + 'px';
  });
}"""


def page_js() -> str:
    """The scripts run once when the page loads (launch(js=...) takes one function)."""
    return (f"() => {{ ({CLAMP_JS})(); ({beam.STEP_KEYS_JS})(); ({PAGE_PLOTS_JS})(); ({NAMES_JS})(); ({FOCUS_JS})(); "
            f"({BERTVIZ_HEIGHT_JS})(); }}")


def build_app(registry: ModelRegistry, selected: str | None = None, checkpoints_dir: Path | None = None,
              public: bool = False) -> gr.Blocks:
    """checkpoints_dir: where the Train tab saves (default: the repository's checkpoints/);
    public: visitors share the one training run, which is bounded and controlled only by its starter."""
    names = registry.names()
    selected = selected if selected in names else (names[0] if names else None)
    # Uploaded files are copied by the callbacks that use them; Gradio's copies older than two
    # hours are deleted (checked hourly), so visitors' uploads cannot fill the disk over time.
    with gr.Blocks(title="Transformer Studio", analytics_enabled=False, delete_cache=(3600, 7200)) as demo:
        gr.Markdown("## Transformer Studio — “Attention Is All You Need”, opened up", elem_id="studio-title")
        with gr.Row(equal_height=True):
            picker = gr.Dropdown(choices=registry.choices(), value=selected, label="Model", scale=1,
                                 allow_custom_value=False, elem_id="model-picker")
            status = gr.Markdown(status_line(registry, selected), elem_classes="status-line", elem_id="model-summary")
            with gr.Column(scale=0, min_width=240):  # a bare checkbox's box would take a third of the row
                presenter = gr.Checkbox(label="Presenter mode (large type, high contrast)", value=False,
                                        elem_id="presenter-switch", container=False)
        shell = Shell(registry, picker, demo, gr.State(registry.key(selected)))
        with gr.Accordion("Open another checkpoint", open=False, elem_id="open-checkpoint"):
            upload = gr.File(label="A checkpoint: config.json, model.safetensors and tokenizer.json "
                                   f"(or a .zip of the folder); at most {MAX_UPLOAD_MB} MB a file",
                             file_count="multiple")
        on_screen = gr.State("translate")  # the id of the tab this session shows
        with gr.Tabs(overflow_behavior="wrap"):  # every tab in sight on a phone too, not behind a "⋯" menu
            with gr.Tab("Translate", id="translate", elem_id="tab-translate") as translate_tab:
                translated = translate.build(shell)
            with gr.Tab("Beam search", id="beam", elem_id="tab-beam") as beam_tab:
                beam.build(shell, translated, beam_tab)
            with gr.Tab("Attention", id=attention.TAB_ID, elem_id="tab-attention") as attention_tab:
                attention.build(shell, translated, attention_tab, on_screen)
            with gr.Tab("Positional encoding", id="positional", elem_id="tab-positional") as positional_tab:
                positional.build(shell)
            with gr.Tab("Model", id="model", elem_id="tab-model") as model_tab:
                model_view.build(shell)
            with gr.Tab("Train", id=train.TAB_ID, elem_id="tab-train") as train_tab:
                # One job for the whole process: every browser session sees (and controls) the same run.
                train.build(shell, training.TrainingJob(registry, checkpoints_dir or CHECKPOINTS, public), train_tab,
                            on_screen)
        for other in (translate_tab, beam_tab, positional_tab, model_tab):
            other.select(partial(str, other.id), outputs=on_screen, show_progress="hidden")
        presenter.change(None, inputs=presenter, js=PRESENTER_JS)
        # A trivial call, so no concurrency limit: the tabs redraw for the new model without waiting in line.
        picker.change(registry.key, inputs=picker, outputs=shell.model_key, concurrency_limit=None,
                      show_progress="hidden")
        shell.model_key.change(guard(partial(status_line, registry)), inputs=picker, outputs=status)
        upload.upload(guard(partial(open_checkpoint, registry)), inputs=[upload, picker], outputs=[picker, status],
                      api_name="open_checkpoint").then(
            lambda: None, outputs=upload, show_progress="hidden")  # emptied: the next upload starts afresh
        demo.load(guard(partial(refresh, registry)), inputs=picker, outputs=[picker, status, shell.model_key])
    return demo


def _int_in(low: int, high: int):
    """An argparse type: an integer in [low, high]."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {value}")
        return value
    return parse


# Gradio 6.31's status tracker tells screen readers that a call ended with two words its English texts
# lack: without these, each translation or step was read out as "common.complete".
STATUS_WORDS = gr.I18n(en={"common.complete": "Done", "common.progress": "Progress"})


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m studio", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0 serves the network)")
    parser.add_argument("--port", type=_int_in(1, 65535), default=7860, help="TCP port (default 7860)")
    parser.add_argument("--checkpoint", type=Path, help="a checkpoint folder to open and select")
    parser.add_argument("--checkpoints-dir", type=Path, default=None,
                        help="folder whose subfolders are offered (default: the repository's checkpoints/)")
    parser.add_argument("--share", action="store_true", help="also serve through a public Gradio link")
    parser.add_argument("--public", action="store_true",
                        help=f"for strangers (a Space, --share): only the browser that starts a training run may "
                             f"pause, stop or save it; runs end after {PUBLIC_MAX_MINUTES:.0f} minutes; models up to "
                             f"{PUBLIC_MAX_PARAMETERS / 1e6:.0f}M parameters")
    parser.add_argument("--threads", type=_int_in(1, 1024), default=1,
                        help="torch CPU threads (default 1: one-sentence decoding is 2-10x slower with more "
                             "threads on a busy 2-core machine; concurrent users get a thread each)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    registry = ModelRegistry(args.checkpoints_dir) if args.checkpoints_dir else ModelRegistry()
    selected = None
    if args.checkpoint:
        try:
            selected = registry.open(args.checkpoint)
        except (ValueError, FileNotFoundError) as exc:
            sys.exit(f"error: --checkpoint {args.checkpoint}: {exc}")
    demo = build_app(registry, selected, args.checkpoints_dir, args.public)
    try:
        demo.queue(max_size=QUEUE_SIZE, default_concurrency_limit=DEFAULT_CONCURRENCY, status_update_rate=1).launch(
            server_name=args.host, server_port=args.port, share=args.share, css=CSS, js=page_js(), theme=THEME,
            show_error=False, max_file_size=MAX_UPLOAD_BYTES, i18n=STATUS_WORDS)
    except OSError as exc:  # the port is taken, or the host is not an address of this machine
        reason = str(exc).split(". ")[0]  # Gradio goes on about launch() parameters
        sys.exit(f"error: cannot serve on {args.host}:{args.port}: {reason}; choose another --port or --host")
