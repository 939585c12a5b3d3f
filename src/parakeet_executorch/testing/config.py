"""Model configurations shaped like nvidia/parakeet-tdt-0.6b-v3, at several sizes.

``demo`` and ``demo2`` are the sizes of the trained demo models (``training/``), ``demo3`` a wider candidate.
``full`` has v3's exact dimensions (FastConformer 24 x 1024, 8 heads, FF 4096, conv kernel 9, 8x dw_striding
subsampling with 256 channels, rel_pos attention, no bias, no xscaling; LSTM prediction network 2 x 640; joint
640; 8192 tokens; TDT durations [0..4]). ``tiny`` and ``small`` keep every structural choice and shrink only
widths and depths, so code paths exercised by tests are the ones the real model takes.
"""

from __future__ import annotations

from dataclasses import dataclass

DURATIONS = [0, 1, 2, 3, 4]


@dataclass(frozen=True)
class ModelSize:
    n_layers: int
    d_model: int
    n_heads: int
    subsampling_channels: int
    pred_hidden: int
    joint_hidden: int
    vocab_size: int


SIZES = {
    "tiny": ModelSize(
        n_layers=2, d_model=64, n_heads=4, subsampling_channels=32, pred_hidden=64, joint_hidden=64, vocab_size=128
    ),
    "small": ModelSize(
        n_layers=6, d_model=256, n_heads=4, subsampling_channels=128, pred_hidden=320, joint_hidden=320, vocab_size=1024
    ),
    # The first trained demo model's size (a 352-word grammar; no longer shipped). Its width 112 is not a multiple
    # of 32, so group-32 recipes would leave its K = 112 linears in float.
    "demo": ModelSize(
        n_layers=6, d_model=112, n_heads=4, subsampling_channels=64, pred_hidden=128, joint_hidden=128, vocab_size=256
    ),
    # The shipped demo model (training/corpus.py: 5,000 words, three synthesizers, 20-40 s clips): 5.94 M parameters,
    # a 24.3 MB .nemo. Every linear's input width (128, 256, 512, 2048) is a multiple of 128, so every recipe
    # quantizes all of them; 1024 pieces for a 5,000-word vocabulary.
    "demo2": ModelSize(
        n_layers=10,
        d_model=128,
        n_heads=4,
        subsampling_channels=128,
        pred_hidden=256,
        joint_hidden=256,
        vocab_size=1024,
    ),
    # A wider candidate for the demo model (11.3 M parameters): twice demo2's width at six layers, so it fits the
    # repository's 25 MB only with its parameters stored in float16 (``parakeet-train-demo --save-dtype float16``;
    # NeMo restores them into float32). Widths 256, 1024 and 2048 are multiples of 128 for every recipe.
    "demo3": ModelSize(
        n_layers=6,
        d_model=256,
        n_heads=4,
        subsampling_channels=128,
        pred_hidden=256,
        joint_hidden=256,
        vocab_size=1024,
    ),
    "full": ModelSize(
        n_layers=24,
        d_model=1024,
        n_heads=8,
        subsampling_channels=256,
        pred_hidden=640,
        joint_hidden=640,
        vocab_size=8192,
    ),
}


def model_config(size: str, tokenizer_dir: str) -> dict:
    """NeMo ``EncDecRNNTBPEModel`` config (a plain dict for OmegaConf) for one of ``SIZES``.

    Args:
        size: a key of ``SIZES``.
        tokenizer_dir: folder holding ``tokenizer.model`` (SentencePiece BPE) and ``vocab.txt``.
    Raises:
        KeyError: unknown size.
    """
    s = SIZES[size]
    sample_rate = 16000
    data_stub = {"manifest_filepath": None, "sample_rate": sample_rate, "batch_size": 1, "shuffle": False}
    return {
        "sample_rate": sample_rate,
        "labels": None,
        "tokenizer": {"dir": tokenizer_dir, "type": "bpe"},
        # NeMo's transcribe() reads validation_ds to set up its dataloader; without it transcribe() fails.
        "train_ds": None,
        "validation_ds": dict(data_stub),
        "test_ds": None,
        "model_defaults": {
            "enc_hidden": s.d_model,
            "pred_hidden": s.pred_hidden,
            "joint_hidden": s.joint_hidden,
            "tdt_durations": DURATIONS,
            "num_tdt_durations": len(DURATIONS),
        },
        "preprocessor": {
            "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
            "sample_rate": sample_rate,
            "normalize": "per_feature",
            "window_size": 0.025,
            "window_stride": 0.01,
            "window": "hann",
            "features": 128,
            "n_fft": 512,
            "log": True,
            "frame_splicing": 1,
            "dither": 1e-05,
            "pad_to": 0,
            "pad_value": 0.0,
        },
        "spec_augment": None,
        "encoder": {
            "_target_": "nemo.collections.asr.modules.ConformerEncoder",
            "feat_in": 128,
            "feat_out": -1,
            "n_layers": s.n_layers,
            "d_model": s.d_model,
            "use_bias": False,
            "subsampling": "dw_striding",
            "subsampling_factor": 8,
            "subsampling_conv_channels": s.subsampling_channels,
            "causal_downsampling": False,
            "ff_expansion_factor": 4,
            "self_attention_model": "rel_pos",
            "n_heads": s.n_heads,
            "att_context_size": [-1, -1],
            "att_context_style": "regular",
            "xscaling": False,
            "untie_biases": True,
            "pos_emb_max_len": 5000,
            "conv_kernel_size": 9,
            "conv_norm_type": "batch_norm",
            "conv_context_size": None,
            "dropout": 0.1,
            "dropout_pre_encoder": 0.1,
            "dropout_emb": 0.0,
            "dropout_att": 0.1,
            "stochastic_depth_drop_prob": 0.0,
            "stochastic_depth_mode": "linear",
            "stochastic_depth_start_layer": 1,
        },
        "decoder": {
            "_target_": "nemo.collections.asr.modules.RNNTDecoder",
            "normalization_mode": None,
            "random_state_sampling": False,
            "blank_as_pad": True,
            "prednet": {"pred_hidden": s.pred_hidden, "pred_rnn_layers": 2, "t_max": None, "dropout": 0.2},
        },
        "joint": {
            "_target_": "nemo.collections.asr.modules.RNNTJoint",
            "log_softmax": None,
            "preserve_memory": False,
            "fuse_loss_wer": False,
            "fused_batch_size": 4,
            "jointnet": {"joint_hidden": s.joint_hidden, "activation": "relu", "dropout": 0.2},
            "num_extra_outputs": len(DURATIONS),
        },
        "decoding": {
            "strategy": "greedy_batch",
            "model_type": "tdt",
            "durations": DURATIONS,
            "greedy": {"max_symbols": 10},
        },
        "loss": {
            "loss_name": "tdt",
            "tdt_kwargs": {"fastemit_lambda": 0.0, "clamp": -1.0, "durations": DURATIONS, "sigma": 0.02, "omega": 0.1},
        },
        "optim": None,
    }
