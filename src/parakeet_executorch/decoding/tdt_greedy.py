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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

JointFn = Callable[[int, Any], "tuple[int, int]"]
PredictFn = Callable[[int, Any], "tuple[Any, Any]"]


@dataclass(frozen=True)
class DecodedToken:
    """One emitted token: its id, the encoder frame it was emitted at, and its predicted duration in frames."""

    id: int
    frame: int
    duration: int


@dataclass(frozen=True)
class TdtDecoderState:
    """Greedy TDT decoding state carried from one chunk of encoder frames to the next.

    The batch-size-1 counterpart of NeMo's ``BatchedLabelLoopingState`` (``label_looping_base.py``), which
    ``GreedyBatchedTDTLabelLoopingComputer.torch_impl`` takes as ``prev_batched_state`` and returns.

    Attributes:
        prediction: the prediction network's (projected) output for the last emitted token, or for blank at the start.
        lstm_state: the prediction network's state after that token.
        time_jump: encoder frames by which the last duration reached past the end of the chunk decoded last (>= 0);
            the next chunk starts decoding at this frame (NeMo's ``time_jumps``).
        decoded_frames: encoder frames decoded in earlier chunks: the absolute frame of the next chunk's frame 0
            (NeMo's ``decoded_lengths``).
    """

    prediction: Any
    lstm_state: Any
    time_jump: int = 0
    decoded_frames: int = 0


def initial_decoder_state(predict: PredictFn, initial_state: Any, blank_id: int) -> TdtDecoderState:
    """The state before any frame: the prediction network primed with blank (NeMo's ``_SOS``) from ``initial_state``."""
    prediction, state = predict(blank_id, initial_state)
    return TdtDecoderState(prediction, state)


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
    state = initial_decoder_state(predict, initial_state, blank_id)
    tokens, _ = greedy_tdt_decode_chunk(num_frames, joint, predict, state, blank_id, durations, max_symbols)
    return tokens


def greedy_tdt_decode_chunk(
    num_frames: int,
    joint: JointFn,
    predict: PredictFn,
    state: TdtDecoderState,
    blank_id: int,
    durations: Sequence[int],
    max_symbols: int | None,
) -> tuple[list[DecodedToken], TdtDecoderState]:
    """Decode one chunk of encoder frames, continuing from ``state``; NeMo's label-looping step with
    ``prev_batched_state`` (``GreedyBatchedTDTLabelLoopingComputer.torch_impl``) for batch size 1.

    Decoding starts at frame ``state.time_jump`` of the chunk and stops once the frame index reaches
    ``num_frames``; the frame index past the end becomes the next state's ``time_jump``. As in NeMo, the per-frame
    count behind the ``max_symbols`` rule starts afresh in each chunk.

    Args:
        num_frames: encoder frames of this chunk to decode (>= 0); ``joint`` is called with 0 .. num_frames - 1.
        joint, predict, blank_id, durations, max_symbols: as for ``greedy_tdt_decode``.
        state: the state after the previous chunk (``initial_decoder_state`` for the first one).
    Returns:
        (tokens with absolute frames: ``state.decoded_frames`` + the frame in this chunk, the state after the chunk).
        ``state`` itself is not modified, so a caller can decode ahead (a draft) and throw the result away.
    Raises:
        ValueError: a duration index outside ``durations``, or ``max_symbols`` < 1.
    """
    if max_symbols is not None and max_symbols < 1:
        raise ValueError(f"max_symbols must be >= 1 or None, got {max_symbols}")
    prediction, lstm_state = state.prediction, state.lstm_state
    offset = state.decoded_frames
    tokens: list[DecodedToken] = []
    t = state.time_jump
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
        tokens.append(DecodedToken(label, offset + label_frame, duration))
        if last_token_frame == label_frame:
            tokens_on_last_frame += 1
        else:
            last_token_frame, tokens_on_last_frame = label_frame, 1
        prediction, lstm_state = predict(label, lstm_state)
        if max_symbols is not None and t < num_frames and tokens_on_last_frame >= max_symbols and t == label_frame:
            t += 1
    return tokens, TdtDecoderState(prediction, lstm_state, t - num_frames, offset + num_frames)


def _step(joint: JointFn, frame: int, prediction: Any, durations: Sequence[int], blank_id: int) -> tuple[int, int]:
    label, duration_index = joint(frame, prediction)
    if not 0 <= duration_index < len(durations):
        raise ValueError(f"joint returned duration index {duration_index}; the model has {len(durations)} durations")
    duration = int(durations[duration_index])
    if label == blank_id and duration == 0:
        duration = 1
    return int(label), duration
