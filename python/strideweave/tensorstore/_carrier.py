"""TensorStoreCarrier, its two moves with CPU, and save/load.

The one place in strideweave where Python holds logic: TensorStore's only
binding is Python. Everything here uses the public strideweave API. The
framework runs these moves like any registered pair (validation, pending
protection, one commit, source release, autograd, profiling); the
operations' `_copy_async` hook starts TensorStore's own asynchronous I/O and
hands back a completion that a framework waiter thread waits on, so
`move_async` returns while the engine works.
"""

from __future__ import annotations

import ctypes
import json
import numbers
import operator
import re
import uuid
from typing import Any, Callable, Iterable

import numpy as np
import tensorstore as ts

import strideweave as sw
from strideweave.carriers.move import dispatch_move, register_move_operation

__all__ = [
    "TensorStoreCarrier",
    "CpuToTensorStoreMoveOperation",
    "TensorStoreToCpuMoveOperation",
    "save",
    "load",
]

# One context for every array opened here: a `memory` kvstore is shared by
# the arrays that name it (save then load in one process), and so is the cache.
_CONTEXT = ts.Context()

_NUMPY: dict[Any, np.dtype[Any]] = {sw.DType.Float32: np.dtype("<f4"),
                                    sw.DType.Int32: np.dtype("<i4")}
_ZARR: dict[Any, str] = {sw.DType.Float32: "float32", sw.DType.Int32: "int32"}
_FROM_ZARR: dict[str, sw.DType] = {v: k for k, v in _ZARR.items()}
_ATTRIBUTE = "strideweave"
# Handles opened here store every chunk they write, zeros included, so that
# within the slots the attributes record as written (`_STORED`: [start, stop))
# a missing chunk means one deleted behind our back, which reads then report
# instead of reading it as the fill value. Elsewhere a missing chunk is one
# never written (an array created with `size` zero slots) and reads as zero.
_STORE_FILL = "store_data_equal_to_fill_value"
_STORED = "strideweave_stored_span"
# Default chunk: 4 MiB of Float32, or the whole array when it is smaller.
_DEFAULT_CHUNK = 1 << 20


def _spec_dict(spec: Any) -> dict[str, Any]:
    if isinstance(spec, ts.Spec):
        spec = spec.to_json()
    elif isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as exc:
            raise ValueError(f"spec is not valid JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise TypeError(f"spec must be a dict or a JSON string, not {type(spec).__name__}")
    spec = dict(spec)
    driver = spec.setdefault("driver", "zarr3")
    if driver != "zarr3":
        raise ValueError(f"TensorStoreCarrier stores zarr v3 arrays: the spec's driver must "
                         f"be 'zarr3', not {driver!r}")
    if "kvstore" not in spec:
        raise ValueError("spec needs a 'kvstore' (for example {'driver': 'file', "
                         "'path': '/data/x/'}) saying where the array lives")
    return spec


def _where(kvstore: Any) -> str:
    """The store as users name it: file:///tmp/x/, s3://bucket/x/, memory://x/."""
    if isinstance(kvstore, str):
        return kvstore
    if isinstance(kvstore, dict):
        bucket = kvstore.get("bucket")
        root = f"{bucket}/" if bucket else ""
        return f"{kvstore.get('driver', '?')}://{root}{kvstore.get('path', '')}"
    return repr(kvstore)


def _io_error(where: str, action: str, exc: BaseException) -> OSError:
    # The engine appends the raw HTTP response ([http_response_body='...'] and
    # the like) to its message; the cause before it is what users need.
    cause = re.split(r" \[[\w-]+=", str(exc), maxsplit=1)[0]
    return OSError(f"TensorStore {where}: could not {action}: {cause}")


def _check_dtype(dtype: Any) -> sw.DType:
    if not isinstance(dtype, sw.DType):
        raise TypeError(f"dtype must be a DType, not {type(dtype).__name__}")
    if dtype not in _ZARR:
        raise ValueError(f"TensorStoreCarrier stores Float32 and Int32, not {dtype}")
    return dtype


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not bool")
    n = operator.index(value)
    if n < 0:
        raise ValueError(f"{what} must be >= 0, not {n}")
    return n


def _metadata(size: int, dtype: sw.DType, chunk: int, extra: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "chunk_key_encoding": {"name": "default"},
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "fill_value": 0,
    }
    meta.update(extra)
    meta.update({
        "shape": [size],
        "data_type": _ZARR[dtype],
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [chunk]}},
    })
    return meta


def _probe(spec: dict[str, Any], where: str) -> None:
    """Fail fast when the store itself cannot be reached (a missing bucket,
    refused credentials). Creating an array writes its zarr.json on the
    condition that none exists yet; when the bucket is missing, S3 answers
    that write and the check of the key alike with 404, which the engine reads
    as "still absent, try again" and so retries forever (its request-retry
    limits do not apply). Listing the one key instead gets the store's error
    back at once."""
    try:
        context = ts.Context(spec.get("context", {}), parent=_CONTEXT)
        kv = ts.KvStore.open(spec["kvstore"], context=context).result()
        key = "zarr.json"
        kv.list(ts.KvStore.KeyRange(key, key + "\0")).result()
    except Exception as exc:
        if "UNIMPLEMENTED" in str(exc):
            return  # stores that cannot list (http) answer the create itself
        raise _io_error(where, "create the array", exc) from None


def _create_store(spec: dict[str, Any], size: int, dtype: sw.DType, chunk: int,
                  probe: bool = True) -> ts.TensorStore:
    where = _where(spec["kvstore"])
    if probe:
        _probe(spec, where)
    full = dict(spec)
    full.setdefault(_STORE_FILL, True)
    full["metadata"] = _metadata(size, dtype, chunk, dict(spec.get("metadata", {})))
    full.pop("dtype", None)
    try:
        return ts.open(full, create=True, context=_CONTEXT).result()
    except Exception as exc:  # the engine reports every failure as ValueError
        if "ALREADY_EXISTS" in str(exc):
            raise FileExistsError(f"TensorStore {where}: an array already exists there; "
                                  f"open it with TensorStoreCarrier.open") from None
        raise _io_error(where, "create the array", exc) from None


def _kvstore(store: ts.TensorStore) -> ts.KvStore:
    kv = store.kvstore
    if kv is None:
        raise ValueError("the TensorStore has no key-value store")
    return kv


def _host_view(carrier: sw.Carrier, offset: int, count: int, dtype: sw.DType) -> np.ndarray:
    """A NumPy view of `count` slots of a live CPU carrier from `offset`."""
    if type(carrier) is not sw.CPU:
        raise TypeError(f"expected a CPU carrier, not {type(carrier).__name__}")
    itemsize = _NUMPY[dtype].itemsize
    raw = (ctypes.c_char * (count * itemsize)).from_address(carrier.pointer() + offset * itemsize)
    return np.frombuffer(memoryview(raw), dtype=_NUMPY[dtype])


class _Completion:
    """The engine's futures for one transfer, as a ProviderCompletion: `wait()`
    blocks (without the GIL) until they finish, then runs `then`; engine
    failures become OSError naming the store."""

    def __init__(self, where: str, action: str, futures: list[Any],
                 then: Callable[[], None] | None = None, keep: tuple[Any, ...] = ()) -> None:
        self._where = where
        self._action = action
        self._futures = futures
        self._then = then
        self._keep = keep  # buffers the engine reads or writes until it finishes
        self._finished = False

    @property
    def done(self) -> bool:
        return self._finished

    def wait(self) -> None:
        if self._finished:
            return
        try:
            for future in self._futures:
                future.result()
            if self._then is not None:
                self._then()
        except OSError:
            raise
        except Exception as exc:
            raise _io_error(self._where, self._action, exc) from None
        finally:
            self._keep = ()
        self._finished = True


class TensorStoreCarrier(sw.Carrier):
    """A carrier whose slots are a 1-D zarr v3 array in a TensorStore (local
    disk, memory, S3, GCS, HTTP, ...). Make one with `TensorStoreCarrier.create`
    or `TensorStoreCarrier.open`; the constructor takes an already open 1-D
    zarr v3 TensorStore. Slot reads and writes work but each is one I/O
    request: move Tensors in and out for bulk work. `release()` drops the
    handle and never deletes the stored array (arrays the carrier itself made
    through `new_like`/`allocate_like` excepted). On a carrier from `create`
    or `open`, reading slots that a move or `save` wrote raises OSError when a
    chunk there was deleted from the store; chunks never written read as
    zero."""

    _store: ts.TensorStore | None

    def __init__(self, store: ts.TensorStore) -> None:
        if not isinstance(store, ts.TensorStore):
            raise TypeError(f"store must be an open tensorstore.TensorStore, not "
                            f"{type(store).__name__}; use TensorStoreCarrier.create or .open")
        if store.rank != 1:
            raise ValueError(f"TensorStoreCarrier needs a 1-D array, not rank {store.rank}")
        if store.spec().to_json().get("driver") != "zarr3":
            raise ValueError("TensorStoreCarrier needs a zarr v3 ('zarr3' driver) array")
        name = store.dtype.name
        if name not in _FROM_ZARR:
            raise ValueError(f"TensorStoreCarrier stores float32 and int32 arrays, not {name}")
        super().__init__()
        self._dtype = _FROM_ZARR[name]
        self._store = store
        self._kvstore: dict[str, Any] = _kvstore(store).spec().to_json()
        self._where = _where(self._kvstore)
        shape = store.chunk_layout.read_chunk.shape
        self._chunk = int(shape[0] or 1) if shape else 1
        self._mutable = True
        self._scratch = False
        # Missing chunks are reported only on handles this module opened (in
        # its context, storing zero chunks); `_adopt` turns that on.
        self._spec_json: dict[str, Any] = {}
        self._context_spec: dict[str, Any] = {}
        self._stored: tuple[int, int] | None = None
        self._strict: ts.TensorStore | None = None

    @classmethod
    def _adopt(cls, store: ts.TensorStore, spec_in: dict[str, Any] | None = None
               ) -> TensorStoreCarrier:
        """A carrier over a handle opened here from `spec_in` (in this
        module's context, with zero chunks stored), whose reads report chunks
        deleted from the slots the array's attributes record as written."""
        made = cls(store)
        spec = store.spec().to_json()
        if spec.get(_STORE_FILL):
            made._spec_json = spec
            # The spec's own context options (request retries and the like),
            # less a private memory store, which a second open would not share.
            context = dict((spec_in or {}).get("context") or {})
            made._context_spec = {k: v for k, v in context.items()
                                  if not k.startswith("memory_key_value_store")}
            made._stored = _stored_span(spec.get("metadata", {}).get("attributes"))
        return made

    # ---- entry points -------------------------------------------------------

    @classmethod
    def create(cls, spec: Any, size: int, *, dtype: sw.DType = sw.DType.Float32,
               chunk_slots: int | None = None) -> TensorStoreCarrier:
        """Create a new 1-D zarr v3 array of `size` zero slots where `spec` says
        (a TensorStore spec: dict or JSON string with 'kvstore' and optionally
        'driver': 'zarr3' and 'metadata' such as 'codecs'), chunked by
        `chunk_slots` slots (default: 1048576, or `size` when smaller). `size=0`
        makes an empty carrier that a move grows. Raises FileExistsError when an
        array already exists there and OSError when the store fails."""
        spec = _spec_dict(spec)
        size = _count(size, "size")
        dtype = _check_dtype(dtype)
        if chunk_slots is None:
            chunk = min(max(size, 1), _DEFAULT_CHUNK) if size else _DEFAULT_CHUNK
        else:
            chunk = _count(chunk_slots, "chunk_slots")
            if chunk == 0:
                raise ValueError("chunk_slots must be > 0")
        return cls._adopt(_create_store(spec, size, dtype, chunk), spec)

    @classmethod
    def open(cls, spec: Any) -> TensorStoreCarrier:
        """Open an existing 1-D zarr v3 array (dict or JSON spec). Raises OSError
        naming the store when it cannot be opened (missing, refused, unreachable)."""
        spec = _spec_dict(spec)
        spec.setdefault(_STORE_FILL, True)
        try:
            store = ts.open(spec, open=True, context=_CONTEXT).result()
        except Exception as exc:
            raise _io_error(_where(spec["kvstore"]), "open the array", exc) from None
        return cls._adopt(store, spec)

    @property
    def store(self) -> ts.TensorStore | None:
        """The open TensorStore (None once released)."""
        return self._store

    @property
    def chunk_slots(self) -> int:
        """Slots per zarr chunk."""
        return self._chunk

    @property
    def location(self) -> str:
        """Where the array lives, for example 's3://bucket/path/'."""
        return self._where

    # ---- carrier hooks ------------------------------------------------------

    def size(self) -> int:
        store = self._store
        return 0 if store is None else int(store.shape[0])

    def dtype(self) -> sw.DType:
        return self._dtype

    def _live(self) -> ts.TensorStore:
        if self._store is None:
            raise RuntimeError("this TensorStoreCarrier is released")
        return self._store

    def _reader(self, start: int, stop: int) -> ts.TensorStore:
        """The handle to read slots [start, stop) with: one that fails on a
        missing chunk when the attributes record those slots as written (a
        chunk missing there was deleted), else the one that reads it as zero."""
        store = self._live()
        stored = self._stored
        if stored is None or not stored[0] <= start <= stop <= stored[1] or start == stop:
            return store
        if self._strict is None:
            # The same array over its whole (growable) domain, whatever shape
            # it has grown to since this carrier opened it.
            spec = {"driver": "zarr3", "kvstore": self._spec_json["kvstore"],
                    "context": self._context_spec,
                    _STORE_FILL: True, "fill_missing_data_reads": False}
            try:
                self._strict = ts.open(spec, open=True, context=_CONTEXT,
                                       recheck_cached_metadata=False).result()
            except Exception as exc:
                raise _io_error(self._where, "open the array", exc) from None
        return self._strict

    def get_value(self, index: int) -> float | int:
        store = self._reader(index, index + 1)
        try:
            value = store[index].read().result()
        except Exception as exc:
            raise _io_error(self._where, f"read slot {index}", exc) from None
        return float(value) if self._dtype is sw.DType.Float32 else int(value)

    def set_value(self, index: int, value: Any) -> None:
        store = self._live()
        stored = self._normalize(value)
        try:
            store[index].write(stored).result()
        except Exception as exc:
            raise _io_error(self._where, f"write slot {index}", exc) from None

    def _normalize(self, value: Any) -> Any:
        if self._dtype is sw.DType.Float32:
            if not isinstance(value, numbers.Real):
                raise TypeError(f"a Float32 slot takes a real number, not {type(value).__name__}")
            return np.float32(float(value))
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise TypeError(f"an Int32 slot takes an integer, not {type(value).__name__}")
        number = operator.index(value)
        if not -2**31 <= number < 2**31:
            raise OverflowError(f"{number} does not fit an Int32 slot")
        return np.int32(number)

    def _is_mutable(self) -> bool:
        return self._mutable

    def _supports_storage_dtype(self, dtype: sw.DType) -> bool:
        return dtype in _ZARR

    def _allocate(self, size: int) -> None:
        store = self._live()
        try:
            self._store = store.resize(exclusive_max=[size], expand_only=True).result()
        except Exception as exc:
            raise _io_error(self._where, f"grow the array to {size} slots", exc) from None

    def _release(self) -> None:
        store, self._store = self._store, None
        self._strict = None
        if self._scratch and store is not None:
            # Arrays the carrier made for itself (tier and tile copies) go with it.
            try:
                _kvstore(store).delete_range(ts.KvStore.KeyRange()).result()
            except Exception:
                pass

    def _derived(self, size: int, dtype: sw.DType, mutable: Any) -> TensorStoreCarrier:
        """A new array next to this one (`<path>.like-<hex>/`), chunked like it."""
        kvstore = dict(self._kvstore)
        base = str(kvstore.get("path", "")).rstrip("/")
        kvstore["path"] = f"{base}.like-{uuid.uuid4().hex}/" if base else \
            f"like-{uuid.uuid4().hex}/"
        chunk = self._chunk if size > self._chunk else max(size, 1)
        made = type(self)._adopt(_create_store({"driver": "zarr3", "kvstore": kvstore},
                                               size, dtype, chunk, probe=False))
        made._scratch = True
        made._mutable = bool(mutable)
        return made

    def new_like(self, values: Iterable[Any], *, mutable: bool = True,
                 dtype: sw.DType | None = None) -> TensorStoreCarrier:
        """A new array next to this one holding `values` (None reads as zero)."""
        items = list(values)
        dtype = self._dtype if dtype is None else _check_dtype(dtype)
        zero = 0.0 if dtype is sw.DType.Float32 else 0
        made = self._derived(len(items), dtype, True)
        data = np.array([zero if v is None else made._normalize(v) for v in items],
                        dtype=_NUMPY[dtype])
        if len(items):
            try:
                made._live()[0:len(items)].write(data).result()
            except Exception as exc:
                made.release()
                raise _io_error(made._where, "write the values", exc) from None
        made._mutable = bool(mutable)
        return made

    def allocate_like(self, size: int, *, mutable: bool = True, dtype: sw.DType | None = None,
                      empty: bool = False) -> TensorStoreCarrier:
        """A new zero-filled array of `size` slots next to this one."""
        size = _count(size, "size")
        dtype = self._dtype if dtype is None else _check_dtype(dtype)
        return self._derived(size, dtype, mutable)

    # ---- layout attributes --------------------------------------------------

    def _record_layout(self, layout: sw.Layout, offset: int, dtype: sw.DType,
                       written: int) -> None:
        """Store the Tensor's Layout, offset and dtype in the array's zarr
        attributes (zarr.json), where `load` finds them, with the slots whose
        chunks are now all stored (slots [0, written) were just written)."""
        kv = _kvstore(self._live())
        meta = json.loads(kv.read("zarr.json").result().value)
        attributes = meta.setdefault("attributes", {})
        record: dict[str, Any] = {
            "layout": {"shape": _plain(layout.shape.top_level),
                       "stride": _plain(layout.stride.top_level)},
            "offset": offset,
            "dtype": dtype.name,
        }
        stored = None
        before = _stored_span(attributes)
        attributes.pop(_STORED, None)
        if self._spec_json and written > 0:
            # Slots [0, written) were just written (a partly written last chunk
            # is stored whole); chunks stored before stay stored.
            stored = (0, max(written, before[1]) if before and before[0] == 0 else written)
            attributes[_STORED] = list(stored)
        attributes[_ATTRIBUTE] = record
        kv.write("zarr.json", json.dumps(meta, indent=2).encode()).result()
        self._stored = stored

    def _layout_record(self) -> dict[str, Any] | None:
        kv = _kvstore(self._live())
        meta = json.loads(kv.read("zarr.json").result().value)
        record = meta.get("attributes", {}).get(_ATTRIBUTE)
        return record if isinstance(record, dict) else None

    def __repr__(self) -> str:
        state = "released" if self._store is None else f"{self.size()} slots"
        return f"TensorStoreCarrier({self._where!r}, {self._dtype.name}, {state})"


def _stored_span(attributes: Any) -> tuple[int, int] | None:
    """The recorded [start, stop) slots whose chunks are all stored."""
    span = attributes.get(_STORED) if isinstance(attributes, dict) else None
    if (isinstance(span, list) and len(span) == 2 and
            all(isinstance(v, int) and not isinstance(v, bool) for v in span) and
            0 <= span[0] <= span[1]):
        return span[0], span[1]
    return None


def _plain(items: Any) -> Any:
    return [_plain(i) for i in items] if isinstance(items, (tuple, list)) else int(items)


# ---- moves with CPU ---------------------------------------------------------


class CpuToTensorStoreMoveOperation(sw.MoveOperation):
    """Moves a CPU Tensor's span into a TensorStoreCarrier with one TensorStore
    write (asynchronous: the engine's threads do the I/O) and records the
    Tensor's Layout in the array's attributes."""

    source_class = sw.CPU
    destination_class = TensorStoreCarrier

    def _copy_async(self, tensor: sw.Tensor, destination: sw.Carrier,
                    output: sw.Tensor, element_count: int) -> _Completion:
        assert isinstance(destination, TensorStoreCarrier)
        where = destination.location
        dtype = destination.dtype()
        layout = output.layout

        def record() -> None:
            destination._record_layout(layout, output.offset, dtype, element_count)

        try:
            view = _host_view(tensor.carrier, tensor.offset, element_count, dtype)
            store = destination._live()
            futures = [store[0:element_count].write(view).commit] if element_count else []
        except Exception as exc:
            raise _io_error(where, "start the write", exc) from None
        return _Completion(where, "write the moved values", futures, record, (view,))

    def _copy(self, tensor: sw.Tensor, destination: sw.Carrier, output: sw.Tensor,
              element_count: int) -> None:
        self._copy_async(tensor, destination, output, element_count).wait()


class TensorStoreToCpuMoveOperation(sw.MoveOperation):
    """Moves a TensorStoreCarrier Tensor's span into a CPU carrier: TensorStore
    reads the chunks straight into the destination's memory on its own threads."""

    source_class = TensorStoreCarrier
    destination_class = sw.CPU

    def _copy_async(self, tensor: sw.Tensor, destination: sw.Carrier, output: sw.Tensor,
                    element_count: int) -> _Completion:
        source = tensor.carrier
        assert isinstance(source, TensorStoreCarrier)
        where = source.location
        try:
            view = _host_view(destination, output.offset, element_count, source.dtype())
            store = source._reader(tensor.offset, tensor.offset + element_count)
            span = store[tensor.offset:tensor.offset + element_count].translate_to[0]
            target = ts.array(view, copy=False, write=True, context=_CONTEXT)
            futures = [target.write(span).commit] if element_count else []
        except Exception as exc:
            raise _io_error(where, "start the read", exc) from None
        return _Completion(where, "read the moved values", futures, None, (view, target))

    def _copy(self, tensor: sw.Tensor, destination: sw.Carrier, output: sw.Tensor,
              element_count: int) -> None:
        self._copy_async(tensor, destination, output, element_count).wait()


_PAIRS: tuple[tuple[type[sw.Carrier], type[sw.Carrier], type[sw.MoveOperation]], ...] = (
    (sw.CPU, TensorStoreCarrier, CpuToTensorStoreMoveOperation),
    (TensorStoreCarrier, sw.CPU, TensorStoreToCpuMoveOperation),
)
for _source, _destination, _operation in _PAIRS:
    if dispatch_move(_source, _destination) is not _operation:
        register_move_operation(_source, _destination, _operation)


# ---- save / load ------------------------------------------------------------


def save(tensor: sw.Tensor, spec: Any) -> None:
    """Copy `tensor`'s values into a new zarr v3 array at `spec` and store its
    Layout, offset and dtype in the array's attributes, so `load(spec)` gives
    the Tensor back (in this or another process). The tensor stays live and
    unchanged. Raises FileExistsError if an array exists there, OSError if the
    store fails."""
    if not isinstance(tensor, sw.Tensor):
        raise TypeError(f"tensor must be a Tensor, not {type(tensor).__name__}")
    spec = _spec_dict(spec)
    carrier = tensor.carrier
    dtype = _check_dtype(tensor.dtype())
    if carrier.is_released():
        raise RuntimeError("cannot save a Tensor whose carrier is released")
    layout, offset = tensor.layout, tensor.offset
    count = layout.cosize
    data: Any
    if type(carrier) is sw.CPU:
        data = _host_view(carrier, offset, count, dtype)
    elif isinstance(carrier, TensorStoreCarrier):
        data = carrier._live()[offset:offset + count].translate_to[0]
    else:
        data = np.array([carrier[offset + i] for i in range(count)], dtype=_NUMPY[dtype])
    made = TensorStoreCarrier._adopt(_create_store(spec, count, dtype,
                                                   min(max(count, 1), _DEFAULT_CHUNK)), spec)
    try:
        if count:
            made._live()[0:count].write(data).result()
        made._record_layout(layout, 0, dtype, count)
    except Exception as exc:
        raise _io_error(made.location, "save the tensor", exc) from None
    finally:
        made.release()


def load(spec: Any) -> sw.Tensor:
    """Open the array at `spec` and return a Tensor over a TensorStoreCarrier
    with the Layout, offset and dtype stored in its attributes (by `save` or by
    a move into a TensorStoreCarrier). Raises OSError if the store fails and
    ValueError if the array holds no strideweave layout."""
    carrier = TensorStoreCarrier.open(spec)
    try:
        record = carrier._layout_record()
    except Exception as exc:
        raise _io_error(carrier.location, "read the array's attributes", exc) from None
    if record is None:
        raise ValueError(f"the array at {carrier.location} holds no strideweave layout "
                         f"attributes; open it with TensorStoreCarrier.open instead")
    layout = sw.Layout(sw.Shape(*record["layout"]["shape"]),
                       sw.Stride(*record["layout"]["stride"]))
    return sw.Tensor(carrier, int(record["offset"]), layout)
