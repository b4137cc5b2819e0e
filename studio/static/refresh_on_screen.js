// The session's translation changed (components.refresh_on_screen): the tab TAB_ID redraws only if it is on screen,
// by clicking its hidden refresh button; a tab off screen redraws when it is opened. One server call per
// translation instead of one per explaining tab (bench/click_to_paint.py counted ten). Two frames on, so that an
// answer that also switched tabs (What if's "Show in Attention") has shown its tab.
() => {
  requestAnimationFrame(() => requestAnimationFrame(() => {
    const tab = document.getElementById('TAB_ID');
    if (tab && tab.getClientRects().length) document.getElementById('TAB_ID-refresh')?.click();
  }));
}
