"""A lesson step's question (issue 64): the class answers before the model shows its own answer.

A step asks with one line among its notes:

    Ask token "dogs": Writing "dogs", which German word does the decoder look at most?
    Ask choice: Which translation will beam search keep?
    Ask number "snow": How sure is the model of "snow", in percent?

- ``token "W"``: the class picks one of the step's source tokens; the model's answer is the source token that the
  cross-attention weighs most while the decoder writes W (the link's layer and head; without them the last layer,
  its heads' mean);
- ``choice``: the class picks one of the model's n-best translations (the link's beam, 4 without one), shown in
  alphabetical order so that their rank gives nothing away; the model's answer is the one beam search keeps;
- ``number "W"``: the class types a percentage; the model's answer is the probability it gave W in its translation.

W is a word of the model's translation (matched without case or punctuation, or as a word's beginning). The
answers are computed from the model (``asked``), never written in the lesson. No Gradio here.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import core
from core.explain.hooks import attention_maps
from core.inference.options import DecodeOptions
from core.inference.scoring import prepare_pair

from ..server import slots
from .address import View

ASK = re.compile(r'^Ask (token|choice|number)(?: "([^"]{1,40})")?: (.{1,300})$')
NUMBER_BINS = 10  # a number's answers drawn in bins of 10 percentage points
DEFAULT_BEAM, DEFAULT_ALPHA = 4, 0.6  # what a link without beam or alpha translates with (the Translate tab's)


@dataclass(frozen=True)
class Question:
    kind: str  # "token", "choice" or "number"
    word: str | None  # the target word a token or number question is about
    prompt: str


@dataclass(frozen=True)
class Asked:
    """A question put to the model: what the class may answer (options; none for a number) and the model's answer,
    with a sentence saying where it comes from."""
    question: Question
    options: tuple[str, ...]
    answer: str | float
    why: str


def parse_ask(line: str) -> Question | None:
    """The question a lesson line asks (None: the line is not an Ask line); ValueError when it starts as one but is
    not of the form."""
    if not line.startswith("Ask "):
        return None
    found = ASK.match(line.strip())
    if found is None:
        raise ValueError('an Ask line is \'Ask token "word": ...\', \'Ask choice: ...\' or \'Ask number "word": ...\'')
    kind, word, prompt = found.groups()
    if (kind == "choice") != (word is None):
        said = "takes no word" if kind == "choice" else 'needs the word it asks about, as Ask %s "snow": ...' % kind
        raise ValueError(f"an Ask {kind} line {said}")
    return Question(kind, word, prompt.strip())


def _word(token: str) -> str:
    """A token as a word to match: no word-start marker, case or surrounding punctuation."""
    return token.replace("\u2581", " ").strip().strip(".,!?;:\"'()").lower()


def position_of(word: str, tokens: list[str]) -> int:
    """The first of tokens that is word (or begins it); ValueError naming the translation when none is."""
    wanted = _word(word)
    for exact in (True, False):
        for i, token in enumerate(tokens):
            if (_word(token) == wanted) if exact else (_word(token).startswith(wanted) and wanted):
                return i
    raise ValueError(f"the model's translation ({' '.join(_word(t) for t in tokens)}) has no word {word!r}")


def labels(tokens: list[str]) -> tuple[str, ...]:
    """Source tokens as options: readable, and a token that comes twice numbered ("the", "the (2)")."""
    seen: dict[str, int] = {}
    out = []
    for token in tokens:
        text = token.replace("\u2581", "").strip() or token
        seen[text] = seen.get(text, 0) + 1
        out.append(text if seen[text] == 1 else f"{text} ({seen[text]})")
    return tuple(out)


def asked(bundle: object, question: Question, view: View) -> Asked:
    """question put to the model of bundle on the step's view (its sentence, layer, head, beam)."""
    if not view.source:
        raise ValueError("a lesson step that asks needs a sentence (source=...) in its link")
    beam = view.beam or DEFAULT_BEAM
    options = DecodeOptions(beam_size=beam, alpha=DEFAULT_ALPHA if view.alpha is None else view.alpha, n_best=beam)
    with slots.heavy():
        translation = core.translate_detailed(bundle, [view.source], options)[0]
        if question.kind == "token":
            return _looked_at(bundle, question, view, translation)
    if question.kind == "choice":
        texts = tuple(sorted({text for text, _ in translation.n_best}))
        return Asked(question, texts, translation.text, f"Beam search (beam {beam}) kept “{translation.text}”, "
                                                        f"the best of its {len(texts)} finished hypotheses.")
    at = position_of(question.word, translation.tokens)
    percent = round(100 * math.exp(translation.token_logprobs[at]), 1)
    return Asked(question, (), percent, f"The model gave “{_word(translation.tokens[at])}” {percent:g}% "
                                        f"in “{translation.text}”.")


def _looked_at(bundle: object, question: Question, view: View, translation: object) -> Asked:
    """The source token the cross-attention weighs most while the decoder writes the question's word."""
    at = position_of(question.word, translation.tokens)
    pair = prepare_pair(bundle, view.source, translation.ids)  # the pair as the Attention tab teacher forces it
    cross = attention_maps(bundle.model, pair.src, pair.tgt_in)["cross"]  # (layers, heads, target, source)
    layer = min(view.layer or len(cross), len(cross)) - 1
    head = None if view.head is None else min(view.head, cross.shape[1]) - 1
    weights = (cross[layer, :, at] if head is None else cross[layer, head:head + 1, at]).double().mean(0).tolist()
    options = labels(pair.source_tokens)
    best = max(range(len(weights)), key=weights.__getitem__)
    where = f"layer {layer + 1}'s " + ("heads' mean" if head is None else f"head {head + 1}")
    return Asked(question, options, options[best], f"Writing “{_word(translation.tokens[at])}”, the cross-attention "
                                                   f"({where}) puts {weights[best]:.1%} on “{options[best]}”.")


def checked(asked: Asked, value: object) -> str | float:
    """An answer as the class's tally keeps it; ValueError in one line when it is not one of the options (a
    number: not a percentage)."""
    if asked.question.kind != "number":
        if not isinstance(value, str) or value not in asked.options:
            raise ValueError("pick one of the answers shown")
        return value
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError("type a number from 0 to 100") from None
    if not (math.isfinite(number) and 0 <= number <= 100):
        raise ValueError("type a number from 0 to 100")
    return number


def bins() -> tuple[str, ...]:
    """A number's answers' bins, as the histogram labels them."""
    width = 100 // NUMBER_BINS
    return tuple(f"{low}–{low + width}" for low in range(0, 100, width))


def tally(asked: Asked, answers: list[str | float]) -> tuple[tuple[str, ...], list[int]]:
    """The room's answers counted per option (a number's per bin), in the options' order."""
    names = asked.options if asked.question.kind != "number" else bins()
    counts = [0] * len(names)
    for value in answers:
        if isinstance(value, str):
            counts[names.index(value)] += 1
        else:
            counts[min(int(value // (100 / NUMBER_BINS)), NUMBER_BINS - 1)] += 1
    return names, counts


def answer_label(asked: Asked) -> str:
    """The model's answer as the tally names it: its option, or its number's bin."""
    if isinstance(asked.answer, str):
        return asked.answer
    return bins()[min(int(asked.answer // (100 / NUMBER_BINS)), NUMBER_BINS - 1)]
