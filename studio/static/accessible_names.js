// Run once when the page loads (app.page_js).
// Names for assistive technology where Gradio 6.31 gives none, kept after every redraw:
// - a radio group's buttons each had a name of their own ("radio-1", "radio-2"), so the arrow keys did not
//   move between a group's options and each was a Tab stop; they get their group's one name;
// - a group (radio or checkbox) is named by the label shown above it (its <fieldset> had no legend);
// - a slider's reset button (↺) was "Reset to default value", the same for every slider; it names its slider;
// - a plot was an unnamed image read out as its tick labels; it is named by its figure's title;
// - a text that answers an action (class "announce": the beam search's step, the Translate tab's notices)
//   is a polite live region, read out when it changes (Gradio gives the class to the block and to the
//   text inside; only the block is made live, so nothing is read twice);
// - a box that shows an answer (class "readout": the translation, the beam search's results) is read-only,
//   not disabled as Gradio makes a box that takes no input: a disabled box was no Tab stop, and its text
//   could not be selected to copy; it is named by its label (a Copy button inside took the name).
() => {
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
}
