"""The .pte contract: the methods a Parakeet TDT ``model.pte`` holds, their signatures, and its metadata.

The exporter (``export/``) writes exactly this, the Python runner (``runtime/pte_model.py``) reads exactly this,
and the C++ runner (``examples/parakeet/runner/pte_model.{h,cpp}``) keeps its own copy of the names, which
``tests/test_pte_format.py`` checks against these lists. Nothing here imports the rest of the package: the runtime
reads the contract without importing the exporter.

A .pte has four compute methods (batch size 1, see ``export/methods.py`` for the NeMo modules behind them):

==============  =============================================================  ===================================
method          inputs                                                         outputs
==============  =============================================================  ===================================
preprocessor    audio float32 [S] (16 kHz mono, S a multiple of the hop),      features float32 [1, F, T_mel],
                length int64 [1] (valid samples, <= S)                         feature_length int64 [1]
encoder         features float32 [1, F, T_mel], feature_length int64 [1]       encoded float32 [1, T_enc, J]
                                                                               (already projected for the joint),
                                                                               encoded_length int64 [1]
decoder_step    token int64 [1, 1], h float32 [L, 1, H], c float32 [L, 1, H]   prediction float32 [1, 1, J]
                                                                               (projected), h, c
joint           encoded frame float32 [1, 1, J], prediction [1, 1, J]          token int64 [1], duration_index
                                                                               int64 [1]
==============  =============================================================  ===================================

(float32 is the export's float dtype: a ``--dtype bf16`` export takes and returns bfloat16 in encoder, decoder_step
and joint; the preprocessor is always float32.) Each field of ``ModelMetadata`` is one more method, a constant
method without inputs returning the value.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a method: ``name``, ``dtype`` ("float32" or "int64"; float32 means the export's
    float dtype, see the module docstring) and ``shape`` in the symbols of the module docstring's table."""

    name: str
    dtype: str
    shape: str


@dataclass(frozen=True)
class MethodSignature:
    """A compute method of the .pte: its name, its inputs and outputs in call order."""

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]


_F32, _I64 = "float32", "int64"

METHODS: tuple[MethodSignature, ...] = (
    MethodSignature(
        "preprocessor",
        (TensorSpec("audio", _F32, "[S]"), TensorSpec("length", _I64, "[1]")),
        (TensorSpec("features", _F32, "[1, F, T_mel]"), TensorSpec("feature_length", _I64, "[1]")),
    ),
    MethodSignature(
        "encoder",
        (TensorSpec("features", _F32, "[1, F, T_mel]"), TensorSpec("feature_length", _I64, "[1]")),
        (TensorSpec("encoded", _F32, "[1, T_enc, J]"), TensorSpec("encoded_length", _I64, "[1]")),
    ),
    MethodSignature(
        "decoder_step",
        (TensorSpec("token", _I64, "[1, 1]"), TensorSpec("h", _F32, "[L, 1, H]"), TensorSpec("c", _F32, "[L, 1, H]")),
        (
            TensorSpec("prediction", _F32, "[1, 1, J]"),
            TensorSpec("h", _F32, "[L, 1, H]"),
            TensorSpec("c", _F32, "[L, 1, H]"),
        ),
    ),
    MethodSignature(
        "joint",
        (TensorSpec("encoded_frame", _F32, "[1, 1, J]"), TensorSpec("prediction", _F32, "[1, 1, J]")),
        (TensorSpec("token", _I64, "[1]"), TensorSpec("duration_index", _I64, "[1]")),
    ),
)
# The compute methods every .pte has, in the order above.
REQUIRED_METHODS: tuple[str, ...] = tuple(m.name for m in METHODS)
# The compute methods a backend delegates; the preprocessor always runs on the portable kernels.
COMPUTE_METHODS: tuple[str, ...] = ("encoder", "decoder_step", "joint")


@dataclass
class ModelMetadata:
    """Constants the runners need, read from the NeMo model and stored in the .pte as constant methods.

    Units: ``sample_rate`` Hz; ``window_stride`` seconds per feature frame; ``hop_length`` samples per feature
    frame; ``subsampling_factor`` feature frames per encoder frame; ``min/max_audio_samples`` the supported
    input range in samples; ``tokenizer_sha256`` the hex SHA-256 of the tokenizer's serialized SentencePiece model
    (``tokenizer_fingerprint``), so that the runners can refuse another export's tokenizer of the same size.

    Fields marked ``optional`` were added after the first exports: a .pte without them still loads, with the
    default ("" = unknown).
    """

    sample_rate: int
    window_stride: float
    hop_length: int
    subsampling_factor: int
    blank_id: int
    vocab_size: int
    durations: list[int] = field(default_factory=list)
    num_lstm_layers: int = 0
    pred_hidden: int = 0
    joint_hidden: int = 0
    max_symbols_per_step: int = 0
    num_mel_features: int = 0
    min_audio_samples: int = 0
    max_audio_samples: int = 0
    tokenizer_sha256: str = field(default="", metadata={"optional": True})

    def constant_methods(self) -> dict:
        """The metadata as ExecuTorch constant methods (name -> int, float or list of ints)."""
        return asdict(self)

    def padded_samples(self, n: int) -> int:
        """Samples the preprocessor method takes for ``n`` samples of audio: whole hops, at least its traced minimum.

        The zeros added past ``n`` lie past the length given with them, where NeMo's featurizer masks them out,
        exactly as batch padding does in NeMo (``AudioToMelSpectrogramPreprocessor``).
        """
        return max(-(-n // self.hop_length) * self.hop_length, self.min_audio_samples)


# The metadata's constant methods, in field order, and those a .pte may lack (added by later exports).
METADATA_METHODS: tuple[str, ...] = tuple(ModelMetadata.__dataclass_fields__)
OPTIONAL_METADATA: tuple[str, ...] = tuple(
    name for name, f in ModelMetadata.__dataclass_fields__.items() if f.metadata.get("optional")
)


def tokenizer_fingerprint(serialized_model_proto: bytes) -> str:
    """Hex SHA-256 of a SentencePiece model's serialized proto (what ``tokenizer.model`` holds as exported)."""
    return _sha256(serialized_model_proto).hexdigest()


def _sha256(data: bytes):
    """``hashlib.sha256(data)`` without hashlib: hashlib maps OpenSSL's libcrypto, 3.6 MiB of resident pages in a
    runner that hashes one small tokenizer at load. CPython's own SHA-256 module (the one hashlib falls back to
    without OpenSSL; ``_sha2`` from 3.12, ``_sha256`` before) gives the same digest."""
    try:
        from _sha2 import sha256
    except ImportError:
        try:
            from _sha256 import sha256
        except ImportError:
            from hashlib import sha256
    return sha256(data)
