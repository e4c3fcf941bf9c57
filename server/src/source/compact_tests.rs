//! The compact metadata (`model::meta`) changes no answer: for every upstream manifest in
//! `fixtures/upstream/` and every object of the demo fleet, an object's `raw` metadata is what
//! Kubernetes' own `ObjectMeta` makes of the same document, and an object written out and read
//! back is the same object, written out the same.

use std::path::Path;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta as KubeMeta;
use serde_json::Value;

use super::demo::{FleetSpec, fleet};
use super::manifest::{expand_paths, parse_file};
use crate::model::Resource;

/// The metadata as `k8s_openapi` reads and writes it, without `managedFields` (never kept).
fn as_kubernetes_writes_it(meta: &Value) -> Value {
    let mut m: KubeMeta = serde_json::from_value(meta.clone()).expect("metadata Kubernetes reads");
    m.managed_fields = None;
    serde_json::to_value(m).expect("metadata")
}

fn round_trip(r: &Resource, what: &str) {
    let v = r.to_value();
    assert_eq!(
        v["metadata"],
        as_kubernetes_writes_it(&v["metadata"]),
        "{what}: metadata"
    );
    let again = Resource::from_kept_value(r.kind(), r.version(), v.clone())
        .unwrap_or_else(|e| panic!("{what}: read back: {e}"))
        .in_datacenter(r.datacenter());
    assert_eq!(&again, r, "{what}: read back");
    assert_eq!(again.to_value(), v, "{what}: written again");
    // Text, as the timeline's checkpoints keep it.
    let text = serde_json::to_string(&v).expect("text");
    let from_text = Resource::from_kept_json(r.kind(), r.version(), &text)
        .unwrap_or_else(|e| panic!("{what}: read from text: {e}"))
        .in_datacenter(r.datacenter());
    assert_eq!(&from_text, r, "{what}: read from text");
}

#[test]
fn every_upstream_manifest_keeps_its_metadata_and_survives_a_round_trip() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/upstream");
    let files = expand_paths(&[root]).expect("the fixtures");
    let mut objects = 0;
    let mut labelled = 0;
    for f in &files {
        let report = parse_file(f);
        let text = std::fs::read_to_string(f).expect("the file");
        let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
            .filter_map(|d| serde::Deserialize::deserialize(d).ok())
            .filter(|v: &Value| !v.is_null())
            .collect();
        for r in &report.objects {
            let what = format!("{} {} {}", f.display(), r.kind(), r.name());
            round_trip(r, &what);
            // The document's own metadata, read by Kubernetes' type, is what the object serves.
            let doc = docs
                .iter()
                .find(|d| {
                    d["kind"] == r.kind().name() && d["metadata"]["name"].as_str() == Some(r.name())
                })
                .unwrap_or_else(|| panic!("{what}: its document"));
            let mut served = r.to_value()["metadata"].clone();
            let mut written = as_kubernetes_writes_it(&doc["metadata"]);
            for m in [&mut served, &mut written] {
                // Set by the store or the server, not the file.
                if let Some(m) = m.as_object_mut() {
                    m.remove("namespace");
                }
            }
            assert_eq!(served, written, "{what}: metadata as written");
            labelled += usize::from(r.meta().labels.as_ref().is_some_and(|l| !l.is_empty()));
            objects += 1;
        }
    }
    assert!(objects >= 40, "{objects} objects in {} files", files.len());
    assert!(labelled >= 2, "only {labelled} labelled objects");
}

#[test]
fn every_demo_object_survives_a_round_trip() {
    let objects = fleet(&FleetSpec::demo());
    assert!(objects.len() > 100, "{}", objects.len());
    for r in &objects {
        round_trip(r, &format!("{} {}/{}", r.kind(), r.namespace(), r.name()));
    }
    let annotated = objects
        .iter()
        .filter(|r| r.meta().annotations.as_ref().is_some_and(|a| !a.is_empty()))
        .count();
    let labelled = objects
        .iter()
        .filter(|r| r.meta().labels.as_ref().is_some_and(|l| l.len() >= 2))
        .count();
    assert!(
        annotated >= 50 && labelled >= 50,
        "{annotated} annotated, {labelled} labelled"
    );
}
