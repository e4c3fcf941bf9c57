//! The demo's applications: a handful of Helm releases per datacenter, stored as Helm stores
//! them (JSON, gzip, base64) and read back through the same decoder the kube source uses, with
//! the pods, services, volumes and ingresses they run. One is healthy, one has a crash-looping
//! pod, one is mid-upgrade, and one lives in a denied namespace (it never shows). Under the
//! simulator the crash loop restarts and the upgrade completes, then the next one starts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::domain::applications::{IngressFacts, Meta, PodFacts, ServiceFacts, VolumeFacts};
use crate::inventory::{Fact, FactKind, Inventory};
use crate::model::Datacenter;
use crate::model::helm;

/// A value planted in every demo release's values and config: it must never be served.
pub const PLANTED: &str = "demo-admin-password-never-served";

/// One revision of a release, encoded as Helm stores it and decoded as the kube source does.
fn release(name: &str, ns: &str, revision: u64, status: &str, chart: (&str, &str, &str)) -> Fact {
    let (chart, version, app_version) = chart;
    let stored = json!({
        "name": name,
        "namespace": ns,
        "version": revision,
        "info": {"status": status, "last_deployed": format!("2026-11-{:02}T09:{:02}:00Z", 10 + revision, revision * 7 % 60),
                 "description": "Install complete"},
        "chart": {"metadata": {"name": chart, "version": version, "appVersion": app_version},
                  "values": {"auth": {"adminPassword": PLANTED}}},
        "config": {"auth": {"adminPassword": PLANTED}},
        "manifest": format!("---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}-admin\nstringData:\n  password: {PLANTED}\n"),
    });
    match helm::decode(helm::encode(&stored).as_bytes()) {
        Ok(r) => Fact::Release {
            object: format!("sh.helm.release.v1.{name}.v{revision}"),
            release: Box::new(r),
            in_configmap: false,
        },
        // The encoder and decoder are each other's inverse; a failure is a bug shown as such.
        Err(e) => unreachable!("the demo's release does not decode: {e}"),
    }
}

fn meta(name: &str, ns: &str, release: &str) -> Meta {
    Meta {
        name: name.into(),
        namespace: ns.into(),
        labels: BTreeMap::from([
            (
                "app.kubernetes.io/instance".to_string(),
                release.to_string(),
            ),
            (
                "app.kubernetes.io/managed-by".to_string(),
                "Helm".to_string(),
            ),
        ]),
        annotations: BTreeMap::new(),
    }
}

fn pod(name: &str, ns: &str, release: &str, image: &str, restarts: u32, looping: bool) -> Fact {
    Fact::Pod(PodFacts {
        meta: meta(name, ns, release),
        images: vec![image.into()],
        phase: "Running".into(),
        ready: !looping,
        restarts,
        waiting: if looping {
            vec!["CrashLoopBackOff".into()]
        } else {
            vec![]
        },
        ready_since: None,
    })
}

fn service(name: &str, ns: &str, release: &str, port: i32) -> Fact {
    Fact::Service(ServiceFacts {
        meta: meta(name, ns, release),
        ports: vec![port],
    })
}

fn volume(name: &str, ns: &str, release: &str, gib: i128) -> Fact {
    Fact::Volume(VolumeFacts {
        meta: meta(name, ns, release),
        requested_bytes: Some(gib << 30),
    })
}

fn ingress(name: &str, ns: &str, release: &str, host: &str) -> Fact {
    Fact::Ingress(IngressFacts {
        meta: meta(name, ns, release),
        hosts: vec![host.into()],
    })
}

const GRAFANA: (&str, &str, &str) = ("grafana", "8.6.0", "11.3.0");
const KEYCLOAK: (&str, &str, &str) = ("keycloak", "24.2.1", "26.0.5");

fn namespace(name: &str, uid: String) -> Fact {
    Fact::Namespace {
        name: name.into(),
        uid,
    }
}

/// The demo's applications of datacenter `dc` (its key names the hosts of the ingresses).
pub fn facts(dc: &Datacenter) -> Vec<Fact> {
    let domain = if dc.is_single() {
        "demo.vitistack.io".to_string()
    } else {
        format!("{}.demo.vitistack.io", dc.key())
    };
    let wp = ("wordpress", "23.1.2", "6.6.2");
    let pg = ("postgresql", "16.2.1", "17.2.0");
    let mut out = vec![
        namespace("kube-system", super::demo::kube_system_uid(dc)),
        namespace("shop", format!("{}-shop", dc.key())),
        namespace("identity", format!("{}-identity", dc.key())),
        namespace("monitoring", format!("{}-monitoring", dc.key())),
        namespace("billing", format!("{}-billing", dc.key())),
        // Healthy, at its second revision.
        release("shop", "shop", 1, "superseded", wp),
        release("shop", "shop", 2, "deployed", wp),
        pod(
            "shop-wordpress-7d9f-x2k4p",
            "shop",
            "shop",
            "docker.io/bitnami/wordpress:6.6.2",
            0,
            false,
        ),
        pod(
            "shop-wordpress-7d9f-q8m2n",
            "shop",
            "shop",
            "docker.io/bitnami/wordpress:6.6.2",
            1,
            false,
        ),
        service("shop-wordpress", "shop", "shop", 80),
        volume("shop-wordpress", "shop", "shop", 10),
        ingress("shop-wordpress", "shop", "shop", &format!("shop.{domain}")),
        // Healthy, with a volume and an app UUID.
        release("billing-db", "billing", 1, "deployed", pg),
        pod(
            "billing-db-postgresql-0",
            "billing",
            "billing-db",
            "docker.io/bitnami/postgresql:17.2.0",
            0,
            false,
        ),
        service("billing-db-postgresql", "billing", "billing-db", 5432),
        volume("data-billing-db-postgresql-0", "billing", "billing-db", 50),
        Fact::AppUuid {
            namespace: "billing".into(),
            uuid: "6f1c2a57-3e0b-4c52-9a39-7d2f61c0b8e4".into(),
        },
        // A denied namespace: never in the inventory.
        release(
            "metrics-server",
            "kube-system",
            1,
            "deployed",
            ("metrics-server", "3.12.2", "0.7.2"),
        ),
        pod(
            "metrics-server-5f8b-77kq2",
            "kube-system",
            "metrics-server",
            "registry.k8s.io/metrics-server:v0.7.2",
            0,
            false,
        ),
    ];
    out.extend(keycloak(3, 14));
    out.extend(grafana(5, true));
    out
}

/// Keycloak with one crash-looping pod.
fn keycloak(revision: u64, restarts: u32) -> Vec<Fact> {
    vec![
        release("keycloak", "identity", revision, "deployed", KEYCLOAK),
        pod(
            "keycloak-0",
            "identity",
            "keycloak",
            "quay.io/keycloak/keycloak:26.0.5",
            0,
            false,
        ),
        pod(
            "keycloak-1",
            "identity",
            "keycloak",
            "quay.io/keycloak/keycloak:26.0.5",
            restarts,
            true,
        ),
        service("keycloak", "identity", "keycloak", 8080),
        ingress(
            "keycloak",
            "identity",
            "keycloak",
            "login.demo.vitistack.io",
        ),
    ]
}

/// Grafana at `revision`: mid-upgrade to it (the previous one deployed), or done.
fn grafana(revision: u64, upgrading: bool) -> Vec<Fact> {
    let mut out = vec![
        release(
            "grafana",
            "monitoring",
            revision - 1,
            if upgrading { "deployed" } else { "superseded" },
            GRAFANA,
        ),
        release(
            "grafana",
            "monitoring",
            revision,
            if upgrading {
                "pending-upgrade"
            } else {
                "deployed"
            },
            GRAFANA,
        ),
        pod(
            "grafana-6c4d-m9x7t",
            "monitoring",
            "grafana",
            "docker.io/grafana/grafana:11.3.0",
            0,
            false,
        ),
        service("grafana", "monitoring", "grafana", 3000),
        volume("grafana", "monitoring", "grafana", 5),
    ];
    if revision > 2 {
        out.push(release(
            "grafana",
            "monitoring",
            revision - 2,
            "superseded",
            GRAFANA,
        ));
    }
    out
}

/// Put the demo's applications of `dc` into `inventory`, as a first list of each kind (so what
/// the demo starts with is its state, not news: no history rows, no half-loaded pushes).
pub fn load(inventory: &Inventory, dc: &Datacenter) {
    let all = facts(dc);
    let mut kinds: Vec<FactKind> = all.iter().map(Fact::kind).collect();
    kinds.sort_unstable();
    kinds.dedup();
    inventory.expect(dc, &kinds);
    for kind in kinds {
        let of_kind = all.iter().filter(|f| f.kind() == kind).cloned().collect();
        inventory.replace(dc, kind, of_kind);
    }
}

/// Play the demo: the crash-looping pod restarts now and then, and the upgrade completes and
/// the next one starts. A demo's clock (it paces what a user watches), not a synchronisation.
pub fn simulate(
    inventory: Arc<Inventory>,
    dc: Datacenter,
    step: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut restarts = 14;
        let mut revision = 5;
        let mut upgrading = true;
        let mut n: u64 = 0;
        loop {
            tokio::time::sleep(step).await;
            n += 1;
            restarts += 1;
            for f in keycloak(3, restarts) {
                inventory.apply(&dc, f);
            }
            if n.is_multiple_of(6) {
                if upgrading {
                    upgrading = false;
                } else {
                    revision += 1;
                    upgrading = true;
                }
                for f in grafana(revision, upgrading) {
                    inventory.apply(&dc, f);
                }
                // Helm keeps ten revisions (`--history-max`).
                if revision > 10 {
                    inventory.delete(
                        &dc,
                        crate::inventory::FactKind::Release,
                        "monitoring",
                        &format!("sh.helm.release.v1.grafana.v{}", revision - 10),
                    );
                }
            }
        }
    })
}
