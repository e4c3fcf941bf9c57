//! Upstream fixtures load; invalid fixtures are refused with file, document, path and reason.

use serde_json::json;
use vitistack::source::manifest::{expand_paths, parse_file};
use vitistack::store::Store;

use super::{fixtures, spawn};

#[test]
fn every_upstream_fixture_loads() {
    let files = expand_paths(&[fixtures().join("upstream")]).expect("fixtures");
    assert!(files.len() >= 40, "{} files", files.len());
    for f in files {
        let r = parse_file(&f);
        assert!(r.accepted(), "{} refused: {:?}", f.display(), r.errors);
    }
}

/// (file, document, field path, words the reason must contain)
const INVALID: &[(&str, usize, &str, &str)] = &[
    (
        "kea-sample-nc-old-fields.yaml",
        0,
        "spec.name",
        "Required value",
    ),
    (
        "kubevirt-sample-machine-missing-provider.yaml",
        0,
        "spec.provider",
        "Required value",
    ),
    (
        "mp-nearly-empty-spec.yaml",
        0,
        "spec.providerType",
        "Required value",
    ),
    ("not-yaml-markdown.yaml", 0, "", "not"),
    (
        "old-datacenter-missing-infrastructure.yaml",
        0,
        "spec.infrastructure",
        "Required value",
    ),
    (
        "old-kubernetesprovider-bad-enum.yaml",
        0,
        "spec.providerType",
        "Unsupported value: \"eks\"",
    ),
    (
        "v1alpha2-nn-missing-identifiers.yaml",
        0,
        "spec.datacenterIdentifier",
        "Required value",
    ),
];

#[test]
fn every_invalid_fixture_is_refused_with_a_located_reason() {
    let dir = fixtures().join("invalid");
    let present = expand_paths(std::slice::from_ref(&dir)).expect("dir").len();
    assert_eq!(
        present,
        INVALID.len(),
        "a new invalid fixture needs an expectation here"
    );
    for (file, doc, path, reason) in INVALID {
        let r = parse_file(&dir.join(file));
        assert!(!r.accepted(), "{file} was accepted");
        assert!(r.objects.is_empty(), "{file}: nothing may be applied");
        let hit = r
            .errors
            .iter()
            .find(|e| e.document == *doc && e.path == *path && e.reason.contains(reason));
        assert!(
            hit.is_some(),
            "{file}: no error at document {doc} path {path:?} containing {reason:?}; got {:#?}",
            r.errors
        );
        let shown = hit.map(ToString::to_string).unwrap_or_default();
        assert!(shown.contains(file), "message must name the file: {shown}");
    }
}

#[test]
fn the_bad_enum_file_reports_every_refused_document() {
    let r = parse_file(&fixtures().join("invalid/old-kubernetesprovider-bad-enum.yaml"));
    let docs: std::collections::BTreeSet<usize> = r.errors.iter().map(|e| e.document).collect();
    assert!(
        docs.len() >= 2,
        "errors should cover several documents: {docs:?}"
    );
    assert!(
        r.errors
            .iter()
            .any(|e| e.reason.contains("supported values: \"aks\", \"talos\"")),
        "{:?}",
        r.errors
    );
}

#[tokio::test]
async fn a_refused_file_changes_nothing_in_the_store() {
    let store = Store::new();
    let summary = vitistack::source::import_paths(
        &store,
        &[
            fixtures().join("invalid"),
            fixtures().join("upstream/common"),
        ],
        vitistack::source::Apply::Atomic,
    )
    .await
    .expect("import");
    assert_eq!(summary.refused_files(), 7);
    let snap = store.snapshot();
    // Only the seven valid MachineClasses from common/ made it in.
    assert_eq!(snap.len(), 7, "objects: {}", snap.len());
    assert_eq!(snap.count(vitistack::model::Kind::MachineClass), 7);
}

#[tokio::test]
async fn fixtures_are_served_with_their_relationships() {
    let app = spawn(&[fixtures().join("upstream").to_str().expect("path")]).await;
    assert_eq!(app.running().import.refused_files(), 0);
    // Two KCs point at the v1alpha2 static NN; the v1alpha2 NN answers with its provisioning provider.
    let d = app
        .data(
            r#"{ networkNamespace(namespace: "default", name: "test-static-networknamespace") {
                   apiVersion provisioningProvider ipAllocation { type ipv4Cidr vlanId }
                   clusters { name clusterId } } }"#,
            json!({}),
        )
        .await;
    let nn = &d["networkNamespace"];
    assert_eq!(nn["apiVersion"], "vitistack.io/v1alpha2");
    assert_eq!(nn["provisioningProvider"], "manual");
    assert_eq!(nn["ipAllocation"]["vlanId"], 100);
    // metadata.name t-test-001 differs from clusterId t-test-001-jnxc: the link is by name reference.
    assert_eq!(nn["clusters"][0]["clusterId"], "t-test-001-jnxc");
    // Quantities parsed: the gpu class is 16Gi.
    let d = app
        .data(
            r#"{ machineClass(name: "gpu") { enabled memory { quantity bytes } gpu { cores } } }"#,
            json!({}),
        )
        .await;
    assert_eq!(d["machineClass"]["memory"]["bytes"], 17_179_869_184i64);
    assert_eq!(d["machineClass"]["gpu"]["cores"], 1024);
    assert_eq!(d["machineClass"]["enabled"], false);
}
