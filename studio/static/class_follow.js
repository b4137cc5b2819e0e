// Run once when the page loads (app.page_js).
// A student's page in a class (its address ends in #class=CODE, without the lecturer's key) follows the lecturer:
// it polls the class's tiny state (GET class/CODE/state, no Gradio session, no queue) every PERIOD_MS and, while
// following, opens the lecturer's step in place (open_in_place.js: the fragment kept, the class box redrawn for the
// step). Changing anything on the page (typing, picking a tab) steps away from the class; the bar's button follows
// again. When the class's version changes on
// the page's own step (a reveal), the page asks for its class box again (the hidden #class-refresh button).
() => {
  const fragment = new URLSearchParams(window.location.hash.slice(1));
  const code = (fragment.get('class') || '').toUpperCase();
  if (!/^[2-9A-HJ-NP-Z]{5}$/.test(code) || fragment.get('key')) return;  // no class, or the lecturer's own page
  let here = Number(new URLSearchParams(window.location.search).get('lesson') || 0);
  const memory = 'studio-class-away-' + code;  // stepping away lasts across this tab's reloads
  let away = sessionStorage.getItem(memory) === '1', seen = null, last = null;
  const bar = document.createElement('div'), text = document.createElement('span');
  const button = document.createElement('button');
  bar.id = 'class-follow';
  bar.setAttribute('role', 'status');
  button.id = 'class-follow-button';
  button.type = 'button';
  button.textContent = 'Follow the lecturer';
  bar.append(text, button);
  document.body.append(bar);

  function show() {
    bar.dataset.following = away ? 'no' : 'yes';
    button.hidden = !away || last === null;
    if (last === null) return;
    text.textContent = away ? `You stepped away. The lecturer is on step ${last.step} of ${last.steps}.`
      : `Following the lecturer: step ${last.step} of ${last.steps}`;
  }
  function open(state) {  // whether the page stays (false: it is being loaded anew)
    const stays = window.studioOpenInPlace(window.location.pathname + state.link + '#class=' + code);
    if (stays) here = state.step;
    return stays;
  }
  function stepAway(event) {
    if (away || bar.contains(event.target) || event.target.closest?.('#class-box')) return;
    away = true;
    sessionStorage.setItem(memory, '1');
    show();
  }
  button.addEventListener('click', () => {
    away = false;
    sessionStorage.removeItem(memory);
    if (!last || last.step === here || open(last)) show();
  });
  document.addEventListener('input', stepAway, true);
  document.addEventListener('click', (event) => { if (event.target.closest?.('[role=tab]')) stepAway(event); }, true);

  async function poll() {
    try {
      const answer = await fetch('class/' + code + '/state', {cache: 'no-store'});
      if (answer.status === 404) {
        text.textContent = 'The class has ended: the page is yours.';
        button.hidden = true;
        bar.dataset.following = 'ended';
        return;  // polling stops with the class
      }
      last = await answer.json();
      if (!away && last.step !== here) {
        if (!open(last)) return;
      } else if (last.step === here && (seen === null ? last.revealed : last.version !== seen)) {
        document.getElementById('class-refresh')?.click();
      }
      seen = last.version;
      show();
    } catch (error) {
      text.textContent = 'The class is out of reach; trying again…';
    }
    setTimeout(poll, PERIOD_MS);
  }
  text.textContent = 'Joining the class…';
  poll();
}
