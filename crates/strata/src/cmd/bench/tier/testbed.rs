//! One configuration's running system for `strata bench tier`: its embedded cluster (emulated
//! NVMe and HDD OSDs), the volumes written once, the tier attached as the configuration says,
//! and the clients' load on it.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use cluster::{Cluster, ClusterConfig, ClusterOptions, HostConfig, OsdConfig, PoolConfig};
use device::histogram::AtomicHistogram;
use device::Device;
use rados::Rados;
use tier::{CacheMode, TierStats, TieredRados};
use volume::{OpenMode, Volume, Volumes, VolumesConfig};

use super::load;
use super::workload::Workload;
use super::{Args, Plan, BASE, BLOCK_BYTES, CACHE, HOSTS, OBJECT_BYTES};

/// The cluster of one configuration: the base pool on HDD OSDs (NVMe for `nvme`), the cache
/// pool on NVMe OSDs.
pub(super) fn cluster_config(config: &str, args: &Args) -> Result<ClusterConfig> {
    let working_set_bytes =
        load::parse_size(&args.volume_size)? * *args.clients.last().expect("checked") as u64;
    let mib = |bytes: u64| format!("{}M", bytes.div_ceil(1 << 20).max(256));
    // Replica 3 over 6 HDD OSDs (or 3 NVMe ones), twice the room the data needs; the HDDs
    // get three times the working set each: the ceph tier's whole-object flushes rewrite 4 MiB
    // objects faster than the stores reclaim the space they replace (with one working set
    // each, an HDD OSD reached its full ratio within a minute of the ceph ramp).
    let hdd_bytes = working_set_bytes * 3;
    let nvme_bytes = if config == "nvme" {
        working_set_bytes * 2
    } else {
        working_set_bytes
    };
    let mut cluster = ClusterConfig::empty();
    cluster.scrub_interval_s = 0;
    cluster.stats_period_s = 0;
    cluster.durable = true;
    for host in 0..HOSTS {
        let name = format!("host{host}");
        cluster.hosts.push(HostConfig { name: name.clone() });
        for slot in 0..3 {
            let nvme = slot == 0;
            cluster.osds.push(OsdConfig {
                id: host * 3 + slot,
                host: name.clone(),
                device: if nvme {
                    format!("nvme@mem:{}", mib(nvme_bytes))
                } else {
                    format!("hdd-7200@mem:{}", mib(hdd_bytes))
                },
                size: None,
                class: if nvme { "nvme" } else { "hdd" }.into(),
                weight: Some(1.0),
                min_alloc_size: 4096,
                emulation: None,
                data_cache_size: Some(args.data_cache_size.clone()),
            });
        }
    }
    let pool = |name: &str, class: &str| PoolConfig {
        name: name.into(),
        size: 3,
        min_size: None,
        pg_num: 32,
        device_class: Some(class.into()),
        crush_rule: None,
        erasure: None,
    };
    cluster
        .pools
        .push(pool(BASE, if config == "nvme" { "nvme" } else { "hdd" }));
    if config == "ceph" || config == "predictive" {
        cluster.pools.push(pool(CACHE, "nvme"));
    }
    Ok(cluster)
}

/// One configuration's running system.
pub(super) struct Testbed {
    cluster: Arc<Cluster>,
    tiered: Option<Arc<TieredRados>>,
    volumes: Vec<Arc<Volume>>,
    working_set_bytes: u64,
    /// Loads run so far: each draws a fresh sequence of ops.
    loads: AtomicU64,
}

fn volume_name(client: usize) -> String {
    format!("client{client}")
}

pub(super) async fn build(config: &str, dir: &Path, args: &Args) -> Result<Testbed> {
    let cluster_config = cluster_config(config, args)?;
    let cluster = Arc::new(
        Cluster::create(dir, cluster_config, ClusterOptions::default())
            .await
            .context("creating the cluster")?,
    );
    let clients_max = *args.clients.last().expect("checked");
    let volume_bytes = load::parse_size(&args.volume_size)?;
    let working_set_bytes = volume_bytes * clients_max as u64;
    {
        let catalogue = Volumes::new(cluster.io_ctx(BASE).await?, VolumesConfig::default());
        let bar = indicatif::ProgressBar::new(working_set_bytes);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "   writing the volumes once {bar:30} {bytes}/{total_bytes} {bytes_per_sec}",
            )
            .expect("template"),
        );
        for client in 0..clients_max {
            catalogue
                .create(&volume_name(client), volume_bytes, 22)
                .await
                .context("creating a volume")?;
            let volume = Arc::new(
                catalogue
                    .open(&volume_name(client), OpenMode::ReadWrite)
                    .await?,
            );
            let objects = volume_bytes / OBJECT_BYTES;
            let next = Arc::new(AtomicU64::new(0));
            let writers: Vec<_> = (0..4)
                .map(|_| {
                    let volume = volume.clone();
                    let next = next.clone();
                    let bar = bar.clone();
                    tokio::spawn(async move {
                        loop {
                            let object = next.fetch_add(1, Ordering::SeqCst);
                            if object >= objects {
                                return Ok::<_, anyhow::Error>(());
                            }
                            let data = vec![(object % 251) as u8 + 1; OBJECT_BYTES as usize];
                            volume.write_at(object * OBJECT_BYTES, &data).await?;
                            bar.inc(OBJECT_BYTES);
                        }
                    })
                })
                .collect();
            for writer in writers {
                writer.await??;
            }
        }
        bar.finish_and_clear();
    }
    let (rados, tiered): (Arc<dyn Rados>, _) = if config == "ceph" || config == "predictive" {
        let tiered = TieredRados::open(
            cluster.clone(),
            Arc::new(worker::SystemClock::new()),
            tier::system_wall_clock(),
        )
        .await?;
        tiered.tier_add(BASE, CACHE, false).await?;
        tiered
            .cache_mode(CACHE, CacheMode::Writeback, false)
            .await?;
        for (key, value) in tier_settings(config, args, working_set_bytes) {
            tiered
                .pool_set(CACHE, &key, &value)
                .await
                .with_context(|| format!("osd pool set {CACHE} {key} {value}"))?;
        }
        tiered.set_overlay(BASE, CACHE).await?;
        (tiered.clone() as Arc<dyn Rados>, Some(tiered))
    } else {
        (cluster.clone() as Arc<dyn Rados>, None)
    };
    let catalogue = Volumes::new(rados.io_ctx(BASE).await?, VolumesConfig::default());
    let mut volumes = Vec::new();
    for client in 0..clients_max {
        volumes.push(Arc::new(
            catalogue
                .open(&volume_name(client), OpenMode::ReadWrite)
                .await?,
        ));
    }
    Ok(Testbed {
        cluster,
        tiered,
        volumes,
        working_set_bytes,
        loads: AtomicU64::new(0),
    })
}

/// `osd pool set cache KEY VALUE` for a configuration.
pub(super) fn tier_settings(
    config: &str,
    args: &Args,
    working_set_bytes: u64,
) -> Vec<(String, String)> {
    let target = cache_bytes(working_set_bytes, args.cache_share);
    let scaled = |seconds: f64| format!("{}", (seconds / args.time_scale).round().max(1.0) as u64);
    let mut settings: Vec<(&str, String)> = vec![("target_max_bytes", target.to_string())];
    if config == "ceph" {
        settings.extend([
            ("tier_admission", "ceph".to_string()),
            ("hit_set_type", "bloom".into()),
            ("hit_set_count", "12".into()),
            ("hit_set_period", scaled(14400.0)),
            ("min_read_recency_for_promote", "2".into()),
            ("min_write_recency_for_promote", "2".into()),
            ("cache_target_dirty_ratio", "0.4".into()),
            ("cache_target_dirty_high_ratio", "0.6".into()),
            ("cache_target_full_ratio", "0.8".into()),
            ("cache_min_flush_age", scaled(600.0)),
            ("cache_min_evict_age", scaled(1800.0)),
        ]);
    } else {
        settings.extend([
            ("tier_admission", "predictive".to_string()),
            ("predictive_period", args.predictive_period_s.to_string()),
            ("predictive_threshold", args.threshold.to_string()),
        ]);
    }
    settings
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn cache_bytes(working_set_bytes: u64, share: f64) -> u64 {
    let bytes = (working_set_bytes as f64 * share) as u64;
    (bytes / OBJECT_BYTES).max(1) * OBJECT_BYTES
}

impl Testbed {
    pub(super) fn tier_stats(&self) -> Option<TierStats> {
        self.tiered
            .as_ref()
            .and_then(|t| t.stats().into_iter().next())
    }

    pub(super) fn ssd_bytes_written(&self) -> u64 {
        self.cluster
            .osd_stats()
            .iter()
            .filter(|osd| osd.class == "nvme")
            .map(|osd| osd.device.write.bytes)
            .sum()
    }

    /// The fullest NVMe OSD's share of its data region in use.
    pub(super) fn nvme_used_max(&self) -> f64 {
        self.cluster
            .osd_stats()
            .iter()
            .filter(|osd| osd.class == "nvme" && osd.statfs.total_bytes > 0)
            .map(|osd| osd.statfs.allocated_bytes as f64 / osd.statfs.total_bytes as f64)
            .fold(0.0, f64::max)
    }

    pub(super) async fn apply(&self, plan: &Plan) -> Result<()> {
        let Some(tiered) = &self.tiered else {
            return Ok(());
        };
        if let Some(h) = plan.threshold {
            tiered
                .pool_set(CACHE, "predictive_threshold", &h.to_string())
                .await?;
        }
        if let Some(share) = plan.cache_share {
            let bytes = cache_bytes(self.working_set_bytes, share);
            tiered
                .pool_set(CACHE, "target_max_bytes", &bytes.to_string())
                .await?;
        }
        Ok(())
    }

    /// Runs `plan.clients` clients for `seconds`; returns ops and latencies.
    pub(super) async fn load(
        &self,
        plan: &Plan,
        args: &Args,
        seconds: f64,
        started: Instant,
    ) -> Result<(u64, f64, device::histogram::Histogram)> {
        let stop = Arc::new(AtomicBool::new(false));
        let ops = Arc::new(AtomicU64::new(0));
        let latencies = Arc::new(AtomicHistogram::default());
        let objects = load::parse_size(&args.volume_size)? / OBJECT_BYTES;
        let load_number = self.loads.fetch_add(1, Ordering::Relaxed);
        let mut tasks = Vec::new();
        for client in 0..plan.clients {
            for lane in 0..args.iodepth {
                let volume = self.volumes[client].clone();
                let stop = stop.clone();
                let ops = ops.clone();
                let latencies = latencies.clone();
                let seed =
                    args.seed ^ ((client as u64) << 32) ^ ((lane as u64) << 16) ^ load_number;
                let mut workload = Workload::new(
                    objects,
                    OBJECT_BYTES,
                    BLOCK_BYTES,
                    args.read_percent,
                    plan.skew.clone(),
                    seed,
                );
                // Every lane of a client shares its hot set: the permutation follows the
                // client, the draws the lane.
                workload.share_permutation_seed(args.seed ^ ((client as u64) << 32));
                tasks.push(tokio::spawn(async move {
                    let mut buffer = vec![0u8; BLOCK_BYTES as usize];
                    let payload = vec![client as u8 + 1; BLOCK_BYTES as usize];
                    while !stop.load(Ordering::Relaxed) {
                        let op = workload.next(started.elapsed().as_millis() as u64);
                        let began = Instant::now();
                        if op.read {
                            volume.read_at(op.offset_bytes, &mut buffer).await?;
                        } else {
                            volume.write_at(op.offset_bytes, &payload).await?;
                        }
                        latencies.record(began.elapsed().as_nanos() as u64);
                        ops.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok::<_, anyhow::Error>(())
                }));
            }
        }
        let began = Instant::now();
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        let done = ops.load(Ordering::Relaxed);
        let elapsed = began.elapsed().as_secs_f64();
        let histogram = latencies.snapshot();
        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            task.await??;
        }
        Ok((done, elapsed, histogram))
    }

    pub(super) async fn shutdown(self, dir: &Path) -> Result<()> {
        drop(self.volumes);
        if let Some(tiered) = self.tiered {
            tiered.shutdown().await;
            drop(tiered);
        }
        super::super::cluster::shutdown(self.cluster, dir).await
    }
}
