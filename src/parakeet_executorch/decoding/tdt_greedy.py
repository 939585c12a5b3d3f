"""Greedy TDT (token-and-duration transducer) decoding, one utterance at a time.

Mirrors NeMo's default TDT strategy ``greedy_batch`` — the label-looping decoder
``nemo.collections.asr.parts.submodules.transducer_decoding.tdt_label_looping.GreedyBatchedTDTLabelLoopingComputer``
(``torch_impl``) — for batch size 1:

1. The prediction network is primed with blank as the start symbol (NeMo's ``_SOS``), from a zero LSTM state.
2. At frame ``t`` the joint gives a token (argmax over the V + 1 token logits, blank last) and a duration (argmax
   over the duration logits, taken separately). Blank with duration 0 is treated as duration 1.
3. On blank, ``t`` advances by the duration and the joint is asked again with the same prediction output; the
   prediction network is not run and its state does not change.
4. On a non-blank token, the token is emitted at frame ``t`` with its duration, the prediction network advances
   on it, and ``t`` advances by the duration (0 keeps the frame).
5. When the last ``max_symbols`` tokens were all emitted at the current frame and the last duration was 0,
   ``t`` is forced forward by one frame. Decoding ends when ``t`` reaches the number of encoder frames.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

JointFn = Callable[[int, Any], "tuple[int, int]"]
PredictFn = Callable[[int, Any], "tuple[Any, Any]"]


@dataclass(frozen=True)
class DecodedToken:
    """One emitted token: its id, the encoder frame it was emitted at, and its predicted duration in frames."""

    id: int
    frame: int
    duration: int


def greedy_tdt_decode(
    num_frames: int,
    joint: JointFn,
    predict: PredictFn,
    initial_state: Any,
    blank_id: int,
    durations: Sequence[int],
    max_symbols: int | None,
) -> list[DecodedToken]:
    """Decode one utterance greedily with NeMo's label-looping TDT rules (see module docstring).

    Args:
        num_frames: number of valid encoder frames (``encoded_len``), >= 0.
        joint: ``joint(frame, prediction) -> (token_id, duration_index)``, argmax already taken on the
            separate token and duration slices of the joint output.
        predict: ``predict(token_id, state) -> (prediction, new_state)``, one prediction-network step;
            called once with ``blank_id`` to prime, then once per emitted token, never on blank.
        initial_state: the prediction network's initial (zero) state.
        blank_id: id of blank (= vocabulary size for Parakeet).
        durations: the model's duration values in frames, indexed by ``duration_index`` (e.g. [0, 1, 2, 3, 4]).
        max_symbols: at most this many tokens per frame before a forced advance; None for no limit.
    Returns:
        the emitted tokens in order, each with its frame and duration.
    Raises:
        ValueError: a duration index outside ``durations``, or ``max_symbols`` < 1.
    """
    if max_symbols is not None and max_symbols < 1:
        raise ValueError(f"max_symbols must be >= 1 or None, got {max_symbols}")
    prediction, state = predict(blank_id, initial_state)
    tokens: list[DecodedToken] = []
    t = 0
    last_token_frame = -1
    tokens_on_last_frame = 0
    while t < num_frames:
        label, duration = _step(joint, t, prediction, durations, blank_id)
        label_frame = t
        t += duration
        while label == blank_id and t < num_frames:
            label_frame = t
            label, duration = _step(joint, t, prediction, durations, blank_id)
            t += duration
        if label == blank_id:
            break  # ran past the last frame while looking for a token
        tokens.append(DecodedToken(label, label_frame, duration))
        if last_token_frame == label_frame:
            tokens_on_last_frame += 1
        else:
            last_token_frame, tokens_on_last_frame = label_frame, 1
        prediction, state = predict(label, state)
        if max_symbols is not None and t < num_frames and tokens_on_last_frame >= max_symbols and t == label_frame:
            t += 1
    return tokens


def _step(joint: JointFn, frame: int, prediction: Any, durations: Sequence[int], blank_id: int) -> tuple[int, int]:
    label, duration_index = joint(frame, prediction)
    if not 0 <= duration_index < len(durations):
        raise ValueError(f"joint returned duration index {duration_index}; the model has {len(durations)} durations")
    duration = int(durations[duration_index])
    if label == blank_id and duration == 0:
        duration = 1
    return int(label), duration
