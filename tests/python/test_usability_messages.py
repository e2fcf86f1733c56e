"""Error messages in the user's words (issue 10, item 4): out-of-range keys
name the mode and its size on every key form, numbers agree with their
nouns, compound tensors are described by their planes rather than internal
terms, and type errors name the expected type with an example. Each test
also checks that the failed call changed nothing."""

import pathlib
import re

import numpy as np
import pytest

import strideweave as sw
from strideweave import CPU, Layout, Shape, Stride, Tensor
from strideweave.friendly import scaled_int32, tensor

ROOT = pathlib.Path(__file__).resolve().parents[2]


def exact(msg):
    return "^" + re.escape(msg) + "$"


def two_by_two():
    return tensor([[1, 2], [3, 4]])          # Float32, modes 0 and 1 of size 2


def nested():
    layout = Layout(Shape(2, [3, 4]), Stride(1, [2, 6]))
    return tensor(range(24), layout=layout)  # mode 1 has sub-modes of size 3 and 4


def unchanged(t, values, version):
    assert t.tolist() == values and t.carrier.version == version


# ---- out-of-range keys name the mode and its size (V-3, V-4, V-5, L-10) -----


def test_v3_tuple_key_out_of_range_names_mode_and_size():
    t = two_by_two()
    before, version = t.tolist(), t.carrier.version
    with pytest.raises(ValueError, match=exact("index 2 is out of range for mode 0 of size 2")):
        t[2, 0]
    with pytest.raises(ValueError, match=exact("index 2 is out of range for mode 1 of size 2")):
        t[0, 2] = 9.0
    unchanged(t, before, version)


def test_v3_integer_key_out_of_range_names_the_tensor_size():
    t = two_by_two()
    with pytest.raises(ValueError, match=exact("index 4 is out of range for a tensor of size 4")):
        t[4]
    with pytest.raises(ValueError, match=exact("index 4 is out of range for a tensor of size 4")):
        t[4] = 1.0
    unchanged(t, [1.0, 3.0, 2.0, 4.0], 0)


def test_v3_negative_keys_say_indices_do_not_wrap():
    t = two_by_two()
    with pytest.raises(ValueError, match=exact(
            "index -1 is out of range for mode 1 of size 2: indices run from 0 to 1 and do not "
            "wrap around")):
        t[0, -1]
    with pytest.raises(ValueError, match=exact(
            "index -1 is out of range for a tensor of size 4: indices run from 0 to 3 and do not "
            "wrap around")):
        t[-1]


def test_v3_nested_key_names_the_sub_mode():
    t = nested()
    with pytest.raises(ValueError, match=exact("index 3 is out of range for mode (1, 0) of size 3")):
        t[1, [3, 0]]
    with pytest.raises(ValueError, match=exact("index 4 is out of range for mode (1, 1) of size 4")):
        t[1, [0, 4]]
    with pytest.raises(ValueError, match=exact("index 12 is out of range for mode 1 of size 12")):
        t[1, 12]
    assert t[1, [2, 3]] == 23.0


def test_v3_huge_keys_are_out_of_range_not_overflow():
    t = two_by_two()
    with pytest.raises(ValueError, match=exact(f"index {2**70} is out of range for mode 1 of size 2")):
        t[0, 2**70]


def test_v5_slice_start_out_of_range_names_mode_and_size():
    t = two_by_two()
    with pytest.raises(ValueError, match=exact("slice start 5 is out of range for mode 0 of size 2")):
        t[5:, 0]
    with pytest.raises(ValueError, match=exact("slice start 2 is out of range for mode 1 of size 2")):
        t[:, 2:]
    assert t[1:, 0].tolist() == [3.0]           # an in-range start still slices


def test_v5_slice_key_integer_entry_out_of_range():
    t = two_by_two()
    with pytest.raises(ValueError, match=exact("index 2 is out of range for mode 0 of size 2")):
        t[2, :]
    with pytest.raises(ValueError, match=exact(
            "index -1 is out of range for mode 1 of size 2: indices run from 0 to 1 and do not "
            "wrap around")):
        t[:, -1]


def test_v5_empty_slice_says_why():
    t = two_by_two()
    with pytest.raises(ValueError, match=exact(
            "slice 1:1:1 for mode 0 of size 2 selects no index: it must select at least one "
            "index")):
        t[1:1, 0]


def test_l10_layout_call_names_mode_and_size():
    layout = Layout(Shape(2, [3, 4]), Stride(1, [2, 6]))
    with pytest.raises(ValueError, match=exact("index 2 is out of range for mode 0 of size 2")):
        layout((2, 0))
    with pytest.raises(ValueError, match=exact("index 24 is out of range for a layout of size 24")):
        layout(24)
    with pytest.raises(ValueError, match=exact("index 3 is out of range for mode (1, 0) of size 3")):
        layout((1, [3, 0]))


# ---- numbers agree -------------------------------------------------------------


def test_numbers_agree_one_component_and_one_entry():
    t = two_by_two()
    with pytest.raises(ValueError, match=exact(
            "index (0,) has 1 component but the tensor has 2 modes; give one index per mode, or "
            "one integer for the whole tensor")):
        t[(0,)]
    with pytest.raises(ValueError, match=exact(
            "index [1, 2, 3] has 3 components but mode 1 has 2 sub-modes; give one index per "
            "sub-mode, or one integer for the whole mode")):
        nested()[1, [1, 2, 3]]
    with pytest.raises(ValueError, match=exact(
            "slice key has 1 entry but the tensor has 2 top-level modes (rank 2); give one "
            "integer or slice per mode, e.g. t[0, :]")):
        t[:]
    with pytest.raises(ValueError, match=exact(
            "permute order has 1 entry but the tensor has rank 2; name every top-level mode once, "
            "e.g. permute(t, 1, 0)")):
        sw.permute(t, 0)
    with pytest.raises(IndexError, match=exact("Shape index 5 is out of range: it has 2 top-level modes")):
        Shape(2, 3)[5]
    with pytest.raises(IndexError, match=exact("Shape index 1 is out of range: it has 1 top-level mode")):
        Shape(2)[1]
    with pytest.raises(IndexError, match=exact("Shape index -3 is out of range: it has 2 top-level modes")):
        Shape(2, 3)[-3]
    assert Shape(2, 3)[-1] == Shape(3)           # negatives count from the end, as in Python


def test_numbers_agree_one_slot_and_was_given():
    t = tensor([1.0, 2.0])
    source = t.carrier
    with pytest.raises(ValueError, match=exact(
            "the destination CPU carrier has 1 slot but the Tensor's layout spans 2 (its cosize), "
            "and it cannot grow; pass a carrier with at least 2 slots")):
        sw.move(t, CPU(1))
    assert not source.is_released() and t.tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match=exact(
            "get_index() takes 2 positional arguments (layout, key) but 1 was given")):
        Layout.get_index(t.layout)
    with pytest.raises(TypeError, match=exact(
            "a Layout call takes exactly one key, e.g. layout(5) or layout((1, 2)), not 2 arguments")):
        t.layout(0, 1)


def test_tensor_placement_past_the_carrier_shows_the_numbers():
    carrier = CPU(1)
    with pytest.raises(ValueError, match=exact(
            "offset + layout.cosize (1 + 1) exceeds the carrier size (1 slot)")):
        Tensor(carrier, 1, Layout(Shape(1), Stride(1)))
    with pytest.raises(ValueError, match=exact(
            "offset + layout.cosize exceeds the carrier size (1 slot)")):
        Tensor(carrier, 2**70, Layout(Shape(1), Stride(1)))
    assert carrier.version == 0 and not carrier.is_released()


def test_reshape_size_mismatch_counts_elements():
    t = tensor([1.0])
    with pytest.raises(ValueError, match=exact(
            "reshape to a shape of size 2 is impossible: the tensor has 1 element")):
        sw.reshape(t, Shape(2))


def test_friendly_tensor_counts_values_against_the_layout():
    with pytest.raises(ValueError, match=exact(
            "got 1 value for a layout of size 2; give exactly one value per element")):
        tensor([1.0], layout=Layout(Shape(2), Stride(1)))
    with pytest.raises(ValueError, match=exact(
            "got 3 values for a layout of size 2; give exactly one value per element")):
        tensor([1.0, 2.0, 3.0], layout=Layout(Shape(2), Stride(1)))


def test_reduce_sum_description_error_shows_examples():
    t = two_by_two()
    with pytest.raises(ValueError, match=re.escape(
            'e.g. "a b -> a" or "a b -> 1"')):
        sw.reduce_sum(t, "a b => a")
    with pytest.raises(ValueError, match=exact(
            "reduce_sum: description 'a -> 1' names 1 input mode, but the tensor has 2 top-level "
            "modes")):
        sw.reduce_sum(t, "a -> 1")


# ---- compound tensors are described by their planes (T-11) ----------------------


def test_t11_scaled_int32_export_message():
    s = scaled_int32([1, 2, 3], scale=0.5)
    token = s._version_token()
    for export in (np.from_dlpack, lambda x: x.__dlpack__(), lambda x: x.__dlpack_device__()):
        with pytest.raises(NotImplementedError, match=exact(
                "DLPack export is not implemented for ScaledInt32 tensors (two planes); only "
                "Float32 and Int32 tensors on one carrier can be exported")):
            export(s)
    assert s._version_token() == token


@pytest.mark.parametrize("action, cannot", [
    (lambda s: s[0], "read element by element"),
    (lambda s: s.__setitem__(0, 1), "written element by element"),
    (lambda s: s.tolist(), "converted with tolist() or to_list()"),
    (lambda s: sw.move(s, CPU(3, dtype=sw.DType.Int32)), "moved"),
    (lambda s: sw.add(s, s), None),
])
def test_t11_scaled_int32_operations_name_the_planes(action, cannot):
    s = scaled_int32([1, 2, 3], scale=0.5)
    token = s._version_token()
    if cannot is None:
        with pytest.raises(NotImplementedError, match=exact(
                "AddOperation.forward: input 0 has 2 planes (a compound dtype such as "
                "ScaledInt32), which this operation does not support; pass tensors on one carrier")):
            action(s)
    else:
        with pytest.raises(NotImplementedError, match=exact(
                f"a ScaledInt32 tensor has two planes and cannot be {cannot}; only tensors with one "
                "plane (Float32, Int32 or Bool, on one carrier) can")):
            action(s)
    assert s._version_token() == token
    assert all(not c.is_released() for _, c, _, _ in s._subtensors)


def test_t11_backward_on_scaled_int32_names_the_planes():
    s = scaled_int32([[1, 2], [3, 4]])
    with pytest.raises(NotImplementedError, match=exact(
            "a ScaledInt32 tensor has two planes and cannot be differentiated; only Float32 "
            "tensors on one carrier can")):
        s.backward()


# ---- type errors name the expected type with an example -------------------------


@pytest.mark.parametrize("bad", [(4, 6), [4, 6], 24, Stride(1)])
def test_reshape_expects_a_shape_with_an_example(bad):
    t = tensor(range(24), layout=Layout(Shape(24), Stride(1)))
    with pytest.raises(TypeError, match=exact(
            f"reshape expects a Shape, e.g. Shape(4, 6), not {type(bad).__name__}")):
        sw.reshape(t, bad)
    assert sw.reshape(t, Shape(4, 6)).layout.shape == Shape(4, 6)


def test_broadcast_to_and_canonical_expect_a_shape_with_an_example():
    t = tensor([1.0, 2.0])
    with pytest.raises(TypeError, match=exact("broadcast_to expects a Shape, e.g. Shape(4, 6), not tuple")):
        sw.broadcast_to(t, (2, 2))
    with pytest.raises(TypeError, match=exact("broadcast_to expects a Shape, e.g. Shape(4, 6), not tuple")):
        t.layout.broadcast_to((2, 2))
    with pytest.raises(TypeError, match=exact("canonical expects a Shape, e.g. Shape(4, 6), not tuple")):
        Layout.canonical((4, 6))


def test_layout_constructor_expects_shape_and_stride_with_an_example():
    with pytest.raises(ValueError, match=exact(
            "Layout expects a Shape as its shape, e.g. Layout(Shape(4, 6), Stride(1, 4)), not tuple")):
        Layout((4, 6), Stride(1, 4))
    with pytest.raises(ValueError, match=exact(
            "Layout expects a Stride as its stride, e.g. Layout(Shape(4, 6), Stride(1, 4)), not "
            "tuple")):
        Layout(Shape(4, 6), (1, 4))


def test_tensor_layout_argument_expects_a_layout_with_an_example():
    msg = exact("layout must be a Layout, e.g. Layout(Shape(4), Stride(1)), not Shape")
    with pytest.raises(TypeError, match=msg):
        Tensor(CPU(4), 0, Shape(4))
    with pytest.raises(TypeError, match=msg):
        tensor([1.0, 2.0, 3.0, 4.0], layout=Shape(4))


def test_tensor_index_type_error_shows_the_key_forms():
    t = two_by_two()
    with pytest.raises(TypeError, match=exact(
            "a tensor index must be an integer or a (nested) list/tuple of integers, e.g. t[5] or "
            "t[1, [2, 0]] (slices make views: t[0, :]), not float")):
        t[0.5]
    with pytest.raises(TypeError, match=exact(
            "an index must be an integer or a list/tuple of indices, e.g. layout(5) or "
            "layout((1, 2)), not str")):
        t.layout("0")


# ---- no internal jargon left in the extension's messages -------------------------


def test_messages_in_the_sources_use_no_internal_terms():
    # Words that name our internals, not the user's: no raised message may
    # use them (comments and docstrings are not scanned here).
    jargon = re.compile(r"one-subtensor|one-entry storage schema|reshape-compatible|"
                        r"normalized slice|several subtensors")
    raise_call = re.compile(r"(?:PyErr_Format|PyErr_SetString|sw_error_set(?:_errno)?)\((.*?)\);",
                            re.S)
    found = []
    for path in sorted((ROOT / "src").rglob("*.c")):
        for call in raise_call.findall(path.read_text()):
            if jargon.search(call):
                found.append(f"{path.relative_to(ROOT)}: {' '.join(call.split())}")
    assert found == []
