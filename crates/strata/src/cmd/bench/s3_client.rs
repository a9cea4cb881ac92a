//! A small, fast S3 client for `strata bench s3`: one keep-alive HTTP/1.1 connection (hyper)
//! per benchmark task, path-style requests signed with AWS Signature V4 (header form).
//!
//! Why not boto3 or the AWS SDK: at thousands of requests per second on two shared cores the
//! client must cost far less than the servers it compares, and it must be the same client for
//! strata and radosgw. The payload hash is computed once per object size (every PUT of a
//! size sends the same bytes) and sent in `x-amz-content-sha256`, so each server still
//! verifies a signed payload as it would for boto3 over plain HTTP.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use hmac::{Hmac, KeyInit, Mac};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use sha2::{Digest, Sha256};

/// SHA-256 of the empty body (GET, bucket creation).
pub const EMPTY_SHA256_HEX: &str =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// Who signs the requests.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub access_key: String,
    pub secret_key: String,
    /// SigV4 region (`us-east-1` for both strata and radosgw's default zonegroup).
    pub region: String,
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 15)]));
    }
    out
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// `YYYYMMDDTHHMMSSZ` of `unix_s` (UTC), the form of `x-amz-date`.
pub fn amz_date(unix_s: u64) -> String {
    // Howard Hinnant's days-to-civil algorithm.
    let days = (unix_s / 86_400) as i64;
    let seconds_of_day = unix_s % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        seconds_of_day / 3600,
        seconds_of_day / 60 % 60,
        seconds_of_day % 60
    )
}

/// The `Authorization` header of a request whose signed headers are `headers` (lowercase
/// names, sorted, values trimmed; must include `host`, `x-amz-content-sha256` and
/// `x-amz-date`). `path` is already URI-encoded; there is no query string.
pub fn authorization(
    credentials: &Credentials,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    amz_date: &str,
    payload_sha256_hex: &str,
) -> String {
    let day = amz_date.get(..8).unwrap_or(amz_date);
    let canonical_headers: String = headers
        .iter()
        .map(|(name, value)| format!("{name}:{value}\n"))
        .collect();
    let signed_headers = headers
        .iter()
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join(";");
    let canonical_request =
        format!("{method}\n{path}\n\n{canonical_headers}\n{signed_headers}\n{payload_sha256_hex}");
    let scope = format!("{day}/{}/s3/aws4_request", credentials.region);
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        sha256_hex(canonical_request.as_bytes())
    );
    let mut key = hmac_sha256(
        format!("AWS4{}", credentials.secret_key).as_bytes(),
        day.as_bytes(),
    );
    for part in [credentials.region.as_str(), "s3", "aws4_request"] {
        key = hmac_sha256(&key, part.as_bytes());
    }
    let signature = hex(&hmac_sha256(&key, string_to_sign.as_bytes()));
    format!(
        "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
        credentials.access_key
    )
}

/// One keep-alive connection to an S3 endpoint.
pub struct S3Connection {
    address: SocketAddr,
    host: String,
    credentials: Arc<Credentials>,
    sender: SendRequest<Full<Bytes>>,
}

async fn handshake(address: SocketAddr) -> Result<SendRequest<Full<Bytes>>> {
    let stream = tokio::net::TcpStream::connect(address)
        .await
        .with_context(|| format!("connecting to {address}"))?;
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .context("HTTP handshake")?;
    tokio::spawn(async move {
        // The connection ends when the sender is dropped or the server closes it; a request
        // in flight then fails and reports the error.
        let _ = connection.await;
    });
    Ok(sender)
}

impl S3Connection {
    pub async fn connect(address: SocketAddr, credentials: Arc<Credentials>) -> Result<Self> {
        Ok(Self {
            address,
            host: address.to_string(),
            credentials,
            sender: handshake(address).await?,
        })
    }

    /// Creates bucket `bucket`.
    pub async fn create_bucket(&mut self, bucket: &str) -> Result<()> {
        self.send("PUT", &format!("/{bucket}"), Bytes::new(), EMPTY_SHA256_HEX)
            .await
            .map(|_| ())
    }

    /// PUTs `body` (whose SHA-256 is `body_sha256_hex`) as `bucket/key`.
    pub async fn put(
        &mut self,
        bucket: &str,
        key: &str,
        body: Bytes,
        body_sha256_hex: &str,
    ) -> Result<()> {
        self.send("PUT", &format!("/{bucket}/{key}"), body, body_sha256_hex)
            .await
            .map(|_| ())
    }

    /// GETs `bucket/key` whole.
    pub async fn get(&mut self, bucket: &str, key: &str) -> Result<Bytes> {
        self.send(
            "GET",
            &format!("/{bucket}/{key}"),
            Bytes::new(),
            EMPTY_SHA256_HEX,
        )
        .await
    }

    /// Sends one signed request and returns the body of a 2xx answer; other statuses are
    /// errors carrying the server's text. A connection the server closed is reopened once.
    async fn send(
        &mut self,
        method: &str,
        path: &str,
        body: Bytes,
        payload_sha256_hex: &str,
    ) -> Result<Bytes> {
        let (status, content) = self.request(method, path, body, payload_sha256_hex).await?;
        if !(200..300).contains(&status) {
            bail!(
                "{method} {path}: {status}: {}",
                String::from_utf8_lossy(&content[..content.len().min(500)])
            );
        }
        Ok(content)
    }

    /// Sends one signed request and returns the answer's status and body, whatever the
    /// status; only a failed connection is an error. A connection the server closed is
    /// reopened once.
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Bytes,
        payload_sha256_hex: &str,
    ) -> Result<(u16, Bytes)> {
        if self.sender.is_closed() || self.sender.ready().await.is_err() {
            self.sender = handshake(self.address).await?;
        }
        let unix_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let date = amz_date(unix_s);
        let headers = [
            ("host", self.host.as_str()),
            ("x-amz-content-sha256", payload_sha256_hex),
            ("x-amz-date", date.as_str()),
        ];
        let authorization = authorization(
            &self.credentials,
            method,
            path,
            &headers,
            &date,
            payload_sha256_hex,
        );
        let request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", &self.host)
            .header("x-amz-content-sha256", payload_sha256_hex)
            .header("x-amz-date", &date)
            .header("authorization", authorization)
            .header("content-length", body.len())
            .body(Full::new(body))?;
        let response = self
            .sender
            .send_request(request)
            .await
            .with_context(|| format!("{method} {path}"))?;
        let status = response.status();
        let content = response
            .into_body()
            .collect()
            .await
            .with_context(|| format!("{method} {path}: reading the answer"))?
            .to_bytes();
        Ok((status.as_u16(), content))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_civil_time() {
        assert_eq!(amz_date(0), "19700101T000000Z");
        assert_eq!(amz_date(1_369_353_600), "20130524T000000Z");
        assert_eq!(amz_date(951_782_400 + 3661), "20000229T010101Z");
        assert_eq!(amz_date(1_798_761_599), "20261231T235959Z");
    }

    /// AWS's documented SigV4 example "GET Object" (examplebucket, Range bytes=0-9).
    #[test]
    fn signature_matches_the_aws_example() {
        let credentials = Credentials {
            access_key: "AKIAIOSFODNN7EXAMPLE".into(),
            secret_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
            region: "us-east-1".into(),
        };
        let header = authorization(
            &credentials,
            "GET",
            "/test.txt",
            &[
                ("host", "examplebucket.s3.amazonaws.com"),
                ("range", "bytes=0-9"),
                ("x-amz-content-sha256", EMPTY_SHA256_HEX),
                ("x-amz-date", "20130524T000000Z"),
            ],
            "20130524T000000Z",
            EMPTY_SHA256_HEX,
        );
        assert_eq!(
            header,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
        assert_eq!(sha256_hex(b""), EMPTY_SHA256_HEX);
    }
}
