//! How the application inventory runs: on or off, the namespaces it never reads, paused or not.

use std::collections::BTreeSet;

/// The hossted design's default deny-list: Kubernetes' own namespaces and the local storage
/// provisioner's.
pub const DEFAULT_DENY: &[&str] = &[
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "local-path-storage",
];

/// The inventory's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct InventorySettings {
    /// Watch Helm releases and what they run (`APPLICATIONS`).
    pub enabled: bool,
    /// Namespaces never read (`APPLICATIONS_DENY_NAMESPACES`; a name, or a prefix ending in `*`).
    pub deny: BTreeSet<String>,
    /// Start with pushes stopped (`APPLICATIONS_PAUSED`).
    pub paused: bool,
    /// Where the cluster UUID's ConfigMap is kept on the kube source (`POD_NAMESPACE`; else
    /// the kubeconfig's namespace).
    pub namespace: Option<String>,
}

impl Default for InventorySettings {
    fn default() -> Self {
        InventorySettings {
            enabled: false,
            deny: DEFAULT_DENY.iter().map(|s| s.to_string()).collect(),
            paused: false,
            namespace: None,
        }
    }
}

impl InventorySettings {
    /// Whether `namespace` is denied.
    pub fn denies(&self, namespace: &str) -> bool {
        self.deny.iter().any(|d| match d.strip_suffix('*') {
            Some(prefix) => namespace.starts_with(prefix),
            None => d == namespace,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_deny_list_skips_kubernetes_own_namespaces_and_prefixes_work() {
        let mut s = InventorySettings::default();
        assert!(s.denies("kube-system") && s.denies("kube-node-lease"));
        assert!(!s.denies("shop") && !s.denies("kube-systems"));
        s.deny.insert("team-*".into());
        assert!(s.denies("team-a") && !s.denies("teams"));
    }
}
