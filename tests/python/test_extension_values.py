"""The carrier-extension value types and the definition registry
(contract-carriers X-1 .. X-3, X-7, X-8, X-10 (shape), X-11 .. X-13; seed
"Move routes are exact and definition-owned")."""

import threading
import typing

import pytest

import strideweave as sw
from strideweave.carriers import extension as ext
from strideweave.carriers.move import (dispatch_move, register_move_operation,
                                       registered_move_operation,
                                       unregister_move_operation)
from extension_for_tests import (D, L, Store, Transfer, cpu_tensor, define, new_class,
                                 route)

TOP_AND_EXT = ["CarrierDefinition", "StorageProvider", "TransferRoute", "Unsupported",
               "register_carrier_definition"]
EXT_ONLY = ["TransferProvider", "TransferRequest", "PreparedTransfer", "ProviderCompletion",
            "TransferRouteMoveOperation"]


def cb(*args):
    return None


def storage(**kw):
    fields = dict(supports_dtype=cb, physical_size=cb, allocate=cb, release=cb, read=cb,
                  write=cb)
    fields.update(kw)
    return ext.StorageProvider(**fields)


def transfer_provider():
    return ext.TransferProvider(lambda request: None)


# ---- import paths ---------------------------------------------------------------------


def test_import_paths_are_identical_objects():
    for name in TOP_AND_EXT:
        assert getattr(sw, name) is getattr(ext, name), name
    for name in EXT_ONLY:
        assert hasattr(ext, name), name
    from strideweave import (CarrierDefinition, StorageProvider, TransferRoute,  # noqa: F401
                             Unsupported, register_carrier_definition)
    from strideweave.carriers.extension import (PreparedTransfer, ProviderCompletion,  # noqa: F401
                                                TransferProvider, TransferRequest,
                                                TransferRouteMoveOperation)


def test_transfer_route_move_operation_is_a_move_operation():
    assert issubclass(ext.TransferRouteMoveOperation, sw.MoveOperation)


# ---- X-1 immutable values -----------------------------------------------------------------


def value_instances():
    A, B = new_class("ValA"), new_class("ValB")
    prepare = lambda request: None  # noqa: E731
    submit = lambda: None  # noqa: E731
    sp = storage()
    tp = ext.TransferProvider(prepare)
    r = ext.TransferRoute(A, B, "a-to-b", tp)
    t = cpu_tensor([1.0, 2.0], L([2], [2]))  # cosize 3
    layout = t.layout
    dest = sw.Generic([0.0] * 3)
    req = ext.TransferRequest(t, dest, sw.CPU, sw.Generic, D.Float32, layout, 3)
    return [
        (ext.Unsupported("no"), {"reason": "no"}),
        (sp, {"supports_dtype": cb, "physical_size": cb, "allocate": cb, "release": cb,
              "read": cb, "write": cb, "elementwise_fallback": False}),
        (tp, {"prepare": prepare}),
        (r, {"source_class": A, "destination_class": B, "route_id": "a-to-b", "provider": tp}),
        (req, {"tensor": t, "destination": dest, "source_class": sw.CPU,
               "destination_class": sw.Generic, "dtype": D.Float32, "layout": layout,
               "physical_span": 3}),
        (ext.PreparedTransfer(submit), {"submit": submit}),
        (ext.CarrierDefinition(sp, transfers=[r]),
         {"storage": sp, "kernels": None, "transfers": (r,), "composite": None, "facets": ()}),
    ]


def test_x1_fields_are_readable_under_their_names():
    for obj, fields in value_instances():
        for name, expected in fields.items():
            got = getattr(obj, name)
            if isinstance(expected, (tuple, str, int, bool)) and not isinstance(expected, type):
                assert got == expected and type(got) is type(expected), (type(obj), name)
            else:
                assert got is expected, (type(obj), name)


def test_x1_values_are_immutable():
    for obj, fields in value_instances():
        for name in fields:
            before = getattr(obj, name)
            with pytest.raises(AttributeError):
                setattr(obj, name, None)
            with pytest.raises(AttributeError):
                delattr(obj, name)
            assert getattr(obj, name) is before
        with pytest.raises(AttributeError):
            obj.extra_attribute = 1


def test_x1_definition_transfers_and_facets_are_tuples():
    d = ext.CarrierDefinition(storage())
    assert d.transfers == () and type(d.transfers) is tuple
    assert d.facets == () and type(d.facets) is tuple
    assert d.kernels is None and d.composite is None


# ---- X-2 Unsupported ---------------------------------------------------------------------------


def test_x2_unsupported_positional_and_keyword():
    assert ext.Unsupported("gapped layouts").reason == "gapped layouts"
    assert ext.Unsupported(reason="r").reason == "r"


@pytest.mark.parametrize("reason", [None, 3, b"bytes", ["r"]])
def test_x2_unsupported_reason_must_be_str(reason):
    with pytest.raises(TypeError):
        ext.Unsupported(reason)


def test_x2_unsupported_reason_must_not_be_empty():
    with pytest.raises(ValueError):
        ext.Unsupported("")


# ---- X-3 StorageProvider ------------------------------------------------------------------------


STORAGE_FIELDS = ["supports_dtype", "physical_size", "allocate", "release", "read", "write"]


def test_x3_storage_provider_positional_and_keyword():
    fns = [lambda *a, k=k: k for k in range(6)]
    a = ext.StorageProvider(*fns)
    b = ext.StorageProvider(*fns, True)
    c = ext.StorageProvider(**dict(zip(STORAGE_FIELDS, fns)), elementwise_fallback=True)
    for obj in (a, b, c):
        for name, fn in zip(STORAGE_FIELDS, fns):
            assert getattr(obj, name) is fn
    assert a.elementwise_fallback is False
    assert b.elementwise_fallback is True and c.elementwise_fallback is True


@pytest.mark.parametrize("field", STORAGE_FIELDS)
@pytest.mark.parametrize("bad", [None, 3, "read"])
def test_x3_each_callback_must_be_callable(field, bad):
    with pytest.raises(TypeError, match=f"{field} must be callable"):
        storage(**{field: bad})


def test_x3_callbacks_checked_in_field_order():
    with pytest.raises(TypeError, match="physical_size must be callable"):
        storage(physical_size=1, write=2)
    with pytest.raises(TypeError, match="supports_dtype must be callable"):
        storage(supports_dtype=None, release=None)


@pytest.mark.parametrize("flag", [1, 0, None, "yes"])
def test_x3_elementwise_fallback_must_be_exactly_bool(flag):
    with pytest.raises(TypeError, match="elementwise_fallback"):
        storage(elementwise_fallback=flag)


def test_x3_callback_check_precedes_the_fallback_check():
    with pytest.raises(TypeError, match="read must be callable"):
        storage(read=None, elementwise_fallback=1)


def test_x3_missing_callback_is_a_type_error():
    with pytest.raises(TypeError):
        ext.StorageProvider(cb, cb, cb, cb, cb)


# ---- X-7 TransferProvider, TransferRoute --------------------------------------------------------


def test_x7_transfer_provider():
    fn = lambda request: None  # noqa: E731
    assert ext.TransferProvider(fn).prepare is fn
    assert ext.TransferProvider(prepare=fn).prepare is fn
    with pytest.raises(TypeError, match="prepare must be callable"):
        ext.TransferProvider(None)
    with pytest.raises(TypeError, match="prepare must be callable"):
        ext.TransferProvider(prepare="fn")


def test_x7_transfer_route_positional_and_keyword():
    A, B = new_class("RouteA"), new_class("RouteB")
    tp = transfer_provider()
    r1 = ext.TransferRoute(A, B, "id", tp)
    r2 = ext.TransferRoute(source_class=A, destination_class=B, route_id="id", provider=tp)
    for r in (r1, r2):
        assert (r.source_class, r.destination_class, r.route_id, r.provider) == (A, B, "id", tp)
        assert r.source_class is A and r.destination_class is B and r.provider is tp


class NotACarrier:
    pass


BAD_CLASSES = [3, None, "CPU", NotACarrier, int, sw.Carrier]


@pytest.mark.parametrize("bad", BAD_CLASSES, ids=repr)
def test_x7_route_source_class_must_be_a_concrete_carrier_subclass(bad):
    B = new_class("RouteB")
    with pytest.raises(TypeError, match="source_class"):
        ext.TransferRoute(bad, B, "id", transfer_provider())


@pytest.mark.parametrize("bad", BAD_CLASSES, ids=repr)
def test_x7_route_destination_class_must_be_a_concrete_carrier_subclass(bad):
    A = new_class("RouteA")
    with pytest.raises(TypeError, match="destination_class"):
        ext.TransferRoute(A, bad, "id", transfer_provider())


def test_x7_route_instance_is_not_a_class():
    A = new_class("RouteA")
    with pytest.raises(TypeError, match="destination_class"):
        ext.TransferRoute(A, sw.CPU(1), "id", transfer_provider())


def test_x7_route_checks_in_order():
    A = new_class("RouteA")
    with pytest.raises(TypeError, match="source_class"):
        ext.TransferRoute(3, 4, 5, 6)
    with pytest.raises(TypeError, match="destination_class"):
        ext.TransferRoute(A, 4, "", 6)
    with pytest.raises(TypeError, match="route_id"):
        ext.TransferRoute(A, sw.CPU, 5, 6)
    with pytest.raises(ValueError, match="route_id"):
        ext.TransferRoute(A, sw.CPU, "", 6)


@pytest.mark.parametrize("rid", [None, 5, b"id"])
def test_x7_route_id_must_be_str(rid):
    with pytest.raises(TypeError, match="route_id"):
        ext.TransferRoute(new_class("RouteA"), sw.CPU, rid, transfer_provider())


def test_x7_route_id_must_not_be_empty():
    with pytest.raises(ValueError, match="route_id"):
        ext.TransferRoute(new_class("RouteA"), sw.CPU, "", transfer_provider())


@pytest.mark.parametrize("bad", [None, lambda request: None, "provider"], ids=["None", "fn", "str"])
def test_x7_provider_must_be_a_transfer_provider(bad):
    with pytest.raises(TypeError, match="provider"):
        ext.TransferRoute(new_class("RouteA"), sw.CPU, "id", bad)


def test_x7_storage_provider_is_not_a_transfer_provider():
    with pytest.raises(TypeError, match="provider"):
        ext.TransferRoute(new_class("RouteA"), sw.CPU, "id", storage())


def test_x7_shipped_classes_may_be_named_as_a_route_destination():
    r = ext.TransferRoute(new_class("RouteA"), sw.CPU, "to-cpu", transfer_provider())
    assert r.destination_class is sw.CPU


# ---- X-8 TransferRequest ------------------------------------------------------------------------


def request_args():
    t = cpu_tensor([1.0, 2.0, 3.0], L([3], [2]))  # cosize 5 over 3 elements
    d = sw.Generic([0.0] * 5)
    return dict(tensor=t, destination=d, source_class=sw.CPU, destination_class=sw.Generic,
                dtype=D.Float32, layout=t.layout, physical_span=5)


def test_x8_request_positional_and_keyword():
    a = request_args()
    r1 = ext.TransferRequest(*a.values())
    r2 = ext.TransferRequest(**a)
    for r in (r1, r2):
        assert r.tensor is a["tensor"] and r.destination is a["destination"]
        assert r.source_class is sw.CPU and r.destination_class is sw.Generic
        assert r.dtype is D.Float32 and r.layout is a["layout"]
        assert r.physical_span == 5


@pytest.mark.parametrize("field, bad", [
    ("tensor", [1.0, 2.0]),
    ("destination", [0.0] * 5),
    ("source_class", sw.Generic),
    ("destination_class", sw.CPU),
    ("dtype", D.Int32),
    ("layout", L([5], [1])),
])
def test_x8_request_mismatch_is_a_type_error(field, bad):
    a = request_args()
    a[field] = bad
    with pytest.raises(TypeError):
        ext.TransferRequest(**a)


@pytest.mark.parametrize("span", [3, 4, 6, 0])
def test_x8_request_wrong_span_is_a_value_error(span):
    a = request_args()
    a["physical_span"] = span
    with pytest.raises(ValueError):
        ext.TransferRequest(**a)


def test_x8_request_does_not_touch_the_carriers():
    a = request_args()
    src, dst = a["tensor"].carrier, a["destination"]
    sv, dv = src.version, dst.version
    ext.TransferRequest(**a)
    assert (src.version, dst.version) == (sv, dv)
    assert not src.is_released() and not dst.is_released()
    assert src.is_mutable() and dst.is_mutable()


# ---- PreparedTransfer --------------------------------------------------------------------------


def test_prepared_transfer_submit_must_be_callable():
    fn = lambda: None  # noqa: E731
    assert ext.PreparedTransfer(fn).submit is fn
    assert ext.PreparedTransfer(submit=fn).submit is fn
    with pytest.raises(TypeError, match="submit must be callable"):
        ext.PreparedTransfer(None)
    with pytest.raises(TypeError, match="submit must be callable"):
        ext.PreparedTransfer(42)


# ---- X-10 ProviderCompletion (shape; behaviour in test_extension_async) -------------------------


class GoodCompletion:
    @property
    def done(self):
        return True

    def wait(self):
        return None


class OnlyWait:
    def wait(self):
        return None


class OnlyDone:
    done = True


def test_x10_provider_completion_is_a_runtime_checkable_protocol():
    pc = ext.ProviderCompletion
    assert getattr(pc, "_is_protocol", False) is True
    assert getattr(pc, "_is_runtime_protocol", False) is True
    assert typing.Protocol in pc.__mro__
    assert isinstance(GoodCompletion(), pc)
    assert not isinstance(OnlyWait(), pc)
    assert not isinstance(OnlyDone(), pc)
    assert not isinstance(object(), pc)


# ---- X-11 CarrierDefinition ---------------------------------------------------------------------


def two_routes():
    A, B, C = new_class("DefA"), new_class("DefB"), new_class("DefC")
    tp = transfer_provider()
    return A, ext.TransferRoute(A, B, "a-b", tp), ext.TransferRoute(A, C, "a-c", tp)


def test_x11_positional_and_keyword():
    sp = storage()
    A, r1, r2 = two_routes()
    d1 = ext.CarrierDefinition(sp, None, [r1, r2], None, ())
    d2 = ext.CarrierDefinition(storage=sp, transfers=(r1, r2))
    for d in (d1, d2):
        assert d.storage is sp and d.transfers == (r1, r2)
        assert d.transfers[0] is r1 and d.transfers[1] is r2


@pytest.mark.parametrize("bad", [None, 3, "storage"])
def test_x11_storage_must_be_a_storage_provider(bad):
    with pytest.raises(TypeError, match="storage"):
        ext.CarrierDefinition(bad)


def test_x11_transfer_provider_is_not_storage():
    with pytest.raises(TypeError, match="storage"):
        ext.CarrierDefinition(transfer_provider())


def test_x11_transfers_materialized_once():
    A, r1, r2 = two_routes()
    iterations = []

    class Once:
        def __iter__(self):
            iterations.append(1)
            return iter([r1, r2])

    d = ext.CarrierDefinition(storage(), transfers=Once())
    assert iterations == [1]
    assert type(d.transfers) is tuple and d.transfers == (r1, r2)
    gen = (r for r in [r1])
    d2 = ext.CarrierDefinition(storage(), transfers=gen)
    assert d2.transfers == (r1,) and list(gen) == []


def test_x11_transfers_not_iterable():
    with pytest.raises(TypeError):
        ext.CarrierDefinition(storage(), transfers=3)


@pytest.mark.parametrize("entry", [None, "route", transfer_provider()], ids=["None", "str", "tp"])
def test_x11_transfers_entry_must_be_a_route(entry):
    A, r1, _ = two_routes()
    with pytest.raises(TypeError):
        ext.CarrierDefinition(storage(), transfers=[r1, entry])


def test_x11_duplicate_pair_is_a_value_error():
    A, r1, _ = two_routes()
    dup = ext.TransferRoute(A, r1.destination_class, "another-id", transfer_provider())
    with pytest.raises(ValueError, match="duplicate exact transfer routes"):
        ext.CarrierDefinition(storage(), transfers=[r1, dup])
    with pytest.raises(ValueError, match="duplicate exact transfer routes"):
        ext.CarrierDefinition(storage(), transfers=[r1, r1])


def test_x11_routes_for_distinct_pairs_are_not_duplicates():
    A, r1, r2 = two_routes()
    back = ext.TransferRoute(r1.destination_class, A, "b-a", transfer_provider())
    d = ext.CarrierDefinition(storage(), transfers=[r1, r2, back])
    assert len(d.transfers) == 3


@pytest.mark.parametrize("kw", [{"kernels": object()}, {"composite": object()},
                                {"facets": (object(),)}], ids=["kernels", "composite", "facets"])
def test_x11_kernels_composite_facets_are_not_implemented(kw):
    with pytest.raises(NotImplementedError):
        ext.CarrierDefinition(storage(), **kw)


# ---- X-12 register_carrier_definition -----------------------------------------------------------


def test_x12_register_returns_none_and_construction_uses_the_provider():
    A = new_class("RegA")
    store = Store()
    assert sw.register_carrier_definition(A, ext.CarrierDefinition(store.provider)) is None
    assert store.calls == []  # registering calls nothing
    c = A(3, dtype=D.Int32)
    assert store.names("allocate") == [(3,)] and store.carriers("allocate")[0] is c
    assert c.size() == 3 and c.dtype() is D.Int32


def test_x12_register_through_the_extension_module_path():
    A = new_class("RegA")
    assert ext.register_carrier_definition(A, ext.CarrierDefinition(Store().provider)) is None
    assert A(1, dtype=D.Float32).size() == 1


@pytest.mark.parametrize("bad", [3, None, NotACarrier, int, sw.Carrier], ids=repr)
def test_x12_carrier_class_must_be_a_concrete_carrier_subclass(bad):
    with pytest.raises(TypeError):
        sw.register_carrier_definition(bad, ext.CarrierDefinition(storage()))


def test_x12_carrier_instance_is_not_a_class():
    with pytest.raises(TypeError):
        sw.register_carrier_definition(sw.CPU(1), ext.CarrierDefinition(storage()))


@pytest.mark.parametrize("bad", [None, "def", storage()], ids=["None", "str", "storage"])
def test_x12_definition_must_be_a_carrier_definition(bad):
    A = new_class("RegA")
    with pytest.raises(TypeError, match="definition"):
        sw.register_carrier_definition(A, bad)
    define(A)  # the failure left A undefined and unobserved


@pytest.mark.parametrize("name", ["CPU", "Generic", "FileBacked", "Metal", "Evictable",
                                  "BlockDeviceCarrier"])
def test_x12_shipped_definition_free_classes_refused(name):
    # The shipped check comes before "already observed" (CPU instances exist)
    # and, for Evictable, before the DependentCarrier rule.
    cls = getattr(sw, name)
    with pytest.raises(TypeError, match="definition-free shipped carrier"):
        sw.register_carrier_definition(cls, ext.CarrierDefinition(storage()))


def test_x12_definition_type_is_checked_before_the_shipped_rule():
    with pytest.raises(TypeError, match="definition") as e:
        sw.register_carrier_definition(sw.CPU, None)
    assert "shipped" not in str(e.value)


def test_x12_route_source_must_be_the_registered_class():
    A, B = new_class("RegA"), new_class("RegB")
    wrong = ext.TransferRoute(B, A, "b-a", transfer_provider())
    with pytest.raises(TypeError, match="exact source_class"):
        sw.register_carrier_definition(A, ext.CarrierDefinition(storage(), transfers=[wrong]))
    # nothing was recorded: A is still unobserved and undefined
    store = define(A)
    A(1, dtype=D.Float32)
    assert store.names("allocate") == [(1,)]


def test_x12_route_from_the_parent_class_is_not_exact():
    Parent = new_class("RegParent")
    Child = new_class("RegChild", base=Parent)
    r = ext.TransferRoute(Parent, sw.CPU, "p-cpu", transfer_provider())
    with pytest.raises(TypeError, match="exact source_class"):
        sw.register_carrier_definition(Child, ext.CarrierDefinition(storage(), transfers=[r]))


def test_x12_dependent_carriers_refused():
    Dep = new_class("RegDependent", base=sw.DependentCarrier)
    with pytest.raises(TypeError):
        sw.register_carrier_definition(Dep, ext.CarrierDefinition(storage()))


def test_x12_dependent_check_precedes_the_observed_check():
    Dep = new_class("RegDependent", base=sw.DependentCarrier)
    Dep()
    with pytest.raises(TypeError) as e:
        sw.register_carrier_definition(Dep, ext.CarrierDefinition(storage()))
    assert "already observed" not in str(e.value)


def test_x12_already_observed():
    A = new_class("RegA")
    A()  # a definition-free instance observes A
    with pytest.raises(TypeError, match="already observed"):
        sw.register_carrier_definition(A, ext.CarrierDefinition(storage()))


def test_x12_already_defined():
    A = new_class("RegA")
    first = Store()
    define(A, first)
    with pytest.raises(TypeError, match="already has a CarrierDefinition"):
        sw.register_carrier_definition(A, ext.CarrierDefinition(Store().provider))
    A(2, dtype=D.Float32)  # the first definition stays in force
    assert first.names("allocate") == [(2,)]


def test_x12_observed_check_precedes_the_defined_check():
    A = new_class("RegA")
    define(A)
    A(1, dtype=D.Float32)
    with pytest.raises(TypeError, match="already observed"):
        sw.register_carrier_definition(A, ext.CarrierDefinition(storage()))


def test_x12_route_check_precedes_the_observed_check():
    A, B = new_class("RegA"), new_class("RegB")
    A()
    wrong = ext.TransferRoute(B, A, "b-a", transfer_provider())
    with pytest.raises(TypeError, match="exact source_class"):
        sw.register_carrier_definition(A, ext.CarrierDefinition(storage(), transfers=[wrong]))


def test_x12_tiled_evictable_already_defined():
    # It fails the composite check first, and the message says both.
    with pytest.raises(TypeError, match="DependentCarrier") as info:
        sw.register_carrier_definition(sw.TiledEvictable, ext.CarrierDefinition(storage()))
    assert "already has a CarrierDefinition" in str(info.value)


def test_x12_concurrent_registration_of_one_class_admits_exactly_one():
    A = new_class("RegRace")
    stores = [Store() for _ in range(8)]
    barrier = threading.Barrier(8)
    outcomes = [None] * 8

    def register(k):
        barrier.wait(30)
        try:
            sw.register_carrier_definition(A, ext.CarrierDefinition(stores[k].provider))
            outcomes[k] = "ok"
        except TypeError as e:
            outcomes[k] = str(e)

    threads = [threading.Thread(target=register, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert outcomes.count("ok") == 1
    assert all("already has a CarrierDefinition" in o for o in outcomes if o != "ok")
    A(1, dtype=D.Float32)
    winner = outcomes.index("ok")
    assert [len(s.names("allocate")) for s in stores] == [int(k == winner) for k in range(8)]


def test_x12_concurrent_registration_of_distinct_classes():
    classes = [new_class(f"RegMany{k}") for k in range(16)]
    barrier = threading.Barrier(16)
    errors = []

    def register(cls):
        barrier.wait(30)
        try:
            define(cls)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=register, args=(c,)) for c in classes]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert errors == []
    for cls in classes:
        assert cls(2, dtype=D.Int32).size() == 2


def test_x12_registration_sets_no_attribute_on_the_class():
    A = new_class("RegA")
    before = dict(vars(A))
    define(A)
    assert set(vars(A)) == set(before)


# ---- X-13 sealing -------------------------------------------------------------------------------


class Noop(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        for i in range(tensor.size()):
            output[i] = tensor[i]


def assert_sealed(cls):
    with pytest.raises(TypeError, match="already observed"):
        sw.register_carrier_definition(cls, ext.CarrierDefinition(storage()))


def test_x13_construction_observes():
    A = new_class("SealA")
    A()
    assert_sealed(A)


def test_x13_dispatch_move_observes_both_classes():
    A, B = new_class("SealA"), new_class("SealB")
    assert dispatch_move(A, B) is sw.ElementwiseMoveOperation
    assert_sealed(A)
    assert_sealed(B)


def test_x13_register_move_operation_observes():
    A = new_class("SealA")
    assert register_move_operation(A, sw.CPU, Noop) is None
    try:
        assert_sealed(A)
    finally:
        assert unregister_move_operation(A, sw.CPU) is Noop


def test_x13_unregister_move_operation_observes_even_when_absent():
    A = new_class("SealA")
    with pytest.raises(KeyError):
        unregister_move_operation(sw.CPU, A)
    assert_sealed(A)


def test_x13_registered_move_operation_observes():
    A = new_class("SealA")
    with registered_move_operation(sw.Generic, A, Noop):
        assert_sealed(A)
    assert_sealed(A)


def test_x13_naming_a_class_in_a_route_does_not_observe_it():
    A, B = new_class("SealA"), new_class("SealB")
    r = route(A, B, Transfer())
    ext.CarrierDefinition(Store().provider, transfers=[r])
    define(B)  # B named as a destination is still definable
    define(A, routes=[r])


def test_x13_sealing_is_per_exact_class():
    Parent = new_class("SealParent")
    Child = new_class("SealChild", base=Parent)
    Parent()  # observes Parent only
    store = define(Child)
    assert_sealed(Parent)
    c = Child(2, dtype=D.Float32)
    assert store.carriers("allocate") == [c]


def test_x13_observing_a_subclass_does_not_seal_its_parent():
    Parent = new_class("SealParent")
    Child = new_class("SealChild", base=Parent)
    Child()
    store = define(Parent)
    Parent(1, dtype=D.Float32)
    assert len(store.names("allocate")) == 1
    assert_sealed(Child)


def test_value_constructors_do_not_leak():
    import gc
    import tracemalloc
    A, B = new_class("LeakA"), new_class("LeakB")
    t = cpu_tensor([1.0, 2.0])
    dest = sw.Generic([0.0, 0.0])

    def one():
        sp = storage()
        tp = transfer_provider()
        r = ext.TransferRoute(A, B, "a-b", tp)
        ext.CarrierDefinition(sp, transfers=[r])
        ext.Unsupported("reason")
        ext.PreparedTransfer(cb)
        ext.TransferRequest(t, dest, sw.CPU, sw.Generic, D.Float32, t.layout, 2)
        for bad in (lambda: storage(write=None), lambda: ext.Unsupported(""),
                    lambda: ext.TransferRoute(A, B, "", tp),
                    lambda: ext.CarrierDefinition(sp, transfers=[r, r]),
                    lambda: ext.TransferRequest(t, dest, sw.CPU, sw.Generic, D.Float32,
                                                t.layout, 3),
                    lambda: sw.register_carrier_definition(sw.CPU, ext.CarrierDefinition(sp))):
            try:
                bad()
            except (TypeError, ValueError):
                pass

    for _ in range(50):
        one()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(1000):
            one()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024


def test_x12_x13_registration_races_construction_atomically():
    # Constructing an instance observes the class; registering requires it
    # unobserved. Whatever the interleaving, exactly one of the two worlds
    # exists: the definition won (and no definition-free instance was ever
    # made), or an instance won (and the registration failed "already observed").
    for round_ in range(20):
        A = new_class(f"RaceA{round_}")
        barrier = threading.Barrier(4)
        made, registered, refused = [], [], []

        def construct():
            barrier.wait(30)
            for _ in range(20):
                try:
                    made.append(A())
                except TypeError:
                    pass  # definition-backed by now: A() lacks slots and dtype

        def register():
            barrier.wait(30)
            try:
                define(A)
                registered.append(True)
            except TypeError as e:
                refused.append(str(e))

        threads = [threading.Thread(target=construct) for _ in range(3)]
        threads.append(threading.Thread(target=register))
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        if registered:
            assert made == [] and refused == []
        else:
            assert made and len(refused) == 1 and "already observed" in refused[0]
