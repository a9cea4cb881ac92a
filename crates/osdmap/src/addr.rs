//! OSD network addresses (`entity_addr_t`, `entity_addrvec_t`): decoded so `--print` shows them
//! as Ceph does (`v2:10.0.0.1:6800/1234`); placement never reads them.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// `AF_INET` / `AF_INET6` as Linux numbers them (what Ceph encodes).
const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// One address (`entity_addr_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntityAddr {
    /// 0 none, 1 legacy (v1), 2 msgr2 (v2), 3 any.
    pub kind: u32,
    pub nonce: u32,
    /// Address family (host order).
    pub family: u16,
    /// The sockaddr after its family: port (big-endian) then the address bytes.
    pub data: Vec<u8>,
}

impl EntityAddr {
    fn port(&self) -> u16 {
        match self.data.get(0..2) {
            Some(&[hi, lo]) => u16::from_be_bytes([hi, lo]),
            _ => 0,
        }
    }
}

impl fmt::Display for EntityAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            0 => return f.write_str("-"),
            1 => f.write_str("v1:")?,
            2 => f.write_str("v2:")?,
            3 => {}
            _ => f.write_str("???:")?,
        }
        match self.family {
            AF_INET => {
                let mut ip = [0_u8; 4];
                if let Some(bytes) = self.data.get(2..6) {
                    ip.copy_from_slice(bytes);
                }
                write!(f, "{}:{}", Ipv4Addr::from(ip), self.port())?;
            }
            AF_INET6 => {
                // sockaddr_in6: port, flowinfo (4 bytes), then the 16-byte address.
                let mut ip = [0_u8; 16];
                if let Some(bytes) = self.data.get(6..22) {
                    ip.copy_from_slice(bytes);
                }
                write!(f, "[{}]:{}", Ipv6Addr::from(ip), self.port())?;
            }
            other => write!(f, "(unrecognized address family {other})")?,
        }
        write!(f, "/{}", self.nonce)
    }
}

/// The addresses of one endpoint (`entity_addrvec_t`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddrVec(pub Vec<EntityAddr>);

impl fmt::Display for AddrVec {
    /// Empty prints nothing, one address prints bare, several print as `[a,b]` (Ceph's rules).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [] => Ok(()),
            [one] => write!(f, "{one}"),
            many => {
                f.write_str("[")?;
                for (i, addr) in many.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{addr}")?;
                }
                f.write_str("]")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(kind: u32, ip: [u8; 4], port: u16, nonce: u32) -> EntityAddr {
        let mut data = port.to_be_bytes().to_vec();
        data.extend_from_slice(&ip);
        data.extend_from_slice(&[0; 8]);
        EntityAddr {
            kind,
            nonce,
            family: AF_INET,
            data,
        }
    }

    #[test]
    fn prints_like_ceph() {
        let pair = AddrVec(vec![
            v4(2, [10, 0, 0, 1], 6800, 7),
            v4(1, [10, 0, 0, 1], 6801, 7),
        ]);
        assert_eq!(pair.to_string(), "[v2:10.0.0.1:6800/7,v1:10.0.0.1:6801/7]");
        assert_eq!(
            AddrVec(vec![v4(2, [1, 2, 3, 4], 1, 0)]).to_string(),
            "v2:1.2.3.4:1/0"
        );
        assert_eq!(AddrVec::default().to_string(), "");
    }
}
