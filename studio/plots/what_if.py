"""The What if tab's views of a scored target: each token coloured by the probability the model gives
it (HTML, so the tokens wrap like text), with its rank and the model's own choice where it differs,
and the same numbers as a bar chart (hover: the model's top choices).

Probabilities are drawn with viridis, a scale that reads the same to the common colour-blindnesses
and in greyscale; a token's text is black or white, whichever contrasts with its colour.
"""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from .layout import hover_text, shown, styled, token_axis, word_start_note

PROBABILITY_SCALE = "Viridis"
LEGEND_STOPS = (0.0, 0.25, 0.5, 0.75, 1.0)


def probability_colour(p: float) -> tuple[str, str]:
    """(background, text colour) for a probability: viridis, and black on its light end, white on its dark."""
    rgb = plotly.colors.sample_colorscale(PROBABILITY_SCALE, [min(max(float(p), 0.0), 1.0)])[0]
    r, g, b = (int(v) / 255 for v in rgb[4:-1].split(","))
    # Relative luminance (WCAG): above ~0.18, black text contrasts more than white.
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    return rgb, "#000" if luminance > 0.18 else "#fff"


def _chip(token: str, logprob: float, rank: int, best: tuple[str, float] | None) -> str:
    p = float(np.exp(logprob))
    background, ink = probability_colour(p)
    text = html.escape(shown(token))
    facts = f"{p:.2f} · #{rank:,}"
    said = f"{shown(token)}: probability {p:.3f}, rank {rank:,}"
    preferred = ""
    if rank > 1 and best is not None:
        preferred = (f'<span class="chip-preferred">model: {html.escape(shown(best[0]))} '
                     f'{best[1]:.2f}</span>')
        said += f"; the model's first choice there: {shown(best[0])}, {best[1]:.3f}"
    return (f'<span class="token-chip" role="listitem" title="{html.escape(said, quote=True)}">'
            f'<span class="chip-token" style="background:{background};color:{ink}">{text}</span>'
            f'<span class="chip-facts">{facts}</span>{preferred}</span>')


def token_chips(tokens: Sequence[str], logprobs: Sequence[float], ranks: Sequence[int],
                alternatives: Sequence[Sequence[tuple[str, float]]], label: str) -> str:
    """The target as coloured tokens (all text escaped), a legend above them; label names the list to a
    screen reader."""
    chips = "".join(_chip(t, lp, r, alt[0] if alt else None)
                    for t, lp, r, alt in zip(tokens, logprobs, ranks, alternatives))
    return (f'{legend()}<div class="token-chips" role="list" aria-label="{html.escape(label, quote=True)}">'
            f"{chips}</div>")


def legend() -> str:
    """The colour scale with its stops, and what the numbers under each token are."""
    stops = ", ".join(f"{probability_colour(p)[0]} {p:.0%}" for p in np.linspace(0, 1, 11))
    ticks = "".join(f"<span>{p:g}</span>" for p in LEGEND_STOPS)
    return ('<div class="chip-legend" aria-hidden="true">'
            f'<div class="chip-ramp" style="background:linear-gradient(to right, {stops})"></div>'
            f'<div class="chip-ticks">{ticks}</div></div>'
            '<p class="chip-key">Colour and first number: the probability the model gives the token, given the '
            "source and the tokens before it (teacher forcing). #n: its rank among the model's choices there "
            "(#1: its own first choice). Under a token ranked below #1: what the model would have written "
            "instead, and its probability.</p>")


def target_probabilities(tokens: Sequence[str], logprobs: Sequence[float], ranks: Sequence[int],
                         alternatives: Sequence[Sequence[tuple[str, float]]], title: str) -> go.Figure:
    """One bar per target token (<eos> last): its probability, in the chips' colours; hover: its rank
    and the model's top choices there."""
    probs = np.exp(np.asarray(logprobs, dtype=float))
    top = ["<br>".join(f"{hover_text(t)} {p:.3f}" for t, p in alt) for alt in alternatives]
    fig = go.Figure(go.Bar(
        x=list(range(len(tokens))), y=probs,
        marker=dict(color=probs, colorscale=PROBABILITY_SCALE, cmin=0, cmax=1, line=dict(color="#333", width=1),
                    colorbar=dict(title="p", thickness=12, tickvals=list(LEGEND_STOPS))),
        customdata=[[hover_text(t), f"{lp:.3f}", r, alt] for t, lp, r, alt in zip(tokens, logprobs, ranks, top)],
        hovertemplate=("%{customdata[0]}<br>p = %{y:.3f}, log p = %{customdata[1]}<br>rank %{customdata[2]}"
                       "<br><b>the model's top choices</b><br>%{customdata[3]}<extra></extra>")))
    fig.update_xaxes(token_axis(tokens, tickangle=-45))
    fig.update_yaxes(range=[0, 1.02], title="p(token | tokens before, source)")
    return styled(fig, f"{title}{word_start_note(tokens)}", 380)
