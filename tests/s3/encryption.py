"""Server-side encryption against a gateway started with an SSE master key and SSE-C allowed
over plain HTTP (crates/gateway/tests/s3_encryption.rs): SSE-C on PUT, GET, HEAD, ranges,
multipart, copies; SSE-S3; bucket default encryption. Leaves one SSE-S3 and one SSE-C object
whose plaintext is AT_REST_PATTERN in bucket AT_REST_BUCKET, for the Rust side to look for
in the data pool."""

import base64
import hashlib
import os
import sys
import traceback

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

ENDPOINT = os.environ["S3_ENDPOINT"]
MAIN = (os.environ["MAIN_AK"], os.environ["MAIN_SK"])
AT_REST_BUCKET = os.environ["AT_REST_BUCKET"]
AT_REST_PATTERN = os.environ["AT_REST_PATTERN"].encode()
CONFIG = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1})

s3 = boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1",
                  aws_access_key_id=MAIN[0], aws_secret_access_key=MAIN[1], config=CONFIG)
counter = [0]


def customer_headers(key, prefix="x-amz-server-side-encryption-customer-"):
    return {prefix + "algorithm": "AES256",
            prefix + "key": base64.b64encode(key).decode(),
            prefix + "key-MD5": base64.b64encode(hashlib.md5(key).digest()).decode()}


class Headers:
    """Adds headers to every call (boto3 refuses SSE-C parameters over plain HTTP, as
    ceph/s3-tests works around the same way)."""

    def __init__(self, headers):
        self.headers = headers

    def __enter__(self):
        self.handler = lambda params, **kw: params["headers"].update(self.headers)
        s3.meta.events.register("before-call.s3", self.handler)

    def __exit__(self, *exc):
        s3.meta.events.unregister("before-call.s3", self.handler)


def new_bucket():
    counter[0] += 1
    name = f"strata-sse-{os.getpid()}-{counter[0]}"
    s3.create_bucket(Bucket=name)
    return name


def error_of(fn, *args, **kw):
    try:
        fn(*args, **kw)
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    raise AssertionError("expected an error")


def check(cond, what=""):
    if not cond:
        raise AssertionError(what)


def test_sse_c_put_get_head_ranges():
    b = new_bucket()
    key, other = os.urandom(32), os.urandom(32)
    data = os.urandom(200_000)
    with Headers(customer_headers(key)):
        answer = s3.put_object(Bucket=b, Key="o", Body=data)
        check(answer["ResponseMetadata"]["HTTPHeaders"]
              ["x-amz-server-side-encryption-customer-algorithm"] == "AES256", answer)
        got = s3.get_object(Bucket=b, Key="o")
        check(got["Body"].read() == data)
        check(got["ETag"].strip('"') == hashlib.md5(data).hexdigest(), got["ETag"])
        for start, end in [(0, 0), (65_535, 65_537), (131_000, 199_999), (5, 150_000)]:
            got = s3.get_object(Bucket=b, Key="o", Range=f"bytes={start}-{end}")
            check(got["Body"].read() == data[start:end + 1], (start, end))
        head = s3.head_object(Bucket=b, Key="o")
        check(head["ContentLength"] == len(data), head)
    check(error_of(s3.get_object, Bucket=b, Key="o")[1] == 400)
    check(error_of(s3.head_object, Bucket=b, Key="o")[1] == 400)
    with Headers(customer_headers(other)):
        check(error_of(s3.get_object, Bucket=b, Key="o")[1] == 400)
    listed = s3.list_objects_v2(Bucket=b)["Contents"]
    check(listed[0]["Size"] == len(data), listed)
    # A key whose MD5 does not match, or of another length, is refused.
    bad = customer_headers(key)
    bad["x-amz-server-side-encryption-customer-key-MD5"] = base64.b64encode(b"0" * 16).decode()
    with Headers(bad):
        check(error_of(s3.put_object, Bucket=b, Key="bad", Body=b"x")[1] == 400)
    with Headers(customer_headers(os.urandom(16))):
        check(error_of(s3.put_object, Bucket=b, Key="bad", Body=b"x")[1] == 400)
    # An object in the clear is not read with a key.
    s3.put_object(Bucket=b, Key="plain", Body=b"plain")
    with Headers(customer_headers(key)):
        check(error_of(s3.get_object, Bucket=b, Key="plain")[1] == 400)


def test_sse_c_multipart_and_copies():
    b = new_bucket()
    key, other = os.urandom(32), os.urandom(32)
    parts = [os.urandom(5 * 1024 * 1024 + 1), os.urandom(70_000)]
    data = b"".join(parts)
    with Headers(customer_headers(key)):
        upload = s3.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
        etags = [s3.upload_part(Bucket=b, Key="mp", UploadId=upload, PartNumber=i + 1,
                                Body=p)["ETag"] for i, p in enumerate(parts)]
    with Headers(customer_headers(other)):
        got = error_of(s3.upload_part, Bucket=b, Key="mp", UploadId=upload, PartNumber=3,
                       Body=b"x")
        check(got[1] == 400, got)
    s3.complete_multipart_upload(
        Bucket=b, Key="mp", UploadId=upload,
        MultipartUpload={"Parts": [{"ETag": e, "PartNumber": i + 1} for i, e in enumerate(etags)]})
    with Headers(customer_headers(key)):
        check(s3.get_object(Bucket=b, Key="mp")["Body"].read() == data)
        edge = len(parts[0])
        got = s3.get_object(Bucket=b, Key="mp", Range=f"bytes={edge - 10}-{edge + 10}")
        check(got["Body"].read() == data[edge - 10:edge + 11])
    # CopyObject: from SSE-C (its key as the copy source's) to SSE-C under another key, and
    # to SSE-S3.
    source = customer_headers(key, "x-amz-copy-source-server-side-encryption-customer-")
    with Headers({**source, **customer_headers(other)}):
        s3.copy_object(Bucket=b, Key="copy-c", CopySource={"Bucket": b, "Key": "mp"})
    with Headers(customer_headers(other)):
        check(s3.get_object(Bucket=b, Key="copy-c")["Body"].read() == data)
    with Headers(source):
        s3.copy_object(Bucket=b, Key="copy-s3", CopySource={"Bucket": b, "Key": "mp"},
                       ServerSideEncryption="AES256")
    got = s3.get_object(Bucket=b, Key="copy-s3")
    check(got["ServerSideEncryption"] == "AES256" and got["Body"].read() == data)
    check(error_of(s3.copy_object, Bucket=b, Key="x", CopySource={"Bucket": b, "Key": "mp"})[1]
          == 400)
    # UploadPartCopy from an SSE-C source into an SSE-S3 upload.
    upload = s3.create_multipart_upload(Bucket=b, Key="mp2", ServerSideEncryption="AES256")
    check(upload["ServerSideEncryption"] == "AES256", upload)
    with Headers(source):
        part = s3.upload_part_copy(Bucket=b, Key="mp2", UploadId=upload["UploadId"],
                                   PartNumber=1, CopySource={"Bucket": b, "Key": "mp"},
                                   CopySourceRange="bytes=100-70099")
    s3.complete_multipart_upload(
        Bucket=b, Key="mp2", UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"ETag": part["CopyPartResult"]["ETag"], "PartNumber": 1}]})
    check(s3.get_object(Bucket=b, Key="mp2")["Body"].read() == data[100:70100])


def test_sse_s3_and_bucket_default():
    b = new_bucket()
    data = os.urandom(100_000)
    answer = s3.put_object(Bucket=b, Key="s", Body=data, ServerSideEncryption="AES256")
    check(answer["ServerSideEncryption"] == "AES256", answer)
    got = s3.get_object(Bucket=b, Key="s", Range="bytes=70000-70009")
    check(got["Body"].read() == data[70000:70010] and got["ServerSideEncryption"] == "AES256")
    check(s3.head_object(Bucket=b, Key="s")["ServerSideEncryption"] == "AES256")
    got = error_of(s3.get_bucket_encryption, Bucket=b)
    check(got == ("ServerSideEncryptionConfigurationNotFoundError", 404), got)
    s3.put_bucket_encryption(Bucket=b, ServerSideEncryptionConfiguration={"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    rules = s3.get_bucket_encryption(Bucket=b)["ServerSideEncryptionConfiguration"]["Rules"]
    check(rules[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256", rules)
    s3.put_object(Bucket=b, Key="default", Body=b"by default")
    got = s3.get_object(Bucket=b, Key="default")
    check(got.get("ServerSideEncryption") == "AES256" and got["Body"].read() == b"by default")
    s3.delete_bucket_encryption(Bucket=b)
    check(error_of(s3.get_bucket_encryption, Bucket=b)[1] == 404)
    s3.put_object(Bucket=b, Key="clear", Body=b"clear")
    check("ServerSideEncryption" not in s3.head_object(Bucket=b, Key="clear"))
    got = error_of(s3.put_object, Bucket=b, Key="kms", Body=b"x", ServerSideEncryption="aws:kms")
    check(got[1] == 501, got)


def test_leave_objects_for_the_at_rest_check():
    s3.create_bucket(Bucket=AT_REST_BUCKET)
    data = AT_REST_PATTERN * (300_000 // len(AT_REST_PATTERN))
    s3.put_object(Bucket=AT_REST_BUCKET, Key="s3", Body=data, ServerSideEncryption="AES256")
    with Headers(customer_headers(os.urandom(32))):
        s3.put_object(Bucket=AT_REST_BUCKET, Key="c", Body=data)
    check(s3.get_object(Bucket=AT_REST_BUCKET, Key="s3")["Body"].read() == data)


def main():
    failed = []
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_")]
    for name, fn in tests:
        try:
            fn()
            print(f"PASS {name}", flush=True)
        except Exception:
            failed.append(name)
            print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
    print(f"{len(tests) - len(failed)} passed, {len(failed)} failed: {failed}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
