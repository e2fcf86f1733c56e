"""A tour of strideweave: hierarchical layouts, tensors on carriers, views,
zero-copy hand-off to NumPy and PyTorch through DLPack, and moving tensors
between carriers, and carriers written in Python.

Run it with `make demo`.
"""

import strideweave as sw
from strideweave import CPU, DType, FileBacked, Layout, Shape, Stride, Tensor
from strideweave.friendly import arange, tensor, to_list


def section(title):
    print()
    print(f"== {title} ==")


section("1. Hierarchical layouts")
# A rank-2 layout whose second mode is itself two modes: (2, (3, 4)):(1, (2, 6)).
L = Layout(Shape(2, [3, 4]), Stride(1, [2, 6]))
print("layout          ", L)
print("size, cosize    ", L.size, L.cosize)
print("leaf modes      ", L.infix(), "(what DLPack sees: one dim per leaf)")
print("profile         ", [n.name for n in L.profile])
print("L(23) == L([1, [2, 3]])", L(23), L([1, [2, 3]]))
gapped = Layout(Shape(2, 3), Stride(1, 4))
print("gapped", gapped, "cosize", gapped.cosize, "injective", gapped.is_injective)
bcast = Layout(Shape(2, 3), Stride(1, 0))
print("broadcast", bcast, "cosize", bcast.cosize, "injective", bcast.is_injective)
print("canonical of (2,(3,4))", Layout.canonical(Shape(2, [3, 4])))

section("2. Tensors on a CPU carrier")
t = tensor(list(range(24)), layout=L)
print(t)
print("t[1, [2, 3]] =", t[1, [2, 3]], "  t[5] =", t[5], "(first-mode-fastest ordinal)")
t[0, [0, 0]] = 100.0
print("after a write: t[0] =", t[0], " carrier version", t.version)

section("3. Views share storage: slice, permute, reshape, broadcast")
col = t[1, :]                       # drop mode 0 at index 1, keep the nested mode
print("t[1, :]        ", col.layout, "offset", col.offset, "first values", to_list(col)[:4])
p = sw.permute(t, 1, 0)
print("permute(t,1,0) ", p.layout)
r = sw.reshape(arange(6), Shape(2, 3))
print("reshape        ", r.layout, to_list(r))
b = sw.broadcast_to(tensor([1.0, 2.0], layout=Layout(Shape(2, 1), Stride(1, 1))), Shape(2, 3))
print("broadcast_to   ", b.layout, to_list(b))

section("4. A tensor on a FileBacked carrier")
fb = FileBacked(dtype=DType.Int32)
print("file", fb.path.name, "in hidden dir", fb.path.parent.name, "size", fb.size())
squares = tensor([i * i for i in range(6)], layout=Layout(Shape(3, 2), Stride(2, 1)),
                 dtype=DType.Int32)
ft = sw.move(squares, fb)              # an empty FileBacked grows to the layout's cosize
print("after the move: size", fb.size(), "source released:", squares.carrier.is_released())
ft[2, 1] = 100                         # element writes go to the file
print(ft, "values", to_list(ft))
fb.release()
print("released; file exists:", fb.path.exists())

section("5. Zero-copy export to NumPy and PyTorch (DLPack)")
import numpy as np  # noqa: E402  (optional consumers, imported only here)

try:  # PyTorch is optional: `make demo` does not install it, `make test` does
    import torch  # noqa: E402
except ImportError:
    torch = None

h = tensor(list(range(24)), layout=L)
a = np.from_dlpack(h)
print("numpy sees shape", a.shape, "strides (bytes)", a.strides)
print("a[1, 2, 3] == h[1, [2, 3]]:", a[1, 2, 3], h[1, [2, 3]])
a[1, 2, 3] = -1.0                   # a write through NumPy ...
print("... is seen by strideweave: h[1, [2, 3]] =", h[1, [2, 3]])
if torch is not None:
    tt = torch.from_dlpack(h)
    print("torch sees", tuple(tt.shape), tt.stride(), tt.dtype, "tt[1,2,3] =",
          float(tt[1, 2, 3]))
else:
    print("PyTorch is not installed: skipping torch.from_dlpack (pip install torch to see it)")
ro = Tensor(CPU(4, mutable=False), 0, Layout(Shape(4), Stride(1)))
print("immutable carrier -> numpy writeable:",
      np.from_dlpack(ro).flags.writeable, "(read-only flag of DLPack 1.0)")

section("6. Moving a tensor to a file and back")
n = 1 << 20                              # 4 MiB of Float32
src = arange(n)
handle = sw.move_async(src, FileBacked())   # returns at once; a worker copies
print("handle.done right after move_async:", handle.done)
on_file = handle.wait()                     # the tensor, now on the file
print("handle.done after wait():          ", handle.done)
print("on", type(on_file.carrier).__name__, "of", on_file.carrier.size(), "slots;",
      "source carrier released:", src.carrier.is_released())
print("on_file[12345] =", on_file[12345], " same layout:", on_file.layout == src.layout)
back = sw.move(on_file, CPU(n))             # move() is move_async(...).wait()
ok = np.array_equal(np.from_dlpack(back), np.arange(n, dtype=np.float32))
print("back on CPU, values intact:", ok, "; file removed:", not on_file.carrier.path.exists())
assert ok

section("7. A gradient that crosses a move to a file and back")
x = tensor([1.0, -2.0, 3.0, 0.5], layout=Layout(Shape([2, 2]), Stride([1, 2])))
x_on_file = sw.move(x, FileBacked())        # records one move node
y = sw.elementwise_mul(x_on_file, x_on_file)  # computed on the file carrier
loss = sw.reduce_sum(y, "a b -> 1")
print("loss =", loss.item(), " node of the moved tensor:",
      type(x_on_file.autograd_ctx).__name__)
loss.backward()                             # the gradient moves back to CPU
print("x.grad =", x.grad.tolist(), "on", type(x.grad.carrier).__name__,
      "(d/dx of sum(x*x) is 2x)")
assert x.grad.tolist() == [2.0, -4.0, 6.0, 1.0]

section("8. Carriers written in Python, with their own asynchronous routes")
import struct
import threading
from strideweave.carriers.extension import (
    CarrierDefinition, PreparedTransfer, StorageProvider, TransferProvider, TransferRoute,
    register_carrier_definition)


class Local(sw.Carrier):       # two carrier classes whose slots live in a bytearray;
    pass                       # their CarrierDefinitions say how


class Remote(sw.Carrier):
    pass


def bytearray_storage():
    return StorageProvider(
        supports_dtype=lambda c, dtype: dtype is DType.Float32,
        physical_size=lambda c: len(c.buf) // 4,
        allocate=lambda c, slots: setattr(c, "buf", bytearray(4 * slots)),
        release=lambda c: setattr(c, "buf", None),
        read=lambda c, i: struct.unpack_from("<f", c.buf, 4 * i)[0],
        write=lambda c, i, v: struct.pack_into("<f", c.buf, 4 * i, v))


class Upload:                  # a ProviderCompletion: a `done` property and wait()
    def __init__(self, copy):
        self.worker = threading.Thread(target=copy)
        self.worker.start()

    @property
    def done(self):
        return not self.worker.is_alive()

    def wait(self):
        self.worker.join()


def byte_copy(in_background):
    def prepare(request):      # may refuse with Unsupported(reason); changes nothing
        src, dst = request.tensor.carrier, request.destination
        first, n = 4 * request.tensor.offset, 4 * request.physical_span

        def copy():
            dst.buf[0:n] = src.buf[first:first + n]

        def submit():          # returns None when done, or a completion to wait for
            return Upload(copy) if in_background else copy()
        return PreparedTransfer(submit)
    return TransferProvider(prepare)


register_carrier_definition(Local, CarrierDefinition(bytearray_storage(), transfers=[
    TransferRoute(Local, Remote, "upload", byte_copy(in_background=True))]))
register_carrier_definition(Remote, CarrierDefinition(bytearray_storage(), transfers=[
    TransferRoute(Remote, Local, "download", byte_copy(in_background=False))]))

x = Tensor(Local(4, dtype=DType.Float32), 0, Layout(Shape(4), Stride(1)))
for i, v in enumerate([0.5, 1.5, 2.5, 3.5]):
    x.carrier[i] = v
with sw.profile() as prof:
    handle = sw.move_async(x, Remote(0, dtype=DType.Float32))  # the upload runs on a thread
    up = handle.wait()
print("on", type(up.carrier).__name__, up.tolist(), "through routes",
      sorted({e.route_id for e in prof.move_events()}))
down = sw.move(up, Local(0, dtype=DType.Float32))             # the "download" route
ones = Tensor(down.carrier.new_like([1, 1, 1, 1]), 0, down.layout)
down.backward(ones)                 # the gradient moves back: "upload", then "download"
print("x.grad =", x.grad.tolist(), "on", type(x.grad.carrier).__name__)
assert x.grad.tolist() == [1.0, 1.0, 1.0, 1.0] and down.tolist() == [0.5, 1.5, 2.5, 3.5]

section("9. An Evictable: values that step down to a file and back")
hot = arange(1 << 16)                                  # 256 KiB on a CPU carrier
tiers = sw.Evictable(hot.carrier, FileBacked())      # owns both carriers now
et = Tensor(tiers, 0, hot.layout)
print("promoted:", not tiers.is_evicted(), " et[1000] =", et[1000],
      " the CPU alias is read-only now:", not hot.carrier.is_mutable())
tiers.evict()                                          # the values move to the file
print("evicted to", type(tiers.secondary).__name__, "of", tiers.secondary.size(),
      "slots; CPU storage released:", hot.carrier.is_released())
try:
    et[1000]
except RuntimeError as err:
    print("reading while evicted:", err)
tiers.promote()                                        # and back to a fresh CPU carrier
print("promoted again: et[1000] =", et[1000], " version unchanged:", tiers.version)
assert et[1000] == 1000.0

section("10. A TiledEvictable: a grid of tiles, projected without moving")
grid = arange(64)                                      # an 8x8 grid of values 0..63
tiled = sw.TiledEvictable(grid.carrier, FileBacked(), (4, 4), (2, 2))  # 16 tiles of 2x2
full = Tensor(tiled, 0, Layout(Shape([8, 8]), Stride([1, 8])))
tiled.evict(sw.TileSelection([[3], [0, 1, 2, 3]]))     # one column of tiles to the file
picked = tiled.project(full, sw.TileSelection([[3], [1, 0]])).wait()  # tiles (3,1), (3,0)
print("tile (3,0) now lives in", tiled.tile_state((3, 0)).location, "; projected",
      picked.layout.shape, "->", to_list(picked))
assert to_list(picked) == [22.0, 23.0, 30.0, 31.0, 6.0, 7.0, 14.0, 15.0]
print()
print("tour complete")
