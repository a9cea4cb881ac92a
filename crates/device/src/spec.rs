//! Devices described by one string, for configuration files and command lines.
//!
//! Grammar: `[PROFILE@]BACKING` where
//! - `BACKING` is `mem:SIZE`, `file:PATH` (an existing file or block device),
//!   `file:PATH:SIZE` (created sparse, or resized, to SIZE), or a bare `PATH` (an existing
//!   file; a bare `PATH:SIZE` is refused: the size needs `file:`);
//! - `PROFILE` is an emulation preset ([`EmulationProfile::PRESETS`] or `instant`);
//! - `SIZE` is bytes with an optional binary suffix `K`, `M`, `G`, `T` (`KiB`.. also accepted).
//!
//! Examples: `nvme@mem:4G`, `hdd-10k@file:/srv/strata/hdd0.img:100G`, `/dev/nvme0n1p3`.

use std::path::PathBuf;
use std::sync::Arc;

use crate::{
    Device, DeviceError, EmulatedDevice, EmulationProfile, FileDevice, FileDeviceConfig,
    MemoryDevice,
};

/// Where a specified device keeps its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// Memory of this size.
    Memory {
        /// Capacity in bytes.
        size_bytes: u64,
    },
    /// A file or block device; created sparse with `size_bytes` when given.
    File {
        /// Its path.
        path: PathBuf,
        /// Size to create or resize the file to.
        size_bytes: Option<u64>,
    },
}

/// A parsed device description.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSpec {
    /// Emulation preset name, if any.
    pub profile: Option<String>,
    /// The backing store.
    pub backing: Backing,
}

/// `MemTotal` of /proc/meminfo, if readable.
fn memory_total_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kibibytes: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kibibytes * 1024)
}

impl DeviceSpec {
    /// Parses `[PROFILE@]BACKING` (see the module doc).
    pub fn parse(text: &str) -> Result<DeviceSpec, DeviceError> {
        let invalid =
            |why: &str| DeviceError::InvalidConfig(format!("device spec {text:?}: {why}"));
        let (profile, backing) = match text.split_once('@') {
            Some((profile, rest)) if !profile.contains('/') => (Some(profile.to_string()), rest),
            _ => (None, text),
        };
        if let Some(name) = &profile {
            if EmulationProfile::preset(name).is_none() {
                return Err(invalid(&format!(
                    "unknown emulation profile {name:?} (known: {}, instant)",
                    EmulationProfile::PRESETS.join(", ")
                )));
            }
        }
        let backing = if let Some(size) = backing.strip_prefix("mem:") {
            let size_bytes = parse_size_bytes(size).ok_or_else(|| invalid("bad memory size"))?;
            if size_bytes == 0 {
                return Err(invalid("a memory device needs a size above 0"));
            }
            if let Some(total) = memory_total_bytes() {
                if size_bytes > total {
                    return Err(invalid(&format!(
                        "{size_bytes} bytes is more than this machine's memory ({total} bytes)"
                    )));
                }
            }
            Backing::Memory { size_bytes }
        } else {
            let explicit = backing.strip_prefix("file:");
            let rest = explicit.unwrap_or(backing);
            if rest.is_empty() {
                return Err(invalid("empty path"));
            }
            // A bare path names an existing file. `WORD:SIZE` is a mistyped `mem:SIZE`, and
            // `PATH:SIZE` a `file:` left out: neither creates a file (before, `bogus:1G`
            // created a 1 GiB file named `bogus` in the working directory).
            if explicit.is_none() && !std::path::Path::new(rest).exists() {
                if let Some((path, size)) = rest.rsplit_once(':') {
                    if parse_size_bytes(size).is_some() {
                        let why = if path.contains('/') {
                            format!("to create {path} with that size write `file:{rest}`")
                        } else {
                            format!(
                                "unknown backing {path:?} (known: `mem:SIZE`, \
                                 `file:PATH[:SIZE]`, or the path of an existing file)"
                            )
                        };
                        return Err(invalid(&why));
                    }
                }
            }
            // A trailing `:SIZE` creates the file; a path may itself contain ':' otherwise.
            let sized = explicit.and_then(|rest| rest.rsplit_once(':'));
            match sized.and_then(|(path, size)| {
                parse_size_bytes(size).map(|size_bytes| (path, size_bytes))
            }) {
                Some((path, size_bytes)) => Backing::File {
                    path: PathBuf::from(path),
                    size_bytes: Some(size_bytes),
                },
                None => Backing::File {
                    path: PathBuf::from(rest),
                    size_bytes: None,
                },
            }
        };
        Ok(DeviceSpec { profile, backing })
    }

    /// Opens (creating a sized file if asked) the device, named `name`.
    pub fn open(&self, name: &str) -> Result<Arc<dyn Device>, DeviceError> {
        let backing: Arc<dyn Device> = match &self.backing {
            Backing::Memory { size_bytes } => {
                Arc::new(MemoryDevice::with_block_size(name, *size_bytes, 4096)?)
            }
            Backing::File { path, size_bytes } => {
                let config = FileDeviceConfig {
                    name: Some(name.to_string()),
                    ..FileDeviceConfig::default()
                };
                match size_bytes {
                    Some(size_bytes) => Arc::new(FileDevice::create(path, *size_bytes, config)?),
                    None => Arc::new(FileDevice::open(path, config)?),
                }
            }
        };
        let Some(profile_name) = &self.profile else {
            return Ok(backing);
        };
        let profile = EmulationProfile::preset(profile_name).ok_or_else(|| {
            DeviceError::InvalidConfig(format!("unknown emulation profile {profile_name:?}"))
        })?;
        Ok(Arc::new(EmulatedDevice::new(
            format!("{name} ({profile_name})"),
            backing,
            profile,
        )))
    }
}

/// Parses `123`, `4K`, `64M`, `1.5G`, `2T`, `4KiB` (binary multiples) into bytes.
pub fn parse_size_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return None,
    };
    if let Ok(whole) = number.parse::<u64>() {
        return whole.checked_mul(1u64 << shift);
    }
    let value: f64 = number.parse().ok()?;
    let bytes = value * (1u64 << shift) as f64;
    (bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeviceKind;

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_size_bytes("4096"), Some(4096));
        assert_eq!(parse_size_bytes("4K"), Some(4096));
        assert_eq!(parse_size_bytes("64MiB"), Some(64 << 20));
        assert_eq!(parse_size_bytes("1.5G"), Some(3 << 29));
        assert_eq!(parse_size_bytes("2t"), Some(2 << 40));
        assert_eq!(parse_size_bytes("x"), None);
        assert_eq!(parse_size_bytes("4Q"), None);
        assert_eq!(parse_size_bytes("99999999999T"), None);
    }

    #[test]
    fn parses_specs() {
        assert_eq!(
            DeviceSpec::parse("nvme@mem:4G").unwrap(),
            DeviceSpec {
                profile: Some("nvme".into()),
                backing: Backing::Memory {
                    size_bytes: 4 << 30
                }
            }
        );
        assert_eq!(
            DeviceSpec::parse("hdd-10k@file:/srv/a.img:100G")
                .unwrap()
                .backing,
            Backing::File {
                path: "/srv/a.img".into(),
                size_bytes: Some(100 << 30)
            }
        );
        assert_eq!(
            DeviceSpec::parse("/dev/sdb").unwrap(),
            DeviceSpec {
                profile: None,
                backing: Backing::File {
                    path: "/dev/sdb".into(),
                    size_bytes: None
                }
            }
        );
        assert!(DeviceSpec::parse("floppy@mem:1M").is_err());
        assert!(DeviceSpec::parse("mem:lots").is_err());
        assert!(DeviceSpec::parse("mem:0").is_err());
        assert!(
            DeviceSpec::parse("mem:99999T").is_err(),
            "more than the machine has"
        );
        assert!(DeviceSpec::parse("file:").is_err());
        let mistyped = DeviceSpec::parse("bogus:1G").unwrap_err().to_string();
        assert!(mistyped.contains("unknown backing \"bogus\""), "{mistyped}");
        assert!(DeviceSpec::parse("hdd-10k@men:1G").is_err());
        let unprefixed = DeviceSpec::parse("/nonexistent/a.img:1G")
            .unwrap_err()
            .to_string();
        assert!(
            unprefixed.contains("file:/nonexistent/a.img:1G"),
            "{unprefixed}"
        );
        // An existing file whose name ends in ':SIZE' is that file.
        let directory = tempfile::tempdir().unwrap();
        let odd = directory.path().join("pci-0:0:1");
        std::fs::write(&odd, b"").unwrap();
        assert_eq!(
            DeviceSpec::parse(odd.to_str().unwrap()).unwrap().backing,
            Backing::File {
                path: odd,
                size_bytes: None
            }
        );
    }

    #[tokio::test]
    async fn opens_specs() {
        let memory = DeviceSpec::parse("mem:1M").unwrap().open("m").unwrap();
        assert_eq!(memory.kind(), DeviceKind::Memory);
        assert_eq!(memory.size_bytes(), 1 << 20);
        let directory = tempfile::tempdir().unwrap();
        let text = format!(
            "instant@file:{}:1M",
            directory.path().join("d.img").display()
        );
        let emulated = DeviceSpec::parse(&text).unwrap().open("d").unwrap();
        assert_eq!(emulated.kind(), DeviceKind::Emulated);
        emulated.write_at(0, &[1u8; 4096]).await.unwrap();
        drop(emulated);
        let reopened = DeviceSpec::parse(&format!(
            "file:{}",
            directory.path().join("d.img").display()
        ))
        .unwrap()
        .open("d")
        .unwrap();
        let mut back = [0u8; 4096];
        reopened.read_at(0, &mut back).await.unwrap();
        assert_eq!(back, [1u8; 4096]);
    }
}
