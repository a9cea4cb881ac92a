"""Bucket lifecycle against a gateway whose lifecycle day lasts LC_DAY_S seconds
(crates/gateway/tests/s3_lifecycle.rs): the configuration operations and their errors, the
x-amz-expiration header, then what the lifecycle worker does on its own: current versions
past their days expire, noncurrent versions expire, incomplete multipart uploads are
aborted, and what no rule matches stays."""

import os
import sys
import time

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

ENDPOINT = os.environ["S3_ENDPOINT"]
MAIN = (os.environ["MAIN_AK"], os.environ["MAIN_SK"])
DAY_S = float(os.environ["LC_DAY_S"])
CONFIG = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1})

s3 = boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1",
                  aws_access_key_id=MAIN[0], aws_secret_access_key=MAIN[1], config=CONFIG)


def error_of(fn, *args, **kw):
    try:
        fn(*args, **kw)
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    raise AssertionError(f"{fn.__name__} succeeded")


def keys(bucket):
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


def versions(bucket, key):
    listed = s3.list_object_versions(Bucket=bucket, Prefix=key)
    return [v["VersionId"] for v in listed.get("Versions", [])]


def uploads(bucket):
    return sorted(u["Key"] for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []))


def put_lifecycle(bucket, rules):
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})


# The configuration operations.
s3.create_bucket(Bucket="lc-config")
assert error_of(s3.get_bucket_lifecycle_configuration, Bucket="lc-config") == \
    ("NoSuchLifecycleConfiguration", 404)
rules = [{"ID": "one", "Expiration": {"Days": 31}, "Prefix": "a/", "Status": "Enabled"},
         {"ID": "two", "Filter": {"And": {"Prefix": "b/", "Tags": [{"Key": "k", "Value": "v"}],
                                          "ObjectSizeGreaterThan": 10}},
          "NoncurrentVersionExpiration": {"NoncurrentDays": 3}, "Status": "Disabled"}]
put_lifecycle("lc-config", rules)
assert s3.get_bucket_lifecycle_configuration(Bucket="lc-config")["Rules"] == rules
for bad, expected in [
    ([{"ID": "x", "Expiration": {"Days": 0}, "Prefix": "", "Status": "Enabled"}], "InvalidArgument"),
    ([{"ID": "x" * 256, "Expiration": {"Days": 1}, "Prefix": "", "Status": "Enabled"}], "InvalidArgument"),
    ([{"ID": "x", "Expiration": {"Days": 1}, "Prefix": "a", "Status": "Enabled"},
      {"ID": "x", "Expiration": {"Days": 1}, "Prefix": "b", "Status": "Enabled"}], "InvalidArgument"),
    ([{"ID": "x", "Expiration": {"Days": 1}, "Prefix": "", "Status": "enabled"}], "MalformedXML"),
]:
    code, status = error_of(put_lifecycle, "lc-config", bad)
    assert (code, status) == (expected, 400), (bad, code, status)
assert s3.delete_bucket_lifecycle(Bucket="lc-config")["ResponseMetadata"]["HTTPStatusCode"] == 204
assert error_of(s3.get_bucket_lifecycle_configuration, Bucket="lc-config")[1] == 404

# Expiration of current versions, and aborted uploads, in a bucket without versioning.
s3.create_bucket(Bucket="lc-plain")
put_lifecycle("lc-plain", [
    {"ID": "expire", "Expiration": {"Days": 1}, "Filter": {"Prefix": "expire/"}, "Status": "Enabled"},
    {"ID": "uploads", "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
     "Filter": {"Prefix": "tmp/"}, "Status": "Enabled"},
])
for key in ["expire/a", "expire/b", "keep/c"]:
    s3.put_object(Bucket="lc-plain", Key=key, Body=b"x" * 100)
head = s3.head_object(Bucket="lc-plain", Key="expire/a")
header = head["ResponseMetadata"]["HTTPHeaders"].get("x-amz-expiration", "")
assert 'rule-id="expire"' in header, header
assert "x-amz-expiration" not in s3.head_object(Bucket="lc-plain", Key="keep/c")["ResponseMetadata"]["HTTPHeaders"]
s3.create_multipart_upload(Bucket="lc-plain", Key="tmp/upload")
s3.create_multipart_upload(Bucket="lc-plain", Key="keep/upload")

# Noncurrent versions in a versioned bucket.
s3.create_bucket(Bucket="lc-versions")
s3.put_bucket_versioning(Bucket="lc-versions", VersioningConfiguration={"Status": "Enabled"})
for body in [b"1", b"2", b"3"]:
    s3.put_object(Bucket="lc-versions", Key="v/k", Body=body)
    s3.put_object(Bucket="lc-versions", Key="other/k", Body=body)
put_lifecycle("lc-versions", [
    {"ID": "noncurrent", "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
     "Filter": {"Prefix": "v/"}, "Status": "Enabled"},
])
assert len(versions("lc-versions", "v/k")) == 3

deadline = time.time() + 20 * DAY_S + 30
while time.time() < deadline:
    if keys("lc-plain") == ["keep/c"] and uploads("lc-plain") == ["keep/upload"] \
            and len(versions("lc-versions", "v/k")) == 1:
        break
    time.sleep(0.5)
assert keys("lc-plain") == ["keep/c"], keys("lc-plain")
assert uploads("lc-plain") == ["keep/upload"], uploads("lc-plain")
assert len(versions("lc-versions", "v/k")) == 1, versions("lc-versions", "v/k")
assert s3.get_object(Bucket="lc-versions", Key="v/k")["Body"].read() == b"3"
assert len(versions("lc-versions", "other/k")) == 3
print("lifecycle: ok")
