"""The checks a whole source or target passes before it enters the model: named errors for what torch would
report deep inside (nn.Embedding's "index out of range in self") or not at all (a left-padded row read as
starting further on, section 3.5; a row of padding only, whose softmax would be 0/0, eq. 1). They are not
part of the paper's model, and not run at each decoding step, whose tokens the model chose itself."""
from __future__ import annotations

import torch

from .config import ModelConfig


def checked_padding(ids: torch.Tensor, what: str, vocab_size: int, pad_id: int,
                    every_row_real: bool = False) -> torch.Tensor:
    """The padding mask of ids (batch, length), after the checks. They are read back together: on a GPU each
    read is a sync."""
    if ids.dim() != 2 or ids.size(1) == 0:
        raise ValueError(f"{what} must be a (batch, length) tensor of token ids with at least one "
                         f"token, got shape {tuple(ids.shape)}")
    if ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"{what} must hold integer token ids (torch.long), got {ids.dtype}")
    padding = ids.eq(pad_id)
    outside, all_padding, left_padded = torch.stack([
        ((ids < 0) | (ids >= vocab_size)).any(), padding.all(dim=1).any(),
        (padding[:, :-1] & ~padding[:, 1:]).any()]).tolist()
    if outside:
        raise ValueError(f"{what} holds token ids outside the vocabulary 0..{vocab_size - 1}")
    if every_row_real and all_padding:  # every key masked: eq. 1's softmax would be 0/0
        raise ValueError(f"a {what} row is all padding (pad_id {pad_id}); every {what} needs at least one real token")
    # Positions count from each row's first column (3.5): a left-padded sentence would be read as
    # starting further on, and a padded target's real tokens would see padding.
    if left_padded:
        raise ValueError(f"{what} must be right-padded: a real token follows padding (pad_id {pad_id})")
    return padding


def check_length(config: ModelConfig, ids: torch.Tensor, what: str, offset: int = 0) -> None:
    """ids (after offset tokens already seen) fit the model's max_len."""
    if offset + ids.size(1) > config.max_len:
        # Sinusoids exist for any position, but a model of learned positions (3.5) has none past max_len.
        fix = (" (its positions are learned: it has none past max_len)" if config.positional == "learned"
               else " or build the model with a larger max_len")
        raise ValueError(f"{what} length {offset + ids.size(1)} exceeds the model's max_len "
                         f"{config.max_len} tokens; shorten the input{fix}")
