"""Shared builders for the TiledEvictable tests."""

import strideweave as sw
from strideweave import CPU

F = sw.DType.Float32


def cpu_values(values, dtype=F):
    c = CPU(len(values), dtype=dtype)
    for i, v in enumerate(values):
        c[i] = v
    return c


def numbered(grid, tile, secondary=None, policy=None, start=1.0):
    """A TiledEvictable whose slot i holds start + i, all tiles primary."""
    n = 1
    for g, t in zip(grid, tile):
        n *= g * t
    prim = cpu_values([start + i for i in range(n)])
    sec = CPU(0) if secondary is None else secondary
    return sw.TiledEvictable(prim, sec, grid, tile, residency_policy=policy)


def canonical(shape):
    strides, s = [], 1
    for e in shape:
        strides.append(s)
        s *= e
    return sw.Layout(sw.Shape(list(shape)), sw.Stride(strides))


def full_tensor(te, layout=None, offset=0):
    return sw.Tensor(te, offset, layout or canonical(te.logical_shape))


def states(te):
    """Every tile's (location, dirty), in linear tile order."""
    import itertools

    grid = te.grid_shape
    out = []
    for rev in itertools.product(*[range(g) for g in reversed(grid)]):
        s = te.tile_state(tuple(reversed(rev)))
        out.append((s.location, s.dirty))
    return out


def slots(te):
    """Every slot value, None for an invalid tile."""
    out = []
    for i in range(te.size()):
        try:
            out.append(te[i])
        except RuntimeError:
            out.append(None)
    return out


class ListCarrier(sw.Carrier):
    """Float32 slots in a Python list: a tier written in Python, reached
    only through its slot hooks."""

    def __init__(self, values=()):
        super().__init__()
        self.v = [float(x) for x in values]

    def size(self):
        return len(self.v)

    def dtype(self):
        return F

    def get_value(self, i):
        return self.v[i]

    def set_value(self, i, x):
        self.v[i] = float(x)

    def _is_mutable(self):
        return True

    def allocate_like(self, size, *, mutable=True, dtype=None, empty=False):
        return type(self)([0.0] * size)
