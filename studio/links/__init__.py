"""Links and lessons: a view of the studio as an address a lecturer can hand out (address), the page opened on one
(deep_links), and a lesson, a Markdown file of steps each with one such link (lesson), presented one step at a
time (lesson_panel; the shipped lesson is lessons/attention-is-all-you-need.md)."""
