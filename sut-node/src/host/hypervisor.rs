//! Whether this machine is a virtual machine, and why we think so: the
//! signs Linux shows of a hypervisor underneath (`/sys/hypervisor`, the
//! CPU's `hypervisor` flag, a DMI vendor or product that names one). A
//! hypervisor boundary is not a network fabric, so the system description
//! and a submission's checks name it. Reading from a root folder keeps it
//! testable against written files.

use std::path::Path;

/// DMI vendor and product names that are hypervisors' own.
const HYPERVISOR_DMI: &[&str] = &[
    "QEMU",
    "KVM",
    "VMware",
    "VirtualBox",
    "innotek",
    "Xen",
    "Bochs",
    "Parallels",
    "Virtual Machine",
    "Google Compute Engine",
    "Amazon EC2",
    "OpenStack",
    "BHYVE",
    "Cloud Hypervisor",
    "Firecracker",
];

/// This machine's signs of a hypervisor, joined (`""` on bare metal).
pub fn virtualization() -> String {
    signs(Path::new("/")).join("; ")
}

/// The signs of a hypervisor under `root` (`sys/hypervisor/type`,
/// `proc/cpuinfo`, `sys/class/dmi/id/{sys_vendor,product_name}`).
pub fn signs(root: &Path) -> Vec<String> {
    let read = |path: &str| {
        std::fs::read_to_string(root.join(path))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let mut signs = Vec::new();
    let kind = read("sys/hypervisor/type");
    if !kind.is_empty() {
        signs.push(format!("/sys/hypervisor/type is {kind}"));
    }
    let cpuinfo = read("proc/cpuinfo");
    let flagged = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "hypervisor"));
    if flagged {
        signs.push("the CPU reports the hypervisor flag".into());
    }
    for file in ["sys_vendor", "product_name"] {
        let value = read(&format!("sys/class/dmi/id/{file}"));
        let lower = value.to_ascii_lowercase();
        if HYPERVISOR_DMI
            .iter()
            .any(|h| lower.contains(&h.to_ascii_lowercase()))
        {
            signs.push(format!("DMI {file} is {value:?}"));
        }
    }
    signs
}

/// The driver of network interface `name` under `sys` (`/sys/class/net`):
/// its device's driver (`virtio_net`, `mlx5_core`, ...), `""` for an
/// interface without a device.
pub fn nic_driver(sys: &Path, name: &str) -> String {
    std::fs::read_link(sys.join(name).join("device/driver"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default()
}

/// Drivers of network devices that hypervisors present to their guests.
pub const PARAVIRTUAL_DRIVERS: &[&str] = &[
    "virtio_net",
    "vmxnet3",
    "hv_netvsc",
    "xen-netfront",
    "ena",
    "gve",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn put(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn bare_metal_shows_no_sign() {
        let root = tempfile::tempdir().unwrap();
        put(
            root.path(),
            "proc/cpuinfo",
            "processor\t: 0\nflags\t\t: fpu vme sse2\n",
        );
        put(root.path(), "sys/class/dmi/id/sys_vendor", "Supermicro\n");
        put(
            root.path(),
            "sys/class/dmi/id/product_name",
            "SYS-4029GP-TRT\n",
        );
        assert!(signs(root.path()).is_empty());
    }

    #[test]
    fn each_sign_of_a_hypervisor_is_named() {
        let root = tempfile::tempdir().unwrap();
        put(
            root.path(),
            "proc/cpuinfo",
            "flags\t\t: fpu sse2 hypervisor lahf_lm\n",
        );
        put(root.path(), "sys/class/dmi/id/sys_vendor", "QEMU\n");
        put(
            root.path(),
            "sys/class/dmi/id/product_name",
            "Standard PC (Q35 + ICH9, 2009)\n",
        );
        put(root.path(), "sys/hypervisor/type", "xen\n");
        assert_eq!(
            signs(root.path()),
            [
                "/sys/hypervisor/type is xen",
                "the CPU reports the hypervisor flag",
                "DMI sys_vendor is \"QEMU\"",
            ]
        );
        let other = tempfile::tempdir().unwrap();
        put(
            other.path(),
            "sys/class/dmi/id/product_name",
            "VMware Virtual Platform\n",
        );
        assert_eq!(
            signs(other.path()),
            ["DMI product_name is \"VMware Virtual Platform\""]
        );
    }

    #[test]
    fn a_nics_driver_is_its_devices() {
        let root = tempfile::tempdir().unwrap();
        let drivers = root.path().join("bus/virtio/drivers/virtio_net");
        std::fs::create_dir_all(&drivers).unwrap();
        let device = root.path().join("net/eth0/device");
        std::fs::create_dir_all(&device).unwrap();
        std::os::unix::fs::symlink(&drivers, device.join("driver")).unwrap();
        std::fs::create_dir_all(root.path().join("net/veth0")).unwrap();
        assert_eq!(nic_driver(&root.path().join("net"), "eth0"), "virtio_net");
        assert_eq!(nic_driver(&root.path().join("net"), "veth0"), "");
    }
}
