//! Where a server finds its exports: a fixed list ([`StaticExports`]) or a catalogue that
//! changes while the server runs ([`ExportSource`], e.g. a cluster's volumes).

use std::sync::Arc;

use async_trait::async_trait;
use device::Device;

use crate::error::NbdError;
use crate::server::ExportConfig;

/// One export: a device and how it is served.
#[derive(Clone)]
pub struct Export {
    /// What clients read and write.
    pub device: Arc<dyn Device>,
    /// Its name and serving limits.
    pub config: ExportConfig,
}

/// The exports a server offers, looked up when a client names one.
#[async_trait]
pub trait ExportSource: Send + Sync {
    /// The export a client names, as it sent the name (bytes, not necessarily UTF-8); the
    /// empty name asks for the default export, which a source need not have. `Ok(None)`: no
    /// such export.
    async fn find(&self, name: &[u8]) -> Result<Option<Export>, NbdError>;

    /// Every export's name, for clients listing them (NBD_OPT_LIST).
    async fn list(&self) -> Result<Vec<String>, NbdError>;
}

/// A fixed list of exports; the first is also the default export (the empty name).
pub struct StaticExports {
    exports: Vec<Export>,
}

impl StaticExports {
    /// Panics on no exports, a repeated name or a zero `in_flight_max`.
    pub fn new(exports: Vec<Export>) -> Self {
        assert!(!exports.is_empty(), "an NBD server needs an export");
        for (index, export) in exports.iter().enumerate() {
            assert!(
                export.config.in_flight_max > 0,
                "in_flight_max must be positive"
            );
            assert!(
                exports[..index]
                    .iter()
                    .all(|other| other.config.name != export.config.name),
                "export name {:?} given twice",
                export.config.name
            );
        }
        Self { exports }
    }

    /// The first export's device.
    pub fn first_device(&self) -> &Arc<dyn Device> {
        &self.exports[0].device
    }
}

#[async_trait]
impl ExportSource for StaticExports {
    async fn find(&self, name: &[u8]) -> Result<Option<Export>, NbdError> {
        if name.is_empty() {
            return Ok(self.exports.first().cloned());
        }
        Ok(self
            .exports
            .iter()
            .find(|export| export.config.name.as_bytes() == name)
            .cloned())
    }

    async fn list(&self) -> Result<Vec<String>, NbdError> {
        Ok(self
            .exports
            .iter()
            .map(|export| export.config.name.clone())
            .collect())
    }
}
