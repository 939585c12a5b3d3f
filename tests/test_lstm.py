"""The prediction network's LSTM as one linear per layer (export/lstm.py): same function, and quantized by fpa8w."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture()
def fresh_model(tiny_nemo):
    from parakeet_executorch.export.load import load_nemo_model

    return load_nemo_model(str(tiny_nemo))  # converted in place: not the session's shared model


@pytest.mark.parametrize("layers, bias", [(1, True), (2, True), (3, False)])
def test_lstm_as_linears_equals_torch_lstm(layers, bias):
    from parakeet_executorch.export.lstm import LstmAsLinears

    torch.manual_seed(layers)
    lstm = torch.nn.LSTM(40, 24, layers, bias=bias).eval()
    converted = LstmAsLinears(lstm)
    assert [tuple(g.weight.shape) for g in converted.gates] == [(96, 64)] + [(96, 48)] * (layers - 1)
    x = torch.randn(7, 3, 40)  # 7 steps, batch 3
    state = (torch.randn(layers, 3, 24), torch.randn(layers, 3, 24))
    with torch.no_grad():
        for s in (state, None):  # given and zero initial state
            ref_out, (ref_h, ref_c) = lstm(x, s)
            out, (h, c) = converted(x, s)
            for got, ref in ((out, ref_out), (h, ref_h), (c, ref_c)):
                assert got.shape == ref.shape
                assert (got - ref).abs().max().item() < 1e-5


def test_lstms_it_cannot_reproduce_are_left_alone():
    from parakeet_executorch.export.lstm import convert_lstms, is_convertible

    root = torch.nn.Module()
    root.plain = torch.nn.LSTM(8, 8)
    root.batch_first = torch.nn.LSTM(8, 8, batch_first=True)
    root.both_ways = torch.nn.LSTM(8, 8, bidirectional=True)
    root.projected = torch.nn.LSTM(8, 8, proj_size=4)
    assert [is_convertible(m) for m in root.children()] == [True, False, False, False]
    assert convert_lstms(root, lambda name: True) == ["plain"]
    assert type(root.batch_first) is torch.nn.LSTM and type(root.projected) is torch.nn.LSTM


def test_converted_prediction_network_computes_the_same_steps(fresh_model):
    from parakeet_executorch.export.lstm import LstmAsLinears, convert_lstms

    decoder = fresh_model.decoder
    tokens = [None, 5, 17, 3, 3, 90]

    def steps():
        outs, state = [], None
        with torch.no_grad():
            for t in tokens:  # NeMo's own predict, one token at a time, as greedy decoding calls it
                y = None if t is None else torch.tensor([[t]])
                g, state = decoder.predict(y, state, add_sos=False, batch_size=1)
                outs.append(g)
        return outs

    ref = steps()
    names = convert_lstms(fresh_model, lambda name: name.startswith("decoder"))
    assert names == ["decoder.prediction.dec_rnn.lstm"]
    assert isinstance(decoder.prediction["dec_rnn"].lstm, LstmAsLinears)
    for got, want in zip(steps(), ref):
        assert (got - want).abs().max().item() < 1e-5


def test_fpa8w_quantizes_the_lstm_and_other_recipes_name_it_float(fresh_model, tiny_nemo):
    from parakeet_executorch.export.load import load_nemo_model
    from parakeet_executorch.export.recipes import quantize_model

    layers = int(fresh_model.decoder.pred_rnn_layers)
    report = quantize_model(fresh_model, "none", "fpa8w")["parts"]["decoder"]
    assert report["quantized"] == report["linear_layers"] >= layers + 2  # LSTM layers, prednet and joint linears
    assert not any("LSTM" in line for line in report["not_covered"]), report["not_covered"]
    gates = fresh_model.decoder.prediction["dec_rnn"].lstm.gates[0].weight
    assert type(gates).__name__ == "UIntxWeight" and gates.bitwidth == 8
    assert report["weight_bytes_after"] < 0.5 * report["weight_bytes_before"]

    other = quantize_model(load_nemo_model(str(tiny_nemo)), "none", "8da8w")["parts"]["decoder"]
    assert other["quantized"] == other["linear_layers"] == report["linear_layers"] - layers
    assert any("LSTM" in line and "only fpa8w" in line for line in other["not_covered"]), other["not_covered"]
