//! Objects larger than one piece, as `strata put` stores them (issue 44: it stopped at 64 MiB,
//! the admin API's body limit): striped as the S3 gateway stripes, the head holding the first
//! piece and the rest in `<object>__shadow_<tag>_<n>` (n from 1), each at most
//! `piece_bytes`. The head's xattr [`MANIFEST_XATTR`] says how many pieces of which tag make
//! the object.
//!
//! ## Invariants
//! - The pieces are written before the head, and the head's data and manifest in one write,
//!   so a reader sees the old object or the new one whole, never a mix: a new version has a
//!   new tag, so its pieces never overwrite the ones a reader of the old version is reading.
//! - Once the head names a new tag (or none), the pieces of the tag it named before are
//!   removed; removing the object removes its pieces after its head.

use bytes::Bytes;
use rados::{IoCtx, RadosError, WriteOp};
use serde::{Deserialize, Serialize};

/// The head's xattr holding the [`Manifest`] (JSON).
pub const MANIFEST_XATTR: &str = "strata.striped";

/// How a striped object is laid out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The object's size.
    pub size_bytes: u64,
    /// Size of every piece but the last (the head included).
    pub piece_bytes: u64,
    /// Pieces after the head.
    pub pieces: u64,
    /// This version's tag, in its pieces' names.
    pub tag: String,
}

/// The name of piece `number` (from 1) of `object`'s version `tag`.
pub fn piece_name(object: &str, tag: &str, number: u64) -> String {
    format!("{object}__shadow_{tag}_{number}")
}

/// The manifest of `object`, `None` when it is not striped (or does not exist).
pub async fn manifest(io: &dyn IoCtx, object: &str) -> rados::Result<Option<Manifest>> {
    match io.get_xattr(object, MANIFEST_XATTR).await {
        Ok(value) => serde_json::from_slice(&value).map(Some).map_err(|error| {
            RadosError::InvalidArgument(format!("{object}: bad {MANIFEST_XATTR} xattr: {error}"))
        }),
        Err(RadosError::NotFound(_)) => Ok(None),
        Err(error) => Err(error),
    }
}

/// Writes the head of `object`: `data`, with `striped` as its manifest (its pieces already
/// written) or as a plain object; then removes the pieces of the version it replaced.
pub async fn put(
    io: &dyn IoCtx,
    object: &str,
    data: Bytes,
    striped: Option<&Manifest>,
) -> rados::Result<()> {
    if let Some(manifest) = striped {
        if manifest.tag.is_empty() || !manifest.tag.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(RadosError::InvalidArgument(format!(
                "striped tag {:?}: letters and digits only",
                manifest.tag
            )));
        }
    }
    let old = manifest(io, object).await?;
    let mut op = WriteOp::new().write_full(data);
    match (striped, &old) {
        (Some(manifest), _) => {
            let value = serde_json::to_vec(manifest).map_err(|error| {
                RadosError::InvalidArgument(format!("encoding the manifest: {error}"))
            })?;
            op = op.set_xattr(MANIFEST_XATTR, value);
        }
        (None, Some(_)) => op = op.remove_xattr(MANIFEST_XATTR),
        (None, None) => {}
    }
    io.operate(object, op).await?;
    if let Some(old) = old {
        if striped.is_none_or(|new| new.tag != old.tag) {
            remove_pieces(io, object, &old).await?;
        }
    }
    Ok(())
}

/// Removes `object` and, when striped, its pieces.
pub async fn remove(io: &dyn IoCtx, object: &str) -> rados::Result<()> {
    let old = manifest(io, object).await?;
    io.remove(object).await?;
    if let Some(old) = old {
        remove_pieces(io, object, &old).await?;
    }
    Ok(())
}

async fn remove_pieces(io: &dyn IoCtx, object: &str, manifest: &Manifest) -> rados::Result<()> {
    for number in 1..=manifest.pieces {
        match io.remove(&piece_name(object, &manifest.tag, number)).await {
            Ok(()) | Err(RadosError::NotFound(_)) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rados::Rados;

    #[tokio::test]
    async fn a_new_version_replaces_the_old_pieces_and_removal_takes_them_all() {
        let rados = rados::memory::MemoryRados::new();
        rados.pool_create(rados::PoolSpec::new("p")).await.unwrap();
        let io = rados.io_ctx("p").await.unwrap();
        let first = Manifest {
            size_bytes: 10,
            piece_bytes: 4,
            pieces: 2,
            tag: "a1".into(),
        };
        for number in 1..=2 {
            io.write_full(&piece_name("o", "a1", number), b"xxxx")
                .await
                .unwrap();
        }
        put(&*io, "o", Bytes::from_static(b"head"), Some(&first))
            .await
            .unwrap();
        assert_eq!(manifest(&*io, "o").await.unwrap(), Some(first));
        // A plain object over it: the manifest and the old pieces go.
        put(&*io, "o", Bytes::from_static(b"plain"), None)
            .await
            .unwrap();
        assert_eq!(manifest(&*io, "o").await.unwrap(), None);
        let mut names = io.list_all().await.unwrap();
        names.sort();
        assert_eq!(names, ["o"]);
        let second = Manifest {
            size_bytes: 6,
            piece_bytes: 4,
            pieces: 1,
            tag: "b2".into(),
        };
        io.write_full(&piece_name("o", "b2", 1), b"yy")
            .await
            .unwrap();
        put(&*io, "o", Bytes::from_static(b"head"), Some(&second))
            .await
            .unwrap();
        remove(&*io, "o").await.unwrap();
        assert!(io.list_all().await.unwrap().is_empty());
        let bad = Manifest {
            tag: "../x".into(),
            ..second
        };
        assert!(put(&*io, "o", Bytes::new(), Some(&bad)).await.is_err());
    }
}
