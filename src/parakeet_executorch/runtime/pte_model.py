"""An exported Parakeet TDT .pte loaded with ExecuTorch's Python runtime (its pybindings, which bring torch): its
methods and metadata. ``native_pte_model`` is the same interface without torch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from ..pte_format import REQUIRED_METHODS
from .et_errors import explain
from .pte_checks import PteModelError, checked_pte_path, metadata_of, method_load_hint, uses_lowbit_ops
from .runtime_log import captured_runtime_log


class PteModel:
    """The four compute methods of an exported .pte plus its metadata (``ModelMetadata``).

    Args:
        path: the ``model.pte`` written by ``parakeet-export``.
    Raises:
        PteModelError: missing file, not an ExecuTorch program (the message spells out ExecuTorch's error code and
            the runtime's reason), or a required method/metadata entry missing.
    """

    def __init__(self, path: str | Path):
        from executorch.runtime import Runtime

        path = checked_pte_path(path)
        if uses_lowbit_ops(path):
            from fpa_lowbit import executorch_kernels

            executorch_kernels.load()  # fpa4w programs call torchao::_linear_fp_act_*bit_weight.out
        self.path = path
        self._program = self._loaded(
            lambda: Runtime.get().load_program(path),
            f"cannot load {path} as an ExecuTorch program",
            "; pass a model.pte written by parakeet-export",
        )
        self.metadata = metadata_of(path, set(self._program.method_names), self._constant)
        self._methods = {
            name: self._loaded(
                lambda name=name: self._program.load_method(name),
                f"cannot load method {name} of {path}",
                method_load_hint,
            )
            for name in REQUIRED_METHODS
        }

    @staticmethod
    def _loaded(load, what: str, fix: str | Callable[[str], str]):
        """``load()`` (a load or an execute) with the runtime's log captured: replayed on success, folded into
        PteModelError on failure."""
        with captured_runtime_log() as log:
            try:
                result, error = load(), None
            except Exception as exc:  # the runtime raises RuntimeError (and ValueError for some loaders)
                result, error = None, exc
        if error is not None:
            detail = explain(str(error), log.last_message)
            raise PteModelError(f"{what} ({detail}){fix if isinstance(fix, str) else fix(detail)}") from error
        log.replay()
        return result

    def _execute(self, method, name: str, inputs: list):
        # The runtime logs from inside execute too (a portable program's first call: its CPU-info probe), so the
        # call goes through the same capture as a load.
        return self._loaded(lambda: method.execute(inputs), f"method {name} of {self.path} failed", "")

    def _constant(self, name: str):
        method = self._loaded(
            lambda: self._program.load_method(name),
            f"cannot load method {name} of {self.path}",
            "; re-export it with parakeet-export",
        )
        values = self._execute(method, name, [])
        if name == "durations":
            return [int(v) for v in values]
        return values[0]

    def preprocessor(self, audio: torch.Tensor | np.ndarray, length: int) -> tuple[torch.Tensor, int]:
        """Log-mel features of a hop-aligned waveform: float32 [S] -> ([1, F, T_mel], valid frames)."""
        features, feature_length = self._execute(
            self._methods["preprocessor"],
            "preprocessor",
            [torch.as_tensor(audio), torch.tensor([length], dtype=torch.int64)],
        )
        return features, int(feature_length.item())

    def encoder(self, features: torch.Tensor, feature_length: int) -> tuple[torch.Tensor, int]:
        """Projected encoder frames: [1, F, T_mel] -> ([1, T_enc, J], valid encoder frames)."""
        encoded, encoded_length = self._execute(
            self._methods["encoder"], "encoder", [features, torch.tensor([feature_length], dtype=torch.int64)]
        )
        return encoded, int(encoded_length.item())

    def decoder_step(self, token: int, state: tuple[torch.Tensor, torch.Tensor]):
        """One prediction-network step: (token id, (h, c)) -> (prediction [1, 1, J], (h, c))."""
        prediction, h, c = self._execute(
            self._methods["decoder_step"],
            "decoder_step",
            [torch.tensor([[token]], dtype=torch.int64), state[0], state[1]],
        )
        return prediction, (h, c)

    def joint(self, encoded_frame: torch.Tensor, prediction: torch.Tensor) -> tuple[int, int]:
        """Greedy joint step: ([1, 1, J], [1, 1, J]) -> (token id, duration index)."""
        token, duration_index = self._execute(self._methods["joint"], "joint", [encoded_frame.contiguous(), prediction])
        return int(token.item()), int(duration_index.item())

    def initial_state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Zero LSTM state (h, c), each float32 [layers, 1, hidden]."""
        shape = (self.metadata.num_lstm_layers, 1, self.metadata.pred_hidden)
        return torch.zeros(shape), torch.zeros(shape)
