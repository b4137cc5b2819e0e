// Run once when the page loads (app.page_js).
// A number typed into a slider's box (Enter or leaving the box) outside its range or, on a whole-number
// step, off it: the box shows the value the slider takes (widgets.Slider clamps it on the server, and
// the callbacks round a whole-number slider down, d_model to even; without this the box kept the typed
// number: 9999 or 13 where the plots drew 512 or 12 dimensions).
() => {
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
}
