"""Transformer Studio core: the model of "Attention Is All You Need" and what trains,
decodes and evaluates it. No UI imports here.

    import core
    bundle = core.load_checkpoint("checkpoints/multi30k-de-en-small")
    core.translate(bundle, ["Ein Hund läuft."], beam_size=4)
    core.translate(bundle, ["Ein Hund läuft."], dtype="int8")  # faster, nearly the same (core.supported_dtypes())
    core.score(bundle, ["Ein Hund läuft."], ["A dog runs."])[0].token_logprobs
"""
from .bundle import ModelBundle
from .checkpoint import average_checkpoints, load_checkpoint, save_checkpoint
from .explain.arithmetic import AttentionArithmetic, attention_arithmetic
from .explain.saliency import alignment, attribution, cross_attention, rank_correlation
from .inference.options import DecodeOptions
from .inference.precision import supported_dtypes
from .inference.scoring import Score, score
from .inference.translation import Translation, translate, translate_detailed
from .model.cache import DecoderCache
from .model.config import PRESETS, SPECIAL_TOKENS, ModelConfig
from .model.positional import sinusoidal_encoding
from .model.transformer import Transformer
from .training.evaluation import EvalResult, TeacherForcedResult, evaluate_bleu, evaluate_bundle, teacher_forced_metrics

__version__ = "0.1.0"  # printed by `train_cli.py --version`, for bug reports

__all__ = ["__version__", "PRESETS", "SPECIAL_TOKENS", "ModelConfig", "DecoderCache", "Transformer",
           "sinusoidal_encoding",
           "ModelBundle", "load_checkpoint", "save_checkpoint", "average_checkpoints",
           "DecodeOptions", "supported_dtypes", "Translation", "translate", "translate_detailed",
           "EvalResult", "evaluate_bleu", "evaluate_bundle", "TeacherForcedResult", "teacher_forced_metrics",
           "Score", "score", "attribution", "alignment", "cross_attention", "rank_correlation",
           "AttentionArithmetic", "attention_arithmetic"]
