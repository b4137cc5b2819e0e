// Run once when the page loads (app.page_js).
// A click shows at once: Gradio changes a button only when the server answers (Start and Stop looked the same
// for 1-5 s on a busy machine, and a class pressed them again). A pressed button is marked busy (aria-busy,
// drawn by studio.css) until the page changes the button itself (disabled, relabelled), or for MAX_MS: long
// enough to be seen, short enough not to outlast most answers.
() => {
  const MAX_MS = 1500;
  const clear = (button) => { button.removeAttribute('aria-busy'); };
  document.addEventListener('click', (event) => {
    const button = event.target.closest('.gradio-container button');
    // Tabs, menus and a slider's reset answer in the page itself: nothing to wait for.
    if (!button || button.disabled || button.closest('[role=tablist], .studio-download, details') ||
        button.getAttribute('role') === 'tab' || button.getAttribute('aria-label') === 'Copy') return;
    button.setAttribute('aria-busy', 'true');
    const done = new MutationObserver(() => { done.disconnect(); clear(button); });
    done.observe(button, {attributes: true, attributeFilter: ['disabled', 'class'], childList: true, subtree: true,
                          characterData: true});
    setTimeout(() => { done.disconnect(); clear(button); }, MAX_MS);
  }, true);
}
