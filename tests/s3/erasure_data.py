"""S3 over an erasure-coded data pool: PUT, GET, ranged GET, multipart and DELETE of objects
of 4 KiB to 8 MiB, first with every OSD up, then with one down (degraded reads decode the
missing shards). Driven by crates/gateway/tests/erasure_data.rs, one phase per run:
`write` stores and checks the objects, `degraded` (one OSD down) reads them all back, stores
more and deletes some, `clean` deletes the rest and the bucket."""
import os
import random
import sys

import boto3
from botocore.config import Config

KB = 1 << 10
MB = 1 << 20
BUCKET = "erasure"
SIZES = [4 * KB, 64 * KB + 7, MB, 4 * MB, 4 * MB + 1, 8 * MB]


def body(name, size):
    return random.Random(f"{name}:{size}").randbytes(size)


def check(s3, key, expected):
    got = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert got == expected, f"{key}: {len(got)} bytes read, {len(expected)} stored, or other bytes"
    rng = random.Random(key)
    for _ in range(4):
        start = rng.randrange(len(expected))
        end = min(len(expected) - 1, start + rng.randrange(1, 3 * MB))
        part = s3.get_object(Bucket=BUCKET, Key=key, Range=f"bytes={start}-{end}")["Body"].read()
        assert part == expected[start:end + 1], f"{key}: range {start}-{end} differs"
    tail = s3.get_object(Bucket=BUCKET, Key=key, Range="bytes=-1000")["Body"].read()
    assert tail == expected[-1000:], f"{key}: suffix range differs"


def put_all(s3, prefix):
    stored = {}
    for size in SIZES:
        key = f"{prefix}/object-{size}"
        data = body(key, size)
        s3.put_object(Bucket=BUCKET, Key=key, Body=data)
        stored[key] = data
    key = f"{prefix}/multipart"
    parts = [body(f"{key}:1", 5 * MB), body(f"{key}:2", 3 * MB + 11)]
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    etags = []
    for number, part in enumerate(parts, start=1):
        answer = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=number,
                                Body=part)
        etags.append({"PartNumber": number, "ETag": answer["ETag"]})
    s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload,
                                 MultipartUpload={"Parts": etags})
    stored[key] = b"".join(parts)
    return stored


def expected(prefix):
    out = {f"{prefix}/object-{size}": body(f"{prefix}/object-{size}", size) for size in SIZES}
    key = f"{prefix}/multipart"
    out[key] = body(f"{key}:1", 5 * MB) + body(f"{key}:2", 3 * MB + 11)
    return out


def keys(s3):
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    return sorted(item["Key"] for page in pages for item in page.get("Contents", []))


s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"], region_name="us-east-1",
                  aws_access_key_id=os.environ["AK"], aws_secret_access_key=os.environ["SK"],
                  config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
phase = sys.argv[1]
if phase == "write":
    s3.create_bucket(Bucket=BUCKET)
    stored = put_all(s3, "healthy")
    for key, data in stored.items():
        check(s3, key, data)
    # An overwrite replaces the data of a key (the old pieces are removed).
    s3.put_object(Bucket=BUCKET, Key="healthy/object-4096", Body=b"replaced")
    assert s3.get_object(Bucket=BUCKET, Key="healthy/object-4096")["Body"].read() == b"replaced"
    print("WRITTEN", len(stored))
elif phase == "degraded":
    stored = expected("healthy")
    stored["healthy/object-4096"] = b"replaced"
    for key, data in stored.items():
        check(s3, key, data)
    more = put_all(s3, "degraded")
    for key, data in more.items():
        check(s3, key, data)
    for key in list(more)[:3]:
        s3.delete_object(Bucket=BUCKET, Key=key)
    remaining = sorted(set(stored) | set(list(more)[3:]))
    assert keys(s3) == remaining, f"listing {keys(s3)} != {remaining}"
    print("DEGRADED OK", len(stored), len(more))
elif phase == "clean":
    present = keys(s3)
    everything = expected("healthy") | expected("degraded")
    everything["healthy/object-4096"] = b"replaced"
    for key in present:
        check(s3, key, everything[key])
        s3.delete_object(Bucket=BUCKET, Key=key)
    s3.delete_bucket(Bucket=BUCKET)
    print("CLEAN", len(present))
else:
    raise SystemExit(f"unknown phase {phase}")
