use super::*;

#[test]
fn every_embedded_schema_compiles() {
    for kind in Kind::ALL.iter().filter(|k| k.is_vitistack()) {
        for v in kind.versions() {
            assert!(schema_for(*kind, v).is_ok(), "{kind} {v}");
        }
    }
}

#[test]
fn even_control_plane_replicas_are_refused_with_the_crd_message() {
    let s = schema_for(Kind::KubernetesCluster, "v1alpha1").expect("schema");
    let mut obj =
        serde_json::json!({"spec": {"data": {}, "topology": {"controlplane": {"replicas": 2}}}});
    let v = s.validate(&mut obj);
    let e = v
        .errors
        .iter()
        .find(|e| e.path == "spec.topology.controlplane.replicas")
        .expect("replica error");
    assert!(e.reason.contains("odd number"), "{e}");
    assert!(
        v.errors
            .iter()
            .any(|e| e.path == "spec.data.clusterId" && e.reason == "Required value")
    );
}

#[test]
fn defaults_are_applied_and_unknown_fields_pruned() {
    let s = schema_for(Kind::MachineClass, "v1alpha1").expect("schema");
    let mut obj = serde_json::json!({"spec": {"cpu": {"cores": 2}, "memory": {"quantity": "4Gi"},
        "machineProviders": [], "bogus": 1}});
    let v = s.validate(&mut obj);
    assert!(v.errors.is_empty(), "{:?}", v.errors);
    assert_eq!(v.unknown_fields, vec!["spec.bogus".to_string()]);
    assert_eq!(obj["spec"]["enabled"], true);
    assert!(obj["spec"].get("bogus").is_none());
}
