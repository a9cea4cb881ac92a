//! A minimal blocking HTTP/1.1 client for the admin API (one request per connection), so the
//! CLI needs no async runtime. Errors say what to do: a refused connection names the address
//! and asks whether `strata serve` is running; an error reply shows the server's message.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Characters left as they are in a path segment.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encodes one path segment (object names may hold `/`).
pub fn segment(text: &str) -> String {
    utf8_percent_encode(text, SEGMENT).to_string()
}

/// A reply.
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Body.
    pub body: Vec<u8>,
}

/// The admin endpoint at one address.
#[derive(Clone)]
pub struct Client {
    addr: String,
    /// How long to wait for a reply (scrub of a big cluster may take long). Default 600 s.
    pub timeout: Duration,
    /// The admin token, sent as `Authorization: Bearer` when known.
    pub token: Option<String>,
    /// Where the token is looked for, said when the server refuses it.
    pub token_hint: String,
}

impl Client {
    /// A client for `addr` (host:port).
    pub fn new(addr: &str) -> Self {
        Self {
            addr: addr.to_string(),
            timeout: Duration::from_secs(600),
            token: None,
            token_hint: String::new(),
        }
    }

    /// Sends a request; returns the reply whatever its status.
    pub fn send(&self, method: &str, path: &str, body: &[u8]) -> Result<Reply> {
        let unreachable = || {
            format!(
                "cannot reach strata at {}: is `strata serve` running?",
                self.addr
            )
        };
        let addrs: Vec<_> = self
            .addr
            .to_socket_addrs()
            .with_context(|| format!("bad admin address {:?}", self.addr))?
            .collect();
        let mut stream = None;
        let mut last_error = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
                Ok(connected) => {
                    stream = Some(connected);
                    break;
                }
                Err(error) => last_error = Some(error),
            }
        }
        let mut stream = match (stream, last_error) {
            (Some(stream), _) => stream,
            (None, Some(error)) => return Err(anyhow!(error).context(unreachable())),
            (None, None) => bail!("{}", unreachable()),
        };
        stream.set_read_timeout(Some(self.timeout))?;
        stream.set_write_timeout(Some(self.timeout))?;
        let authorization = self
            .token
            .as_ref()
            .map(|token| format!("Authorization: Bearer {token}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{authorization}Content-Length: {}\r\nConnection: close\r\n\r\n",
            self.addr,
            body.len()
        );
        stream
            .write_all(head.as_bytes())
            .and_then(|()| stream.write_all(body))
            .with_context(unreachable)?;
        let mut raw = Vec::new();
        stream
            .read_to_end(&mut raw)
            .with_context(|| format!("reading the reply from {}", self.addr))?;
        parse(&raw).with_context(|| format!("malformed reply from {}", self.addr))
    }

    /// Sends a request and fails with the server's error message unless it succeeded.
    pub fn call(&self, method: &str, path: &str, body: &[u8]) -> Result<Vec<u8>> {
        let reply = self.send(method, path, body)?;
        if (200..300).contains(&reply.status) {
            return Ok(reply.body);
        }
        let message = serde_json::from_slice::<serde_json::Value>(&reply.body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or_else(|| String::from_utf8_lossy(&reply.body).into_owned());
        if reply.status == 401 && !self.token_hint.is_empty() {
            let found = if self.token.is_some() {
                "the admin token found was refused"
            } else {
                "no admin token was found"
            };
            // The server's message says where a token comes from in general; the hint says
            // where this CLI looked.
            bail!("{found}: {} (HTTP 401)", self.token_hint)
        }
        bail!("{message} (HTTP {})", reply.status)
    }

    /// [`Client::call`] decoding a JSON reply.
    pub fn json<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Result<T> {
        let bytes = self.call(method, path, body)?;
        serde_json::from_slice(&bytes).context("decoding the server's JSON reply")
    }
}

/// Parses a whole HTTP/1.1 response (Content-Length, chunked, or until close).
fn parse(raw: &[u8]) -> Result<Reply> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow!("no end of headers"))?;
    let head = std::str::from_utf8(&raw[..end]).context("headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("bad status line {status_line:?}"))?;
    let mut length = None;
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.parse::<usize>().context("bad Content-Length")?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.eq_ignore_ascii_case("chunked");
        }
    }
    let rest = &raw[end + 4..];
    let body = if chunked {
        dechunk(rest)?
    } else if let Some(length) = length {
        if rest.len() < length {
            bail!("body cut short: {} of {length} bytes", rest.len());
        }
        rest[..length].to_vec()
    } else {
        rest.to_vec()
    };
    Ok(Reply { status, body })
}

fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| anyhow!("chunk size line cut short"))?;
        let size_text = std::str::from_utf8(&rest[..line_end])?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .context("bad chunk size")?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        if rest.len() < size + 2 {
            bail!("chunk cut short");
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lengths_and_chunks() {
        let reply = parse(b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\nok").unwrap();
        assert_eq!((reply.status, reply.body.as_slice()), (404, &b"ok"[..]));
        let reply = parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n1\r\nd\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(reply.body, b"abcd");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
    }
}
