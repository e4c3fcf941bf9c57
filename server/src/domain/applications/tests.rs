use super::*;
use crate::model::helm::ManifestObject;
use serde_json::{Value, json};

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
        managed_by_helm: true,
    }
}

fn ids<'a>(app_uuid: &'a str) -> DocumentIds<'a> {
    DocumentIds {
        cluster_uuid: "c-1",
        app_uuid,
        email_id: "ops@example.org",
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
    let text = include_str!("../../../../fixtures/hossted/app-documents.schema.json");
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
        document(&application(&r, &w, None), ids("")),
        document(
            &application(
                &release("new", "team-a", 1, "failed"),
                &Workloads::default(),
                None
            ),
            ids("A-1")
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
    // `hossted_helm`: the design's rule, both halves needed.
    assert_eq!(
        docs[0]["app_api_info"]["hossted_helm"], false,
        "no uuid Secret"
    );
    assert_eq!(
        docs[1]["app_api_info"]["hossted_helm"], true,
        "Helm's label and a uuid"
    );
    let mut unlabelled = release("new", "team-a", 1, "failed");
    unlabelled.managed_by_helm = false;
    let doc = document(
        &application(&unlabelled, &Workloads::default(), None),
        ids("A-1"),
    );
    assert_eq!(
        doc["app_api_info"]["hossted_helm"], false,
        "not Helm's label"
    );
    assert_eq!(doc["app_api_info"]["email_id"], "ops@example.org");
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
    let doc = document(&application(&r, &w, None), ids("A-9"));
    assert_eq!(
        doc,
        json!({
            "app_api_info": {"cluster_uuid": "c-1", "app_uuid": "A-9", "app_name": "test", "all_good": 1,
                             "email_id": "ops@example.org", "hossted_helm": true},
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
