//! The writers of `strata bench soak` and what they remember: each writer owns its keys (so
//! the order of its writes to a key is the order the server saw), and records for every key
//! the last acknowledged state (absent, or a length and SHA-256) and the states of writes
//! sent since then whose outcome is unknown (in flight at a kill, an error that may have
//! applied). A refusal (full, 507) is not remembered as possible: it must not apply.
//!
//! Two kinds of writer: S3 (PUT, overwrite, DELETE through the gateway with the SigV4 client
//! of `strata bench s3`) and object (PUT, DELETE of RADOS objects through the admin API, as
//! `strata put` does). Both also read their own keys back while they write: a read must give
//! the last acknowledged state or a pending one, never an older one (a flipping read).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use bytes::Bytes;
use rand::{Rng, SeedableRng};

use super::s3_client::{sha256_hex, Credentials, S3Connection, EMPTY_SHA256_HEX};
use crate::cmd::admin::client::{segment, Client};

/// A key's content as the writers know it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Absent,
    Present { length: u64, sha256: String },
}

impl State {
    fn of(bytes: &[u8]) -> Self {
        State::Present {
            length: bytes.len() as u64,
            sha256: sha256_hex(bytes),
        }
    }

    fn describe(&self) -> String {
        match self {
            State::Absent => "absent".to_string(),
            State::Present { length, sha256 } => {
                format!("{length} bytes sha256 {}", &sha256[..12])
            }
        }
    }
}

/// One key's history.
#[derive(Clone, Debug)]
pub struct Record {
    /// The last acknowledged state (absent before any write).
    pub acknowledged: State,
    /// States of writes sent after it whose outcome is unknown.
    pub pending: Vec<State>,
}

/// Where a writer writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    S3,
    Object,
}

/// Everything the writers remember and counted, shared by all of them.
#[derive(Default)]
pub struct Ledger {
    pub records: BTreeMap<(Kind, String), Record>,
    /// Acknowledged writes (PUT or DELETE).
    pub acknowledged: u64,
    /// Refusals and failures by kind (`full (507)`, `degraded (503)`...).
    pub refusals: BTreeMap<String, u64>,
    /// Reads during the run that returned neither the acknowledged nor a pending state.
    pub flipping_reads: Vec<String>,
}

impl Ledger {
    fn count(&mut self, kind: &str) {
        *self.refusals.entry(kind.to_string()).or_default() += 1;
    }

    /// Checks a read of `key` against its record: `None` when it is the acknowledged state
    /// or a pending one, else what differs.
    pub fn check(&self, kind: Kind, key: &str, read: &State) -> Option<String> {
        let record = self.records.get(&(kind, key.to_string()))?;
        if *read == record.acknowledged || record.pending.contains(read) {
            return None;
        }
        Some(format!(
            "{kind:?} {key}: read {}, acknowledged {}{}",
            read.describe(),
            record.acknowledged.describe(),
            if record.pending.is_empty() {
                String::new()
            } else {
                format!(" ({} writes in flight)", record.pending.len())
            }
        ))
    }

    /// After a verification: what was read becomes the acknowledged state (a write in
    /// flight at the kill that took effect must stay).
    pub fn settle(&mut self, kind: Kind, key: &str, read: State) {
        if let Some(record) = self.records.get_mut(&(kind, key.to_string())) {
            record.acknowledged = read;
            record.pending.clear();
        }
    }
}

/// What the writers of one run share.
pub struct Shared {
    pub ledger: Mutex<Ledger>,
    pub stop: AtomicBool,
}

/// Classifies a non-2xx answer: 507 is a refusal at full, 503 an unavailable PG, 500 with
/// an I/O error a device failure.
fn refusal_kind(status: u16, body: &[u8]) -> &'static str {
    let text = String::from_utf8_lossy(body).to_lowercase();
    match status {
        507 => "full (507)",
        503 => "unavailable (503)",
        500 if text.contains("i/o") || text.contains("eio") || text.contains("device") => {
            "device error (500)"
        }
        500 if text.contains("checksum") => "checksum (500)",
        _ => "other error",
    }
}

/// The payload of a writer's `n`th write: its length is random up to `size_max_bytes`.
fn payload(rng: &mut impl Rng, size_max_bytes: u64) -> Bytes {
    let length = rng.gen_range(1..=size_max_bytes) as usize;
    let mut bytes = vec![0u8; length];
    rng.fill(&mut bytes[..]);
    Bytes::from(bytes)
}

/// The keys writer `writer` of `kind` owns.
pub fn keys(kind: Kind, writer: usize, count: usize) -> Vec<String> {
    let prefix = match kind {
        Kind::S3 => "s3",
        Kind::Object => "obj",
    };
    (0..count)
        .map(|number| format!("{prefix}-w{writer}-k{number}"))
        .collect()
}

/// Registers every key of a run as never written.
pub fn register(ledger: &mut Ledger, kind: Kind, keys: &[String]) {
    for key in keys {
        ledger.records.entry((kind, key.clone())).or_insert(Record {
            acknowledged: State::Absent,
            pending: Vec::new(),
        });
    }
}

/// What one write or read did.
enum Outcome {
    Acknowledged,
    Refused(&'static str),
    /// The connection failed (the server was killed): the outcome is unknown.
    Unknown,
}

/// Where one writer sends its requests.
pub enum Target {
    S3 {
        connection: S3Connection,
        bucket: String,
    },
    Object {
        client: Client,
        pool: String,
    },
}

impl Target {
    /// Connects an S3 writer.
    pub async fn s3(
        address: std::net::SocketAddr,
        credentials: Arc<Credentials>,
        bucket: &str,
    ) -> Result<Self> {
        Ok(Target::S3 {
            connection: S3Connection::connect(address, credentials).await?,
            bucket: bucket.to_string(),
        })
    }

    fn kind(&self) -> Kind {
        match self {
            Target::S3 { .. } => Kind::S3,
            Target::Object { .. } => Kind::Object,
        }
    }

    /// Writes `body` (or deletes, when `None`) as `key`.
    async fn write(&mut self, key: &str, body: Option<Bytes>) -> Outcome {
        let answer = match (self, body) {
            (Target::S3 { connection, bucket }, Some(body)) => {
                let hash = sha256_hex(&body);
                connection
                    .request("PUT", &format!("/{bucket}/{key}"), body, &hash)
                    .await
            }
            (Target::S3 { connection, bucket }, None) => {
                connection
                    .request(
                        "DELETE",
                        &format!("/{bucket}/{key}"),
                        Bytes::new(),
                        EMPTY_SHA256_HEX,
                    )
                    .await
            }
            (Target::Object { client, pool }, body) => {
                let path = format!("/api/objects/{}/{}", segment(pool), segment(key));
                let (method, body) = match body {
                    Some(body) => ("PUT", body),
                    None => ("DELETE", Bytes::new()),
                };
                let deleting = method == "DELETE";
                let client = client.clone();
                tokio::task::spawn_blocking(move || client.send(method, &path, &body))
                    .await
                    .map_err(anyhow::Error::from)
                    .and_then(|reply| reply)
                    .map(|reply| {
                        // Deleting an object that is not there leaves it absent.
                        let status = if deleting && reply.status == 404 {
                            200
                        } else {
                            reply.status
                        };
                        (status, Bytes::from(reply.body))
                    })
            }
        };
        match answer {
            Ok((status, _)) if (200..300).contains(&status) => Outcome::Acknowledged,
            Ok((status, body)) => Outcome::Refused(refusal_kind(status, &body)),
            Err(_) => Outcome::Unknown,
        }
    }

    /// Reads `key`: its state, or the refusal / unknown outcome.
    pub async fn read(&mut self, key: &str) -> std::result::Result<State, Option<&'static str>> {
        let answer = match self {
            Target::S3 { connection, bucket } => {
                connection
                    .request(
                        "GET",
                        &format!("/{bucket}/{key}"),
                        Bytes::new(),
                        EMPTY_SHA256_HEX,
                    )
                    .await
            }
            Target::Object { client, pool } => {
                let path = format!("/api/objects/{}/{}", segment(pool), segment(key));
                let client = client.clone();
                tokio::task::spawn_blocking(move || client.send("GET", &path, &[]))
                    .await
                    .map_err(anyhow::Error::from)
                    .and_then(|reply| reply)
                    .map(|reply| (reply.status, Bytes::from(reply.body)))
            }
        };
        match answer {
            Ok((status, body)) if (200..300).contains(&status) => Ok(State::of(&body)),
            Ok((404, _)) => Ok(State::Absent),
            Ok((status, body)) => Err(Some(refusal_kind(status, &body))),
            Err(_) => Err(None),
        }
    }
}

/// Settings of one writer.
#[derive(Clone)]
pub struct WriterPlan {
    pub keys: Vec<String>,
    pub seed: u64,
    pub size_max_bytes: u64,
}

/// Writes, overwrites, deletes and reads back `plan.keys` until `shared.stop` or until the
/// server is gone (a failed connection).
pub async fn run_writer(mut target: Target, plan: WriterPlan, shared: Arc<Shared>) {
    let kind = target.kind();
    let mut rng = rand::rngs::StdRng::seed_from_u64(plan.seed);
    while !shared.stop.load(Ordering::Relaxed) {
        let key = &plan.keys[rng.gen_range(0..plan.keys.len())];
        let roll: f64 = rng.gen();
        if roll < 0.2 {
            match target.read(key).await {
                Ok(state) => {
                    let mut ledger = shared.ledger.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(difference) = ledger.check(kind, key, &state) {
                        ledger.flipping_reads.push(difference);
                    }
                }
                Err(Some(refusal)) => shared
                    .ledger
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .count(&format!("read: {refusal}")),
                Err(None) => return,
            }
            continue;
        }
        let body = (roll >= 0.32).then(|| payload(&mut rng, plan.size_max_bytes));
        let state = body.as_deref().map_or(State::Absent, State::of);
        {
            let mut ledger = shared.ledger.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(record) = ledger.records.get_mut(&(kind, key.clone())) {
                record.pending.push(state.clone());
            }
        }
        let outcome = target.write(key, body).await;
        let mut ledger = shared.ledger.lock().unwrap_or_else(|e| e.into_inner());
        let record = ledger.records.get_mut(&(kind, key.clone()));
        match outcome {
            Outcome::Acknowledged => {
                if let Some(record) = record {
                    record.acknowledged = state;
                    record.pending.clear();
                }
                ledger.acknowledged += 1;
            }
            Outcome::Refused(refusal) => {
                // Refused writes must not apply; unknown failures (a 500) may have.
                if refusal == "full (507)" {
                    if let Some(record) = record {
                        record.pending.pop();
                    }
                }
                ledger.count(refusal);
            }
            Outcome::Unknown => return,
        }
    }
}
