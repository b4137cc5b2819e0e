// The Lesson panel's Next and Previous (lesson_panel.py): open the step's address (query; "" leaves the page as it
// is), in presenter mode still if the page was (each step is a page of its own). The address's fragment stays: on
// a lecturer's page in a class (#class=CODE&key=KEY) the class is told the new step at once, before this page
// reloads, so the students' pages start to follow while it does.
(query) => {
  if (!query) return;
  const fragment = new URLSearchParams(window.location.hash.slice(1));
  const code = fragment.get('class'), key = fragment.get('key'), step = new URLSearchParams(query).get('lesson');
  if (code && key && step) {
    fetch('class/' + code + '/step', {method: 'POST', keepalive: true, headers: {'Content-Type': 'application/json'},
                                      body: JSON.stringify({key: key, step: Number(step)})});
  }
  const keep = document.body.classList.contains('presenter') && !query.includes('presenter=') ? '&presenter=1' : '';
  window.location.search = query + keep;
}
