use super::*;
use crate::store::{Op, Store};
use serde_json::{Value, json};

fn object(kind: Kind, version: &str, v: Value) -> Resource {
    Resource::from_value(kind, version, v).expect("valid object")
}

fn nn(name: &str, ip_allocation: Value) -> Resource {
    let mut spec = json!({"datacenterIdentifier": "dc", "supervisorIdentifier": "sv"});
    if !ip_allocation.is_null() {
        spec["ipAllocation"] = ip_allocation;
    }
    object(
        Kind::NetworkNamespace,
        "v1alpha1",
        json!({"metadata": {"name": name, "namespace": "t"}, "spec": spec}),
    )
}

fn nc(name: &str, nn: Option<&str>, provider: Option<&str>) -> Resource {
    let mut spec = json!({"name": name});
    if let Some(nn) = nn {
        spec["networkNamespaceName"] = json!(nn);
    }
    if let Some(p) = provider {
        spec["provider"] = json!(p);
    }
    object(
        Kind::NetworkConfiguration,
        "v1alpha1",
        json!({"metadata": {"name": name, "namespace": "t"}, "spec": spec}),
    )
}

fn vip(name: &str, nn: &str, provider: &str) -> Resource {
    object(
        Kind::ControlPlaneVirtualSharedIp,
        "v1alpha1",
        json!({"metadata": {"name": name, "namespace": "t"},
            "spec": {"datacenterIdentifier": "dc", "networkNamespaceIdentifier": nn,
                "clusterIdentifier": name, "supervisorIdentifier": "sv",
                "provider": provider, "environment": "dev"}}),
    )
}

fn store(objects: Vec<Resource>) -> Store {
    let s = Store::new();
    s.apply_loaded(objects.into_iter().map(Op::Upsert).collect());
    s
}

fn get<'s>(snap: &'s Snapshot, kind: Kind, name: &str) -> &'s Arc<Resource> {
    snap.get(&Default::default(), kind, "t", name)
        .expect("object")
}

#[test]
fn configurations_go_to_the_allocator_their_namespace_and_provider_select() {
    let s = store(vec![
        // "a-dhcp" sorts first: the fallback for a configuration that names no namespace.
        nn("a-dhcp", Value::Null),
        nn(
            "static",
            json!({"type": "static", "provider": "static-ip-operator",
            "static": {"ipv4CIDR": "10.0.0.0/24", "ipv4Gateway": "10.0.0.1"}}),
        ),
        nn("dhcp", json!({"type": "dhcp"})),
        nc("in-static", Some("static"), None),
        nc("in-dhcp", Some("dhcp"), None),
        nc("no-namespace", None, None),
        nc("kea-in-static", Some("static"), Some("kea")),
        nc("static-in-dhcp", Some("dhcp"), Some("static-ip-operator")),
        nc("named-static", Some("static"), Some("static-ip-operator")),
        nc("other", Some("dhcp"), Some("infoblox")),
    ]);
    let snap = s.snapshot();
    let alloc = |name: &str| ip_allocator(&snap, get(&snap, Kind::NetworkConfiguration, name));
    assert_eq!(alloc("in-static"), Ok(Operator::StaticIp));
    assert_eq!(alloc("named-static"), Ok(Operator::StaticIp));
    assert_eq!(alloc("in-dhcp"), Ok(Operator::Kea));
    assert_eq!(alloc("no-namespace"), Ok(Operator::Kea));
    let refused = alloc("kea-in-static").expect_err("neither takes it");
    assert!(
        refused.contains("provider is kea") && refused.contains("t/static allocates static"),
        "{refused}"
    );
    assert!(alloc("static-in-dhcp").is_err());
    assert!(
        alloc("other")
            .expect_err("unknown")
            .contains("\"infoblox\"")
    );

    // Judged: kea counts only what it allocates, static-ip the static ones.
    let lag = |_: Kind| None;
    let report = judge(&snap, &lag, &Probes::default(), Duration::from_secs(300));
    let total = |name: &str| {
        report
            .iter()
            .find(|o| o.operator == name)
            .map(|o| o.resources.total)
            .expect("reported")
    };
    assert_eq!(total("kea"), 2);
    assert_eq!(total("static-ip"), 2);
    // `ipAllocation.provider: static-ip-operator` marks "static" as given by hand; nms
    // provisions the other two.
    assert_eq!(total("nms"), 2);
    assert_eq!(total("manual-ip"), 1);
}

#[test]
fn namespaces_given_by_hand_go_to_manual_ip_and_vips_follow_their_namespace() {
    let manual_v2 = object(
        Kind::NetworkNamespace,
        "v1alpha2",
        json!({"metadata": {"name": "by-hand", "namespace": "t"},
            "spec": {"datacenterIdentifier": "dc", "supervisorIdentifier": "sv",
                "networkProvisioning": {"provider": "manual", "manual": {"ipv4CIDR": "10.1.0.0/24"}}}}),
    );
    assert_eq!(network_provisioner(&manual_v2), Some(Operator::ManualIp));
    let nam_v2 = object(
        Kind::NetworkNamespace,
        "v1alpha2",
        json!({"metadata": {"name": "nam", "namespace": "t"},
            "spec": {"datacenterIdentifier": "dc", "supervisorIdentifier": "sv"}}),
    );
    assert_eq!(network_provisioner(&nam_v2), Some(Operator::Nms));
    let s = store(vec![
        nn(
            "static",
            json!({"type": "static", "provider": "static-ip-operator",
            "static": {"ipv4CIDR": "10.0.0.0/24", "ipv4Gateway": "10.0.0.1"}}),
        ),
        nn("dhcp", Value::Null),
        vip("c1", "static", ""),
        vip("c2", "dhcp", ""),
        vip("c3", "dhcp", "static-ip-operator"),
        vip("c4", "static", "nam"),
    ]);
    let snap = s.snapshot();
    assert_eq!(
        network_provisioner(get(&snap, Kind::NetworkNamespace, "static")),
        Some(Operator::ManualIp)
    );
    let by = |name: &str| vip_provider(&snap, get(&snap, Kind::ControlPlaneVirtualSharedIp, name));
    assert_eq!(by("c1"), Some(Operator::StaticIp));
    assert_eq!(by("c2"), Some(Operator::Nms));
    assert_eq!(by("c3"), Some(Operator::StaticIp));
    assert_eq!(by("c4"), Some(Operator::Nms));
    assert_eq!(Operator::ManualIp.env_prefix(), "MANUAL_IP");
    // A failed namespace leaves its provisioner healthy but degraded.
    let failed = object(
        Kind::NetworkNamespace,
        "v1alpha1",
        json!({"metadata": {"name": "broken", "namespace": "t"},
            "spec": {"datacenterIdentifier": "dc", "supervisorIdentifier": "sv"},
            "status": {"phase": "Error", "conditions": [{"type": "Ready", "status": "False",
                "reason": "Error", "message": "VLAN taken", "lastTransitionTime": "2026-03-01T10:00:00Z"}]}}),
    );
    let s = store(vec![failed]);
    let report = judge(
        &s.snapshot(),
        &|_| None,
        &Probes::default(),
        Duration::from_secs(300),
    );
    let nms = report.iter().find(|o| o.operator == "nms").expect("nms");
    assert_eq!((nms.status, nms.degraded), (OperatorState::Healthy, true));
    assert_eq!(nms.last_seen.as_deref(), Some("2026-03-01T10:00:00Z"));
    let kea = report.iter().find(|o| o.operator == "kea").expect("kea");
    assert_eq!((kea.degraded, kea.last_seen.as_deref()), (false, None));
    assert_eq!(Operator::StaticIp.program(), "static-ip-operator");
}
