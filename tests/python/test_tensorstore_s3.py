"""strideweave.tensorstore against real S3: moto's server on a loopback port
(fixture `s3`, tests/python/s3_server.py), TensorStore's s3 driver pointed at
it with `endpoint` and `aws_region`, dummy credentials in the environment."""

import json
import os
import subprocess
import sys
import threading
import uuid

import numpy as np
import pytest

import strideweave as sw
from strideweave import DType as D

from s3_server import FAST_RETRIES, S3

tst = pytest.importorskip("strideweave.tensorstore",
                          reason="the tensorstore package cannot be imported")
TensorStoreCarrier = tst.TensorStoreCarrier

MiB = 1 << 20


def L(shape, stride):
    return sw.Layout(sw.Shape(*shape) if isinstance(shape, tuple) else sw.Shape(shape),
                     sw.Stride(*stride) if isinstance(stride, tuple) else sw.Stride(stride))


def filled_cpu(n, start=0):
    c = sw.CPU(n, empty=True)
    np.from_dlpack(sw.Tensor(c, 0, L(n, 1)))[:] = np.arange(start, start + n, dtype=np.float32)
    return c


def as_numpy(tensor):
    return np.from_dlpack(tensor).copy()


def path():
    return f"{uuid.uuid4().hex}/"


def test_64_mib_cpu_to_s3_and_back(s3):
    bucket = s3.bucket("sw-move")
    n = 64 * MiB // 4
    t = sw.Tensor(filled_cpu(n), 0, L(n, 1))
    expected = as_numpy(t)
    spec = s3.spec(bucket, path())
    on_s3 = sw.move(t, TensorStoreCarrier.create(spec, 0))
    assert t.carrier.is_released() and on_s3.carrier.size() == n
    keys = s3.keys(bucket, spec["kvstore"]["path"])
    assert keys[-1].endswith("zarr.json") and len(keys) == 1 + n // (1 << 20)  # 4 MiB chunks
    back = sw.move(on_s3, sw.CPU(n, empty=True))
    assert np.array_equal(as_numpy(back), expected)


def test_another_process_reads_values_and_layout_from_the_bucket(s3):
    bucket = s3.bucket("sw-share")
    layout = L((4, [3, 2]), (1, [4, 12]))
    n = layout.cosize
    t = sw.Tensor(filled_cpu(n), 0, layout)
    spec = s3.spec(bucket, path())
    tst.save(t, spec)
    stage = os.path.dirname(os.path.dirname(sw.__file__))
    code = ("import json, strideweave.tensorstore as t\n"
            f"x = t.load({json.dumps(spec)!r})\n"
            "print(json.dumps([x.tolist(), repr(x.layout), x.offset]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": stage})
    assert out.returncode == 0, out.stderr
    values, shown, offset = json.loads(out.stdout)
    assert values == t.tolist() and shown == repr(layout) and offset == 0
    meta = json.loads(s3.client.get_object(Bucket=bucket, Key=spec["kvstore"]["path"] +
                                           "zarr.json")["Body"].read())
    assert meta["attributes"]["strideweave"]["layout"] == {"shape": [4, [3, 2]],
                                                           "stride": [1, [4, 12]]}


def test_evictable_with_its_secondary_in_the_bucket(s3):
    bucket = s3.bucket("sw-evict")
    n = MiB
    where = path()
    e = sw.Evictable(filled_cpu(n), TensorStoreCarrier.create(s3.spec(bucket, where), n,
                                                              chunk_slots=1 << 16))
    e.evict()                                    # written in place: the array is big enough
    assert e.is_evicted() and len(s3.keys(bucket, where)) == 1 + n // (1 << 16)
    e.promote()
    assert [e[i] for i in (0, n // 2, n - 1)] == [0.0, n // 2, n - 1]


def test_tiled_evictable_with_its_secondary_in_the_bucket(s3):
    bucket = s3.bucket("sw-tiles")
    grid, tile = 16, 1 << 14
    n = grid * tile
    sec = TensorStoreCarrier.create(s3.spec(bucket, "grid/"), 0, chunk_slots=tile)
    te = sw.TiledEvictable(filled_cpu(n), sec, (grid,), (tile,))
    te.evict(sw.TileSet([(k,) for k in range(grid)]))
    assert len(te.secondary_tiles.coordinates) == grid
    chunks = [k for k in s3.keys(bucket) if "/c/" in k]
    assert len(chunks) == grid                     # one whole chunk per tile, no more
    proj = te.project(sw.Tensor(te, 0, L(n, 1)), sw.TileSelection([[3, 11]])).wait()
    got = as_numpy(proj)
    assert np.array_equal(got[:tile], np.arange(3 * tile, 4 * tile, dtype=np.float32))
    assert np.array_equal(got[tile:], np.arange(11 * tile, 12 * tile, dtype=np.float32))


def test_missing_bucket_is_an_oserror_naming_the_store(s3):
    # moto answers 404 NoSuchBucket both to the conditional write of zarr.json
    # and to the check of that key, which the engine used to retry forever. The
    # create runs on a daemon thread so that a regression fails here instead of
    # hanging the suite.
    spec = s3.spec("no-such-bucket", "x/", context=FAST_RETRIES)
    outcome = []

    def create():
        try:
            outcome.append(TensorStoreCarrier.create(spec, 4))
        except BaseException as exc:  # the test inspects what was raised
            outcome.append(exc)

    worker = threading.Thread(target=create, daemon=True)
    worker.start()
    worker.join(timeout=60)
    if worker.is_alive():
        pytest.fail("creating an array in a missing bucket did not fail within 60 s")
    error = outcome[0]
    assert isinstance(error, OSError), error
    assert "TensorStore s3://no-such-bucket/x/" in str(error)
    assert "NoSuchBucket" in str(error) and "http_response_body" not in str(error)
    assert "no-such-bucket" not in [b["Name"] for b in s3.client.list_buckets()["Buckets"]]


def test_server_stopped_mid_move_fails_cleanly_and_keeps_the_source():
    own = S3()                                   # this test stops its own server
    try:
        bucket = own.bucket("sw-stop")
        n = 64 * MiB // 4
        t = sw.Tensor(filled_cpu(n), 0, L(n, 1))
        expected = as_numpy(t)
        dst = TensorStoreCarrier.create(own.spec(bucket, path(), context=FAST_RETRIES), n,
                                        chunk_slots=1 << 14)   # 1024 requests
        h = sw.move_async(t, dst)
        assert not h.done                        # the engine is still uploading
        own.stop()
        with pytest.raises(OSError, match=f"TensorStore s3://{bucket}/"):
            h.wait()
        assert not t.carrier.is_released() and not dst.is_released()
        assert np.array_equal(as_numpy(t), expected)
    finally:
        own.stop()


def test_a_chunk_deleted_from_the_bucket_ends_the_move_with_oserror(s3):
    bucket = s3.bucket("sw-deleted")
    n = 4 * (1 << 14)
    t = sw.Tensor(filled_cpu(n), 0, L(n, 1))
    spec = s3.spec(bucket, path())
    on_s3 = sw.move(t, TensorStoreCarrier.create(spec, 0, chunk_slots=1 << 14))
    s3.client.delete_object(Bucket=bucket, Key=spec["kvstore"]["path"] + "c/2")
    with pytest.raises(OSError, match=f"TensorStore s3://{bucket}/.*(missing|NOT_FOUND)"):
        sw.move(on_s3, sw.CPU(n))
    assert not on_s3.carrier.is_released()
