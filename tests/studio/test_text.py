"""Text made safe to show (studio/text.py): user text escaped for Markdown, toasts and plots, and tables of
escaped one-line cells."""
from __future__ import annotations

import pytest

from studio import plots
from studio.text import info, md, md_table, warn


def test_user_text_is_escaped_for_markdown_toasts_and_plots(capsys):
    assert md("<img src=x>*bold*") == "&lt;img src=x&gt;\\*bold\\*"
    with pytest.warns(UserWarning, match="&lt;b&gt;x"):
        warn("<b>x")
    info("<b>ü")  # notices carry user text (unknown pieces); outside a request Gradio prints an info toast
    assert capsys.readouterr().out == "&lt;b&gt;ü\n"
    fig = plots.token_probabilities(["<eos>", "a"], [-0.1, -2.0])
    assert list(fig.layout.xaxis.ticktext) == ["&lt;eos&gt;", "a"]


def test_tables_are_markdown_with_escaped_one_line_cells():
    """A cell holding "|", a line break or markup stays one escaped cell of its own row."""
    table = md_table(["n", "text"], [[1, "a | b\n<i>c</i>"], [-2.5, ""]], numeric=(0,))
    lines = table.splitlines()
    assert lines[:2] == ["| n | text |", "| ---: | --- |"] and len(lines) == 4
    assert lines[2] == "| 1 | a \\| b &lt;i&gt;c&lt;/i&gt; |" and lines[3] == "| \\-2\\.5 |   |"
    markdown_it = pytest.importorskip("markdown_it")  # (Gradio draws Markdown in the browser; rich brings this)
    html_table = markdown_it.MarkdownIt("commonmark").enable("table").render(table)
    assert html_table.count("<tr>") == 3 and html_table.count("<td") == 4 and "<i>" not in html_table
    assert "<td>a | b &lt;i&gt;c&lt;/i&gt;</td>" in html_table
    assert md_table(["n"], [], caption="x <y>") == "x &lt;y&gt;\n\n| n |\n| --- |"  # an escaped caption above
