//! How numbers and states look: the old status page's thresholds and units, kept as its users
//! learned them (legacy-parity A.6), and the names of the pipeline's stages.

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

/// Class of a VM or Machine phase: running, error, scheduling or unknown.
pub fn status_class(status: &str) -> &'static str {
    let s = status.to_ascii_lowercase();
    if s == "running" || s == "ready" {
        "running"
    } else if s.contains("error") || s.contains("unschedulable") || s.contains("fail") {
        "error"
    } else if s.contains("scheduling")
        || s.contains("pending")
        || s.contains("provisioning")
        || s.contains("starting")
    {
        "scheduling"
    } else {
        "unknown"
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

/// The wire name of a generated enum value (`IPS_ALLOCATED`).
pub fn wire<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Pipeline stages in order, with the words the dashboard shows.
pub const STAGES: [(&str, &str); 7] = [
    ("NETWORK", "Network"),
    ("MACHINES_CREATED", "Machines created"),
    ("IPS_ALLOCATED", "IPs allocated"),
    ("MACHINES_RUNNING", "Machines running"),
    ("VIP_READY", "VIP ready"),
    ("TALOS", "Talos bootstrap"),
    ("READY", "Ready"),
];

/// The words for a stage's wire name.
pub fn stage_label(wire: &str) -> String {
    STAGES
        .iter()
        .find(|(w, _)| *w == wire)
        .map(|(_, label)| (*label).to_owned())
        .unwrap_or_else(|| wire.to_owned())
}

/// A time as the browser's local clock shows it.
pub fn clock(ms: f64) -> String {
    let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(ms));
    date.to_locale_time_string("default")
        .as_string()
        .unwrap_or_default()
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
    fn statuses_classify_like_the_old_page() {
        assert_eq!(status_class("Running"), "running");
        assert_eq!(status_class("ErrorUnschedulable"), "error");
        assert_eq!(status_class("Failed"), "error");
        assert_eq!(status_class("Pending"), "scheduling");
        assert_eq!(status_class("Succeeded"), "unknown");
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
        assert_eq!(stage_label("IPS_ALLOCATED"), "IPs allocated");
        assert_eq!(stage_label("NEW_STAGE"), "NEW_STAGE");
    }
}
