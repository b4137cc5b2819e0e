// Run once when the page loads (app.page_js).
// Each figure is drawn for the page it is on: with the layout it carries for a phone (plots.narrow) on a
// page narrower than NARROW_PX (plots.NARROW_PX, put in when the file is read), and in light type on the
// page's own background under the dark theme (plots.TEMPLATE is black on white). The changes are applied
// before plotly draws a figure, to the figure Gradio hands over; a figure on screen when the page changes
// (the first one, drawn before plotly could be wrapped; a window narrowed or widened; the theme switched)
// is redrawn so. A layout keeps the values each kind of change replaced (studioWas.narrow, studioWas.dark)
// to go back to them.
() => {
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
  const steps = (path) => path.replace(/\[(\d+)\]/g, '.$1').split('.');
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
}
