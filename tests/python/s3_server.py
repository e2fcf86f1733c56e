"""A real S3 endpoint on loopback for the TensorStore tests: moto's server
on a free 127.0.0.1 port, buckets made with boto3, dummy credentials in the
environment. Tests skip (with the reason) only when moto or boto3 cannot be
imported."""

import contextlib
import os

import pytest

REGION = "us-east-1"
# Failures against a stopped server must end quickly: few, short retries.
FAST_RETRIES = {"s3_request_retries": {"max_retries": 2, "initial_delay": "10ms",
                                       "max_delay": "50ms"}}


def _modules():
    try:
        import boto3
        from moto.server import ThreadedMotoServer
    except ImportError as exc:  # pragma: no cover - make test installs them
        pytest.skip(f"moto[server] and boto3 are needed for the S3 tests: {exc}")
    return boto3, ThreadedMotoServer


def _credentials():
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)


class S3:
    """One running moto server."""

    def __init__(self):
        boto3, server_class = _modules()
        _credentials()
        self.server = server_class(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        assert host == "127.0.0.1"
        self.endpoint = f"http://127.0.0.1:{port}"
        self.client = boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION)
        self.running = True

    def bucket(self, name):
        with contextlib.suppress(self.client.exceptions.BucketAlreadyOwnedByYou):
            self.client.create_bucket(Bucket=name)
        for obj in self.client.list_objects_v2(Bucket=name).get("Contents", []):
            self.client.delete_object(Bucket=name, Key=obj["Key"])
        return name

    def keys(self, bucket, prefix=""):
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                      Prefix=prefix)
        return sorted(o["Key"] for p in pages for o in p.get("Contents", []))

    def spec(self, bucket, path, **extra):
        kv = {"driver": "s3", "bucket": bucket, "path": path, "endpoint": self.endpoint,
              "aws_region": REGION}
        return {"driver": "zarr3", "kvstore": kv, **extra}

    def stop(self):
        if self.running:
            self.running = False
            self.server.stop()


@pytest.fixture(scope="session")
def s3():
    server = S3()
    yield server
    server.stop()


@pytest.fixture
def s3_endpoint(s3, monkeypatch):
    """The session server's endpoint in STRIDEWEAVE_S3_ENDPOINT (the README's
    example reads it) and a fresh, empty `sw-readme` bucket."""
    s3.bucket("sw-readme")
    monkeypatch.setenv("STRIDEWEAVE_S3_ENDPOINT", s3.endpoint)
    return s3.endpoint
