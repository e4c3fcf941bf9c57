//! Relationships in both directions, filters, sorting, pagination edges, ids, secrets, operations routes.

use serde_json::{Value, json};

use super::{spawn, spawn_full};

const READY_CLUSTER: &str =
    r#"{ clusters(first: 1, filter: {phase: ["Ready"]}) { nodes { name namespace clusterId } } }"#;

async fn a_ready_cluster(app: &super::TestApp) -> (String, String, String) {
    let d = app.data(READY_CLUSTER, json!({})).await;
    let c = &d["clusters"]["nodes"][0];
    let s = |k: &str| c[k].as_str().expect("string").to_string();
    (s("namespace"), s("name"), s("clusterId"))
}

#[tokio::test]
async fn cluster_relationships_resolve_both_ways() {
    let app = spawn_full().await;
    let (ns, name, cluster_id) = a_ready_cluster(&app).await;
    let d = app
        .data(
            r#"query($ns: String!, $name: String!) { cluster(namespace: $ns, name: $name) {
                clusterId desiredMachines
                controlPlane { replicas machineClass { name } }
                nodePools { name replicas machines { name nodePool } }
                cp: machines(role: CONTROL_PLANE) { totalCount nodes { role } }
                wp: machines(nodePool: "wp") { totalCount }
                machines(first: 100) { totalCount nodes { name cluster { name }
                    networkConfiguration { machine { name } interfaces { ipv4Addresses } }
                    machineClass { name cpu { vcpus } } networkNamespace { name } } }
                networkNamespace { name ready clusters { name } allocatedIps { ip networkConfigurationName } }
                controlPlaneVip { loadBalancerIps cluster { name } networkNamespace { name } }
            } }"#,
            json!({"ns": ns, "name": name}),
        )
        .await;
    let c = &d["cluster"];
    assert_eq!(c["clusterId"], cluster_id.as_str());
    let total = c["machines"]["totalCount"].as_i64().expect("count");
    assert_eq!(total, c["desiredMachines"].as_i64().expect("desired"));
    assert_eq!(c["cp"]["totalCount"], c["controlPlane"]["replicas"]);
    assert!(
        c["cp"]["nodes"]
            .as_array()
            .expect("cp")
            .iter()
            .all(|m| m["role"] == "CONTROL_PLANE")
    );
    let wp = c["nodePools"]
        .as_array()
        .expect("pools")
        .iter()
        .find(|p| p["name"] == "wp")
        .expect("wp")
        .clone();
    assert_eq!(c["wp"]["totalCount"], wp["replicas"]);
    assert!(
        wp["machines"]
            .as_array()
            .expect("m")
            .iter()
            .all(|m| m["nodePool"] == "wp")
    );
    for m in c["machines"]["nodes"].as_array().expect("machines") {
        assert_eq!(
            m["cluster"]["name"],
            name.as_str(),
            "machine.cluster points back"
        );
        assert_eq!(
            m["networkConfiguration"]["machine"]["name"], m["name"],
            "NC ↔ Machine by name"
        );
        assert!(
            !m["networkConfiguration"]["interfaces"][0]["ipv4Addresses"]
                .as_array()
                .expect("ips")
                .is_empty()
        );
        assert!(m["machineClass"]["cpu"]["vcpus"].as_i64().expect("vcpus") >= 1);
    }
    let nn = &c["networkNamespace"];
    assert_eq!(nn["ready"], true);
    assert!(
        nn["clusters"]
            .as_array()
            .expect("clusters")
            .iter()
            .any(|x| x["name"] == name.as_str())
    );
    assert_eq!(
        nn["allocatedIps"].as_array().expect("ips").len() as i64,
        total,
        "one IP per machine"
    );
    let vip = &c["controlPlaneVip"];
    assert_eq!(vip["cluster"]["name"], name.as_str());
    assert_eq!(vip["loadBalancerIps"].as_array().expect("vip").len(), 1);
}

#[tokio::test]
async fn datacenter_resolves_declared_providers() {
    let app = spawn_full().await;
    let d = app
        .data(
            "{ datacenter { name displayName machineProviders { name provider { providerType machines(first: 1) { totalCount } } }
               kubernetesProviders { name provider { providerType clusters(first: 1) { totalCount } } } } vitistackName }",
            json!({}),
        )
        .await;
    let dc = &d["datacenter"];
    assert_eq!(dc["name"], "vitistack");
    assert_eq!(d["vitistackName"], "vitistack");
    let kv = dc["machineProviders"]
        .as_array()
        .expect("mps")
        .iter()
        .find(|p| p["name"] == "kubevirt-provider")
        .expect("kubevirt")
        .clone();
    assert_eq!(kv["provider"]["providerType"], "kubevirt");
    assert!(
        kv["provider"]["machines"]["totalCount"]
            .as_i64()
            .expect("n")
            > 0
    );
    assert!(
        dc["kubernetesProviders"][0]["provider"]["clusters"]["totalCount"]
            .as_i64()
            .expect("n")
            > 0
    );
}

#[tokio::test]
async fn filters_select_by_namespace_phase_labels_and_search() {
    let app = spawn_full().await;
    let q = r#"query($f: Filter) { machines(filter: $f, first: 500) { totalCount nodes { namespace phase role labels { key value } name } } }"#;
    let all = app.data(q, json!({"f": null})).await["machines"]["totalCount"]
        .as_i64()
        .expect("n");
    let by_ns = app.data(q, json!({"f": {"namespace": "team-3"}})).await;
    assert!(
        by_ns["machines"]["nodes"]
            .as_array()
            .expect("n")
            .iter()
            .all(|m| m["namespace"] == "team-3")
    );
    let failed = app.data(q, json!({"f": {"phase": ["failed"]}})).await;
    let failed_n = failed["machines"]["totalCount"].as_i64().expect("n");
    assert!(failed_n >= 1 && failed_n < all);
    assert!(
        failed["machines"]["nodes"]
            .as_array()
            .expect("n")
            .iter()
            .all(|m| m["phase"] == "Failed")
    );
    let workers = app
        .data(
            q,
            json!({"f": {"labelSelector": "vitistack.io/node-role in (worker)"}}),
        )
        .await;
    assert!(
        workers["machines"]["nodes"]
            .as_array()
            .expect("n")
            .iter()
            .all(|m| m["role"] == "WORKER")
    );
    let cps = app.data(q, json!({"f": {"labelSelector": "vitistack.io/node-role!=worker,vitistack.io/clusterid"}})).await;
    let labelled = app
        .data(q, json!({"f": {"labelSelector": "vitistack.io/clusterid"}}))
        .await;
    let unlabelled = app
        .data(
            q,
            json!({"f": {"labelSelector": "!vitistack.io/clusterid"}}),
        )
        .await;
    assert!(
        unlabelled["machines"]["totalCount"].as_i64().expect("u") > 0,
        "upstream example Machines have no cluster label"
    );
    assert_eq!(
        workers["machines"]["totalCount"].as_i64().expect("w")
            + cps["machines"]["totalCount"].as_i64().expect("c"),
        labelled["machines"]["totalCount"].as_i64().expect("l"),
        "workers + control planes = every cluster machine"
    );
    assert_eq!(
        labelled["machines"]["totalCount"].as_i64().expect("l")
            + unlabelled["machines"]["totalCount"].as_i64().expect("u"),
        all
    );
    let search = app.data(q, json!({"f": {"search": "DEMO-001"}})).await;
    assert!(
        search["machines"]["nodes"]
            .as_array()
            .expect("n")
            .iter()
            .all(|m| m["name"].as_str().expect("s").contains("demo-001"))
    );
    let bad = app
        .error(q, json!({"f": {"labelSelector": "role in worker"}}))
        .await;
    assert_eq!(bad["extensions"]["code"], "BAD_LABEL_SELECTOR");
    assert!(
        bad["message"].as_str().expect("m").contains("value set"),
        "{bad}"
    );
}

fn names(v: &Value) -> Vec<String> {
    v["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| e["node"]["name"].as_str().expect("name").to_string())
        .collect()
}

#[tokio::test]
async fn pagination_walks_every_page_without_gaps_or_duplicates() {
    let app = spawn_full().await;
    let q = r#"query($after: String, $sort: Sort) { machines(first: 7, after: $after, sort: $sort) {
        totalCount pageInfo { hasNextPage hasPreviousPage endCursor startCursor } edges { cursor node { name createdAt } } } }"#;
    for sort in [
        json!({"field": "NAME", "direction": "ASC"}),
        json!({"field": "NAME", "direction": "DESC"}),
    ] {
        let (mut after, mut seen, mut pages) = (Value::Null, Vec::<String>::new(), 0);
        let total = loop {
            let d = app.data(q, json!({"after": after, "sort": sort})).await;
            let m = &d["machines"];
            assert_eq!(m["pageInfo"]["hasPreviousPage"], pages > 0);
            seen.extend(names(m));
            pages += 1;
            if m["pageInfo"]["hasNextPage"] == false {
                assert!(m["edges"].as_array().expect("e").len() <= 7);
                break m["totalCount"].as_u64().expect("total") as usize;
            }
            after = m["pageInfo"]["endCursor"].clone();
        };
        assert_eq!(seen.len(), total, "every item exactly once");
        let mut sorted = seen.clone();
        sorted.sort();
        if sort["direction"] == "DESC" {
            sorted.reverse();
        }
        assert_eq!(seen, sorted, "in the requested order");
        let mut dedup = seen.clone();
        dedup.dedup();
        assert_eq!(dedup.len(), seen.len());
    }
}

#[tokio::test]
async fn pagination_edges_and_errors() {
    let app = spawn_full().await;
    // Empty result.
    let d = app.data(r#"{ machines(filter: {namespace: "nope"}) { totalCount pageInfo { hasNextPage endCursor } edges { cursor } } }"#, json!({})).await;
    assert_eq!(d["machines"]["totalCount"], 0);
    assert_eq!(d["machines"]["pageInfo"]["hasNextPage"], false);
    assert!(d["machines"]["pageInfo"]["endCursor"].is_null());
    // `last` returns the final page.
    let d = app.data(r#"{ machineClasses(last: 2) { pageInfo { hasNextPage hasPreviousPage } edges { node { name } } } }"#, json!({})).await;
    assert_eq!(
        names(&d["machineClasses"]),
        vec!["small".to_string(), "xlarge".to_string()]
    );
    assert_eq!(d["machineClasses"]["pageInfo"]["hasNextPage"], false);
    assert_eq!(d["machineClasses"]["pageInfo"]["hasPreviousPage"], true);
    // Above the maximum page size: the limit and its value are in the message.
    let e = app
        .error("{ machines(first: 100000) { totalCount } }", json!({}))
        .await;
    assert_eq!(e["extensions"]["code"], "PAGE_SIZE_LIMIT");
    assert!(
        e["message"].as_str().expect("m").contains("100000")
            && e["message"].as_str().expect("m").contains("500"),
        "{e}"
    );
    let e = app
        .error("{ machines(first: -1) { totalCount } }", json!({}))
        .await;
    assert_eq!(e["extensions"]["code"], "BAD_PAGE_SIZE");
    // A cursor that is not ours, and one made for another sort order.
    let e = app
        .error(r#"{ machines(after: "bm9wZQ") { totalCount } }"#, json!({}))
        .await;
    assert_eq!(e["extensions"]["code"], "BAD_CURSOR");
    assert!(e["message"].as_str().expect("m").contains("after"), "{e}");
    let d = app
        .data(
            r#"{ machines(first: 1, sort: {field: CREATED}) { pageInfo { endCursor } } }"#,
            json!({}),
        )
        .await;
    let cursor = d["machines"]["pageInfo"]["endCursor"].clone();
    let e = app
        .error(
            "query($c: String) { machines(after: $c) { totalCount } }",
            json!({"c": cursor}),
        )
        .await;
    assert!(
        e["message"]
            .as_str()
            .expect("m")
            .contains("sorting by created"),
        "{e}"
    );
}

#[tokio::test]
async fn sorting_by_phase_and_namespace() {
    let app = spawn_full().await;
    let d = app
        .data(
            r#"{ clusters(first: 500, sort: {field: PHASE, direction: ASC}) { nodes { phase } } }"#,
            json!({}),
        )
        .await;
    let phases: Vec<String> = d["clusters"]["nodes"]
        .as_array()
        .expect("n")
        .iter()
        .map(|c| c["phase"].as_str().unwrap_or("").to_string())
        .collect();
    let mut sorted = phases.clone();
    sorted.sort();
    assert_eq!(phases, sorted);
    let d = app.data(r#"{ networkNamespaces(first: 500, sort: {field: NAMESPACE, direction: DESC}) { nodes { namespace } } }"#, json!({})).await;
    let ns: Vec<String> = d["networkNamespaces"]["nodes"]
        .as_array()
        .expect("n")
        .iter()
        .map(|c| c["namespace"].as_str().unwrap_or("").to_string())
        .collect();
    let mut sorted = ns.clone();
    sorted.sort();
    sorted.reverse();
    assert_eq!(ns, sorted);
}

#[tokio::test]
async fn global_ids_round_trip_and_bad_ids_are_refused() {
    let app = spawn_full().await;
    let d = app.data("{ machines(first: 2) { nodes { id name } } machineClasses(first: 1) { nodes { id name } } }", json!({})).await;
    let ids: Vec<Value> = d["machines"]["nodes"]
        .as_array()
        .expect("m")
        .iter()
        .chain(d["machineClasses"]["nodes"].as_array().expect("c"))
        .map(|n| n["id"].clone())
        .collect();
    let r = app
        .data(
            "query($ids: [ID!]!) { nodes(ids: $ids) { id name kind } }",
            json!({"ids": ids}),
        )
        .await;
    let got = r["nodes"].as_array().expect("nodes");
    assert_eq!(got.len(), 3);
    assert_eq!(got[0]["name"], d["machines"]["nodes"][0]["name"]);
    assert_eq!(got[0]["kind"], "Machine");
    assert_eq!(got[2]["kind"], "MachineClass");
    let one = app
        .data(
            "query($id: ID!) { node(id: $id) { ... on Machine { name provider } } }",
            json!({"id": ids[0]}),
        )
        .await;
    assert_eq!(one["node"]["name"], d["machines"]["nodes"][0]["name"]);
    let e = app
        .error(r#"{ node(id: "not-an-id!") { id } }"#, json!({}))
        .await;
    assert_eq!(e["extensions"]["code"], "BAD_ID");
}

#[tokio::test]
async fn credentials_never_leave_the_server() {
    let dir = std::env::temp_dir().join(format!("vitistack-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("pxc.yaml"),
        "apiVersion: vitistack.io/v1alpha1\nkind: ProxmoxConfig\nmetadata:\n  name: pve\n  annotations:\n    kubectl.kubernetes.io/last-applied-configuration: '{\"spec\":{\"token\":\"tok-s3cr3t\"}}'\nspec:\n  name: pve\n  endpoint: https://pve.example\n  port: \"8006\"\n  username: root@pam\n  token: tok-s3cr3t\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: kv}\nstringData: {kubeconfig: kube-s3cr3t}\n",
    )
    .expect("write");
    let app = spawn(&[dir.to_str().expect("path")]).await;
    let body = app
        .query(
            "{ proxmoxConfigs { nodes { hasToken endpoint raw annotations { value } } } }",
            json!({}),
        )
        .await;
    let text = body.to_string();
    assert!(!text.contains("s3cr3t"), "{text}");
    assert_eq!(body["data"]["proxmoxConfigs"]["nodes"][0]["hasToken"], true);
    assert_eq!(
        body["data"]["proxmoxConfigs"]["nodes"][0]["endpoint"],
        "https://pve.example"
    );
    let metrics = app
        .client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .expect("m")
        .text()
        .await
        .expect("t");
    assert!(!metrics.contains("s3cr3t"));
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn summaries_count_what_the_lists_hold() {
    let app = spawn_full().await;
    let d = app
        .data(
            "{ infrastructure { machines { total running failed byPhase { value count } vcpus memoryBytes }
                networks { namespaces readyNamespaces failedNamespaces configurations allocatedIps vips readyVips }
                storage { machineDiskGb clusterStorages storageClasses etcdBackups } clusters { total ready } }
               clusterSummary { total ready failed inProgress byStage { value count } }
               machines { totalCount } clusters { totalCount } networkConfigurations { totalCount } }",
            json!({}),
        )
        .await;
    let i = &d["infrastructure"];
    assert_eq!(i["machines"]["total"], d["machines"]["totalCount"]);
    let by_phase: i64 = i["machines"]["byPhase"]
        .as_array()
        .expect("p")
        .iter()
        .map(|c| c["count"].as_i64().expect("c"))
        .sum();
    assert_eq!(by_phase, i["machines"]["total"].as_i64().expect("t"));
    assert!(
        i["machines"]["vcpus"].as_i64().expect("v") > 0
            && i["machines"]["memoryBytes"].as_i64().expect("m") > 0
    );
    assert_eq!(
        i["networks"]["configurations"],
        d["networkConfigurations"]["totalCount"]
    );
    assert!(i["networks"]["failedNamespaces"].as_i64().expect("f") >= 1);
    let s = &d["clusterSummary"];
    assert_eq!(s["total"], d["clusters"]["totalCount"]);
    assert_eq!(
        s["ready"].as_i64().expect("r")
            + s["failed"].as_i64().expect("f")
            + s["inProgress"].as_i64().expect("p"),
        s["total"].as_i64().expect("t")
    );
    let stages: i64 = s["byStage"]
        .as_array()
        .expect("s")
        .iter()
        .map(|c| c["count"].as_i64().expect("c"))
        .sum();
    assert_eq!(stages, s["total"].as_i64().expect("t"));
}

#[tokio::test]
async fn health_ready_metrics_and_graphiql() {
    let app = spawn_full().await;
    let get = |p: &str| app.client.get(format!("{}{p}", app.base)).send();
    let h = get("/health").await.expect("h");
    assert_eq!(h.status(), 200);
    let h = h.json::<Value>().await.expect("j");
    // Serving current data: healthy, or degraded when an operator is not (upstream fixtures
    // carry objects no operator has acted on).
    assert!(
        matches!(h["status"].as_str(), Some("healthy" | "degraded")),
        "{h}"
    );
    assert_eq!(h["checks"]["database"], "healthy", "{h}");
    let r = get("/ready").await.expect("r");
    assert_eq!(r.status(), 200);
    app.data("{ sequence }", json!({})).await;
    let m = get("/metrics").await.expect("m").text().await.expect("t");
    assert!(
        m.contains("vitistack_store_objects{kind=\"Machine\"}"),
        "{m}"
    );
    assert!(
        m.contains("vitistack_graphql_requests_total{outcome=\"ok\"}"),
        "{m}"
    );
    let g = get("/graphql").await.expect("g").text().await.expect("t");
    assert!(g.to_lowercase().contains("graphiql"));
}

#[test]
fn committed_schema_matches_the_code() {
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../schema.graphql"))
            .expect("schema.graphql");
    assert!(
        committed == vitistack::graphql::sdl(),
        "schema.graphql is out of date: run `cargo run -p vitistack-server -- schema > schema.graphql`"
    );
}

#[tokio::test]
async fn the_remaining_relationships_resolve_both_ways() {
    let dir = std::env::temp_dir().join(format!("vitistack-ipa-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    // An IPAllocation (v1alpha2) for the kea fixture's NetworkConfiguration on the v1alpha2 static namespace.
    std::fs::write(
        dir.join("ipa.yaml"),
        "apiVersion: vitistack.io/v1alpha2\nkind: IPAllocation\nmetadata:\n  name: test-networkconfiguration-testeth1\n  namespace: default\nspec:\n  networkNamespaceName: test-static-networknamespace\n  networkConfigurationName: test-networkconfiguration\n  interfaceName: testeth1\nstatus:\n  phase: Allocated\n  address: 10.0.1.10\n  gateway: 10.0.1.1\n  prefix: 24\n",
    )
    .expect("write");
    let upstream = super::fixtures().join("upstream");
    let app = spawn(&[
        "--demo",
        upstream.to_str().expect("path"),
        dir.to_str().expect("path"),
    ])
    .await;
    let d = app
        .data(
            r#"{ ipAllocations { nodes { address networkConfiguration { name ipAllocations { name } } networkNamespace { name ipAllocations { name } } } }
                 machineClass(name: "medium") { machines(first: 1) { totalCount nodes { machineClassName } } clusters { name } }
                 kubevirtConfigs(filter: {search: "kubevirt-provider"}) { nodes { kubeconfigSecretName machines(first: 1) { totalCount } machineProvider { name kubevirtConfig { name } } } }
                 machineProviders(filter: {search: "kubevirt-provider"}) { nodes { kubernetesProviders { name machineProvider { name } } } }
                 etcdBackups(first: 1) { nodes { cluster { name etcdBackups { name } } } }
                 clusterStorages(first: 1) { nodes { name cluster { name clusterStorages { name } } storageClass { name clusterStorages { name } } } }
                 clusters(first: 1, filter: {phase: ["Ready"]}) { nodes { networkNamespace { name
                     networkConfigurations(first: 100) { totalCount nodes { networkNamespace { name } } } machines(first: 1) { totalCount } } } }
                 networkConfigurations(first: 1, filter: {search: "ctp0"}) { nodes { name cluster { name } machine { name } } } }"#,
            json!({}),
        )
        .await;
    let ipa = &d["ipAllocations"]["nodes"][0];
    assert_eq!(ipa["address"], "10.0.1.10");
    assert_eq!(
        ipa["networkConfiguration"]["ipAllocations"][0]["name"],
        "test-networkconfiguration-testeth1"
    );
    assert_eq!(
        ipa["networkNamespace"]["name"],
        "test-static-networknamespace"
    );
    assert_eq!(
        ipa["networkNamespace"]["ipAllocations"][0]["name"],
        "test-networkconfiguration-testeth1"
    );
    let mc = &d["machineClass"];
    assert!(mc["machines"]["totalCount"].as_i64().expect("n") > 0);
    assert_eq!(mc["machines"]["nodes"][0]["machineClassName"], "medium");
    assert!(!mc["clusters"].as_array().expect("c").is_empty());
    let kvc = &d["kubevirtConfigs"]["nodes"][0];
    assert_eq!(kvc["kubeconfigSecretName"], "kubevirt-provider");
    assert!(kvc["machines"]["totalCount"].as_i64().expect("n") > 0);
    assert_eq!(
        kvc["machineProvider"]["kubevirtConfig"]["name"],
        "kubevirt-provider"
    );
    let kp = &d["machineProviders"]["nodes"][0]["kubernetesProviders"][0];
    assert_eq!(kp["machineProvider"]["name"], "kubevirt-provider");
    let eb = &d["etcdBackups"]["nodes"][0]["cluster"];
    assert!(!eb["etcdBackups"].as_array().expect("b").is_empty());
    let cs = &d["clusterStorages"]["nodes"][0];
    assert_eq!(cs["cluster"]["clusterStorages"][0]["name"], cs["name"]);
    assert_eq!(cs["storageClass"]["clusterStorages"][0]["name"], cs["name"]);
    let nn = &d["clusters"]["nodes"][0]["networkNamespace"];
    let ncs = nn["networkConfigurations"]["nodes"]
        .as_array()
        .expect("ncs");
    assert!(!ncs.is_empty());
    assert_eq!(
        ncs.len() as i64,
        nn["machines"]["totalCount"].as_i64().expect("m"),
        "one NC per machine on the namespace"
    );
    assert!(
        ncs.iter()
            .all(|nc| nc["networkNamespace"]["name"] == nn["name"])
    );
    let nc = &d["networkConfigurations"]["nodes"][0];
    assert_eq!(
        nc["machine"]["name"], nc["name"],
        "NC and Machine share the name"
    );
    assert!(
        nc["cluster"]["name"]
            .as_str()
            .expect("cluster")
            .starts_with("t-demo-")
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn get_queries_depth_and_body_limits() {
    let app = spawn(&["--demo"]).await;
    // GraphQL over HTTP GET.
    let r = app
        .client
        .get(format!("{}/graphql", app.base))
        .query(&[("query", "{ clusters(first: 1) { totalCount } }")])
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.expect("json");
    assert!(
        body["data"]["clusters"]["totalCount"].as_i64().expect("n") > 0,
        "{body}"
    );
    // Too deep: refused before execution, with the limit in the message.
    // 21 levels against the default MAX_QUERY_DEPTH of 16.
    let hop = "machines(first: 1) { nodes { cluster { ";
    let deep = format!("{{ {} name {} }}", hop.repeat(7), "} } }".repeat(7));
    let e = app.error(&deep, json!({})).await;
    assert_eq!(e["extensions"]["code"], "DEPTH_LIMIT", "{e}");
    assert!(
        e["message"]
            .as_str()
            .expect("m")
            .contains("limit of 16 levels"),
        "{e}"
    );
    // A body above the limit is refused with 413 and nothing is executed.
    let huge = "x".repeat(vitistack::http::MAX_BODY_BYTES + 1);
    let r = app
        .client
        .post(format!("{}/graphql", app.base))
        .header("content-type", "application/json")
        .body(format!(
            "{{\"query\": \"{{ sequence }}\", \"pad\": \"{huge}\"}}"
        ))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), 413);
}

#[tokio::test]
async fn demo_hosts_capacity_follows_the_overcommit_setting() {
    let q = "{ hostCapacity { hosts readyHosts usableHosts activeVms stoppedVms vcpusLimit memoryLimitBytes memoryUsedBytes cpuOvercommit hostsThatCanFail redundancyLimit }
               hosts { nodes { name readiness acceptsVms unschedulable pressures blockingTaints } } }";
    let app = spawn(&["--demo"]).await;
    let d = app.data(q, json!({})).await;
    let cap = &d["hostCapacity"];
    assert_eq!(cap["hosts"], 7);
    assert_eq!(cap["readyHosts"], 6, "kv-node-06 is Unknown");
    assert_eq!(
        cap["usableHosts"], 4,
        "tainted control plane, cordoned and Unknown hosts excluded"
    );
    // 4 hosts × 63.5 allocatable cores × 3.
    assert_eq!(cap["vcpusLimit"], 762.0);
    assert_eq!(
        cap["memoryLimitBytes"],
        4.0 * 256.0 * 1024.0 * 1024.0 * 1024.0
    );
    assert!(cap["activeVms"].as_i64().unwrap_or(0) > 10, "{cap}");
    assert!(cap["stoppedVms"].as_i64().unwrap_or(0) > 0, "{cap}");
    // The active VMs need more memory than one host has (256 GiB) and less than two: with the
    // three largest usable hosts gone they no longer fit, so two can fail.
    let used = cap["memoryUsedBytes"].as_f64().unwrap_or(0.0) / (1024.0 * 1024.0 * 1024.0);
    assert!(used > 256.0 && used < 512.0, "{used} GiB");
    assert_eq!(cap["hostsThatCanFail"], 2, "{cap}");
    assert!(
        cap["redundancyLimit"]
            .as_str()
            .unwrap_or_default()
            .starts_with("without kv-node-0"),
        "{cap}"
    );
    let hosts = d["hosts"]["nodes"].as_array().expect("hosts");
    let sick = hosts
        .iter()
        .find(|h| h["name"] == "kv-node-06")
        .expect("kv-node-06");
    assert_eq!(sick["readiness"], "UNKNOWN");
    assert_eq!(sick["pressures"], json!(["MemoryPressure"]));
    let cp = hosts
        .iter()
        .find(|h| h["name"] == "kv-cp-01")
        .expect("kv-cp-01");
    assert_eq!(cp["acceptsVms"], false);
    assert_eq!(
        cp["blockingTaints"],
        json!(["node-role.kubernetes.io/control-plane:NoSchedule"])
    );

    let app = spawn(&["--demo", "--cpu-overcommit", "4"]).await;
    let d = app.data(q, json!({})).await;
    assert_eq!(d["hostCapacity"]["vcpusLimit"], 1016.0);
    assert_eq!(d["hostCapacity"]["cpuOvercommit"], 4.0);
}

/// Quantities no real fleet has (an object from an API server is not held to the CRD's bounds):
/// sums and products saturate instead of overflowing, and the answer says the largest value.
#[tokio::test]
async fn resource_sums_saturate_on_huge_quantities() {
    use vitistack::model::{Kind, Resource};
    use vitistack::store::Op;
    let app = spawn(&[]).await;
    let huge = |name: &str| {
        Op::Mirror(
            Resource::from_value(
                Kind::Machine,
                "v1alpha1",
                json!({"metadata": {"name": name, "namespace": "huge"},
                    "spec": {"provider": "kubevirt", "memory": i64::MAX,
                        "cpu": {"cores": i64::MAX, "sockets": 4, "threadsPerCore": 2},
                        "disks": [{"name": "a", "sizeGB": i64::MAX}, {"name": "b", "sizeGB": 10}]}}),
            )
            .expect("machine"),
        )
    };
    let class = Op::Mirror(
        Resource::from_value(
            Kind::MachineClass,
            "v1alpha1",
            json!({"metadata": {"name": "exa"}, "spec": {"enabled": true, "default": false,
                "category": "Standard", "cpu": {"cores": 2}, "memory": {"quantity": "8Ei"},
                "machineProviders": [], "gpu": {"cores": 0}}}),
        )
        .expect("class"),
    );
    let by_class = Op::Mirror(
        Resource::from_value(
            Kind::Machine,
            "v1alpha1",
            json!({"metadata": {"name": "exa", "namespace": "huge"},
                "spec": {"provider": "kubevirt", "machineClass": "exa"}}),
        )
        .expect("machine"),
    );
    app.running()
        .store
        .apply(vec![huge("h1"), huge("h2"), class, by_class]);
    let d = app
        .data(
            "{ infrastructure { machines { vcpus memoryBytes } storage { machineDiskGb } }
               machines(filter: {namespace: \"huge\"}) { nodes { name resources { vcpus memoryBytes diskGb } } } }",
            json!({}),
        )
        .await;
    let max = json!(i64::MAX);
    assert_eq!(d["infrastructure"]["machines"]["vcpus"], max, "{d}");
    assert_eq!(d["infrastructure"]["machines"]["memoryBytes"], max, "{d}");
    assert_eq!(d["infrastructure"]["storage"]["machineDiskGb"], max, "{d}");
    let nodes = d["machines"]["nodes"].as_array().expect("nodes");
    let h1 = nodes.iter().find(|n| n["name"] == "h1").expect("h1");
    assert_eq!(h1["resources"]["vcpus"], max);
    assert_eq!(h1["resources"]["diskGb"], max);
    let exa = nodes.iter().find(|n| n["name"] == "exa").expect("exa");
    assert_eq!(
        exa["resources"]["memoryBytes"], max,
        "8Ei does not fit in i64"
    );
}

/// GraphQL's `Int` is 32-bit: every byte count is the 64-bit scalar `Long` (a 16 GiB class is
/// 17179869184, which graphql-js servers and gateways refuse as an `Int`), and no `Int` field of
/// the demo's machine classes and machines carries a value outside 32 bits.
#[tokio::test]
async fn byte_counts_are_long_and_every_int_fits_in_32_bits() {
    let app = super::spawn(&["--demo"]).await;
    let d = app
        .data(
            "{ __schema { types { name fields { name type { name kind ofType { name } } } } } }",
            json!({}),
        )
        .await;
    let mut byte_fields = 0;
    for t in d["__schema"]["types"].as_array().into_iter().flatten() {
        for f in t["fields"].as_array().into_iter().flatten() {
            let name = f["name"].as_str().unwrap_or_default();
            if name == "bytes" || name.ends_with("Bytes") {
                let ty = f["type"]["name"]
                    .as_str()
                    .or(f["type"]["ofType"]["name"].as_str());
                assert!(
                    matches!(ty, Some("Long" | "Float")),
                    "{}.{name} is {ty:?}, not a 64-bit type",
                    t["name"]
                );
                byte_fields += 1;
            }
        }
    }
    assert!(byte_fields >= 6, "{byte_fields}");
    let d = app
        .data(
            "{ machineClasses(first: 50) { nodes { name memory { bytes minBytes maxBytes } cpu { vcpus } } }
               machines(first: 200) { nodes { memoryBytes resources { vcpus memoryBytes diskGb } } }
               infrastructure { machines { total vcpus memoryBytes } storage { machineDiskGb } } }",
            json!({}),
        )
        .await;
    let big = d["machineClasses"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["memory"]["bytes"].as_i64())
        .max()
        .unwrap_or(0);
    assert!(
        big > i64::from(i32::MAX),
        "the demo has a class above 2 GiB: {big}"
    );
    // The Int fields asked for above stay within 32 bits on the demo.
    let ints = [
        d["infrastructure"]["machines"]["total"].as_i64(),
        d["infrastructure"]["machines"]["vcpus"].as_i64(),
        d["infrastructure"]["storage"]["machineDiskGb"].as_i64(),
    ];
    for v in ints {
        let v = v.expect("a number");
        assert!(i32::try_from(v).is_ok(), "{v} does not fit an Int");
    }
}

/// Every node of a root list, paged through with `after` (`selection` is asked of each).
async fn every(app: &super::TestApp, field: &str, selection: &str) -> Vec<Value> {
    pages(
        app,
        field,
        "first: 500",
        &format!("nodes {{ {selection} }}"),
    )
    .await
    .iter()
    .flat_map(|page| page["nodes"].as_array().expect("nodes").clone())
    .collect()
}

/// Every page of `field(args, after: …)` with `selection` asked of it, the list walked by its
/// `endCursor` until `hasNextPage` is false.
async fn pages(app: &super::TestApp, field: &str, args: &str, selection: &str) -> Vec<Value> {
    let q = format!(
        "query($after: String) {{ {field}({args}, after: $after) {{ pageInfo {{ hasNextPage endCursor }} {selection} }} }}"
    );
    let (mut out, mut after) = (Vec::new(), Value::Null);
    loop {
        let mut d = app.data(&q, json!({ "after": after })).await;
        let page = d[field].take();
        let more = page["pageInfo"]["hasNextPage"] == true;
        after = page["pageInfo"]["endCursor"].clone();
        out.push(page);
        if !more {
            return out;
        }
    }
}

/// Asks `field(args)` and checks it holds exactly the `expected` ids (its count and, paged by
/// three, its every page).
async fn holds_exactly(app: &super::TestApp, field: &str, args: &str, expected: &[&Value]) {
    let mut ids = Vec::new();
    for page in pages(
        app,
        field,
        &format!("{args}, first: 3"),
        "totalCount nodes { id }",
    )
    .await
    {
        assert_eq!(
            page["totalCount"].as_u64(),
            Some(expected.len() as u64),
            "{field}({args}): totalCount"
        );
        ids.extend(
            page["nodes"]
                .as_array()
                .expect("nodes")
                .iter()
                .map(|n| n["id"].clone()),
        );
    }
    let mut want: Vec<Value> = expected.iter().map(|n| n["id"].clone()).collect();
    want.sort_by_key(|v| v.to_string());
    ids.sort_by_key(|v| v.to_string());
    assert_eq!(ids, want, "{field}({args}): the objects");
}

#[tokio::test]
async fn each_list_filters_by_what_its_columns_show_before_paging() {
    let app = spawn_full().await;
    // Machines: role, node pool and cluster id, as their own fields say.
    let machines = every(&app, "machines", "id namespace role nodePool clusterId").await;
    let workers: Vec<&Value> = machines.iter().filter(|m| m["role"] == "WORKER").collect();
    let cps: Vec<&Value> = machines
        .iter()
        .filter(|m| m["role"] == "CONTROL_PLANE")
        .collect();
    assert!(
        !workers.is_empty() && !cps.is_empty(),
        "the demo has both roles"
    );
    holds_exactly(&app, "machines", "role: WORKER", &workers).await;
    holds_exactly(&app, "machines", "role: CONTROL_PLANE", &cps).await;
    let m = workers[0];
    let (cluster, ns) = (
        m["clusterId"].as_str().expect("a worker's cluster"),
        &m["namespace"],
    );
    let of_cluster: Vec<&Value> = machines
        .iter()
        .filter(|x| x["clusterId"] == cluster)
        .collect();
    assert!(of_cluster.len() > 1);
    holds_exactly(
        &app,
        "machines",
        &format!("clusterId: \"{cluster}\""),
        &of_cluster,
    )
    .await;
    let pool = workers
        .iter()
        .find_map(|w| w["nodePool"].as_str())
        .expect("a worker pool");
    let in_pool: Vec<&Value> = machines.iter().filter(|x| x["nodePool"] == pool).collect();
    holds_exactly(&app, "machines", &format!("nodePool: \"{pool}\""), &in_pool).await;
    // With the common filter beside them: both apply.
    let both: Vec<&Value> = workers
        .iter()
        .copied()
        .filter(|x| x["namespace"] == *ns)
        .collect();
    holds_exactly(
        &app,
        "machines",
        &format!("role: WORKER, filter: {{namespace: {ns}}}"),
        &both,
    )
    .await;
    holds_exactly(&app, "machines", "clusterId: \"no-such-cluster\"", &[]).await;

    // VirtualMachineInstances: host and cluster.
    let vmis = every(
        &app,
        "virtualMachineInstances",
        "id nodeName membership { clusterId }",
    )
    .await;
    let host = vmis
        .iter()
        .find_map(|v| v["nodeName"].as_str())
        .expect("a VMI on a host");
    let on_host: Vec<&Value> = vmis.iter().filter(|v| v["nodeName"] == host).collect();
    assert!(
        on_host.len() < vmis.len(),
        "the demo spreads VMs over hosts"
    );
    holds_exactly(
        &app,
        "virtualMachineInstances",
        &format!("host: \"{host}\""),
        &on_host,
    )
    .await;
    let cluster = vmis
        .iter()
        .find_map(|v| v["membership"]["clusterId"].as_str())
        .expect("a VMI of a cluster");
    let of_cluster: Vec<&Value> = vmis
        .iter()
        .filter(|v| v["membership"]["clusterId"] == cluster)
        .collect();
    holds_exactly(
        &app,
        "virtualMachineInstances",
        &format!("clusterId: \"{cluster}\""),
        &of_cluster,
    )
    .await;

    // Clusters: pipeline stage and health, as `pipeline` and `diagnosis` judge them.
    let clusters = every(
        &app,
        "clusters",
        "id pipeline { stage } diagnosis { ready degraded failed }",
    )
    .await;
    let d = |c: &Value, k: &str| c["diagnosis"][k] == true;
    let ready: Vec<&Value> = clusters
        .iter()
        .filter(|c| d(c, "ready") && !d(c, "degraded"))
        .collect();
    let attention: Vec<&Value> = clusters
        .iter()
        .filter(|c| !d(c, "ready") || d(c, "degraded"))
        .collect();
    let failed: Vec<&Value> = clusters.iter().filter(|c| d(c, "failed")).collect();
    assert!(
        !ready.is_empty() && !attention.is_empty() && !failed.is_empty(),
        "the demo has each"
    );
    holds_exactly(&app, "clusters", "health: READY", &ready).await;
    holds_exactly(&app, "clusters", "health: ATTENTION", &attention).await;
    holds_exactly(&app, "clusters", "health: FAILED", &failed).await;
    let stage = &attention[0]["pipeline"]["stage"];
    let at_stage: Vec<&Value> = clusters
        .iter()
        .filter(|c| c["pipeline"]["stage"] == *stage)
        .collect();
    let stage = stage.as_str().expect("a stage");
    holds_exactly(&app, "clusters", &format!("stage: {stage}"), &at_stage).await;
    let failed_at: Vec<&Value> = failed
        .iter()
        .copied()
        .filter(|c| c["pipeline"]["stage"] == stage)
        .collect();
    holds_exactly(
        &app,
        "clusters",
        &format!("stage: {stage}, health: FAILED"),
        &failed_at,
    )
    .await;
}

/// The labels an object's `labels { key value }` answer holds.
fn labels_of(object: &Value) -> Vec<(String, String)> {
    object["labels"]
        .as_array()
        .expect("labels")
        .iter()
        .map(|l| {
            let s = |f: &str| l[f].as_str().expect("a string").to_string();
            (s("key"), s("value"))
        })
        .collect()
}

/// Whether `object` holds label `key` (with `value`, when given).
fn holds_label(object: &Value, key: &str, value: Option<&str>) -> bool {
    labels_of(object)
        .iter()
        .any(|(k, v)| k == key && value.is_none_or(|value| v == value))
}

/// The objects of `objects` holding label `key` (with `value`, when given).
fn with_label<'a>(objects: &'a [Value], key: &str, value: Option<&str>) -> Vec<&'a Value> {
    objects
        .iter()
        .filter(|o| holds_label(o, key, value))
        .collect()
}

/// A label selector's `key=value` and `key` are read through the search indexes: each still
/// selects exactly the objects whose labels hold it (a value's other case, another kind holding
/// the same label, a requirement beside it, all left out).
#[tokio::test]
async fn a_label_selector_selects_exactly_the_objects_its_labels_match() {
    let app = spawn_full().await;
    let machines = every(&app, "machines", "id labels { key value }").await;
    let mut pairs: Vec<(String, String)> = machines.iter().flat_map(labels_of).collect();
    pairs.sort();
    pairs.dedup();
    // Every key, and up to five values of each (a cluster id's are many).
    let mut asked = 0;
    let mut keys: Vec<&String> = pairs.iter().map(|(k, _)| k).collect();
    keys.dedup();
    for key in keys {
        let holding = with_label(&machines, key, None);
        holds_exactly(
            &app,
            "machines",
            &format!("filter: {{labelSelector: \"{key}\"}}"),
            &holding,
        )
        .await;
        for (_, value) in pairs.iter().filter(|(k, _)| k == key).take(5) {
            let exact = with_label(&machines, key, Some(value));
            assert!(!exact.is_empty());
            holds_exactly(
                &app,
                "machines",
                &format!("filter: {{labelSelector: \"{key}={value}\"}}"),
                &exact,
            )
            .await;
            // The same value in capitals is another value (unless a Machine holds that too).
            let upper = value.to_uppercase();
            let shouting = with_label(&machines, key, Some(&upper));
            holds_exactly(
                &app,
                "machines",
                &format!("filter: {{labelSelector: \"{key}=={upper}\"}}"),
                &shouting,
            )
            .await;
            // Beside a requirement it does not decide alone.
            let not_worker: Vec<&Value> = exact
                .iter()
                .copied()
                .filter(|m| !holds_label(m, "vitistack.io/node-role", Some("worker")))
                .collect();
            holds_exactly(
                &app,
                "machines",
                &format!(
                    "filter: {{labelSelector: \"vitistack.io/node-role!=worker,{key}={value}\"}}"
                ),
                &not_worker,
            )
            .await;
            asked += 1;
        }
    }
    assert!(asked >= 6, "{asked} label values asked");
    // Another kind holding the same label is not a Machine.
    assert!(
        !with_label(&machines, "vitistack.io/clusterid", None).is_empty(),
        "the demo labels Machines with their cluster"
    );
    let clusters = every(&app, "clusters", "id labels { key value }").await;
    let labelled_clusters = with_label(&clusters, "vitistack.io/clusterid", None);
    holds_exactly(
        &app,
        "clusters",
        "filter: {labelSelector: \"vitistack.io/clusterid\"}",
        &labelled_clusters,
    )
    .await;
}
