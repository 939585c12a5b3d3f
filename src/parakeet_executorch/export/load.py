"""Load a NeMo Parakeet TDT checkpoint (.nemo file or Hugging Face id) and read its decoding metadata."""

from __future__ import annotations

from pathlib import Path

from ..pte_format import ModelMetadata, tokenizer_fingerprint


class ModelLoadError(RuntimeError):
    """The checkpoint could not be loaded, or it is not a Parakeet-style TDT model."""


def check_model_source(model: str) -> None:
    """Check ``model`` as far as can be done without NeMo (importing it takes seconds): a local path must be an
    existing tar archive (a ``.nemo`` is one, written by NeMo's ``save_to``, compressed or not); anything else must
    look like a Hugging Face id (``owner/name``).

    Raises:
        ModelLoadError: a missing file, a file that is not a .nemo archive, or neither a path nor an id.
    """
    import tarfile

    path = Path(model)
    if model.endswith(".nemo") or path.exists():
        if not path.is_file():
            raise ModelLoadError(f"model file not found: {model}. Pass a .nemo file or a Hugging Face id.")
        if not tarfile.is_tarfile(path):
            raise ModelLoadError(
                f"{model} is not a .nemo checkpoint (a .nemo is a tar archive written by NeMo's save_to): pass "
                "the .nemo file itself, or a Hugging Face id such as nvidia/parakeet-tdt-0.6b-v3"
            )
    elif "/" not in model:
        raise ModelLoadError(
            f"--model {model!r} is neither an existing .nemo file nor a Hugging Face id such as "
            "nvidia/parakeet-tdt-0.6b-v3"
        )


def load_nemo_model(model: str):
    """Load a TDT ``ASRModel`` on CPU in eval mode.

    Args:
        model: path to a ``.nemo`` file, or a Hugging Face id such as ``nvidia/parakeet-tdt-0.6b-v3``
            (downloaded through NeMo's ``ASRModel.from_pretrained``).
    Raises:
        ModelLoadError: missing file, hub unreachable (the message names the id and says to pass a local .nemo),
            or a checkpoint that is not a TDT transducer.
    """
    check_model_source(model)
    from nemo.collections.asr.models import ASRModel

    path = Path(model)
    if model.endswith(".nemo") or path.exists():
        try:
            nemo_model = ASRModel.restore_from(str(path), map_location="cpu")
        except Exception as exc:
            raise ModelLoadError(f"cannot load {model} as a NeMo checkpoint: {exc}") from exc
    else:
        try:
            nemo_model = ASRModel.from_pretrained(model, map_location="cpu")
        except Exception as exc:
            raise ModelLoadError(
                f"could not download {model} from the Hugging Face hub ({type(exc).__name__}: {exc}). "
                f"Without hub access, pass a local checkpoint: --model /path/to/{model.split('/')[-1]}.nemo"
            ) from exc
    nemo_model.eval()
    check_tdt(nemo_model, model)
    return nemo_model


def check_tdt(nemo_model, name: str) -> None:
    """Raise ModelLoadError unless the model is a transducer with a TDT joint and an LSTM prediction network."""
    cfg = nemo_model.cfg
    if not hasattr(nemo_model, "joint") or not hasattr(nemo_model, "decoder"):
        raise ModelLoadError(f"{name} is not a transducer (RNN-T/TDT) model: it has no joint network")
    model_type = cfg.get("decoding", {}).get("model_type", None)
    if model_type != "tdt" or not cfg.decoding.get("durations"):
        raise ModelLoadError(
            f"{name} is not a TDT model (decoding.model_type={model_type!r}); "
            "this exporter supports Parakeet TDT checkpoints"
        )


def read_metadata(nemo_model, min_audio_seconds: float, max_audio_seconds: float) -> ModelMetadata:
    """Read decoding constants from a loaded NeMo TDT model (never hard-coded) into the .pte's ``ModelMetadata``.

    Args:
        min_audio_seconds, max_audio_seconds: the supported input range in seconds, rounded to whole hops.
    Raises:
        ModelLoadError: ``decoding.greedy.max_symbols`` is unset in the model's config.
    """
    pre_cfg = nemo_model.cfg.preprocessor
    featurizer = nemo_model.preprocessor.featurizer
    sample_rate = int(pre_cfg.sample_rate)
    hop = int(featurizer.hop_length)
    greedy = nemo_model.cfg.decoding.get("greedy", {}) or {}
    max_symbols = greedy.get("max_symbols", None)
    if max_symbols is None:
        raise ModelLoadError(
            "decoding.greedy.max_symbols is not set in the model config; a greedy TDT decoder needs a per-frame cap"
        )

    def samples(seconds: float) -> int:  # a whole number of hops, as the preprocessor method takes
        return max(hop, int(round(seconds * sample_rate / hop)) * hop)

    return ModelMetadata(
        sample_rate=sample_rate,
        window_stride=float(pre_cfg.window_stride),
        hop_length=hop,
        subsampling_factor=int(nemo_model.encoder.subsampling_factor),
        blank_id=int(nemo_model.decoder.blank_idx),
        vocab_size=int(nemo_model.tokenizer.vocab_size),
        durations=[int(d) for d in nemo_model.cfg.decoding.durations],
        num_lstm_layers=int(nemo_model.decoder.pred_rnn_layers),
        pred_hidden=int(nemo_model.decoder.pred_hidden),
        joint_hidden=int(nemo_model.joint.joint_hidden),
        max_symbols_per_step=int(max_symbols),
        num_mel_features=int(featurizer.nfilt),
        min_audio_samples=samples(min_audio_seconds),
        max_audio_samples=samples(max_audio_seconds),
        tokenizer_sha256=tokenizer_fingerprint(nemo_model.tokenizer.tokenizer.serialized_model_proto()),
    )
