//! A Machine's effective resources: its spec's overrides first, then its MachineClass.

use crate::model::{Kind, Machine, MachineClass, Resource};
use crate::store::Snapshot;

/// vCPUs, memory and disk a Machine asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// Cores × sockets × threads.
    pub vcpus: i64,
    /// Memory in bytes, when the spec or the class says.
    pub memory_bytes: Option<i64>,
    /// Sum of the disks' sizes in GB.
    pub disk_gb: i64,
}

/// vCPUs of a topology; each part at least 1, saturating (objects from an API server are not
/// validated against the CRD bounds).
pub fn vcpus(cores: i64, sockets: i64, threads: i64) -> i64 {
    cores
        .max(1)
        .saturating_mul(sockets.max(1))
        .saturating_mul(threads.max(1))
}

/// The MachineClass a Machine names, when it is in the graph.
pub fn class_of<'a>(snap: &'a Snapshot, m: &Machine) -> Option<&'a MachineClass> {
    let name = m.spec.machine_class.as_deref()?;
    match snap
        .get(&m.datacenter, Kind::MachineClass, "", name)?
        .as_ref()
    {
        Resource::MachineClass(c) => Some(c),
        _ => None,
    }
}

/// Spec overrides first, then the MachineClass.
pub fn effective(m: &Machine, class: Option<&MachineClass>) -> Resources {
    let class_cpu = class.map(|c| &c.spec.cpu);
    let cpu = m.spec.cpu.as_ref();
    let cores = cpu
        .and_then(|c| c.cores.get())
        .or(class_cpu.map(|c| c.cores))
        .unwrap_or(1);
    let sockets = cpu
        .and_then(|c| c.sockets.get())
        .or(class_cpu.and_then(|c| c.sockets.get()))
        .unwrap_or(1);
    let threads = cpu
        .and_then(|c| c.threads_per_core.get())
        .or(class_cpu.and_then(|c| c.threads.get()))
        .unwrap_or(1);
    Resources {
        vcpus: vcpus(cores, sockets, threads),
        memory_bytes: m
            .spec
            .memory
            .get()
            .or_else(|| class.and_then(|c| c.spec.memory.quantity.bytes())),
        disk_gb: m
            .spec
            .disks
            .iter()
            .flatten()
            .filter_map(|d| d.size_gb.get())
            .fold(0i64, i64::saturating_add),
    }
}

/// A Machine's effective resources, with its MachineClass looked up in `snap`.
pub fn of(snap: &Snapshot, m: &Machine) -> Resources {
    effective(m, class_of(snap, m))
}
