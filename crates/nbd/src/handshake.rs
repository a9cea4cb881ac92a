//! The fixed-newstyle handshake: options until the client picks an export (EXPORT_NAME, GO)
//! or leaves (ABORT), with structured replies and the `base:allocation` meta context.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::NbdError;
use crate::exports::{Export, ExportSource};
use crate::options::{parse_info_request, parse_meta_context_request};
use crate::proto;

/// Largest option payload accepted during the handshake.
const OPTION_BYTES_MAX: u32 = 64 * 1024;

/// What the handshake settled for transmission.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Session {
    /// The client asked for structured replies (NBD_OPT_STRUCTURED_REPLY).
    pub structured: bool,
    /// The id of `base:allocation` when the client selected it for the export it chose, so
    /// BLOCK_STATUS is answered.
    pub allocation_context: Option<u32>,
}

/// The meta contexts a SET_META_CONTEXT selected, for the export it named.
struct Selected {
    export: Vec<u8>,
    base_allocation: bool,
}

/// The transmission flags of `export` for a client that did or did not ask for structured
/// replies (DF only means something with them).
pub(crate) fn transmission_flags(export: &Export, structured: bool) -> u16 {
    let mut flags = proto::TFLAG_HAS_FLAGS
        | proto::TFLAG_SEND_FLUSH
        | proto::TFLAG_SEND_FUA
        | proto::TFLAG_CAN_MULTI_CONN;
    if export.config.read_only {
        flags |= proto::TFLAG_READ_ONLY;
    } else {
        flags |= proto::TFLAG_SEND_TRIM | proto::TFLAG_SEND_WRITE_ZEROES;
    }
    if export.config.rotational {
        flags |= proto::TFLAG_ROTATIONAL;
    }
    if structured {
        flags |= proto::TFLAG_SEND_DF;
    }
    flags
}

/// Runs the handshake; the export chosen and the session, when the client entered
/// transmission.
pub(crate) async fn handshake<R, W>(
    source: &dyn ExportSource,
    reader: &mut R,
    writer: &mut W,
) -> Result<Option<(Export, Session)>, NbdError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    writer.write_u64(proto::NBD_MAGIC).await?;
    writer.write_u64(proto::IHAVEOPT).await?;
    writer
        .write_u16(proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES)
        .await?;
    writer.flush().await?;
    let client_flags = reader.read_u32().await?;
    if client_flags & u32::from(proto::FLAG_FIXED_NEWSTYLE) == 0 {
        return Err(NbdError::Protocol("client is not fixed-newstyle".into()));
    }
    // The protocol: a server that receives client flags it does not know closes the
    // connection (the client waits for nothing then; it sees the close).
    let known = u32::from(proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES);
    if client_flags & !known != 0 {
        return Err(NbdError::Protocol(format!(
            "unknown client flags {:#x}",
            client_flags & !known
        )));
    }
    let no_zeroes = client_flags & u32::from(proto::FLAG_NO_ZEROES) != 0;
    let mut structured = false;
    let mut selected: Option<Selected> = None;
    loop {
        if reader.read_u64().await? != proto::IHAVEOPT {
            return Err(NbdError::Protocol("bad option magic".into()));
        }
        let option = reader.read_u32().await?;
        let length = reader.read_u32().await?;
        if length > OPTION_BYTES_MAX {
            return Err(NbdError::Protocol(format!("option of {length} bytes")));
        }
        let mut data = vec![0u8; length as usize];
        reader.read_exact(&mut data).await?;
        let session = |name: &[u8]| Session {
            structured,
            allocation_context: selected
                .as_ref()
                .filter(|chosen| chosen.base_allocation && chosen.export == name)
                .map(|_| proto::CONTEXT_BASE_ALLOCATION_ID),
        };
        match option {
            proto::OPT_EXPORT_NAME => {
                let Some(export) = source.find(&data).await? else {
                    return Err(NbdError::Protocol("unknown export".into()));
                };
                writer.write_u64(export.device.size_bytes()).await?;
                writer
                    .write_u16(transmission_flags(&export, structured))
                    .await?;
                if !no_zeroes {
                    writer.write_all(&[0u8; 124]).await?;
                }
                writer.flush().await?;
                let session = session(&data);
                return Ok(Some((export, session)));
            }
            proto::OPT_ABORT => {
                option_reply(writer, option, proto::REP_ACK, &[]).await?;
                writer.flush().await?;
                return Ok(None);
            }
            proto::OPT_LIST if !data.is_empty() => {
                // The protocol gives LIST no data.
                option_reply(writer, option, proto::REP_ERR_INVALID, &[]).await?;
            }
            proto::OPT_LIST => {
                for name in source.list().await? {
                    let name = name.as_bytes();
                    let mut payload = (name.len() as u32).to_be_bytes().to_vec();
                    payload.extend_from_slice(name);
                    option_reply(writer, option, proto::REP_SERVER, &payload).await?;
                }
                option_reply(writer, option, proto::REP_ACK, &[]).await?;
            }
            proto::OPT_INFO | proto::OPT_GO => {
                let export = info(source, writer, option, &data, structured).await?;
                if let (Some(export), proto::OPT_GO) = (export, option) {
                    writer.flush().await?;
                    let name = parse_info_request(&data).map_or(&[][..], |(name, _)| name);
                    let session = session(name);
                    return Ok(Some((export, session)));
                }
            }
            proto::OPT_STRUCTURED_REPLY if !data.is_empty() => {
                option_reply(writer, option, proto::REP_ERR_INVALID, &[]).await?;
            }
            proto::OPT_STRUCTURED_REPLY => {
                structured = true;
                option_reply(writer, option, proto::REP_ACK, &[]).await?;
            }
            proto::OPT_LIST_META_CONTEXT | proto::OPT_SET_META_CONTEXT => {
                let chosen = meta_context(source, writer, option, &data, structured).await?;
                if option == proto::OPT_SET_META_CONTEXT {
                    // A SET replaces what an earlier one selected, even when it failed.
                    selected = chosen;
                }
            }
            proto::OPT_STARTTLS => {
                option_reply(writer, option, proto::REP_ERR_POLICY, &[]).await?;
            }
            _ => {
                // Extended headers and anything newer.
                option_reply(writer, option, proto::REP_ERR_UNSUP, &[]).await?;
            }
        }
        writer.flush().await?;
    }
}

/// Answers NBD_OPT_LIST_META_CONTEXT / SET_META_CONTEXT; what a SET selected.
///
/// The one context is `base:allocation`. LIST with no query, or the query `base:`, lists it;
/// SET selects it when a query names it exactly. Unknown queries select nothing, as the
/// protocol asks. Both need structured replies first (BLOCK_STATUS is answered in them).
async fn meta_context<W: AsyncWrite + Unpin>(
    source: &dyn ExportSource,
    writer: &mut W,
    option: u32,
    data: &[u8],
    structured: bool,
) -> Result<Option<Selected>, NbdError> {
    let parsed = parse_meta_context_request(data);
    let Some((name, queries)) = parsed.filter(|_| structured) else {
        option_reply(writer, option, proto::REP_ERR_INVALID, &[]).await?;
        return Ok(None);
    };
    if find_or_refuse(source, writer, option, name)
        .await?
        .is_none()
    {
        return Ok(None);
    }
    let allocation = proto::CONTEXT_BASE_ALLOCATION.as_bytes();
    let matches = if option == proto::OPT_LIST_META_CONTEXT {
        queries.is_empty()
            || queries
                .iter()
                .any(|query| *query == allocation || *query == b"base:")
    } else {
        queries.contains(&allocation)
    };
    if matches {
        let mut payload = proto::CONTEXT_BASE_ALLOCATION_ID.to_be_bytes().to_vec();
        payload.extend_from_slice(allocation);
        option_reply(writer, option, proto::REP_META_CONTEXT, &payload).await?;
    }
    option_reply(writer, option, proto::REP_ACK, &[]).await?;
    Ok(Some(Selected {
        export: name.to_vec(),
        base_allocation: matches,
    }))
}

/// Answers NBD_OPT_INFO / NBD_OPT_GO; the export when it was found.
async fn info<W: AsyncWrite + Unpin>(
    source: &dyn ExportSource,
    writer: &mut W,
    option: u32,
    data: &[u8],
    structured: bool,
) -> Result<Option<Export>, NbdError> {
    let Some((name, requests)) = parse_info_request(data) else {
        option_reply(writer, option, proto::REP_ERR_INVALID, &[]).await?;
        return Ok(None);
    };
    let Some(export) = find_or_refuse(source, writer, option, name).await? else {
        return Ok(None);
    };
    let mut about = proto::INFO_EXPORT.to_be_bytes().to_vec();
    about.extend_from_slice(&export.device.size_bytes().to_be_bytes());
    about.extend_from_slice(&transmission_flags(&export, structured).to_be_bytes());
    option_reply(writer, option, proto::REP_INFO, &about).await?;
    let block = export.device.block_size_bytes() as u32;
    let mut sizes = proto::INFO_BLOCK_SIZE.to_be_bytes().to_vec();
    sizes.extend_from_slice(&block.to_be_bytes());
    sizes.extend_from_slice(&block.max(4096).to_be_bytes());
    sizes.extend_from_slice(&export.config.request_bytes_max.to_be_bytes());
    option_reply(writer, option, proto::REP_INFO, &sizes).await?;
    for request in requests {
        let text = match request {
            proto::INFO_NAME => &export.config.name,
            proto::INFO_DESCRIPTION => &export.config.description,
            _ => continue,
        };
        let mut payload = request.to_be_bytes().to_vec();
        payload.extend_from_slice(text.as_bytes());
        option_reply(writer, option, proto::REP_INFO, &payload).await?;
    }
    option_reply(writer, option, proto::REP_ACK, &[]).await?;
    Ok(Some(export))
}

/// The export `name`, or `None` after an error reply: NBD_REP_ERR_UNKNOWN when there is no
/// such export or its source failed, NBD_REP_ERR_POLICY when it may not be served now (both
/// with the source's message, which clients such as nbdinfo and qemu print). The
/// connection stays open for further options.
async fn find_or_refuse<W: AsyncWrite + Unpin>(
    source: &dyn ExportSource,
    writer: &mut W,
    option: u32,
    name: &[u8],
) -> Result<Option<Export>, NbdError> {
    let (reply, message) = match source.find(name).await {
        Ok(Some(export)) => return Ok(Some(export)),
        Ok(None) => (
            proto::REP_ERR_UNKNOWN,
            format!("no export named {:?}", String::from_utf8_lossy(name)),
        ),
        Err(NbdError::Unavailable(message)) => (proto::REP_ERR_POLICY, message),
        Err(NbdError::Source(message)) => (proto::REP_ERR_UNKNOWN, message),
        Err(other) => return Err(other),
    };
    // An error reply's payload is a message of at most 4096 bytes (UTF-8).
    let mut end = message.len().min(4096);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    option_reply(writer, option, reply, &message.as_bytes()[..end]).await?;
    Ok(None)
}

async fn option_reply<W: AsyncWrite + Unpin>(
    writer: &mut W,
    option: u32,
    reply: u32,
    payload: &[u8],
) -> Result<(), NbdError> {
    writer.write_u64(proto::OPTION_REPLY_MAGIC).await?;
    writer.write_u32(option).await?;
    writer.write_u32(reply).await?;
    writer.write_u32(payload.len() as u32).await?;
    writer.write_all(payload).await?;
    Ok(())
}
