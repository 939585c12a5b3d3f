"""Token-by-token generation with Hugging Face transformers on the CPU: fp32 against fpa_lowbit 4-bit.

What a transformers user sees: a random-weight Qwen2 (hidden 1024, 4 layers, biased q/k/v, every width a multiple
of 32) generates greedily, fp32 and after ``quantize_(model, UIntxWeightOnlyConfig(bitwidth=4, group_size=32))``
(every linear but the output embedding, as transformers' ``TorchAoConfig`` does). Each step runs every linear at
one activation row, so this is the M = 1 regime of ``bench_lowbit.py`` inside a real model, Python and attention
included. The two models take turns, best of ``--rounds``; it prints decode tokens/s of each and their ratio, and
checks that both generated sequences have the requested length.

    python benchmarks/bench_lowbit_decode.py --threads 2 --out benchmarks/results/lowbit_call_overhead/decode
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from fpa_lowbit import UIntxWeightOnlyConfig, _native
from torchao.quantization import quantize_
from transformers import Qwen2Config, Qwen2ForCausalLM


def make_models(layers: int) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(fp32, 4-bit) copies of one random Qwen2 with random q/k/v biases; the 4-bit one keeps lm_head in fp32."""
    torch.manual_seed(0)
    config = Qwen2Config(
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=layers,
        num_attention_heads=16,
        num_key_value_heads=2,
        vocab_size=4096,
        max_position_embeddings=512,
    )
    fp = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        for layer in fp.model.layers:
            for proj in ("q_proj", "k_proj", "v_proj"):
                getattr(layer.self_attn, proj).bias.normal_(0, 0.1)
    q = Qwen2ForCausalLM(config).eval()
    q.load_state_dict(fp.state_dict())
    quantize_(q.model, UIntxWeightOnlyConfig(bitwidth=4, group_size=32))
    return fp, q


def decode_seconds(model: torch.nn.Module, prompt: torch.Tensor, new_tokens: int) -> float:
    """Seconds of one greedy ``generate`` of exactly ``new_tokens`` tokens after ``prompt``."""
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
    el = time.perf_counter() - t0
    if out.shape[1] != prompt.shape[1] + new_tokens:
        raise RuntimeError(f"generate returned {out.shape[1] - prompt.shape[1]} tokens, not {new_tokens}")
    return el


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, help="folder for results.md and results.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    from bench_lowbit import _cpu_name

    fp, q = make_models(args.layers)
    prompt = torch.arange(1, 9).unsqueeze(0)
    models = {"fp32": fp, "fpa4w": q}
    for m in models.values():  # warm-up: first-call allocations, the weights' call plans
        decode_seconds(m, prompt, 4)
    best = dict.fromkeys(models, float("inf"))
    for _ in range(args.rounds):
        for name, m in models.items():
            best[name] = min(best[name], decode_seconds(m, prompt, args.new_tokens))
    rate = {name: args.new_tokens / s for name, s in best.items()}
    info = {
        "cpu": _cpu_name(),
        "isa": _native.best_isa(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "layers": args.layers,
        "new_tokens": args.new_tokens,
        "rounds": args.rounds,
    }
    text = (
        f"# Greedy decode, random Qwen2 (hidden 1024, {args.layers} layers), {args.new_tokens} new tokens after 8\n\n"
        f"- Host: {info['cpu']}, kernel level **{info['isa']}**, {info['threads']} threads; torch {info['torch']}; "
        f"best of {args.rounds} rounds, the two models taking turns.\n\n"
        "| model | tokens/s | s per call of generate |\n|---|---|---|\n"
        + "".join(f"| {name} | {rate[name]:.1f} | {best[name]:.3f} |\n" for name in models)
        + f"\n**4-bit / fp32 decode speed: {rate['fpa4w'] / rate['fp32']:.2f}x**\n"
    )
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.md").write_text(text)
        (args.out / "results.json").write_text(json.dumps({"info": info, "seconds": best, "tokens_per_s": rate}))


if __name__ == "__main__":
    main()
