// The Lesson panel's Next and Previous (lesson_panel.py): open the step's address (query; "" leaves the page as it
// is), in presenter mode still if the page was (each step is a page of its own). The address's fragment stays: a
// lecturer's page keeps its class (class_lead.js has told the class already).
(query) => {
  if (!query) return;
  const keep = document.body.classList.contains('presenter') && !query.includes('presenter=') ? '&presenter=1' : '';
  window.location.search = query + keep;
}
