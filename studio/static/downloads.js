// Run once when the page loads (app.page_js).
// A "Download" menu under every plot (a native <details>: a Tab stop that Enter or Space opens, on a phone
// a tap, where plotly's own toolbar is hidden): the picture as SVG or PNG, as drawn (a phone's layout, or
// presenter mode's type; light colours also under the dark theme), and its numbers as CSV (a row per point,
// tokens named, <eos> included, and the titles of its axes and colour scale) or JSON (every trace's arrays, every
// axis's title and labels). Under each bertviz view: its page as one HTML file that
// works offline (the frame's srcdoc inlines d3, jQuery and bertviz). Gradio draws each update into a new
// plot element, so a menu belongs to the plot's block and finds the plot when used.
() => {
  const slug = (text) => (text || 'plot').toLowerCase().normalize('NFKD').replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '').slice(0, 60) || 'plot';
  // Plot text is plotly's HTML subset with the studio's tokens escaped: read as text in an inert document.
  const text = (html) => (html == null ? '' : new DOMParser().parseFromString(String(html).replace(/<br\s*\/?>/gi, ' '),
                                                                             'text/html').body.textContent);
  const save = (blob, name) => {
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 30000);
  };
  const plain = (v) => (ArrayBuffer.isView(v) ? Array.from(v) : Array.isArray(v) ? v.map(plain) : v);
  const nameOf = (block, gd) => block.querySelector('[data-testid=block-label]')?.textContent.trim()
    || text(gd?._fullLayout?.title?.text) || 'plot';

  // ----- numbers -----------------------------------------------------------------------------
  // A trace's arrays as plotly decoded them (_fullData: typed arrays from plotly.py's base64 too).
  const arrays = (gd, i) => {
    const full = gd._fullData?.find((t) => t.index === i) || {}, given = gd.data[i];
    const pick = (key) => plain(full[key] ?? given[key]);
    return {type: full.type || given.type || 'scatter', name: text(full.name ?? given.name ?? ''), x: pick('x'),
            y: pick('y'), z: pick('z'), text: pick('text'), customdata: pick('customdata'),
            xaxis: given.xaxis || 'x', yaxis: given.yaxis || 'y'};
  };
  // An axis's title and its labels by position (the studio's token axes are numbers with tokens as labels): every
  // token where the figure lists them all in layout.meta.labels (plots._all_labels: its ticks name one in k),
  // else its tick labels. The title as the figure gives it: plotly's full layout holds a placeholder for none.
  const ticks = (gd, ref) => {
    const name = ref.replace(/^([xy])/, '$1axis');
    const axis = gd._fullLayout[name] || {}, given = (gd.layout || {})[name] || {};
    const labels = new Map();
    const all = gd.layout?.meta?.labels?.[name];
    if (Array.isArray(all)) all.forEach(([v, label]) => labels.set(Number(v), text(label)));
    else (axis.tickvals || []).forEach((v, k) => labels.set(Number(v), text((axis.ticktext || [])[k])));
    return {title: text(typeof given.title === 'string' ? given.title : given.title?.text), labels};
  };
  // What a trace's colour means: its colour bar's title (its own, or its shared colour axis's).
  const scaleTitle = (gd, i) => {
    const given = gd.data[i] || {};
    const bar = given.coloraxis ? gd.layout?.[given.coloraxis]?.colorbar : given.colorbar;
    return text(typeof bar?.title === 'string' ? bar.title : bar?.title?.text);
  };
  // A CSV cell: plain text already (labels and notes went through text(): a second pass read "<eos>" as a tag).
  const cell = (v) => {
    if (v == null || (typeof v === 'number' && !Number.isFinite(v))) return '';
    const s = Array.isArray(v) ? v.join(' | ') : String(v);
    return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  };
  const note = (v) => (Array.isArray(v) ? v.map((w) => (typeof w === 'string' ? text(w) : w))
    : typeof v === 'string' ? text(v) : v);
  // A row per point: its trace, position and labels, value and hover note, and the titles of its axes and colour.
  const rows = (gd) => {
    const out = [['trace', 'x', 'x_label', 'y', 'y_label', 'value', 'text', 'x_title', 'y_title', 'value_title']];
    gd.data.forEach((_, i) => {
      const t = arrays(gd, i), xt = ticks(gd, t.xaxis), yt = ticks(gd, t.yaxis), zt = scaleTitle(gd, i);
      const name = t.name || t.type + ' ' + (i + 1), notes = t.customdata ?? t.text;
      const push = (x, y, value, label) => out.push([name, x, xt.labels.get(Number(x)) ?? '', y,
                                                     yt.labels.get(Number(y)) ?? '', value, note(label), xt.title,
                                                     yt.title, zt]);
      if (Array.isArray(t.z)) {
        t.z.forEach((row, r) => (row || []).forEach((value, c) => {
          if (value != null && Number.isFinite(value)) {
            push(Array.isArray(t.x) ? t.x[c] : c, Array.isArray(t.y) ? t.y[r] : r, value, notes?.[r]?.[c]);
          }
        }));
      } else {
        const n = Math.max((t.x || []).length, (t.y || []).length);
        for (let k = 0; k < n; k++) {
          const x = t.x ? t.x[k] : k, y = t.y ? t.y[k] : k;
          if (x != null && y != null) push(x, y, t.type === 'bar' || t.type === 'scatter' ? y : '', notes?.[k]);
        }
      }
    });
    return out.map((r) => r.map(cell).join(',')).join('\r\n') + '\r\n';
  };
  const json = (gd, name) => ({
    plot: name, title: text(typeof gd.layout?.title === 'string' ? gd.layout.title : gd.layout?.title?.text),
    axes: Object.fromEntries(Object.keys(gd._fullLayout || {}).filter((k) => /^[xy]axis\d*$/.test(k)).map((k) => {
      const a = ticks(gd, k.replace('axis', ''));
      return [k, {title: a.title, tick_labels: Object.fromEntries(a.labels)}];
    })),
    traces: gd.data.map((_, i) => {
      const t = arrays(gd, i);
      const kept = {type: t.type, name: t.name, xaxis: t.xaxis, yaxis: t.yaxis, value_title: scaleTitle(gd, i)};
      ['x', 'y', 'z', 'customdata', 'text'].forEach((key) => {
        if (Array.isArray(t[key])) kept[key] = key === 'customdata' || key === 'text' ? plain(t[key]).map(note) : t[key];
      });
      return kept;
    }),
  });

  // ----- pictures --------------------------------------------------------------------------------
  // The figure as drawn; under the dark theme with the light colours it had (page_plots.js keeps them).
  const picture = async (gd, format) => {
    const layout = JSON.parse(JSON.stringify(gd.layout));
    Object.entries(layout.studioWas?.dark || {}).forEach(([path, value]) => {
      const keys = path.split('.'), last = keys.pop();
      let target = layout;
      keys.forEach((key) => { target = target[key] = target[key] || {}; });
      target[last] = value ?? undefined;
    });
    const {width, height} = gd._fullLayout;
    const url = await window.Plotly.toImage({data: gd.data, layout}, {format, width, height, scale: format === 'png' ? 2 : 1});
    return (await fetch(url)).blob();  // a data: URL, read here: no request leaves the page
  };

  // ----- the menus -------------------------------------------------------------------------------
  const menu = (label, items) => {
    const wrap = document.createElement('div');
    wrap.className = 'studio-download';
    const details = document.createElement('details');
    const summary = document.createElement('summary');
    summary.textContent = 'Download';
    summary.setAttribute('aria-label', 'Download: ' + label);
    const list = document.createElement('div');
    list.className = 'studio-download-menu';
    items.forEach(([caption, act]) => {
      const button = document.createElement('button');
      button.type = 'button';
      button.textContent = caption;
      button.addEventListener('click', async () => {
        details.open = false;
        summary.focus();
        try { await act(); } catch (error) { console.warn('download failed', error); }
      });
      list.appendChild(button);
    });
    details.addEventListener('keydown', (event) => {
      if (event.key === 'Escape' && details.open) { details.open = false; summary.focus(); }
    });
    details.append(summary, list);
    wrap.appendChild(details);
    return wrap;
  };
  const forPlot = (block) => {
    const gd = () => block.querySelector('.js-plotly-plot');
    const file = (ext) => slug(nameOf(block, gd())) + '.' + ext;
    return menu(nameOf(block, gd()), [
      ['Image (SVG)', async () => save(await picture(gd(), 'svg'), file('svg'))],
      ['Image (PNG)', async () => save(await picture(gd(), 'png'), file('png'))],
      ['Numbers (CSV)', () => save(new Blob([rows(gd())], {type: 'text/csv'}), file('csv'))],
      ['Numbers (JSON)', () => save(new Blob([JSON.stringify(json(gd(), nameOf(block, gd())), null, 1)],
                                             {type: 'application/json'}), file('json'))],
    ]);
  };
  const forFrame = (block) => {
    const frame = () => block.querySelector('iframe.bertviz');
    const name = () => 'bertviz-' + (frame()?.dataset.view || 'view') + '-view';
    return menu(frame()?.title || 'bertviz view', [
      ['Page (HTML, works offline)', () => save(new Blob([frame().srcdoc], {type: 'text/html'}), name() + '.html')],
    ]);
  };
  let queued = false;
  const scan = () => {
    queued = false;
    document.querySelectorAll('.js-plotly-plot, iframe.bertviz').forEach((element) => {
      const block = element.closest('.block');
      if (!block || block.querySelector(':scope > .studio-download')) return;
      block.appendChild(element.matches('iframe') ? forFrame(block) : forPlot(block));
    });
  };
  scan();
  new MutationObserver(() => { if (!queued) { queued = true; requestAnimationFrame(scan); } })
    .observe(document.body, {subtree: true, childList: true});
}
