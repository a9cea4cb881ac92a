"""CompleteMultipartUpload retried after a crash between its commit and the upload's removal.
Driven by crates/gateway/tests/complete_retry.rs, one phase per run:
  start     bucket with versioning, an upload of two parts; prints UPLOAD <id>
  complete  completes it; prints DONE <etag> <version>
  retry     completes it again (the test restored the upload's records, as a crash leaves
            them): the same object, not a second version sharing the first one's data"""
import os
import sys

import boto3
from botocore.config import Config

s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"], region_name="us-east-1",
                  aws_access_key_id=os.environ["AK"], aws_secret_access_key=os.environ["SK"],
                  config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
MB = 1 << 20
BUCKET, KEY = "retry", "big"


def body():
    return b"".join(bytes([i % 251]) * (64 * 1024) for i in range(80)) + b"tail" * 300


def complete(upload):
    parts = s3.list_parts(Bucket=BUCKET, Key=KEY, UploadId=upload)["Parts"]
    done = s3.complete_multipart_upload(
        Bucket=BUCKET, Key=KEY, UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]}
                                   for p in parts]})
    return done["ETag"], done.get("VersionId")


phase = sys.argv[1]
if phase == "start":
    s3.create_bucket(Bucket=BUCKET)
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    data = body()
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=KEY)["UploadId"]
    s3.upload_part(Bucket=BUCKET, Key=KEY, UploadId=upload, PartNumber=1, Body=data[:5 * MB])
    s3.upload_part(Bucket=BUCKET, Key=KEY, UploadId=upload, PartNumber=2, Body=data[5 * MB:])
    print("UPLOAD", upload)
elif phase == "complete":
    etag, version = complete(sys.argv[2])
    print("DONE", etag, version)
elif phase == "retry":
    upload, etag, version = sys.argv[2:5]
    listed = s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
    assert [u["UploadId"] for u in listed] == [upload], f"the crash left the upload: {listed}"
    again = complete(upload)
    assert again == (etag, version), f"retry answered {again}, first {(etag, version)}"
    versions = s3.list_object_versions(Bucket=BUCKET)["Versions"]
    assert [v["VersionId"] for v in versions] == [version], f"versions: {versions}"
    assert not s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads"), "upload still listed"
    assert s3.get_object(Bucket=BUCKET, Key=KEY)["Body"].read() == body()
    print("ONE OBJECT")
