// Run once when the page loads (app.page_js).
// The lecturer's page in a class (its address's fragment holds #class=CODE&key=KEY, from the start or once Start has
// put them there) tells the class the new step the moment Next or Previous is pressed (a click, or a clicker's Page
// Down and Page Up, lesson_keys.js), before the page's own events: the students' pages start to follow while the
// lecturer's page opens the step. The step and the class are read at each press: the page opens steps in place.
() => {
  document.addEventListener('click', (event) => {
    const button = event.target.closest?.('#lesson-next, #lesson-previous');
    if (!button || button.disabled) return;
    const fragment = new URLSearchParams(window.location.hash.slice(1));
    const code = fragment.get('class'), key = fragment.get('key');
    const here = Number(new URLSearchParams(window.location.search).get('lesson') || 0);
    if (!code || !key || !here) return;
    const step = here + (button.id === 'lesson-next' ? 1 : -1);
    fetch('class/' + code + '/step', {method: 'POST', keepalive: true, headers: {'Content-Type': 'application/json'},
                                      body: JSON.stringify({key: key, step: step})});
  }, true);
}
