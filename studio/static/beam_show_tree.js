// After Back or Reset on the Beam search tab. On a short screen (a projector at 1280x720) the tree starts
// below the bottom edge: bring the buttons to the top of the window with the tree right under them.
() => {
  // Enter in the sentence box took this step: the arrow keys step on from here, not in the box.
  if (document.activeElement?.closest('#beam-source')) document.activeElement.blur();
  const controls = document.getElementById('beam-controls'), tree = document.getElementById('beam-tree');
  if (controls && tree && tree.getBoundingClientRect().bottom > window.innerHeight) {
    controls.scrollIntoView({block: 'start', behavior: 'smooth'});
  }
}
