"""A GET that started before an overwrite or a delete reads the whole old version (the
replaced data waits for the GC). Driven by crates/gateway/tests/deferred_gc.rs."""
import os

import boto3
from botocore.config import Config

s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"], region_name="us-east-1",
                  aws_access_key_id=os.environ["AK"], aws_secret_access_key=os.environ["SK"],
                  config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
MB = 1 << 20
s3.create_bucket(Bucket="gc-wait")
for change in ("overwrite", "delete"):
    old = os.urandom(21 * MB)  # several 4 MiB pieces: the GET reads ahead only two
    s3.put_object(Bucket="gc-wait", Key=change, Body=old)
    body = s3.get_object(Bucket="gc-wait", Key=change)["Body"]
    first = body.read(64 * 1024)
    if change == "overwrite":
        s3.put_object(Bucket="gc-wait", Key=change, Body=b"new")
    else:
        s3.delete_object(Bucket="gc-wait", Key=change)
    rest = body.read()
    assert first + rest == old, f"{change}: read {len(first) + len(rest)} of {len(old)} bytes"
assert s3.get_object(Bucket="gc-wait", Key="overwrite")["Body"].read() == b"new"
print("READ WHOLE")
