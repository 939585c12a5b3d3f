"""The test-model builder: v3's published shape at ``full`` size, NeMo's classes, a working tokenizer."""

from __future__ import annotations

from parakeet_executorch.testing.config import model_config


def test_full_config_has_parakeet_tdt_v3_dimensions():
    # Published for nvidia/parakeet-tdt-0.6b-v3: FastConformer 24 x 1024, 8 heads, FF 4096, conv kernel 9 with
    # BatchNorm, rel-pos attention, 8x dw_striding subsampling with 256 channels, no bias, no xscaling, 128 mels,
    # LSTM 2 x 640, joint 640, 8192 tokens (blank 8192), durations 0..4, max 10 symbols per frame.
    cfg = model_config("full", "/tmp/tok")
    enc = cfg["encoder"]
    assert (enc["n_layers"], enc["d_model"], enc["n_heads"], enc["d_model"] * enc["ff_expansion_factor"]) == (
        24,
        1024,
        8,
        4096,
    )
    assert (enc["conv_kernel_size"], enc["conv_norm_type"], enc["self_attention_model"]) == (9, "batch_norm", "rel_pos")
    assert (enc["subsampling"], enc["subsampling_factor"], enc["subsampling_conv_channels"]) == ("dw_striding", 8, 256)
    assert enc["use_bias"] is False and enc["xscaling"] is False and enc["feat_in"] == 128
    assert cfg["preprocessor"]["features"] == 128 and cfg["preprocessor"]["sample_rate"] == 16000
    assert cfg["decoder"]["prednet"] == {"pred_hidden": 640, "pred_rnn_layers": 2, "t_max": None, "dropout": 0.2}
    assert cfg["joint"]["jointnet"]["joint_hidden"] == 640 and cfg["joint"]["num_extra_outputs"] == 5
    assert cfg["decoding"]["durations"] == [0, 1, 2, 3, 4] and cfg["decoding"]["greedy"]["max_symbols"] == 10
    assert cfg["validation_ds"] is not None  # NeMo's transcribe() needs it


def test_tiny_model_is_a_nemo_tdt_model_with_blank_equal_to_vocab(nemo_model):
    from nemo.collections.asr.models import EncDecRNNTBPEModel

    assert isinstance(nemo_model, EncDecRNNTBPEModel)
    assert nemo_model.decoder.blank_idx == nemo_model.tokenizer.vocab_size == 128
    assert nemo_model.joint.joint_net[-1].out_features == 128 + 1 + 5  # V tokens, blank, 5 durations
    assert type(nemo_model.decoder.prediction["dec_rnn"].lstm).__name__ == "LSTM"
