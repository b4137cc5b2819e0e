"""The studio's tests, in folders as studio/ is: tabs/, plots/, numbers/, links/, server/ and train/, each module's
tests named for it; the app, its shell and the page kit at the top, with the hostile-input and fuzzing suites;
browser/ drives the whole page in headless Chromium."""
