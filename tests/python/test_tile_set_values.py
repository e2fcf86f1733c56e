"""TileSet, TileSelection and ResidencyPlan as values held by the core
(contract-carriers TE-4, TE-5): what the Python face of the core values
must keep doing beyond the examples in test_tiled_evictable.py."""
import itertools
import random
import threading

import pytest
from hypothesis import given, settings, strategies as st

from strideweave import ResidencyPlan, TileSelection, TileSet

coords2 = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), unique=True, max_size=12)


@settings(max_examples=60, deadline=None)
@given(coords2, st.randoms())
def test_te5_order_equality_hash_agree_for_any_input_order(rows, rnd):
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    a, b = TileSet(rows), TileSet(shuffled)
    assert a == b and hash(a) == hash(b)
    assert list(a.coordinates) == sorted(rows, key=lambda c: c[::-1])
    assert all(c in a for c in rows)
    assert (7, 7) not in a and len(a) == len(rows)


@settings(max_examples=60, deadline=None)
@given(coords2, coords2)
def test_te5_unequal_sets_compare_unequal(x, y):
    assert (TileSet(x) == TileSet(y)) == (set(x) == set(y))


def test_te5_membership_of_coordinates_with_many_axes():
    # more axes than a TiledEvictable grid may have: still a plain value
    s = TileSet([(0,) * 40, (1,) + (0,) * 39])
    assert (0,) * 40 in s and (1,) + (0,) * 39 in s
    assert (2,) + (0,) * 39 not in s and (0,) * 39 not in s
    assert s.rank == 40


def test_te5_membership_of_non_coordinates_is_false():
    s = TileSet([(1, 2)])
    assert [1, 2] not in s and (1.0, 2) not in s and (True, 2) not in s
    assert (2**70, 2) not in s and (-1, 2) not in s and "x" not in s


def test_te5_a_coordinate_no_grid_can_hold_is_refused():
    with pytest.raises(ValueError, match="too large"):
        TileSet([(2**63 - 1,)])
    with pytest.raises(ValueError, match="too large"):
        TileSelection([[0], [2**63 - 1]])


def test_te4_selection_equality_and_hash_follow_the_axes():
    a = TileSelection([[3, 1], [0]])
    assert a == TileSelection(([3, 1], (0,))) and hash(a) == hash(TileSelection([[3, 1], [0]]))
    assert a != TileSelection([[1, 3], [0]]) and a != TileSelection([[3, 1]])
    assert a.tile_set == TileSelection([[1, 3], [0]]).tile_set


def test_te5_plan_equality_is_by_tiles():
    p = ResidencyPlan(promote=TileSet([(0,)]), evict=TileSet([(2,), (1,)]))
    assert p == ResidencyPlan(TileSet([(0,)]), TileSet(), TileSet([(1,), (2,)]))
    assert p != ResidencyPlan(promote=TileSet([(0,)]))
    with pytest.raises(ValueError, match="both retain and evict"):
        ResidencyPlan(retain=TileSet([(2,)]), evict=TileSet([(2,), (5,)]))


def test_te5_many_threads_read_one_set():
    rows = list(itertools.product(range(8), range(8)))
    s = TileSet(rows)
    twin = TileSet(reversed(rows))
    errors = []

    def reader(seed):
        rnd = random.Random(seed)
        for _ in range(200):
            c = rnd.choice(rows)
            if c not in s or hash(s) != hash(twin) or s != twin or len(s) != 64:
                errors.append(c)

    ts = [threading.Thread(target=reader, args=(k,)) for k in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []
