#!/usr/bin/env python3
"""boto3 checks of S3 bucket versioning against a live strata gateway.

Run by crates/gateway/tests/s3_versioning.rs:
  S3_ENDPOINT=http://127.0.0.1:PORT MAIN_AK=.. MAIN_SK=.. python3 versioning.py PHASE
PHASE `data` leaves bucket DATA_BUCKET with a known number of live versions (printed as
`LIVE n`) so the caller can count the data objects; PHASE `rest` runs every other check and
removes every bucket, including DATA_BUCKET, by removing each version.
"""
import os
import sys
import traceback

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

ENDPOINT = os.environ["S3_ENDPOINT"]
CONFIG = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1})
s3 = boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1",
                  aws_access_key_id=os.environ["MAIN_AK"],
                  aws_secret_access_key=os.environ["MAIN_SK"], config=CONFIG)
DATA_BUCKET = "versioning-data"
counter = [0]


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def new_bucket(versioning=None):
    counter[0] += 1
    name = f"versioning-{os.getpid()}-{counter[0]}"
    s3.create_bucket(Bucket=name)
    if versioning:
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": versioning})
    return name


def error_of(call, **kw):
    try:
        call(**kw)
    except ClientError as e:
        return (e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Code"],
                e.response["ResponseMetadata"]["HTTPHeaders"])
    raise AssertionError(f"{call.__name__} {kw} succeeded")


def all_versions(bucket, **kw):
    """Every version and delete marker, paging with MaxKeys 1 through both markers."""
    out, kwargs = [], {"Bucket": bucket, "MaxKeys": 1, **kw}
    while True:
        page = s3.list_object_versions(**kwargs)
        items = page.get("Versions", []) + page.get("DeleteMarkers", [])
        check(len(items) + len(page.get("CommonPrefixes", [])) <= 1, "page over MaxKeys")
        out += [(o["Key"], o["VersionId"], o["IsLatest"], "ETag" not in o) for o in items]
        if not page["IsTruncated"]:
            return out
        kwargs["KeyMarker"] = page["NextKeyMarker"]
        kwargs["VersionIdMarker"] = page.get("NextVersionIdMarker", "")


def nuke(bucket):
    for key, version, _, _ in all_versions(bucket):
        s3.delete_object(Bucket=bucket, Key=key, VersionId=version)
    s3.delete_bucket(Bucket=bucket)


def test_configuration():
    b = new_bucket()
    check("Status" not in s3.get_bucket_versioning(Bucket=b), "status of a new bucket")
    for status in ["Suspended", "Enabled", "Enabled", "Suspended"]:
        s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": status})
        check(s3.get_bucket_versioning(Bucket=b)["Status"] == status, status)
    status, code, _ = error_of(s3.put_bucket_versioning, Bucket=b,
                               VersioningConfiguration={"Status": "Sometimes"})
    check((status, code) == (400, "MalformedXML"), f"bad status: {status} {code}")
    nuke(b)


def test_versions_read_and_removed():
    b = new_bucket("Enabled")
    ids = [s3.put_object(Bucket=b, Key="k", Body=f"v{i}")["VersionId"] for i in range(3)]
    check(len(set(ids)) == 3 and "null" not in ids, f"ids {ids}")
    for i, v in enumerate(ids):
        got = s3.get_object(Bucket=b, Key="k", VersionId=v)
        check(got["Body"].read() == f"v{i}".encode() and got["VersionId"] == v, f"version {i}")
        check(s3.head_object(Bucket=b, Key="k", VersionId=v)["ContentLength"] == 2, "head")
    check(s3.get_object(Bucket=b, Key="k")["VersionId"] == ids[2], "latest")
    listed = all_versions(b)
    check(listed == [("k", v, v == ids[2], False) for v in reversed(ids)], f"listing {listed}")
    # Removing the latest makes the previous one the object.
    s3.delete_object(Bucket=b, Key="k", VersionId=ids[2])
    check(s3.get_object(Bucket=b, Key="k")["Body"].read() == b"v1", "previous became latest")
    # Removing again is no error; a missing version is 404, a malformed id 400.
    s3.delete_object(Bucket=b, Key="k", VersionId=ids[2])
    status, code, _ = error_of(s3.get_object, Bucket=b, Key="k", VersionId=ids[2])
    check((status, code) == (404, "NoSuchVersion"), f"gone version: {status} {code}")
    status, code, _ = error_of(s3.get_object, Bucket=b, Key="k", VersionId="bogus")
    check((status, code) == (400, "InvalidArgument"), f"bad id: {status} {code}")
    nuke(b)


def test_delete_markers():
    b = new_bucket("Enabled")
    v1 = s3.put_object(Bucket=b, Key="k", Body="one")["VersionId"]
    deleted = s3.delete_object(Bucket=b, Key="k")
    check(deleted["DeleteMarker"] and deleted["VersionId"] not in (v1, "null"), "marker made")
    marker = deleted["VersionId"]
    status, code, headers = error_of(s3.get_object, Bucket=b, Key="k")
    check((status, code) == (404, "NoSuchKey"), f"get behind a marker: {status} {code}")
    check(headers.get("x-amz-delete-marker") == "true", f"marker header {headers}")
    check(headers.get("x-amz-version-id") == marker, "marker id header")
    status, code, headers = error_of(s3.get_object, Bucket=b, Key="k", VersionId=marker)
    check((status, code) == (405, "MethodNotAllowed"), f"get of a marker: {status} {code}")
    check(headers.get("x-amz-delete-marker") == "true", "405 marker header")
    # Someone without access learns nothing about it (no 405, no marker headers).
    import botocore
    anonymous = boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1",
                             config=CONFIG.merge(Config(signature_version=botocore.UNSIGNED)))
    status, code, headers = error_of(anonymous.get_object, Bucket=b, Key="k", VersionId=marker)
    check(status == 403 and "x-amz-delete-marker" not in headers, f"anonymous: {status} {headers}")
    check("Contents" not in s3.list_objects_v2(Bucket=b), "listed behind a marker")
    check("Contents" not in s3.list_objects(Bucket=b), "v1 listed behind a marker")
    page = s3.list_object_versions(Bucket=b)
    check([m["VersionId"] for m in page["DeleteMarkers"]] == [marker], "markers listed")
    check(page["DeleteMarkers"][0]["IsLatest"] and not page["Versions"][0]["IsLatest"], "latest")
    # A bucket holding only versions and markers is not empty.
    status, code, _ = error_of(s3.delete_bucket, Bucket=b)
    check((status, code) == (409, "BucketNotEmpty"), f"delete bucket: {status} {code}")
    # Removing the marker brings the object back.
    removed = s3.delete_object(Bucket=b, Key="k", VersionId=marker)
    check(removed["DeleteMarker"] and removed["VersionId"] == marker, "marker removal answer")
    check(s3.get_object(Bucket=b, Key="k")["Body"].read() == b"one", "object back")
    s3.delete_object(Bucket=b, Key="k", VersionId=v1)
    s3.delete_object(Bucket=b, Key="k")
    status, code, _ = error_of(s3.delete_bucket, Bucket=b)
    check(code == "BucketNotEmpty", "a lone delete marker keeps the bucket")
    nuke(b)


def test_null_versions():
    b = new_bucket()
    s3.put_object(Bucket=b, Key="k", Body="plain")
    check("VersionId" not in s3.put_object(Bucket=b, Key="p", Body="x"), "id without versioning")
    s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    check(s3.get_object(Bucket=b, Key="k")["VersionId"] == "null", "pre-existing is null")
    v = s3.put_object(Bucket=b, Key="k", Body="new")["VersionId"]
    check([x[1] for x in all_versions(b, Prefix="k")] == [v, "null"], "null kept below")
    check(s3.get_object(Bucket=b, Key="k", VersionId="null")["Body"].read() == b"plain", "null")
    s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Suspended"})
    put = s3.put_object(Bucket=b, Key="k", Body="s1")
    check("VersionId" not in put, "suspended put reports no id")
    s3.put_object(Bucket=b, Key="k", Body="s2")
    listed = all_versions(b, Prefix="k")
    check([x[1] for x in listed] == ["null", v], f"one null version on top: {listed}")
    check(s3.get_object(Bucket=b, Key="k")["Body"].read() == b"s2", "suspended overwrite")
    deleted = s3.delete_object(Bucket=b, Key="k")
    check(deleted["DeleteMarker"] and deleted["VersionId"] == "null", "suspended marker")
    check([x[1] for x in all_versions(b, Prefix="k")] == ["null", v], "marker replaced null")
    s3.delete_object(Bucket=b, Key="k", VersionId="null")
    check(s3.get_object(Bucket=b, Key="k")["Body"].read() == b"new", "enabled version back")
    nuke(b)


def test_listing_order_paging_prefix_delimiter():
    b = new_bucket("Enabled")
    keys = ["a", "a/b", "a/c", "ab", "b+c", "c"]
    made = {}
    for round_ in range(2):
        for k in keys:
            made.setdefault(k, []).insert(0, s3.put_object(Bucket=b, Key=k, Body=k)["VersionId"])
    s3.delete_object(Bucket=b, Key="ab")
    listed = all_versions(b)
    check([x[0] for x in listed] == [k for k in keys for _ in range(3 if k == "ab" else 2)],
          f"key order {listed}")
    check([x[1] for x in listed if x[0] == "c"] == made["c"], "newest first")
    check([x[2] for x in listed if x[0] == "ab"] == [True, False, False], "one latest per key")
    full = s3.list_object_versions(Bucket=b)
    check(len(full["Versions"]) == 12 and len(full["DeleteMarkers"]) == 1, "unpaged counts")
    page = s3.list_object_versions(Bucket=b, Delimiter="/", Prefix="a")
    check([p["Prefix"] for p in page.get("CommonPrefixes", [])] == ["a/"], "common prefix")
    check(sorted({v["Key"] for v in page["Versions"]}) == ["a", "ab"], "delimited keys")
    page = s3.list_object_versions(Bucket=b, KeyMarker="a/c")
    check(page["Versions"][0]["Key"] == "ab", "key marker skips the marker key")
    page = s3.list_object_versions(Bucket=b, KeyMarker="c", VersionIdMarker=made["c"][0])
    check([v["VersionId"] for v in page["Versions"]] == made["c"][1:], "version id marker")
    check(not page["Versions"][0]["IsLatest"], "continued key is not latest")
    # Asked for explicitly, boto3 leaves the URL encoding to the caller.
    raw = s3.list_object_versions(Bucket=b, Prefix="b+", EncodingType="url")
    check([v["Key"] for v in raw["Versions"]] == ["b%2Bc", "b%2Bc"], f"url-encoded: {raw}")
    check(raw["Prefix"] == "b%2B", "url-encoded prefix")
    nuke(b)


def test_delete_objects_versions():
    b = new_bucket("Enabled")
    ids = [s3.put_object(Bucket=b, Key="k", Body=str(i))["VersionId"] for i in range(2)]
    answer = s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "m"}]})
    made = answer["Deleted"][0]
    check(made["DeleteMarker"] and made["DeleteMarkerVersionId"], f"marker made: {made}")
    objects = [{"Key": "k", "VersionId": v} for v in ids]
    objects.append({"Key": "m", "VersionId": made["DeleteMarkerVersionId"]})
    for round_ in range(2):  # the second time every version is gone already: still no error
        answer = s3.delete_objects(Bucket=b, Delete={"Objects": objects})
        check("Errors" not in answer and len(answer["Deleted"]) == 3, f"answer {answer}")
        echoed = {(d["Key"], d["VersionId"]) for d in answer["Deleted"]}
        check(echoed == {(o["Key"], o["VersionId"]) for o in objects}, "version ids echoed")
        marker = [d for d in answer["Deleted"] if d["Key"] == "m"][0]
        check(marker.get("DeleteMarker", False) == (round_ == 0), f"marker removal {marker}")
    page = s3.list_object_versions(Bucket=b)
    check("Versions" not in page and "DeleteMarkers" not in page, f"left: {page}")
    s3.delete_bucket(Bucket=b)


def test_acl_copy_and_multipart_versions():
    b = new_bucket("Enabled")
    ids = [s3.put_object(Bucket=b, Key="k", Body=f"v{i}")["VersionId"] for i in range(2)]
    s3.put_object_acl(Bucket=b, Key="k", VersionId=ids[0], ACL="public-read")
    grants = s3.get_object_acl(Bucket=b, Key="k", VersionId=ids[0])["Grants"]
    check(any(g["Grantee"].get("URI", "").endswith("AllUsers") for g in grants), "version acl")
    latest = s3.get_object_acl(Bucket=b, Key="k")["Grants"]
    check(not any("URI" in g["Grantee"] for g in latest), "latest acl untouched")
    before = all_versions(b)
    s3.put_object_acl(Bucket=b, Key="k", ACL="public-read")
    check(all_versions(b) == before, "an ACL change makes no version")
    copied = s3.copy_object(Bucket=b, Key="c", CopySource={"Bucket": b, "Key": "k",
                                                              "VersionId": ids[0]})
    check(copied["CopySourceVersionId"] == ids[0] and copied["VersionId"], "copy answer")
    check(s3.get_object(Bucket=b, Key="c")["Body"].read() == b"v0", "copied old version")
    upload = s3.create_multipart_upload(Bucket=b, Key="m")["UploadId"]
    part = s3.upload_part(Bucket=b, Key="m", UploadId=upload, PartNumber=1, Body=b"x" * 10)
    done = s3.complete_multipart_upload(
        Bucket=b, Key="m", UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    check(done["VersionId"] == s3.head_object(Bucket=b, Key="m")["VersionId"], "multipart id")
    nuke(b)


def phase_data():
    """Five versions of one key, two of them removed, one delete marker: three data objects."""
    s3.create_bucket(Bucket=DATA_BUCKET)
    s3.put_bucket_versioning(Bucket=DATA_BUCKET, VersioningConfiguration={"Status": "Enabled"})
    ids = [s3.put_object(Bucket=DATA_BUCKET, Key="k", Body=f"data {i}")["VersionId"]
           for i in range(5)]
    s3.delete_object(Bucket=DATA_BUCKET, Key="k", VersionId=ids[1])
    s3.delete_objects(Bucket=DATA_BUCKET, Delete={"Objects": [{"Key": "k", "VersionId": ids[4]}]})
    s3.delete_object(Bucket=DATA_BUCKET, Key="k")
    print("LIVE 3", flush=True)


def main():
    phase = sys.argv[1]
    if phase == "data":
        phase_data()
        return
    failed = []
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_")]
    for name, fn in tests:
        try:
            fn()
            print(f"PASS {name}", flush=True)
        except Exception:
            failed.append(name)
            print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
    for bucket in [x["Name"] for x in s3.list_buckets()["Buckets"]]:
        nuke(bucket)
    print(f"{len(tests) - len(failed)} passed, {len(failed)} failed: {failed}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
