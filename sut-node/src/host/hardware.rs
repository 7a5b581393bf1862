//! The machine's processors, memory and accelerators as Linux reports
//! them, for the system description a submission needs (`sysdesc
//! --template` fills the checker's host and accelerator fields from it).
//! Reading from a root folder keeps it testable against written files.

use std::path::Path;

use netdiv_proto::pb;

/// This machine's hardware (each part empty where it cannot be read).
pub fn hardware() -> pb::Hardware {
    read_hardware(Path::new("/"))
}

/// The hardware described by `root`'s `proc/cpuinfo`, `proc/meminfo` and
/// `proc/driver/nvidia/gpus/*/information`.
pub fn read_hardware(root: &Path) -> pb::Hardware {
    let cpuinfo = std::fs::read_to_string(root.join("proc/cpuinfo")).unwrap_or_default();
    let meminfo = std::fs::read_to_string(root.join("proc/meminfo")).unwrap_or_default();
    let mut sockets: Vec<&str> = cpuinfo_values(&cpuinfo, "physical id").collect();
    sockets.sort_unstable();
    sockets.dedup();
    let cpu_model = cpuinfo_values(&cpuinfo, "model name")
        .next()
        .unwrap_or_default()
        .to_string();
    let cores_per_socket = cpuinfo_values(&cpuinfo, "cpu cores")
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pb::Hardware {
        cpu_model,
        cpu_sockets: sockets.len() as u32,
        cores_per_socket,
        memory_bytes: memory_total(&meminfo).unwrap_or(0),
        accelerators: nvidia_gpus(&root.join("proc/driver/nvidia/gpus")),
    }
}

/// The values of `key` in /proc/cpuinfo's `key\t: value` lines.
fn cpuinfo_values<'a>(cpuinfo: &'a str, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    cpuinfo.lines().filter_map(move |line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// MemTotal in bytes (/proc/meminfo says kB).
fn memory_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Each GPU's "Model:" as NVIDIA's driver lists it, in bus order.
fn nvidia_gpus(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut buses: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    buses.sort();
    buses
        .iter()
        .filter_map(|bus| std::fs::read_to_string(bus.join("information")).ok())
        .filter_map(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("Model:"))
                .map(|m| m.trim().to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processors_memory_and_gpus_are_read_from_proc() {
        let root = tempfile::tempdir().unwrap();
        let proc = root.path().join("proc");
        std::fs::create_dir_all(proc.join("driver/nvidia/gpus/0000:41:00.0")).unwrap();
        std::fs::create_dir_all(proc.join("driver/nvidia/gpus/0000:01:00.0")).unwrap();
        let cpu = |id: u32| {
            format!(
                "processor\t: {id}\nmodel name\t: AMD EPYC 9654 96-Core Processor\n\
                 physical id\t: {}\ncpu cores\t: 96\n\n",
                id % 2
            )
        };
        std::fs::write(proc.join("cpuinfo"), (0..4).map(cpu).collect::<String>()).unwrap();
        std::fs::write(proc.join("meminfo"), "MemTotal:       1584000000 kB\n").unwrap();
        for (bus, model) in [("0000:41:00.0", "H100 B"), ("0000:01:00.0", "H100 A")] {
            std::fs::write(
                proc.join("driver/nvidia/gpus")
                    .join(bus)
                    .join("information"),
                format!("Model: \t\t NVIDIA {model}\nIRQ:   42\n"),
            )
            .unwrap();
        }
        let hw = read_hardware(root.path());
        assert_eq!(hw.cpu_model, "AMD EPYC 9654 96-Core Processor");
        assert_eq!((hw.cpu_sockets, hw.cores_per_socket), (2, 96));
        assert_eq!(hw.memory_bytes, 1_584_000_000 * 1024);
        assert_eq!(hw.accelerators, ["NVIDIA H100 A", "NVIDIA H100 B"]);
        // Nothing readable: empty, not an error.
        assert_eq!(
            read_hardware(&root.path().join("nowhere")),
            pb::Hardware::default()
        );
    }
}
