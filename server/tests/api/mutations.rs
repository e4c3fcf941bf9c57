//! The mutations on the embedded source, as a client meets them: every role × operation on HTTP,
//! WebSocket and SSE; field-level refusals that change nothing; the write read back in the answer
//! and in the next query; the event log naming who asked; manifest import all or nothing per file.

use serde_json::{Value, json};

use super::auth::{ADMIN, KeysFile, OPERATOR, VIEWER, init, open, post, three_keys};
use super::protocol::SseReader;
use super::{TestApp, eventually, recv, send_json, spawn};

#[derive(Clone, Copy, Debug)]
enum Transport {
    Http,
    Ws,
    Sse,
}

/// Run one operation over `t` with `key`; the GraphQL response.
async fn run(app: &TestApp, t: Transport, key: &str, query: &str, variables: Value) -> Value {
    match t {
        Transport::Http => {
            let res = app
                .client
                .post(format!("{}/graphql", app.base))
                .bearer_auth(key)
                .json(&json!({"query": query, "variables": variables}))
                .send()
                .await
                .expect("post");
            res.json().await.expect("json")
        }
        Transport::Sse => {
            let res = app
                .client
                .post(format!("{}/graphql/stream", app.base))
                .bearer_auth(key)
                .json(&json!({"query": query, "variables": variables}))
                .send()
                .await
                .expect("sse");
            assert_eq!(res.status().as_u16(), 200);
            let (event, v) = SseReader::new(res).next().await;
            assert_eq!(event, "next", "{v}");
            v
        }
        Transport::Ws => {
            let mut ws = open(app, None, None).await.expect("upgrade");
            let ack = init(&mut ws, json!({"Authorization": format!("Bearer {key}")})).await;
            assert_eq!(ack["type"], "connection_ack", "{ack}");
            send_json(
                &mut ws,
                json!({"id": "1", "type": "subscribe", "payload": {"query": query, "variables": variables}}),
            )
            .await;
            let v = recv(&mut ws).await;
            assert_eq!(v["type"], "next", "{v}");
            v["payload"].clone()
        }
    }
}

const CLUSTER_FIELDS: &str = "cluster { namespace name annotations { key value } } changed";

fn cluster_input(ns: &str, nn: &str, name: &str, replicas: i64) -> Value {
    json!({"namespace": ns, "name": name, "networkNamespaceName": nn, "datacenter": "test-south-az1", "region": "south",
           "zone": "az1", "project": "p", "workspace": "w", "workorder": "wo-9", "environment": "dev",
           "version": "1.33.1",
           "controlPlane": {"replicas": replicas, "machineClass": "small"},
           "nodePools": [{"name": "pool", "replicas": 1, "machineClass": "small"}]})
}

/// A demo cluster with a worker pool: (namespace, name, pool, replicas, its NetworkNamespace).
async fn some_cluster(app: &TestApp) -> (String, String, String, i64, String) {
    let v = post(
        app,
        Some(ADMIN),
        "{ clusters(first: 50) { nodes { namespace name raw nodePools { name replicas } } } }",
    )
    .await
    .2;
    let c = v["data"]["clusters"]["nodes"]
        .as_array()
        .and_then(|cs| {
            cs.iter()
                .find(|c| c["nodePools"].as_array().is_some_and(|p| !p.is_empty()))
        })
        .cloned()
        .unwrap_or_else(|| panic!("no cluster with a pool: {v}"));
    let s = |v: &Value| v.as_str().expect("string").to_string();
    (
        s(&c["namespace"]),
        s(&c["name"]),
        s(&c["nodePools"][0]["name"]),
        c["nodePools"][0]["replicas"].as_i64().expect("replicas"),
        s(&c["raw"]["spec"]["data"]["networkNamespaceName"]),
    )
}

/// The role each operation needs, its document and variables (fresh names per call).
fn operations(
    (ns, nn): (&str, &str),
    name: &str,
    pool: &str,
    replicas: i64,
    n: usize,
) -> Vec<(&'static str, &'static str, String, Value)> {
    let created = format!("made-{n}");
    vec![
        ("operator", "clusterPlan",
         "mutation($i: ClusterInput!) { clusterPlan(input: $i) { valid machines { name } capacity { verdict } } }".into(),
         json!({"i": cluster_input(ns, nn, &created, 1)})),
        ("operator", "pauseClusterReconciliation",
         format!("mutation($ns: String!, $n: String!) {{ pauseClusterReconciliation(namespace: $ns, name: $n) {{ {CLUSTER_FIELDS} }} }}"),
         json!({"ns": ns, "n": name})),
        ("operator", "resumeClusterReconciliation",
         format!("mutation($ns: String!, $n: String!) {{ resumeClusterReconciliation(namespace: $ns, name: $n) {{ {CLUSTER_FIELDS} }} }}"),
         json!({"ns": ns, "n": name})),
        ("operator", "requestUpgrade",
         format!("mutation($ns: String!, $n: String!, $v: String) {{ requestUpgrade(namespace: $ns, name: $n, talosVersion: $v) {{ {CLUSTER_FIELDS} }} }}"),
         json!({"ns": ns, "n": name, "v": format!("v1.11.{n}")})),
        ("operator", "scaleNodePool",
         format!("mutation($ns: String!, $n: String!, $p: String!, $r: Int!) {{ scaleNodePool(namespace: $ns, name: $n, pool: $p, replicas: $r, allowOverCapacity: true) {{ {CLUSTER_FIELDS} }} }}"),
         json!({"ns": ns, "n": name, "p": pool, "r": replicas + 1 + (n % 2) as i64})),
        ("operator", "scaleControlPlane",
         format!("mutation($ns: String!, $n: String!, $r: Int!) {{ scaleControlPlane(namespace: $ns, name: $n, replicas: $r, allowOverCapacity: true) {{ {CLUSTER_FIELDS} }} }}"),
         json!({"ns": ns, "n": name, "r": if n.is_multiple_of(2) { 3 } else { 1 }})),
        ("operator", "createKubernetesCluster",
         format!("mutation($i: ClusterInput!) {{ createKubernetesCluster(input: $i, allowOverCapacity: true) {{ {CLUSTER_FIELDS} }} }}"),
         json!({"i": cluster_input(ns, nn, &created, 1)})),
        ("operator", "deleteKubernetesCluster",
         format!("mutation($ns: String!, $n: String!) {{ deleteKubernetesCluster(namespace: $ns, name: $n, confirm: $n) {{ {CLUSTER_FIELDS} }} }}"),
         json!({"ns": ns, "n": created})),
        ("admin", "importManifests",
         "mutation($f: [ManifestFileInput!]!) { importManifests(files: $f) { changed files { accepted } } }".into(),
         json!({"f": [{"name": format!("class-{n}.yaml"), "content": format!(
             "apiVersion: vitistack.io/v1alpha1\nkind: MachineClass\nmetadata:\n  name: imported-{n}\nspec:\n  displayName: x\n  enabled: true\n  category: standard\n  machineProviders: [kubevirt]\n  cpu:\n    cores: 1\n  memory:\n    quantity: 1Gi\n")}]})),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_and_mutation_on_http_websocket_and_sse() {
    let keys = KeysFile::new(&three_keys());
    let app = spawn(&["--api-keys-file", keys.path(), "--demo"]).await;
    let (ns, name, pool, replicas, nn) = some_cluster(&app).await;
    let rank = |r: &str| match r {
        "viewer" => 0,
        "operator" => 1,
        _ => 2,
    };
    let mut n = 0;
    for t in [Transport::Http, Transport::Ws, Transport::Sse] {
        for (role, key) in [("viewer", VIEWER), ("operator", OPERATOR), ("admin", ADMIN)] {
            n += 1;
            for (needs, op, query, vars) in operations((&ns, &nn), &name, &pool, replicas, n) {
                let before =
                    post(&app, Some(ADMIN), "{ sequence }").await.2["data"]["sequence"].clone();
                let v = run(&app, t, key, &query, vars).await;
                if rank(role) >= rank(needs) {
                    assert!(v.get("errors").is_none(), "{t:?} {role} {op}: {v}");
                    assert!(v["data"][op].is_object(), "{t:?} {role} {op}: {v}");
                } else {
                    assert_eq!(
                        v["errors"][0]["extensions"]["code"], "FORBIDDEN",
                        "{t:?} {role} {op}: {v}"
                    );
                    let message = v["errors"][0]["message"].as_str().unwrap_or_default();
                    assert!(
                        message.contains(&format!("needs the {needs} role"))
                            && message.contains(role),
                        "{t:?} {role} {op}: {message}"
                    );
                    assert!(v["data"].is_null(), "{t:?} {role} {op}: {v}");
                    // Nothing was written.
                    let after =
                        post(&app, Some(ADMIN), "{ sequence }").await.2["data"]["sequence"].clone();
                    assert_eq!(before, after, "{t:?} {role} {op} changed the graph");
                }
            }
        }
    }
    // A mutation cannot run over GET.
    let url = format!(
        "{}/graphql?query={}",
        app.base,
        urlencode(
            "mutation { pauseClusterReconciliation(namespace: \"a\", name: \"b\") { changed } }"
        )
    );
    let res = app
        .client
        .get(&url)
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("get");
    assert_eq!(res.status().as_u16(), 405);
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn fields(v: &Value) -> Vec<(String, String)> {
    v["errors"][0]["extensions"]["fields"]
        .as_array()
        .map(|fs| {
            fs.iter()
                .map(|f| {
                    (
                        f["path"].as_str().unwrap_or_default().to_string(),
                        f["reason"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_name_the_field_and_the_reason_and_change_nothing() {
    let keys = KeysFile::new(&three_keys());
    let app = spawn(&["--api-keys-file", keys.path(), "--demo"]).await;
    let (ns, name, pool, _, nn) = some_cluster(&app).await;
    let sequence =
        || async { post(&app, Some(VIEWER), "{ sequence }").await.2["data"]["sequence"].clone() };
    let before = sequence().await;
    let create = "mutation($i: ClusterInput!) { createKubernetesCluster(input: $i) { changed } }";

    // An even control plane: the CRD's CEL rule, with the field path.
    let v = post_vars(
        &app,
        create,
        json!({"i": cluster_input(&ns, &nn, "even", 2)}),
    )
    .await;
    assert_eq!(v["errors"][0]["extensions"]["code"], "INVALID", "{v}");
    assert!(
        fields(&v)
            .iter()
            .any(|(p, r)| p.starts_with("spec.topology.controlplane") && r.contains("odd")),
        "{v}"
    );
    // A name that is not a DNS name, a missing class, a bad pool name: each by field.
    let mut bad = cluster_input(&ns, &nn, "Not_A_Name", 1);
    bad["controlPlane"]["machineClass"] = json!("no-such-class");
    bad["nodePools"][0]["name"] = json!("Bad Pool");
    let v = post_vars(&app, create, json!({"i": bad})).await;
    let paths: Vec<String> = fields(&v).into_iter().map(|(p, _)| p).collect();
    for want in [
        "metadata.name",
        "spec.topology.controlplane.machineClass",
        "nodePools[0].name",
    ] {
        assert!(
            paths.iter().any(|p| p == want),
            "{want} not in {paths:?}: {v}"
        );
    }
    // An existing cluster.
    let mut again = cluster_input(&ns, &nn, &name, 1);
    again["controlPlane"]["machineClass"] = json!("small");
    let v = post_vars(&app, create, json!({"i": again})).await;
    assert_eq!(
        v["errors"][0]["extensions"]["code"], "ALREADY_EXISTS",
        "{v}"
    );
    // Deleting without repeating the name.
    let v = post_vars(
        &app,
        "mutation($ns: String!, $n: String!) { deleteKubernetesCluster(namespace: $ns, name: $n, confirm: \"yes\") { changed } }",
        json!({"ns": ns, "n": name}),
    )
    .await;
    assert_eq!(fields(&v)[0].0, "confirm", "{v}");
    assert!(fields(&v)[0].1.contains(&name), "{v}");
    // A pool the cluster does not have; negative replicas; an even control plane by scaling.
    let v = post_vars(
        &app,
        "mutation($ns: String!, $n: String!) { scaleNodePool(namespace: $ns, name: $n, pool: \"nope\", replicas: 2) { changed } }",
        json!({"ns": ns, "n": name}),
    )
    .await;
    assert_eq!(fields(&v)[0].0, "pool", "{v}");
    assert!(
        fields(&v)[0].1.contains(&pool),
        "the pools it has are listed: {v}"
    );
    let v = post_vars(
        &app,
        "mutation($ns: String!, $n: String!) { scaleControlPlane(namespace: $ns, name: $n, replicas: 4) { changed } }",
        json!({"ns": ns, "n": name}),
    )
    .await;
    assert!(
        fields(&v)
            .iter()
            .any(|(p, r)| p == "spec.topology.controlplane.replicas" && r.contains("odd")),
        "{v}"
    );
    // A version talos-operator would not read; no version at all.
    let v = post_vars(
        &app,
        "mutation($ns: String!, $n: String!) { requestUpgrade(namespace: $ns, name: $n, kubernetesVersion: \"latest\") { changed } }",
        json!({"ns": ns, "n": name}),
    )
    .await;
    assert_eq!(fields(&v)[0].0, "kubernetesVersion", "{v}");
    let v = post_vars(
        &app,
        "mutation($ns: String!, $n: String!) { requestUpgrade(namespace: $ns, name: $n) { changed } }",
        json!({"ns": ns, "n": name}),
    )
    .await;
    assert_eq!(v["errors"][0]["extensions"]["code"], "INVALID", "{v}");
    // A cluster that does not exist.
    let v = post_vars(
        &app,
        "mutation { pauseClusterReconciliation(namespace: \"nowhere\", name: \"nothing\") { changed } }",
        json!({}),
    )
    .await;
    assert_eq!(v["errors"][0]["extensions"]["code"], "NOT_FOUND", "{v}");
    assert_eq!(sequence().await, before, "a refusal changed the graph");
}

/// POST as the admin.
async fn post_vars(app: &TestApp, query: &str, variables: Value) -> Value {
    app.client
        .post(format!("{}/graphql", app.base))
        .bearer_auth(ADMIN)
        .json(&json!({"query": query, "variables": variables}))
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_and_the_next_query_show_the_write_and_the_event_log_names_the_caller() {
    let keys = KeysFile::new(&three_keys());
    let app = spawn(&["--api-keys-file", keys.path(), "--demo"]).await;
    let (ns, name, pool, replicas, nn) = some_cluster(&app).await;
    let q = |m: &str| {
        format!(
            "mutation($ns: String!, $n: String!) {{ {m} {{ changed cluster {{ annotations {{ key value }} nodePools {{ name replicas }} machines {{ totalCount }} }} }} }}"
        )
    };
    let annotations = |v: &Value, m: &str| v["data"][m]["cluster"]["annotations"].clone();
    let has = |a: &Value, k: &str, val: &str| {
        a.as_array()
            .is_some_and(|a| a.iter().any(|kv| kv["key"] == k && kv["value"] == val))
    };
    let vars = json!({"ns": ns, "n": name});
    let v = as_operator(
        &app,
        q("pauseClusterReconciliation(namespace: $ns, name: $n)"),
        vars.clone(),
    )
    .await;
    assert_eq!(
        v["data"]["pauseClusterReconciliation"]["changed"], true,
        "{v}"
    );
    assert!(
        has(
            &annotations(&v, "pauseClusterReconciliation"),
            "upgrade.vitistack.io/do-not-reconcile",
            "true"
        ),
        "{v}"
    );
    // Pausing again changes nothing and says so.
    let v = as_operator(
        &app,
        q("pauseClusterReconciliation(namespace: $ns, name: $n)"),
        vars.clone(),
    )
    .await;
    assert_eq!(
        v["data"]["pauseClusterReconciliation"]["changed"], false,
        "{v}"
    );
    // The next query reads it (any caller).
    let read = post(
        &app,
        Some(VIEWER),
        &format!(
            "{{ cluster(namespace: \"{ns}\", name: \"{name}\") {{ annotations {{ key value }} }} }}"
        ),
    )
    .await
    .2;
    assert!(
        has(
            &read["data"]["cluster"]["annotations"],
            "upgrade.vitistack.io/do-not-reconcile",
            "true"
        ),
        "{read}"
    );
    let v = as_operator(
        &app,
        q("resumeClusterReconciliation(namespace: $ns, name: $n)"),
        vars.clone(),
    )
    .await;
    assert!(
        !annotations(&v, "resumeClusterReconciliation")
            .as_array()
            .is_some_and(|a| a
                .iter()
                .any(|kv| kv["key"] == "upgrade.vitistack.io/do-not-reconcile")),
        "{v}"
    );
    let v = as_operator(
        &app,
        q("requestUpgrade(namespace: $ns, name: $n, talosVersion: \"v1.11.5\", kubernetesVersion: \"1.34.0\")"),
        vars.clone(),
    )
    .await;
    let a = annotations(&v, "requestUpgrade");
    assert!(
        has(&a, "upgrade.vitistack.io/talos-target", "v1.11.5"),
        "{v}"
    );
    assert!(
        has(&a, "upgrade.vitistack.io/kubernetes-target", "1.34.0"),
        "{v}"
    );
    let v = as_operator(
        &app,
        q(&format!("scaleNodePool(namespace: $ns, name: $n, pool: \"{pool}\", replicas: {}, allowOverCapacity: true)", replicas + 2)),
        vars.clone(),
    )
    .await;
    let pools = &v["data"]["scaleNodePool"]["cluster"]["nodePools"];
    assert!(
        pools.as_array().is_some_and(|ps| ps
            .iter()
            .any(|p| p["name"] == pool.as_str() && p["replicas"] == replicas + 2)),
        "{v}"
    );

    // The event log names the operator's key for each change it made, and nobody for the rest.
    let events = format!(
        "{{ events(filter: {{kind: \"KubernetesCluster\", namespace: \"{ns}\", name: \"{name}\"}}, first: 20) {{ nodes {{ actor change diff }} }} }}"
    );
    eventually("four attributed cluster events", || async {
        let v = post(&app, Some(VIEWER), &events).await.2;
        let nodes = v["data"]["events"]["nodes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        nodes.iter().filter(|e| e["actor"] == "key:ops").count() == 4
    })
    .await;
    // And by caller: the same four, nobody else's.
    let by_actor = post(
        &app,
        Some(VIEWER),
        "{ events(filter: {actor: \"key:ops\"}, first: 50) { nodes { actor name } } }",
    )
    .await
    .2;
    let nodes = by_actor["data"]["events"]["nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(nodes.len(), 4, "{by_actor}");
    assert!(
        nodes
            .iter()
            .all(|e| e["actor"] == "key:ops" && e["name"] == name.as_str()),
        "{by_actor}"
    );

    // Creating: the cluster is in the answer and in the graph at once, with its planned pools.
    let v = as_operator(
        &app,
        "mutation($i: ClusterInput!) { createKubernetesCluster(input: $i, allowOverCapacity: true) { changed plan { machines { name } } cluster { name nodePools { name replicas } } } }".into(),
        json!({"i": cluster_input(&ns, &nn, "fresh", 3)}),
    )
    .await;
    assert_eq!(
        v["data"]["createKubernetesCluster"]["cluster"]["name"], "fresh",
        "{v}"
    );
    let machines: Vec<&str> = v["data"]["createKubernetesCluster"]["plan"]["machines"]
        .as_array()
        .map(|ms| ms.iter().filter_map(|m| m["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        machines,
        ["fresh-ctp0", "fresh-ctp1", "fresh-ctp2", "fresh-wrk0"],
        "{v}"
    );
    let read = post(
        &app,
        Some(VIEWER),
        &format!("{{ cluster(namespace: \"{ns}\", name: \"fresh\") {{ name }} }}"),
    )
    .await
    .2;
    assert_eq!(read["data"]["cluster"]["name"], "fresh", "{read}");
    let v = as_operator(
        &app,
        "mutation($ns: String!) { deleteKubernetesCluster(namespace: $ns, name: \"fresh\", confirm: \"fresh\") { changed } }".into(),
        json!({"ns": ns}),
    )
    .await;
    assert_eq!(v["data"]["deleteKubernetesCluster"]["changed"], true, "{v}");
    let read = post(
        &app,
        Some(VIEWER),
        &format!("{{ cluster(namespace: \"{ns}\", name: \"fresh\") {{ name }} }}"),
    )
    .await
    .2;
    assert!(read["data"]["cluster"].is_null(), "{read}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_is_all_or_nothing_per_file_and_names_each_refusal() {
    let keys = KeysFile::new(&three_keys());
    let app = spawn(&["--api-keys-file", keys.path(), "--demo"]).await;
    let good = "apiVersion: vitistack.io/v1alpha1\nkind: MachineClass\nmetadata:\n  name: gift\nspec:\n  displayName: Gift\n  enabled: true\n  category: standard\n  machineProviders: [kubevirt]\n  cpu:\n    cores: 2\n  memory:\n    quantity: 2Gi\n";
    // The second document is refused: the whole file is, its first document included.
    let bad = "apiVersion: vitistack.io/v1alpha1\nkind: MachineClass\nmetadata:\n  name: half\nspec:\n  displayName: Half\n  enabled: true\n  category: standard\n  machineProviders: [kubevirt]\n  cpu:\n    cores: 2\n  memory:\n    quantity: 2Gi\n---\napiVersion: vitistack.io/v1alpha1\nkind: KubernetesCluster\nmetadata:\n  name: broken\n  namespace: x\nspec:\n  topology:\n    controlplane:\n      replicas: 2\n";
    let v = post_vars(
        &app,
        "mutation($f: [ManifestFileInput!]!) { importManifests(files: $f) { changed unchanged files { name accepted objects problems { document object path reason } notes } } }",
        json!({"f": [{"name": "good.yaml", "content": good}, {"name": "bad.yaml", "content": bad}]}),
    )
    .await;
    let r = &v["data"]["importManifests"];
    assert_eq!(r["changed"], 1, "{v}");
    assert_eq!(r["files"][0]["accepted"], true, "{v}");
    assert_eq!(r["files"][1]["accepted"], false, "{v}");
    let problems = r["files"][1]["problems"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        problems.iter().all(|p| p["document"] == 1) && !problems.is_empty(),
        "{v}"
    );
    assert!(
        problems.iter().any(|p| p["path"]
            .as_str()
            .is_some_and(|p| p.starts_with("spec.data"))),
        "{v}"
    );
    let read = post(
        &app,
        Some(VIEWER),
        "{ machineClasses(first: 100) { nodes { name } } }",
    )
    .await
    .2;
    let names: Vec<&str> = read["data"]["machineClasses"]["nodes"]
        .as_array()
        .map(|ns| ns.iter().filter_map(|n| n["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(names.contains(&"gift"), "{names:?}");
    assert!(
        !names.contains(&"half"),
        "half a file was applied: {names:?}"
    );
}

/// POST as the operator.
async fn as_operator(app: &TestApp, query: String, variables: Value) -> Value {
    app.client
        .post(format!("{}/graphql", app.base))
        .bearer_auth(OPERATOR)
        .json(&json!({"query": query, "variables": variables}))
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_mutations_off_every_change_is_refused_as_read_only() {
    let keys = KeysFile::new(&three_keys());
    let app = spawn(&[
        "--api-keys-file",
        keys.path(),
        "--demo",
        "--mutations",
        "false",
    ])
    .await;
    let (ns, name, _, _, _) = some_cluster(&app).await;
    let v = post_vars(
        &app,
        "mutation($ns: String!, $n: String!) { pauseClusterReconciliation(namespace: $ns, name: $n) { changed } }",
        json!({"ns": ns, "n": name}),
    )
    .await;
    assert_eq!(v["errors"][0]["extensions"]["code"], "READ_ONLY", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_concurrent_requests_of_different_callers_each_get_their_own_me() {
    // The response cache runs identical concurrent queries once; an answer that depends on the
    // caller must never be shared.
    let keys = KeysFile::new(&three_keys());
    let app = spawn(&["--api-keys-file", keys.path()]).await;
    let asks = (0..60).map(|i| {
        let (key, name) = if i % 2 == 0 {
            (VIEWER, "key:ci")
        } else {
            (OPERATOR, "key:ops")
        };
        let client = app.client.clone();
        let url = format!("{}/graphql", app.base);
        async move {
            let v: Value = client
                .post(url)
                .bearer_auth(key)
                .json(&json!({"query": "{ me { name } sequence }"}))
                .send()
                .await
                .expect("post")
                .json()
                .await
                .expect("json");
            (name, v)
        }
    });
    for (name, v) in futures::future::join_all(asks).await {
        assert_eq!(v["data"]["me"]["name"], name, "{v}");
    }
}
