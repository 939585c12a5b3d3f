"""Quantization recipes: each .pte computes what the same quantized model computes eagerly in NeMo."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from nemo_reference import nemo_transcribe, runner_result
from parakeet_executorch.export.recipe_registry import get_recipe
from parakeet_executorch.export.recipes import RecipeError, check_recipe, quantize_model

from conftest import SAMPLE_RATE, export_tiny, make_transcriber

# (recipe, backend) pairs that run on this machine.
RUNNABLE = [
    ("8da4w", "xnnpack"),
    ("8da8w", "xnnpack"),
    ("8w", "portable"),
    ("fpa4w", "xnnpack"),
    ("fpa4w", "portable"),
    ("fpa8w", "xnnpack"),
]


def eager_quantized(tiny_nemo, recipe):
    from parakeet_executorch.export.load import load_nemo_model

    model = load_nemo_model(str(tiny_nemo))
    quantize_model(model, recipe, recipe)
    return model.eval()


@dataclass(frozen=True)
class JointComparison:
    """Per-frame comparison of the .pte's joint token argmax with the eager joint's.

    Attributes:
        agreement: fraction of encoder frames where both pick the same token.
        margins: per frame, eager's logit of its own choice minus its best other logit (>= 0), shape [frames].
        flips: ``(frame, eager margin over the .pte's choice)`` for each frame where they differ.
    """

    agreement: float
    margins: np.ndarray
    flips: list[tuple[int, float]]

    def flip_margin_percentiles(self) -> list[float]:
        """Per flipped frame, the share of all frames (in %) whose eager margin is at most the flip's."""
        return [float((self.margins <= m).mean() * 100) for _, m in self.flips]


def joint_argmax_agreement(transcriber, model, audio, ref_tokens) -> float:
    """Fraction of encoder frames where the .pte's joint and the eager joint pick the same token."""
    return compare_joint_argmax(transcriber, model, audio, ref_tokens).agreement


def compare_joint_argmax(transcriber, model, audio, ref_tokens) -> JointComparison:
    """Compare the .pte's joint token argmax with the eager joint's on every encoder frame.

    Each frame is scored in the context eager greedy decoding gives it: the prediction network has consumed the
    tokens that eager NeMo emitted before that frame (``ref_tokens``: ``nemo_transcribe``'s (start_offset, ...)
    per token, in order). Both sides consume the same token history (teacher forcing), so one flip does not
    shift every later frame's context, and every frame, including those a duration jumps over, is scored.
    """
    n = len(audio)
    meta = transcriber.model.metadata
    pte = transcriber.model
    wave = torch.zeros(-(-n // meta.hop_length) * meta.hop_length)
    wave[:n] = torch.from_numpy(audio)
    features, flen = pte.preprocessor(wave, n)
    encoded, frames = pte.encoder(features, flen)
    history = [(offset, token) for (offset, *_), token in zip(ref_tokens["tokens"], ref_tokens["ids"])]
    with torch.no_grad():
        f, fl = model.preprocessor(input_signal=torch.from_numpy(audio)[None], length=torch.tensor([n]))
        e, el = model.encoder(audio_signal=f, length=fl)
        pe = model.joint.project_encoder(e.transpose(1, 2))
        assert int(el) == frames
        g, state = model.decoder.predict(None, None, add_sos=False, batch_size=1)
        ref_predictions = [model.joint.project_prednet(g)]
        for _, token in history:
            g, state = model.decoder.predict(torch.tensor([[token]]), state, add_sos=False, batch_size=1)
            ref_predictions.append(model.joint.project_prednet(g))
    prediction, pstate = pte.decoder_step(meta.blank_id, pte.initial_state())
    our_predictions = [prediction]
    for _, token in history:
        prediction, pstate = pte.decoder_step(token, pstate)
        our_predictions.append(prediction)
    agree, k = 0, 0
    margins, flips = [], []
    for t in range(frames):
        while k < len(history) and history[k][0] < t:
            k += 1  # tokens emitted at earlier frames are in this frame's context
        ours = pte.joint(encoded[:, t : t + 1].contiguous(), our_predictions[k])[0]
        with torch.no_grad():
            logits = model.joint.joint_after_projection(pe[:, t : t + 1], ref_predictions[k])[0, 0, 0]
        token_logits = logits[: meta.vocab_size + 1]
        top2 = token_logits.topk(2).values
        margins.append(float(top2[0] - top2[1]))
        if ours == int(token_logits.argmax()):
            agree += 1
        else:
            flips.append((t, float(token_logits.max() - token_logits[ours])))
    return JointComparison(agree / frames, np.array(margins), flips)


# Weight-only recipes compute with float activations, so the .pte follows eager NeMo closely enough for equal
# transcripts. Dynamic-activation recipes (8da*) round every activation to int8: one lowered linear equals eager
# within ~1e-6 (test_lowered_linear_equals_eager), but XNNPACK's float ops differ from PyTorch's by ~1e-6, which
# sometimes moves an activation across an int8 rounding step. The random-weight tiny model has near-ties on many
# frames, so a few frames change their argmax (measured 99.2 % for both 8da4w and 8da8w with the decoding context)
# and the transcript can diverge after the first flipped token. For them this test requires >= 99 %; the trained
# demo model below holds every recipe to >= 99.5 %, and its flips to near-ties with local effect.
MIN_AGREEMENT = {"8w": 0.995, "fpa4w": 0.995, "fpa8w": 0.995, "8da4w": 0.99, "8da8w": 0.99}
SAME_TRANSCRIPT = {"8w", "fpa4w", "fpa8w"}


@pytest.mark.parametrize("recipe, backend", RUNNABLE)
def test_recipe_pte_matches_eager_quantized_model(tiny_nemo, export_root, jfk_audio, recipe, backend):
    folder = export_tiny(tiny_nemo, export_root, backend, "--quantize", recipe)
    report = json.loads((folder / "export_report.json").read_text())
    assert report["parts"]["encoder"]["quantized"] == report["parts"]["encoder"]["linear_layers"] > 0
    assert report["parts"]["encoder"]["weight_bytes_after"] < report["parts"]["encoder"]["weight_bytes_before"]
    # Every recipe quantizes the 1x1 pointwise convolutions as linears; the depthwise and subsampling convolutions
    # stay float, and the report must name what stays float.
    uncovered = " ".join(report["parts"]["encoder"]["not_covered"])
    assert "depthwise_conv" in uncovered and "Conv2d layers" in uncovered, uncovered
    assert ("pointwise_conv1" in uncovered) == (not get_recipe(recipe).quantizes_pointwise), uncovered
    transcriber = make_transcriber(folder)
    model = eager_quantized(tiny_nemo, recipe)
    # Over 40 s (500 encoder frames), so that one near-tie frame of a random-weight model is 0.2 %, not 0.7 %.
    long_audio = np.resize(jfk_audio, 40 * SAMPLE_RATE)
    agreement = joint_argmax_agreement(transcriber, model, long_audio, nemo_transcribe(model, long_audio))
    ours = runner_result(transcriber.transcribe(jfk_audio))
    ref = nemo_transcribe(model, jfk_audio)
    same = sum(a == b for a, b in zip(ours["ids"], ref["ids"]))
    print(
        f"{recipe}/{backend}: joint argmax agreement {agreement:.2%}; {len(ours['ids'])} tokens, "
        f"{len(ref['ids'])} eager, first {same} equal"
    )
    assert agreement >= MIN_AGREEMENT[recipe], f"joint token argmax agrees on only {agreement:.1%} of frames"
    if recipe in SAME_TRANSCRIPT:
        assert ours["ids"] == ref["ids"] and ours["text"] == ref["text"]


@pytest.mark.parametrize("recipe, backend", RUNNABLE)
def test_lowered_linear_equals_eager(recipe, backend):
    """One biased Linear per recipe, lowered as the export lowers it, equals the eager quantized Linear."""
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime
    from torchao.quantization import quantize_

    from parakeet_executorch.export.backends import partitioners

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 128)).eval()
    quantize_(m, get_recipe(recipe).config(get_recipe(recipe).default_group_size))
    x = torch.randn(37, 256)
    expected = m(x)
    parts, programs = partitioners(backend, {"joint": torch.export.export(m, (x,))})
    buffer = to_edge_transform_and_lower(programs, partitioner=parts).to_executorch().buffer
    if recipe.startswith("fpa"):
        from fpa_lowbit import executorch_kernels

        executorch_kernels.load()
    got = Runtime.get().load_program(buffer).load_method("joint").execute([x])[0]
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


def test_8w_on_xnnpack_is_refused_before_loading():
    with pytest.raises(RecipeError, match="8w cannot be used with --backend xnnpack.*wrong numerics"):
        check_recipe("8w", "xnnpack")


@pytest.mark.parametrize("recipe, backend", [("8da4w", "portable"), ("4w", "xnnpack"), ("8da8w", "metal")])
def test_wrong_pairs_name_the_allowed_pairs(recipe, backend):
    with pytest.raises(RecipeError, match="Allowed pairs: none: portable"):
        check_recipe(recipe, backend)


@pytest.mark.parametrize("backend", ["metal", "mlx", "cuda"])
def test_fpa8w_off_the_cpu_is_refused_naming_the_flag_given(backend, monkeypatch):
    from parakeet_executorch.export.api import ExportOptions

    monkeypatch.setattr("parakeet_executorch.export.backends.check_host", lambda backend, dtype: None)
    options = ExportOptions(backend=backend, quantize="none", quantize_decoder="fpa8w")
    with pytest.raises(RecipeError, match=f"^--quantize-decoder fpa8w cannot be used with --backend {backend} \\("):
        options.check()
    with pytest.raises(RecipeError, match="fpa_lowbit's CPU kernel only"):
        ExportOptions(backend=backend, quantize="fpa8w").check()


@pytest.mark.parametrize("recipe, group_size", [("8da4w", 16), ("8da4w", 48), ("fpa4w", 16), ("fpa8w", 0)])
def test_group_sizes_the_backend_cannot_take_are_refused(recipe, group_size):
    with pytest.raises(RecipeError, match=f"got {group_size}"):
        check_recipe(recipe, "xnnpack", group_size)
    check_recipe(recipe, "xnnpack", 64)


def test_embedding_recipe_outside_portable_is_refused_before_loading(tmp_path, capsys):
    from parakeet_executorch.export.cli import main as export_main

    rc = export_main(
        ["--model", str(tmp_path / "absent.nemo"), "--quantize-embedding", "8w", "--output-dir", str(tmp_path)]
    )
    assert rc == 2 and "--quantize-embedding 8w is supported with --backend portable" in capsys.readouterr().err


def test_xnnpack_weight_only_int8_fault_is_still_there():
    """executorch 1.5.1 lowers weight-only int8 to XNNPACK with the scales ignored: why 8w avoids XNNPACK.

    If this starts failing, the upstream fault is fixed and 8w could be allowed on XNNPACK again.
    """
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerAxis

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 32)).eval()
    quantize_(m, IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0)))
    x = torch.randn(4, 64)
    expected = m(x)
    prog = to_edge_transform_and_lower(torch.export.export(m, (x,)), partitioner=[XnnpackPartitioner()])
    got = Runtime.get().load_program(prog.to_executorch().buffer).load_method("forward").execute([x])[0]
    assert (got - expected).abs().max() > 1.0


def test_layer_with_k_not_divisible_by_group_size_is_skipped_and_strict_fails(tiny_nemo, tmp_path, capsys):
    from parakeet_executorch.export.cli import main as export_main
    from parakeet_executorch.export.load import load_nemo_model
    from parakeet_executorch.export.pointwise import convert_pointwise_convs

    # Group size 256 divides only the tiny model's K = 256 and 512 linears; the K = 64 ones must be reported,
    # the 1x1 convolutions 8da4w turns into linears included.
    model = load_nemo_model(str(tiny_nemo))
    assert get_recipe("8da4w").quantizes_pointwise
    convert_pointwise_convs(model, lambda name: name.startswith("encoder."))
    expected_skips = {
        name
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.Linear)
        and (name.startswith("encoder.") or name == "joint.enc")
        and m.in_features % 256
    }
    report = quantize_model(model, "8da4w", "8da4w", group_size=256)
    skipped = report["parts"]["encoder"]["skipped"]
    assert set(skipped) == expected_skips and expected_skips
    assert all("K % group_size == 0" in why for why in skipped.values())
    assert report["parts"]["encoder"]["quantized"] == report["parts"]["encoder"]["linear_layers"] - len(skipped)
    rc = export_main(
        [
            "--model",
            str(tiny_nemo),
            "--quantize",
            "8da4w",
            "--group-size",
            "256",
            "--strict",
            "--output-dir",
            str(tmp_path / "b"),
        ]
    )
    assert rc == 2 and not (tmp_path / "b" / "model.pte").exists()
    assert "--strict" in capsys.readouterr().err


def test_embedding_8w_on_portable_matches_eager(tiny_nemo, export_root, jfk_audio):
    from parakeet_executorch.export.load import load_nemo_model

    folder = export_tiny(tiny_nemo, export_root, "portable", "--quantize-embedding", "8w")
    report = json.loads((folder / "export_report.json").read_text())["parts"]["embedding"]
    assert report["quantized"] == 1 and report["weight_bytes_after"] < report["weight_bytes_before"]
    model = load_nemo_model(str(tiny_nemo))
    quantize_model(model, "none", "none", embedding_recipe="8w")
    ours = runner_result(make_transcriber(folder).transcribe(jfk_audio))
    ref = nemo_transcribe(model.eval(), jfk_audio)
    assert ours["ids"] == ref["ids"] and ours["tokens"] == ref["tokens"]


def tokens_away_from(result: dict, frames: list[int], radius: int) -> list[tuple[int, int]]:
    """``(token id, start frame)`` of each token that starts more than ``radius`` encoder frames from all ``frames``."""
    return [
        (token, start)
        for token, (start, *_) in zip(result["ids"], result["tokens"])
        if all(abs(start - t) > radius for t in frames)
    ]


# A flip of the dynamic-activation recipes must sit on a near-tie of the eager joint (its eager margin among the
# smallest NEAR_TIE_PERCENT of all frames' margins; a lowering fault flips confident frames too), and its effect
# must stay local: the tokens more than FLIP_RADIUS encoder frames (1.6 s) from every flip equal eager's.
NEAR_TIE_PERCENT = 5.0
FLIP_RADIUS = 20


# On the trained model the default run keeps fpa4w (the product's recipe) and 8da4w (dynamic activations) on XNNPACK;
# each trained-model export takes 2-3 minutes, and the tiny model's tests above cover every pair.
DEMO_DEFAULT_RUN = {("fpa4w", "xnnpack"), ("8da4w", "xnnpack")}


@pytest.mark.parametrize(
    "recipe, backend",
    [p if p in DEMO_DEFAULT_RUN else pytest.param(*p, marks=pytest.mark.extended) for p in RUNNABLE],
)
def test_recipe_pte_matches_eager_on_the_trained_demo_model(demo_nemo, export_root, heldout_speech, recipe, backend):
    """On a trained model each recipe's .pte follows its eager quantized model, frame by frame.

    On the shipped trained demo model and ~44 s of held-out speech (554 encoder frames), scored with the decoding
    context of ``compare_joint_argmax``: every recipe agrees with eager on >= 99.5 % of the frames. The weight-only
    recipes (float activations) give eager's tokens exactly. The dynamic-activation recipes (8da*) round each
    activation to int8, and XNNPACK's float arithmetic differs from PyTorch's by ~1e-6, which now and then moves a
    value across an int8 rounding step: 8da4w flips 1 of 554 frames here (eager's margin 0.02, in the lowest 0.4 %
    of all frames'), which changes a few tokens around it. For them every flipped frame must be a near-tie
    (``NEAR_TIE_PERCENT``) and the tokens away from the flips (``FLIP_RADIUS``) must equal eager's.
    """
    audio, _ = heldout_speech
    # One pass over the whole 44 s (frames compared one by one): a bound past the default 40 s.
    folder = export_tiny(demo_nemo, export_root, backend, "--quantize", recipe, "--max-audio-seconds", "60")
    transcriber = make_transcriber(folder)
    model = eager_quantized(demo_nemo, recipe)
    ref = nemo_transcribe(model, audio)
    comparison = compare_joint_argmax(transcriber, model, audio, ref)
    ours = runner_result(transcriber.transcribe(audio))
    flipped = [t for t, _ in comparison.flips]
    ours_away, ref_away = tokens_away_from(ours, flipped, FLIP_RADIUS), tokens_away_from(ref, flipped, FLIP_RADIUS)
    percentiles = comparison.flip_margin_percentiles()
    print(
        f"demo {recipe}/{backend}: joint argmax agreement {comparison.agreement:.2%}; {len(ours['ids'])} tokens, "
        f"{len(ref['ids'])} eager, {len(ref_away)} away from flips; flips (frame, eager margin, margin percentile): "
        f"{[(t, round(m, 3), round(q, 1)) for (t, m), q in zip(comparison.flips, percentiles)]}"
    )
    assert len(ref["ids"]) > 100
    assert comparison.agreement >= 0.995, f"joint token argmax agrees on only {comparison.agreement:.2%} of frames"
    if not get_recipe(recipe).dynamic_activations:
        assert ours["ids"] == ref["ids"] and ours["text"] == ref["text"]
        return
    assert all(q <= NEAR_TIE_PERCENT for q in percentiles), f"a flipped frame is no near-tie: {comparison.flips}"
    assert len(ref_away) > 0.8 * len(ref["ids"]), "too few tokens away from the flips to compare"
    assert ours_away == ref_away, "tokens away from the flipped frames differ from eager's"
