"""``parakeet-train-demo``: train the small Parakeet TDT demo model on synthetic espeak-ng speech.

The model is NeMo's ``EncDecRNNTBPEModel`` with the ``demo`` size of ``testing/config.py`` (FastConformer encoder
with 8x depthwise-striding subsampling and relative-position attention, 2-layer LSTM prediction network, TDT
joint with durations [0..4]) and a SentencePiece BPE tokenizer trained on the corpus text. The corpus comes from
``training/corpus.py``. Each step runs NeMo's own modules: ``model.forward`` (preprocessor, SpecAugment,
encoder), the prediction network, the joint, and the TDT loss: NeMo's numba loss on CUDA, or
``training/tdt_loss.py`` (the same value) on a CPU, where NeMo's TDT losses do not run.

Writes the ``.nemo`` atomically and ``OUT.train.json`` beside it: seed, device, steps, wall time, espeak-ng
version, loss and dev WER history.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path


def build_model(tokenizer_dir: Path, size: str, seed: int):
    """A fresh NeMo TDT model of ``size`` (``testing/config.py``) with SpecAugment for training.

    Args:
        tokenizer_dir: folder with ``tokenizer.model`` and ``vocab.txt``.
        size: a key of ``testing.config.SIZES``.
        seed: torch seed for the initial weights.
    """
    import torch
    from omegaconf import OmegaConf

    from nemo.collections.asr.models import EncDecRNNTBPEModel

    from ..testing.config import model_config

    cfg = model_config(size, str(tokenizer_dir))
    # Masks scaled to 128 mel bands and 2-4 s clips; only active in training mode, so exported graphs skip it.
    cfg["spec_augment"] = {"_target_": "nemo.collections.asr.modules.SpectrogramAugmentation",
                           "freq_masks": 2, "freq_width": 20, "time_masks": 2, "time_width": 0.05}
    torch.manual_seed(seed)
    return EncDecRNNTBPEModel(cfg=OmegaConf.create(cfg))


def _batches(lengths: list[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Index batches of similar length (sorted, chunked, shuffled) so padding stays small."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], rng.random()))
    chunks = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(chunks)
    return chunks


def _pad(arrays, device):
    import torch

    lengths = torch.tensor([len(a) for a in arrays], dtype=torch.long)
    out = torch.zeros(len(arrays), int(lengths.max()), dtype=torch.float32)
    for i, a in enumerate(arrays):
        out[i, : len(a)] = torch.as_tensor(a)
    return out.to(device), lengths.to(device)


def greedy_texts(model, audio: list, device, batch_size: int = 32) -> list[str]:
    """Greedy TDT transcripts of in-memory 16 kHz clips through NeMo's own decoding (eval mode, no grad)."""
    import torch

    was_training = model.training
    model.eval()
    texts = []
    with torch.no_grad():
        for i in range(0, len(audio), batch_size):
            signal, lengths = _pad(audio[i:i + batch_size], device)
            enc, enc_len = model.forward(input_signal=signal, input_signal_length=lengths)
            hyps = model.decoding.rnnt_decoder_predictions_tensor(encoder_output=enc, encoded_lengths=enc_len)
            texts += [h.text for h in hyps]
    model.train(was_training)
    return texts


def word_error_rate(refs: list[str], hyps: list[str]) -> float:
    """Corpus WER (jiwer: total edits / total reference words), as a fraction."""
    import jiwer

    return float(jiwer.wer(refs, hyps))


def train(args) -> dict:
    import torch

    from ..testing.tokenizer_corpus import train_tokenizer
    from . import corpus
    from .tdt_loss import tdt_loss

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda given but no CUDA GPU is visible; use --device cpu")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    rng = random.Random(args.seed)
    log = {"args": {k: v for k, v in vars(args).items()}, "seed": args.seed, "size": args.size, "device": str(device), "espeak": corpus.espeak_version(),
           "torch": torch.__version__, "history": []}
    if device.type == "cuda":
        log["gpu"] = torch.cuda.get_device_name(device)

    t0 = time.perf_counter()
    train_utts = corpus.training_set(args.utterances, args.seed)
    train_texts = {u.text for u in train_utts}
    dev_utts = corpus.heldout_set(args.dev_utterances, args.seed + 1, train_texts)
    audio = corpus.synthesize_many(train_utts)
    dev_audio = corpus.synthesize_many(dev_utts)
    log["train_hours"] = sum(len(a) for a in audio) / 16000 / 3600
    log["synth_s"] = time.perf_counter() - t0
    print(f"synthesized {len(audio)} training clips ({log['train_hours']:.2f} h) and {len(dev_audio)} dev clips "
          f"in {log['synth_s']:.0f} s", flush=True)

    with tempfile.TemporaryDirectory() as work:
        tok_dir = Path(work) / "tokenizer"
        train_tokenizer(tok_dir, args.vocab_size, seed=args.seed, lines=sorted(train_texts))
        if args.init:
            from nemo.collections.asr.models import ASRModel

            model = ASRModel.restore_from(args.init, map_location="cpu")
        else:
            model = build_model(tok_dir, args.size, args.seed)
        model = model.to(device)
        tokens = [model.tokenizer.text_to_ids(u.text) for u in train_utts]
        n_params = sum(p.numel() for p in model.parameters())
        log["parameters"] = n_params
        print(f"model: {n_params / 1e6:.2f} M parameters on {device}", flush=True)

        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=1e-3)
        warmup = min(args.warmup, args.steps // 5 + 1)

        budget_s = args.max_minutes * 60

        def lr_at(step: int, elapsed_s: float = 0.0) -> float:
            """Linear warm-up, then cosine decay to 1 % of the peak; with --max-minutes the decay follows
            whichever runs out first, steps or time, so a time-boxed run still ends at a low rate."""
            if step < warmup:
                return args.lr * (step + 1) / warmup
            frac = (step - warmup) / max(1, args.steps - warmup)
            if budget_s:
                frac = max(frac, elapsed_s / budget_s)
            return args.lr * (0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))

        use_nemo_loss = device.type == "cuda" and args.loss == "nemo"
        durations = list(model.cfg.model_defaults.tdt_durations)
        sigma = float(model.cfg.loss.tdt_kwargs.get("sigma", 0.0))
        blank = model.decoder.blank_idx
        lengths = [len(a) for a in audio]
        model.train()
        step, t_train, batches = 0, time.perf_counter(), []
        while step < args.steps:
            if not batches:
                batches = _batches(lengths, args.batch_size, rng)
            idx = batches.pop()
            signal, sig_len = _pad([audio[i] for i in idx], device)
            tgt_len = torch.tensor([len(tokens[i]) for i in idx], dtype=torch.long)
            tgt = torch.zeros(len(idx), int(tgt_len.max()), dtype=torch.long)
            for row, i in enumerate(idx):
                tgt[row, : len(tokens[i])] = torch.tensor(tokens[i])
            tgt, tgt_len = tgt.to(device), tgt_len.to(device)
            lr = lr_at(step, time.perf_counter() - t_train)
            for g in opt.param_groups:
                g["lr"] = lr
            enc, enc_len = model.forward(input_signal=signal, input_signal_length=sig_len)
            dec, _, _ = model.decoder(targets=tgt, target_length=tgt_len)
            joint = model.joint(encoder_outputs=enc, decoder_outputs=dec)
            if use_nemo_loss:
                loss = model.loss(log_probs=joint, targets=tgt, input_lengths=enc_len, target_lengths=tgt_len)
            else:
                loss = tdt_loss(joint, tgt, enc_len, tgt_len, blank=blank, durations=durations, sigma=sigma)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            elapsed = time.perf_counter() - t_train
            out_of_time = args.max_minutes and elapsed > args.max_minutes * 60
            if step % args.eval_every == 0 or step == args.steps or out_of_time:
                hyps = greedy_texts(model, dev_audio, device)
                wer = word_error_rate([u.text for u in dev_utts], hyps)
                entry = {"step": step, "loss": loss.item(), "lr": lr, "dev_wer": wer,
                         "elapsed_s": round(elapsed, 1)}
                log["history"].append(entry)
                print(json.dumps(entry), flush=True)
            if out_of_time:
                print(f"stopping at step {step}: --max-minutes {args.max_minutes} reached", flush=True)
                break
        log["steps"] = step
        log["train_s"] = time.perf_counter() - t_train
        model.eval()
        model = model.cpu()
        out = Path(args.out)
        tmp = out.with_name(out.name + ".partial")
        model.save_to(str(tmp))
        tmp.replace(out)
    log["nemo_bytes"] = out.stat().st_size
    log["wall_s"] = time.perf_counter() - t0
    Path(str(out) + ".train.json").write_text(json.dumps(log, indent=1) + "\n")
    print(f"wrote {out} ({log['nemo_bytes'] / 1e6:.1f} MB) after {step} steps, {log['wall_s']:.0f} s", flush=True)
    return log


def main(argv: list[str] | None = None) -> int:
    from ..testing.config import SIZES

    p = argparse.ArgumentParser(prog="parakeet-train-demo", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="output .nemo path")
    p.add_argument("--size", default="demo", choices=sorted(SIZES), help="model size (testing/config.py)")
    p.add_argument("--device", default="cuda", help="cuda (NeMo's numba TDT loss) or cpu (training/tdt_loss.py)")
    p.add_argument("--loss", default="nemo", choices=("nemo", "pytorch"),
                   help="on CUDA: NeMo's numba TDT loss (default) or this package's; a CPU always uses ours")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--utterances", type=int, default=12000, help="training clips to synthesize")
    p.add_argument("--dev-utterances", type=int, default=100, help="held-out-voice clips for the dev WER")
    p.add_argument("--vocab-size", type=int, default=256, help="SentencePiece BPE pieces")
    p.add_argument("--steps", type=int, default=6000, help="optimizer steps (sets the LR schedule)")
    p.add_argument("--max-minutes", type=float, default=0,
                   help="training time budget: stop after it and fit the LR decay into it")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (AdamW)")
    p.add_argument("--warmup", type=int, default=600, help="warm-up steps")
    p.add_argument("--eval-every", type=int, default=500, help="steps between dev WER measurements")
    p.add_argument("--init", help="start from this .nemo instead of fresh weights (keeps its tokenizer)")
    args = p.parse_args(argv)
    if not args.out.endswith(".nemo"):
        p.error(f"--out must end in .nemo, got {args.out}")
    if not Path(args.out).resolve().parent.is_dir():
        p.error(f"output folder of {args.out} does not exist")
    if args.init and not Path(args.init).is_file():
        p.error(f"--init {args.init} not found")
    if args.steps < 1 or args.utterances < 1 or args.batch_size < 1:
        p.error("--steps, --utterances and --batch-size must be positive")
    from .corpus import EspeakError

    try:
        train(args)
    except EspeakError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
