#!/usr/bin/env python3
"""Writer and checker for `pack_crash.rs`: small objects PUT, overwritten and deleted through
`strata serve --packing on` while the test kills the server.

  pack_crash.py write START SEED   8 threads, each owning the keys k<j> with j % 8 == thread;
                                   prints `BEGIN op key version` before a request and `ACK op
                                   key version` once it is answered 2xx (op: put | delete;
                                   version 0 for a delete); stops at the first failure.
  pack_crash.py check              reads `key version...` lines on stdin (the versions the
                                   key may hold, 0 = absent), GETs each key and prints `STATE
                                   key version` for what it found, or `BAD key ...`, then
                                   `CHECKED n`.
env: ENDPOINT, ACCESS_KEY, SECRET_KEY, BUCKET
"""
import os
import random
import sys
import threading

import boto3
from botocore.config import Config

KEYS = 160
THREADS = 8


def body(key, version):
    """The bytes of `key` at `version`: 14 B to about 9 KiB, all packed (< 64 KiB)."""
    return (f"{key}/{version}/".encode()) * (1 + version % 700)


def client():
    return boto3.client(
        "s3",
        endpoint_url=os.environ["ENDPOINT"],
        aws_access_key_id=os.environ["ACCESS_KEY"],
        aws_secret_access_key=os.environ["SECRET_KEY"],
        region_name="us-east-1",
        config=Config(
            retries={"total_max_attempts": 1},
            connect_timeout=2,
            read_timeout=20,
        ),
    )


def write(start, seed):
    bucket = os.environ["BUCKET"]
    s3 = client()
    try:
        s3.create_bucket(Bucket=bucket)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    lock = threading.Lock()

    def say(line):
        with lock:
            print(line, flush=True)

    def run(thread):
        rng = random.Random(seed * 1000 + thread)
        s3 = client()
        version = start + thread
        owned = [j for j in range(KEYS) if j % THREADS == thread]
        while True:
            key = f"k{rng.choice(owned)}"
            if rng.random() < 0.25:
                say(f"BEGIN delete {key} 0")
                try:
                    s3.delete_object(Bucket=bucket, Key=key)
                except Exception as error:  # noqa: BLE001 (any failure ends the thread)
                    say(f"FAIL delete {key} {type(error).__name__}")
                    return
                say(f"ACK delete {key} 0")
            else:
                version += THREADS
                say(f"BEGIN put {key} {version}")
                try:
                    s3.put_object(Bucket=bucket, Key=key, Body=body(key, version))
                except Exception as error:  # noqa: BLE001
                    say(f"FAIL put {key} {type(error).__name__}")
                    return
                say(f"ACK put {key} {version}")

    threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def check():
    bucket = os.environ["BUCKET"]
    s3 = client()
    checked = 0
    for line in sys.stdin:
        fields = line.split()
        if not fields:
            continue
        key, allowed = fields[0], [int(v) for v in fields[1:]]
        try:
            got = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except s3.exceptions.NoSuchKey:
            got = None
        found = None
        for version in allowed:
            if (version == 0 and got is None) or (
                version != 0 and got is not None and got == body(key, version)
            ):
                found = version
                break
        if found is None:
            shown = "absent" if got is None else f"{len(got)} bytes {got[:40]!r}"
            print(f"BAD {key} allowed {allowed} got {shown}", flush=True)
        else:
            print(f"STATE {key} {found}", flush=True)
        checked += 1
    print(f"CHECKED {checked}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(int(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "check":
        check()
    else:
        sys.exit(f"unknown mode {sys.argv[1]}")
