//! How numbers and states look: the old status page's thresholds and units, kept as its users
//! learned them (legacy-parity A.6), and the words for the schema's enums.

use crate::gql::{CapacityVerdict, HostReadiness, NodeRole, PhaseState, PipelineStage};

/// Class of an overview percentage: below 60 `ok`, below 85 `warn`, else `err`.
pub fn percent_class(percent: f64) -> &'static str {
    if percent < 60.0 {
        "ok"
    } else if percent < 85.0 {
        "warn"
    } else {
        "err"
    }
}

/// Class of a host's allocation bar: below 50 `low`, below 80 `medium`, else `high`.
pub fn bar_class(percent: f64) -> &'static str {
    if percent < 50.0 {
        "low"
    } else if percent < 80.0 {
        "medium"
    } else {
        "high"
    }
}

/// The CSS class of what a phase means (the server's `phaseState`): running, error, scheduling
/// (on its way) or unknown, the old page's four colours.
pub fn state_class(state: PhaseState) -> &'static str {
    match state {
        PhaseState::Running => "running",
        PhaseState::Failed => "error",
        PhaseState::Pending => "scheduling",
        PhaseState::Stopped | PhaseState::Deleting | PhaseState::Other => "unknown",
    }
}

/// A cluster's health class from its diagnosis: `failed`, `ready` (Ready and not degraded) or
/// `progress`.
pub fn health_class(ready: bool, degraded: bool, failed: bool) -> &'static str {
    if failed {
        "failed"
    } else if ready && !degraded {
        "ready"
    } else {
        "progress"
    }
}

/// `used / limit` in whole percent; 0 when there is no limit.
pub fn percent(used: f64, limit: f64) -> f64 {
    if limit > 0.0 {
        (used / limit * 100.0).round()
    } else {
        0.0
    }
}

/// Bytes as GiB with `decimals` places (the old page's "GB").
pub fn gib(bytes: f64, decimals: usize) -> String {
    // `+ 0.0` turns -0.0 (the sum of no values) into 0.0, which prints without a sign.
    format!("{:.*}", decimals, bytes / (1024.0 * 1024.0 * 1024.0) + 0.0)
}

/// A count of cores or vCPUs: whole numbers without a fraction.
pub fn cores(value: f64) -> String {
    let value = value + 0.0; // -0.0 (the sum of no values) prints as 0
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// `1 host` / `3 hosts`.
pub fn plural(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl PipelineStage {
    /// The words the dashboard shows for the stage.
    pub fn label(self) -> &'static str {
        match self {
            PipelineStage::Network => "Network",
            PipelineStage::MachinesCreated => "Machines created",
            PipelineStage::IpsAllocated => "IPs allocated",
            PipelineStage::MachinesRunning => "Machines running",
            PipelineStage::VipReady => "VIP ready",
            PipelineStage::Talos => "Talos bootstrap",
            PipelineStage::Ready => "Ready",
            PipelineStage::Other => "Unknown stage",
        }
    }

    /// The stage's place in the pipeline (an unknown one last).
    pub fn order(self) -> usize {
        PipelineStage::ALL
            .iter()
            .position(|s| *s == self)
            .unwrap_or(PipelineStage::ALL.len())
    }
}

impl CapacityVerdict {
    /// The verdict in words, and its CSS class.
    pub fn words(self) -> (&'static str, &'static str) {
        match self {
            CapacityVerdict::Fits => ("Fits", "verdict ok"),
            CapacityVerdict::BelowRedundancy => ("Fits, too few hosts could fail", "verdict warn"),
            CapacityVerdict::DoesNotFit => ("Does not fit", "verdict bad"),
            CapacityVerdict::Unknown | CapacityVerdict::Other => {
                ("Capacity unknown", "verdict unknown")
            }
        }
    }
}

impl NodeRole {
    /// The role in words (`control plane`).
    pub fn words(self) -> &'static str {
        match self {
            NodeRole::ControlPlane => "control plane",
            NodeRole::Worker => "worker",
            NodeRole::Other => "",
        }
    }
}

impl HostReadiness {
    /// As the old page wrote it.
    pub fn words(self) -> &'static str {
        match self {
            HostReadiness::Ready => "Ready",
            HostReadiness::NotReady => "NotReady",
            HostReadiness::Unknown | HostReadiness::Other => "Unknown",
        }
    }
}

/// A time as the browser's local clock shows it.
pub fn clock(ms: f64) -> String {
    let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(ms));
    // 24-hour `HH:MM:SS`: no AM/PM to widen the header.
    format!(
        "{:02}:{:02}:{:02}",
        date.get_hours(),
        date.get_minutes(),
        date.get_seconds()
    )
}

/// A local date and time as a `datetime-local` field takes it: `YYYY-MM-DDTHH:MM:SS`.
pub fn local_input(ms: f64) -> String {
    let d = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(ms));
    format!(
        "{}-{:02}-{:02}T{:02}:{:02}:{:02}",
        d.get_full_year(),
        d.get_month() + 1,
        d.get_date(),
        d.get_hours(),
        d.get_minutes(),
        d.get_seconds()
    )
}

/// A time as RFC 3339 in UTC with milliseconds (what the server reads).
pub fn iso(ms: f64) -> String {
    js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(ms))
        .to_iso_string()
        .into()
}

/// Milliseconds since the epoch of a time text (RFC 3339, or a `datetime-local` value read as
/// local time); None when it does not read as one.
pub fn ms_of(text: &str) -> Option<f64> {
    let ms = js_sys::Date::new(&wasm_bindgen::JsValue::from_str(text)).get_time();
    ms.is_finite().then_some(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_the_old_pages() {
        assert_eq!(percent_class(59.9), "ok");
        assert_eq!(percent_class(60.0), "warn");
        assert_eq!(percent_class(84.9), "warn");
        assert_eq!(percent_class(85.0), "err");
        assert_eq!(bar_class(49.0), "low");
        assert_eq!(bar_class(50.0), "medium");
        assert_eq!(bar_class(80.0), "high");
    }

    #[test]
    fn states_colour_like_the_old_page() {
        assert_eq!(state_class(PhaseState::Running), "running");
        assert_eq!(state_class(PhaseState::Failed), "error");
        assert_eq!(state_class(PhaseState::Pending), "scheduling");
        assert_eq!(state_class(PhaseState::Other), "unknown");
        let unknown: PhaseState = serde_json::from_str("\"HIBERNATING\"").expect("any value reads");
        assert_eq!(unknown, PhaseState::Other);
    }

    #[test]
    fn units() {
        assert_eq!(percent(3.0, 0.0), 0.0);
        assert_eq!(percent(1.0, 3.0), 33.0);
        assert_eq!(gib(1.5 * 1024.0 * 1024.0 * 1024.0, 1), "1.5");
        assert_eq!(cores(4.0), "4");
        assert_eq!(cores(2.5), "2.5");
        // An empty sum of f64 is -0.0: a cluster without VMs has 0 vCPU and 0.0 GB, not -0.
        let none: f64 = std::iter::empty::<f64>().sum();
        assert_eq!(
            (cores(none), gib(none, 1)),
            ("0".to_string(), "0.0".to_string())
        );
        assert_eq!(plural(1, "host", "hosts"), "1 host");
        assert_eq!(PipelineStage::IpsAllocated.label(), "IPs allocated");
        assert_eq!(
            PipelineStage::from_wire("IPS_ALLOCATED"),
            Some(PipelineStage::IpsAllocated)
        );
        assert_eq!(PipelineStage::from_wire("NEW_STAGE"), None);
        assert!(PipelineStage::Network.order() < PipelineStage::Ready.order());
    }
}
