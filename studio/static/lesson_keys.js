// Run once when the page loads (app.page_js).
// A page opened on a lesson's step (its address holds lesson=N): in presenter mode a clicker's Page Down and
// Page Up, what most send, press the Lesson panel's Next and Previous, which open the next step's view. The
// Beam search tab's keys leave those two to the lesson then (beam_step_keys.js).
() => {
  const buttons = {PageDown: 'lesson-next', PageUp: 'lesson-previous'};
  document.addEventListener('keydown', (event) => {
    const button = buttons[event.key], focus = document.activeElement;
    if (!button || event.defaultPrevented || event.repeat || !document.body.classList.contains('presenter')) return;
    if (!new URLSearchParams(window.location.search).has('lesson')) return;
    if (focus && (focus.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(focus.tagName))) return;
    event.preventDefault();
    document.getElementById(button)?.click();  // a disabled button ignores it
  });
}
