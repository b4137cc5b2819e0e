// Run once when the page loads (app.page_js).
// A bertviz frame whose drawing was scaled down to its width (a phone) says how tall its page is now: the
// frame shrinks to it, never growing past the height it was given. Only a frame of ours is resized.
() => {
  window.addEventListener('message', (event) => {
    const height = event.data && event.data.bertvizHeight;
    const frame = [...document.querySelectorAll('iframe.bertviz')].find((f) => f.contentWindow === event.source);
    if (!frame || !(typeof height === 'number' && height > 0)) return;
    frame.dataset.given = frame.dataset.given || parseFloat(frame.style.height);
    frame.style.height = Math.min(Number(frame.dataset.given), Math.ceil(height) + 4) + 'px';
  });
}
