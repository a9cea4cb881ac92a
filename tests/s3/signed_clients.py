"""Signing clients against a gateway with authentication on or off (argv[1]: "on" | "off").
Driven by crates/gateway/tests/s3_no_auth.rs.

Off (`strata serve --s3-no-auth`): boto3 and the aws CLI always sign; their signatures are
ignored and the requests served (put, get, list, multipart, copy, a presigned URL, browser
form uploads signed with SigV2 or SigV4 fields, a malformed Range ignored). A body
framed as aws-chunked (signed chunks, or the unsigned trailer form botocore uses over TLS) is
refused with 400 and nothing is stored: its framing must never become the object's data.
On: the unsigned-trailer form is decoded (the object holds the data only), a wrong secret is
still refused, and an anonymous aws-chunked PUT (which s3s would not decode) is refused."""
import http.client
import os
import sys
import urllib.parse
import urllib.request

import boto3
import botocore.httpchecksum
from botocore.config import Config
from botocore.exceptions import ClientError

MODE = sys.argv[1]
ENDPOINT = os.environ["S3_ENDPOINT"]


def client(secret=None, https_checksums=False, **config):
    return boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1",
                        aws_access_key_id=os.environ["AK"],
                        aws_secret_access_key=secret or os.environ["SK"],
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}, **config))


def error_of(call):
    try:
        call()
    except ClientError as error:
        return error.response["ResponseMetadata"]["HTTPStatusCode"], error.response["Error"]
    raise AssertionError("call succeeded")


def trailer_put(s3, bucket, key, body):
    """A PUT as botocore sends it over TLS: STREAMING-UNSIGNED-PAYLOAD-TRAILER, aws-chunked,
    a CRC32 trailer (botocore uses trailers only for https URLs; this makes it think so)."""
    real = botocore.httpchecksum.urlparse
    botocore.httpchecksum.urlparse = lambda url: real(url.replace("http://", "https://", 1))
    sent = {}

    def record(request, **_):
        sent.update({name: value.decode() if isinstance(value, bytes) else value
                     for name, value in request.headers.items()})

    s3.meta.events.register("before-send.s3.PutObject", record)
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    finally:
        botocore.httpchecksum.urlparse = real
        s3.meta.events.unregister("before-send.s3.PutObject", record)
        assert sent["X-Amz-Content-SHA256"] == "STREAMING-UNSIGNED-PAYLOAD-TRAILER", sent
        assert sent["X-Amz-Trailer"] == "x-amz-checksum-crc32", sent


def raw_request(method, path, headers, body):
    url = urllib.parse.urlparse(ENDPOINT)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    answer = (response.status, response.read().decode(errors="replace"))
    connection.close()
    return answer


s3 = client()
bucket = f"signed-{MODE}"
s3.create_bucket(Bucket=bucket)

if MODE == "off":
    data = os.urandom(100_000)
    s3.put_object(Bucket=bucket, Key="a/one", Body=data)
    assert s3.get_object(Bucket=bucket, Key="a/one")["Body"].read() == data
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["a/one"]
    assert [o["Key"] for o in s3.list_objects(Bucket=bucket)["Contents"]] == ["a/one"]
    assert s3.head_object(Bucket=bucket, Key="a/one")["ContentLength"] == len(data)
    s3.copy_object(Bucket=bucket, Key="a/two", CopySource={"Bucket": bucket, "Key": "a/one"})
    assert s3.get_object(Bucket=bucket, Key="a/two")["Body"].read() == data
    upload = s3.create_multipart_upload(Bucket=bucket, Key="multi")["UploadId"]
    part = s3.upload_part(Bucket=bucket, Key="multi", UploadId=upload, PartNumber=1, Body=b"xyz")
    s3.complete_multipart_upload(Bucket=bucket, Key="multi", UploadId=upload, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    assert s3.get_object(Bucket=bucket, Key="multi")["Body"].read() == b"xyz"
    # The signature gone, a malformed Range is ignored as S3 ignores it (s3s answered 400).
    got = s3.get_object(Bucket=bucket, Key="a/one", Range="bytes=abc")
    assert got["Body"].read() == data and "ContentRange" not in got, got
    # Browser form uploads (POST object): unsigned, and signed with SigV2 or SigV4 fields,
    # whose signature is ignored as a request's is (s3s answered a signed form 501).
    import base64
    import datetime
    import json
    import requests
    now = datetime.datetime.now(datetime.timezone.utc)
    expiration = (now + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    credential = f"any-key/{now:%Y%m%d}/us-east-1/s3/aws4_request"
    amz_date = f"{now:%Y%m%dT%H%M%SZ}"
    policy = base64.b64encode(json.dumps({"expiration": expiration, "conditions": [
        {"bucket": bucket}, ["starts-with", "$key", "form/"], {"x-amz-algorithm": "AWS4-HMAC-SHA256"},
        {"x-amz-credential": credential}, {"x-amz-date": amz_date}]}).encode()).decode()
    policy_v2 = base64.b64encode(json.dumps({"expiration": expiration, "conditions": [
        {"bucket": bucket}, ["starts-with", "$key", "form/"]]}).encode()).decode()
    forms = {
        "form/unsigned": {},
        "form/v2": {"AWSAccessKeyId": "any-key", "policy": policy_v2, "signature": "bm90LWNoZWNrZWQ="},
        "form/v4": {"policy": policy, "x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-credential": credential,
                    "x-amz-date": amz_date, "x-amz-signature": "0" * 64},
    }
    for key, fields in forms.items():
        got = requests.post(f"{ENDPOINT}/{bucket}", data={"key": key, **fields},
                            files={"file": ("f.txt", key.encode())}, timeout=30)
        assert got.status_code == 204, (key, got.status_code, got.text)
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == key.encode(), key
    # The policy is still checked: a key it does not allow is refused, nothing stored.
    got = requests.post(f"{ENDPOINT}/{bucket}", data={"key": "elsewhere", **forms["form/v4"]},
                        files={"file": ("f.txt", b"x")}, timeout=30)
    assert got.status_code == 403, (got.status_code, got.text)
    status, _ = error_of(lambda: s3.head_object(Bucket=bucket, Key="elsewhere"))
    assert status == 404, status
    # Any keys will do: nothing is checked.
    other = client(secret="not-the-secret")
    assert other.get_object(Bucket=bucket, Key="a/one")["Body"].read() == data
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "a/one"})
    assert urllib.request.urlopen(url).read() == data
    expired = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "a/one"},
                                        ExpiresIn=-10)
    assert urllib.request.urlopen(expired).read() == data

    # Signed chunks (STREAMING-AWS4-HMAC-SHA256-PAYLOAD, as the Java and Go SDKs send over
    # http): refused, nothing stored.
    zeros = "0" * 64
    status, text = raw_request("PUT", f"/{bucket}/chunked", {
        "Authorization": "AWS4-HMAC-SHA256 Credential=AK/20261127/us-east-1/s3/aws4_request, "
                         f"SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={zeros}",
        "x-amz-date": "20261127T000000Z",
        "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
        "Content-Encoding": "aws-chunked",
        "x-amz-decoded-content-length": "5",
    }, f"5;chunk-signature={zeros}\r\nhello\r\n0;chunk-signature={zeros}\r\n\r\n".encode())
    assert status == 400 and "aws-chunked" in text, (status, text)
    status, _ = error_of(lambda: s3.head_object(Bucket=bucket, Key="chunked"))
    assert status == 404, status
    # The unsigned trailer form: refused too, nothing stored.
    status, error = error_of(lambda: trailer_put(s3, bucket, "trailer", b"hello"))
    assert status == 400 and "aws-chunked" in error["Message"], (status, error)
    status, _ = error_of(lambda: s3.head_object(Bucket=bucket, Key="trailer"))
    assert status == 404, status
else:
    trailer_put(s3, bucket, "trailer", b"hello")
    assert s3.get_object(Bucket=bucket, Key="trailer")["Body"].read() == b"hello"
    status, error = error_of(lambda: client(secret="not-the-secret").list_objects_v2(Bucket=bucket))
    assert status == 403 and error["Code"] == "SignatureDoesNotMatch", (status, error)
    # An anonymous aws-chunked PUT into a bucket anyone may write: s3s decodes the framing only
    # while it checks a signature, so it is refused (400) rather than stored framing and all.
    s3.put_bucket_acl(Bucket=bucket, ACL="public-read-write")
    status, text = raw_request("PUT", f"/{bucket}/anonymous-chunked", {
        "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        "Content-Encoding": "aws-chunked",
        "x-amz-decoded-content-length": "5",
    }, b"5\r\nhello\r\n0\r\n\r\n")
    assert status == 400 and "aws-chunked" in text, (status, text)
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert "anonymous-chunked" not in listed, listed
    s3.put_bucket_acl(Bucket=bucket, ACL="private")

for key in [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]:
    s3.delete_object(Bucket=bucket, Key=key)
s3.delete_bucket(Bucket=bucket)
print("SIGNED CLIENTS OK", MODE)
