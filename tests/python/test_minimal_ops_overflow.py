"""An Int32 result out of range names its value (issue 17: the core's
tensor_ops computes it, and the binding's slot path uses the same words).
The message used to show a literal "%.0f"."""

import pytest

import strideweave as sw


def int32_tensor(cls, values):
    c = sw.Generic(values, dtype=sw.DType.Int32) if cls is sw.Generic else cls(
        len(values), dtype=sw.DType.Int32)
    for i, v in enumerate(values):
        c[i] = v
    return sw.Tensor(c, 0, sw.Layout(sw.Shape(len(values)), sw.Stride(1)))


@pytest.mark.parametrize("cls", [sw.CPU, sw.Generic])
def test_int32_overflow_names_the_value(cls):
    t = int32_tensor(cls, [2**31 - 1, 5])
    with pytest.raises(OverflowError, match=r"^add: Int32 result 4294967294 is out of range$"):
        sw.add(t, t)
    with pytest.raises(OverflowError,
                       match=r"^elementwise_mul: Int32 result 4611686014132420609 is out of range$"):
        sw.elementwise_mul(t, t)
    with pytest.raises(OverflowError, match=r"^reduce_sum: Int32 result 2147483652 is out of range$"):
        sw.reduce_sum(t, "a -> 1")
