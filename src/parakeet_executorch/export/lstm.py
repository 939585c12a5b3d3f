"""The prediction network's LSTM as one linear per layer, so that a recipe can quantize its gate weights.

NeMo's ``RNNTDecoder`` runs its prediction network through ``LSTMDropout``, which holds a ``torch.nn.LSTM``
(``decoder.prediction.dec_rnn.lstm``). torchao's configs quantize ``nn.Linear`` only, so without this module the
LSTM's gate weights stay float: at full size (2 layers of 640) 26 MB read on every decoder step, most of a step's
time on the CPU, where one-row products are bound by the weight reads (0.84 ms a step in fp32, 0.28-0.38 ms with
fpa8w's 8-bit gates; ``benchmarks/results/fpa8w_decoder/``).

One LSTM layer's step is ``gates = x W_ih^T + b_ih + h W_hh^T + b_hh`` followed by the elementwise cell update
(PyTorch's gate order i, f, g, o). The two products are one linear over the concatenated input ``[x, h]`` with
weight ``[W_ih, W_hh]`` (4H x (I + H)) and bias ``b_ih + b_hh``: the same function up to the summation order.
``convert_lstms`` swaps the module before a recipe with ``quantizes_lstm`` (``recipe_registry.py``) quantizes
the model, and the quantized model is what the .pte is compared against, as for ``pointwise.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


class LstmAsLinears(torch.nn.Module):
    """A unidirectional ``torch.nn.LSTM`` (time-major, no projection) as one ``nn.Linear`` per layer.

    ``forward(x, (h, c))`` has the LSTM's signature: x [T, B, I], h and c [L, B, H] (zeros when the state is
    None) -> (output [T, B, H], (h [L, B, H], c [L, B, H])). The time steps run in a Python loop: the exported
    decoder step has T = 1.
    """

    def __init__(self, lstm: torch.nn.LSTM):
        super().__init__()
        self.hidden_size = int(lstm.hidden_size)
        self.num_layers = int(lstm.num_layers)
        self.gates = torch.nn.ModuleList()
        for layer in range(self.num_layers):
            w_ih = getattr(lstm, f"weight_ih_l{layer}").detach()
            w_hh = getattr(lstm, f"weight_hh_l{layer}").detach()
            linear = torch.nn.Linear(
                w_ih.shape[1] + w_hh.shape[1], w_ih.shape[0], bias=lstm.bias, device=w_ih.device, dtype=w_ih.dtype
            )
            with torch.no_grad():
                linear.weight.copy_(torch.cat([w_ih, w_hh], dim=1))
                if lstm.bias:
                    linear.bias.copy_(getattr(lstm, f"bias_ih_l{layer}") + getattr(lstm, f"bias_hh_l{layer}"))
            self.gates.append(linear)

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None):
        if state is None:
            zeros = x.new_zeros(self.num_layers, x.shape[1], self.hidden_size)
            state = (zeros, zeros)
        h, c = list(state[0].unbind(0)), list(state[1].unbind(0))
        outputs = []
        for t in range(x.shape[0]):
            inp = x[t]
            for layer, linear in enumerate(self.gates):
                i, f, g, o = linear(torch.cat([inp, h[layer]], dim=-1)).chunk(4, dim=-1)
                c[layer] = torch.sigmoid(f) * c[layer] + torch.sigmoid(i) * torch.tanh(g)
                h[layer] = torch.sigmoid(o) * torch.tanh(c[layer])
                inp = h[layer]
            outputs.append(inp)
        return torch.stack(outputs), (torch.stack(h), torch.stack(c))


def is_convertible(lstm) -> bool:
    """Whether ``lstm`` is a ``torch.nn.LSTM`` that ``LstmAsLinears`` reproduces: time-major, unidirectional, no
    projection (what NeMo's prediction network builds)."""
    return (
        type(lstm) is torch.nn.LSTM
        and not lstm.batch_first
        and not lstm.bidirectional
        and int(getattr(lstm, "proj_size", 0)) == 0
    )


def convert_lstms(root: torch.nn.Module, in_part: Callable[[str], bool]) -> list[str]:
    """Replace every convertible ``torch.nn.LSTM`` under ``root`` whose name ``in_part`` accepts with
    ``LstmAsLinears``, in place. Returns the names of the replaced modules. An LSTM it cannot reproduce
    (``is_convertible``) is left as it is, and the recipe's report names it as float."""
    replaced = []
    for name, module in list(root.named_modules()):
        if not name or not in_part(name) or not is_convertible(module):
            continue
        parent_name, _, child = name.rpartition(".")
        parent = root.get_submodule(parent_name) if parent_name else root
        setattr(parent, child, LstmAsLinears(module))
        replaced.append(name)
    return replaced
