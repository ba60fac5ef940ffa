"""dot_products: a @ b.T (+ bias, tanh) through oneDNN on the CPU, torch.mm elsewhere."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from hapref.similarity.products import dot_products


def ops_called(fn) -> set[str]:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return {event.key for event in prof.key_averages()}


@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (7, 3, 5), (300, 257, 512), (2, 1000, 9)])
def test_equals_the_matrix_product_in_float64(m: int, n: int, k: int) -> None:
    g = torch.Generator().manual_seed(m * n + k)
    a, b, bias = (torch.randn(*shape, generator=g) for shape in ((m, k), (n, k), (n,)))
    exact = a.double() @ b.double().T + bias.double()
    tolerance = 1e-6 * (k ** 0.5) * 8
    torch.testing.assert_close(dot_products(a, b, bias).double(), exact, rtol=0, atol=tolerance)
    torch.testing.assert_close(dot_products(a, b).double(), exact - bias.double(), rtol=0, atol=tolerance)
    torch.testing.assert_close(dot_products(a, b, bias, tanh=True).double(), torch.tanh(exact), rtol=0, atol=tolerance)


def test_float32_on_the_cpu_goes_through_onednn_and_the_rest_through_mm(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = torch.randn(64, 32), torch.randn(48, 32)
    if torch.backends.mkldnn.is_available():
        assert "aten::mkldnn_convolution" in ops_called(lambda: dot_products(a, b))
        assert "mkldnn::_convolution_pointwise" in ops_called(lambda: dot_products(a, b, tanh=True))
    monkeypatch.setattr(torch.backends.mkldnn, "enabled", False)
    called = ops_called(lambda: dot_products(a, b))
    monkeypatch.undo()
    assert "aten::mm" in called and "aten::mkldnn_convolution" not in called
    conv, old = torch.backends.mkldnn.conv, torch.backends.mkldnn.conv.fp32_precision
    conv.fp32_precision = "bf16"                  # convolutions may use bf16: products stay IEEE float32
    try:
        called = ops_called(lambda: dot_products(a, b))
    finally:
        conv.fp32_precision = old
    assert "aten::mm" in called and "aten::mkldnn_convolution" not in called
    called = ops_called(lambda: dot_products(a.double(), b.double()))
    assert "aten::mm" in called and "aten::mkldnn_convolution" not in called


def test_non_contiguous_inputs_and_empty_rows() -> None:
    a, b = torch.randn(16, 30).T, torch.randn(40, 32)[:, ::2]      # views [30, 16] and [40, 16]
    assert not a.is_contiguous() and not b.is_contiguous()
    torch.testing.assert_close(dot_products(a, b), a @ b.T, rtol=1e-5, atol=1e-5)
    assert dot_products(torch.zeros(0, 16), b).shape == (0, 40)


def test_gradients_flow_as_for_the_matrix_product() -> None:
    a = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, y, z: dot_products(x, y, z, tanh=True), (a, b, bias))
    a32 = torch.randn(6, 4, requires_grad=True)
    dot_products(a32, torch.ones(5, 4)).sum().backward()
    torch.testing.assert_close(a32.grad, torch.full((6, 4), 5.0))


def test_bad_shapes_raise() -> None:
    with pytest.raises(ValueError, match=r"a and b must be matrices \[M, K\] and \[N, K\]"):
        dot_products(torch.randn(3, 4), torch.randn(3, 5))
    with pytest.raises(ValueError, match=r"a and b must be matrices"):
        dot_products(torch.randn(3), torch.randn(3, 3))
    with pytest.raises(ValueError, match=r"bias must have shape \[N\] = \[2\]"):
        dot_products(torch.randn(3, 4), torch.randn(2, 4), torch.randn(3))
