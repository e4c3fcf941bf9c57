//! The resources the test server can serve: a resource's identity, and the sets tests start with
//! (the watched vitistack kinds, the inventory's core kinds, Leases, Events).

/// A resource the server knows.
#[derive(Clone, Debug)]
pub struct ResourceDef {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// False: answers 404 as if the CRD were not installed.
    pub served: bool,
}

impl ResourceDef {
    pub(super) fn id(&self) -> String {
        format!("{}/{}/{}", self.group, self.version, self.plural)
    }

    pub(super) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// `coordination.k8s.io/v1` Leases (leader election).
pub fn leases() -> ResourceDef {
    ResourceDef {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        kind: "Lease",
        namespaced: true,
        served: true,
    }
}

/// `events.k8s.io/v1` Events (what the server's changes leave on their objects).
pub fn events() -> ResourceDef {
    ResourceDef {
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        kind: "Event",
        namespaced: true,
        served: true,
    }
}

/// The core resources the application inventory reads (Helm's release Secrets and ConfigMaps,
/// Pods, Services, PersistentVolumeClaims, Namespaces) and `networking.k8s.io/v1` Ingresses.
pub fn inventory_resources() -> Vec<ResourceDef> {
    let core = |plural: &'static str, kind: &'static str, namespaced: bool| ResourceDef {
        group: "",
        version: "v1",
        plural,
        kind,
        namespaced,
        served: true,
    };
    vec![
        core("secrets", "Secret", true),
        core("configmaps", "ConfigMap", true),
        core("pods", "Pod", true),
        core("services", "Service", true),
        core("persistentvolumeclaims", "PersistentVolumeClaim", true),
        core("namespaces", "Namespace", false),
        ResourceDef {
            group: "networking.k8s.io",
            version: "v1",
            plural: "ingresses",
            kind: "Ingress",
            namespaced: true,
            served: true,
        },
    ]
}

/// Every resource the vitistack server watches (vitistack.io, kubevirt.io, core nodes), installed.
pub fn watched_resources() -> Vec<ResourceDef> {
    vitistack::source::kube::watched_kinds()
        .into_iter()
        .map(|(k, version)| ResourceDef {
            group: k.group(),
            version,
            plural: k.plural(),
            kind: k.name(),
            namespaced: k.namespaced(),
            served: true,
        })
        .collect()
}

/// `rbac.authorization.k8s.io/v1` Roles, RoleBindings, ClusterRoles and ClusterRoleBindings: the
/// objects SubjectAccessReviews are answered from (see `reviews.rs`), so a test changes access
/// the way a cluster admin does.
pub fn rbac_resources() -> Vec<ResourceDef> {
    let rbac = |plural: &'static str, kind: &'static str, namespaced: bool| ResourceDef {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural,
        kind,
        namespaced,
        served: true,
    };
    vec![
        rbac("roles", "Role", true),
        rbac("rolebindings", "RoleBinding", true),
        rbac("clusterroles", "ClusterRole", false),
        rbac("clusterrolebindings", "ClusterRoleBinding", false),
    ]
}
