"""NeMo's own buffered left | chunk | right decoding, the reference for ``runtime/buffered.py``.

Used by ``parakeet-eval-wer`` (the long recording through NeMo) and by the tests (token-exact comparison).
"""

from __future__ import annotations

import numpy as np
import torch


def nemo_buffered_tokens(nemo_model, audio: np.ndarray, left: int, chunk: int, right: int) -> list[tuple[int, int]]:
    """NeMo's own buffered left | chunk | right decoding of one 16 kHz waveform: [(token id, absolute frame)].

    Drives NeMo the way its ``speech_to_text_streaming_infer_rnnt.py`` does: the model's forward (preprocessor +
    encoder) on each window of at most ``left + chunk + right`` encoder frames of samples, the left context's
    frames dropped, and the label-looping decoding computer called on the chunk's whole frames with the previous
    call's ``prev_batched_state``. Context sizes are in encoder frames.
    """
    from nemo.collections.asr.parts.utils.rnnt_utils import batched_hyps_to_hypotheses

    fs = nemo_model.preprocessor.featurizer.hop_length * nemo_model.encoder.subsampling_factor
    computer = nemo_model.decoding.decoding.decoding_computer
    signal = torch.from_numpy(np.ascontiguousarray(audio, dtype=np.float32)).unsqueeze(0)
    total = signal.shape[1]
    window = (left + chunk + right) * fs
    out: list[tuple[int, int]] = []
    state = None
    buf = torch.zeros(1, 0)
    buf_left = buf_chunk = buf_right = 0
    start, end = 0, min((chunk + right) * fs, total)
    with torch.no_grad():
        while start < total:
            buf = torch.cat([buf, signal[:, start:end]], dim=1)
            added = end - start
            buf_left += buf_chunk
            buf_right += added
            if end >= total:
                buf_chunk, buf_right = buf_right, 0
            else:
                buf_chunk, buf_right = chunk * fs, buf_right - chunk * fs
            extra = max(0, buf.shape[1] - window)
            if extra:
                buf = buf[:, extra:]
                buf_left -= extra
            encoded, _ = nemo_model(input_signal=buf, input_signal_length=torch.tensor([buf.shape[1]]))
            encoded = encoded.transpose(1, 2)[:, buf_left // fs :]
            hyps, state = computer(x=encoded, out_len=torch.tensor([buf_chunk // fs]), prev_batched_state=state)
            hyp = batched_hyps_to_hypotheses(hyps, batch_size=1)[0]
            out.extend((int(i), int(t)) for i, t in zip(hyp.y_sequence.tolist(), hyp.timestamp.tolist()))
            start, end = end, min(end + chunk * fs, total)
    return out
