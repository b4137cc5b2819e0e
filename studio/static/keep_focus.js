// Run once when the page loads (app.page_js).
// A button that disables itself once pressed (Start, Stop, Run to end) took the keyboard focus with it, to
// the page: a keyboard or screen-reader user had to find their way back from the top. The focus goes to
// the first enabled button of its row instead (Start: Pause; Run to end: Back).
() => {
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
}
