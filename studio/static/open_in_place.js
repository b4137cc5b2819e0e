// Run once when the page loads (app.page_js), before class_follow.js.
// window.studioOpenInPlace(address): open a step's address (path, query and fragment) without loading the page of
// 456 blocks again (2-6 s on a busy 2-core machine, its configuration fetched anew): the address changes in place,
// the page reads it as a link (#open-this-address, deep_links.py), and a class's box redraws for the step
// (#class-refresh). Used by the Lesson panel's Next (lesson_open.js) and a class's followers (class_follow.js).
// Whether the page stayed (false: no in-place opener here, so the address is loaded anew).
() => {
  window.studioOpenInPlace = (address) => {
    const opener = document.getElementById('open-this-address');
    if (!opener) {
      window.location.assign(address);
      return false;
    }
    history.replaceState(null, '', address);
    opener.click();
    document.getElementById('class-refresh')?.click();
    return true;
  };
}
