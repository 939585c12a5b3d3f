"""Greedy TDT decoding rules, checked with a scripted joint whose answers we choose."""

from __future__ import annotations

import pytest

from parakeet_executorch.decoding.tdt_greedy import greedy_tdt_decode

BLANK = 9
DURATIONS = [0, 1, 2, 3, 4]


class Script:
    """A joint that answers from a table {(frame, visit): (token, duration)}; blank with duration 1 otherwise.

    ``visit`` counts the joint calls made so far at that frame. The prediction network records its calls.
    """

    def __init__(self, table=None, default=(BLANK, 1)):
        self.table = table or {}
        self.default = default
        self.visits: dict[int, int] = {}
        self.predicted: list[int] = []
        self.joint_calls = 0

    def joint(self, frame, prediction):
        self.joint_calls += 1
        visit = self.visits.get(frame, 0)
        self.visits[frame] = visit + 1
        token, duration = self.table.get((frame, visit), self.default)
        return token, DURATIONS.index(duration)

    def predict(self, token, state):
        self.predicted.append(token)
        return f"g{len(self.predicted)}", state + 1


def decode(script, frames, max_symbols=10):
    out = greedy_tdt_decode(frames, script.joint, script.predict, 0, BLANK, DURATIONS, max_symbols)
    return [(t.id, t.frame, t.duration) for t in out]


@pytest.mark.parametrize("duration", DURATIONS)
def test_token_lands_on_its_frame_and_advances_by_its_duration(duration):
    # Token 3 at frame 2 with the given duration, then token 4 on the next frame visited.
    s = Script({(2, 0): (3, duration)})
    next_frame = 2 + duration
    s.table[(next_frame, 1 if duration == 0 else 0)] = (4, 1)
    assert decode(s, 10) == [(3, 2, duration), (4, next_frame, 1)]


def test_blank_with_duration_zero_still_advances_one_frame():
    s = Script(default=(BLANK, 0))
    assert decode(s, 6) == []
    assert s.visits == {t: 1 for t in range(6)}


@pytest.mark.parametrize("duration", [2, 3, 4])
def test_blank_skips_frames_by_its_duration(duration):
    s = Script({(0, 0): (BLANK, duration), (duration, 0): (5, 1)})
    assert decode(s, 8) == [(5, duration, 1)]
    assert all(f not in s.visits for f in range(1, duration))


@pytest.mark.parametrize("max_symbols", [1, 2, 10])
def test_at_most_max_symbols_per_frame_then_forced_advance(max_symbols):
    s = Script(default=(7, 0))  # a joint that never says blank and never moves on
    frames = 4
    out = decode(s, frames, max_symbols)
    assert out == [(7, t, 0) for t in range(frames) for _ in range(max_symbols)]


def test_forced_advance_only_when_all_recent_tokens_stayed_on_the_frame():
    # Two zero-duration tokens at frame 0, then one that moves on: with max_symbols=3 no force is needed.
    s = Script({(0, 0): (1, 0), (0, 1): (2, 0), (0, 2): (3, 1), (1, 0): (4, 0), (1, 1): (5, 0), (1, 2): (6, 0)})
    assert decode(s, 2, max_symbols=3) == [(1, 0, 0), (2, 0, 0), (3, 0, 1), (4, 1, 0), (5, 1, 0), (6, 1, 0)]
    assert s.visits[1] == 3  # forced past frame 1 after its third token, not asked a fourth time


def test_prediction_network_primed_with_blank_then_called_once_per_token():
    s = Script({(0, 0): (1, 0), (0, 1): (2, 2), (3, 0): (BLANK, 1), (4, 0): (3, 1)})
    out = decode(s, 6)
    assert [t[0] for t in out] == [1, 2, 3]
    assert s.predicted == [BLANK, 1, 2, 3]


def test_loop_ends_when_a_duration_jumps_past_the_end():
    s = Script({(3, 0): (2, 4)})
    assert decode(s, 5) == [(2, 3, 4)]
    assert max(s.visits) == 3


def test_zero_frames_decode_to_nothing_but_still_prime():
    s = Script()
    assert decode(s, 0) == []
    assert s.predicted == [BLANK] and s.joint_calls == 0


def test_joint_returning_an_unknown_duration_index_is_an_error():
    def joint(frame, prediction):
        return 1, 7

    with pytest.raises(ValueError, match="duration index 7"):
        greedy_tdt_decode(3, joint, lambda t, s: (None, s), 0, BLANK, DURATIONS, 10)
