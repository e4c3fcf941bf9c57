//! The hossted design's document for one application: what the inventory API is sent.

use serde_json::{Value, json};

use super::{Application, Health};

/// Gibibytes, rounded up (the document's `size` is a whole number).
fn gib(bytes: i128) -> i64 {
    let g = (bytes + (1 << 30) - 1) >> 30;
    i64::try_from(g.max(0)).unwrap_or(i64::MAX)
}

/// Who an application's document speaks for: the cluster, the application (its namespace's
/// `uuid` Secret; empty without one) and the account (`HOSSTED_EMAIL_ID`; empty when unset).
#[derive(Clone, Copy, Debug)]
pub struct DocumentIds<'a> {
    pub cluster_uuid: &'a str,
    pub app_uuid: &'a str,
    pub email_id: &'a str,
}

/// The hossted design's document for one application (`app_api_info` and `app_info`, the field
/// names of the design's sample). `all_good` is 1 when it is healthy, else 0; `hossted_helm` is
/// the design's rule: the release's manifest labels its objects `app.kubernetes.io/managed-by:
/// Helm` and its namespace has a `uuid` Secret. A volume's `size` is its requested storage in GiB
/// (rounded up). Nothing of a release's values or config is in it.
pub fn document(app: &Application, ids: DocumentIds<'_>) -> Value {
    let r = &app.release;
    json!({
        "app_api_info": {
            "cluster_uuid": ids.cluster_uuid,
            "app_uuid": ids.app_uuid,
            "app_name": r.name,
            "all_good": i32::from(app.health == Health::Healthy),
            "email_id": ids.email_id,
            "hossted_helm": r.managed_by_helm && !ids.app_uuid.is_empty(),
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
