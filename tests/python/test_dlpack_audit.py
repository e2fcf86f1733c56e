"""Independent audit of DLPack export (seed: interop-movement, export half;
C-13, C-16, T-10, T-11, G-2): the full check order walked one failure at a
time, __dlpack_device__ running only the one-subtensor and dlpack_info
checks, G-2 integers in a hook's result, the read-only flag against
tensor.is_mutable() in every ownership state (NumPy as the consumer that
honors it), the deleter on a thread Python has never seen and after the
interpreter is gone, pending exceptions across a consumer's deleter call,
and the absence of any import path on the whole public surface."""

import ctypes
import importlib
import pkgutil
import subprocess
import sys
import textwrap
import threading
import weakref

import numpy as np
import pytest
import torch

import strideweave as sw
from carriers_for_tests import Foreign
from carriers_for_tests import capsule_get_pointer as _get_pointer
from carriers_for_tests import capsule_is_valid as _is_valid
from carriers_for_tests import capsule_set_name as _set_name
from measure import settled_live_bytes

F32 = sw.DType.Float32
I32 = sw.DType.Int32
BOOL = sw.DType.Bool


USED = {False: b"used_dltensor", True: b"used_dltensor_versioned"}  # alive for the module's lifetime
NAME = {False: b"dltensor", True: b"dltensor_versioned"}


def layout(n):
    return sw.Layout(sw.Shape([n]), sw.Stride([1]))


def filled_cpu(n, dtype=F32, mutable=True):
    if not mutable:
        return sw.CPU(n, dtype=dtype, mutable=False)  # zeros: it cannot be written
    c = sw.CPU(n, dtype=dtype)
    for i in range(n):
        c[i] = (i % 2 == 1) if dtype is BOOL else (i * 3 + 1 if dtype is I32 else 0.5 + i)
    return c


class Hooked(Foreign):
    """A Python carrier aliasing a CPU carrier whose dlpack_info() and
    _is_mutable() answers the test chooses."""

    def __init__(self, cpu, info, mutable=False):
        super().__init__(cpu, info)
        self.mut = mutable

    def _is_mutable(self):
        if isinstance(self.mut, BaseException):
            raise self.mut
        return self.mut

    def dlpack_info(self):
        return self.info(self)


def info(pointer=None, device_type=1, device_id=0):
    def hook(carrier):
        p = carrier.cpu.pointer() if pointer is None else pointer
        return {"pointer": p, "device_type": device_type, "device_id": device_id}

    return hook


def hooked_tensor(hook, dtype=F32, n=4, mutable=False):
    return sw.Tensor(Hooked(filled_cpu(n, dtype), hook, mutable), 0, layout(n))


def capsule_version_and_flags(cap):
    ptr = _get_pointer(cap, b"dltensor_versioned")
    major, minor = (ctypes.c_uint32 * 2).from_address(ptr)
    return (major, minor), ctypes.c_uint64.from_address(ptr + 24).value


def watch(obj):
    seen = []
    weakref.finalize(obj, seen.append, 1)
    return seen


# ---- check order: one failure removed at a time ---------------------------------


class Boom(Exception):
    pass


def raising_hook(carrier):
    raise Boom("hook")


def test_check_order_walked_one_failure_at_a_time():
    # Issue check order (1)..(8); seed: carrier opt-in before dtype, T-11 first.
    multi = sw.friendly.scaled_int32([1, 2, 3])
    worst = {"max_version": (-1, 0), "dl_device": "x", "copy": True}
    with pytest.raises(NotImplementedError, match="a ScaledInt32 tensor has two planes and cannot be exported; only Float32 and Int32 tensors on one carrier can"):
        multi.__dlpack__(**worst)  # (1)
    with pytest.raises(NotImplementedError, match="ScaledInt32 tensor has two planes and cannot be exported"):
        multi.__dlpack_device__()

    t = hooked_tensor(raising_hook, dtype=BOOL)
    with pytest.raises(ValueError, match="max_version"):  # (2)
        t.__dlpack__(**worst)
    with pytest.raises(TypeError, match="max_version"):
        t.__dlpack__(**dict(worst, max_version="1.0"))
    args = dict(worst, max_version=(1, 0))
    with pytest.raises(TypeError, match="dl_device"):  # (3) type
        t.__dlpack__(**args)
    with pytest.raises(ValueError, match="dl_device"):  # (3) arity
        t.__dlpack__(**dict(args, dl_device=(9,)))
    args["dl_device"] = (9, 9)
    with pytest.raises(Boom, match="hook"):  # (4) the hook's own exception
        t.__dlpack__(**args)
    t.carrier.info = lambda c: 5
    with pytest.raises(TypeError, match="dlpack_info"):  # (4) not dict-convertible
        t.__dlpack__(**args)
    t.carrier.info = lambda c: {"pointer": 0, "device_type": 2}
    with pytest.raises(KeyError, match="device_id"):  # (4) missing key
        t.__dlpack__(**args)
    t.carrier.info = info(pointer=0, device_type=2, device_id=0)
    with pytest.raises(BufferError, match="dl_device"):  # (5)
        t.__dlpack__(**args)
    args["dl_device"] = (2, 0)
    with pytest.raises(BufferError, match="copy"):  # (6)
        t.__dlpack__(**args)
    args["copy"] = False
    with pytest.raises(BufferError, match="non-null"):  # (7)
        t.__dlpack__(**args)
    t.carrier.info = info(device_type=2, device_id=0)
    with pytest.raises(BufferError, match="DLPack export supports Float32 and Int32, not Bool"):  # (8)
        t.__dlpack__(**args)
    ok = hooked_tensor(info(device_type=2, device_id=0), dtype=F32)
    assert capsule_version_and_flags(ok.__dlpack__(**args)) == ((1, 0), 1)


def test_dlpack_device_runs_only_subtensor_and_hook_checks():
    # Seed: __dlpack_device__ "SHALL depend only on the carrier's DLPack support
    # and the one-subtensor requirement"; it never looks at pointer or dtype.
    t = hooked_tensor(raising_hook, dtype=BOOL)
    with pytest.raises(Boom):
        t.__dlpack_device__()
    t.carrier.info = lambda c: [1, 2]
    with pytest.raises(TypeError, match="dlpack_info"):
        t.__dlpack_device__()
    t.carrier.info = lambda c: {"pointer": 0, "device_id": 0}
    with pytest.raises(KeyError, match="device_type"):
        t.__dlpack_device__()
    t.carrier.info = info(pointer=0, device_type=7, device_id=3)  # null pointer, Bool, immutable
    assert t.__dlpack_device__() == (7, 3)
    t.carrier.mut = Boom("mutability is not asked")
    assert t.__dlpack_device__() == (7, 3)


# ---- G-2 integers in the hook's answer --------------------------------------------


class Index:
    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v


@pytest.mark.parametrize("kind", [np.int64, np.uint64, Index, int])
def test_hook_pointer_any_integer_is_an_address(kind):
    # Seed C-16: `pointer` holds "the integer address"; G-2: an integer is any
    # operator.index object but bool. NumPy reads the aliased storage.
    t = hooked_tensor(lambda c: {"pointer": kind(c.cpu.pointer()), "device_type": np.int32(1),
                                 "device_id": np.int64(0)}, dtype=I32)
    a = np.from_dlpack(t)
    assert a.__array_interface__["data"][0] == t.carrier.cpu.pointer()
    assert a.tolist() == [1, 4, 7, 10]


@pytest.mark.parametrize("key", ["pointer", "device_type", "device_id"])
@pytest.mark.parametrize("bad", [True, 1.0, "1"])
def test_hook_non_integer_value_fails(key, bad):
    # The seed leaves the failure unspecified, but it is a failure: G-2 says
    # bool, float and str are not integers.
    def hook(c):
        d = {"pointer": c.cpu.pointer(), "device_type": 1, "device_id": 0}
        d[key] = bad
        return d

    with pytest.raises(TypeError, match=f"dlpack_info\\(\\) {key} must be an integer"):
        hooked_tensor(hook).__dlpack__(dl_device=None)


def test_hook_huge_device_is_buffer_error_never_overflow():
    t = hooked_tensor(info(device_type=2**70, device_id=0))
    assert t.__dlpack_device__() == (2**70, 0)  # verbatim
    with pytest.raises(BufferError, match="32-bit"):
        t.__dlpack__()
    with pytest.raises(BufferError, match="32-bit"):
        t.__dlpack__(dl_device=(2**70, 0))
    with pytest.raises(BufferError, match="dl_device"):
        t.__dlpack__(dl_device=(1, 0))


# ---- read-only flag == not tensor.is_mutable() (T-10, C-13) -------------------------


def assert_flag_follows_is_mutable(t):
    mutable = t.is_mutable()
    a = np.from_dlpack(t)  # NumPy honors the flag
    assert a.flags.writeable is mutable
    _, flags = capsule_version_and_flags(t.__dlpack__(max_version=(1, 0)))
    assert flags == (0 if mutable else 1)
    return mutable


def test_read_only_flag_follows_is_mutable_through_ownership_states():
    t = sw.Tensor(filled_cpu(6), 1, layout(5))
    assert assert_flag_follows_is_mutable(t) is True
    token = t.carrier._claim_ownership()
    assert assert_flag_follows_is_mutable(t) is False  # owned, no access
    t.carrier._begin_owner_access(token)
    t.carrier._begin_owner_access(token)  # re-entrant
    try:
        assert assert_flag_follows_is_mutable(t) is True
        # owner access is thread-bound: another thread sees an owned carrier
        seen = []
        th = threading.Thread(target=lambda: seen.append(assert_flag_follows_is_mutable(t)))
        th.start()
        th.join()
        assert seen == [False]
        t.carrier._end_owner_access(token)
        assert assert_flag_follows_is_mutable(t) is True  # still one level deep
    finally:
        t.carrier._end_owner_access(token)
    assert assert_flag_follows_is_mutable(t) is False
    t.carrier._relinquish_ownership(token)
    assert assert_flag_follows_is_mutable(t) is True
    immutable = sw.Tensor(filled_cpu(3, mutable=False), 0, layout(3))
    assert assert_flag_follows_is_mutable(immutable) is False


@pytest.mark.parametrize("mutable", [True, False])
def test_read_only_flag_for_python_carrier_uses_its_is_mutable_hook(mutable):
    t = hooked_tensor(info(), mutable=mutable)
    assert assert_flag_follows_is_mutable(t) is mutable


def test_is_mutable_hook_exception_propagates_from_versioned_export():
    t = hooked_tensor(info(), mutable=Boom("asked"))
    with pytest.raises(Boom, match="asked"):
        t.is_mutable()
    with pytest.raises(Boom, match="asked"):
        t.__dlpack__(max_version=(1, 0))
    t.__dlpack__()  # legacy: no flags word, mutability is not consulted


# ---- the deleter: any thread, no GIL, after finalization --------------------------


_libc = ctypes.CDLL(None)
_pthread_create = _libc.pthread_create
_pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_pthread_create.restype = ctypes.c_int
_pthread_join = _libc.pthread_join
_pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
_pthread_join.restype = ctypes.c_int


def consumed(t, versioned):
    """Export, then take ownership the DLPack way: (managed pointer, deleter address)."""
    cap = t.__dlpack__(max_version=(1, 0) if versioned else None)
    ptr = _get_pointer(cap, NAME[versioned])
    assert _set_name(cap, USED[versioned]) == 0
    deleter = ctypes.c_void_p.from_address(ptr + (16 if versioned else 56)).value
    return ptr, deleter


@pytest.mark.parametrize("versioned", [False, True])
def test_deleter_on_threads_python_has_never_seen(versioned):
    # Seed/issue: the deleter is safe from any thread without the GIL. These
    # are raw pthreads with no Python thread state; the deleter is their start
    # routine (same calling convention, its return value is ignored). The
    # pthread_join calls release the GIL, as a consumer's C code would.
    t = sw.Tensor(filled_cpu(8), 0, layout(8))
    gone = watch(t)
    refs = sys.getrefcount(t)
    live = settled_live_bytes()
    owned = [consumed(t, versioned) for _ in range(16)]
    assert sys.getrefcount(t) == refs + 16
    tids = []
    for ptr, deleter in owned:
        tid = ctypes.c_ulong()
        assert _pthread_create(ctypes.byref(tid), None, deleter, ptr) == 0
        tids.append(tid.value)
    for tid in tids:
        assert _pthread_join(tid, None) == 0
    assert sys.getrefcount(t) == refs
    assert sw._C._live_bytes() == live
    del t
    assert gone == [1]


AFTER_FINALIZE = textwrap.dedent(
    """
    import ctypes, strideweave as sw
    libc = ctypes.CDLL(None)
    libc.strdup.restype = ctypes.c_void_p
    libc.strdup.argtypes = [ctypes.c_char_p]
    cxa_atexit = getattr(libc, "__cxa_atexit")
    cxa_atexit.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    set_name = ctypes.pythonapi.PyCapsule_SetName
    set_name.argtypes = [ctypes.py_object, ctypes.c_void_p]
    keep = []
    for versioned in (False, True):
        c = sw.CPU(4)
        t = sw.Tensor(c, 0, sw.Layout(sw.Shape([4]), sw.Stride([1])))
        cap = t.__dlpack__(max_version=(1, 0) if versioned else None)
        name = b"dltensor_versioned" if versioned else b"dltensor"
        ptr = get_pointer(cap, name)
        assert set_name(cap, libc.strdup(b"used_" + name)) == 0  # a name that outlives Python
        deleter = ctypes.c_void_p.from_address(ptr + (16 if versioned else 56)).value
        # glibc runs these from exit(), after Py_FinalizeEx has returned: the
        # C++-static-destructor case NumPy's deleter comment describes.
        assert cxa_atexit(deleter, ptr, None) == 0
        keep.append(cap)
    del t, c
    print("registered", flush=True)
    """
)


def test_deleter_after_interpreter_finalization_leaks_instead_of_crashing():
    proc = subprocess.run([sys.executable, "-c", AFTER_FINALIZE], capture_output=True, text=True, timeout=120)
    assert proc.stdout == "registered\n"
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_consumer_deleter_with_pending_exception_keeps_it():
    # The NumPy array is a temporary released while len()'s TypeError is
    # pending; NumPy calls our deleter with the GIL held, which drops the last
    # Tensor reference. The original exception must surface unchanged.
    gone = []

    def temporary():
        t = sw.Tensor(filled_cpu(2), 1, sw.Layout(sw.Shape([]), sw.Stride([])))
        weakref.finalize(t, gone.append, 1)
        return np.from_dlpack(t)

    with pytest.raises(TypeError, match="unsized"):
        len(temporary())
    assert gone == [1]
    with pytest.raises(TypeError, match="unsized"):
        len(torch.from_dlpack(sw.Tensor(filled_cpu(1), 0, sw.Layout(sw.Shape([]), sw.Stride([])))).numpy())


# ---- export-only --------------------------------------------------------------------


def test_no_import_path_on_any_public_module_or_class():
    # Seed: "Offer no adoption path" -- the only DLPack names anywhere are the
    # producer's __dlpack__/__dlpack_device__ and the carrier opt-in hook.
    allowed = {"__dlpack__", "__dlpack_device__", "dlpack_info"}
    # With the prefix, walk_packages imports strideweave.tensorstore, not the
    # top-level TensorStore package of the same short name.
    modules = [sw] + [importlib.import_module(m.name)
                      for m in pkgutil.walk_packages(sw.__path__, "strideweave.")]
    found = set()
    for mod in modules:
        for name, value in vars(mod).items():
            if "dlpack" in name.lower():
                found.add(name)
            if isinstance(value, type) and value.__module__.startswith("strideweave"):
                found.update(a for a in dir(value) if "dlpack" in a.lower())
    assert found <= allowed
    assert "dlpack_info" in found and "__dlpack__" in found


# ---- used_ rename by real consumers ----------------------------------------------


@pytest.mark.parametrize("versioned", [False, True], ids=["legacy", "versioned"])
@pytest.mark.parametrize("consumer", ["numpy", "torch"])
def test_real_consumers_take_ownership_by_rename_and_free_once(consumer, versioned):
    # Seed: a consumer renames to used_dltensor[_versioned] and then owns the
    # deleter; our capsule destructor leaves a used_ capsule alone, so the
    # Tensor reference and the block are released exactly once.
    t = sw.Tensor(filled_cpu(6), 1, layout(5))
    refs = sys.getrefcount(t)
    live = settled_live_bytes()
    cap = t.__dlpack__(max_version=(1, 0) if versioned else None)
    if consumer == "numpy":

        class Holder:  # NumPy imports through the protocol, not a bare capsule
            def __dlpack__(self, **kwargs):
                return cap

            def __dlpack_device__(self):
                return (1, 0)

        arr = np.from_dlpack(Holder())
        values = arr.tolist()
    else:
        arr = torch.from_dlpack(cap)
        values = arr.tolist()
    assert values == [1.5, 2.5, 3.5, 4.5, 5.5]
    assert _is_valid(cap, USED[versioned]) == 1  # ownership moved to the consumer
    assert sys.getrefcount(t) == refs + 1
    del cap
    assert sys.getrefcount(t) == refs + 1  # the used_ capsule's destructor did nothing
    del arr
    assert sys.getrefcount(t) == refs  # the consumer's deleter call dropped it
    assert sw._C._live_bytes() == live
