"""Issue 43's S3 probes, driven by crates/gateway/tests/hygiene.rs against a gateway whose
users' secret keys are sealed with a master key.

- Signing with a user's key works (the gateway opens the sealed secret): bucket, put, get,
  DeleteObjects.
- Bodies s3s reads whole are checked only after authentication: an anonymous DeleteObjects
  with a malformed or an oversized body is AccessDenied (before: MalformedXML, and a 500 for
  one over 20 MiB); a signed one over the bound is 400 MaxMessageLengthExceeded, never a 500;
  a signed malformed one is MalformedXML."""
import os
import socket
import urllib.parse

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

ENDPOINT = os.environ["S3_ENDPOINT"]
AK, SK = os.environ["AK"], os.environ["SK"]
BOUND = int(os.environ["XML_BODY_MAX_BYTES"])
BUCKET = "hygiene"

s3 = boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1",
                  aws_access_key_id=AK, aws_secret_access_key=SK,
                  config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
s3.create_bucket(Bucket=BUCKET)
s3.put_object(Bucket=BUCKET, Key="a", Body=b"sealed secrets still sign")
assert s3.get_object(Bucket=BUCKET, Key="a")["Body"].read() == b"sealed secrets still sign"


def send(body, signed, body_bytes=None):
    """POST /BUCKET?delete with `body`, or with `body_bytes` bytes of filler announced with
    `Expect: 100-continue` and sent only if the server asks for it: (status, reply)."""
    url = f"{ENDPOINT}/{BUCKET}?delete"
    length = len(body) if body_bytes is None else body_bytes
    headers = {"Content-Length": str(length), "Content-Type": "application/xml"}
    if body_bytes is not None:
        headers["Expect"] = "100-continue"
    if signed:
        request = AWSRequest(method="POST", url=url, data=b"", headers=dict(headers))
        request.headers["X-Amz-Content-SHA256"] = "UNSIGNED-PAYLOAD"
        SigV4Auth(Credentials(AK, SK), "s3", "us-east-1").add_auth(request)
        headers = dict(request.headers.items())
        headers["Content-Length"] = str(length)
    parsed = urllib.parse.urlsplit(url)
    sock = socket.create_connection((parsed.hostname, parsed.port), timeout=60)
    head = f"POST {parsed.path}?{parsed.query} HTTP/1.1\r\nHost: {parsed.netloc}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
    sock.sendall(head.encode())
    reader = sock.makefile("rb")
    if body_bytes is None:
        sock.sendall(body)
    status, reply_headers = read_head(reader)
    if status == 100:
        chunk = b"<" * (1 << 20)
        sent = 0
        while sent < body_bytes:
            piece = chunk[: min(len(chunk), body_bytes - sent)]
            sock.sendall(piece)
            sent += len(piece)
        status, reply_headers = read_head(reader)
    reply = reader.read(int(reply_headers.get("content-length", "0"))).decode(errors="replace")
    sock.close()
    return status, reply


def read_head(reader):
    """A response's status line and headers."""
    status = int(reader.readline().split()[1])
    headers = {}
    while True:
        line = reader.readline().decode().strip()
        if not line:
            return status, headers
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()


MALFORMED = b"<Delete><Object><Key>a</Key></Object"
for signed, expected_status, expected_code in [
    (False, 403, "AccessDenied"),
    (True, 400, "MalformedXML"),
]:
    status, reply = send(MALFORMED, signed)
    assert status == expected_status and expected_code in reply, (signed, status, reply)

over = BOUND + (1 << 20)
status, reply = send(None, False, body_bytes=over)
assert status == 403 and "AccessDenied" in reply, (status, reply)
status, reply = send(None, True, body_bytes=over)
assert status == 400 and "MaxMessageLengthExceeded" in reply, (status, reply)

deleted = s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": "a"}]})
assert [d["Key"] for d in deleted["Deleted"]] == ["a"], deleted
s3.delete_bucket(Bucket=BUCKET)
print("hygiene: ok")
