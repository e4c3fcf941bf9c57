//! The application inventory: each Helm release's live revision joined with the pods,
//! services, volumes and ingresses it runs, judged healthy or not, and the document the
//! hossted design pushes for it.
//!
//! The join never crosses a namespace. An object belongs to a release when (in this order) its
//! `meta.helm.sh/release-name`/`-namespace` annotations name it, its
//! `app.kubernetes.io/instance` label names it (with `app.kubernetes.io/managed-by` absent or
//! `Helm`), or the release's manifest made it (kind and name).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::model::helm::{HelmRelease, ReleaseStatus};

/// The labels and annotations a join reads, with the object's identity.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Meta {
    pub name: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// A pod, as the inventory shows it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodFacts {
    pub meta: Meta,
    /// Its containers' images, in order.
    pub images: Vec<String>,
    /// `status.phase` (`Running`, `Pending`, …).
    pub phase: String,
    /// Every container ready.
    pub ready: bool,
    /// Restarts over its containers.
    pub restarts: u32,
    /// Why containers wait (`CrashLoopBackOff`, `ImagePullBackOff`, …).
    pub waiting: Vec<String>,
    /// When its `Ready` condition last changed (`lastTransitionTime`): tells one readiness flap
    /// from the next.
    pub ready_since: Option<String>,
}

/// A service and its ports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServiceFacts {
    pub meta: Meta,
    pub ports: Vec<i32>,
}

/// A PersistentVolumeClaim and the storage it requests (bytes).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VolumeFacts {
    pub meta: Meta,
    pub requested_bytes: Option<i128>,
}

/// An ingress and the hosts it serves.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IngressFacts {
    pub meta: Meta,
    pub hosts: Vec<String>,
}

/// What one namespace holds that a release can own.
#[derive(Clone, Debug, Default)]
pub struct Workloads<'a> {
    pub pods: Vec<&'a PodFacts>,
    pub services: Vec<&'a ServiceFacts>,
    pub volumes: Vec<&'a VolumeFacts>,
    pub ingresses: Vec<&'a IngressFacts>,
}

/// How an application is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Health {
    /// Deployed, every pod running and ready.
    Healthy,
    /// Deployed, but something is wrong (the reasons say what).
    Degraded,
    /// The release failed (no revision of it is deployed).
    Failed,
    PendingInstall,
    PendingUpgrade,
    PendingRollback,
    /// Being uninstalled.
    Uninstalling,
    /// Helm says nothing usable.
    Unknown,
}

impl Health {
    /// Its name in the API and metrics (`PENDING_UPGRADE`).
    pub fn label(self) -> &'static str {
        match self {
            Health::Healthy => "HEALTHY",
            Health::Degraded => "DEGRADED",
            Health::Failed => "FAILED",
            Health::PendingInstall => "PENDING_INSTALL",
            Health::PendingUpgrade => "PENDING_UPGRADE",
            Health::PendingRollback => "PENDING_ROLLBACK",
            Health::Uninstalling => "UNINSTALLING",
            Health::Unknown => "UNKNOWN",
        }
    }

    /// Every health.
    pub const ALL: &'static [Health] = &[
        Health::Healthy,
        Health::Degraded,
        Health::Failed,
        Health::PendingInstall,
        Health::PendingUpgrade,
        Health::PendingRollback,
        Health::Uninstalling,
        Health::Unknown,
    ];
}

/// One application: its live revision, what it runs, and how it does.
#[derive(Clone, Debug, PartialEq)]
pub struct Application {
    pub release: HelmRelease,
    pub pods: Vec<PodFacts>,
    pub services: Vec<ServiceFacts>,
    pub volumes: Vec<VolumeFacts>,
    pub ingresses: Vec<IngressFacts>,
    pub health: Health,
    /// Why it is not healthy, in words.
    pub reasons: Vec<String>,
}

const RELEASE_NAME: &str = "meta.helm.sh/release-name";
const RELEASE_NAMESPACE: &str = "meta.helm.sh/release-namespace";
const INSTANCE: &str = "app.kubernetes.io/instance";
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// Whether the object (`kind`, `meta`) belongs to `release`.
pub fn belongs(release: &HelmRelease, kind: &str, meta: &Meta) -> bool {
    if meta.namespace != release.namespace {
        return false;
    }
    let a = |k: &str| meta.annotations.get(k).map(String::as_str);
    if a(RELEASE_NAME) == Some(release.name.as_str())
        && a(RELEASE_NAMESPACE).is_none_or(|ns| ns == release.namespace)
    {
        return true;
    }
    let l = |k: &str| meta.labels.get(k).map(String::as_str);
    if l(INSTANCE) == Some(release.name.as_str()) && l(MANAGED_BY).is_none_or(|m| m == "Helm") {
        return true;
    }
    release.objects.iter().any(|o| {
        o.kind == kind
            && o.name == meta.name
            && o.namespace
                .as_deref()
                .is_none_or(|ns| ns == release.namespace)
    })
}

/// The live revision of each release among `revisions` (every revision of every release, in any
/// order): its newest deployed or pending revision; a release without one shows its newest
/// revision (a failed install, an uninstall under way). Keyed by (namespace, name).
pub fn live(revisions: &[HelmRelease]) -> BTreeMap<(String, String), &HelmRelease> {
    let mut out: BTreeMap<(String, String), &HelmRelease> = BTreeMap::new();
    for r in revisions {
        let key = (r.namespace.clone(), r.name.clone());
        let better = match out.get(&key) {
            None => true,
            Some(held) => match (r.status.live(), held.status.live()) {
                (true, false) => true,
                (false, true) => false,
                _ => r.revision > held.revision,
            },
        };
        if better {
            out.insert(key, r);
        }
    }
    out
}

/// The objects of one kind among `items` that `release` owns.
fn owned<T: Clone>(
    release: &HelmRelease,
    kind: &str,
    items: &[&T],
    meta: fn(&T) -> &Meta,
) -> Vec<T> {
    items
        .iter()
        .filter(|o| belongs(release, kind, meta(o)))
        .map(|o| (*o).clone())
        .collect()
}

/// `release` joined with what it owns among `w` (its namespace's objects), and judged.
/// `newer_failed`: the revision of a failed upgrade newer than the live one, if any.
pub fn application(
    release: &HelmRelease,
    w: &Workloads<'_>,
    newer_failed: Option<u64>,
) -> Application {
    let pods = owned(release, "Pod", &w.pods, |p| &p.meta);
    let services = owned(release, "Service", &w.services, |s| &s.meta);
    let volumes = owned(release, "PersistentVolumeClaim", &w.volumes, |v| &v.meta);
    let ingresses = owned(release, "Ingress", &w.ingresses, |i| &i.meta);
    let (health, reasons) = judge(release, &pods, newer_failed);
    Application {
        release: release.clone(),
        pods,
        services,
        volumes,
        ingresses,
        health,
        reasons,
    }
}

/// Health and its reasons.
fn judge(
    release: &HelmRelease,
    pods: &[PodFacts],
    newer_failed: Option<u64>,
) -> (Health, Vec<String>) {
    let health = match release.status {
        ReleaseStatus::Deployed => Health::Healthy,
        ReleaseStatus::Failed => Health::Failed,
        ReleaseStatus::PendingInstall => Health::PendingInstall,
        ReleaseStatus::PendingUpgrade => Health::PendingUpgrade,
        ReleaseStatus::PendingRollback => Health::PendingRollback,
        ReleaseStatus::Uninstalling => Health::Uninstalling,
        ReleaseStatus::Unknown | ReleaseStatus::Uninstalled | ReleaseStatus::Superseded => {
            Health::Unknown
        }
    };
    let mut reasons = Vec::new();
    if release.status == ReleaseStatus::Failed {
        reasons.push(format!("revision {} failed", release.revision));
    }
    if let Some(n) = newer_failed {
        reasons.push(format!(
            "the upgrade to revision {n} failed; revision {} still runs",
            release.revision
        ));
    }
    for p in pods {
        let name = &p.meta.name;
        if p.waiting.iter().any(|w| w == "CrashLoopBackOff") {
            reasons.push(format!(
                "pod {name} is crash-looping ({} restarts)",
                p.restarts
            ));
        } else if let Some(w) = p.waiting.iter().find(|w| {
            matches!(
                w.as_str(),
                "ImagePullBackOff" | "ErrImagePull" | "InvalidImageName"
            )
        }) {
            reasons.push(format!("pod {name} cannot pull its image ({w})"));
        } else if p.phase == "Failed" {
            reasons.push(format!("pod {name} failed"));
        } else if p.phase == "Pending" {
            reasons.push(format!("pod {name} is pending"));
        } else if p.phase == "Running" && !p.ready {
            reasons.push(format!("pod {name} is not ready"));
        }
    }
    if health == Health::Healthy && !reasons.is_empty() {
        return (Health::Degraded, reasons);
    }
    (health, reasons)
}

/// Gibibytes, rounded up (the document's `size` is a whole number).
fn gib(bytes: i128) -> i64 {
    let g = (bytes + (1 << 30) - 1) >> 30;
    i64::try_from(g.max(0)).unwrap_or(i64::MAX)
}

/// The hossted design's document for one application (`app_api_info` and `app_info`, the field
/// names of the design's sample). `all_good` is 1 when it is healthy, else 0; a volume's `size`
/// is its requested storage in GiB (rounded up). Nothing of a release's values or config is in it.
pub fn document(app: &Application, cluster_uuid: &str, app_uuid: &str) -> Value {
    let r = &app.release;
    json!({
        "app_api_info": {
            "cluster_uuid": cluster_uuid,
            "app_uuid": app_uuid,
            "app_name": r.name,
            "all_good": i32::from(app.health == Health::Healthy),
        },
        "app_info": {
            "helm_info": {
                "name": r.name,
                "namespace": r.namespace,
                "revision": r.revision,
                "updated": r.updated.clone().unwrap_or_default(),
                "status": r.status.as_str(),
                "chart": r.chart,
                "appVersion": r.app_version,
            },
            "pod_info": app.pods.iter().map(|p| json!({
                "name": p.meta.name,
                "namespace": p.meta.namespace,
                "image": p.images.first().cloned().unwrap_or_default(),
                "status": p.phase,
            })).collect::<Vec<_>>(),
            "service_info": app.services.iter().map(|s| json!({
                "name": s.meta.name,
                "namespace": s.meta.namespace,
                "port": s.ports.first().copied().unwrap_or(0),
            })).collect::<Vec<_>>(),
            "volume_info": app.volumes.iter().map(|v| json!({
                "name": v.meta.name,
                "namespace": v.meta.namespace,
                "size": v.requested_bytes.map_or(0, gib),
            })).collect::<Vec<_>>(),
            "ingress_info": app.ingresses.iter().flat_map(|i| {
                let hosts = if i.hosts.is_empty() { vec![String::new()] } else { i.hosts.clone() };
                hosts.into_iter().map(move |h| json!({
                    "name": i.meta.name,
                    "namespace": i.meta.namespace,
                    "domain": h,
                }))
            }).collect::<Vec<_>>(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::helm::ManifestObject;

    fn release(name: &str, ns: &str, revision: u64, status: &str) -> HelmRelease {
        HelmRelease {
            name: name.into(),
            namespace: ns.into(),
            revision,
            status: ReleaseStatus::parse(status),
            updated: Some("2026-11-20T10:00:00Z".into()),
            chart: "keycloak".into(),
            chart_version: "24.0.1".into(),
            app_version: "26.0.0".into(),
            objects: vec![ManifestObject {
                kind: "Service".into(),
                name: "unlabelled-svc".into(),
                namespace: None,
            }],
        }
    }

    fn meta(name: &str, ns: &str, labels: &[(&str, &str)]) -> Meta {
        Meta {
            name: name.into(),
            namespace: ns.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            annotations: BTreeMap::new(),
        }
    }

    fn pod(
        name: &str,
        ns: &str,
        instance: &str,
        phase: &str,
        ready: bool,
        waiting: &[&str],
    ) -> PodFacts {
        PodFacts {
            meta: meta(name, ns, &[(INSTANCE, instance), (MANAGED_BY, "Helm")]),
            images: vec!["docker.io/bitnami/keycloak:26".into()],
            phase: phase.into(),
            ready,
            restarts: 7,
            waiting: waiting.iter().map(|w| w.to_string()).collect(),
            ready_since: None,
        }
    }

    #[test]
    fn the_join_follows_labels_annotations_and_the_manifest_within_one_namespace() {
        let r = release("shop", "team-a", 2, "deployed");
        assert!(belongs(
            &r,
            "Pod",
            &meta("p", "team-a", &[(INSTANCE, "shop")])
        ));
        // Another namespace's object with the same labels: never joined (the design's sample
        // listed another namespace's volume).
        assert!(!belongs(
            &r,
            "PersistentVolumeClaim",
            &meta("data-0", "default", &[(INSTANCE, "shop")])
        ));
        // Managed by something else than Helm: not by the label alone.
        assert!(!belongs(
            &r,
            "Pod",
            &meta("p", "team-a", &[(INSTANCE, "shop"), (MANAGED_BY, "argocd")])
        ));
        let mut annotated = meta("cm", "team-a", &[]);
        annotated
            .annotations
            .insert(RELEASE_NAME.into(), "shop".into());
        annotated
            .annotations
            .insert(RELEASE_NAMESPACE.into(), "team-a".into());
        assert!(belongs(&r, "Service", &annotated));
        // Named in the manifest, without labels.
        assert!(belongs(
            &r,
            "Service",
            &meta("unlabelled-svc", "team-a", &[])
        ));
        assert!(!belongs(
            &r,
            "Ingress",
            &meta("unlabelled-svc", "team-a", &[])
        ));
        assert!(!belongs(
            &r,
            "Service",
            &meta("unlabelled-svc", "team-b", &[])
        ));
    }

    #[test]
    fn only_the_newest_deployed_or_pending_revision_is_live() {
        let revisions = vec![
            release("shop", "team-a", 1, "superseded"),
            release("shop", "team-a", 3, "failed"),
            release("shop", "team-a", 2, "deployed"),
            release("new", "team-a", 1, "failed"),
            release("up", "team-b", 4, "pending-upgrade"),
            release("up", "team-b", 3, "deployed"),
        ];
        let l = live(&revisions);
        let got: Vec<(&str, u64)> = l.values().map(|r| (r.name.as_str(), r.revision)).collect();
        assert_eq!(got, [("new", 1), ("shop", 2), ("up", 4)]);
    }

    #[test]
    fn health_names_a_crash_looping_pod_and_a_pending_upgrade() {
        let r = release("shop", "team-a", 2, "deployed");
        let good = pod("shop-0", "team-a", "shop", "Running", true, &[]);
        let looping = pod(
            "shop-1",
            "team-a",
            "shop",
            "Running",
            false,
            &["CrashLoopBackOff"],
        );
        let elsewhere = pod("shop-0", "team-b", "shop", "Failed", false, &[]);
        let w = Workloads {
            pods: vec![&good, &elsewhere],
            ..Default::default()
        };
        let app = application(&r, &w, None);
        assert_eq!((app.health, app.pods.len()), (Health::Healthy, 1));
        let w = Workloads {
            pods: vec![&good, &looping],
            ..Default::default()
        };
        let app = application(&r, &w, Some(3));
        assert_eq!(app.health, Health::Degraded);
        assert_eq!(
            app.reasons,
            [
                "the upgrade to revision 3 failed; revision 2 still runs",
                "pod shop-1 is crash-looping (7 restarts)"
            ]
        );
        let app = application(&release("up", "team-a", 4, "pending-upgrade"), &w, None);
        assert_eq!(app.health, Health::PendingUpgrade);
        let app = application(&release("new", "team-a", 1, "failed"), &w, None);
        assert_eq!(app.health, Health::Failed);
    }

    /// The JSON Schema written from the design's sample (`fixtures/hossted/`).
    fn sample_schema() -> jsonschema::Validator {
        let text = include_str!("../../../fixtures/hossted/app-documents.schema.json");
        let schema: Value = serde_json::from_str(text).expect("schema JSON");
        jsonschema::validator_for(&schema).expect("a schema")
    }

    #[test]
    fn documents_match_the_design_s_sample_and_nothing_more() {
        let schema = sample_schema();
        let r = release("shop", "team-a", 2, "deployed");
        let looping = pod(
            "shop-1",
            "team-a",
            "shop",
            "Running",
            false,
            &["CrashLoopBackOff"],
        );
        let ing = IngressFacts {
            meta: meta("shop", "team-a", &[(INSTANCE, "shop")]),
            hosts: vec!["a.example.org".into(), "b.example.org".into()],
        };
        let w = Workloads {
            pods: vec![&looping],
            ingresses: vec![&ing],
            ..Default::default()
        };
        let docs = json!([
            document(&application(&r, &w, None), "c-1", ""),
            document(
                &application(
                    &release("new", "team-a", 1, "failed"),
                    &Workloads::default(),
                    None
                ),
                "c-1",
                "A-1"
            ),
        ]);
        let errors: Vec<String> = schema
            .iter_errors(&docs)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            docs[0]["app_api_info"]["all_good"], 0,
            "a crash-looping pod"
        );
        assert_eq!(
            docs[0]["app_info"]["ingress_info"].as_array().map(Vec::len),
            Some(2),
            "one entry per host"
        );
        // The schema is strict: a field beyond the sample's (a release's values) is refused.
        let mut extra = docs.clone();
        extra[0]["app_info"]["helmvalue_info"] = json!({"chart_values": {"password": "x"}});
        assert!(!schema.is_valid(&extra));
    }

    #[test]
    fn the_document_has_the_design_s_fields_and_only_its_namespace_s_objects() {
        let r = release("test", "default", 1, "deployed");
        let p = pod("test-keycloak-0", "default", "test", "Running", true, &[]);
        let svc = ServiceFacts {
            meta: meta("test-keycloak", "default", &[(INSTANCE, "test")]),
            ports: vec![80, 8443],
        };
        let vol = VolumeFacts {
            meta: meta("data-test-postgresql-0", "default", &[(INSTANCE, "test")]),
            requested_bytes: Some(8 << 30),
        };
        let other_vol = VolumeFacts {
            meta: meta("data-other-0", "nginx-ingress", &[(INSTANCE, "test")]),
            requested_bytes: Some(1),
        };
        let ing = IngressFacts {
            meta: meta("keycloak", "default", &[(INSTANCE, "test")]),
            hosts: vec!["keycloak.example.org".into()],
        };
        let w = Workloads {
            pods: vec![&p],
            services: vec![&svc],
            volumes: vec![&vol, &other_vol],
            ingresses: vec![&ing],
        };
        let doc = document(&application(&r, &w, None), "c-1", "A-9");
        assert_eq!(
            doc,
            json!({
                "app_api_info": {"cluster_uuid": "c-1", "app_uuid": "A-9", "app_name": "test", "all_good": 1},
                "app_info": {
                    "helm_info": {"name": "test", "namespace": "default", "revision": 1,
                                  "updated": "2026-11-20T10:00:00Z", "status": "deployed",
                                  "chart": "keycloak", "appVersion": "26.0.0"},
                    "pod_info": [{"name": "test-keycloak-0", "namespace": "default",
                                  "image": "docker.io/bitnami/keycloak:26", "status": "Running"}],
                    "service_info": [{"name": "test-keycloak", "namespace": "default", "port": 80}],
                    "volume_info": [{"name": "data-test-postgresql-0", "namespace": "default", "size": 8}],
                    "ingress_info": [{"name": "keycloak", "namespace": "default", "domain": "keycloak.example.org"}]
                }
            })
        );
    }
}
