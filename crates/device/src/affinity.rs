//! Which CPUs take a device's completion interrupts, and pinning a thread to a CPU.
//!
//! Why: a thread blocked in `pwrite`/`fdatasync` is woken by the interrupt that completes its
//! request. When the interrupt lands on another CPU than the one the thread last ran on, the
//! wake-up is an inter-processor interrupt, and in a virtual machine whose idle vCPUs halt it
//! is a halted vCPU to wake (tens of µs). A single-queue device (virtio-blk with one queue, a
//! SATA disk) takes all its interrupts on one CPU; threads that spend their lives waiting
//! for it run best there. The store pins its commit pipeline to that CPU (`store::commit`);
//! measured on this project's 2-vCPU machine, six runs each: 32.7-39.6k replica-1 4 KiB
//! writes/s pinned (five of six at 36.7k or more) against 32.3-34.2k unpinned, with less
//! CPU per write (ARCHITECTURE.md).
//!
//! The map from a file to its interrupts goes through sysfs: the file's device number
//! (`st_dev`, or `st_rdev` for a block device node) -> `/sys/dev/block/MAJOR:MINOR` -> up the
//! device tree to the first ancestor with `msi_irqs/` (or a legacy `irq` file) -> each
//! interrupt's `/proc/irq/N/effective_affinity_list`. Virtual block devices (device mapper,
//! loop, md), network filesystems and tmpfs have no such ancestor: no answer, no pinning.

use std::path::{Path, PathBuf};

use rustix::thread::CpuSet;

/// The CPUs that take the completion interrupts of the block device holding `path` (a
/// regular file, or a block device node), if the system says. `None` when it cannot tell
/// (no sysfs entry, a virtual device, no permission).
pub fn interrupt_cpus_of_path(path: &Path) -> Option<Vec<usize>> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let metadata = std::fs::metadata(path).ok()?;
    let device = if metadata.file_type().is_block_device() {
        metadata.rdev()
    } else {
        metadata.dev()
    };
    let (major, minor) = (libc::major(device), libc::minor(device));
    interrupt_cpus(Path::new("/sys"), Path::new("/proc"), major, minor)
}

/// [`interrupt_cpus_of_path`] for device `major:minor`, with sysfs at `sys` and procfs at
/// `proc` (a test points them at a tree of its own). The CPUs are sorted, without repeats.
pub fn interrupt_cpus(sys: &Path, proc: &Path, major: u32, minor: u32) -> Option<Vec<usize>> {
    let link = sys.join("dev/block").join(format!("{major}:{minor}"));
    let mut node: PathBuf = std::fs::canonicalize(link).ok()?;
    let devices = std::fs::canonicalize(sys.join("devices")).ok()?;
    let irqs = loop {
        if let Some(irqs) = device_irqs(&node) {
            break irqs;
        }
        if !node.pop() || !node.starts_with(&devices) || node == devices {
            return None;
        }
    };
    let mut cpus = Vec::new();
    for irq in irqs {
        let dir = proc.join("irq").join(irq.to_string());
        let list = std::fs::read_to_string(dir.join("effective_affinity_list"))
            .or_else(|_| std::fs::read_to_string(dir.join("smp_affinity_list")))
            .ok()?;
        cpus.extend(parse_cpu_list(&list)?);
    }
    cpus.sort_unstable();
    cpus.dedup();
    (!cpus.is_empty()).then_some(cpus)
}

/// The interrupts of the device at sysfs directory `node`, if it has any: its MSI vectors,
/// else its legacy line (`irq`, 0 meaning none).
fn device_irqs(node: &Path) -> Option<Vec<u32>> {
    if let Ok(entries) = std::fs::read_dir(node.join("msi_irqs")) {
        let irqs: Vec<u32> = entries
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        if !irqs.is_empty() {
            return Some(irqs);
        }
    }
    let line: u32 = std::fs::read_to_string(node.join("irq"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (line != 0).then(|| vec![line])
}

/// Parses the kernel's CPU list format (`0-3,5,7-8`); `None` if malformed.
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|part| !part.is_empty()) {
        match part.split_once('-') {
            Some((first, last)) => {
                let (first, last): (usize, usize) = (first.parse().ok()?, last.parse().ok()?);
                if first > last {
                    return None;
                }
                cpus.extend(first..=last);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// The CPUs this thread may run on (its affinity mask), in order.
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    Ok(listed(&rustix::thread::sched_getaffinity(None)?))
}

/// The CPUs the process's main thread may run on: the process's own mask, which a thread
/// restricted further (a runtime worker kept off a CPU) does not narrow.
pub fn process_allowed_cpus() -> std::io::Result<Vec<usize>> {
    Ok(listed(&process_cpu_set()?))
}

/// The process's mask (its main thread's) as a set.
fn process_cpu_set() -> std::io::Result<CpuSet> {
    Ok(rustix::thread::sched_getaffinity(Some(
        rustix::process::getpid(),
    ))?)
}

/// The CPUs in `set`, in order.
fn listed(set: &CpuSet) -> Vec<usize> {
    (0..CpuSet::MAX_CPU)
        .filter(|&cpu| set.is_set(cpu))
        .collect()
}

/// Restricts the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    pin_current_thread_to(&[cpu])
}

/// Restricts the calling thread to the CPUs in `cpus` (at least one).
pub fn pin_current_thread_to(cpus: &[usize]) -> std::io::Result<()> {
    if cpus.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "no CPU to run on",
        ));
    }
    let mut set = CpuSet::new();
    for &cpu in cpus {
        if cpu >= CpuSet::MAX_CPU {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is beyond the affinity mask's size"),
            ));
        }
        set.set(cpu);
    }
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}

/// Makes the program `command` starts run on every CPU the process may use (its main
/// thread's mask), whatever the mask of the thread that starts it.
///
/// Why: a new thread or process inherits the mask of the thread that makes it. A runtime laid
/// out for small operations (`cluster::runtime`) keeps all its threads off the commit CPU, so
/// a benchmark that starts its peers (fio, Ceph's daemons, radosgw) from one of them would
/// give those peers part of the machine only.
#[allow(unsafe_code)]
pub fn run_on_every_allowed_cpu(command: &mut std::process::Command) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    let set = process_cpu_set()?;
    // SAFETY: the closure runs in the child between fork and exec; it makes one system call
    // on a set copied before the fork and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            rustix::thread::sched_setaffinity(None, &set).map_err(std::io::Error::from)
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_started_by_a_pinned_thread_runs_on_every_allowed_cpu() {
        let process = process_allowed_cpus().expect("the process's mask");
        let first = process[0];
        let (pinned, unpinned) = std::thread::spawn(move || {
            pin_current_thread_to(&[first]).expect("pinning to an allowed CPU");
            let allowed_list = |unpin: bool| {
                let mut command = std::process::Command::new("grep");
                command.args(["Cpus_allowed_list", "/proc/self/status"]);
                if unpin {
                    run_on_every_allowed_cpu(&mut command).expect("the process's mask");
                }
                let output = command.output().expect("running grep");
                String::from_utf8_lossy(&output.stdout)
                    .split_whitespace()
                    .nth(1)
                    .and_then(parse_cpu_list)
                    .expect("a Cpus_allowed_list line")
            };
            (allowed_list(false), allowed_list(true))
        })
        .join()
        .expect("the pinned thread");
        assert_eq!(pinned, [first]);
        assert_eq!(unpinned, process);
    }

    #[test]
    fn a_thread_pinned_to_a_set_runs_only_there() {
        let allowed = allowed_cpus().expect("the affinity mask");
        let first = allowed[0];
        let process = process_allowed_cpus().expect("the process's mask");
        let (after, process_after) = std::thread::spawn(move || {
            pin_current_thread_to(&[first]).expect("pinning to an allowed CPU");
            (
                allowed_cpus().expect("the new mask"),
                process_allowed_cpus().expect("the process's mask"),
            )
        })
        .join()
        .expect("the thread ends");
        assert_eq!(after, vec![first]);
        // A thread narrowing itself does not narrow the process's mask.
        assert_eq!(process_after, process);
        assert!(pin_current_thread_to(&[]).is_err());
        assert!(pin_current_thread_to(&[CpuSet::MAX_CPU]).is_err());
    }

    #[test]
    fn cpu_lists_parse_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("1\n"), Some(vec![1]));
        assert_eq!(parse_cpu_list("0-3,5,7-8"), Some(vec![0, 1, 2, 3, 5, 7, 8]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None, "a reversed range");
        assert_eq!(parse_cpu_list("a"), None);
    }

    /// A fake sysfs and procfs: a PCI device with two MSI vectors, a disk and a partition on
    /// it, and a virtual (device-mapper) disk with no interrupts.
    fn fake_tree(root: &Path, affinities: &[(u32, &str)]) {
        let pci = root.join("sys/devices/pci0000:00/0000:00:02.0");
        let disk = pci.join("virtio1/block/vda");
        std::fs::create_dir_all(disk.join("vda1")).unwrap();
        std::fs::create_dir_all(pci.join("msi_irqs")).unwrap();
        for (irq, list) in affinities {
            std::fs::write(pci.join("msi_irqs").join(irq.to_string()), "msix").unwrap();
            let dir = root.join(format!("proc/irq/{irq}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("effective_affinity_list"), list).unwrap();
        }
        let dm = root.join("sys/devices/virtual/block/dm-0");
        std::fs::create_dir_all(&dm).unwrap();
        let links = root.join("sys/dev/block");
        std::fs::create_dir_all(&links).unwrap();
        std::os::unix::fs::symlink(&disk, links.join("254:0")).unwrap();
        std::os::unix::fs::symlink(disk.join("vda1"), links.join("254:1")).unwrap();
        std::os::unix::fs::symlink(&dm, links.join("253:0")).unwrap();
    }

    #[test]
    fn a_disk_and_its_partition_lead_to_their_controllers_interrupts() {
        let root = tempfile::tempdir().unwrap();
        fake_tree(root.path(), &[(35, "1\n"), (36, "1\n")]);
        let (sys, proc) = (root.path().join("sys"), root.path().join("proc"));
        assert_eq!(interrupt_cpus(&sys, &proc, 254, 0), Some(vec![1]));
        assert_eq!(interrupt_cpus(&sys, &proc, 254, 1), Some(vec![1]));
        assert_eq!(interrupt_cpus(&sys, &proc, 253, 0), None, "no interrupts");
        assert_eq!(interrupt_cpus(&sys, &proc, 8, 0), None, "no such device");
    }

    #[test]
    fn queues_on_several_cpus_give_them_all() {
        let root = tempfile::tempdir().unwrap();
        fake_tree(root.path(), &[(40, "0\n"), (41, "2-3\n"), (42, "1\n")]);
        let (sys, proc) = (root.path().join("sys"), root.path().join("proc"));
        assert_eq!(interrupt_cpus(&sys, &proc, 254, 0), Some(vec![0, 1, 2, 3]));
    }

    #[test]
    fn this_thread_can_be_pinned_within_its_mask() {
        let allowed = allowed_cpus().unwrap();
        assert!(!allowed.is_empty());
        let cpu = *allowed.last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            assert_eq!(allowed_cpus().unwrap(), vec![cpu]);
        })
        .join()
        .unwrap();
        assert!(pin_current_thread(CpuSet::MAX_CPU).is_err());
    }
}
