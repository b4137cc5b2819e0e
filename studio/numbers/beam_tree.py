"""The Beam search tab's numbers (section 6.1's beam, a step at a time): the decoding options a search runs with,
every hypothesis considered laid out as a tree, and the live and finished hypotheses as table rows. No Gradio here:
a notebook draws the same tree (studio/notebook/sentence.py)."""
from __future__ import annotations

from core.inference.options import DecodeOptions
from core.inference.stepwise_beam import HypothesisView, StepView

from .. import plots

# The search tree's pruned children lie within this much of a row below their parent: the upper quarter
# of the gap, clear of the next row's word, written above its node (at 0.6 a wide beam's marks touched it).
PRUNED_FAN = 0.25


def decode_options(beam_size: int, alpha: float, penalty: str, max_extra: float) -> DecodeOptions:
    """A search's settings as the tab takes them: max_extra output tokens past the source's length, one best."""
    return DecodeOptions(method="beam", beam_size=beam_size, alpha=float(alpha), length_penalty=penalty,
                         max_len_b=int(max_extra), n_best=1)


def tree_nodes(views: list[StepView]) -> list[dict]:
    """Every hypothesis considered so far as a node with a y position in rows."""
    root = {"key": (), "step": 0, "token": "<bos>", "status": "root", "token_logprob": 0.0, "logprob": 0.0,
            "score": 0.0}
    nodes, children = {(): root}, {(): []}
    for t in range(1, len(views)):
        parents = views[t - 1].live
        for c in views[t].candidates:
            parent = tuple(parents[c.parent].ids)
            key = parent + (c.token_id,)
            nodes[key] = {"key": key, "step": t, "token": c.token, "status": c.status,
                          "token_logprob": c.token_logprob, "logprob": c.logprob, "score": c.score}
            children.setdefault(parent, []).append(key)
            children.setdefault(key, [])
    y = -1.0

    def place(key: tuple) -> float:
        """Lay out key's subtree in the rows below those used so far: key sits on its best kept
        child's line (a chain of kept hypotheses is one straight line), its other kept children
        below it, each on a row of its own; pruned children, unlabelled, fan out just below key."""
        nonlocal y
        kids = sorted(children[key], key=lambda k: -nodes[k]["logprob"])
        kept = [k for k in kids if nodes[k]["status"] != "pruned"]
        if kept:
            nodes[key]["y"] = place(kept[0])
            for kid in kept[1:]:
                place(kid)
        else:
            y += 1
            nodes[key]["y"] = y
        pruned = [k for k in kids if nodes[k]["status"] == "pruned"]
        for i, kid in enumerate(pruned, 1):
            nodes[kid]["y"] = nodes[key]["y"] + PRUNED_FAN * i / len(pruned)
        return nodes[key]["y"]

    place(())
    for node in nodes.values():
        node["parent_y"] = nodes[node["key"][:-1]]["y"] if node["key"] else None
    return list(nodes.values())


def hypotheses(view: StepView) -> list[tuple[str, HypothesisView]]:
    """The step's live and finished hypotheses, each with its name in the table ("live 1", "finished 2")."""
    return [(f"live {i + 1}", h) for i, h in enumerate(view.live)] + \
           [(f"finished {i + 1}", h) for i, h in enumerate(view.finished)]


def table(view: StepView) -> list[list]:
    """A row per hypothesis: its name, cumulative log-probability, normalised score and tokens."""
    return [[name, f"{h.logprob:.4f}", f"{h.score:.4f}",
             " ".join(plots.shown(t) for t in h.tokens)] for name, h in hypotheses(view)]
