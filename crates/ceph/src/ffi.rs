//! The librados C API (`rados/librados.h` of Ceph 16.2), declared by hand and loaded at run time.
//!
//! Only the functions the backend calls are declared; each type below is copied from the 16.2
//! header. The library is opened once per process ([`api`]); the function pointers stay valid
//! because the [`libloading::Library`] they come from lives in the same [`Api`] for as long as
//! the process keeps it (a `static`).

use std::ffi::{c_char, c_int, c_uchar, c_void};
use std::sync::OnceLock;

use crate::error::CephError;

/// `rados_t`.
pub type RadosT = *mut c_void;
/// `rados_ioctx_t`.
pub type IoctxT = *mut c_void;
/// `rados_completion_t`.
pub type CompletionT = *mut c_void;
/// `rados_write_op_t`.
pub type WriteOpT = *mut c_void;
/// `rados_read_op_t`.
pub type ReadOpT = *mut c_void;
/// `rados_omap_iter_t`.
pub type OmapIterT = *mut c_void;
/// `rados_xattrs_iter_t`.
pub type XattrsIterT = *mut c_void;
/// `rados_list_ctx_t`.
pub type ListCtxT = *mut c_void;
/// `time_t` on the 64-bit Linux targets Ceph ships for.
pub type TimeT = i64;
/// `rados_callback_t`.
pub type CallbackT = extern "C" fn(CompletionT, *mut c_void);

/// `LIBRADOS_OPERATION_FULL_TRY`: on a full pool or cluster, fail with ENOSPC (EDQUOT past a
/// quota) instead of waiting for space.
pub const OPERATION_FULL_TRY: c_int = 64;

/// `LIBRADOS_CMPXATTR_OP_*`.
pub mod cmp {
    /// `==`.
    pub const EQ: u8 = 1;
    /// `!=`.
    pub const NE: u8 = 2;
    /// `>`.
    pub const GT: u8 = 3;
    /// `>=`.
    pub const GTE: u8 = 4;
    /// `<`.
    pub const LT: u8 = 5;
    /// `<=`.
    pub const LTE: u8 = 6;
}

/// The shared library's name (SONAME of Ceph 16.2's librados).
pub const LIBRARY_NAME: &str = "librados.so.2";

macro_rules! api {
    ($($name:ident: fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        /// The librados functions the backend uses, resolved from the loaded library.
        #[allow(non_snake_case, dead_code)]
        pub struct Api {
            $(pub $name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
            _library: libloading::Library,
        }

        impl Api {
            fn load() -> Result<Self, CephError> {
                // SAFETY: loading librados runs its static initialisers, which only set up
                // Ceph's global state; the library is the Ceph 16.2 client library the
                // declarations in this module were copied from.
                let library = unsafe { libloading::Library::new(LIBRARY_NAME) }
                    .map_err(|error| CephError::LibraryMissing(error.to_string()))?;
                $(
                    // SAFETY: the symbol is a function of librados.h whose C signature is the
                    // one declared here; the pointer is kept with the library it comes from.
                    let $name = unsafe {
                        *library
                            .get::<unsafe extern "C" fn($($arg),*) $(-> $ret)?>(
                                concat!(stringify!($name), "\0").as_bytes(),
                            )
                            .map_err(|error| CephError::LibrarySymbol {
                                symbol: stringify!($name),
                                reason: error.to_string(),
                            })?
                    };
                )*
                Ok(Self { $($name,)* _library: library })
            }
        }
    };
}

api! {
    rados_create2: fn(*mut RadosT, *const c_char, *const c_char, u64) -> c_int;
    rados_conf_read_file: fn(RadosT, *const c_char) -> c_int;
    rados_conf_set: fn(RadosT, *const c_char, *const c_char) -> c_int;
    rados_connect: fn(RadosT) -> c_int;
    rados_shutdown: fn(RadosT);
    rados_wait_for_latest_osdmap: fn(RadosT) -> c_int;
    rados_ioctx_create: fn(RadosT, *const c_char, *mut IoctxT) -> c_int;
    rados_ioctx_destroy: fn(IoctxT);
    rados_pool_lookup: fn(RadosT, *const c_char) -> i64;
    rados_mon_command: fn(
        RadosT, *mut *const c_char, usize, *const c_char, usize,
        *mut *mut c_char, *mut usize, *mut *mut c_char, *mut usize
    ) -> c_int;
    rados_buffer_free: fn(*mut c_char);
    rados_aio_create_completion2: fn(*mut c_void, Option<CallbackT>, *mut CompletionT) -> c_int;
    rados_aio_get_return_value: fn(CompletionT) -> c_int;
    rados_aio_get_version: fn(CompletionT) -> u64;
    rados_aio_release: fn(CompletionT);
    rados_create_write_op: fn() -> WriteOpT;
    rados_release_write_op: fn(WriteOpT);
    rados_write_op_assert_exists: fn(WriteOpT);
    rados_write_op_assert_version: fn(WriteOpT, u64);
    rados_write_op_cmpxattr: fn(WriteOpT, *const c_char, u8, *const c_char, usize);
    rados_write_op_omap_cmp2: fn(WriteOpT, *const c_char, u8, *const c_char, usize, usize, *mut c_int);
    rados_write_op_setxattr: fn(WriteOpT, *const c_char, *const c_char, usize);
    rados_write_op_rmxattr: fn(WriteOpT, *const c_char);
    rados_write_op_create: fn(WriteOpT, c_int, *const c_char);
    rados_write_op_write: fn(WriteOpT, *const c_char, usize, u64);
    rados_write_op_write_full: fn(WriteOpT, *const c_char, usize);
    rados_write_op_append: fn(WriteOpT, *const c_char, usize);
    rados_write_op_remove: fn(WriteOpT);
    rados_write_op_truncate: fn(WriteOpT, u64);
    rados_write_op_zero: fn(WriteOpT, u64, u64);
    rados_write_op_omap_set2: fn(WriteOpT, *const *const c_char, *const *const c_char, *const usize, *const usize, usize);
    rados_write_op_omap_rm_keys2: fn(WriteOpT, *const *const c_char, *const usize, usize);
    rados_write_op_omap_clear: fn(WriteOpT);
    rados_aio_write_op_operate: fn(WriteOpT, IoctxT, CompletionT, *const c_char, *mut TimeT, c_int) -> c_int;
    rados_create_read_op: fn() -> ReadOpT;
    rados_release_read_op: fn(ReadOpT);
    rados_read_op_stat: fn(ReadOpT, *mut u64, *mut TimeT, *mut c_int);
    rados_read_op_read: fn(ReadOpT, u64, usize, *mut c_char, *mut usize, *mut c_int);
    rados_read_op_getxattrs: fn(ReadOpT, *mut XattrsIterT, *mut c_int);
    rados_read_op_omap_get_vals2: fn(ReadOpT, *const c_char, *const c_char, u64, *mut OmapIterT, *mut c_uchar, *mut c_int);
    rados_read_op_omap_get_vals_by_keys2: fn(ReadOpT, *const *const c_char, usize, *const usize, *mut OmapIterT, *mut c_int);
    rados_aio_read_op_operate: fn(ReadOpT, IoctxT, CompletionT, *const c_char, c_int) -> c_int;
    rados_getxattrs_next: fn(XattrsIterT, *mut *const c_char, *mut *const c_char, *mut usize) -> c_int;
    rados_getxattrs_end: fn(XattrsIterT);
    rados_omap_get_next2: fn(OmapIterT, *mut *mut c_char, *mut *mut c_char, *mut usize, *mut usize) -> c_int;
    rados_omap_get_end: fn(OmapIterT);
    rados_nobjects_list_open: fn(IoctxT, *mut ListCtxT) -> c_int;
    rados_nobjects_list_seek: fn(ListCtxT, u32) -> u32;
    rados_nobjects_list_next: fn(ListCtxT, *mut *const c_char, *mut *const c_char, *mut *const c_char) -> c_int;
    rados_nobjects_list_close: fn(ListCtxT);
}

/// The process's librados, loaded on first use; the error names the package to install.
pub fn api() -> Result<&'static Api, CephError> {
    static API: OnceLock<Result<Api, CephError>> = OnceLock::new();
    API.get_or_init(Api::load).as_ref().map_err(Clone::clone)
}
