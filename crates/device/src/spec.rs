//! Devices described by one string, for configuration files and command lines.
//!
//! Grammar: `[faulty:OPTIONS:][PROFILE@]BACKING` where
//! - `faulty:OPTIONS:` wraps the device in a [`FaultyDevice`] with the random faults
//!   `OPTIONS` asks for: comma-separated `eio=P`, `read-eio=P`, `write-eio=P`, `torn=P`,
//!   `flip=P`, `read-flip=P`, `write-flip=P`, `spike=P/DURATION`, `seed=N` (probabilities per
//!   operation in `0..=1`, durations `250us`, `50ms`, `1s`; see `spec/faults.rs`);
//! - `BACKING` is `mem:SIZE`, `file:PATH` (an existing file or block device),
//!   `file:PATH:SIZE` (created sparse, or resized, to SIZE), or a bare `PATH` (an existing
//!   file; a bare `PATH:SIZE` is refused: the size needs `file:`);
//! - `PROFILE` is an emulation preset ([`EmulationProfile::PRESETS`] or `instant`);
//! - `SIZE` is bytes with an optional binary suffix `K`, `M`, `G`, `T` (`KiB`.. also accepted).
//!
//! Examples: `nvme@mem:4G`, `hdd-10k@file:/srv/strata/hdd0.img:100G`, `/dev/nvme0n1p3`,
//! `faulty:eio=0.001,flip=0.0001,spike=0.01/50ms,seed=7:hdd-7200@file:osd.3.img:10G`.
//!
//! [`DeviceSpec`]'s `Display` writes the spec back in this grammar (`parse` of it gives the
//! same spec).

mod faults;

use std::path::PathBuf;
use std::sync::Arc;

use crate::{
    Device, DeviceError, EmulatedDevice, EmulationProfile, FaultConfig, FaultyDevice, FileDevice,
    FileDeviceConfig, MemoryDevice,
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
    /// Random faults injected over the device (`faulty:OPTIONS:`), if any.
    pub faults: Option<FaultConfig>,
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
    /// Parses `[faulty:OPTIONS:][PROFILE@]BACKING` (see the module doc).
    pub fn parse(text: &str) -> Result<DeviceSpec, DeviceError> {
        let invalid =
            |why: &str| DeviceError::InvalidConfig(format!("device spec {text:?}: {why}"));
        let Some(faulty) = text.strip_prefix(faults::PREFIX) else {
            return Self::parse_unfaulted(text, text);
        };
        let Some((options, inner)) = faulty.split_once(':') else {
            return Err(invalid(
                "a faulty device is `faulty:OPTIONS:DEVICE`, e.g. `faulty:eio=0.001:mem:1G`",
            ));
        };
        if inner.starts_with(faults::PREFIX) {
            return Err(invalid("a faulty device inside a faulty device"));
        }
        let config = faults::parse_options(options).map_err(|why| invalid(&why))?;
        let mut spec = Self::parse_unfaulted(inner, text)?;
        spec.faults = Some(config);
        Ok(spec)
    }

    /// Parses `[PROFILE@]BACKING` of the spec `whole`.
    fn parse_unfaulted(text: &str, whole: &str) -> Result<DeviceSpec, DeviceError> {
        let invalid =
            |why: &str| DeviceError::InvalidConfig(format!("device spec {whole:?}: {why}"));
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
            let size_bytes = parse_size_bytes(size).ok_or_else(|| {
                invalid(&format!(
                    "memory size {size:?} is not a size like 512M or 4G (bytes, at least 0, \
                     with an optional suffix K, M, G or T)"
                ))
            })?;
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
            // A trailing `:SIZE` creates the file; a path may itself contain ':' otherwise,
            // but not end in what is meant as a size and is none (`:-1G`, `:10X`): read as
            // part of the path, it named a missing device.
            if let Some((_, size)) = rest.rsplit_once(':') {
                if !std::path::Path::new(rest).exists() && malformed_size(size) {
                    return Err(invalid(&format!(
                        "size {size:?} is not a size like 512M or 4G (bytes, at least 0, \
                         with an optional suffix K, M, G or T)"
                    )));
                }
            }
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
        Ok(DeviceSpec {
            faults: None,
            profile,
            backing,
        })
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
        let emulated: Arc<dyn Device> = match &self.profile {
            None => backing,
            Some(profile_name) => {
                let profile = EmulationProfile::preset(profile_name).ok_or_else(|| {
                    DeviceError::InvalidConfig(format!(
                        "unknown emulation profile {profile_name:?}"
                    ))
                })?;
                Arc::new(EmulatedDevice::new(
                    format!("{name} ({profile_name})"),
                    backing,
                    profile,
                ))
            }
        };
        Ok(match &self.faults {
            None => emulated,
            Some(config) => Arc::new(FaultyDevice::new(
                format!("{name} (faulty)"),
                emulated,
                config.clone(),
            )),
        })
    }
}

impl std::fmt::Display for DeviceSpec {
    /// The spec in the grammar [`DeviceSpec::parse`] reads.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(config) = &self.faults {
            write!(f, "{}{}:", faults::PREFIX, faults::format_options(config))?;
        }
        if let Some(profile) = &self.profile {
            write!(f, "{profile}@")?;
        }
        match &self.backing {
            Backing::Memory { size_bytes } => write!(f, "mem:{size_bytes}"),
            Backing::File { path, size_bytes } => {
                write!(f, "file:{}", path.display())?;
                match size_bytes {
                    Some(size_bytes) => write!(f, ":{size_bytes}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// Whether `text`, after a path's last `:`, is meant as a size and is none: a sign, or a
/// number with a suffix that is no unit.
fn malformed_size(text: &str) -> bool {
    if parse_size_bytes(text).is_some() {
        return false;
    }
    let unsigned = text.trim_start_matches(['-', '+']);
    let signed = unsigned.len() != text.len();
    let number_bytes = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, unit) = unsigned.split_at(number_bytes);
    let numeric = !number.is_empty() && number.parse::<f64>().is_ok();
    numeric && (signed || unit.chars().all(|c| c.is_ascii_alphabetic()))
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
                faults: None,
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
                faults: None,
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

    /// Regression (issue 43): `file:PATH:-1G` was read as the path `PATH:-1G`, a missing
    /// device, and a cluster then advised removing the OSD's metadata.
    #[test]
    fn a_negative_or_unknown_size_is_a_size_error() {
        for text in [
            "file:/srv/osd.1.img:-1G",
            "file:osd.1.img:-4096",
            "file:/srv/osd.1.img:10X",
            "/srv/osd.1.img:-1G",
            "hdd-7200@file:/srv/a.img:+-3M",
        ] {
            let error = DeviceSpec::parse(text).unwrap_err().to_string();
            assert!(error.contains("is not a size like"), "{text}: {error}");
        }
        let error = DeviceSpec::parse("mem:-1G").unwrap_err().to_string();
        assert!(error.contains("memory size \"-1G\""), "{error}");
        // A path whose last ':' part is no size at all stays a path.
        assert_eq!(
            DeviceSpec::parse("file:/dev/disk/by-path/pci-0000:00:1f.2-ata-1")
                .unwrap()
                .backing,
            Backing::File {
                path: "/dev/disk/by-path/pci-0000:00:1f.2-ata-1".into(),
                size_bytes: None
            }
        );
    }

    #[test]
    fn parses_faulty_specs() {
        let spec = DeviceSpec::parse(
            "faulty:eio=0.001,flip=0.0001,spike=0.01/50ms,seed=7:hdd-7200@mem:1G",
        )
        .unwrap();
        let faults = spec.faults.clone().unwrap();
        assert_eq!(faults.read_error_probability, 0.001);
        assert_eq!(faults.write_bit_flip_probability, 0.0001);
        assert_eq!(faults.latency_spike_us, 50_000);
        assert_eq!(faults.seed, 7);
        assert_eq!(spec.profile.as_deref(), Some("hdd-7200"));
        assert_eq!(
            spec.backing,
            Backing::Memory {
                size_bytes: 1 << 30
            }
        );
        assert_eq!(
            spec.to_string(),
            "faulty:eio=0.001,flip=0.0001,spike=0.01/50ms,seed=7:hdd-7200@mem:1073741824"
        );
        for (text, expected) in [
            ("faulty:eio=0.1", "faulty:OPTIONS:DEVICE"),
            ("faulty:eio=1.5:mem:1M", "eio=1.5: a probability"),
            ("faulty:oops=1:mem:1M", "unknown faulty option \"oops\""),
            ("faulty:eio=0.1:faulty::mem:1M", "inside a faulty device"),
            ("faulty:eio=0.1:floppy@mem:1M", "unknown emulation profile"),
        ] {
            let error = DeviceSpec::parse(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
            assert!(error.contains(text), "the message names the spec: {error}");
        }
    }

    #[tokio::test]
    async fn a_faulty_spec_opens_a_faulty_device() {
        let device = DeviceSpec::parse("faulty:eio=1:mem:1M")
            .unwrap()
            .open("f")
            .unwrap();
        assert_eq!(device.kind(), DeviceKind::Faulty);
        assert!(device.write_at(0, &[1u8; 4096]).await.is_err());
        let quiet = DeviceSpec::parse("faulty::mem:1M")
            .unwrap()
            .open("q")
            .unwrap();
        quiet.write_at(0, &[1u8; 4096]).await.unwrap();
    }

    mod round_trip {
        use super::*;
        use proptest::prelude::*;

        fn probability() -> impl Strategy<Value = f64> {
            prop_oneof![Just(0.0), Just(1.0), 0.0..=1.0f64]
        }

        fn faults() -> impl Strategy<Value = FaultConfig> {
            (
                any::<u64>(),
                (probability(), probability(), probability()),
                (probability(), probability()),
                prop_oneof![Just(None), (1e-9..=1.0f64, 1..10_000_000u64).prop_map(Some)],
            )
                .prop_map(
                    |(seed, (read, write, torn), (read_flip, write_flip), spike)| {
                        let (spike_probability, spike_us) = spike.unwrap_or((0.0, 0));
                        FaultConfig {
                            seed,
                            read_error_probability: read,
                            write_error_probability: write,
                            torn_write_probability: torn,
                            read_bit_flip_probability: read_flip,
                            write_bit_flip_probability: write_flip,
                            latency_spike_probability: spike_probability,
                            latency_spike_us: spike_us,
                            ..FaultConfig::default()
                        }
                    },
                )
        }

        fn specs() -> impl Strategy<Value = DeviceSpec> {
            let backing = prop_oneof![
                (1..(1u64 << 30)).prop_map(|size_bytes| Backing::Memory { size_bytes }),
                (
                    "(/[a-z0-9._-]{1,8}){1,3}",
                    proptest::option::of(0..(1u64 << 50))
                )
                    .prop_map(|(path, size_bytes)| Backing::File {
                        path: PathBuf::from(path),
                        size_bytes,
                    }),
            ];
            let profile = proptest::option::of(prop_oneof![
                Just("instant".to_string()),
                Just("nvme".to_string()),
                Just("hdd-7200".to_string()),
            ]);
            (proptest::option::of(faults()), profile, backing).prop_map(
                |(faults, profile, backing)| DeviceSpec {
                    faults,
                    profile,
                    backing,
                },
            )
        }

        proptest! {
            #[test]
            fn format_then_parse_gives_the_spec_back(spec in specs()) {
                let text = spec.to_string();
                let parsed = DeviceSpec::parse(&text);
                prop_assert!(parsed.is_ok(), "{text}: {parsed:?}");
                prop_assert_eq!(parsed.unwrap(), spec, "{}", text);
            }
        }
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
