//! How big the default cluster's OSD files are (issue 44): sized from the free space of the
//! filesystem that holds the data directory, not a fixed 1 GiB (nine 1 GiB OSDs were full
//! after s3-tests and one rclone copy). The files are sparse, so the size is a ceiling on
//! what the cluster may write, not space taken at creation. Pure: the caller measures the
//! free space.

/// Share of the filesystem's free space the default cluster may grow into, over all OSDs
/// (replicas included): the rest stays for everything else on that filesystem.
pub const FREE_SHARE: f64 = 0.5;
/// Largest default OSD file, bytes (64 GiB): a first cluster on a large disk stays a
/// first cluster; `--osd-size` chooses another size.
pub const OSD_SIZE_BYTES_MAX: u64 = 64 << 30;
/// Smallest default OSD file, bytes (1 GiB, the size before issue 44).
pub const OSD_SIZE_BYTES_MIN: u64 = 1 << 30;

/// The size of each of `osds` OSD files when `free_bytes` are free: [`FREE_SHARE`] of the
/// free space shared out, in whole GiB, between [`OSD_SIZE_BYTES_MIN`] and
/// [`OSD_SIZE_BYTES_MAX`].
pub fn default_osd_size_bytes(free_bytes: u64, osds: usize) -> u64 {
    let share = (free_bytes as f64 * FREE_SHARE) as u64 / osds.max(1) as u64;
    let whole_gib = share >> 30 << 30;
    whole_gib.clamp(OSD_SIZE_BYTES_MIN, OSD_SIZE_BYTES_MAX)
}

/// `size_bytes` as a device spec's size (`12G`, or `512M` when not whole GiB).
pub fn spec_size(size_bytes: u64) -> String {
    if size_bytes.is_multiple_of(1 << 30) {
        format!("{}G", size_bytes >> 30)
    } else if size_bytes.is_multiple_of(1 << 20) {
        format!("{}M", size_bytes >> 20)
    } else {
        size_bytes.to_string()
    }
}

/// The default cluster ([`cluster::ClusterConfig::default_cluster`]) with OSD files of
/// `size_bytes` each.
pub fn default_cluster_sized(size_bytes: u64) -> cluster::ClusterConfig {
    let mut config = cluster::ClusterConfig::default_cluster();
    for osd in &mut config.osds {
        osd.device = format!("file:osd.{}.img:{}", osd.id, spec_size(size_bytes));
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn half_the_free_space_in_whole_gib_within_the_bounds() {
        assert_eq!(default_osd_size_bytes(180 * GIB, 9), 10 * GIB);
        assert_eq!(default_osd_size_bytes(185 * GIB, 9), 10 * GIB, "whole GiB");
        assert_eq!(default_osd_size_bytes(4 * GIB, 9), GIB, "never below 1 GiB");
        assert_eq!(default_osd_size_bytes(100_000 * GIB, 9), 64 * GIB, "capped");
        assert_eq!(default_osd_size_bytes(0, 0), GIB);
    }

    #[test]
    fn the_sized_cluster_differs_only_in_its_files() {
        let sized = default_cluster_sized(12 * GIB);
        let mut expected = cluster::ClusterConfig::default_cluster();
        assert_eq!(sized.osds.len(), expected.osds.len());
        for osd in &mut expected.osds {
            osd.device = osd.device.replace(":1G", ":12G");
        }
        assert_eq!(sized, expected);
        assert_eq!(spec_size(512 << 20), "512M");
    }
}
