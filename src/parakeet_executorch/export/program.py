"""torch.export of the four methods, with the audio length dynamic over the supported range."""

from __future__ import annotations

import math
from contextlib import contextmanager, nullcontext

import torch
from torch.export import Dim, ExportedProgram, export

from ..pte_format import ModelMetadata
from .methods import DecoderStepMethod, EncoderMethod, JointMethod, PreprocessorMethod
from .preprocessor_rewrites import square_as_product, torch_order_normalization
from .xnnpack.encoder_forwards import xnnpack_friendly_encoder


@contextmanager
def _cpu_only_preprocessor():
    # NeMo's featurizer takes a different, data-dependent path when CUDA is present; export the CPU path.
    saved = torch.cuda.is_available
    torch.cuda.is_available = lambda: False
    try:
        yield
    finally:
        torch.cuda.is_available = saved


def export_methods(
    nemo_model,
    meta: ModelMetadata,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
    xnnpack_encoder: bool = False,
    encoder_report: dict | None = None,
) -> dict[str, ExportedProgram]:
    """Export ``preprocessor``, ``encoder``, ``decoder_step`` and ``joint`` (see ``methods.py`` for signatures).

    The preprocessor's input length is ``hop_length x k`` samples for k over the supported range; the encoder is
    exported with the longest supported input as its example so that ``Dim.AUTO`` keeps the whole range (a shorter
    example makes the upper bound too small and long audio then fails at run time).

    Args:
        nemo_model: loaded NeMo TDT model (eval mode).
        meta: the model's metadata (supported range, shapes).
        dtype: float dtype of encoder/decoder/joint inputs (the preprocessor always runs in float32).
        device: where the encoder, decoder and joint are traced ("cuda" for the CUDA backend).
        xnnpack_encoder: trace the encoder under ``xnnpack.encoder_forwards.xnnpack_friendly_encoder`` (the same
            maths in ops XNNPACK takes, so that it lowers in a few large partitions; NeMo's modules are restored
            after).
        encoder_report: with ``xnnpack_encoder``, receives what the rewrite precomputed (the ``report`` of
            ``xnnpack_friendly_encoder``).
    """
    programs = {}
    hop = meta.hop_length
    with torch.no_grad(), _cpu_only_preprocessor():
        pre = PreprocessorMethod(nemo_model.preprocessor).eval()
        max_samples = meta.max_audio_samples
        audio = torch.randn(max_samples) * 0.1
        frames = Dim("audio_hops", min=meta.min_audio_samples // hop, max=max_samples // hop)
        # NeMo's normalisation with its sums in PyTorch's float32 order (preprocessor_rewrites.py): on constant
        # mel bands (silence) the result is the rounding residue of those sums.
        with torch_order_normalization(max_frames=_max_feature_frames(nemo_model.preprocessor, max_samples)):
            programs["preprocessor"] = export(
                pre,
                (audio, torch.tensor([max_samples], dtype=torch.int64)),
                dynamic_shapes={"audio": {0: hop * frames}, "length": {}},
                strict=False,
            )
        square_as_product(programs["preprocessor"])
        features, feature_length = pre(audio, torch.tensor([max_samples], dtype=torch.int64))

    # The relative-position table must cover the longest input before tracing, or the encoder would try to
    # grow it at run time.
    nemo_model.encoder.set_max_audio_length(features.shape[-1] + 1)
    _fit_relative_positions(nemo_model.encoder, features.shape[-1])
    if dtype != torch.float32 or device != "cpu":
        nemo_model.to(device=device, dtype=dtype)
    with torch.no_grad():
        enc = EncoderMethod(nemo_model.encoder, nemo_model.joint).eval()
        friendly = xnnpack_friendly_encoder(
            nemo_model.encoder, report=encoder_report, max_feature_frames=features.shape[-1]
        )
        with friendly if xnnpack_encoder else nullcontext():
            programs["encoder"] = export(
                enc,
                (features.to(device=device, dtype=dtype), feature_length.to(device)),
                dynamic_shapes={"features": {2: Dim.AUTO}, "feature_length": {}},
                strict=False,
            )

        step = DecoderStepMethod(nemo_model.decoder, nemo_model.joint).eval()
        state = torch.zeros(meta.num_lstm_layers, 1, meta.pred_hidden, dtype=dtype, device=device)
        token = torch.tensor([[meta.blank_id]], dtype=torch.int64, device=device)
        programs["decoder_step"] = export(step, (token, state, state.clone()), strict=False)

        joint = JointMethod(nemo_model.joint, meta.vocab_size + 1).eval()
        frame = torch.randn(1, 1, meta.joint_hidden, dtype=dtype, device=device)
        programs["joint"] = export(joint, (frame, frame.clone()), strict=False)
    return programs


def _max_feature_frames(preprocessor, max_samples: int) -> int:
    """Feature frames of the longest supported waveform (the STFT's frame count, which the normaliser reduces)."""
    featurizer = preprocessor.featurizer
    pad = 2 * featurizer.stft_pad_amount if featurizer.stft_pad_amount is not None else featurizer.n_fft // 2 * 2
    return 1 + (max_samples + pad - featurizer.n_fft) // featurizer.hop_length


def _fit_relative_positions(encoder, max_feature_frames: int) -> None:
    """Shrink the relative-position table to what the longest input's encoder frames use.

    NeMo sizes ``RelPositionalEncoding.pe`` by feature frames (``pos_emb_max_len``, 5000 by default: 9999 x d_model
    floats), but attention runs after subsampling, on 8x fewer frames. The exported graph keeps the whole table as
    a constant: 4.5 MB of the demo model's .pte, 41 MB at v3's size. The table is rebuilt for positions
    L-1 .. -(L-1) with L the longest input's encoder frames; its rows are the same sin/cos values, and
    ``forward`` slices it around the centre, so the numbers the encoder sees do not change.
    """
    pos_enc = getattr(encoder, "pos_enc", None)
    if pos_enc is None or type(pos_enc).__name__ != "RelPositionalEncoding":
        return
    frames = max_feature_frames
    for _ in range(int(round(math.log2(encoder.subsampling_factor)))):
        frames = (frames + 1) // 2  # each stride-2 conv stage (kernel 3, padding 1) halves, rounding up
    length = frames + 1
    if pos_enc.pe.size(1) <= 2 * length - 1:
        return
    positions = torch.arange(length - 1, -length, -1, dtype=torch.float32, device=pos_enc.pe.device).unsqueeze(1)
    pos_enc.create_pe(positions=positions, dtype=pos_enc.pe.dtype)
