#!/usr/bin/env python3
"""boto3 conformance checks for strata's S3 gateway.

Run by crates/strata/tests/s3_boto3.rs (and crates/gateway/tests) against a live server:
  S3_ENDPOINT=http://127.0.0.1:PORT MAIN_AK=.. MAIN_SK=.. ALT_AK=.. ALT_SK=.. python3 test_gateway.py
Every test creates and removes its own buckets; at the end no bucket remains, so the caller can
check that no data object was left behind.
"""
import datetime
import hashlib
import io
import os
import sys
import threading
import time
import traceback
import urllib.request
import urllib.error

import boto3
import botocore
import botocore.auth
from botocore.config import Config
from botocore.exceptions import ClientError

ENDPOINT = os.environ["S3_ENDPOINT"]
MAIN = (os.environ["MAIN_AK"], os.environ["MAIN_SK"])
ALT = (os.environ["ALT_AK"], os.environ["ALT_SK"])
CONFIG = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1})


def client(keys=MAIN, **config):
    cfg = CONFIG.merge(Config(**config)) if config else CONFIG
    return _watch(_watch_client(keys, cfg))


def _watch_client(keys, cfg):
    return boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1",
                        aws_access_key_id=keys[0], aws_secret_access_key=keys[1], config=cfg)


def anonymous():
    return _watch(_watch_anon())


def _watch_anon():
    return boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1",
                        config=CONFIG.merge(Config(signature_version=botocore.UNSIGNED)))


def _watch(c):
    def before(context, **kw):
        context["t0"] = time.monotonic()

    def after(context, model, **kw):
        if time.monotonic() - context.get("t0", time.monotonic()) > 5:
            print(f"SLOW {model.name}", flush=True)

    c.meta.events.register("before-call.s3", before)
    c.meta.events.register("after-call.s3", after)
    return c


s3 = client()
alt = client(ALT)
counter = [0]


def new_bucket(c=None, **kw):
    counter[0] += 1
    name = f"strata-test-{os.getpid()}-{counter[0]}"
    (c or s3).create_bucket(Bucket=name, **kw)
    return name


def nuke(name):
    for up in s3.list_multipart_uploads(Bucket=name).get("Uploads", []):
        s3.abort_multipart_upload(Bucket=name, Key=up["Key"], UploadId=up["UploadId"])
    while True:
        keys = [{"Key": o["Key"]} for o in s3.list_objects_v2(Bucket=name).get("Contents", [])]
        if not keys:
            break
        answer = s3.delete_objects(Bucket=name, Delete={"Objects": keys})
        if answer.get("Errors"):
            raise AssertionError(f"cannot empty {name}: {answer['Errors'][:3]}")
    s3.delete_bucket(Bucket=name)


def error_of(fn, *args, **kw):
    started = time.monotonic()
    try:
        fn(*args, **kw)
    except ClientError as e:
        if time.monotonic() - started > 5:
            print(f"SLOW {fn.__name__} {kw}", flush=True)
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    raise AssertionError("expected an error")


def check(cond, what=""):
    if not cond:
        raise AssertionError(what)


# ---- buckets -------------------------------------------------------------------------------

def test_buckets():
    b = new_bucket()
    s3.head_bucket(Bucket=b)
    names = [x["Name"] for x in s3.list_buckets()["Buckets"]]
    check(b in names, names)
    check(b not in [x["Name"] for x in alt.list_buckets()["Buckets"]], "alt sees main's bucket")
    loc = s3.get_bucket_location(Bucket=b)
    check(loc.get("LocationConstraint") in (None, ""), loc)
    check(error_of(alt.create_bucket, Bucket=b) == ("BucketAlreadyExists", 409))
    s3.put_object(Bucket=b, Key="k", Body=b"x")
    check(error_of(s3.delete_bucket, Bucket=b) == ("BucketNotEmpty", 409))
    s3.delete_object(Bucket=b, Key="k")
    s3.delete_bucket(Bucket=b)
    check(error_of(s3.head_bucket, Bucket=b)[1] == 404)
    check(error_of(s3.list_objects, Bucket=b) == ("NoSuchBucket", 404))
    check(error_of(s3.create_bucket, Bucket="Bad_Name")[1] == 400)


# ---- objects -------------------------------------------------------------------------------

def test_put_get_head_delete_ranges():
    b = new_bucket()
    body = os.urandom(100_000)
    r = s3.put_object(Bucket=b, Key="a/b c", Body=body, ContentType="text/plain",
                      CacheControl="max-age=60", ContentDisposition="attachment",
                      ContentEncoding="identity", Expires=datetime.datetime(2030, 1, 1),
                      Metadata={"color": "blue", "Size": "XL"})
    etag = '"%s"' % hashlib.md5(body).hexdigest()
    check(r["ETag"] == etag, r["ETag"])
    g = s3.get_object(Bucket=b, Key="a/b c")
    check(g["Body"].read() == body)
    check(g["ContentType"] == "text/plain" and g["CacheControl"] == "max-age=60")
    check(g["ContentDisposition"] == "attachment" and g["ContentEncoding"] == "identity")
    check(g["Metadata"] == {"color": "blue", "size": "XL"}, g["Metadata"])
    check(g["ETag"] == etag)
    h = s3.head_object(Bucket=b, Key="a/b c")
    check(h["ContentLength"] == len(body) and h["ETag"] == etag)
    check(h["Expires"].year == 2030 if "Expires" in h else True)
    r = s3.get_object(Bucket=b, Key="a/b c", Range="bytes=10-19")
    check(r["Body"].read() == body[10:20] and r["ContentRange"] == f"bytes 10-19/{len(body)}")
    check(r["ResponseMetadata"]["HTTPStatusCode"] == 206)
    check(s3.get_object(Bucket=b, Key="a/b c", Range="bytes=-5")["Body"].read() == body[-5:])
    check(s3.get_object(Bucket=b, Key="a/b c", Range="bytes=99990-")["Body"].read() == body[99990:])
    check(error_of(s3.get_object, Bucket=b, Key="a/b c", Range="bytes=200000-")[1] == 416)
    check(error_of(s3.get_object, Bucket=b, Key="nope") == ("NoSuchKey", 404))
    s3.put_object(Bucket=b, Key="empty", Body=b"")
    check(s3.get_object(Bucket=b, Key="empty")["Body"].read() == b"")
    s3.delete_object(Bucket=b, Key="a/b c")
    s3.delete_object(Bucket=b, Key="a/b c")  # idempotent
    check(error_of(s3.head_object, Bucket=b, Key="a/b c")[1] == 404)
    nuke(b)


def test_large_object_striped_and_overwritten():
    b = new_bucket()
    body = os.urandom(9 * 1024 * 1024 + 123)
    s3.put_object(Bucket=b, Key="big", Body=body)
    check(s3.get_object(Bucket=b, Key="big")["Body"].read() == body)
    part = s3.get_object(Bucket=b, Key="big", Range="bytes=4194300-8388700")["Body"].read()
    check(part == body[4194300:8388701])
    s3.put_object(Bucket=b, Key="big", Body=b"small now")
    check(s3.get_object(Bucket=b, Key="big")["Body"].read() == b"small now")
    nuke(b)


def test_copy():
    b1, b2 = new_bucket(), new_bucket()
    s3.put_object(Bucket=b1, Key="src", Body=b"hello", ContentType="text/x", Metadata={"a": "1"})
    s3.copy_object(Bucket=b2, Key="dst", CopySource={"Bucket": b1, "Key": "src"})
    g = s3.get_object(Bucket=b2, Key="dst")
    check(g["Body"].read() == b"hello" and g["Metadata"] == {"a": "1"} and g["ContentType"] == "text/x")
    s3.copy_object(Bucket=b1, Key="src", CopySource={"Bucket": b1, "Key": "src"},
                   MetadataDirective="REPLACE", Metadata={"b": "2"}, ContentType="text/y")
    h = s3.head_object(Bucket=b1, Key="src")
    check(h["Metadata"] == {"b": "2"} and h["ContentType"] == "text/y", h)
    check(error_of(s3.copy_object, Bucket=b1, Key="src", CopySource={"Bucket": b1, "Key": "src"})[1] == 400)
    check(error_of(s3.copy_object, Bucket=b2, Key="x", CopySource={"Bucket": b1, "Key": "missing"})[1] == 404)
    etag = h["ETag"].strip('"')
    check(error_of(s3.copy_object, Bucket=b2, Key="x", CopySource={"Bucket": b1, "Key": "src"},
                   CopySourceIfMatch="deadbeef")[1] == 412)
    s3.copy_object(Bucket=b2, Key="x", CopySource={"Bucket": b1, "Key": "src"}, CopySourceIfMatch=etag)
    # alt may not read main's private object
    check(error_of(alt.copy_object, Bucket=b2, Key="y", CopySource={"Bucket": b1, "Key": "src"})[1] == 403)
    nuke(b1)
    nuke(b2)


def test_delete_objects():
    b = new_bucket()
    for i in range(5):
        s3.put_object(Bucket=b, Key=f"k{i}", Body=b"x")
    r = s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": f"k{i}"} for i in range(3)] + [{"Key": "nope"}]})
    check(sorted(d["Key"] for d in r["Deleted"]) == ["k0", "k1", "k2", "nope"], r)
    check([o["Key"] for o in s3.list_objects(Bucket=b)["Contents"]] == ["k3", "k4"])
    r = s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "k3"}], "Quiet": True})
    check(not r.get("Deleted"), r)
    nuke(b)


# ---- listings ------------------------------------------------------------------------------

KEYS = ["a", "a/1", "a/2", "a/b/3", "b", "b/1", "c d", "c+e", "z"]


def test_list_v1():
    b = new_bucket()
    for k in KEYS:
        s3.put_object(Bucket=b, Key=k, Body=b"x")
    r = s3.list_objects(Bucket=b)
    check([o["Key"] for o in r["Contents"]] == sorted(KEYS) and not r["IsTruncated"])
    r = s3.list_objects(Bucket=b, Delimiter="/")
    check([o["Key"] for o in r["Contents"]] == ["a", "b", "c d", "c+e", "z"], r)
    check([p["Prefix"] for p in r["CommonPrefixes"]] == ["a/", "b/"])
    r = s3.list_objects(Bucket=b, Prefix="a/", Delimiter="/")
    check([o["Key"] for o in r["Contents"]] == ["a/1", "a/2"] and [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/b/"])
    r = s3.list_objects(Bucket=b, MaxKeys=2)
    check([o["Key"] for o in r["Contents"]] == ["a", "a/1"] and r["IsTruncated"])
    r = s3.list_objects(Bucket=b, Marker="a/2")
    check([o["Key"] for o in r["Contents"]][0] == "a/b/3")
    r = s3.list_objects(Bucket=b, Delimiter="/", MaxKeys=2)
    check(r["IsTruncated"] and r["NextMarker"] == "a/", r)
    r = s3.list_objects(Bucket=b, Delimiter="/", Marker="a/")
    check([o["Key"] for o in r["Contents"]][0] == "b", r)
    r = s3.list_objects(Bucket=b, MaxKeys=0)
    check(not r.get("Contents") and not r["IsTruncated"])
    r = s3.list_objects(Bucket=b, EncodingType="url", Prefix="c")
    # an explicit EncodingType is not decoded by botocore
    check([o["Key"] for o in r["Contents"]] == ["c%20d", "c%2Be"], r["Contents"])
    # Delimiter and Marker come back encoded like the keys; a v1 Prefix as sent (botocore
    # never decodes it, and ceph/s3-tests' test_bucket_list_prefix_unreadable expects it raw).
    r = s3.list_objects(Bucket=b, EncodingType="url", Prefix="c ", Delimiter="+", Marker="c d")
    check((r.get("Prefix"), r.get("Delimiter"), r.get("Marker")) == ("c ", "%2B", "c%20d"), r)
    nuke(b)


def test_list_v2_pagination():
    b = new_bucket()
    keys = sorted(f"p/{i:03}" for i in range(45)) + ["q"]
    for k in keys:
        s3.put_object(Bucket=b, Key=k, Body=b"")
    seen, token = [], None
    while True:
        kw = {"Bucket": b, "MaxKeys": 10}
        if token:
            kw["ContinuationToken"] = token
        r = s3.list_objects_v2(**kw)
        seen += [o["Key"] for o in r.get("Contents", [])]
        check(r["KeyCount"] == len(r.get("Contents", [])))
        if not r["IsTruncated"]:
            break
        token = r["NextContinuationToken"]
    check(seen == keys, seen)
    r = s3.list_objects_v2(Bucket=b, StartAfter="p/040")
    check([o["Key"] for o in r["Contents"]] == keys[41:])
    r = s3.list_objects_v2(Bucket=b, Delimiter="/", MaxKeys=1)
    check([p["Prefix"] for p in r["CommonPrefixes"]] == ["p/"] and r["IsTruncated"])
    r = s3.list_objects_v2(Bucket=b, Delimiter="/", ContinuationToken=r["NextContinuationToken"])
    check([o["Key"] for o in r["Contents"]] == ["q"] and not r.get("CommonPrefixes"), r)
    r = s3.list_objects_v2(Bucket=b, FetchOwner=True, MaxKeys=1)
    check("Owner" in r["Contents"][0])
    paginator = s3.get_paginator("list_objects_v2")
    check(sum(len(p.get("Contents", [])) for p in paginator.paginate(Bucket=b, PaginationConfig={"PageSize": 7})) == 46)
    nuke(b)


def test_list_versions_unversioned():
    b = new_bucket()
    for k in ["x", "y/1"]:
        s3.put_object(Bucket=b, Key=k, Body=b"v")
    r = s3.list_object_versions(Bucket=b)
    check([(v["Key"], v["VersionId"], v["IsLatest"]) for v in r["Versions"]] == [("x", "null", True), ("y/1", "null", True)], r)
    r = s3.list_object_versions(Bucket=b, Delimiter="/")
    check([p["Prefix"] for p in r["CommonPrefixes"]] == ["y/"])
    nuke(b)


# ---- multipart -----------------------------------------------------------------------------

MB = 1024 * 1024


def test_multipart():
    b = new_bucket()
    up = s3.create_multipart_upload(Bucket=b, Key="mp", ContentType="video/x", Metadata={"m": "1"})
    uid = up["UploadId"]
    parts = [os.urandom(5 * MB), os.urandom(5 * MB + 7), os.urandom(1000)]
    etags = []
    for i, data in enumerate(parts, 1):
        etags.append(s3.upload_part(Bucket=b, Key="mp", UploadId=uid, PartNumber=i, Body=data)["ETag"])
    # re-upload part 3 (replaces it)
    stale_etag_3 = etags[2]
    parts[2] = os.urandom(2000)
    etags[2] = s3.upload_part(Bucket=b, Key="mp", UploadId=uid, PartNumber=3, Body=parts[2])["ETag"]
    lp = s3.list_parts(Bucket=b, Key="mp", UploadId=uid)
    check([p["PartNumber"] for p in lp["Parts"]] == [1, 2, 3] and lp["Parts"][2]["Size"] == 2000)
    lp = s3.list_parts(Bucket=b, Key="mp", UploadId=uid, MaxParts=1)
    check(lp["IsTruncated"] and lp["NextPartNumberMarker"] == 1)
    ups = s3.list_multipart_uploads(Bucket=b)["Uploads"]
    check([(u["Key"], u["UploadId"]) for u in ups] == [("mp", uid)])
    check(error_of(s3.complete_multipart_upload, Bucket=b, Key="mp", UploadId=uid,
                   MultipartUpload={"Parts": [{"PartNumber": 2, "ETag": etags[1]}, {"PartNumber": 1, "ETag": etags[0]}]})[0] == "InvalidPartOrder")
    check(error_of(s3.complete_multipart_upload, Bucket=b, Key="mp", UploadId=uid,
                   MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"00"'}]})[0] == "InvalidPart")
    # a resent part listed with both answers, the stale one first, means its last upload
    listed = [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]
    listed.insert(2, {"PartNumber": 3, "ETag": stale_etag_3})
    r = s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=uid, MultipartUpload={"Parts": listed})
    md5s = b"".join(hashlib.md5(p).digest() for p in parts)
    want = '"%s-3"' % hashlib.md5(md5s).hexdigest()
    check(r["ETag"] == want, (r["ETag"], want))
    g = s3.get_object(Bucket=b, Key="mp")
    check(g["Body"].read() == b"".join(parts) and g["ContentType"] == "video/x" and g["Metadata"] == {"m": "1"})
    check(g["ETag"] == want)
    rng = s3.get_object(Bucket=b, Key="mp", Range=f"bytes={5 * MB - 3}-{5 * MB + 3}")["Body"].read()
    check(rng == b"".join(parts)[5 * MB - 3:5 * MB + 4])
    # One part by number (as SDK downloaders fetch them).
    second = s3.get_object(Bucket=b, Key="mp", PartNumber=2)
    check(second["Body"].read() == parts[1] and second["PartsCount"] == 3, "part 2")
    check(second["ContentRange"] == f"bytes {5 * MB}-{10 * MB + 6}/{sum(map(len, parts))}", second["ContentRange"])
    check(s3.head_object(Bucket=b, Key="mp", PartNumber=3)["ContentLength"] == 2000, "head part 3")
    check(error_of(s3.get_object, Bucket=b, Key="mp", PartNumber=4)[1] == 416, "no part 4")
    s3.put_object(Bucket=b, Key="plain", Body=b"whole")
    check(s3.get_object(Bucket=b, Key="plain", PartNumber=1)["Body"].read() == b"whole", "its own part 1")
    check(error_of(s3.get_object, Bucket=b, Key="plain", PartNumber=2)[1] == 416)
    check(not s3.list_multipart_uploads(Bucket=b).get("Uploads"))
    check(error_of(s3.list_parts, Bucket=b, Key="mp", UploadId=uid) == ("NoSuchUpload", 404))
    # too small parts
    up = s3.create_multipart_upload(Bucket=b, Key="small")["UploadId"]
    e1 = s3.upload_part(Bucket=b, Key="small", UploadId=up, PartNumber=1, Body=b"a")["ETag"]
    e2 = s3.upload_part(Bucket=b, Key="small", UploadId=up, PartNumber=2, Body=b"b")["ETag"]
    check(error_of(s3.complete_multipart_upload, Bucket=b, Key="small", UploadId=up,
                   MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})[0] == "EntityTooSmall")
    s3.abort_multipart_upload(Bucket=b, Key="small", UploadId=up)
    check(error_of(s3.abort_multipart_upload, Bucket=b, Key="small", UploadId=up)[1] == 404)
    nuke(b)


def test_list_multipart_uploads_pages_with_a_delimiter():
    b = new_bucket()
    for key in ["a/1", "a/2", "b", "c/1", "c/2", "d", "e/1"]:
        s3.create_multipart_upload(Bucket=b, Key=key)
    for page_size in (1, 2, 3, 1000):
        seen, marker, upload_marker = [], None, None
        for _ in range(20):
            kw = {"Bucket": b, "Delimiter": "/", "MaxUploads": page_size}
            if marker is not None:
                kw["KeyMarker"] = marker
            if upload_marker:
                kw["UploadIdMarker"] = upload_marker
            page = s3.list_multipart_uploads(**kw)
            seen += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
            seen += [u["Key"] for u in page.get("Uploads", [])]
            if not page["IsTruncated"]:
                break
            marker, upload_marker = page["NextKeyMarker"], page.get("NextUploadIdMarker")
        check(sorted(seen) == ["a/", "b", "c/", "d", "e/"], (page_size, seen))
    nuke(b)


def test_upload_part_copy():
    b = new_bucket()
    src = os.urandom(6 * MB)
    s3.put_object(Bucket=b, Key="src", Body=src)
    uid = s3.create_multipart_upload(Bucket=b, Key="dst")["UploadId"]
    e1 = s3.upload_part_copy(Bucket=b, Key="dst", UploadId=uid, PartNumber=1,
                             CopySource={"Bucket": b, "Key": "src"})["CopyPartResult"]["ETag"]
    e2 = s3.upload_part_copy(Bucket=b, Key="dst", UploadId=uid, PartNumber=2,
                             CopySource={"Bucket": b, "Key": "src"}, CopySourceRange="bytes=10-109")["CopyPartResult"]["ETag"]
    s3.complete_multipart_upload(Bucket=b, Key="dst", UploadId=uid,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    check(s3.get_object(Bucket=b, Key="dst")["Body"].read() == src + src[10:110])
    nuke(b)


def test_transfer_manager():
    b = new_bucket()
    data = os.urandom(12 * MB + 5)
    from boto3.s3.transfer import TransferConfig
    tc = TransferConfig(multipart_threshold=8 * MB, multipart_chunksize=8 * MB, max_concurrency=4)
    s3.upload_fileobj(io.BytesIO(data), b, "tm", Config=tc)
    out = io.BytesIO()
    s3.download_fileobj(b, "tm", out, Config=tc)
    check(out.getvalue() == data)
    nuke(b)


# ---- conditional requests --------------------------------------------------------------------

def test_conditionals():
    b = new_bucket()
    etag = s3.put_object(Bucket=b, Key="c", Body=b"data")["ETag"]
    s3.get_object(Bucket=b, Key="c", IfMatch=etag)
    check(error_of(s3.get_object, Bucket=b, Key="c", IfMatch='"nope"') == ("PreconditionFailed", 412))
    check(error_of(s3.get_object, Bucket=b, Key="c", IfNoneMatch=etag)[1] == 304)
    s3.get_object(Bucket=b, Key="c", IfNoneMatch='"other"')
    past = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
    future = datetime.datetime(2100, 1, 1, tzinfo=datetime.timezone.utc)
    s3.get_object(Bucket=b, Key="c", IfModifiedSince=past)
    check(error_of(s3.get_object, Bucket=b, Key="c", IfModifiedSince=future)[1] == 304)
    s3.get_object(Bucket=b, Key="c", IfUnmodifiedSince=future)
    check(error_of(s3.get_object, Bucket=b, Key="c", IfUnmodifiedSince=past)[1] == 412)
    check(error_of(s3.head_object, Bucket=b, Key="c", IfMatch='"nope"')[1] == 412)
    # Conditional writes: checked when the object is committed, and nothing written if not.
    check(error_of(s3.put_object, Bucket=b, Key="c", Body=b"x", IfNoneMatch="*") == ("PreconditionFailed", 412))
    check(error_of(s3.put_object, Bucket=b, Key="c", Body=b"x", IfMatch='"nope"')[1] == 412)
    check(s3.get_object(Bucket=b, Key="c")["Body"].read() == b"data", "unchanged")
    etag = s3.put_object(Bucket=b, Key="c", Body=b"data2", IfMatch=etag)["ETag"]
    check(error_of(s3.put_object, Bucket=b, Key="missing", Body=b"x", IfMatch=etag)[1] == 404)
    s3.put_object(Bucket=b, Key="new", Body=b"n", IfNoneMatch="*")
    upload = s3.create_multipart_upload(Bucket=b, Key="c")["UploadId"]
    part = s3.upload_part(Bucket=b, Key="c", UploadId=upload, PartNumber=1, Body=b"p")["ETag"]
    parts = {"Parts": [{"PartNumber": 1, "ETag": part}]}
    check(error_of(s3.complete_multipart_upload, Bucket=b, Key="c", UploadId=upload,
                   MultipartUpload=parts, IfNoneMatch="*")[1] == 412)
    s3.complete_multipart_upload(Bucket=b, Key="c", UploadId=upload, MultipartUpload=parts, IfMatch=etag)
    check(s3.get_object(Bucket=b, Key="c")["Body"].read() == b"p", "completed after a refusal")
    nuke(b)


# ---- ACLs and users ------------------------------------------------------------------------

def test_acls():
    b = new_bucket()
    s3.put_object(Bucket=b, Key="private", Body=b"p")
    s3.put_object(Bucket=b, Key="public", Body=b"q", ACL="public-read")
    anon = anonymous()
    check(anon.get_object(Bucket=b, Key="public")["Body"].read() == b"q")
    check(error_of(anon.get_object, Bucket=b, Key="private")[1] == 403)
    check(error_of(alt.get_object, Bucket=b, Key="private")[1] == 403)
    check(error_of(anon.list_objects, Bucket=b)[1] == 403)
    check(error_of(alt.put_object, Bucket=b, Key="x", Body=b"")[1] == 403)
    check(error_of(anon.put_object, Bucket=b, Key="x", Body=b"")[1] == 403)
    s3.put_bucket_acl(Bucket=b, ACL="public-read")
    check([o["Key"] for o in anon.list_objects(Bucket=b)["Contents"]] == ["private", "public"])
    grants = s3.get_bucket_acl(Bucket=b)["Grants"]
    check(any(g["Grantee"].get("URI", "").endswith("AllUsers") and g["Permission"] == "READ" for g in grants), grants)
    s3.put_bucket_acl(Bucket=b, ACL="public-read-write")
    # The connection whose PUT was refused above is reused: it must not stall (a refused PUT once
    # left keep-alive connections hanging for botocore's 60 s read timeout).
    started = time.monotonic()
    alt.put_object(Bucket=b, Key="by-alt", Body=b"a")
    check(time.monotonic() - started < 5, "PUT after a refused PUT stalled")
    check(error_of(s3.get_object, Bucket=b, Key="by-alt")[1] == 403)  # owner-only object of alt
    alt.put_object_acl(Bucket=b, Key="by-alt", ACL="bucket-owner-read")
    check(s3.get_object(Bucket=b, Key="by-alt")["Body"].read() == b"a")
    s3.put_object_acl(Bucket=b, Key="private", ACL="authenticated-read")
    check(alt.get_object(Bucket=b, Key="private")["Body"].read() == b"p")
    check(error_of(anon.get_object, Bucket=b, Key="private")[1] == 403)
    check(s3.get_object_acl(Bucket=b, Key="private")["Owner"]["ID"])
    check(error_of(alt.delete_bucket, Bucket=b)[1] == 403)
    s3.put_bucket_acl(Bucket=b, ACL="private")
    check(error_of(alt.list_objects, Bucket=b)[1] == 403)
    nuke(b)


def test_chunked_put_without_length():
    import http.client
    import urllib.parse
    b = new_bucket()
    s3.put_bucket_acl(Bucket=b, ACL="public-read-write")
    endpoint = urllib.parse.urlparse(ENDPOINT)
    connection = http.client.HTTPConnection(endpoint.hostname, endpoint.port, timeout=10)
    # An iterable body without Content-Length goes out with Transfer-Encoding: chunked.
    connection.request("PUT", f"/{b}/chunked", body=iter([b"abc", b"defg"]), encode_chunked=True)
    response = connection.getresponse()
    response.read()
    connection.close()
    check(response.status == 200, response.status)
    listed = s3.list_objects_v2(Bucket=b)["Contents"]
    check([(o["Key"], o["Size"]) for o in listed] == [("chunked", 7)], listed)
    nuke(b)


def _post_form(bucket, fields, filename, data):
    """POSTs a browser upload form (fields in order, then the file); returns (status, headers)."""
    import http.client
    import urllib.parse
    boundary = "strataformboundary"
    body = b""
    for name, value in fields:
        body += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
    body += f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n\r\n'.encode()
    body += data + f"\r\n--{boundary}--\r\n".encode()
    endpoint = urllib.parse.urlparse(ENDPOINT)
    connection = http.client.HTTPConnection(endpoint.hostname, endpoint.port, timeout=10)
    connection.request("POST", f"/{bucket}", body=body,
                       headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    response = connection.getresponse()
    response.read()
    connection.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}


def test_post_object_form():
    import base64
    import hmac
    import json
    b = new_bucket()
    s3.put_bucket_acl(Bucket=b, ACL="public-read-write")
    # Unsigned: ${filename} names the key and the plain `acl` field applies.
    status, _ = _post_form(b, [("key", "up/${filename}"), ("acl", "public-read")], "a.txt", b"data")
    check(status == 204, status)
    check(anonymous().get_object(Bucket=b, Key="up/a.txt")["Body"].read() == b"data")
    expires = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    redirect = f"{ENDPOINT}/{b}"
    policy = base64.b64encode(json.dumps({"expiration": expires, "conditions": [
        {"bucket": b}, ["starts-with", "$key", "foo"], ["eq", "$success_action_redirect", redirect],
        ["content-length-range", 0, 1024]]}).encode()).decode()
    signature = base64.b64encode(hmac.new(MAIN[1].encode(), policy.encode(), hashlib.sha1).digest()).decode()
    signed = [("AWSAccessKeyId", MAIN[0]), ("policy", policy), ("signature", signature),
              ("success_action_redirect", redirect)]
    # An expiration not in S3's ISO 8601 form is a bad policy document.
    loose = base64.b64encode(json.dumps({"expiration": "2099-01-01 00:00:00+00:00", "conditions": []}).encode()).decode()
    loose_signature = base64.b64encode(hmac.new(MAIN[1].encode(), loose.encode(), hashlib.sha1).digest()).decode()
    status, _ = _post_form(b, [("key", "foo.txt"), ("AWSAccessKeyId", MAIN[0]), ("policy", loose),
                               ("signature", loose_signature)], "x", b"x")
    check(status == 400, status)
    # A broken policy condition is AccessDenied, as S3 answers it.
    status, _ = _post_form(b, [("key", "bar.txt")] + signed, "x", b"x")
    check(status == 403, status)
    status, headers = _post_form(b, [("key", "foo.txt")] + signed, "x", b"x")
    etag = s3.head_object(Bucket=b, Key="foo.txt")["ETag"].strip('"')
    check(status == 303 and headers.get("location", "").endswith(f"&etag=%22{etag}%22"), (status, headers))
    nuke(b)


def test_checksum_sha256_and_attributes():
    import base64
    b = new_bucket()
    data = b"A" * 1024
    sha256 = base64.b64encode(hashlib.sha256(data).digest()).decode()
    put = s3.put_object(Bucket=b, Key="k", Body=data, ChecksumAlgorithm="SHA256", ChecksumSHA256=sha256)
    check(put.get("ChecksumSHA256") == sha256, put)
    wrong = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
    check(error_of(s3.put_object, Bucket=b, Key="bad", Body=data, ChecksumSHA256=wrong)[0] == "BadDigest")
    attributes = s3.get_object_attributes(Bucket=b, Key="k", ObjectAttributes=["ETag", "Checksum", "ObjectSize", "StorageClass", "ObjectParts"])
    check(attributes["ObjectSize"] == 1024 and attributes["StorageClass"] == "STANDARD", attributes)
    check(attributes["ETag"] == put["ETag"].strip('"'), attributes)  # unquoted here, as S3
    check(attributes["Checksum"]["ChecksumSHA256"] == sha256 and "ObjectParts" not in attributes, attributes)
    check(error_of(s3.head_object, Bucket=b, Key="bad")[1] == 404)
    nuke(b)


def test_bucket_policy():
    import json
    b = new_bucket()
    s3.put_object(Bucket=b, Key="pub/a", Body=b"a")
    s3.put_object(Bucket=b, Key="secret", Body=b"s")
    check(error_of(s3.get_bucket_policy, Bucket=b)[1] == 404)
    check(s3.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"] is False)
    policy = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{b}/pub/*"},
        {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam:::user/alt"}, "Action": "s3:ListBucket",
         "Resource": f"arn:aws:s3:::{b}", "Condition": {"StringLike": {"s3:prefix": "pub/*"}}},
        {"Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "s3:GetBucketPublicAccessBlock",
         "Resource": f"arn:aws:s3:::{b}"}]})
    s3.put_bucket_policy(Bucket=b, Policy=policy)
    check(s3.get_bucket_policy(Bucket=b)["Policy"] == policy)
    check(s3.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"] is True)
    check(anonymous().get_object(Bucket=b, Key="pub/a")["Body"].read() == b"a")
    check(error_of(anonymous().get_object, Bucket=b, Key="secret")[1] == 403)
    check(error_of(alt.head_object, Bucket=b, Key="pub/missing")[1] == 404)
    check(error_of(alt.head_object, Bucket=b, Key="other/missing")[1] == 403)
    check(error_of(s3.get_public_access_block, Bucket=b)[1] == 403)  # denied even to the owner
    check(error_of(alt.put_bucket_policy, Bucket=b, Policy=policy)[1] == 403)
    bad = json.dumps({"Statement": [{"Effect": "Allow", "NotPrincipal": {"AWS": "x"}, "Action": "s3:*", "Resource": "*"}]})
    check(error_of(s3.put_bucket_policy, Bucket=b, Policy=bad)[0] == "MalformedPolicy")
    s3.delete_bucket_policy(Bucket=b)
    check(error_of(anonymous().get_object, Bucket=b, Key="pub/a")[1] == 403)
    s3.put_public_access_block(Bucket=b, PublicAccessBlockConfiguration={"BlockPublicPolicy": True})
    check(error_of(s3.put_bucket_policy, Bucket=b, Policy=policy)[1] == 403)
    nuke(b)


def test_policy_actions_objects_and_conditions():
    """A bucket policy is evaluated on each request's own action and object (a Deny of deletes
    or of a prefix holds against a writer; an Allow of PutObject does not allow deletes), on
    the client's address and on a listing's prefix; a condition the gateway cannot evaluate
    is refused when put."""
    import json
    b = new_bucket(GrantWrite='id="alt"', GrantFullControl='id="main"')
    s3.put_object(Bucket=b, Key="keep", Body=b"k")
    s3.put_object(Bucket=b, Key="protected/doc", Body=b"p")
    s3.put_bucket_policy(Bucket=b, Policy=json.dumps({"Statement": [
        {"Effect": "Deny", "Principal": "*", "Action": ["s3:DeleteObject", "s3:DeleteObjectVersion"],
         "Resource": f"arn:aws:s3:::{b}/*"},
        {"Effect": "Deny", "Principal": "*", "Action": "s3:*", "Resource": f"arn:aws:s3:::{b}/protected/*"}]}))
    check(error_of(alt.delete_object, Bucket=b, Key="keep")[1] == 403, "delete denied")
    answer = alt.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "protected/doc"}]})
    check([e["Code"] for e in answer.get("Errors", [])] == ["AccessDenied"], answer)
    check(error_of(alt.put_object, Bucket=b, Key="protected/new", Body=b"x")[1] == 403, "prefix denied")
    alt.put_object(Bucket=b, Key="elsewhere", Body=b"e")
    s3.delete_bucket_policy(Bucket=b)
    check(s3.get_object(Bucket=b, Key="protected/doc")["Body"].read() == b"p", "kept")
    check(s3.get_object(Bucket=b, Key="keep")["Body"].read() == b"k", "kept")
    nuke(b)
    # An Allow of PutObject lets the grantee write, not delete.
    c = new_bucket()
    s3.put_object(Bucket=c, Key="ledger", Body=b"l")
    s3.put_bucket_policy(Bucket=c, Policy=json.dumps({"Statement": [
        {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam:::user/alt"}, "Action": "s3:PutObject",
         "Resource": f"arn:aws:s3:::{c}/*"}]}))
    alt.put_object(Bucket=c, Key="drop", Body=b"d")
    check(error_of(alt.delete_object, Bucket=c, Key="ledger")[1] == 403, "put does not allow delete")
    # The client's address (these requests come from 127.0.0.1).
    s3.put_object(Bucket=c, Key="pub", Body=b"p", ACL="public-read")
    def deny_unless_from(network):
        s3.put_bucket_policy(Bucket=c, Policy=json.dumps({"Statement": [
            {"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{c}/*",
             "Condition": {"NotIpAddress": {"aws:SourceIp": network}}}]}))
    deny_unless_from("10.0.0.0/8")
    check(error_of(anonymous().get_object, Bucket=c, Key="pub")[1] == 403, "address deny")
    deny_unless_from("127.0.0.0/8")
    check(anonymous().get_object(Bucket=c, Key="pub")["Body"].read() == b"p", "address allowed")
    # The transport: this gateway serves plain HTTP, so a Deny on insecure transport holds.
    s3.put_bucket_policy(Bucket=c, Policy=json.dumps({"Statement": [
        {"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{c}/*",
         "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]}))
    check(error_of(anonymous().get_object, Bucket=c, Key="pub")[1] == 403, "transport deny")
    nuke(c)
    # A listing's prefix.
    d = new_bucket(GrantRead='id="alt"', GrantFullControl='id="main"')
    s3.put_object(Bucket=d, Key="private/salary", Body=b"s")
    s3.put_bucket_policy(Bucket=d, Policy=json.dumps({"Statement": [
        {"Effect": "Deny", "Principal": {"AWS": "arn:aws:iam:::user/alt"}, "Action": "s3:ListBucket",
         "Resource": f"arn:aws:s3:::{d}", "Condition": {"StringLike": {"s3:prefix": "private/*"}}}]}))
    check(error_of(alt.list_objects_v2, Bucket=d, Prefix="private/")[1] == 403, "prefix listing denied")
    check(alt.list_objects_v2(Bucket=d, Prefix="public/")["KeyCount"] == 0, "other prefix listed")
    unknown = json.dumps({"Statement": [
        {"Effect": "Deny", "Principal": "*", "Action": "s3:*", "Resource": "*",
         "Condition": {"DateLessThan": {"aws:CurrentTime": "2030-01-01T00:00:00Z"}}}]})
    check(error_of(s3.put_bucket_policy, Bucket=d, Policy=unknown)[0] == "MalformedPolicy", "unknown condition")
    nuke(d)
    # Bucket configuration: each operation is its own action, as radosgw decides (the owner, or
    # whom the policy allows it); an Allow of the ACL does not allow versioning, and a Deny of
    # versioning holds against the owner.
    e = new_bucket(GrantWriteACP='id="alt"', GrantFullControl='id="main"')
    s3.put_bucket_policy(Bucket=e, Policy=json.dumps({"Statement": [
        {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam:::user/alt"}, "Action": "s3:PutBucketAcl",
         "Resource": f"arn:aws:s3:::{e}"},
        {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam:::user/alt"}, "Action": "s3:GetBucketVersioning",
         "Resource": f"arn:aws:s3:::{e}"}]}))
    enable = {"Status": "Enabled"}
    check(error_of(alt.put_bucket_versioning, Bucket=e, VersioningConfiguration=enable)[1] == 403,
          "ACL rights do not allow versioning")
    check("Status" not in alt.get_bucket_versioning(Bucket=e), "allowed by the policy")
    s3.put_bucket_policy(Bucket=e, Policy=json.dumps({"Statement": [
        {"Effect": "Deny", "Principal": "*", "Action": "s3:PutBucketVersioning", "Resource": f"arn:aws:s3:::{e}"}]}))
    check(error_of(s3.put_bucket_versioning, Bucket=e, VersioningConfiguration=enable)[1] == 403,
          "versioning denied to the owner")
    check(error_of(alt.get_bucket_versioning, Bucket=e)[1] == 403, "no longer allowed")
    s3.delete_bucket_policy(Bucket=e)
    s3.put_bucket_versioning(Bucket=e, VersioningConfiguration=enable)
    nuke(e)


# ---- auth ----------------------------------------------------------------------------------

def test_auth_failures():
    b = new_bucket()
    s3.put_object(Bucket=b, Key="k", Body=b"v")
    bad_secret = client((MAIN[0], "x" * 40))
    check(error_of(bad_secret.get_object, Bucket=b, Key="k") == ("SignatureDoesNotMatch", 403))
    unknown = client(("AKIAUNKNOWNUNKNOWN00", "x" * 40))
    check(error_of(unknown.get_object, Bucket=b, Key="k") == ("InvalidAccessKeyId", 403))
    real = botocore.auth.get_current_datetime
    botocore.auth.get_current_datetime = lambda: real() - datetime.timedelta(hours=1)
    try:
        skewed = client()
        code = error_of(skewed.get_object, Bucket=b, Key="k")
    finally:
        botocore.auth.get_current_datetime = real
    check(code == ("RequestTimeTooSkewed", 403), code)
    # presigned URL works; tampered one does not
    url = s3.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "k"}, ExpiresIn=60)
    check(urllib.request.urlopen(url).read() == b"v")
    try:
        urllib.request.urlopen(url.replace("Signature=", "Signature=0"))
        raise AssertionError("tampered presigned URL accepted")
    except urllib.error.HTTPError as e:
        check(e.code == 403, e.code)
    # malformed request: a garbage Authorization header is a 4xx, not a 500
    req = urllib.request.Request(f"{ENDPOINT}/{b}/k", headers={"Authorization": "AWS4-HMAC-SHA256 garbage"})
    try:
        urllib.request.urlopen(req)
        raise AssertionError("garbage auth accepted")
    except urllib.error.HTTPError as e:
        check(400 <= e.code < 500, e.code)
    nuke(b)


def test_streaming_upload():
    """Flexible checksums: botocore may send the body aws-chunked with a CRC32 trailer."""
    b = new_bucket()
    c = client(request_checksum_calculation="when_supported")

    data = os.urandom(300_000)
    c.put_object(Bucket=b, Key="chunked2", Body=data, ChecksumAlgorithm="CRC32")
    check(s3.get_object(Bucket=b, Key="chunked2")["Body"].read() == data)
    nuke(b)


def test_presigned_get_and_put():
    b = new_bucket()
    # SigV4 query signing (boto3's default for presigning here is SigV2, tested below).
    v4, alt_v4 = client(signature_version="s3v4"), client(ALT, signature_version="s3v4")
    put_url = v4.generate_presigned_url("put_object", Params={"Bucket": b, "Key": "up"}, ExpiresIn=60)
    request = urllib.request.Request(put_url, data=b"presigned body", method="PUT",
                                     headers={"Content-Type": "application/octet-stream"})
    check(urllib.request.urlopen(request).status == 200)
    get_url = v4.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "up"}, ExpiresIn=60)
    check(urllib.request.urlopen(get_url).read() == b"presigned body")
    # SigV2 query signing covers Content-Type: sign none, send none (urllib adds one unless told).
    v2_url = s3.generate_presigned_url("put_object", Params={"Bucket": b, "Key": "v2"}, ExpiresIn=60)
    request = urllib.request.Request(v2_url, data=b"v2 body", method="PUT", headers={"Content-Type": ""})
    check(urllib.request.urlopen(request).status == 200)
    check(s3.get_object(Bucket=b, Key="v2")["Body"].read() == b"v2 body")
    # a URL signed by alt for main's private bucket, an expired one, one valid for over a week
    refused = [
        (alt_v4.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "up"}, ExpiresIn=60), "GET"),
        (v4.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "up"}, ExpiresIn=-10), "GET"),
        (v4.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "up"}, ExpiresIn=700_000), "GET"),
        (alt_v4.generate_presigned_url("put_object", Params={"Bucket": b, "Key": "up"}, ExpiresIn=60), "PUT"),
    ]
    for url, method in refused:
        data = b"x" if method == "PUT" else None
        try:
            urllib.request.urlopen(urllib.request.Request(url, data=data, method=method))
            raise AssertionError(f"{method} {url} accepted")
        except urllib.error.HTTPError as e:
            check(e.code == 403, (e.code, url))
    check(s3.get_object(Bucket=b, Key="up")["Body"].read() == b"presigned body")
    nuke(b)


def _signed_streaming_put(url_path, chunks, keys=MAIN, tamper=False):
    """PUT with STREAMING-AWS4-HMAC-SHA256-PAYLOAD: every chunk signed, chained to the seed
    signature of the headers (what the aws CLI and the Java/Go SDKs send over plain HTTP).
    `tamper` changes one byte of the first chunk after it was signed."""
    import hmac
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    scope = f"{day}/us-east-1/s3/aws4_request"
    decoded_length = sum(len(c) for c in chunks)

    def frame(data, signature):
        return f"{len(data):x};chunk-signature={signature}\r\n".encode() + data + b"\r\n"

    # encoded length: every frame has a 64-hex signature, whatever it is
    encoded_length = sum(len(frame(c, "0" * 64)) for c in list(chunks) + [b""])
    headers = {
        "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
        "x-amz-decoded-content-length": str(decoded_length),
        "content-encoding": "aws-chunked",
        "content-length": str(encoded_length),
        "x-amz-date": amz_date,
    }
    request = AWSRequest(method="PUT", url=ENDPOINT + url_path, headers=headers)
    auth = botocore.auth.SigV4Auth(Credentials(*keys), "s3", "us-east-1")
    auth._get_current_datetime = lambda: now.replace(tzinfo=None)
    request.context["timestamp"] = amz_date
    auth.add_auth(request)
    seed = request.headers["Authorization"].split("Signature=")[1]

    def sign(key, msg):
        return hmac.new(key, msg.encode(), hashlib.sha256).digest()

    key = sign(sign(sign(sign(("AWS4" + keys[1]).encode(), day), "us-east-1"), "s3"), "aws4_request")
    empty = hashlib.sha256(b"").hexdigest()
    body, previous = b"", seed
    for chunk in list(chunks) + [b""]:
        to_sign = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, previous, empty,
                             hashlib.sha256(chunk).hexdigest()])
        previous = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        body += frame(chunk, previous)
    assert len(body) == encoded_length
    if tamper:
        at = body.index(b"\r\n") + 2
        body = body[:at] + bytes([body[at] ^ 1]) + body[at + 1:]
    final = urllib.request.Request(ENDPOINT + url_path, data=body, method="PUT",
                                   headers=dict(request.headers.items()))
    return urllib.request.urlopen(final)


def test_signed_streaming_upload():
    b = new_bucket()
    chunks = [os.urandom(64 * 1024), os.urandom(64 * 1024), os.urandom(1000)]
    check(_signed_streaming_put(f"/{b}/streamed", chunks).status == 200)
    got = s3.get_object(Bucket=b, Key="streamed")
    check(got["Body"].read() == b"".join(chunks), "streamed body differs")
    check("aws-chunked" not in got.get("ContentEncoding", ""), got.get("ContentEncoding"))
    # a chunk signed with the wrong key is refused
    try:
        _signed_streaming_put(f"/{b}/forged", chunks, keys=(MAIN[0], "wrong-secret"))
        raise AssertionError("forged streaming upload accepted")
    except urllib.error.HTTPError as e:
        check(e.code == 403, e.code)
    nuke(b)


def _signed_put(url_path, signed_body, sent_body):
    """A PUT signed (SigV4, x-amz-content-sha256 of `signed_body`) for one body and sent with
    another of the same length, as a man in the middle would; returns (status, S3 code)."""
    import http.client
    import re
    from urllib.parse import urlparse
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    headers = {"x-amz-content-sha256": hashlib.sha256(signed_body).hexdigest(),
               "content-length": str(len(signed_body))}
    request = AWSRequest(method="PUT", url=ENDPOINT + url_path, data=signed_body, headers=headers)
    botocore.auth.SigV4Auth(Credentials(*MAIN), "s3", "us-east-1").add_auth(request)
    endpoint = urlparse(ENDPOINT)
    connection = http.client.HTTPConnection(endpoint.hostname, endpoint.port, timeout=60)
    connection.request("PUT", url_path, body=sent_body, headers=dict(request.headers.items()))
    response = connection.getresponse()
    code = re.search(rb"<Code>([^<]*)</Code>", response.read())
    connection.close()
    return response.status, code.group(1).decode() if code else None


def test_tampered_bodies_are_refused():
    """A body changed after signing is refused with S3's codes, and nothing of it is kept: a
    single-chunk body whose SHA-256 differs from the signed one (small, and large enough that
    pieces were written before the end of the body showed the mismatch), and an aws-chunked
    body with a changed chunk."""
    b = new_bucket()
    check(_signed_put(f"/{b}/honest", b"hello world", b"hello world") == (200, None))
    check(s3.get_object(Bucket=b, Key="honest")["Body"].read() == b"hello world")
    got = _signed_put(f"/{b}/small", b"hello world", b"hellp world")
    check(got == (400, "XAmzContentSHA256Mismatch"), got)
    large = os.urandom(9 * 1024 * 1024)
    changed = large[:-1] + bytes([large[-1] ^ 1])
    got = _signed_put(f"/{b}/large", large, changed)
    check(got == (400, "XAmzContentSHA256Mismatch"), got)
    chunks = [os.urandom(64 * 1024), os.urandom(1000)]
    try:
        _signed_streaming_put(f"/{b}/chunked", chunks, tamper=True)
        raise AssertionError("a changed chunk was accepted")
    except urllib.error.HTTPError as e:
        got = (e.code, e.read().split(b"<Code>")[1].split(b"</Code>")[0].decode())
        check(got == (403, "SignatureDoesNotMatch"), got)
    for key in ["small", "large", "chunked"]:
        check(error_of(s3.head_object, Bucket=b, Key=key)[1] == 404, key)
    nuke(b)


def _http(method, url, body=b"", headers=None):
    """One plain HTTP request (no SDK in the way); returns (status, body)."""
    import http.client
    from urllib.parse import urlparse
    parsed = urlparse(url)
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)
    path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    reply = response.read()
    connection.close()
    return response.status, reply


def test_unsigned_amz_headers_and_anonymous_overrides_are_refused():
    """Headers added to a presigned URL or a signed request that its signature does not cover
    are refused (else a presigned PUT plus `x-amz-copy-source` copies any object the signer
    may read); anonymous GETs and HEADs may not override response headers."""
    b = new_bucket()
    s3.put_object(Bucket=b, Key="secret", Body=b"TOP SECRET")
    v4 = client(signature_version="s3v4")
    url = v4.generate_presigned_url("put_object", Params={"Bucket": b, "Key": "slot"}, ExpiresIn=60)
    added = _http("PUT", url, headers={"x-amz-copy-source": f"/{b}/secret", "x-amz-acl": "public-read"})
    check(added[0] == 403 and b"not signed" in added[1], added)
    check(error_of(s3.head_object, Bucket=b, Key="slot")[1] == 404, "nothing copied")
    check(_http("PUT", url, body=b"fine")[0] == 200, "the URL itself still works")
    # A header-signed request replayed with one more header.
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    signed = AWSRequest(method="PUT", url=f"{ENDPOINT}/{b}/replayed", data=b"",
                        headers={"x-amz-content-sha256": hashlib.sha256(b"").hexdigest()})
    botocore.auth.SigV4Auth(Credentials(*MAIN), "s3", "us-east-1").add_auth(signed)
    headers = dict(signed.headers.items())
    headers["x-amz-copy-source"] = f"/{b}/secret"
    replayed = _http("PUT", f"{ENDPOINT}/{b}/replayed", headers=headers)
    check(replayed[0] == 403, replayed)
    check(error_of(s3.head_object, Bucket=b, Key="replayed")[1] == 404, "nothing copied")
    # Response overrides: signed GETs may, anonymous ones may not.
    s3.put_object(Bucket=b, Key="page", Body=b"<script>", ACL="public-read")
    got = s3.get_object(Bucket=b, Key="page", ResponseContentType="text/plain")
    check(got["ContentType"] == "text/plain", got["ContentType"])
    check(_http("GET", f"{ENDPOINT}/{b}/page")[0] == 200, "public read")
    html = _http("GET", f"{ENDPOINT}/{b}/page?response-content-type=text/html")
    check(html[0] == 400 and b"InvalidRequest" in html[1], html)
    # HEAD takes the same overrides (and refuses them anonymously too).
    head = s3.head_object(Bucket=b, Key="page", ResponseContentType="text/plain",
                          ResponseCacheControl="no-store")
    check(head["ContentType"] == "text/plain" and head["CacheControl"] == "no-store", head)
    check(s3.head_object(Bucket=b, Key="page").get("ContentType") != "text/plain", "stored type")
    check(_http("HEAD", f"{ENDPOINT}/{b}/page?response-content-type=text/html")[0] == 400,
          "anonymous HEAD override")
    nuke(b)


# ---- concurrency ---------------------------------------------------------------------------

def test_concurrent_writers():
    b = new_bucket()
    errors = []

    def writer(w):
        c = client()
        try:
            for i in range(10):
                c.put_object(Bucket=b, Key=f"w{w}/{i}", Body=f"{w}-{i}".encode())
                # an acknowledged PUT is listed at once
                keys = [o["Key"] for o in c.list_objects_v2(Bucket=b, Prefix=f"w{w}/{i}")["Contents"]]
                if f"w{w}/{i}" not in keys:
                    errors.append(f"w{w}/{i} not listed after ack")
                c.put_object(Bucket=b, Key="shared", Body=f"{w}-{i}".encode() * 100)
        except Exception as e:  # noqa
            errors.append(repr(e))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not errors, errors[:3])
    keys = [o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(Bucket=b) for o in p.get("Contents", [])]
    check(len(keys) == 8 * 10 + 1, len(keys))
    shared = s3.get_object(Bucket=b, Key="shared")["Body"].read()
    unit = shared[: len(shared) // 100]
    check(shared == unit * 100, "torn shared object")
    nuke(b)


def test_empty_put_keeps_the_connection_usable():
    """botocore sends `Expect: 100-continue` even with an empty body; the request after it on
    the same connection used to hang until the client's timeout."""
    b = new_bucket()
    c = client(read_timeout=5, retries={"max_attempts": 1})
    for size in (5, 0, 3, 0, 0, 7):
        started = time.monotonic()
        c.put_object(Bucket=b, Key="k", Body=b"x" * size)
        check(time.monotonic() - started < 4, f"PUT of {size} bytes took {time.monotonic() - started:.1f} s")
        check(c.get_object(Bucket=b, Key="k")["Body"].read() == b"x" * size, size)
    nuke(b)


def test_acl_changes_racing_writes_undo_nothing():
    """PutObjectAcl racing a PUT or a DELETE of the same key: the acknowledged write stays (an
    ACL update writing back the entry it read used to bring back the old, freed, data)."""
    import random
    import threading
    for versioned in (False, True):
        b = new_bucket()
        if versioned:
            s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        for trial in range(12):
            key = f"k{trial}"
            s3.put_object(Bucket=b, Key=key, Body=b"old" * 1000)
            new = os.urandom(100_000)
            delete = trial % 3 == 2

            def write():
                time.sleep(random.uniform(0, 0.01))
                c = client()
                c.delete_object(Bucket=b, Key=key) if delete else c.put_object(Bucket=b, Key=key, Body=new)

            def change_acl():
                c = client()
                for _ in range(4):
                    try:
                        c.put_object_acl(Bucket=b, Key=key, ACL=random.choice(["private", "public-read"]))
                    except ClientError as e:  # the key may be gone: that is all
                        check(e.response["Error"]["Code"] in ("NoSuchKey", "MethodNotAllowed"), e.response)

            threads = [threading.Thread(target=write), threading.Thread(target=change_acl)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if delete:
                check(error_of(s3.get_object, Bucket=b, Key=key)[1] in (404, 405), f"{key} deleted stays deleted")
            else:
                check(s3.get_object(Bucket=b, Key=key)["Body"].read() == new, f"{key}: the acknowledged PUT")
        if versioned:
            for v in s3.list_object_versions(Bucket=b).get("Versions", []):
                s3.delete_object(Bucket=b, Key=v["Key"], VersionId=v["VersionId"])
            for m in s3.list_object_versions(Bucket=b).get("DeleteMarkers", []):
                s3.delete_object(Bucket=b, Key=m["Key"], VersionId=m["VersionId"])
        nuke(b)


def test_unsupported_features_are_refused_not_dropped():
    """What strata does not have, or is not configured for, is refused with S3's codes rather
    than accepted and dropped: SSE-C over plain HTTP (unless the operator allows it), SSE-S3
    without a master key (tests/s3/encryption.py runs a gateway with both), object lock, other
    storage classes, other regions."""
    import base64
    b = new_bucket()
    key = os.urandom(32)
    sse_c = dict(SSECustomerAlgorithm="AES256", SSECustomerKey=base64.b64encode(key).decode(),
                 SSECustomerKeyMD5=base64.b64encode(hashlib.md5(key).digest()).decode())
    # boto3 refuses SSE-C over plain HTTP itself: a request signed by hand shows what the
    # gateway does.
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    headers = {"x-amz-content-sha256": hashlib.sha256(b"secret").hexdigest(),
               "x-amz-server-side-encryption-customer-algorithm": sse_c["SSECustomerAlgorithm"],
               "x-amz-server-side-encryption-customer-key": sse_c["SSECustomerKey"],
               "x-amz-server-side-encryption-customer-key-md5": sse_c["SSECustomerKeyMD5"]}
    request = AWSRequest(method="PUT", url=f"{ENDPOINT}/{b}/ssec", data=b"secret", headers=headers)
    botocore.auth.SigV4Auth(Credentials(*MAIN), "s3", "us-east-1").add_auth(request)
    status, body = _http("PUT", f"{ENDPOINT}/{b}/ssec", b"secret", dict(request.headers.items()))
    check(status == 400 and b"InvalidRequest" in body, (status, body))
    got = error_of(s3.put_object, Bucket=b, Key="sse", Body=b"x", ServerSideEncryption="AES256")
    check(got == ("NotImplemented", 501), got)
    got = error_of(s3.put_object, Bucket=b, Key="lock", Body=b"x", ObjectLockMode="COMPLIANCE",
                   ObjectLockRetainUntilDate=datetime.datetime(2030, 1, 1))
    check(got == ("InvalidRequest", 400), got)
    got = error_of(s3.put_object, Bucket=b, Key="ia", Body=b"x", StorageClass="STANDARD_IA")
    check(got == ("InvalidStorageClass", 400), got)
    got = error_of(s3.create_multipart_upload, Bucket=b, Key="ia", StorageClass="GLACIER")
    check(got == ("InvalidStorageClass", 400), got)
    s3.put_object(Bucket=b, Key="plain", Body=b"x", StorageClass="STANDARD")
    for key in ["sse", "lock", "ia"]:
        check(error_of(s3.head_object, Bucket=b, Key=key)[1] == 404, key)
    check(error_of(s3.head_object, Bucket=b, Key="ssec")[1] == 404)
    nuke(b)
    got = error_of(s3.create_bucket, Bucket=f"strata-test-{os.getpid()}-lock",
                   ObjectLockEnabledForBucket=True)
    check(got == ("NotImplemented", 501), got)
    for region in ["eu-west-1", "us-east-1"]:
        got = error_of(s3.create_bucket, Bucket=f"strata-test-{os.getpid()}-where",
                       CreateBucketConfiguration={"LocationConstraint": region})
        check(got == ("InvalidLocationConstraint", 400), (region, got))


def test_tagging():
    """Object tags (on PUT, copy, multipart, and by the tagging calls) are kept with the
    version and counted on GET; AWS's limits hold; bucket tags are kept with the bucket; a
    policy may test an object's tags."""
    b = new_bucket()
    s3.put_object(Bucket=b, Key="t", Body=b"x", Tagging="a=1&b%20c=d%20e&empty=")
    got = s3.get_object_tagging(Bucket=b, Key="t")["TagSet"]
    check(got == [{"Key": "a", "Value": "1"}, {"Key": "b c", "Value": "d e"},
                  {"Key": "empty", "Value": ""}], got)
    check(s3.get_object(Bucket=b, Key="t")["TagCount"] == 3)
    etag = s3.head_object(Bucket=b, Key="t")["ETag"]
    tags = [{"Key": f"k{n}", "Value": "v" * 256} for n in range(9)] + [{"Key": "é" * 128, "Value": ""}]
    s3.put_object_tagging(Bucket=b, Key="t", Tagging={"TagSet": tags})
    check(s3.get_object_tagging(Bucket=b, Key="t")["TagSet"] == tags)
    # The tags change in place: the data, ETag and the other metadata stay.
    check(s3.head_object(Bucket=b, Key="t")["ETag"] == etag)
    check(s3.get_object(Bucket=b, Key="t")["Body"].read() == b"x")
    for bad in [tags + [{"Key": "eleventh", "Value": ""}],
                [{"Key": "k" * 129, "Value": ""}],
                [{"Key": "k", "Value": "v" * 257}],
                [{"Key": "k", "Value": "1"}, {"Key": "k", "Value": "2"}]]:
        got = error_of(s3.put_object_tagging, Bucket=b, Key="t", Tagging={"TagSet": bad})
        check(got == ("InvalidTag", 400), got)
    got = error_of(s3.put_object, Bucket=b, Key="u", Body=b"x",
                   Tagging="&".join(f"k{n}=v" for n in range(11)))
    check(got == ("InvalidTag", 400), got)
    check(error_of(s3.head_object, Bucket=b, Key="u")[1] == 404)
    # Copy: the source's tags unless the directive replaces them.
    s3.copy_object(Bucket=b, Key="copied", CopySource={"Bucket": b, "Key": "t"})
    check(s3.get_object_tagging(Bucket=b, Key="copied")["TagSet"] == tags)
    s3.copy_object(Bucket=b, Key="replaced", CopySource={"Bucket": b, "Key": "t"},
                   TaggingDirective="REPLACE", Tagging="new=1")
    check(s3.get_object_tagging(Bucket=b, Key="replaced")["TagSet"] == [{"Key": "new", "Value": "1"}])
    s3.copy_object(Bucket=b, Key="bare", CopySource={"Bucket": b, "Key": "t"},
                   TaggingDirective="REPLACE")
    check(s3.get_object_tagging(Bucket=b, Key="bare")["TagSet"] == [])
    check("TagCount" not in s3.get_object(Bucket=b, Key="bare"))
    # Multipart: the tags given at creation.
    up = s3.create_multipart_upload(Bucket=b, Key="mp", Tagging="m=p")["UploadId"]
    part = s3.upload_part(Bucket=b, Key="mp", UploadId=up, PartNumber=1, Body=b"y")["ETag"]
    s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": part}]})
    check(s3.get_object_tagging(Bucket=b, Key="mp")["TagSet"] == [{"Key": "m", "Value": "p"}])
    s3.delete_object_tagging(Bucket=b, Key="t")
    check(s3.get_object_tagging(Bucket=b, Key="t")["TagSet"] == [])
    check(error_of(s3.get_object_tagging, Bucket=b, Key="missing")[1] == 404)
    # Another user may not read or change them.
    check(error_of(alt.get_object_tagging, Bucket=b, Key="mp")[0] == "AccessDenied")
    check(error_of(alt.put_object_tagging, Bucket=b, Key="mp",
                   Tagging={"TagSet": []})[0] == "AccessDenied")
    # A bucket policy granting reads of objects tagged public=yes only.
    s3.put_object(Bucket=b, Key="pub", Body=b"p", Tagging="public=yes")
    import json
    s3.put_bucket_policy(Bucket=b, Policy=json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{b}/*",
        "Condition": {"StringEquals": {"s3:ExistingObjectTag/public": "yes"}}}]}))
    check(alt.get_object(Bucket=b, Key="pub")["Body"].read() == b"p")
    check(error_of(alt.get_object, Bucket=b, Key="mp")[0] == "AccessDenied")
    s3.delete_bucket_policy(Bucket=b)
    # Bucket tags.
    check(error_of(s3.get_bucket_tagging, Bucket=b) == ("NoSuchTagSet", 404))
    many = [{"Key": f"k{n}", "Value": str(n)} for n in range(50)]
    s3.put_bucket_tagging(Bucket=b, Tagging={"TagSet": many})
    check(s3.get_bucket_tagging(Bucket=b)["TagSet"] == many)
    got = error_of(s3.put_bucket_tagging, Bucket=b,
                   Tagging={"TagSet": many + [{"Key": "k50", "Value": ""}]})
    check(got == ("InvalidTag", 400), got)
    check(error_of(alt.get_bucket_tagging, Bucket=b)[0] == "AccessDenied")
    s3.delete_bucket_tagging(Bucket=b)
    check(error_of(s3.get_bucket_tagging, Bucket=b) == ("NoSuchTagSet", 404))
    nuke(b)


def test_a_repeated_complete_answers_as_the_first():
    """CompleteMultipartUpload sent again after it succeeded (a retry whose answer was lost)
    answers 200 with the same ETag and version, and makes no second object; an upload that
    never existed is still NoSuchUpload."""
    for versioned in [False, True]:
        b = new_bucket()
        if versioned:
            s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        up = s3.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
        part = s3.upload_part(Bucket=b, Key="mp", UploadId=up, PartNumber=1, Body=b"y")["ETag"]
        parts = {"Parts": [{"PartNumber": 1, "ETag": part}]}
        first = s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up, MultipartUpload=parts)
        again = s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up, MultipartUpload=parts)
        check(again["ETag"] == first["ETag"], (first, again))
        check(again.get("VersionId") == first.get("VersionId"), (first, again))
        versions = s3.list_object_versions(Bucket=b).get("Versions", [])
        check(len(versions) == 1, versions)
        got = error_of(s3.complete_multipart_upload, Bucket=b, Key="mp", UploadId="2~nosuch",
                       MultipartUpload=parts)
        check(got == ("NoSuchUpload", 404), got)
        if versioned:
            for v in versions:
                s3.delete_object(Bucket=b, Key="mp", VersionId=v["VersionId"])
        nuke(b)


def test_conditional_deletes_are_honoured():
    """A delete with a condition (If-Match, x-amz-if-match-last-modified-time and -size; the
    ETag, LastModifiedTime and Size of DeleteObjects) deletes only when the version it acts
    on passes it: 412 (or a PreconditionFailed entry) otherwise, and the object stays; a key
    that does not exist is no error, as an unconditional delete."""
    for versioned in [False, True]:
        b = new_bucket()
        if versioned:
            s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        etag = s3.put_object(Bucket=b, Key="k", Body=b"xyz")["ETag"]
        mtime = s3.head_object(Bucket=b, Key="k")["LastModified"]
        old = datetime.datetime(2015, 1, 1, tzinfo=datetime.timezone.utc)
        for wrong in [dict(IfMatch='"0123"'), dict(IfMatchSize=4), dict(IfMatchLastModifiedTime=old),
                      dict(IfMatch=etag, IfMatchSize=2)]:
            got = error_of(s3.delete_object, Bucket=b, Key="k", **wrong)
            check(got == ("PreconditionFailed", 412), (versioned, wrong, got))
        got = s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "k", "ETag": '"0123"'}]})
        check([e["Code"] for e in got.get("Errors", [])] == ["PreconditionFailed"], got)
        check(s3.head_object(Bucket=b, Key="k")["ETag"] == etag, "the object stays")
        s3.delete_object(Bucket=b, Key="k", IfMatch=etag, IfMatchSize=3, IfMatchLastModifiedTime=mtime)
        check(error_of(s3.head_object, Bucket=b, Key="k")[1] == 404, "deleted")
        if versioned:
            # The newest version is now a delete marker: its ETag is no object's.
            got = error_of(s3.delete_object, Bucket=b, Key="k", IfMatch=etag)
            check(got == ("PreconditionFailed", 412), got)
            s3.delete_object(Bucket=b, Key="k", IfMatch="*")
            # A named version is tested itself.
            v = s3.put_object(Bucket=b, Key="v", Body=b"1")
            got = error_of(s3.delete_object, Bucket=b, Key="v", VersionId=v["VersionId"], IfMatch='"0123"')
            check(got == ("PreconditionFailed", 412), got)
            s3.delete_object(Bucket=b, Key="v", VersionId=v["VersionId"], IfMatch=v["ETag"])
            for version in s3.list_object_versions(Bucket=b).get("Versions", []) + \
                    s3.list_object_versions(Bucket=b).get("DeleteMarkers", []):
                s3.delete_object(Bucket=b, Key=version["Key"], VersionId=version["VersionId"])
        else:
            s3.delete_object(Bucket=b, Key="k", IfMatch='"0123"')  # nothing there: no error
            etag = s3.put_object(Bucket=b, Key="d", Body=b"1")["ETag"]
            got = s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "d", "ETag": etag, "Size": 1}]})
            check([d["Key"] for d in got.get("Deleted", [])] == ["d"], got)
        nuke(b)


def test_checksums_are_kept_and_returned():
    """The checksum a PUT or a part gives is kept with the object: returned on HEAD and GET
    with ChecksumMode (not on a range), by GetObjectAttributes with its parts, and for
    multipart as S3 computes it (COMPOSITE: the checksum of the parts' checksums, -N;
    FULL_OBJECT: the CRC of the whole data)."""
    import base64
    import zlib
    b = new_bucket()
    data = b"checksummed data"
    crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    sha = base64.b64encode(hashlib.sha256(data).digest()).decode()
    put = s3.put_object(Bucket=b, Key="s", Body=data, ChecksumSHA256=sha)
    check(put.get("ChecksumSHA256") == sha, put)
    check("ChecksumSHA256" not in s3.head_object(Bucket=b, Key="s"))
    head = s3.head_object(Bucket=b, Key="s", ChecksumMode="ENABLED")
    check(head.get("ChecksumSHA256") == sha and head.get("ChecksumType") == "FULL_OBJECT", head)
    got = s3.get_object(Bucket=b, Key="s", ChecksumMode="ENABLED")
    check(got.get("ChecksumSHA256") == sha and got["Body"].read() == data, got)
    ranged = s3.get_object(Bucket=b, Key="s", ChecksumMode="ENABLED", Range="bytes=0-3")
    check("ChecksumSHA256" not in ranged and ranged["Body"].read() == b"chec", ranged)
    attributes = s3.get_object_attributes(Bucket=b, Key="s", ObjectAttributes=["Checksum"])
    check(attributes["Checksum"].get("ChecksumSHA256") == sha, attributes)
    s3.put_object(Bucket=b, Key="c", Body=data, ChecksumCRC32=crc)
    check(s3.head_object(Bucket=b, Key="c", ChecksumMode="ENABLED").get("ChecksumCRC32") == crc)
    got = error_of(s3.put_object, Bucket=b, Key="bad", Body=data, ChecksumCRC32="AAAAAA==")
    check(got == ("BadDigest", 400), got)
    # Multipart: SHA-256 COMPOSITE, CRC32 FULL_OBJECT.
    size = 5 * 1024 * 1024
    bodies = [bytes([65 + n]) * size for n in range(2)] + [b"tail"]
    for algorithm, kind in [("SHA256", "COMPOSITE"), ("CRC32", "FULL_OBJECT")]:
        key = f"mp-{algorithm}"
        up = s3.create_multipart_upload(Bucket=b, Key=key, ChecksumAlgorithm=algorithm, ChecksumType=kind)
        check(up.get("ChecksumAlgorithm") == algorithm and up.get("ChecksumType") == kind, up)
        parts, values = [], []
        for n, body in enumerate(bodies, 1):
            if algorithm == "SHA256":
                value = base64.b64encode(hashlib.sha256(body).digest()).decode()
            else:
                value = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
            answer = s3.upload_part(Bucket=b, Key=key, UploadId=up["UploadId"], PartNumber=n, Body=body,
                                    **{f"Checksum{algorithm}": value})
            check(answer.get(f"Checksum{algorithm}") == value, answer)
            parts.append({"PartNumber": n, "ETag": answer["ETag"], f"Checksum{algorithm}": value})
            values.append(value)
        listed = s3.list_parts(Bucket=b, Key=key, UploadId=up["UploadId"])
        check([p.get(f"Checksum{algorithm}") for p in listed["Parts"]] == values, listed)
        if algorithm == "SHA256":
            digests = b"".join(base64.b64decode(v) for v in values)
            expected = base64.b64encode(hashlib.sha256(digests).digest()).decode() + "-3"
        else:
            expected = base64.b64encode(zlib.crc32(b"".join(bodies)).to_bytes(4, "big")).decode()
        wrong = dict(parts[0], **{f"Checksum{algorithm}": values[1]})
        got = error_of(s3.complete_multipart_upload, Bucket=b, Key=key, UploadId=up["UploadId"],
                       MultipartUpload={"Parts": [wrong] + parts[1:]})
        check(got == ("BadDigest", 400), got)
        done = s3.complete_multipart_upload(Bucket=b, Key=key, UploadId=up["UploadId"],
                                            MultipartUpload={"Parts": parts})
        check(done.get(f"Checksum{algorithm}") == expected and done.get("ChecksumType") == kind, done)
        head = s3.head_object(Bucket=b, Key=key, ChecksumMode="ENABLED")
        check(head.get(f"Checksum{algorithm}") == expected, head)
        part = s3.get_object(Bucket=b, Key=key, PartNumber=2, ChecksumMode="ENABLED")
        check(part.get(f"Checksum{algorithm}") == values[1] and part["Body"].read() == bodies[1])
        # boto3 checks a full-object checksum against what it reads.
        check(s3.get_object(Bucket=b, Key=key, ChecksumMode="ENABLED")["Body"].read() == b"".join(bodies))
        attributes = s3.get_object_attributes(Bucket=b, Key=key, ObjectAttributes=["Checksum", "ObjectParts"])
        check(attributes["Checksum"].get(f"Checksum{algorithm}") == expected, attributes)
        check(attributes["Checksum"].get("ChecksumType") == kind, attributes)
        got = [(p["PartNumber"], p["Size"], p.get(f"Checksum{algorithm}"))
               for p in attributes["ObjectParts"]["Parts"]]
        check(got == [(n, len(body), value) for n, (body, value) in enumerate(zip(bodies, values), 1)], got)
    got = error_of(s3.create_multipart_upload, Bucket=b, Key="x", ChecksumAlgorithm="SHA1",
                   ChecksumType="FULL_OBJECT")
    check(got == ("InvalidRequest", 400), got)
    nuke(b)


def test_request_tags_in_policies():
    """A bucket policy may test the tags a write sets (s3:RequestObjectTag/<key>,
    s3:RequestObjectTagKeys with ForAnyValue/ForAllValues)."""
    import json
    b = new_bucket()
    s3.put_bucket_policy(Bucket=b, Policy=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": "*", "Action": ["s3:PutObject", "s3:PutObjectTagging"],
         "Resource": f"arn:aws:s3:::{b}/*",
         "Condition": {"StringEquals": {"s3:RequestObjectTag/team": "blue"}}},
        {"Effect": "Deny", "Principal": "*", "Action": ["s3:PutObject", "s3:PutObjectTagging"],
         "Resource": f"arn:aws:s3:::{b}/*",
         "Condition": {"ForAnyValue:StringLike": {"s3:RequestObjectTagKeys": "secret*"}}}]}))
    alt.put_object(Bucket=b, Key="ok", Body=b"1", Tagging="team=blue")
    check(error_of(alt.put_object, Bucket=b, Key="no", Body=b"1", Tagging="team=red")[0] == "AccessDenied")
    check(error_of(alt.put_object, Bucket=b, Key="no", Body=b"1")[0] == "AccessDenied")
    got = error_of(s3.put_object, Bucket=b, Key="no", Body=b"1", Tagging="team=blue&secret1=x")
    check(got[0] == "AccessDenied", got)
    got = error_of(alt.put_object_tagging, Bucket=b, Key="ok",
                   Tagging={"TagSet": [{"Key": "secret", "Value": "x"}]})
    check(got[0] == "AccessDenied", got)
    alt.put_object_tagging(Bucket=b, Key="ok", Tagging={"TagSet": [{"Key": "team", "Value": "blue"},
                                                                   {"Key": "n", "Value": "1"}]})
    up = alt.create_multipart_upload(Bucket=b, Key="mp", Tagging="team=blue")
    s3.abort_multipart_upload(Bucket=b, Key="mp", UploadId=up["UploadId"])
    check(error_of(alt.create_multipart_upload, Bucket=b, Key="mp", Tagging="team=green")[0] == "AccessDenied")
    s3.delete_bucket_policy(Bucket=b)
    nuke(b)


def test_checksums_are_verified():
    """x-amz-checksum-* values (CRC32, CRC32C, SHA1) are checked against the body, on PUT and
    part uploads; a mismatch is BadDigest and keeps nothing."""
    import base64
    import zlib
    b = new_bucket()
    data = os.urandom(70000)
    crc32 = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    sha1 = base64.b64encode(hashlib.sha1(data).digest()).decode()
    s3.put_object(Bucket=b, Key="good", Body=data, ChecksumCRC32=crc32)
    s3.put_object(Bucket=b, Key="good1", Body=data, ChecksumSHA1=sha1)
    s3.put_object(Bucket=b, Key="default", Body=data)  # boto3's own checksum, if it sends one
    wrong = base64.b64encode((zlib.crc32(data) ^ 1).to_bytes(4, "big")).decode()
    got = error_of(s3.put_object, Bucket=b, Key="bad", Body=data, ChecksumCRC32=wrong)
    check(got == ("BadDigest", 400), got)
    got = error_of(s3.put_object, Bucket=b, Key="bad", Body=data, ChecksumCRC32C=crc32)
    check(got == ("BadDigest", 400), got)
    upload = s3.create_multipart_upload(Bucket=b, Key="parts")["UploadId"]
    got = error_of(s3.upload_part, Bucket=b, Key="parts", UploadId=upload, PartNumber=1,
                   Body=data, ChecksumCRC32=wrong)
    check(got == ("BadDigest", 400), got)
    check(not s3.list_parts(Bucket=b, Key="parts", UploadId=upload).get("Parts"))
    s3.upload_part(Bucket=b, Key="parts", UploadId=upload, PartNumber=1, Body=data, ChecksumCRC32=crc32)
    s3.abort_multipart_upload(Bucket=b, Key="parts", UploadId=upload)
    check(error_of(s3.head_object, Bucket=b, Key="bad")[1] == 404)
    for key in ["good", "good1", "default"]:
        check(s3.get_object(Bucket=b, Key=key)["Body"].read() == data, key)
    nuke(b)


def test_ranges_heads_and_conditions_as_s3():
    """A range over an empty object is unsatisfiable (416), a HEAD for a range answers 206 as
    the GET, and If-Match compares strongly (a weak tag never matches)."""
    b = new_bucket()
    s3.put_object(Bucket=b, Key="empty", Body=b"")
    for spec in ["bytes=-1", "bytes=0-", "bytes=0-0"]:
        got = error_of(s3.get_object, Bucket=b, Key="empty", Range=spec)
        check(got == ("InvalidRange", 416), (spec, got))
    s3.put_object(Bucket=b, Key="ten", Body=b"0123456789")
    head = s3.head_object(Bucket=b, Key="ten", Range="bytes=2-5")
    check(head["ResponseMetadata"]["HTTPStatusCode"] == 206 and head["ContentLength"] == 4, head)
    check(head["ContentRange"] == "bytes 2-5/10", head)
    etag = s3.head_object(Bucket=b, Key="ten")["ETag"]
    got = error_of(s3.get_object, Bucket=b, Key="ten", IfMatch="W/" + etag)
    check(got[1] == 412, got)
    check(s3.get_object(Bucket=b, Key="ten", IfMatch=etag)["Body"].read() == b"0123456789")
    got = error_of(s3.get_object, Bucket=b, Key="ten", IfNoneMatch="W/" + etag)
    check(got[1] == 304, got)
    nuke(b)


def test_malformed_ranges_are_ignored_as_s3():
    """S3 ignores a Range it cannot parse, an inverted one (last before first) included, and
    answers 200 with the whole object; only a valid range the object cannot satisfy is 416.
    s3s answered 400. A Range a SigV4 signature covers is left to s3s (see
    server/lenient.rs), so these go anonymously and through a presigned URL, as browsers and
    curl send them."""
    import requests
    b = new_bucket()
    body = b"0123456789"
    s3.put_object(Bucket=b, Key="ten", Body=body, ACL="public-read")
    presigned = client(signature_version="s3v4").generate_presigned_url(
        "get_object", Params={"Bucket": b, "Key": "ten"})
    check("X-Amz-SignedHeaders=host&" in presigned, presigned)
    for url in [f"{ENDPOINT}/{b}/ten", presigned]:
        for spec in ["bytes=abc", "bytes=5-2", "bytes=0-1,3-4", "bytes=", "lines=0-1"]:
            got = requests.get(url, headers={"Range": spec}, timeout=30)
            check(got.status_code == 200 and got.content == body and "Content-Range" not in got.headers,
                  (url, spec, got.status_code, got.text[:300]))
        head = requests.head(f"{ENDPOINT}/{b}/ten", headers={"Range": "bytes=abc"}, timeout=30)
        check(head.status_code == 200 and head.headers["Content-Length"] == "10", (head.status_code, head.headers))
        got = requests.get(url, headers={"Range": "bytes=2-5"}, timeout=30)
        check(got.status_code == 206 and got.content == b"2345", (got.status_code, got.text[:300]))
        got = requests.get(url, headers={"Range": "bytes=1000000-"}, timeout=30)
        check(got.status_code == 416 and b"InvalidRange" in got.content, (got.status_code, got.text[:300]))
    check(error_of(s3.get_object, Bucket=b, Key="ten", Range="bytes=1000000-") == ("InvalidRange", 416))
    nuke(b)


def test_conditional_dates_in_every_http_date_form():
    """RFC 9110 has a recipient accept an HTTP-date in IMF-fixdate, RFC 850 and asctime form,
    and ignore If-Modified-Since or If-Unmodified-Since when it is no HTTP-date; s3s read the
    first form only and answered 400 to the others."""
    import requests
    b = new_bucket()
    s3.put_object(Bucket=b, Key="k", Body=b"data", ACL="public-read")

    def forms(moment):
        return [moment.strftime("%a, %d %b %Y %H:%M:%S GMT"),
                moment.strftime("%A, %d-%b-%y %H:%M:%S GMT"),
                f"{moment:%a %b} {moment.day:2d} {moment:%H:%M:%S %Y}"]

    past = datetime.datetime(1994, 11, 6, 8, 49, 37)
    # A second after the write and already past (a date in the future may be ignored).
    later = s3.head_object(Bucket=b, Key="k")["LastModified"] + datetime.timedelta(seconds=1)
    time.sleep(max(0.0, (later - datetime.datetime.now(datetime.timezone.utc)).total_seconds()) + 0.5)
    check(forms(past)[1:] == ["Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"], forms(past))
    presigned = client(signature_version="s3v4").generate_presigned_url(
        "get_object", Params={"Bucket": b, "Key": "k"})
    for url, method in [(f"{ENDPOINT}/{b}/k", requests.get), (f"{ENDPOINT}/{b}/k", requests.head),
                        (presigned, requests.get)]:
        for old, new in zip(forms(past), forms(later)):
            for header, date, status in [("If-Modified-Since", old, 200), ("If-Modified-Since", new, 304),
                                         ("If-Unmodified-Since", old, 412),
                                         ("If-Unmodified-Since", new, 200)]:
                got = method(url, headers={header: date}, timeout=30)
                check(got.status_code == status, (url, method.__name__, header, date, got.status_code, got.text[:300]))
        for header in ["If-Modified-Since", "If-Unmodified-Since"]:
            got = method(url, headers={header: "not a date"}, timeout=30)
            check(got.status_code == 200, (url, method.__name__, header, got.status_code, got.text[:300]))
    nuke(b)


def test_metadata_limits_and_directives():
    """User metadata over S3's 2 KiB is MetadataTooLarge; a metadata directive other than
    COPY or REPLACE is refused."""
    b = new_bucket()
    s3.put_object(Bucket=b, Key="fits", Body=b"x", Metadata={"k": "v" * 2047})
    got = error_of(s3.put_object, Bucket=b, Key="big", Body=b"x", Metadata={"k": "v" * 2048})
    check(got == ("MetadataTooLarge", 400), got)
    got = error_of(s3.create_multipart_upload, Bucket=b, Key="big", Metadata={"a": "v" * 3000})
    check(got == ("MetadataTooLarge", 400), got)
    got = error_of(s3.copy_object, Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "fits"},
                   MetadataDirective="FOO")
    check(got == ("InvalidArgument", 400), got)
    s3.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "fits"}, MetadataDirective="COPY")
    check(s3.head_object(Bucket=b, Key="copy")["Metadata"] == {"k": "v" * 2047})
    nuke(b)


def test_a_put_without_length_is_refused():
    """A PUT with a body but neither Content-Length nor Transfer-Encoding has no body in
    HTTP/1.1: 411 MissingContentLength, as S3 and radosgw, not an empty object."""
    import socket
    from urllib.parse import urlparse
    b = new_bucket()
    endpoint = urlparse(ENDPOINT)
    with socket.create_connection((endpoint.hostname, endpoint.port), timeout=30) as connection:
        connection.sendall(f"PUT /{b}/nolength HTTP/1.1\r\nHost: {endpoint.netloc}\r\n\r\nsome body".encode())
        reply = connection.recv(65536)
    check(reply.startswith(b"HTTP/1.1 411") and b"MissingContentLength" in reply, reply[:200])
    check(error_of(s3.head_object, Bucket=b, Key="nolength")[1] == 404)
    nuke(b)


def main():
    selected = sys.argv[1:] or os.environ.get("S3_TESTS", "").split()
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and callable(f)]
    failed = []
    for name, fn in tests:
        if selected and name not in selected:
            continue
        started = time.monotonic()
        try:
            fn()
            print(f"PASS {name} ({time.monotonic() - started:.1f} s)", flush=True)
        except Exception:
            failed.append(name)
            print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
    leftover = [x["Name"] for x in s3.list_buckets()["Buckets"]] + [x["Name"] for x in alt.list_buckets()["Buckets"]]
    for name in leftover:
        try:
            nuke(name)
        except Exception:
            pass
    print(f"{len(tests) - len(failed) if not selected else len(selected) - len(failed)} passed, {len(failed)} failed: {failed}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
