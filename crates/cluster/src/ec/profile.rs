//! Erasure-code profiles as `ceph osd erasure-code-profile set` names them: `k=4,m=2`,
//! `failure-domain=host`, `device-class=hdd` (Ceph's `crush-device-class`), `stripe-unit=4K`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Most shards (k + m) a profile may have.
pub const SHARDS_MAX: u32 = 32;

/// Ceph's default stripe unit (`osd_pool_erasure_code_stripe_unit`).
pub const STRIPE_UNIT_DEFAULT_BYTES: u64 = 4096;

/// The failure domains a profile may name (the CRUSH rule chooses leaves of this type).
pub const FAILURE_DOMAINS: [&str; 1] = ["host"];

/// An erasure-code profile: Reed-Solomon with `k` data and `m` coding shards.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErasureProfile {
    /// Data shards, >= 2.
    pub k: u32,
    /// Coding shards, >= 1; k + m <= [`SHARDS_MAX`].
    pub m: u32,
    /// CRUSH failure domain: one shard per bucket of this type. Default `host`.
    pub failure_domain: String,
    /// Place only on OSDs of this class. Default: any.
    pub device_class: Option<String>,
    /// Bytes of one shard's chunk of a stripe: a multiple of 64 (the codec works on 64-byte
    /// blocks, so encoding rows one by one or a whole shard at once gives the same parity).
    /// Default 4096.
    pub stripe_unit_bytes: u64,
}

impl ErasureProfile {
    /// `k` data and `m` coding shards with the defaults.
    pub fn new(k: u32, m: u32) -> Self {
        Self {
            k,
            m,
            failure_domain: "host".to_string(),
            device_class: None,
            stripe_unit_bytes: STRIPE_UNIT_DEFAULT_BYTES,
        }
    }

    /// Parses `k=4,m=2[,failure-domain=host][,device-class=hdd][,stripe-unit=4K]` (also
    /// Ceph's spellings `crush-failure-domain`, `crush-device-class`, `stripe_unit`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut k = None;
        let mut m = None;
        let mut profile = Self::new(0, 0);
        for item in text
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
        {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| format!("erasure profile item {item:?} is not KEY=VALUE"))?;
            let number = || -> Result<u32, String> {
                value
                    .parse()
                    .map_err(|_| format!("erasure profile: {key}={value:?} is not a number"))
            };
            match key {
                "k" => k = Some(number()?),
                "m" => m = Some(number()?),
                "failure-domain" | "crush-failure-domain" => {
                    profile.failure_domain = value.to_string()
                }
                "device-class" | "crush-device-class" => {
                    profile.device_class = (!value.is_empty()).then(|| value.to_string())
                }
                "stripe-unit" | "stripe_unit" => {
                    profile.stripe_unit_bytes =
                        device::parse_size_bytes(value).ok_or_else(|| {
                            format!(
                                "erasure profile: stripe-unit={value:?} is not a size (4K, 64K)"
                            )
                        })?
                }
                "plugin" | "technique" if matches!(value, "jerasure" | "isa" | "reed_sol_van") => {}
                _ => {
                    return Err(format!(
                        "erasure profile: unknown key {key:?} (k, m, failure-domain, \
                         device-class, stripe-unit)"
                    ))
                }
            }
        }
        profile.k = k.ok_or("erasure profile needs k (data shards), as k=4,m=2")?;
        profile.m = m.ok_or("erasure profile needs m (coding shards), as k=4,m=2")?;
        profile.validate()?;
        Ok(profile)
    }

    /// Checks the numbers and names (not that the cluster has enough failure domains).
    pub fn validate(&self) -> Result<(), String> {
        if self.k < 2 {
            return Err(format!("erasure profile: k={} must be at least 2", self.k));
        }
        if self.m < 1 {
            return Err(format!("erasure profile: m={} must be at least 1", self.m));
        }
        if self.k + self.m > SHARDS_MAX {
            return Err(format!(
                "erasure profile: k+m={} is more than {SHARDS_MAX} shards",
                self.k + self.m
            ));
        }
        if self.stripe_unit_bytes == 0 || !self.stripe_unit_bytes.is_multiple_of(64) {
            return Err(format!(
                "erasure profile: stripe-unit {} must be a positive multiple of 64 bytes",
                self.stripe_unit_bytes
            ));
        }
        if self.stripe_unit_bytes > 1 << 24 {
            return Err("erasure profile: stripe-unit must be at most 16M".into());
        }
        if !FAILURE_DOMAINS.contains(&self.failure_domain.as_str()) {
            return Err(format!(
                "erasure profile: failure-domain {:?} is not supported (only {})",
                self.failure_domain,
                FAILURE_DOMAINS.join(", ")
            ));
        }
        Ok(())
    }

    /// Shards per object: `k + m`, the pool's size.
    pub fn size(&self) -> u32 {
        self.k + self.m
    }

    /// Shards that must be available to write: `k + 1`, Ceph's default `min_size` for
    /// erasure-coded pools.
    pub fn min_size(&self) -> u32 {
        self.k + 1
    }

    /// Logical bytes of one stripe (`k` chunks): Ceph's pool `stripe_width`.
    pub fn stripe_width_bytes(&self) -> u64 {
        u64::from(self.k) * self.stripe_unit_bytes
    }
}

impl fmt::Display for ErasureProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "k={},m={},failure-domain={},stripe-unit={}",
            self.k, self.m, self.failure_domain, self.stripe_unit_bytes
        )?;
        if let Some(class) = &self.device_class {
            write!(f, ",device-class={class}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_ceph_names() {
        let profile = ErasureProfile::parse("k=4,m=2,failure-domain=host,stripe-unit=8K").unwrap();
        assert_eq!((profile.k, profile.m), (4, 2));
        assert_eq!(profile.stripe_unit_bytes, 8192);
        assert_eq!(profile.stripe_width_bytes(), 32768);
        assert_eq!((profile.size(), profile.min_size()), (6, 5));
        let again = ErasureProfile::parse(&profile.to_string()).unwrap();
        assert_eq!(again, profile);
        let ceph = ErasureProfile::parse("k=2,m=1,crush-device-class=ssd").unwrap();
        assert_eq!(ceph.device_class.as_deref(), Some("ssd"));
        assert_eq!(ceph.stripe_unit_bytes, 4096);
    }

    #[test]
    fn refuses_what_cannot_work() {
        for bad in [
            "m=2",
            "k=4",
            "k=1,m=1",
            "k=4,m=0",
            "k=30,m=3",
            "k=4,m=2,stripe-unit=100",
            "k=4,m=2,failure-domain=rack",
            "k=4,m=2,colour=blue",
            "k=four,m=2",
        ] {
            assert!(ErasureProfile::parse(bad).is_err(), "{bad} accepted");
        }
    }
}
