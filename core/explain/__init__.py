"""Opening the model up: attention arithmetic (3.2.1), saliency, the inspection hooks; and why each part is there:
parts knocked out (3.1-3.5), the logit lens, teacher forcing against free running, calibration (5.4), contrast.

    import core.explain
    with core.explain.knocked_out(bundle, positions=False):
        core.translate(bundle, ["Zwei Hunde jagen eine Katze."])
"""
from .calibration import Calibration, calibration, compare_calibration
from .contrast import Contrast, contrast
from .free_running import FreeRunning, free_running
from .knockout import CLAIMS, Knockout, knocked_out
from .knockout_effect import CorpusEffect, Effect, corpus_effect, knockout_effect
from .logit_lens import LogitLens, layer_log_probs, logit_lens

__all__ = ["CLAIMS", "Calibration", "Contrast", "CorpusEffect", "Effect", "FreeRunning", "Knockout", "LogitLens",
           "calibration", "compare_calibration", "contrast", "corpus_effect", "free_running", "knocked_out",
           "knockout_effect", "layer_log_probs", "logit_lens"]
