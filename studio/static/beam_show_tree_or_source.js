// After Step or Run to end on the Beam search tab: as beam_show_tree.js, but with nothing to search the
// warning says so, and the sentence box keeps its place on screen, with the focus (the page scrolled it
// away, and the toast covered the buttons). Back and Reset walk a search already shown, box empty or not.
() => {
  const box = document.querySelector('#beam-source textarea, #beam-source input');
  if (box && !box.value.trim()) { box.focus(); return; }
  // Enter in the sentence box took this step: the arrow keys step on from here, not in the box.
  if (document.activeElement?.closest('#beam-source')) document.activeElement.blur();
  const controls = document.getElementById('beam-controls'), tree = document.getElementById('beam-tree');
  if (controls && tree && tree.getBoundingClientRect().bottom > window.innerHeight) {
    controls.scrollIntoView({block: 'start', behavior: 'smooth'});
  }
}
