// Run once when the page loads (app.page_js).
// The arrow keys step the beam search while the tree fills the screen and its buttons have scrolled away:
// → Step, ← Back; in presenter mode a clicker's Page Down / Page Up too (what most send). Only with the
// Beam search tab shown and no text box, slider, radio or table holding the keys (a key another element
// acted on is its own), not while a key is held down, and with a modifier the browser keeps them
// (Alt+← goes back).
() => {
  const keys = {ArrowRight: 'beam-step', ArrowLeft: 'beam-back'};
  const clicker = {PageDown: 'beam-step', PageUp: 'beam-back'};
  document.addEventListener('keydown', (event) => {
    const presenter = document.body.classList.contains('presenter');
    const lesson = new URLSearchParams(window.location.search).has('lesson');  // its clicker keys: lesson_keys.js
    const button = keys[event.key] || (presenter && !lesson ? clicker[event.key] : undefined);
    const tab = document.getElementById('tab-beam'), focus = document.activeElement;
    if (!button || event.defaultPrevented || event.repeat) return;
    if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    if (!tab || tab.offsetParent === null) return;
    if (focus && (focus.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(focus.tagName) ||
                  focus.closest('table, [role=grid]'))) return;
    event.preventDefault();
    document.getElementById(button)?.click();  // a disabled button ignores it
  });
}
