"""The four exported methods of a Parakeet TDT .pte, as ``torch.nn.Module`` wrappers over NeMo's own modules.

Nothing here re-implements the model: each wrapper calls the NeMo module whose behaviour the method must have,
and only reshapes inputs and outputs into the fixed, batch-size-1 signatures the runners use, which
``pte_format.METHODS`` lists (the table is in ``pte_format``'s docstring).
"""

from __future__ import annotations

import torch


class PreprocessorMethod(torch.nn.Module):
    """NeMo's ``AudioToMelSpectrogramPreprocessor`` on one waveform (dither off: eval mode)."""

    def __init__(self, preprocessor):
        super().__init__()
        self.preprocessor = preprocessor

    def forward(self, audio: torch.Tensor, length: torch.Tensor):
        features, feature_length = self.preprocessor(input_signal=audio.unsqueeze(0), length=length)
        return features, feature_length


class EncoderMethod(torch.nn.Module):
    """NeMo's ``ConformerEncoder`` followed by the joint's encoder projection (``RNNTJoint.project_encoder``)."""

    def __init__(self, encoder, joint):
        super().__init__()
        self.encoder = encoder
        self.project_encoder = joint.project_encoder

    def forward(self, features: torch.Tensor, feature_length: torch.Tensor):
        encoded, encoded_length = self.encoder(audio_signal=features, length=feature_length)
        return self.project_encoder(encoded.transpose(1, 2)), encoded_length


class DecoderStepMethod(torch.nn.Module):
    """One step of NeMo's ``RNNTDecoder`` prediction network plus ``RNNTJoint.project_prednet``.

    Blank (the start symbol) embeds to zeros, as NeMo's ``predict(None, ...)`` does for ``_SOS``; the mask makes
    this hold even if the embedding's padding row were ever trained away from zero.
    """

    def __init__(self, decoder, joint):
        super().__init__()
        self.decoder = decoder
        self.project_prednet = joint.project_prednet
        self.blank_id = int(decoder.blank_idx)

    def forward(self, token: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
        embedded = self.decoder.prediction["embed"](token)
        embedded = embedded * (token != self.blank_id).unsqueeze(-1).to(embedded.dtype)
        out, (h_new, c_new) = self.decoder.prediction["dec_rnn"](embedded.transpose(0, 1), (h, c))
        return self.project_prednet(out.transpose(0, 1)), h_new, c_new


class JointMethod(torch.nn.Module):
    """NeMo's ``RNNTJoint.joint_after_projection`` with the greedy argmaxes inside the graph.

    The output [V + 1 + D] is split into token logits (blank last) and duration logits before any argmax,
    as NeMo's TDT decoders do. Logits of a bf16 joint are cast to float32 first: bf16 argmax fails to compile as
    a Metal shader in some ExecuTorch/macOS versions, and float32 takes no ties that bf16 rounding would make.
    A float32 graph gets no cast at all.
    """

    def __init__(self, joint, num_token_classes: int):
        super().__init__()
        self.joint = joint
        self.num_token_classes = int(num_token_classes)

    def forward(self, encoded_frame: torch.Tensor, prediction: torch.Tensor):
        logits = self.joint.joint_after_projection(encoded_frame, prediction).reshape(-1)
        if logits.dtype != torch.float32:
            logits = logits.float()
        token = torch.argmax(logits[: self.num_token_classes], dim=0, keepdim=True)
        duration_index = torch.argmax(logits[self.num_token_classes :], dim=0, keepdim=True)
        return token, duration_index
