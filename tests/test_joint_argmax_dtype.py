"""The joint method's greedy argmaxes run in float32 whatever the joint's dtype (bf16 argmax is a Metal shader
risk), and a float32 joint's graph has no cast added."""

from __future__ import annotations

import pytest
import torch

from parakeet_executorch.export.methods import JointMethod


@pytest.fixture(scope="module")
def tiny_joint(tiny_nemo):
    from nemo.collections.asr.models import ASRModel

    model = ASRModel.restore_from(str(tiny_nemo), map_location="cpu").eval()
    return model.joint, model.tokenizer.vocab_size + 1


def _argmax_input_dtypes(ep) -> list[torch.dtype]:
    return [
        n.args[0].meta["val"].dtype
        for n in ep.graph.nodes
        if n.op == "call_function" and n.target == torch.ops.aten.argmax.default
    ]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_argmaxes_take_float32_logits(tiny_joint, dtype):
    joint, classes = tiny_joint
    method = JointMethod(joint, classes).eval().to(dtype)
    torch.manual_seed(0)
    enc = torch.randn(1, 1, joint.enc.out_features, dtype=dtype)
    pred = torch.randn(1, 1, joint.pred.out_features, dtype=dtype)
    ep = torch.export.export(method, (enc, pred))
    assert _argmax_input_dtypes(ep) == [torch.float32, torch.float32]
    casts = [n for n in ep.graph.nodes if n.op == "call_function" and str(n.target).startswith("aten.to")]
    assert bool(casts) == (dtype != torch.float32)
    logits = joint.joint_after_projection(enc, pred).reshape(-1).float()
    token, duration = ep.module()(enc, pred)
    assert token.item() == int(torch.argmax(logits[:classes])) and duration.item() == int(
        torch.argmax(logits[classes:])
    )
