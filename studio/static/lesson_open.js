// The Lesson panel's Next and Previous (lesson_panel.py): open the step's address (query; "" leaves the page as it
// is), in presenter mode still if the page was, in place (open_in_place.js); the address's fragment, a lecturer's
// class and key, stays.
(query) => {
  if (!query) return;
  const keep = document.body.classList.contains('presenter') && !query.includes('presenter=') ? '&presenter=1' : '';
  window.studioOpenInPlace(window.location.pathname + '?' + query.replace(/^\?/, '') + keep + window.location.hash);
}
