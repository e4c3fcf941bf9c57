//! `search`: every field it finds by, checked against the lists' answers; filters, ranking,
//! paging, refusals, a change seen at once, and a caller limited to namespaces.

use serde_json::{Value, json};

use super::auth::{ADMIN, KeysFile, three_keys};
use super::{fixtures, spawn};

const TENANT: &str = "tenant-key-search-0123456789abcdef";

const SEARCH: &str = r#"query($t: String!, $f: SearchFilter, $first: Int, $after: String) {
    search(text: $t, filter: $f, first: $first, after: $after) {
        totalCount pageInfo { hasNextPage hasPreviousPage endCursor }
        edges { cursor node { rank field value node { id kind name namespace } } } } }"#;

async fn post(app: &super::TestApp, key: &str, query: &str, variables: Value) -> Value {
    super::auth::post_vars(app, Some(key), query, variables)
        .await
        .2
}

async fn search(app: &super::TestApp, key: &str, text: &str, filter: Value) -> Value {
    let v = post(
        app,
        key,
        SEARCH,
        json!({"t": text, "f": filter, "first": 500}),
    )
    .await;
    assert!(v.get("errors").is_none(), "search `{text}`: {v}");
    v["data"]["search"].clone()
}

/// The hits of one page, in order.
fn edges(found: &Value) -> Vec<Value> {
    found["edges"]
        .as_array()
        .map(|es| es.iter().map(|e| e["node"].clone()).collect())
        .unwrap_or_default()
}

/// (kind, namespace, name) of every hit.
fn ids(found: &Value) -> Vec<(String, String, String)> {
    let mut out: Vec<_> = edges(found)
        .iter()
        .map(|e| {
            let n = &e["node"];
            let s = |k: &str| n[k].as_str().unwrap_or_default().to_string();
            (s("kind"), s("namespace"), s("name"))
        })
        .collect();
    out.sort();
    out
}

fn code(v: &Value) -> String {
    v["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_finds_by_every_field_ranks_pages_follows_changes_and_stays_in_scope() {
    let keys = KeysFile::new(&format!(
        "{}tenant viewer {TENANT} namespaces=team-1\n",
        three_keys()
    ));
    let upstream = fixtures().join("upstream");
    let app = spawn(&[
        "--api-keys-file",
        keys.path(),
        "--demo",
        upstream.to_str().expect("utf-8 path"),
    ])
    .await;
    let d = post(
        &app,
        ADMIN,
        r#"{ machines(first: 100, filter: {phase: ["Running"]}) { nodes { name namespace clusterId
                ipAddresses raw } } }"#,
        json!({}),
    )
    .await;
    let m = d["data"]["machines"]["nodes"]
        .as_array()
        .expect("machines")
        .iter()
        .find(|m| m["namespace"] != "team-1")
        .expect("a running Machine outside team-1")
        .clone();
    let s = |k: &str| m[k].as_str().expect(k).to_string();
    let (name, ns, cluster_id) = (s("name"), s("namespace"), s("clusterId"));
    let ip = m["ipAddresses"][0]
        .as_str()
        .expect("an address")
        .to_string();
    let mac = m["raw"]["status"]["networkInterfaces"][0]["macAddress"]
        .as_str()
        .expect("a MAC")
        .to_string();
    let me = ("Machine".to_string(), ns.clone(), name.clone());

    // The name: the Machine itself first, ranked as the exact name.
    let found = search(&app, ADMIN, &name, json!(null)).await;
    let first = &edges(&found)[0];
    assert_eq!(
        (
            &first["node"]["name"],
            &first["node"]["kind"],
            &first["rank"],
            &first["field"]
        ),
        (
            &json!(name),
            &json!("Machine"),
            &json!("EXACT_NAME"),
            &json!("NAME")
        ),
        "{found}"
    );
    // Upper case and namespace/name find it too.
    assert!(ids(&search(&app, ADMIN, &name.to_uppercase(), json!(null)).await).contains(&me));
    assert!(ids(&search(&app, ADMIN, &format!("{ns}/{name}"), json!(null)).await).contains(&me));

    // Its address and MAC: found through that field.
    for (text, field) in [(&ip, "IP_ADDRESS"), (&mac, "MAC_ADDRESS")] {
        let found = search(&app, ADMIN, text, json!({"kinds": ["Machine"]})).await;
        assert_eq!(ids(&found), vec![me.clone()], "{text}: {found}");
        assert_eq!(edges(&found)[0]["field"], field, "{found}");
        assert_eq!(edges(&found)[0]["value"], text.as_str(), "{found}");
    }

    // A host: exactly the VMIs the list shows placed on it.
    let vmis = post(
        &app,
        ADMIN,
        "{ virtualMachineInstances(first: 500) { nodes { kind namespace name raw } } }",
        json!({}),
    )
    .await;
    let vmis = vmis["data"]["virtualMachineInstances"]["nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let host = vmis[0]["raw"]["status"]["nodeName"]
        .as_str()
        .expect("a VMI placed on a host")
        .to_string();
    let mut on_host: Vec<_> = vmis
        .iter()
        .filter(|v| v["raw"]["status"]["nodeName"] == host.as_str())
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            (s("kind"), s("namespace"), s("name"))
        })
        .collect();
    on_host.sort();
    let found = search(
        &app,
        ADMIN,
        &host,
        json!({"kinds": ["VirtualMachineInstance"]}),
    )
    .await;
    assert_eq!(ids(&found), on_host, "{found}");
    assert!(
        edges(&found).iter().all(|e| e["field"] == "HOST"),
        "{found}"
    );

    // The cluster id: the cluster and exactly the Machines its page lists.
    let listed = post(
        &app,
        ADMIN,
        r#"query($ns: String!) { clusters(filter: {namespace: $ns}) { nodes { name clusterId
            machines(first: 500) { nodes { name namespace } } } } }"#,
        json!({"ns": ns}),
    )
    .await;
    let cluster = listed["data"]["clusters"]["nodes"]
        .as_array()
        .expect("clusters")
        .iter()
        .find(|c| c["clusterId"] == cluster_id.as_str())
        .expect("the Machine's cluster")
        .clone();
    let mut machines: Vec<_> = cluster["machines"]["nodes"]
        .as_array()
        .expect("machines")
        .iter()
        .map(|n| {
            (
                "Machine".to_string(),
                n["namespace"].as_str().unwrap_or_default().to_string(),
                n["name"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    machines.sort();
    let by_id = search(&app, ADMIN, &cluster_id, json!({"kinds": ["machine"]})).await;
    assert_eq!(ids(&by_id), machines, "{by_id}");
    let clusters = search(
        &app,
        ADMIN,
        &cluster_id,
        json!({"kinds": ["KubernetesCluster"]}),
    )
    .await;
    assert_eq!(
        ids(&clusters),
        vec![(
            "KubernetesCluster".to_string(),
            ns.clone(),
            cluster["name"].as_str().expect("name").to_string()
        )]
    );
    // A label as key=value finds what the label selector lists.
    let label = format!("vitistack.io/clusterid={cluster_id}");
    let selected = post(
        &app,
        ADMIN,
        r#"query($s: String!) { machines(first: 500, filter: {labelSelector: $s}) { totalCount } }"#,
        json!({"s": label}),
    )
    .await;
    let labelled = search(&app, ADMIN, &label, json!({"kinds": ["Machine"]})).await;
    assert_eq!(
        labelled["totalCount"], selected["data"]["machines"]["totalCount"],
        "{labelled}"
    );
    assert!(edges(&labelled).iter().all(|e| e["field"] == "LABEL"));

    // The namespace, filtered to one kind: what the list of that kind in that namespace holds.
    let in_ns = search(
        &app,
        ADMIN,
        &ns,
        json!({"kinds": ["Machine"], "namespace": ns}),
    )
    .await;
    let list = post(
        &app,
        ADMIN,
        r#"query($ns: String!) { machines(filter: {namespace: $ns}) { totalCount } }"#,
        json!({"ns": ns}),
    )
    .await;
    assert_eq!(in_ns["totalCount"], list["data"]["machines"]["totalCount"]);

    // Paging: small pages walk the same hits as one big page, in the same order, no repeats.
    let all = search(&app, ADMIN, &ns, json!(null)).await;
    let whole: Vec<Value> = edges(&all)
        .iter()
        .map(|e| e["node"]["id"].clone())
        .collect();
    assert!(whole.len() > 10, "{all}");
    let mut walked = Vec::new();
    let mut after = Value::Null;
    loop {
        let v = post(
            &app,
            ADMIN,
            SEARCH,
            json!({"t": ns, "first": 7, "after": after}),
        )
        .await;
        let page = &v["data"]["search"];
        assert_eq!(page["totalCount"], all["totalCount"], "{v}");
        assert_eq!(
            page["pageInfo"]["hasPreviousPage"],
            !walked.is_empty(),
            "{v}"
        );
        walked.extend(edges(page).iter().map(|e| e["node"]["id"].clone()));
        if page["pageInfo"]["hasNextPage"] != true {
            break;
        }
        after = page["pageInfo"]["endCursor"].clone();
    }
    assert_eq!(walked, whole);

    // Refusals name the limit or the reason.
    for (vars, wanted, says) in [
        (
            json!({"t": "x", "f": {"kinds": ["Pod"]}}),
            "BAD_KIND",
            "Pod",
        ),
        (json!({"t": "x".repeat(513)}), "BAD_REQUEST", "512"),
        (json!({"t": "a b c d e f g h i"}), "BAD_REQUEST", "8"),
        (json!({"t": "x", "first": 501}), "PAGE_SIZE_LIMIT", "500"),
        (
            json!({"t": "x", "after": "bm90IGEgY3Vyc29y"}),
            "BAD_CURSOR",
            "after",
        ),
    ] {
        let v = post(&app, ADMIN, SEARCH, vars.clone()).await;
        assert_eq!(code(&v), wanted, "{vars}: {v}");
        assert!(
            v["errors"][0]["message"]
                .as_str()
                .unwrap_or_default()
                .contains(says),
            "{v}"
        );
    }
    assert_eq!(
        search(&app, ADMIN, "  ", json!(null)).await["totalCount"],
        0
    );

    // A change is found by the next search.
    let manifest = format!(
        "apiVersion: vitistack.io/v1alpha1\nkind: Machine\nmetadata:\n  name: search-probe-7\n  namespace: {ns}\nspec:\n  provider: kubevirt\nstatus:\n  ipAddresses: [\"10.251.7.7\"]\n"
    );
    let v = post(
        &app,
        ADMIN,
        "mutation($f: [ManifestFileInput!]!) { importManifests(files: $f) { changed } }",
        json!({"f": [{"name": "probe.yaml", "content": manifest}]}),
    )
    .await;
    assert_eq!(v["data"]["importManifests"]["changed"], 1, "{v}");
    let probe = (
        "Machine".to_string(),
        ns.clone(),
        "search-probe-7".to_string(),
    );
    assert_eq!(
        ids(&search(&app, ADMIN, "10.251.7.7", json!(null)).await),
        vec![probe.clone()]
    );
    assert!(ids(&search(&app, ADMIN, "probe", json!(null)).await).contains(&probe));

    // A caller limited to team-1 finds only team-1's objects: not the Machine of team-2.
    assert!(ids(&search(&app, TENANT, &ip, json!(null)).await).is_empty());
    assert!(ids(&search(&app, TENANT, &name, json!(null)).await).is_empty());
    let own = search(&app, TENANT, "team-1", json!(null)).await;
    assert!(!edges(&own).is_empty());
    assert!(
        edges(&own)
            .iter()
            .all(|e| e["node"]["namespace"] == "team-1"),
        "{own}"
    );
    app.stop().await;
}
