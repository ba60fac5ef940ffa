"""Row-by-row inner products ``a @ b.T (+ bias)``, through oneDNN on the CPU.

PyTorch sends a float32 ``torch.mm`` on the CPU to MKL's sgemm and its convolutions to oneDNN. A
matrix product is a 1×1 convolution (rows of ``a`` as pixels, rows of ``b`` as filters), and where MKL
does not pick its widest vector code oneDNN's kernel is faster (2.1× on the 2-core AMD EPYC of the
README's measurements; ``benchmarks/scoring.py`` prints both rates for the machine it runs on). The arithmetic is IEEE float32
either way (results agree to float32 rounding); where ``torch.backends.mkldnn.conv.fp32_precision``
allows a lower precision, the products stay with ``torch.mm``.
"""

from __future__ import annotations

import torch
from torch import Tensor


def dot_products(a: Tensor, b: Tensor, bias: Tensor | None = None, *, tanh: bool = False) -> Tensor:
    """``a @ b.T + bias``: inner products ``[M, N]`` of the rows of ``a [M, K]`` and ``b [N, K]``.

    The similarity step of every Chamfer measure (HAP-VR Eq. 3, TCA Eq. 8) and the region attention's
    linear layer. Float32 CPU tensors outside autograd go through oneDNN as a 1×1 convolution (see the
    module text); anything else (CUDA, other dtypes, gradients, oneDNN disabled) through ``torch.mm``.
    ``bias``: optional ``[N]``, added to every row. ``tanh``: return ``tanh`` of the result (on the
    oneDNN path applied as the products are written, where ``torch.tanh`` would be a slow second pass).

    Examples:
        >>> import torch
        >>> a, b = torch.randn(5, 16), torch.randn(7, 16)
        >>> torch.allclose(dot_products(a, b), a @ b.T, atol=1e-5)
        True
        >>> dot_products(a, b, torch.ones(7)).shape
        torch.Size([5, 7])
        >>> torch.allclose(dot_products(a, b, tanh=True), torch.tanh(a @ b.T), atol=1e-5)
        True
    """
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"a and b must be matrices [M, K] and [N, K], got {tuple(a.shape)} and {tuple(b.shape)}")
    if bias is not None and bias.shape != b.shape[:1]:
        raise ValueError(f"bias must have shape [N] = [{b.shape[0]}], got {tuple(bias.shape)}")
    if _one_dnn(a, b, bias):
        m, k = a.shape
        pixels = a.contiguous().view(1, 1, m, k).permute(0, 3, 1, 2)          # [1, K, 1, M], channels last
        filters = b.contiguous().view(-1, k, 1, 1)
        if tanh:
            out = torch.ops.mkldnn._convolution_pointwise(pixels, filters, bias, [0, 0], [1, 1], [1, 1], 1,
                                                          "tanh", [], "")
        else:
            out = torch.ops.aten.mkldnn_convolution(pixels, filters, bias, [0, 0], [1, 1], [1, 1], 1)
        return out.permute(0, 2, 3, 1).reshape(m, b.shape[0])               # channels last: a view
    out = a @ b.T
    if bias is not None:
        out = out + bias
    return torch.tanh(out) if tanh else out


def _one_dnn(*tensors: Tensor | None) -> bool:
    present = [t for t in tensors if t is not None]
    return (torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled
            and hasattr(torch.ops.mkldnn, "_convolution_pointwise")
            and torch.backends.mkldnn.conv.fp32_precision in ("none", "ieee")   # no bf16 / tf32 shortcuts
            and all(t.device.type == "cpu" and t.dtype == torch.float32 for t in present)
            and not (torch.is_grad_enabled() and any(t.requires_grad for t in present))
            and all(t.shape[0] > 0 for t in present[:2]) and present[0].shape[1] > 0)
