// Presenter mode switched on or off (the checkbox's .change; `on` is its value): large type, black on white.
// Plotly figures keep their own type sizes, so presenter mode scales each figure's fonts (layout,
// annotations, trace labels) and height by SCALE (app.PRESENTER_PLOT_SCALE, put in when the file is
// read) and lets its axes widen their margins: a figure on screen is redrawn so (fit), and one drawn
// later is scaled before its first drawing (Gradio draws every new figure, a live plot's each update,
// into a fresh plot: redrawing it afterwards drew it twice). A figure remembers on its layout object
// whether it is enlarged; a new figure comes with a new layout. Switched off, every figure scales back.
(on) => {
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
      const keys = path.replace(/\[(\d+)\]/g, '.$1').split('.'), last = keys.pop();
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
}
