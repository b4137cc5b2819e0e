// The Lesson panel's Next and Previous (lesson_panel.py): open the step's address (query; "" leaves the page as it
// is), in presenter mode still if the page was. The page is not loaded again: the address changes in place and the
// page reads it as a link (#open-this-address, deep_links.py), then a class's box redraws for the step
// (#class-refresh; the address's fragment, a lecturer's class and key, stays).
(query) => {
  if (!query) return;
  const keep = document.body.classList.contains('presenter') && !query.includes('presenter=') ? '&presenter=1' : '';
  const search = '?' + query.replace(/^\?/, '') + keep;
  const opener = document.getElementById('open-this-address');
  if (!opener) {
    window.location.search = search;
    return;
  }
  history.replaceState(null, '', window.location.pathname + search + window.location.hash);
  opener.click();
  document.getElementById('class-refresh')?.click();
}
