//! Whether a plan's machines fit the hosts: each class's demand, placed on the hosts that
//! accept VMs, and what stays able to fail.

use std::collections::BTreeSet;

use super::types::{CapacityCheck, CapacityVerdict, PlannedMachine};
use crate::domain::hosts::{self, Demand, Overcommit};
use crate::model::{Kind, MachineClass, Resource};
use crate::store::Snapshot;

/// What a class gives: vCPUs and memory bytes; None when the class is missing.
pub(super) fn class_demand(
    snap: &Snapshot,
    dc: &crate::model::Datacenter,
    class: &str,
) -> Option<(Demand, bool)> {
    match snap.get(dc, Kind::MachineClass, "", class)?.as_ref() {
        Resource::MachineClass(mc) => {
            let MachineClass { spec, .. } = mc.as_ref();
            let n = |v: Option<i64>| v.filter(|v| *v > 0).unwrap_or(1) as f64;
            let vcpus = (spec.cpu.cores.max(1) as f64)
                * n(spec.cpu.sockets.get())
                * n(spec.cpu.threads.get());
            let memory = spec.memory.quantity.value().unwrap_or(0.0);
            Some((
                Demand {
                    vcpus,
                    memory_bytes: memory,
                },
                spec.enabled,
            ))
        }
        _ => None,
    }
}

/// True for Machines that land on KubeVirt hosts (kubevirt-operator takes `kubevirt` or empty).
pub(super) fn on_kubevirt(provider: &str) -> bool {
    provider.is_empty() || provider == "kubevirt"
}

/// Check that the new Machines fit and that enough hosts can still fail.
pub(super) fn capacity(
    snap: &Snapshot,
    dc: &crate::model::Datacenter,
    machines: &[PlannedMachine],
    o: Overcommit,
    minimum: usize,
    classes_ok: bool,
) -> CapacityCheck {
    // The cluster's Machines land on its own datacenter's hosts, beside its VMs only.
    let bins = hosts::fleet_bins(snap, o, Some(dc));
    let existing: Vec<Demand> = hosts::active_vmis_in(snap, Some(dc))
        .into_iter()
        .map(|(d, _)| d)
        .collect();
    let added: Vec<Demand> = machines
        .iter()
        .filter(|m| !m.exists && on_kubevirt(&m.provider))
        .map(|m| Demand {
            vcpus: m.vcpus,
            memory_bytes: m.memory_bytes,
        })
        .collect();
    let before = hosts::redundancy(&bins, &existing);
    let mut all = existing.clone();
    all.extend(added.iter().copied());
    let after = hosts::redundancy(&bins, &all);
    // (`+ 0.0`: an empty float sum is -0.0.)
    let added_vcpus: f64 = added.iter().map(|d| d.vcpus).sum::<f64>() + 0.0;
    let added_memory: f64 = added.iter().map(|d| d.memory_bytes).sum::<f64>() + 0.0;
    let elsewhere: BTreeSet<&str> = machines
        .iter()
        .filter(|m| !m.exists && !on_kubevirt(&m.provider))
        .map(|m| m.provider.as_str())
        .collect();
    let gib = |b: f64| format!("{:.1} GiB", b / 1024f64.powi(3));
    let to_i32 = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let (verdict, message) = if !classes_ok {
        (
            CapacityVerdict::Unknown,
            "a MachineClass is missing: what the Machines need is not known".to_string(),
        )
    } else if !elsewhere.is_empty() {
        (
            CapacityVerdict::Unknown,
            format!(
                "new Machines run on {}: the hosts they land on are not in this graph, so placement cannot be checked",
                elsewhere.into_iter().collect::<Vec<_>>().join(", ")
            ),
        )
    } else if added.is_empty() {
        (CapacityVerdict::Fits, "no new Machine".to_string())
    } else if bins.is_empty() {
        (
            CapacityVerdict::Unknown,
            "the graph holds no KubeVirt host that accepts VMs: placement cannot be checked"
                .to_string(),
        )
    } else if let Some(d) = hosts::place(&all, &bins) {
        (
            CapacityVerdict::DoesNotFit,
            format!(
                "{} new Machines ({added_vcpus} vCPU, {}) do not fit on the {} hosts' free allocatable CPU and memory: a VM of {} vCPU / {} fits nowhere",
                added.len(),
                gib(added_memory),
                bins.len(),
                d.vcpus,
                gib(d.memory_bytes)
            ),
        )
    } else if after.hosts_that_can_fail < minimum {
        (
            CapacityVerdict::BelowRedundancy,
            format!(
                "they fit, but then {} host(s) can fail where MIN_HOSTS_THAT_CAN_FAIL is {minimum} ({} now): {}",
                after.hosts_that_can_fail, before.hosts_that_can_fail, after.limit
            ),
        )
    } else {
        (
            CapacityVerdict::Fits,
            format!(
                "{} new Machines ({added_vcpus} vCPU, {}) fit; {} host(s) can still fail (minimum {minimum})",
                added.len(),
                gib(added_memory),
                after.hosts_that_can_fail
            ),
        )
    };
    CapacityCheck {
        verdict,
        message,
        hosts: to_i32(bins.len()),
        added_vcpus,
        added_memory_bytes: added_memory,
        hosts_that_can_fail_before: to_i32(before.hosts_that_can_fail),
        hosts_that_can_fail_after: to_i32(after.hosts_that_can_fail),
        minimum_hosts_that_can_fail: to_i32(minimum),
    }
}
