"""Test-only helpers for the carrier-extension tests (no tests here).

Definition sealing (X-13) freezes a class's definition status the first time
the framework observes it, so every test builds FRESH carrier classes through
the factories below instead of sharing module-level ones.

* `Store` -- a StorageProvider for a "remote store": each carrier keeps its
  slots in a private `bytearray` (`carrier.buf`, 4 bytes a slot), and every
  callback call is recorded (optionally) with its thread.
* `Transfer` -- a TransferProvider recording its requests and submissions.
  It copies the physical span synchronously inside `submit()` (returns
  `None`), or, when `gate` is a `threading.Event`, returns a
  `BackgroundCompletion` whose thread copies the bytes only after the test
  sets the gate -- so the test decides when the transfer completes.
* `Pair` -- two fresh definition-backed classes A and B with stores and
  (by default) the routes A->B and B->A.
* `values_of`, `state` -- "nothing changed" snapshots.
"""

import os
import struct
import threading

import strideweave as sw
from strideweave.carriers import extension as ext

D = sw.DType
ALL_DTYPES = (D.Float32, D.Int32, D.Bool)
ZERO = {D.Float32: 0.0, D.Int32: 0, D.Bool: False}
# Generous bound for every blocking wait in a helper: a broken implementation
# fails the test instead of hanging the run.
TIMEOUT = 30

# The one lock of every recording Store and Transfer. A forked child has
# only the forking thread, so a lock another thread held at fork() would
# stay held in the child for ever -- and the child runs provider callbacks
# inside os.fork() already (strideweave's own after-fork hook ends the work
# it inherited, which releases fresh tile copies). So fork() first waits
# until no other thread holds it, and keeps it across the fork; reentrant,
# because those callbacks run on the forking thread while it is held.
_RECORD_LOCK = threading.RLock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_RECORD_LOCK.acquire, after_in_parent=_RECORD_LOCK.release,
                        after_in_child=_RECORD_LOCK.release)


def L(shape, stride):
    return sw.Layout(sw.Shape(shape), sw.Stride(stride))


def new_class(name="Remote", base=None, namespace=None):
    """A brand-new Carrier subclass (never observed, never defined)."""
    return type(name, (base or sw.Carrier,), dict(namespace or {}, __module__=__name__))


def f32(x):
    """x rounded to binary32, as Float32 storage holds it."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def slot_value(dtype, k):
    """A distinct, exactly representable value for slot k."""
    if dtype is D.Float32:
        return k * 1.5 - 7.25
    if dtype is D.Int32:
        return k * 7 - 3
    return k % 3 != 1


def slot_values(dtype, n):
    return [slot_value(dtype, k) for k in range(n)]


# ---- the remote store --------------------------------------------------------------


def _encode(dtype, value):
    if dtype is D.Float32:
        return struct.pack("<f", value)
    return struct.pack("<i", int(value))


def _decode(dtype, raw):
    if dtype is D.Float32:
        return struct.unpack("<f", raw)[0]
    v = struct.unpack("<i", raw)[0]
    return bool(v) if dtype is D.Bool else v


class Store:
    """A StorageProvider keeping each carrier's slots in `carrier.buf`.

    `calls` lists `(callback name, carrier, args, thread id)` when `record`
    is true. `override[name]` replaces a callback's behaviour (it receives
    the callback's arguments and its result is returned to the framework)."""

    def __init__(self, *, supported=ALL_DTYPES, fallback=False, record=True):
        self.supported = tuple(supported)
        self.record = record
        self.calls = []
        self.override = {}
        self.lock = _RECORD_LOCK
        self.provider = ext.StorageProvider(
            self.supports_dtype, self.physical_size, self.allocate, self.release,
            self.read, self.write, elementwise_fallback=fallback)

    def _log(self, name, c, *args):
        if self.record:
            with self.lock:
                self.calls.append((name, c, args, threading.get_ident()))

    def names(self, name=None):
        """The recorded callback names (or, with `name`, the args of those calls)."""
        if name is None:
            return [n for n, _, _, _ in self.calls]
        return [a for n, _, a, _ in self.calls if n == name]

    def carriers(self, name):
        return [c for n, c, _, _ in self.calls if n == name]

    def clear(self):
        with self.lock:
            self.calls.clear()

    # -- the six callbacks --
    def supports_dtype(self, c, dtype):
        self._log("supports_dtype", c, dtype)
        if "supports_dtype" in self.override:
            return self.override["supports_dtype"](c, dtype)
        return any(dtype is d for d in self.supported)

    def physical_size(self, c):
        self._log("physical_size", c)
        if "physical_size" in self.override:
            return self.override["physical_size"](c)
        buf = getattr(c, "buf", None)
        return 0 if buf is None else len(buf) // 4

    def allocate(self, c, slots):
        self._log("allocate", c, slots)
        if "allocate" in self.override:
            return self.override["allocate"](c, slots)
        c.buf = bytearray(4 * slots)
        return None

    def release(self, c):
        self._log("release", c)
        if "release" in self.override:
            return self.override["release"](c)
        c.buf = None
        c.released_by_provider = getattr(c, "released_by_provider", 0) + 1
        return None

    def read(self, c, i):
        self._log("read", c, i)
        if "read" in self.override:
            return self.override["read"](c, i)
        return _decode(c.dtype(), bytes(c.buf[4 * i:4 * i + 4]))

    def write(self, c, i, v):
        self._log("write", c, i, v)
        if "write" in self.override:
            return self.override["write"](c, i, v)
        c.buf[4 * i:4 * i + 4] = _encode(c.dtype(), v)
        return None


def define(cls, store=None, routes=(), **store_kwargs):
    """Register a CarrierDefinition for `cls`; returns its Store."""
    store = store if store is not None else Store(**store_kwargs)
    sw.register_carrier_definition(cls, ext.CarrierDefinition(store.provider,
                                                              transfers=tuple(routes)))
    return store


def filled(cls, values, dtype=D.Float32, **kwargs):
    """A carrier of `cls` holding `values` (written through `carrier[i] = v`,
    so its version is len(values))."""
    c = cls(len(values), dtype=dtype, **kwargs)
    for k, v in enumerate(values):
        c[k] = v
    return c


def values_of(c):
    return [c[i] for i in range(c.size())]


def state(c, read_values=True):
    """What "nothing changed" compares for one carrier."""
    s = {
        "version": c.version,
        "released": c.is_released(),
        "size": c.size(),
        "mutable": c.is_mutable(),
        "owned": c.is_owned(),
    }
    if read_values and not c.is_released():
        s["values"] = values_of(c)
    return s


# ---- transfers ---------------------------------------------------------------------


def span_copier(request):
    """The bulk copy of a request's physical span, bound NOW (at submission)
    to the two stores' bytearrays and nothing else, so it can run on any
    thread without touching a carrier object. Falls back to slot-by-slot
    copying through the carriers when one side has no remote store (only
    valid inside submit(), which holds transfer access)."""
    src = request.tensor.carrier
    dst = request.destination
    off = request.tensor.offset
    n = request.physical_span
    sbuf, dbuf = getattr(src, "buf", None), getattr(dst, "buf", None)
    if isinstance(sbuf, bytearray) and isinstance(dbuf, bytearray):
        def copy():
            dbuf[0:4 * n] = sbuf[4 * off:4 * (off + n)]
        return copy

    def copy_slots():
        for i in range(n):
            dst[i] = src[off + i]
    return copy_slots


class BackgroundCompletion:
    """A ProviderCompletion whose work runs on its own (daemon) thread once
    `gate` is set. `wait()` blocks until the work finished, then returns None
    or raises `fail` (an exception instance)."""

    def __init__(self, work, gate=None, fail=None):
        self._done = False
        self.finished = threading.Event()
        self.fail = fail
        self.gate = gate
        self.work = work
        self.wait_threads = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        if self.gate is not None and not self.gate.wait(TIMEOUT * 4):
            self.fail = self.fail or TimeoutError("the test never opened the gate")
        try:
            if self.fail is None:
                self.work()
        except BaseException as e:  # noqa: BLE001 - reported through wait()
            self.fail = e
        self.work = None  # drop the buffers the copy held
        self._done = True
        self.finished.set()

    @property
    def done(self):
        return self._done

    def wait(self):
        self.wait_threads.append(threading.get_ident())
        if not self.finished.wait(TIMEOUT * 4):
            raise TimeoutError("background transfer never finished")
        if self.fail is not None:
            raise self.fail
        return None


class Transfer:
    """A TransferProvider recording each `prepare` request and each `submit`.

    Behaviour, in order of precedence:
    * `prepare_hook(request)` -- its result is returned from prepare as is;
    * `unsupported(request)` -- a non-empty string makes prepare return
      `Unsupported(that string)`;
    * otherwise prepare returns `PreparedTransfer(submit)`, and submit runs
      `submit_hook(request)` if set, else copies the span now (returns None)
      when `gate` is None, or returns a `BackgroundCompletion` gated by `gate`
      (failing with `fail` after the gate when `fail` is set).
    With `keep=False` only the two counts are kept: no request, completion or
    thread list grows (for lifetime and memory tests)."""

    def __init__(self, *, gate=None, fail=None, unsupported=None, prepare_hook=None,
                 submit_hook=None, keep=True):
        self.gate, self.fail = gate, fail
        self.unsupported = unsupported
        self.prepare_hook, self.submit_hook = prepare_hook, submit_hook
        self.keep = keep
        self.requests = []
        self.prepare_count = 0
        self.submit_count = 0
        self.grad_in_prepare = []
        self.prepare_threads = []
        self.submit_threads = []
        self.completions = []
        self.lock = _RECORD_LOCK
        self.provider = ext.TransferProvider(self.prepare)

    def prepare(self, request):
        with self.lock:
            self.prepare_count += 1
            if self.keep:
                self.grad_in_prepare.append(sw.is_grad_enabled())
                self.prepare_threads.append(threading.get_ident())
                self.requests.append(request)
        if self.prepare_hook is not None:
            return self.prepare_hook(request)
        if self.unsupported is not None:
            reason = self.unsupported(request)
            if reason:
                return ext.Unsupported(reason)
        return ext.PreparedTransfer(lambda: self.submit(request))

    def submit(self, request):
        with self.lock:
            self.submit_count += 1
            if self.keep:
                self.submit_threads.append(threading.get_ident())
        if self.submit_hook is not None:
            return self.submit_hook(request)
        copy = span_copier(request)
        if self.gate is None:
            copy()
            return None
        completion = BackgroundCompletion(copy, self.gate, self.fail)
        if self.keep:
            with self.lock:
                self.completions.append(completion)
        return completion


def route(src, dst, transfer, route_id=None):
    return ext.TransferRoute(src, dst, route_id or f"{src.__name__}->{dst.__name__}",
                             transfer.provider)


def gapped(request):
    """`unsupported` policy: refuse layouts with holes."""
    if request.physical_span != request.layout.size:
        return f"{request.source_class.__name__} cannot transfer a gapped layout"
    return None


class Pair:
    """Two fresh definition-backed classes `A` and `B` (`names`), their stores
    `sa`/`sb`, and Transfers `ab`/`ba` for the routes named in `routes`
    ("ab": A->B with id "<A>-to-<B>", "ba": B->A). `fallback` gives the two
    stores' elementwise_fallback flags; extra keyword arguments go to both
    Transfers."""

    def __init__(self, *, routes=("ab", "ba"), fallback=(False, False),
                 names=("RemoteA", "RemoteB"), supported=ALL_DTYPES, record=True,
                 ab=None, ba=None, **transfer_kwargs):
        self.A = new_class(names[0])
        self.B = new_class(names[1])
        self.ab = ab or Transfer(**transfer_kwargs)
        self.ba = ba or Transfer(**transfer_kwargs)
        self.ab_id = f"{names[0]}-to-{names[1]}"
        self.ba_id = f"{names[1]}-to-{names[0]}"
        self.ab_route = route(self.A, self.B, self.ab, self.ab_id)
        self.ba_route = route(self.B, self.A, self.ba, self.ba_id)
        self.sa = define(self.A, Store(supported=supported, fallback=fallback[0], record=record),
                         [self.ab_route] if "ab" in routes else [])
        self.sb = define(self.B, Store(supported=supported, fallback=fallback[1], record=record),
                         [self.ba_route] if "ba" in routes else [])

    def source(self, values, dtype=D.Float32, layout=None, offset=0, extra=0):
        """(tensor, carrier): an A carrier of offset + cosize + extra slots with
        slot_values in every slot, viewed at `offset` with `layout`."""
        layout = layout if layout is not None else L([len(values)], [1])
        n = offset + layout.cosize + extra
        c = filled(self.A, slot_values(dtype, n), dtype)
        t = sw.Tensor(c, offset, layout)
        if values is not None:
            for k, v in enumerate(values):
                t[k] = v
        return t, c


def cpu_tensor(values, layout=None, dtype=D.Float32):
    layout = layout if layout is not None else L([len(values)], [1])
    c = sw.CPU(layout.cosize, dtype=dtype)
    t = sw.Tensor(c, 0, layout)
    for k, v in enumerate(values):
        t[k] = v
    return t
