//! The connection: a `rados_t` set up from [`CephConfig`], and monitor commands.

use std::ffi::{c_char, CString};
use std::path::PathBuf;

use crate::error::{strerror, CephError};
use crate::ffi::{api, Api, RadosT};

/// How to reach a Ceph cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CephConfig {
    /// ceph.conf to read. Default `None`: `$CEPH_CONF` if set, else librados' search
    /// (`/etc/ceph/ceph.conf`, `~/.ceph/config`, `./ceph.conf`).
    pub conf_path: Option<PathBuf>,
    /// The client's id, without `client.` (`admin` for `client.admin`). Default `None`: `admin`.
    pub client_id: Option<String>,
    /// Keyring file. Default `None`: the one ceph.conf names.
    pub keyring: Option<PathBuf>,
    /// Seconds an OSD operation may wait (a degraded or unreachable PG) before it fails with
    /// a retryable error instead of blocking; also the monitor-command timeout. Default 30.
    pub op_timeout_s: u64,
    /// Further librados settings, applied last (`("rados_osd_op_timeout", "5")`...).
    pub options: Vec<(String, String)>,
    /// The application pools created through the backend are tagged with
    /// (`osd pool application enable`). Default `strata`.
    pub application: String,
}

impl Default for CephConfig {
    fn default() -> Self {
        Self {
            conf_path: None,
            client_id: None,
            keyring: None,
            op_timeout_s: 30,
            options: Vec::new(),
            application: "strata".to_string(),
        }
    }
}

/// What a monitor command answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MonReply {
    /// The output buffer (JSON with `"format": "json"`).
    pub outbuf: Vec<u8>,
    /// The status string (`outs`): human-readable detail or the error's text.
    pub outs: String,
}

/// A connected `rados_t`, shut down when the last user lets go.
pub(crate) struct ClusterHandle {
    pub(crate) api: &'static Api,
    pub(crate) raw: RadosT,
}

// SAFETY: a connected librados cluster handle is thread-safe (librados' own contract); it is
// shut down once, by the last owner.
unsafe impl Send for ClusterHandle {}
// SAFETY: as above.
unsafe impl Sync for ClusterHandle {}

impl Drop for ClusterHandle {
    fn drop(&mut self) {
        // SAFETY: every ioctx and operation holds an Arc of this handle, so none is left.
        unsafe { (self.api.rados_shutdown)(self.raw) };
    }
}

fn c_string(text: &str, what: &str) -> Result<CString, CephError> {
    CString::new(text).map_err(|_| CephError::Config(format!("{what} {text:?} holds a NUL byte")))
}

impl ClusterHandle {
    /// Creates, configures and connects (blocking).
    pub(crate) fn connect(config: &CephConfig) -> Result<Self, CephError> {
        let api = api()?;
        let name = format!("client.{}", config.client_id.as_deref().unwrap_or("admin"));
        let cluster_name = c_string("ceph", "cluster name")?;
        let client_name = c_string(&name, "client name")?;
        let mut raw: RadosT = std::ptr::null_mut();
        // SAFETY: valid C strings and out slot; flags 0.
        let result = unsafe {
            (api.rados_create2)(&mut raw, cluster_name.as_ptr(), client_name.as_ptr(), 0)
        };
        if result < 0 {
            return Err(CephError::call("rados_create2", result, &name));
        }
        // From here the handle is shut down on any error.
        let handle = Self { api, raw };
        let conf_path = config
            .conf_path
            .clone()
            .or_else(|| std::env::var_os("CEPH_CONF").map(PathBuf::from));
        let conf = conf_path
            .as_ref()
            .map(|path| c_string(&path.to_string_lossy(), "ceph.conf path"))
            .transpose()?;
        // SAFETY: the handle is created and not connected; NULL means librados' search.
        let result = unsafe {
            (api.rados_conf_read_file)(
                handle.raw,
                conf.as_ref().map_or(std::ptr::null(), |conf| conf.as_ptr()),
            )
        };
        if result < 0 {
            let path = conf_path.map_or("the default ceph.conf".into(), |path| {
                path.display().to_string()
            });
            return Err(CephError::Config(format!(
                "cannot read {path}: {}",
                strerror(-result)
            )));
        }
        let timeout = config.op_timeout_s.to_string();
        let mut settings = vec![
            ("rados_osd_op_timeout".to_string(), timeout.clone()),
            ("rados_mon_op_timeout".to_string(), timeout.clone()),
            ("client_mount_timeout".to_string(), timeout),
        ];
        if let Some(keyring) = &config.keyring {
            settings.push(("keyring".into(), keyring.to_string_lossy().into_owned()));
        }
        settings.extend(config.options.iter().cloned());
        for (option, value) in &settings {
            handle.set(option, value)?;
        }
        // SAFETY: the handle is configured and not yet connected.
        let result = unsafe { (api.rados_connect)(handle.raw) };
        if result < 0 {
            return Err(CephError::call(
                "connect to the Ceph cluster",
                result,
                "check ceph.conf's mon_host, the client id and its keyring",
            ));
        }
        Ok(handle)
    }

    fn set(&self, option: &str, value: &str) -> Result<(), CephError> {
        let c_option = c_string(option, "option")?;
        let c_value = c_string(value, "value")?;
        // SAFETY: the handle is alive; both strings are valid for the call.
        let result =
            unsafe { (self.api.rados_conf_set)(self.raw, c_option.as_ptr(), c_value.as_ptr()) };
        if result < 0 {
            return Err(CephError::Config(format!(
                "{option} = {value}: {}",
                strerror(-result)
            )));
        }
        Ok(())
    }

    /// Sends one monitor command (JSON) and waits for its reply (blocking, bounded by
    /// `rados_mon_op_timeout`).
    pub(crate) fn mon_command(&self, command: &str) -> Result<MonReply, CephError> {
        let c_command = c_string(command, "monitor command")?;
        let mut commands = [c_command.as_ptr()];
        let mut outbuf: *mut c_char = std::ptr::null_mut();
        let mut outbuf_length = 0usize;
        let mut outs: *mut c_char = std::ptr::null_mut();
        let mut outs_length = 0usize;
        // SAFETY: one valid command string, no input buffer, valid out slots; the buffers
        // librados allocates are copied and freed below.
        let result = unsafe {
            (self.api.rados_mon_command)(
                self.raw,
                commands.as_mut_ptr(),
                1,
                std::ptr::null(),
                0,
                &mut outbuf,
                &mut outbuf_length,
                &mut outs,
                &mut outs_length,
            )
        };
        let take = |buffer: *mut c_char, length: usize| -> Vec<u8> {
            if buffer.is_null() {
                return Vec::new();
            }
            // SAFETY: librados allocated `length` bytes at `buffer`; freed once here.
            unsafe {
                let bytes = std::slice::from_raw_parts(buffer.cast::<u8>(), length).to_vec();
                (self.api.rados_buffer_free)(buffer);
                bytes
            }
        };
        let reply = MonReply {
            outbuf: take(outbuf, outbuf_length),
            outs: String::from_utf8_lossy(&take(outs, outs_length)).into_owned(),
        };
        if result < 0 {
            return Err(CephError::call(
                format!("monitor command {command}"),
                result,
                reply.outs.trim(),
            ));
        }
        Ok(reply)
    }

    /// Waits until this client has the cluster's latest OSD map (after a pool change).
    pub(crate) fn wait_for_latest_osdmap(&self) -> Result<(), CephError> {
        // SAFETY: the handle is connected.
        let result = unsafe { (self.api.rados_wait_for_latest_osdmap)(self.raw) };
        if result < 0 {
            return Err(CephError::call("rados_wait_for_latest_osdmap", result, ""));
        }
        Ok(())
    }

    /// The id of pool `name` in this client's OSD map, if it has one.
    pub(crate) fn pool_id(&self, name: &str) -> Result<Option<i64>, CephError> {
        let c_name = c_string(name, "pool name")?;
        // SAFETY: the handle is connected; the name is valid for the call.
        let id = unsafe { (self.api.rados_pool_lookup)(self.raw, c_name.as_ptr()) };
        Ok((id >= 0).then_some(id))
    }
}
