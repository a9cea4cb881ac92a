//! Structured replies, meta contexts and BLOCK_STATUS: on the wire (a raw client checks every
//! chunk) and with real clients (nbdinfo --map, nbdcopy, qemu-img map and convert), over a
//! sparse memory device and a sparse file (each tool skipped with a note when absent).

mod common;

use common::{have, run};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use device::{Device, ExtentState, FileDevice, FileDeviceConfig, MemoryDevice};
use nbd::{proto, ExportConfig, NbdServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

const LIMIT: std::time::Duration = std::time::Duration::from_secs(20);

/// A server on a unix socket in a temporary directory, running on its own runtime.
struct Running {
    directory: tempfile::TempDir,
    socket: PathBuf,
    runtime: tokio::runtime::Runtime,
    device: Arc<dyn Device>,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn serve(
    directory: tempfile::TempDir,
    runtime: tokio::runtime::Runtime,
    device: Arc<dyn Device>,
) -> Running {
    let socket = directory.path().join("nbd.sock");
    let config = ExportConfig {
        name: "disk".into(),
        ..ExportConfig::default()
    };
    let server = NbdServer::new(Arc::clone(&device), config);
    let listener = {
        let _guard = runtime.enter();
        NbdServer::bind_unix(&socket).unwrap()
    };
    runtime.spawn(server.serve_unix(listener));
    Running {
        directory,
        socket,
        runtime,
        device,
    }
}

/// A sparse memory export (64 KiB chunks, 512-byte blocks).
fn start_memory(size_bytes: u64) -> Running {
    let device: Arc<dyn Device> =
        Arc::new(MemoryDevice::with_block_size("m", size_bytes, 512).unwrap());
    serve(tempfile::tempdir().unwrap(), runtime(), device)
}

fn uri(socket: &Path) -> String {
    format!("nbd+unix:///disk?socket={}", socket.display())
}

/// One structured reply chunk.
#[derive(Debug)]
struct Chunk {
    flags: u16,
    kind: u16,
    payload: Vec<u8>,
}

impl Chunk {
    fn u32_at(&self, at: usize) -> u32 {
        u32::from_be_bytes(self.payload[at..at + 4].try_into().unwrap())
    }
    fn u64_at(&self, at: usize) -> u64 {
        u64::from_be_bytes(self.payload[at..at + 8].try_into().unwrap())
    }
    /// BLOCK_STATUS descriptors (after the context id).
    fn descriptors(&self) -> Vec<(u32, u32)> {
        assert_eq!(self.kind, proto::REPLY_TYPE_BLOCK_STATUS, "{self:?}");
        assert_eq!(self.u32_at(0), proto::CONTEXT_BASE_ALLOCATION_ID);
        self.payload[4..]
            .chunks_exact(8)
            .map(|pair| {
                (
                    u32::from_be_bytes(pair[0..4].try_into().unwrap()),
                    u32::from_be_bytes(pair[4..8].try_into().unwrap()),
                )
            })
            .collect()
    }
}

/// What a raw client got back for one request.
#[derive(Debug)]
enum Answer {
    Simple(u32),
    Chunks(Vec<Chunk>),
}

/// A client speaking the protocol byte by byte, to check what the server puts on the wire.
struct Raw {
    stream: UnixStream,
    cookie: u64,
}

impl Raw {
    async fn connect(socket: &Path) -> Raw {
        let mut stream = UnixStream::connect(socket).await.unwrap();
        let mut greeting = [0u8; 18];
        stream.read_exact(&mut greeting).await.unwrap();
        let flags = u32::from(proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES);
        stream.write_u32(flags).await.unwrap();
        Raw { stream, cookie: 0 }
    }

    /// Sends an option and reads its replies up to the final one: (type, payload) each.
    async fn option(&mut self, option: u32, data: &[u8]) -> Vec<(u32, Vec<u8>)> {
        self.stream.write_u64(proto::IHAVEOPT).await.unwrap();
        self.stream.write_u32(option).await.unwrap();
        self.stream.write_u32(data.len() as u32).await.unwrap();
        self.stream.write_all(data).await.unwrap();
        let mut replies = Vec::new();
        loop {
            assert_eq!(
                self.stream.read_u64().await.unwrap(),
                proto::OPTION_REPLY_MAGIC
            );
            assert_eq!(self.stream.read_u32().await.unwrap(), option);
            let kind = self.stream.read_u32().await.unwrap();
            let length = self.stream.read_u32().await.unwrap();
            let mut payload = vec![0u8; length as usize];
            self.stream.read_exact(&mut payload).await.unwrap();
            replies.push((kind, payload));
            if kind != proto::REP_INFO
                && kind != proto::REP_META_CONTEXT
                && kind != proto::REP_SERVER
            {
                return replies;
            }
        }
    }

    /// META_CONTEXT data: export name, then queries.
    fn context_request(export: &str, queries: &[&str]) -> Vec<u8> {
        let mut data = (export.len() as u32).to_be_bytes().to_vec();
        data.extend_from_slice(export.as_bytes());
        data.extend_from_slice(&(queries.len() as u32).to_be_bytes());
        for query in queries {
            data.extend_from_slice(&(query.len() as u32).to_be_bytes());
            data.extend_from_slice(query.as_bytes());
        }
        data
    }

    async fn go(&mut self, export: &str) {
        let mut data = (export.len() as u32).to_be_bytes().to_vec();
        data.extend_from_slice(export.as_bytes());
        data.extend_from_slice(&0u16.to_be_bytes());
        let replies = self.option(proto::OPT_GO, &data).await;
        assert_eq!(replies.last().unwrap().0, proto::REP_ACK, "{replies:?}");
    }

    /// Structured replies, `base:allocation` selected (when `contexts`), export "disk".
    async fn structured(socket: &Path, contexts: bool) -> Raw {
        let mut raw = Raw::connect(socket).await;
        let replies = raw.option(proto::OPT_STRUCTURED_REPLY, &[]).await;
        assert_eq!(replies, vec![(proto::REP_ACK, Vec::new())]);
        if contexts {
            let data = Raw::context_request("disk", &["base:allocation", "qemu:other"]);
            let replies = raw.option(proto::OPT_SET_META_CONTEXT, &data).await;
            let mut expected = proto::CONTEXT_BASE_ALLOCATION_ID.to_be_bytes().to_vec();
            expected.extend_from_slice(b"base:allocation");
            assert_eq!(
                replies,
                vec![
                    (proto::REP_META_CONTEXT, expected),
                    (proto::REP_ACK, Vec::new())
                ]
            );
        }
        raw.go("disk").await;
        raw
    }

    async fn request(
        &mut self,
        flags: u16,
        command: u16,
        offset_bytes: u64,
        length_bytes: u32,
        payload: &[u8],
    ) -> Answer {
        self.cookie += 1;
        let request = proto::Request {
            flags,
            command,
            cookie: self.cookie,
            offset_bytes,
            length_bytes,
        };
        self.stream.write_all(&request.encode()).await.unwrap();
        self.stream.write_all(payload).await.unwrap();
        tokio::time::timeout(LIMIT, self.answer())
            .await
            .expect("an answer, not a hang")
    }

    async fn answer(&mut self) -> Answer {
        let magic = self.stream.read_u32().await.unwrap();
        if magic == proto::SIMPLE_REPLY_MAGIC {
            let error = self.stream.read_u32().await.unwrap();
            assert_eq!(self.stream.read_u64().await.unwrap(), self.cookie);
            return Answer::Simple(error);
        }
        let mut chunks = Vec::new();
        let mut magic = magic;
        loop {
            assert_eq!(magic, proto::STRUCTURED_REPLY_MAGIC);
            let flags = self.stream.read_u16().await.unwrap();
            let kind = self.stream.read_u16().await.unwrap();
            assert_eq!(self.stream.read_u64().await.unwrap(), self.cookie);
            let length = self.stream.read_u32().await.unwrap();
            let mut payload = vec![0u8; length as usize];
            self.stream.read_exact(&mut payload).await.unwrap();
            chunks.push(Chunk {
                flags,
                kind,
                payload,
            });
            if flags & proto::REPLY_FLAG_DONE != 0 {
                return Answer::Chunks(chunks);
            }
            magic = self.stream.read_u32().await.unwrap();
        }
    }

    async fn chunks(
        &mut self,
        flags: u16,
        command: u16,
        offset_bytes: u64,
        length_bytes: u32,
    ) -> Vec<Chunk> {
        match self
            .request(flags, command, offset_bytes, length_bytes, &[])
            .await
        {
            Answer::Chunks(chunks) => chunks,
            other => panic!("expected structured chunks, got {other:?}"),
        }
    }
}

const HOLE: u32 = proto::STATE_HOLE | proto::STATE_ZERO;
const MIB: u64 = 1 << 20;
/// The memory device's allocation unit.
const UNIT: u64 = 64 * 1024;

#[test]
fn block_status_and_structured_reads_on_the_wire() {
    let running = start_memory(8 * MIB);
    running.runtime.block_on(async {
        let mut raw = Raw::structured(&running.socket, true).await;
        // One 4 KiB write at 1 MiB allocates one 64 KiB unit; writes get simple replies.
        let answer = raw
            .request(0, proto::CMD_WRITE, MIB, 4096, &[0xab; 4096])
            .await;
        assert!(matches!(answer, Answer::Simple(0)), "{answer:?}");

        let chunks = raw
            .chunks(0, proto::CMD_BLOCK_STATUS, 0, (8 * MIB) as u32)
            .await;
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].flags, proto::REPLY_FLAG_DONE);
        let rest = (8 * MIB - MIB - UNIT) as u32;
        assert_eq!(
            chunks[0].descriptors(),
            vec![(MIB as u32, HOLE), (UNIT as u32, 0), (rest, HOLE)]
        );
        // REQ_ONE: one descriptor, from the (unaligned to the unit) offset asked.
        let chunks = raw
            .chunks(
                proto::CMD_FLAG_REQ_ONE,
                proto::CMD_BLOCK_STATUS,
                512,
                (8 * MIB - 512) as u32,
            )
            .await;
        assert_eq!(chunks[0].descriptors(), vec![((MIB - 512) as u32, HOLE)]);
        // A range inside the data unit and past it: cut to the request.
        let chunks = raw
            .chunks(0, proto::CMD_BLOCK_STATUS, MIB + 4096, 128 * 1024)
            .await;
        assert_eq!(
            chunks[0].descriptors(),
            vec![(60 * 1024, 0), (68 * 1024, HOLE)]
        );
        // Past the end, or empty: an error chunk.
        for (offset, length) in [(8 * MIB - 512, 1024), (0, 0)] {
            let chunks = raw.chunks(0, proto::CMD_BLOCK_STATUS, offset, length).await;
            assert_eq!(chunks.len(), 1);
            assert_eq!(chunks[0].kind, proto::REPLY_TYPE_ERROR);
            assert_eq!(chunks[0].u32_at(0), proto::EINVAL);
        }

        // A long read: its holes as hole chunks, its data as a data chunk, in order.
        let chunks = raw.chunks(0, proto::CMD_READ, 0, (2 * MIB) as u32).await;
        let kinds: Vec<u16> = chunks.iter().map(|chunk| chunk.kind).collect();
        assert_eq!(
            kinds,
            vec![
                proto::REPLY_TYPE_OFFSET_HOLE,
                proto::REPLY_TYPE_OFFSET_DATA,
                proto::REPLY_TYPE_OFFSET_HOLE
            ]
        );
        assert_eq!((chunks[0].u64_at(0), chunks[0].u32_at(8)), (0, MIB as u32));
        assert_eq!(chunks[1].u64_at(0), MIB);
        assert_eq!(chunks[1].payload.len(), 8 + UNIT as usize);
        assert!(chunks[1].payload[8..8 + 4096]
            .iter()
            .all(|&byte| byte == 0xab));
        assert!(chunks[1].payload[8 + 4096..].iter().all(|&byte| byte == 0));
        assert_eq!(
            (chunks[2].u64_at(0), chunks[2].u32_at(8)),
            (MIB + UNIT, (MIB - UNIT) as u32)
        );
        assert_eq!(
            chunks.iter().map(|c| c.flags).collect::<Vec<_>>(),
            vec![0, 0, proto::REPLY_FLAG_DONE]
        );
        // DF: one data chunk.
        let chunks = raw
            .chunks(proto::CMD_FLAG_DF, proto::CMD_READ, 0, (2 * MIB) as u32)
            .await;
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].kind, proto::REPLY_TYPE_OFFSET_DATA);
        assert_eq!(chunks[0].payload.len(), 8 + 2 * MIB as usize);
        // A read past the end: ERROR_OFFSET naming where; an unknown flag: ERROR.
        let chunks = raw.chunks(0, proto::CMD_READ, 8 * MIB - 4096, 8192).await;
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].kind, proto::REPLY_TYPE_ERROR_OFFSET, "{chunks:?}");
        assert_eq!(chunks[0].u32_at(0), proto::EINVAL);
        let message_bytes =
            u16::from_be_bytes(chunks[0].payload[4..6].try_into().unwrap()) as usize;
        assert_eq!(chunks[0].u64_at(6 + message_bytes), 8 * MIB - 4096);
        let chunks = raw.chunks(1 << 5, proto::CMD_READ, 0, 4096).await;
        assert_eq!(
            (chunks[0].kind, chunks[0].u32_at(0)),
            (proto::REPLY_TYPE_ERROR, proto::EINVAL)
        );

        // WRITE_ZEROES without NO_HOLE discards (the memory device reads discards as zeros);
        // with NO_HOLE it writes zeros, which stay allocated.
        let answer = raw
            .request(0, proto::CMD_WRITE_ZEROES, MIB, UNIT as u32, &[])
            .await;
        assert!(matches!(answer, Answer::Simple(0)), "{answer:?}");
        let state = running.device.allocation(MIB, UNIT).await.unwrap();
        assert_eq!(state[0].state, ExtentState::Hole, "{state:?}");
        raw.request(0, proto::CMD_WRITE, MIB, 4096, &[0xab; 4096])
            .await;
        let answer = raw
            .request(
                proto::CMD_FLAG_NO_HOLE,
                proto::CMD_WRITE_ZEROES,
                MIB,
                UNIT as u32,
                &[],
            )
            .await;
        assert!(matches!(answer, Answer::Simple(0)), "{answer:?}");
        let state = running.device.allocation(MIB, UNIT).await.unwrap();
        assert_eq!(state[0].state, ExtentState::Data, "{state:?}");
        let mut back = vec![1u8; 4096];
        running.device.read_at(MIB, &mut back).await.unwrap();
        assert!(back.iter().all(|&byte| byte == 0));

        // Structured replies without a meta context: BLOCK_STATUS is refused in an error chunk.
        let mut plain = Raw::structured(&running.socket, false).await;
        let chunks = plain.chunks(0, proto::CMD_BLOCK_STATUS, 0, 4096).await;
        assert_eq!(
            (chunks[0].kind, chunks[0].u32_at(0)),
            (proto::REPLY_TYPE_ERROR, proto::EINVAL)
        );
        // No structured replies: a simple EINVAL, and DF is unknown there.
        let mut simple = Raw::connect(&running.socket).await;
        simple.go("disk").await;
        let answer = simple
            .request(0, proto::CMD_BLOCK_STATUS, 0, 4096, &[])
            .await;
        assert!(
            matches!(answer, Answer::Simple(proto::EINVAL)),
            "{answer:?}"
        );
        let answer = simple
            .request(proto::CMD_FLAG_DF, proto::CMD_READ, 0, 4096, &[])
            .await;
        assert!(
            matches!(answer, Answer::Simple(proto::EINVAL)),
            "{answer:?}"
        );
    });
}

#[test]
fn meta_context_negotiation() {
    let running = start_memory(MIB);
    running.runtime.block_on(async {
        let mut raw = Raw::connect(&running.socket).await;
        // Before structured replies: invalid.
        let data = Raw::context_request("disk", &[]);
        let replies = raw.option(proto::OPT_LIST_META_CONTEXT, &data).await;
        assert_eq!(replies, vec![(proto::REP_ERR_INVALID, Vec::new())]);
        raw.option(proto::OPT_STRUCTURED_REPLY, &[]).await;
        let mut listed = proto::CONTEXT_BASE_ALLOCATION_ID.to_be_bytes().to_vec();
        listed.extend_from_slice(b"base:allocation");
        // LIST with no query, or `base:`, lists base:allocation; other namespaces nothing.
        for (queries, found) in [
            (vec![], true),
            (vec!["base:"], true),
            (vec!["qemu:"], false),
        ] {
            let data = Raw::context_request("disk", &queries);
            let replies = raw.option(proto::OPT_LIST_META_CONTEXT, &data).await;
            let mut expected = Vec::new();
            if found {
                expected.push((proto::REP_META_CONTEXT, listed.clone()));
            }
            expected.push((proto::REP_ACK, Vec::new()));
            assert_eq!(replies, expected, "{queries:?}");
        }
        // An unknown export, and malformed data.
        let data = Raw::context_request("nope", &["base:allocation"]);
        let replies = raw.option(proto::OPT_SET_META_CONTEXT, &data).await;
        assert_eq!(replies[0].0, proto::REP_ERR_UNKNOWN);
        let replies = raw
            .option(proto::OPT_SET_META_CONTEXT, &[0, 0, 0, 9, 1])
            .await;
        assert_eq!(replies[0].0, proto::REP_ERR_INVALID);
        // Selected for "disk", then GO to the default export: not selected there.
        let data = Raw::context_request("disk", &["base:allocation"]);
        raw.option(proto::OPT_SET_META_CONTEXT, &data).await;
        raw.go("").await;
        let chunks = raw.chunks(0, proto::CMD_BLOCK_STATUS, 0, 4096).await;
        assert_eq!(chunks[0].kind, proto::REPLY_TYPE_ERROR);
    });
}

/// Writes two 64 KiB patterns (at 0 and at `second`) through qemu-io, then checks what
/// nbdinfo --map, qemu-img map, nbdcopy and qemu-img convert make of the mostly empty export.
fn check_sparse_export(running: &Running, size_bytes: u64, second: u64) {
    let target = uri(&running.socket);
    if !have("qemu-io") || !have("nbdinfo") || !have("qemu-img") || !have("nbdcopy") {
        return;
    }
    run(Command::new("qemu-io").args([
        "-f",
        "raw",
        "-c",
        "write -P 0x5a 0 64k",
        "-c",
        &format!("write -P 0xa5 {second} 64k"),
        &target,
    ]));
    // nbdinfo --map: "offset length type description" lines.
    let text = run(Command::new("nbdinfo").arg("--map").arg(&target));
    let mut data_bytes = 0;
    let mut hole_bytes = 0;
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.len() < 4 {
            continue;
        }
        let length: u64 = words[1].parse().unwrap();
        match words[2] {
            "0" => data_bytes += length,
            "3" => hole_bytes += length,
            other => panic!("unexpected type {other} in {text}"),
        }
    }
    assert_eq!(data_bytes + hole_bytes, size_bytes, "{text}");
    assert!(data_bytes >= 128 * 1024, "{text}");
    assert!(hole_bytes >= size_bytes / 2, "mostly holes:\n{text}");
    // qemu-img map (it asks one extent at a time, REQ_ONE).
    let text = run(Command::new("qemu-img").args(["map", "--output=json", "-f", "raw", &target]));
    assert!(text.contains("\"data\": false"), "{text}");
    assert!(text.contains("\"data\": true"), "{text}");
    // Copies come out identical and sparse.
    let expected = {
        let mut bytes = vec![0u8; size_bytes as usize];
        bytes[..65536].fill(0x5a);
        bytes[second as usize..second as usize + 65536].fill(0xa5);
        bytes
    };
    let copied = running.directory.path().join("nbdcopy.img");
    run(Command::new("nbdcopy").arg(&target).arg(&copied));
    let converted = running.directory.path().join("convert.img");
    run(Command::new("qemu-img")
        .args(["convert", "-f", "raw", "-O", "raw", &target])
        .arg(&converted));
    for copy in [&copied, &converted] {
        assert!(
            std::fs::read(copy).unwrap() == expected,
            "{} differs",
            copy.display()
        );
        let allocated =
            std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(copy).unwrap()) * 512;
        assert!(
            allocated <= size_bytes / 2,
            "{} is not sparse: {allocated} bytes allocated",
            copy.display()
        );
    }
}

#[test]
fn real_clients_see_a_sparse_memory_export() {
    let running = start_memory(64 * MIB);
    check_sparse_export(&running, 64 * MIB, 40 * MIB);
}

#[test]
fn real_clients_see_a_sparse_file_export() {
    // The file device fills the 16 MiB chunk a write goes to and the two after it with zeros
    // (data to SEEK_DATA), so writes at 0 and 240 MiB leave 48..240 MiB a hole.
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("export.img");
    let runtime = runtime();
    let device: Arc<dyn Device> = {
        let _guard = runtime.enter();
        Arc::new(FileDevice::create(&path, 256 * MIB, FileDeviceConfig::default()).unwrap())
    };
    let running = serve(directory, runtime, device);
    check_sparse_export(&running, 256 * MIB, 240 * MIB);
}

/// `NbdClient` with structured replies: BLOCK_STATUS reports the memory device's holes, READs
/// answered in data and hole chunks come back whole, an error chunk is the request's error
/// and the connection stays usable; a client without structured replies is told it cannot.
#[test]
fn the_client_asks_block_status_and_reassembles_structured_reads() {
    let running = start_memory(8 * MIB);
    running.runtime.block_on(async {
        let mut client = nbd::NbdClient::connect_unix_with_status(&running.socket, "disk")
            .await
            .unwrap();
        client.write(MIB, &[0xab; 4096], false).await.unwrap();
        let extents = client.block_status(0, (8 * MIB) as u32).await.unwrap();
        let found: Vec<(u32, u32)> = extents
            .iter()
            .map(|extent| (extent.length_bytes, extent.flags))
            .collect();
        let rest = (8 * MIB - MIB - UNIT) as u32;
        assert_eq!(
            found,
            vec![(MIB as u32, HOLE), (UNIT as u32, 0), (rest, HOLE)]
        );
        assert!(extents[0].is_hole() && extents[0].is_zero());
        assert!(!extents[1].is_hole());
        // 2 MiB from 0: a hole, the written unit, a hole, in chunks; reassembled.
        let mut back = vec![0x55u8; (2 * MIB) as usize];
        client.read(0, &mut back).await.unwrap();
        let (at, end) = (MIB as usize, MIB as usize + 4096);
        assert!(back[..at].iter().all(|&byte| byte == 0));
        assert!(back[at..end].iter().all(|&byte| byte == 0xab));
        assert!(back[end..].iter().all(|&byte| byte == 0));
        // Past the end: an error chunk, then the connection still serves.
        let mut past = vec![0u8; 4096];
        assert!(matches!(
            client.read(8 * MIB, &mut past).await,
            Err(nbd::NbdError::Server {
                errno: proto::EINVAL
            })
        ));
        assert!(client.block_status(8 * MIB, 4096).await.is_err());
        let extents = client.block_status(MIB, 4096).await.unwrap();
        assert_eq!(extents.len(), 1);
        assert_eq!((extents[0].length_bytes, extents[0].flags), (4096, 0));
        client.disconnect().await.unwrap();

        let mut simple = nbd::NbdClient::connect_unix(&running.socket, "disk")
            .await
            .unwrap();
        let error = simple.block_status(0, 4096).await.unwrap_err();
        assert!(error.to_string().contains("structured"), "{error}");
    });
}

/// An export source that knows one export, always held by another writer.
struct Leased;

#[async_trait::async_trait]
impl nbd::ExportSource for Leased {
    async fn find(&self, name: &[u8]) -> Result<Option<nbd::Export>, nbd::NbdError> {
        if name == b"rbd/busy" {
            return Err(nbd::NbdError::Unavailable(
                "volume \"busy\" is leased by writer \"strata-serve:other-host:/data\"".into(),
            ));
        }
        Ok(None)
    }

    async fn list(&self) -> Result<Vec<String>, nbd::NbdError> {
        Ok(vec!["rbd/busy".into()])
    }
}

/// An export its source may not serve now (a volume leased by another writer) is refused
/// with NBD_REP_ERR_POLICY and the source's message, which nbdinfo prints; a missing one with
/// NBD_REP_ERR_UNKNOWN. The connection is not just closed.
#[test]
fn an_unavailable_export_is_refused_with_its_message() {
    let directory = tempfile::tempdir().unwrap();
    let socket = directory.path().join("nbd.sock");
    let runtime = runtime();
    let listener = {
        let _guard = runtime.enter();
        NbdServer::bind_unix(&socket).unwrap()
    };
    runtime.spawn(NbdServer::with_source(Arc::new(Leased)).serve_unix(listener));
    runtime.block_on(async {
        match nbd::NbdClient::connect_unix(&socket, "rbd/busy").await {
            Err(nbd::NbdError::Refused { reply, message, .. }) => {
                assert_eq!(reply, proto::REP_ERR_POLICY);
                assert!(message.contains("other-host"), "{message}");
            }
            Err(other) => panic!("expected a refusal, got {other}"),
            Ok(_) => panic!("a leased export was opened"),
        }
        match nbd::NbdClient::connect_unix(&socket, "rbd/none").await {
            Err(nbd::NbdError::Refused { reply, message, .. }) => {
                assert_eq!(reply, proto::REP_ERR_UNKNOWN);
                assert!(message.contains("rbd/none"), "{message}");
            }
            Err(other) => panic!("expected a refusal, got {other}"),
            Ok(_) => panic!("a missing export was opened"),
        }
    });
    // libnbd fails the open and shows the server's message in its debug output; qemu prints
    // it as "server reported: ...".
    let uri = format!("nbd+unix:///rbd/busy?socket={}", socket.display());
    for (tool, command) in [
        ("nbdinfo", {
            let mut command = Command::new("nbdinfo");
            command.env("LIBNBD_DEBUG", "1").arg(&uri);
            command
        }),
        ("qemu-img", {
            let mut command = Command::new("qemu-img");
            command.args(["info", "--image-opts"]).arg(format!(
                "driver=nbd,server.type=unix,server.path={},export=rbd/busy",
                socket.display()
            ));
            command
        }),
    ] {
        if !have(tool) {
            continue;
        }
        let mut command = command;
        let output = command.output().unwrap();
        let text = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{tool} opened a leased export");
        assert!(
            text.contains("leased by writer") && text.contains("other-host"),
            "{tool}'s error names the holder: {text}"
        );
    }
}
