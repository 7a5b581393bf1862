//! What a node knows of the machine it runs on, read from Linux: its
//! network interfaces ([`nic`]), processors, memory and accelerators
//! ([`hardware`]), the signs of a hypervisor ([`hypervisor`]), where a
//! serving engine's address points ([`engine_location`]), and a bound on
//! the CPUs' wake-up latency it may hold ([`cpu_latency`]). The node
//! reports the first four in `Info`; the LoadGen node reads its own host
//! with the same code.

pub mod cpu_latency;
pub mod engine_location;
pub mod hardware;
pub mod hypervisor;
pub mod nic;
