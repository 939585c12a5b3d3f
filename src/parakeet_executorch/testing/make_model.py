"""``parakeet-make-test-model``: build a random-weight Parakeet TDT checkpoint with NeMo's own classes.

No weights can be downloaded here, so tests and benchmarks run on models built from a config shaped like
parakeet-tdt-0.6b-v3 (see ``testing/config.py``) with a SentencePiece tokenizer trained locally.

Random weights must still emit tokens, or parity tests could pass on empty output. With NeMo's default
initialisation every encoder frame looks alike (the subsampling's biases and the conformer blocks' residual
branches swamp the input) and blank wins everywhere. ``_init_for_emission`` keeps the input visible through the
encoder (no subsampling biases, quieter residual branches), rescales the joint's output layer so that token
logits depend on the frame, and offsets blank so that it wins on only part of the frames.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from .config import SIZES, model_config

# Chosen by measuring the tiny model on speech: the output layer's gain makes logits input-dependent, the blank
# offset keeps roughly half of the frames blank, and the duration offsets make 1-frame steps most common while
# leaving 0 (several tokens per frame) and 2..4 reachable.
RESIDUAL_BRANCH_GAIN = 0.1
ENCODER_PROJECTION_GAIN = 4.0
JOINT_OUTPUT_GAIN = 8.0
BLANK_LOGIT_OFFSET = 0.6
DURATION_LOGIT_OFFSETS = [0.0, 1.0, 0.5, 0.2, 0.0]


def build_model(size: str, seed: int, work_dir: str | Path):
    """Build an ``EncDecRNNTBPEModel`` of the given size with seeded random weights.

    Args:
        size: one of ``tiny``, ``small``, ``full``.
        seed: seeds torch (weights) and the tokenizer corpus.
        work_dir: folder for the tokenizer files (must outlive the model until it is saved).
    Returns:
        the NeMo model in eval mode on CPU.
    """
    import torch
    from nemo.collections.asr.models import EncDecRNNTBPEModel
    from omegaconf import OmegaConf

    from .tokenizer_corpus import train_tokenizer

    tok_dir = Path(work_dir) / "tokenizer"
    train_tokenizer(tok_dir, SIZES[size].vocab_size, seed=seed)
    torch.manual_seed(seed)
    cfg = OmegaConf.create(model_config(size, str(tok_dir)))
    model = EncDecRNNTBPEModel(cfg=cfg)
    model.eval()
    _init_for_emission(model)
    return model


def _init_for_emission(model) -> None:
    import torch

    with torch.no_grad():
        for name, p in model.encoder.named_parameters():
            if name.startswith("pre_encode") and name.endswith("bias"):
                p.zero_()
            if name.endswith(("linear_out.weight", "linear2.weight", "pointwise_conv2.weight")):
                p.mul_(RESIDUAL_BRANCH_GAIN)

        model.joint.enc.weight.mul_(ENCODER_PROJECTION_GAIN)
    out = model.joint.joint_net[-1]  # Linear(joint_hidden -> V + 1 + len(durations))
    n_dur = model.joint.num_extra_outputs
    blank = model.decoder.blank_idx
    with torch.no_grad():
        out.weight.mul_(JOINT_OUTPUT_GAIN)
        out.bias.zero_()
        out.bias[blank] += BLANK_LOGIT_OFFSET * out.weight[:blank].norm(dim=1).mean()
        out.bias[-n_dur:] += torch.tensor(DURATION_LOGIT_OFFSETS) * out.weight[-n_dur:].norm(dim=1).mean()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="parakeet-make-test-model",
        description="Build a random-weight Parakeet TDT .nemo shaped like parakeet-tdt-0.6b-v3 (NeMo classes, "
        "locally trained SentencePiece tokenizer).",
    )
    parser.add_argument(
        "--size",
        choices=sorted(SIZES),
        default="tiny",
        help="tiny (unit tests), small, or full (v3's exact dimensions, ~0.6 B parameters)",
    )
    parser.add_argument("--out", required=True, help="output .nemo path")
    parser.add_argument("--seed", type=int, default=0, help="seed for weights and tokenizer corpus")
    args = parser.parse_args(argv)

    out = Path(args.out)
    if out.suffix != ".nemo":
        parser.error(f"--out must end in .nemo, got {out}")
    if not out.parent.exists():
        parser.error(f"output folder {out.parent} does not exist")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        model = build_model(args.size, args.seed, work)
        n_params = sum(p.numel() for p in model.parameters())
        tmp = out.with_name(out.name + ".partial")
        model.save_to(str(tmp))
        tmp.replace(out)  # atomic: no half-written .nemo under the requested name
    print(
        f"wrote {out} ({args.size}, {n_params / 1e6:.1f} M parameters, seed {args.seed}) "
        f"in {time.perf_counter() - t0:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
