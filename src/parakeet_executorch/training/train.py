"""``parakeet-train-demo``: train the small Parakeet TDT demo model on synthetic speech.

The model is NeMo's ``EncDecRNNTBPEModel`` with the ``demo2`` size of ``testing/config.py`` (FastConformer encoder
with 8x depthwise-striding subsampling and relative-position attention, 2-layer LSTM prediction network, TDT
joint with durations [0..4]) and a SentencePiece BPE tokenizer trained on the corpus text. The corpus comes from
``training/corpus.py`` (espeak-ng and flite speech of a 5,000-word vocabulary, 30 % of it in 20-40 s clips; with
``--extra-voice-fraction`` F, a share F of the voices from MBROLA, RHVoice and SVOX Pico: corpus v3).
Synthesis runs on a
pool of processes, one per core. Each step runs NeMo's own modules: ``model.forward`` (preprocessor, SpecAugment,
encoder), the prediction network, the joint, and the TDT loss: NeMo's numba loss on CUDA, or
``training/tdt_loss.py`` (the same value) on a CPU, where NeMo's TDT losses do not run. With ``--vtlp P`` a share
P of the utterances has its features warped between preprocessor and SpecAugment (``training/vtlp.py``). Batches
are clips of similar length, at most ``--batch-size`` clips and ``--batch-seconds`` of padded audio.

Writes the ``.nemo`` atomically and ``OUT.train.json`` beside it: arguments, seed, device, steps, wall time,
synthesizer versions, data statistics, loss and dev WER history, and the transcript of the shipped sample clip.
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
    from nemo.collections.asr.models import EncDecRNNTBPEModel
    from omegaconf import OmegaConf

    from ..testing.config import model_config

    cfg = model_config(size, str(tokenizer_dir))
    # Masks scaled to 128 mel bands and 2-4 s clips; only active in training mode, so exported graphs skip it.
    cfg["spec_augment"] = {
        "_target_": "nemo.collections.asr.modules.SpectrogramAugmentation",
        "freq_masks": 2,
        "freq_width": 20,
        "time_masks": 2,
        "time_width": 0.05,
    }
    torch.manual_seed(seed)
    return EncDecRNNTBPEModel(cfg=OmegaConf.create(cfg))


def _batches(lengths: list[int], batch_size: int, rng: random.Random, max_samples: int = 0) -> list[list[int]]:
    """Index batches of similar length (sorted, chunked, shuffled) so padding stays small.

    A batch holds at most ``batch_size`` clips and, when ``max_samples`` > 0, at most ``max_samples`` padded
    samples (clips x longest clip), so batches of 40 s clips are smaller than batches of 3 s ones.
    """
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], rng.random()))
    chunks: list = []
    cur: list = []
    for i in order:
        if cur and (len(cur) == batch_size or (max_samples and (len(cur) + 1) * lengths[i] > max_samples)):
            chunks.append(cur)
            cur = []
        cur.append(i)
    if cur:
        chunks.append(cur)
    rng.shuffle(chunks)
    return chunks


def _pad(arrays, device):
    """A [batch, samples] float32 tensor of the clips (int16 PCM scaled to [-1, 1)) and their lengths."""
    import numpy as np
    import torch

    lengths = torch.tensor([len(a) for a in arrays], dtype=torch.long)
    out = torch.zeros(len(arrays), int(lengths.max()), dtype=torch.float32)
    for i, a in enumerate(arrays):
        t = torch.from_numpy(np.ascontiguousarray(a))
        out[i, : len(a)] = t.float() / 32768.0 if t.dtype == torch.int16 else t
    return out.to(device), lengths.to(device)


def greedy_texts(model, audio: list, device, batch_size: int = 32) -> list[str]:
    """Greedy TDT transcripts of in-memory 16 kHz clips through NeMo's own decoding (eval mode, no grad)."""
    import torch

    was_training = model.training
    model.eval()
    texts = []
    with torch.no_grad():
        for i in range(0, len(audio), batch_size):
            signal, lengths = _pad(audio[i : i + batch_size], device)
            enc, enc_len = model.forward(input_signal=signal, input_signal_length=lengths)
            hyps = model.decoding.rnnt_decoder_predictions_tensor(encoder_output=enc, encoded_lengths=enc_len)
            texts += [h.text for h in hyps]
    model.train(was_training)
    return texts


def word_error_rate(refs: list[str], hyps: list[str]) -> float:
    """Corpus WER (jiwer: total edits / total reference words), as a fraction."""
    import jiwer

    return float(jiwer.wer(refs, hyps))


def _save(model, out: Path, dtype: str = "float32") -> None:
    """``model.save_to(out)`` through a temporary name, so ``out`` is never a half-written file.

    Args:
        model: a NeMo ASR model on the CPU or a GPU; left as it was (parameters and device).
        out: the ``.nemo`` path.
        dtype: ``float32``, or ``float16`` to store every floating-point parameter rounded to half precision (half
            the bytes; buffers such as the mel filterbank and batch-norm statistics stay float32). NeMo's
            ``restore_from`` builds the model in float32 and ``load_state_dict`` widens the stored values, so the
            restored model computes in float32 with weights that are exactly the float16 values.
    Raises:
        ValueError: another ``dtype``.
    """
    import torch

    if dtype not in ("float32", "float16"):
        raise ValueError(f"save dtype {dtype!r} is not float32 or float16")
    tmp = out.with_name(out.name + ".partial")
    kept = {}
    if dtype == "float16":
        for name, p in model.named_parameters():
            if p.is_floating_point():
                kept[name] = p.data
                p.data = p.data.to(torch.float16)
    try:
        model.save_to(str(tmp))
    finally:
        for name, p in model.named_parameters():
            if name in kept:
                p.data = kept[name]
    tmp.replace(out)


def _make_data(args, log: dict) -> dict:
    """Synthesize the training and dev sets of ``training/corpus.py``; fills ``log`` with versions and data
    statistics.

    Returns:
        ``train_texts``, ``audio`` (int16 arrays, 16 kHz), ``dev_texts``, ``dev_audio`` (float32) and ``sample``
        ((text, audio) of the shipped sample's recipe).
    """
    from collections import defaultdict

    from . import corpus, synth, text

    extra = args.extra_voice_fraction
    used = ["espeak", "flite", *(("mbrola", "rhvoice", "pico") if extra else ())]
    # Before minutes of synthesis: a missing synthesizer is named with its Debian packages now, not from a worker.
    for name in used:
        synth.program(name)
    log["synthesizers"] = corpus.versions(used)
    clips = corpus.training_set(
        args.seed,
        hours=args.hours,
        clips=args.utterances,
        long_fraction=args.long_fraction,
        mixed_voice_fraction=args.mixed_voice_fraction,
        speed_perturb=args.speed_perturb,
        extra_voice_fraction=extra,
    )
    dev = corpus.dev_set(args.dev_utterances, args.seed + 1)
    print(f"synthesizing {len(clips)} training clips on {args.workers or 'all'} cores ...", flush=True)
    audio = corpus.synthesize_many(clips, workers=args.workers, as_int16=True, progress=True)
    dev_audio = corpus.synthesize_many(dev, workers=args.workers)
    sample = corpus.sample_clip()
    seconds = [len(a) / 16000 for a in audio]
    long = [s for c, s in zip(clips, seconds) if len(c.texts) > 1]
    hours_by: dict[str, float] = defaultdict(float)
    for c, sec in zip(clips, seconds):
        hours_by[c.voice.synth] += sec / 3600
    log["train_hours"] = sum(seconds) / 3600
    log["data"] = {
        "clips": len(clips),
        "segments": sum(len(c.texts) for c in clips),
        "words": sum(len(c.text.split()) for c in clips),
        "long_clips": len(long),
        "mixed_voice_clips": sum(bool(c.voices) for c in clips),
        "long_hours": sum(long) / 3600,
        "longest_s": round(max(seconds), 1),
        "hours_by_synth": {k: round(v, 3) for k, v in sorted(hours_by.items())},
        "vocabulary": len(text.vocabulary()),
        "heldout_words": len(text.heldout_words()),
        "sentences": {k: len(v) for k, v in text.sentence_split().items()},
        "dev_clips": len(dev),
    }
    return {
        "train_texts": [c.text for c in clips],
        "audio": audio,
        "dev_texts": [c.text for c in dev],
        "dev_audio": dev_audio,
        "sample": (sample.text, corpus.synthesize_clip(sample)),
    }


def train(args) -> dict:
    import torch

    from ..testing.tokenizer_corpus import train_tokenizer
    from .tdt_loss import tdt_loss
    from .vtlp import VtlpRecipe, draw_alphas, mel_band_centres_hz, warp_features

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda given but no CUDA GPU is visible; use --device cpu")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    rng = random.Random(args.seed)
    log = {
        "args": dict(vars(args)),
        "seed": args.seed,
        "size": args.size,
        "device": str(device),
        "corpus": "v3" if args.extra_voice_fraction else "v2",
        "torch": torch.__version__,
        "history": [],
    }
    if device.type == "cuda":
        log["gpu"] = torch.cuda.get_device_name(device)

    t0 = time.perf_counter()
    data = _make_data(args, log)
    train_texts, audio, dev_texts, dev_audio = data["train_texts"], data["audio"], data["dev_texts"], data["dev_audio"]
    log["synth_s"] = time.perf_counter() - t0
    print(
        f"synthesized {len(audio)} training clips ({log['train_hours']:.2f} h) and {len(dev_audio)} dev clips "
        f"in {log['synth_s']:.0f} s",
        flush=True,
    )

    with tempfile.TemporaryDirectory() as work:
        tok_dir = Path(work) / "tokenizer"
        train_tokenizer(tok_dir, args.vocab_size, seed=args.seed, lines=sorted(set(train_texts)))
        if args.init:
            from nemo.collections.asr.models import ASRModel

            model = ASRModel.restore_from(args.init, map_location="cpu")
        else:
            model = build_model(tok_dir, args.size, args.seed)
        model = model.to(device)
        tokens = [model.tokenizer.text_to_ids(t) for t in train_texts]
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
        # VTLP draws from a generator of its own, so that batches and other draws match a run without it.
        vtlp = VtlpRecipe(p=args.vtlp)
        vtlp_rng = random.Random(args.seed + 1_000_003)
        pre = model.cfg.preprocessor
        sample_rate = int(pre.get("sample_rate", 16000))
        mel_centres = mel_band_centres_hz(
            int(pre.get("features", 128)), sample_rate, float(pre.get("lowfreq", 0.0) or 0.0), pre.get("highfreq")
        )
        lengths = [len(a) for a in audio]
        max_samples = int(args.batch_seconds * 16000)
        model.train()
        step, t_train, skipped = 0, time.perf_counter(), 0
        audio_s = 0.0  # seconds of training audio in the steps taken: throughput, beside steps per second
        batches: list = []
        next_checkpoint_s = args.checkpoint_every_minutes * 60
        while step < args.steps:
            if not batches:
                batches = _batches(lengths, args.batch_size, rng, max_samples)
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
            try:
                if vtlp.p > 0:
                    feats, feat_len = model.preprocessor(input_signal=signal, length=sig_len)
                    alphas = draw_alphas(vtlp_rng, len(idx), vtlp)
                    feats = warp_features(feats, alphas, mel_centres, sample_rate / 2)
                    enc, enc_len = model.forward(processed_signal=feats, processed_signal_length=feat_len)
                else:
                    enc, enc_len = model.forward(input_signal=signal, input_signal_length=sig_len)
                dec, _, _ = model.decoder(targets=tgt, target_length=tgt_len)
                joint = model.joint(encoder_outputs=enc, decoder_outputs=dec)
                if use_nemo_loss:
                    loss = model.loss(log_probs=joint, targets=tgt, input_lengths=enc_len, target_lengths=tgt_len)
                else:
                    loss = tdt_loss(joint, tgt, enc_len, tgt_len, blank=blank, durations=durations, sigma=sigma)
                opt.zero_grad(set_to_none=True)
                loss.backward()
            except torch.cuda.OutOfMemoryError:
                # One unlucky batch (long clips with many tokens) must not end a one-shot GPU run: drop it.
                del signal, tgt
                enc = dec = joint = loss = None
                opt.zero_grad(set_to_none=True)
                torch.cuda.empty_cache()
                skipped += 1
                print(
                    f"step {step}: out of memory on {len(idx)} clips of {max(lengths[i] for i in idx) / 16000:.1f} s;"
                    " batch skipped",
                    flush=True,
                )
                if skipped > 20:
                    raise
                continue
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            audio_s += sum(lengths[i] for i in idx) / 16000
            elapsed = time.perf_counter() - t_train
            out_of_time = args.max_minutes and elapsed > args.max_minutes * 60
            if step % args.eval_every == 0 or step == args.steps or out_of_time:
                hyps = greedy_texts(model, dev_audio, device)
                wer = word_error_rate(dev_texts, hyps)
                entry = {
                    "step": step,
                    "loss": loss.item(),
                    "lr": lr,
                    "dev_wer": wer,
                    "elapsed_s": round(elapsed, 1),
                    "audio_h": round(audio_s / 3600, 3),
                }
                log["history"].append(entry)
                print(json.dumps(entry), flush=True)
            if out_of_time:
                print(f"stopping at step {step}: --max-minutes {args.max_minutes} reached", flush=True)
                break
            if args.checkpoint_every_minutes and elapsed > next_checkpoint_s:
                # A lent GPU machine can be taken back mid-run: keep a loadable model of the latest state.
                next_checkpoint_s += args.checkpoint_every_minutes * 60
                _save(model, Path(args.out).with_name(Path(args.out).stem + ".checkpoint.nemo"), args.save_dtype)
                log["steps"] = step
                Path(str(args.out) + ".train.json").write_text(json.dumps(log, indent=1) + "\n")
                print(f"checkpoint at step {step}", flush=True)
        log["steps"] = step
        log["audio_hours_trained"] = audio_s / 3600
        log["skipped_batches"] = skipped
        log["train_s"] = time.perf_counter() - t_train
        if data["sample"] is not None:
            sample_text, sample_audio = data["sample"]
            heard = greedy_texts(model, [sample_audio], device)[0]
            log["sample"] = {"text": sample_text, "heard": heard, "exact": heard == sample_text}
            print(
                f"sample: spoken {sample_text!r}, heard {heard[:200]!r}: "
                f"{'exact match' if heard == sample_text else 'DIFFERENT'}",
                flush=True,
            )
        model.eval()
        model = model.cpu()
        out = Path(args.out)
        _save(model, out, args.save_dtype)
    log["nemo_bytes"] = out.stat().st_size
    log["wall_s"] = time.perf_counter() - t0
    Path(str(out) + ".train.json").write_text(json.dumps(log, indent=1) + "\n")
    print(f"wrote {out} ({log['nemo_bytes'] / 1e6:.1f} MB) after {step} steps, {log['wall_s']:.0f} s", flush=True)
    return log


def main(argv: list[str] | None = None) -> int:
    from ..testing.config import SIZES

    p = argparse.ArgumentParser(prog="parakeet-train-demo", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="output .nemo path")
    p.add_argument("--size", default="demo2", choices=sorted(SIZES), help="model size (testing/config.py)")
    p.add_argument("--device", default="cuda", help="cuda (NeMo's numba TDT loss) or cpu (training/tdt_loss.py)")
    p.add_argument(
        "--loss",
        default="nemo",
        choices=("nemo", "pytorch"),
        help="on CUDA: NeMo's numba TDT loss (default) or this package's; a CPU always uses ours",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hours", type=float, default=40.0, help="hours of training audio to synthesize (estimated)")
    p.add_argument("--utterances", type=int, default=None, help="training clips to synthesize instead of --hours")
    p.add_argument(
        "--long-fraction",
        type=float,
        default=0.3,
        help="share of the training audio in 20-40 s clips of several segments with pauses",
    )
    p.add_argument(
        "--mixed-voice-fraction",
        type=float,
        default=0.0,
        help="share of the long clips whose segments each have their own voice and level",
    )
    p.add_argument(
        "--speed-perturb",
        type=float,
        default=0.0,
        help="share of the training clips sped up or slowed down by 0.85-1.15x, formants with them (augment.py)",
    )
    p.add_argument(
        "--extra-voice-fraction",
        type=float,
        default=0.0,
        help="share of the training voices from MBROLA, RHVoice and SVOX Pico instead of espeak-ng and flite "
        "(corpus.py; Debian non-free packages)",
    )
    p.add_argument(
        "--vtlp",
        type=float,
        default=0.0,
        help="share of the training batches' utterances whose mel features are warped by VTLP, alpha 0.9-1.1 (vtlp.py)",
    )
    p.add_argument("--workers", type=int, default=None, help="synthesis processes (default: one per core)")
    p.add_argument("--dev-utterances", type=int, default=200, help="held-out-voice clips for the dev WER")
    p.add_argument("--vocab-size", type=int, default=None, help="SentencePiece BPE pieces (default: the size's)")
    p.add_argument("--steps", type=int, default=6000, help="optimizer steps (sets the LR schedule)")
    p.add_argument(
        "--max-minutes", type=float, default=0, help="training time budget: stop after it and fit the LR decay into it"
    )
    p.add_argument("--batch-size", type=int, default=64, help="most clips in one batch")
    p.add_argument(
        "--batch-seconds",
        type=float,
        default=0,
        help="most padded audio seconds in one batch (clips x longest); 0: no limit",
    )
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (AdamW)")
    p.add_argument("--warmup", type=int, default=600, help="warm-up steps")
    p.add_argument("--eval-every", type=int, default=500, help="steps between dev WER measurements")
    p.add_argument(
        "--checkpoint-every-minutes",
        type=float,
        default=0,
        help="also save OUT's stem + .checkpoint.nemo (and the log so far) this often; 0: never",
    )
    p.add_argument(
        "--save-dtype",
        default="float32",
        choices=["float32", "float16"],
        help="store the .nemo's parameters in this precision (float16 halves the file; NeMo restores float32)",
    )
    p.add_argument("--init", help="start from this .nemo instead of fresh weights (keeps its tokenizer)")
    args = p.parse_args(argv)
    if not args.out.endswith(".nemo"):
        p.error(f"--out must end in .nemo, got {args.out}")
    if not Path(args.out).resolve().parent.is_dir():
        p.error(f"output folder of {args.out} does not exist")
    if args.init and not Path(args.init).is_file():
        p.error(f"--init {args.init} not found")
    if args.steps < 1 or (args.utterances is not None and args.utterances < 1) or args.batch_size < 1:
        p.error("--steps, --utterances and --batch-size must be positive")
    if args.hours <= 0 or not 0 <= args.long_fraction <= 1 or args.batch_seconds < 0:
        p.error("--hours must be positive, --long-fraction in [0, 1] and --batch-seconds >= 0")
    if not 0 <= args.mixed_voice_fraction <= 1:
        p.error(f"--mixed-voice-fraction must be in [0, 1], got {args.mixed_voice_fraction}")
    if not 0 <= args.speed_perturb <= 1:
        p.error(f"--speed-perturb must be in [0, 1], got {args.speed_perturb}")
    if not 0 <= args.extra_voice_fraction <= 1:
        p.error(f"--extra-voice-fraction must be in [0, 1], got {args.extra_voice_fraction}")
    if not 0 <= args.vtlp <= 1:
        p.error(f"--vtlp must be in [0, 1], got {args.vtlp}")
    if args.vocab_size is None:
        args.vocab_size = SIZES[args.size].vocab_size
    from .synth import SynthError

    try:
        train(args)
    except SynthError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
