//! The mutations on the kube source: server-side applies (field manager `vitistack-graphql`) and
//! deletes sent to the Kubernetes API test server, answered once the watch has brought them back,
//! refused for roles RBAC does not grant, and recorded with the caller; and the test server's
//! own apply semantics (ownership, removal of fields no longer applied, conflicts).

use serde_json::{Value, json};

use super::kube_api::KubeApi;
use super::{Harness, PATIENCE};

pub(crate) fn cluster(name: &str, finalizer: bool) -> Value {
    let mut meta =
        json!({"name": name, "namespace": "t", "labels": {"vitistack.io/clusterid": name}});
    if finalizer {
        meta["finalizers"] = json!(["kubernetescluster.vitistack.io/finalizer"]);
    }
    json!({"metadata": meta,
        "spec": {"data": {"clusterUid": "00000000-0000-4000-8000-00000000000a", "clusterId": name,
                          "provider": "talos", "datacenter": "test-south-az1", "region": "south",
                          "zone": "az1", "project": "p", "workspace": "w", "workorder": "wo-1",
                          "environment": "dev", "networkNamespaceName": "net"},
                 "topology": {"version": "1.33.1",
                              "controlplane": {"replicas": 1, "version": "1.33.1", "machineClass": "small",
                                               "provider": "kubevirt", "metadata": {"labels": {}, "annotations": {}},
                                               "storage": []},
                              "workers": {"nodePools": [{"name": "w", "replicas": 1, "machineClass": "small",
                                                         "provider": "kubevirt", "version": "1.33.1",
                                                         "autoscaling": {"enabled": false, "minReplicas": 1, "maxReplicas": 1, "scalingRules": []},
                                                         "metadata": {"labels": {}, "annotations": {}},
                                                         "storage": [], "taint": []}]}}},
        "status": {"phase": "Ready"}})
}

fn setup(api: &KubeApi) {
    api.apply(
        "machineclasses",
        json!({"metadata": {"name": "small"},
               "spec": {"displayName": "Small", "enabled": true, "category": "standard",
                        "machineProviders": ["kubevirt"], "cpu": {"cores": 2}, "memory": {"quantity": "4Gi"}}}),
    );
    for host in ["host-1", "host-2"] {
        api.apply(
            "nodes",
            json!({"metadata": {"name": host},
                   "status": {"allocatable": {"cpu": "64", "memory": "256Gi"},
                              "capacity": {"cpu": "64", "memory": "256Gi"},
                              "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
    }
    api.apply("kubernetesclusters", cluster("alpha", true));
    api.add_user("view-token", "vera", &[("get", "kubernetesclusters")]);
    api.add_user(
        "op-token",
        "otto",
        &[
            ("get", "kubernetesclusters"),
            ("patch", "kubernetesclusters"),
            ("create", "kubernetesclusters"),
            ("delete", "kubernetesclusters"),
        ],
    );
    api.add_user("admin-token", "ada", &[("create", "vitistacks")]);
}

pub(crate) async fn ask(h: &Harness, token: &str, query: &str, variables: Value) -> Value {
    h.client
        .post(format!("{}/graphql", h.base))
        .bearer_auth(token)
        .json(&json!({"query": query, "variables": variables}))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json")
}

fn managers(o: &Value) -> Vec<(String, String)> {
    o["metadata"]["managedFields"]
        .as_array()
        .map(|fs| {
            fs.iter()
                .map(|f| {
                    (
                        f["manager"].as_str().unwrap_or_default().to_string(),
                        f["operation"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

const FIELDS: &str =
    "changed cluster { name annotations { key value } nodePools { name replicas } }";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutations_are_server_side_applies_answered_once_the_watch_shows_them() {
    let mut defs = super::kube_api::watched_resources();
    defs.push(super::kube_api::events());
    let api = KubeApi::start(&defs, std::time::Duration::from_millis(200)).await;
    setup(&api);
    let mut h = Harness::unstarted(api);
    h.launch(&["--auth-kubernetes"]).await;
    h.ready().await;
    let vars = json!({"ns": "t", "n": "alpha"});
    let pause = format!(
        "mutation($ns: String!, $n: String!) {{ pauseClusterReconciliation(namespace: $ns, name: $n) {{ {FIELDS} }} }}"
    );

    // A viewer is refused, and nothing reaches the API server.
    let before = h
        .api
        .object("kubernetesclusters", "t", "alpha")
        .expect("alpha");
    let v = ask(&h, "view-token", &pause, vars.clone()).await;
    assert_eq!(v["errors"][0]["extensions"]["code"], "FORBIDDEN", "{v}");
    assert_eq!(
        h.api.object("kubernetesclusters", "t", "alpha"),
        Some(before)
    );

    // Pause: an apply by vitistack-graphql; the answer already shows it.
    let v = ask(&h, "op-token", &pause, vars.clone()).await;
    assert_eq!(
        v["data"]["pauseClusterReconciliation"]["changed"], true,
        "{v}"
    );
    assert!(
        v["data"]["pauseClusterReconciliation"]["cluster"]["annotations"]
            .as_array()
            .is_some_and(|a| a
                .iter()
                .any(|kv| kv["key"] == "upgrade.vitistack.io/do-not-reconcile")),
        "{v}"
    );
    let o = h
        .api
        .object("kubernetesclusters", "t", "alpha")
        .expect("alpha");
    assert_eq!(
        o["metadata"]["annotations"]["upgrade.vitistack.io/do-not-reconcile"],
        "true"
    );
    assert!(
        managers(&o).contains(&("vitistack-graphql".into(), "Apply".into())),
        "{:?}",
        managers(&o)
    );
    // The status the operator wrote is untouched.
    assert_eq!(o["status"]["phase"], "Ready");

    // Scale a pool: the list is applied whole, the generation moves, the answer shows it.
    let generation = o["metadata"]["generation"].as_i64().unwrap_or(0);
    let v = ask(
        &h,
        "op-token",
        &format!("mutation($ns: String!, $n: String!) {{ scaleNodePool(namespace: $ns, name: $n, pool: \"w\", replicas: 3) {{ {FIELDS} plan {{ capacity {{ verdict }} machines {{ name exists }} }} }} }}"),
        vars.clone(),
    )
    .await;
    let r = &v["data"]["scaleNodePool"];
    assert_eq!(r["cluster"]["nodePools"][0]["replicas"], 3, "{v}");
    assert_eq!(r["plan"]["capacity"]["verdict"], "FITS", "{v}");
    let o = h
        .api
        .object("kubernetesclusters", "t", "alpha")
        .expect("alpha");
    assert_eq!(
        o["spec"]["topology"]["workers"]["nodePools"][0]["replicas"],
        3
    );
    assert_eq!(o["metadata"]["generation"].as_i64(), Some(generation + 1));

    // Each change left a Kubernetes Event on the cluster (`kubectl describe` shows them): what,
    // why and by whom; the viewer's refused attempt left none.
    let uid = o["metadata"]["uid"].as_str().expect("uid").to_string();
    let deadline = std::time::Instant::now() + super::PATIENCE;
    let events = loop {
        let events = h.api.objects("events");
        if events.len() >= 2 || std::time::Instant::now() > deadline {
            break events;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let reasons: Vec<&str> = events.iter().filter_map(|e| e["reason"].as_str()).collect();
    assert_eq!(events.len(), 2, "{reasons:?}");
    for (reason, note) in [
        ("ReconciliationPaused", "reconciliation paused"),
        ("Scaled", "scaled: pool w 3"),
    ] {
        let e = events
            .iter()
            .find(|e| e["reason"] == reason)
            .unwrap_or_else(|| panic!("no {reason} Event: {reasons:?}"));
        assert_eq!(e["regarding"]["kind"], "KubernetesCluster", "{e}");
        assert_eq!(e["regarding"]["name"], "alpha");
        assert_eq!(e["regarding"]["namespace"], "t");
        assert_eq!(e["regarding"]["uid"], uid.as_str());
        assert_eq!(e["metadata"]["namespace"], "t");
        assert_eq!(e["type"], "Normal");
        assert_eq!(e["reportingController"], "vitistack.io/vitistack-graphql");
        let text = e["note"].as_str().unwrap_or_default();
        assert!(
            text.contains(note) && text.contains("(by kubernetes:"),
            "{text}"
        );
    }

    // The control plane to 3, previewed first (nothing written), then applied.
    let before = h
        .api
        .object("kubernetesclusters", "t", "alpha")
        .expect("alpha");
    let v = ask(
        &h,
        "op-token",
        "mutation($ns: String!, $n: String!) { scaleCluster(namespace: $ns, name: $n, controlPlaneReplicas: 3, dryRun: true) { changed plan { machines { name exists } } } }",
        vars.clone(),
    )
    .await;
    assert_eq!(v["data"]["scaleCluster"]["changed"], false, "{v}");
    let planned: Vec<&str> = v["data"]["scaleCluster"]["plan"]["machines"]
        .as_array()
        .map(|ms| ms.iter().filter_map(|m| m["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        planned.starts_with(&["alpha-ctp0", "alpha-ctp1", "alpha-ctp2"]),
        "{v}"
    );
    assert_eq!(
        h.api.object("kubernetesclusters", "t", "alpha"),
        Some(before)
    );
    let v = ask(
        &h,
        "op-token",
        &format!("mutation($ns: String!, $n: String!) {{ scaleControlPlane(namespace: $ns, name: $n, replicas: 3) {{ {FIELDS} }} }}"),
        vars.clone(),
    )
    .await;
    assert_eq!(v["data"]["scaleControlPlane"]["changed"], true, "{v}");
    let o = h
        .api
        .object("kubernetesclusters", "t", "alpha")
        .expect("alpha");
    assert_eq!(o["spec"]["topology"]["controlplane"]["replicas"], 3);
    // An even control plane is refused by field before anything is sent.
    let v = ask(
        &h,
        "op-token",
        "mutation($ns: String!, $n: String!) { scaleControlPlane(namespace: $ns, name: $n, replicas: 2) { changed } }",
        vars.clone(),
    )
    .await;
    assert_eq!(v["errors"][0]["extensions"]["code"], "INVALID", "{v}");
    assert_eq!(
        h.api.object("kubernetesclusters", "t", "alpha"),
        Some(o.clone())
    );
    // A plan for a new cluster reads the cluster's graph (its hosts, classes).
    let v = ask(
        &h,
        "op-token",
        "mutation { clusterPlan(input: {namespace: \"t\", name: \"gamma\", networkNamespaceName: \"net\", datacenter: \"d\", region: \"r\", zone: \"z\", project: \"p\", workspace: \"w\", workorder: \"o\", environment: \"dev\", version: \"1.33.1\", controlPlane: {replicas: 1, machineClass: \"small\"}}) { valid capacity { verdict hosts } } }",
        json!({}),
    )
    .await;
    assert_eq!(v["data"]["clusterPlan"]["valid"], true, "{v}");
    assert_eq!(v["data"]["clusterPlan"]["capacity"]["hosts"], 2, "{v}");
    assert!(h.api.object("kubernetesclusters", "t", "gamma").is_none());

    // Upgrade targets.
    let v = ask(
        &h,
        "op-token",
        &format!("mutation($ns: String!, $n: String!) {{ requestUpgrade(namespace: $ns, name: $n, kubernetesVersion: \"v1.34.1\") {{ {FIELDS} }} }}"),
        vars.clone(),
    )
    .await;
    assert!(v.get("errors").is_none(), "{v}");
    let o = h
        .api
        .object("kubernetesclusters", "t", "alpha")
        .expect("alpha");
    assert_eq!(
        o["metadata"]["annotations"]["upgrade.vitistack.io/kubernetes-target"],
        "v1.34.1"
    );
    // Each apply restates what the manager applied before: the earlier sizes and the pause are
    // still there (an apply without them would have removed them).
    assert_eq!(
        o["spec"]["topology"]["workers"]["nodePools"][0]["replicas"], 3,
        "{o}"
    );
    assert_eq!(o["spec"]["topology"]["controlplane"]["replicas"], 3, "{o}");
    assert_eq!(
        o["metadata"]["annotations"]["upgrade.vitistack.io/do-not-reconcile"], "true",
        "{o}"
    );

    // Resume removes the pause even when someone else set it (here: kubectl).
    let mut edited = o.clone();
    edited["metadata"]["annotations"]["upgrade.vitistack.io/do-not-reconcile"] = json!("by-hand");
    h.api.apply("kubernetesclusters", edited);
    h.until("the hand-made pause", |s| {
        s.snapshot()
            .get(
                &Default::default(),
                vitistack::model::Kind::KubernetesCluster,
                "t",
                "alpha",
            )
            .is_some_and(|c| {
                c.annotation("upgrade.vitistack.io/do-not-reconcile") == Some("by-hand")
            })
    })
    .await;
    let v = ask(
        &h,
        "op-token",
        &format!("mutation($ns: String!, $n: String!) {{ resumeClusterReconciliation(namespace: $ns, name: $n) {{ {FIELDS} }} }}"),
        vars.clone(),
    )
    .await;
    assert_eq!(
        v["data"]["resumeClusterReconciliation"]["changed"], true,
        "{v}"
    );
    let o = h
        .api
        .object("kubernetesclusters", "t", "alpha")
        .expect("alpha");
    assert!(
        o["metadata"]["annotations"]
            .get("upgrade.vitistack.io/do-not-reconcile")
            .is_none(),
        "{o}"
    );

    // Create: applied with its full spec, in the graph when the answer comes.
    let input = json!({"namespace": "t", "name": "beta", "networkNamespaceName": "net",
        "datacenter": "test-south-az1", "region": "south", "zone": "az1", "project": "p",
        "workspace": "w", "workorder": "wo-2", "environment": "dev", "version": "1.33.1",
        "controlPlane": {"replicas": 3, "machineClass": "small"},
        "nodePools": [{"name": "w", "replicas": 2, "machineClass": "small"}]});
    let v = ask(
        &h,
        "op-token",
        &format!(
            "mutation($i: ClusterInput!) {{ createKubernetesCluster(input: $i) {{ {FIELDS} }} }}"
        ),
        json!({"i": input}),
    )
    .await;
    assert_eq!(
        v["data"]["createKubernetesCluster"]["cluster"]["name"], "beta",
        "{v}"
    );
    let o = h
        .api
        .object("kubernetesclusters", "t", "beta")
        .expect("beta was created");
    assert_eq!(o["spec"]["topology"]["controlplane"]["replicas"], 3);
    assert_eq!(
        managers(&o),
        [("vitistack-graphql".to_string(), "Apply".to_string())]
    );

    // Delete: with a finalizer the cluster stays, marked; without one it is gone.
    let delete = "mutation($ns: String!, $n: String!) { deleteKubernetesCluster(namespace: $ns, name: $n, confirm: $n) { changed cluster { name } } }";
    let v = ask(&h, "op-token", delete, vars.clone()).await;
    assert_eq!(v["data"]["deleteKubernetesCluster"]["changed"], true, "{v}");
    let o = h
        .api
        .object("kubernetesclusters", "t", "alpha")
        .expect("alpha waits for its finalizer");
    assert!(o["metadata"]["deletionTimestamp"].is_string(), "{o}");
    let v = ask(&h, "op-token", delete, json!({"ns": "t", "n": "beta"})).await;
    assert_eq!(v["data"]["deleteKubernetesCluster"]["changed"], true, "{v}");
    assert!(h.api.object("kubernetesclusters", "t", "beta").is_none());
    let v = ask(
        &h,
        "view-token",
        "{ cluster(namespace: \"t\", name: \"beta\") { name } }",
        json!({}),
    )
    .await;
    assert!(v["data"]["cluster"].is_null(), "{v}");

    // Import writes the embedded source only.
    let v = ask(
        &h,
        "admin-token",
        "mutation { importManifests(files: [{name: \"a.yaml\", content: \"\"}]) { changed } }",
        json!({}),
    )
    .await;
    assert_eq!(v["errors"][0]["extensions"]["code"], "READ_ONLY", "{v}");

    // The event log names the caller for the changes it asked for.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let v = ask(
            &h,
            "view-token",
            "{ events(filter: {kind: \"KubernetesCluster\", name: \"alpha\"}, first: 50) { nodes { actor } } }",
            json!({}),
        )
        .await;
        let actors: Vec<String> = v["data"]["events"]["nodes"]
            .as_array()
            .map(|ns| {
                ns.iter()
                    .filter_map(|n| n["actor"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        // pause, scale pool, scale control plane, upgrade, resume, delete; the hand-made edit
        // has no actor.
        // A Kubernetes user is recorded with how it came (its groups: none but
        // system:authenticated, which everyone has).
        if actors
            .iter()
            .filter(|a| *a == "kubernetes:otto (kubernetes-token)")
            .count()
            == 6
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{v}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn apply_raw(api: &KubeApi, manager: &str, force: bool, body: Value) -> (u16, Value) {
    let url = format!(
        "{}/apis/vitistack.io/v1alpha1/namespaces/t/kubernetesclusters/{}?fieldManager={manager}{}",
        api.url(),
        body["metadata"]["name"].as_str().unwrap_or_default(),
        if force { "&force=true" } else { "" }
    );
    let res = reqwest::Client::new()
        .patch(url)
        .header("Content-Type", "application/apply-patch+yaml")
        .body(body.to_string())
        .send()
        .await
        .expect("patch");
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_test_server_applies_as_kube_apiserver_does() {
    let api = KubeApi::start(
        &super::kube_api::watched_resources(),
        std::time::Duration::from_millis(200),
    )
    .await;
    let obj = |annotations: Value| {
        json!({"apiVersion": "vitistack.io/v1alpha1", "kind": "KubernetesCluster",
               "metadata": {"name": "x", "namespace": "t", "annotations": annotations}})
    };
    // Created by the first apply; its fields are the manager's.
    let (code, o) = apply_raw(&api, "a", false, obj(json!({"one": "1", "two": "2"}))).await;
    assert_eq!(code, 201, "{o}");
    assert_eq!(
        o["metadata"]["managedFields"][0]["fieldsV1"]["f:metadata"]["f:annotations"]["f:two"],
        json!({})
    );
    // A field the manager no longer applies is removed.
    let (code, o) = apply_raw(&api, "a", false, obj(json!({"one": "1"}))).await;
    assert_eq!(code, 200);
    assert!(o["metadata"]["annotations"].get("two").is_none(), "{o}");
    // Another manager setting the same field to another value conflicts, unless forced.
    let (code, o) = apply_raw(&api, "b", false, obj(json!({"one": "other"}))).await;
    assert_eq!(code, 409, "{o}");
    assert_eq!(
        o["details"]["causes"][0]["field"],
        "metadata.annotations.one"
    );
    assert_eq!(
        api.object("kubernetesclusters", "t", "x").expect("x")["metadata"]["annotations"]["one"],
        "1"
    );
    let (code, _) = apply_raw(&api, "b", true, obj(json!({"one": "other"}))).await;
    assert_eq!(code, 200);
    // Ownership moved: a's next apply without the field leaves b's value alone.
    let (_, o) = apply_raw(&api, "a", false, obj(json!({"three": "3"}))).await;
    assert_eq!(
        o["metadata"]["annotations"],
        json!({"one": "other", "three": "3"})
    );
}
