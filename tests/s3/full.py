"""At full, a PUT gets 507 InsufficientStorage and botocore does not retry it (in both its
retry modes); GET, HEAD, LIST and DELETE work; once deletes are made, the GC reclaims their
space early (the cluster is nearfull) and writes resume. Driven by
crates/gateway/tests/s3_full.rs."""
import os
import time

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

MB = 1 << 20


def client(mode):
    s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"], region_name="us-east-1",
                      aws_access_key_id=os.environ["AK"], aws_secret_access_key=os.environ["SK"],
                      config=Config(s3={"addressing_style": "path"},
                                    retries={"max_attempts": 5, "mode": mode}))
    sent = []
    s3.meta.events.register("before-send.s3.PutObject", lambda **kwargs: sent.append(1))
    return s3, sent


s3, sent = client("legacy")
standard, standard_sent = client("standard")
s3.create_bucket(Bucket="full")
# An overwrite, so the GC queue exists before the cluster is full.
s3.put_object(Bucket="full", Key="seed", Body=b"first")
s3.put_object(Bucket="full", Key="seed", Body=b"second")

stored = {}
refused = None
for index in range(400):
    key = f"object-{index}"
    body = os.urandom(MB)
    before = len(sent)
    try:
        s3.put_object(Bucket="full", Key=key, Body=body)
        stored[key] = body
    except ClientError as error:
        refused = error
        attempts = len(sent) - before
        break
assert refused is not None, "the cluster never refused a PUT"
status = refused.response["ResponseMetadata"]["HTTPStatusCode"]
code = refused.response["Error"]["Code"]
assert (status, code) == (507, "InsufficientStorage"), (status, code, refused.response)
assert attempts == 1, f"the refused PUT was sent {attempts} times"
assert len(stored) > 5, len(stored)
print(f"FULL after {len(stored)} PUTs: {status} {code}, sent once")

for name, (other, counter) in {"standard": (standard, standard_sent)}.items():
    before = len(counter)
    try:
        other.put_object(Bucket="full", Key="late", Body=b"x" * 4096)
        raise AssertionError(f"{name}: a PUT was accepted at full")
    except ClientError as error:
        assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 507, error.response
    assert len(counter) - before == 1, f"{name}: sent {len(counter) - before} times"

# Reads and deletes work at full.
for key, body in list(stored.items())[:3]:
    assert s3.get_object(Bucket="full", Key=key)["Body"].read() == body, key
    assert s3.head_object(Bucket="full", Key=key)["ContentLength"] == len(body)
listed = s3.list_objects_v2(Bucket="full")["KeyCount"]
assert listed == len(stored) + 1, (listed, len(stored))
deleted = list(stored)[: len(stored) // 2]
for key in deleted:
    s3.delete_object(Bucket="full", Key=key)
    del stored[key]
print(f"DELETED {len(deleted)}")

# The deleted data waits for the GC (gc_min_wait_s is 300 s), which runs early while the
# cluster is nearfull: writes resume without waiting out the delay.
start = time.monotonic()
while True:
    try:
        s3.put_object(Bucket="full", Key="after", Body=os.urandom(MB))
        break
    except ClientError as error:
        assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 507, error.response
        assert time.monotonic() - start < 30, "writes did not resume within 30 s"
        time.sleep(0.5)
print(f"RESUMED after {time.monotonic() - start:.1f} s")
for key, body in stored.items():
    assert s3.get_object(Bucket="full", Key=key)["Body"].read() == body, key
