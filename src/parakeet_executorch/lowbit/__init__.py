from .packing import pack_lowbit, unpack_lowbit
from .qparams import choose_qparams, dequantize
from .ops import linear_op, register
import torch
def dequantize_packed(B, S, Z, bitwidth, group_size, dtype=None):
    q = unpack_lowbit(B, bitwidth)
    return dequantize(q, S, Z, group_size, dtype or S.dtype)
