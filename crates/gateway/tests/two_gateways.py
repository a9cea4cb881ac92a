#!/usr/bin/env python3
"""Two gateways over one cluster, racing on the same keys (run by two_gateways.rs).

  ENDPOINT_A=http://.. ENDPOINT_B=http://.. MAIN_AK=.. MAIN_SK=.. python3 two_gateways.py PHASE

Threads send PUTs and DELETEs of a few keys alternately to gateway A and gateway B, in a
bucket without versioning, one with versioning suspended (the null version is replaced) and
one with versioning enabled. Then it checks that the key reads back as the last write it
knows of, removes every version and every bucket, and prints `OPS n`. The caller then
requires the data pool to be empty: a race that replaced an index entry without freeing its
data, or freed the data of the entry that stayed, leaves an object there or fails a read.

PHASE `race` does the above and then leaves bucket KEEP_BUCKET holding live data of every
kind (a plain object, two versions, an uploaded part of an unfinished multipart upload) for
the caller's orphan collection; PHASE `check` reads that data back and removes it.
"""
import os
import random
import sys
import threading

import boto3
from botocore.config import Config

CONFIG = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                max_pool_connections=16)
ROUNDS = int(os.environ.get("ROUNDS", "120"))
THREADS = 6
KEYS = ["hot", "warm"]


def client(endpoint):
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=os.environ["MAIN_AK"],
                        aws_secret_access_key=os.environ["MAIN_SK"], config=CONFIG)


gateways = [client(os.environ["ENDPOINT_A"]), client(os.environ["ENDPOINT_B"])]
failures = []
operations = [0]
lock = threading.Lock()


def hammer(bucket, thread):
    rng = random.Random(thread)
    done = 0
    try:
        for round_number in range(ROUNDS):
            s3 = gateways[(thread + round_number) % 2]
            key = rng.choice(KEYS)
            if rng.random() < 0.75:
                body = f"{bucket}/{key} thread {thread} round {round_number}".encode()
                s3.put_object(Bucket=bucket, Key=key, Body=body * rng.randint(1, 64))
            else:
                s3.delete_object(Bucket=bucket, Key=key)
            done += 1
    except Exception as error:  # noqa: BLE001 - reported to the caller
        with lock:
            failures.append(f"{bucket} thread {thread}: {error!r}")
    with lock:
        operations[0] += done


def race(bucket):
    threads = [threading.Thread(target=hammer, args=(bucket, t)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def remove_everything(s3, bucket):
    paginator = s3.get_paginator("list_object_versions")
    for page in paginator.paginate(Bucket=bucket):
        for version in page.get("Versions", []) + page.get("DeleteMarkers", []):
            s3.delete_object(Bucket=bucket, Key=version["Key"], VersionId=version["VersionId"])
    s3.delete_bucket(Bucket=bucket)


KEEP_BUCKET = "keep"
KEEP_BODIES = {"plain": b"plain object " * 100, "versioned": b"second version " * 50}


def leave_live_data():
    a, b = gateways
    a.create_bucket(Bucket=KEEP_BUCKET)
    a.put_bucket_versioning(Bucket=KEEP_BUCKET, VersioningConfiguration={"Status": "Enabled"})
    a.put_object(Bucket=KEEP_BUCKET, Key="plain", Body=KEEP_BODIES["plain"])
    b.put_object(Bucket=KEEP_BUCKET, Key="versioned", Body=b"first version")
    a.put_object(Bucket=KEEP_BUCKET, Key="versioned", Body=KEEP_BODIES["versioned"])
    upload = b.create_multipart_upload(Bucket=KEEP_BUCKET, Key="unfinished")
    b.upload_part(Bucket=KEEP_BUCKET, Key="unfinished", UploadId=upload["UploadId"],
                  PartNumber=1, Body=b"part one " * 1000)


def check_live_data():
    a, b = gateways
    for key, body in KEEP_BODIES.items():
        got = b.get_object(Bucket=KEEP_BUCKET, Key=key)["Body"].read()
        if got != body:
            print(f"{KEEP_BUCKET}/{key}: read {len(got)} bytes, wrote {len(body)}")
            sys.exit(1)
    versions = a.list_object_versions(Bucket=KEEP_BUCKET, Prefix="versioned")["Versions"]
    older = [v for v in versions if not v["IsLatest"]]
    if len(versions) != 2 or len(older) != 1:
        print(f"versions of {KEEP_BUCKET}/versioned: {versions}")
        sys.exit(1)
    oldest = older[0]
    first = a.get_object(Bucket=KEEP_BUCKET, Key="versioned", VersionId=oldest["VersionId"])
    if first["Body"].read() != b"first version":
        print("the older version lost its data")
        sys.exit(1)
    for upload in a.list_multipart_uploads(Bucket=KEEP_BUCKET).get("Uploads", []):
        parts = a.list_parts(Bucket=KEEP_BUCKET, Key=upload["Key"], UploadId=upload["UploadId"])
        if [p["Size"] for p in parts.get("Parts", [])] != [9000]:
            print(f"unfinished upload parts: {parts.get('Parts')}")
            sys.exit(1)
        a.abort_multipart_upload(Bucket=KEEP_BUCKET, Key=upload["Key"], UploadId=upload["UploadId"])
    remove_everything(a, KEEP_BUCKET)
    print("CHECKED")


def main():
    if sys.argv[1:] == ["check"]:
        check_live_data()
        return
    a, b = gateways
    buckets = {"race-plain": None, "race-suspended": "Suspended", "race-enabled": "Enabled"}
    for bucket, status in buckets.items():
        a.create_bucket(Bucket=bucket)
        if status:
            a.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": status})
    for bucket in buckets:
        race(bucket)
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    # Both gateways agree on every key, and what they list reads back.
    for bucket in buckets:
        for key in KEYS:
            seen = []
            for s3 in gateways:
                try:
                    seen.append(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
                except s3.exceptions.NoSuchKey:
                    seen.append(None)
            if seen[0] != seen[1]:
                print(f"{bucket}/{key}: gateways disagree")
                sys.exit(1)
    for bucket in buckets:
        remove_everything(b, bucket)
    leave_live_data()
    print(f"OPS {operations[0]}")


if __name__ == "__main__":
    main()
