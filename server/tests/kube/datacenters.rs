//! Several datacenters: one kube source per cluster, named by the kubeconfig files of
//! `DATACENTERS_DIR`, each with its own API test server.

use std::time::Duration;

use serde_json::{Value, json};
use vitistack_testkit::kube_api::{self, KubeApi};

use super::{Harness, PATIENCE, machine};
use crate::mutations::{ask, cluster};

/// The admin key of the test that writes through the API.
const ADMIN_KEY: &str = "admin-key-0123456789abcdef";

/// A kubeconfig for `api` whose current context reaches it (a file per datacenter names its
/// cluster by its own current context).
pub(crate) fn kubeconfig_for(api: &KubeApi, path: &std::path::Path) {
    api.write_kubeconfig(path);
    let text = std::fs::read_to_string(path).expect("kubeconfig");
    std::fs::write(
        path,
        text.replace("current-context: elsewhere", "current-context: test"),
    )
    .expect("write kubeconfig");
}

async fn api_with(setup: impl FnOnce(&KubeApi)) -> KubeApi {
    let api = KubeApi::start(&kube_api::watched_resources(), Duration::from_millis(200)).await;
    setup(&api);
    api
}

/// East holding Machine t/e0, west t/w0 and t/w1.
async fn east_and_west() -> (KubeApi, KubeApi) {
    let east = api_with(|api| {
        api.apply("machines", machine("t", "e0", "c"));
    })
    .await;
    let west = api_with(|api| {
        api.apply("machines", machine("t", "w0", "c"));
        api.apply("machines", machine("t", "w1", "c"));
    })
    .await;
    (east, west)
}

/// Our server watching `east` (the harness's own API server) and `others` through
/// `DATACENTERS_DIR`, one kubeconfig file each, with `extra` arguments.
pub(crate) async fn watching(
    east: KubeApi,
    others: &[(&str, &KubeApi)],
    extra: &[&str],
) -> Harness {
    let mut h = Harness::unstarted(east);
    let dir = h.dir.join("datacenters");
    std::fs::create_dir_all(&dir).expect("dir");
    kubeconfig_for(&h.api, &dir.join("east.yaml"));
    for (key, api) in others {
        kubeconfig_for(api, &dir.join(format!("{key}.yaml")));
    }
    let dir = dir.to_str().expect("utf-8").to_string();
    let mut args = vec!["--datacenters-dir", dir.as_str()];
    args.extend_from_slice(extra);
    h.launch(&args).await;
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_datacenters_holding_the_same_names_are_two_objects_and_a_bare_lookup_is_ambiguous() {
    // Both datacenters hold KubernetesCluster t/alpha (and their API servers give out the same
    // uids); only east has cluster t/beta.
    let east = api_with(|api| {
        api.apply("kubernetesclusters", cluster("alpha", false));
        api.apply("kubernetesclusters", cluster("beta", false));
        api.apply("machines", machine("t", "alpha-ctp0", "alpha"));
    })
    .await;
    let west = api_with(|api| {
        let mut alpha = cluster("alpha", false);
        alpha["status"]["phase"] = json!("Provisioning");
        api.apply("kubernetesclusters", alpha);
        api.apply("machines", machine("t", "alpha-ctp0", "alpha"));
        api.apply("machines", machine("t", "alpha-wrk0", "alpha"));
    })
    .await;
    let h = watching(east, &[("west", &west)], &[]).await;
    h.until("both datacenters listed", |s| {
        s.snapshot()
            .count(vitistack::model::Kind::KubernetesCluster)
            == 3
            && s.snapshot().count(vitistack::model::Kind::Machine) == 3
    })
    .await;

    // Two objects t/alpha, each with its datacenter and its own relationships.
    let data = h
        .data(
            "{ clusters(first: 10) { nodes { id name datacenter phase machines { totalCount } } } }",
        )
        .await;
    let nodes = data["clusters"]["nodes"].as_array().expect("nodes").clone();
    let row = |dc: &str, name: &str| {
        nodes
            .iter()
            .find(|n| n["datacenter"] == dc && n["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{dc}/{name} in {nodes:?}"))
    };
    let (east_alpha, west_alpha) = (row("east", "alpha"), row("west", "alpha"));
    assert_eq!(east_alpha["phase"], "Ready");
    assert_eq!(west_alpha["phase"], "Provisioning");
    assert_eq!(
        east_alpha["machines"]["totalCount"], 1,
        "east's own Machines"
    );
    assert_eq!(
        west_alpha["machines"]["totalCount"], 2,
        "west's own Machines"
    );
    assert_ne!(east_alpha["id"], west_alpha["id"]);
    // Each id reads back its own object.
    let by_id = h
        .data(&format!(
            r#"{{ node(id: "{}") {{ ... on KubernetesCluster {{ datacenter phase }} }} }}"#,
            west_alpha["id"].as_str().expect("id")
        ))
        .await;
    assert_eq!(
        by_id["node"],
        json!({"datacenter": "west", "phase": "Provisioning"})
    );

    // By name without a datacenter: ambiguous where both hold it, listing both.
    let body = h
        .answer(r#"{ cluster(namespace: "t", name: "alpha") { name } }"#)
        .await;
    let error = &body["errors"][0];
    assert_eq!(error["extensions"]["code"], "AMBIGUOUS", "{body}");
    assert_eq!(error["extensions"]["datacenters"], json!(["east", "west"]));
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("east") && m.contains("west")),
        "{body}"
    );
    // Naming one, or a name only one holds, answers plainly.
    let named = h
        .data(r#"{ cluster(namespace: "t", name: "alpha", datacenter: "west") { datacenter phase } beta: cluster(namespace: "t", name: "beta") { datacenter } }"#)
        .await;
    assert_eq!(
        named["cluster"],
        json!({"datacenter": "west", "phase": "Provisioning"})
    );
    assert_eq!(named["beta"], json!({"datacenter": "east"}));

    // A change in one datacenter changes only its object.
    west.delete("machines", "t", "alpha-wrk0");
    h.until("west's Machine deleted", |s| {
        s.snapshot().count(vitistack::model::Kind::Machine) == 2
    })
    .await;
    let again = h
        .data(r#"{ e: cluster(namespace: "t", name: "alpha", datacenter: "east") { machines { totalCount } } w: cluster(namespace: "t", name: "alpha", datacenter: "west") { machines { totalCount } } }"#)
        .await;
    assert_eq!(again["e"]["machines"]["totalCount"], 1);
    assert_eq!(again["w"]["machines"]["totalCount"], 1);
    drop(west);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_datacenter_added_or_removed_in_the_directory_is_picked_up_without_a_restart() {
    let (east, west) = east_and_west().await;
    let h = watching(east, &[], &["--datacenters-rescan-seconds", "1"]).await;
    let dir = h.dir.join("datacenters");
    h.until("east listed", |s| {
        s.snapshot().count(vitistack::model::Kind::Machine) == 1
    })
    .await;

    // A file added: west's objects arrive.
    let mut rx = h.store().subscribe();
    kubeconfig_for(&west, &dir.join("west.yaml"));
    h.until("west listed", |s| {
        s.snapshot().count(vitistack::model::Kind::Machine) == 3
    })
    .await;
    let dcs: Vec<String> = h
        .store()
        .snapshot()
        .datacenters()
        .map(|d| d.key().to_string())
        .collect();
    assert_eq!(dcs, vec!["east", "west"]);

    // The file removed: west's objects leave the graph, as deletions subscribers see.
    std::fs::remove_file(dir.join("west.yaml")).expect("remove");
    h.until("west dropped", |s| {
        s.snapshot().count(vitistack::model::Kind::Machine) == 1
    })
    .await;
    let mut deleted = Vec::new();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while deleted.len() < 2 && tokio::time::Instant::now() < deadline {
        if let Ok(Ok(c)) = tokio::time::timeout(Duration::from_secs(1), rx.recv()).await
            && c.change == vitistack::store::ChangeType::Deleted
        {
            deleted.push(format!("{}:{}", c.object.datacenter(), c.object.name()));
        }
    }
    deleted.sort();
    assert_eq!(deleted, vec!["west:w0", "west:w1"]);
    let left = h.data("{ machines { nodes { name datacenter } } }").await;
    assert_eq!(
        left["machines"]["nodes"],
        json!([{"name": "e0", "datacenter": "east"}])
    );
}

/// The datacenters' states, from `datacenters` (an answer that may carry errors about them).
async fn states(h: &Harness) -> Value {
    h.answer("{ datacenters { key state lastError } }").await["data"]["datacenters"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_datacenter_that_stops_answering_is_stale_its_objects_stay_and_recovery_relists() {
    let (east, west) = east_and_west().await;
    let h = watching(
        east,
        &[("west", &west)],
        &[
            "--dc-probe-interval-seconds",
            "1",
            "--dc-stale-after-seconds",
            "3",
            // Far longer than the bound: staleness comes from the probe, not the watch timeout.
            "--watch-timeout-seconds",
            "60",
        ],
    )
    .await;
    h.ready().await;
    assert_eq!(
        states(&h).await,
        json!([{"key": "east", "state": "SYNCED", "lastError": null},
               {"key": "west", "state": "SYNCED", "lastError": null}])
    );
    let (code, ready) = h.get("/ready").await;
    assert_eq!(code, 200, "{ready}");

    // West stops answering: stale within the bound, east served as before.
    let mut rx = h.store().subscribe();
    west.unplug(true);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let now = states(&h).await;
        if now[1]["state"] == "STALE" {
            assert_eq!(now[0]["state"], "SYNCED", "{now}");
            assert!(now[1]["lastError"].is_string(), "{now}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "west never stale: {now}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Partial data plus an error naming it: west's objects as last seen, east's current.
    let body = h.answer("{ machines { nodes { name datacenter } } }").await;
    assert_eq!(
        body["data"]["machines"]["nodes"],
        json!([{"name": "e0", "datacenter": "east"}, {"name": "w0", "datacenter": "west"},
               {"name": "w1", "datacenter": "west"}]),
        "{body}"
    );
    let errors = body["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 1, "{body}");
    assert_eq!(errors[0]["extensions"]["code"], "DATACENTER_UNAVAILABLE");
    assert_eq!(errors[0]["extensions"]["datacenter"], "west");
    assert_eq!(errors[0]["extensions"]["state"], "STALE");
    // Still ready (the others are served), and /health says which one is away.
    assert_eq!(h.get("/ready").await.0, 200);
    let (_, health) = h.get("/health").await;
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(
        health["checks"]["datacenters"][1]["state"], "STALE",
        "{health}"
    );
    let metrics = h.metrics().await;
    for line in [
        r#"vitistack_datacenter_state{datacenter="west",state="STALE"} 1"#,
        r#"vitistack_datacenter_state{datacenter="east",state="SYNCED"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} not in /metrics");
    }

    // Deleted while it was away (no watch could tell); back: it relists, and the deletion
    // reaches the graph and its subscribers.
    west.delete_silently("machines", "t", "w1");
    west.unplug(false);
    h.until("w1 gone after recovery", |s| {
        s.snapshot().count(vitistack::model::Kind::Machine) == 2
    })
    .await;
    let mut deleted = None;
    while let Ok(c) = rx.try_recv() {
        if c.change == vitistack::store::ChangeType::Deleted {
            deleted = Some(format!("{}:{}", c.object.datacenter(), c.object.name()));
        }
    }
    assert_eq!(deleted.as_deref(), Some("west:w1"));
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while states(&h).await[1]["state"] != "SYNCED" {
        assert!(
            tokio::time::Instant::now() < deadline,
            "west never synced again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let body = h.answer("{ machines { totalCount } }").await;
    assert!(body.get("errors").is_none(), "{body}");
}

/// Two datacenters' API servers give out the same uids and versions: the same change in each
/// is two history rows, each naming its datacenter (a row is one per datacenter, uid, version and
/// change), and each row's object is its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_uid_and_version_in_two_datacenters_are_two_history_rows() {
    let east = api_with(|api| {
        api.apply("machines", machine("t", "m", "c"));
        api.apply("machines", machine("t", "keep", "c"));
    })
    .await;
    let west = api_with(|api| {
        api.apply("machines", machine("t", "m", "c"));
        api.apply("machines", machine("t", "keep", "c"));
    })
    .await;
    let h = watching(east, &[("west", &west)], &[]).await;
    h.ready().await;
    let uid =
        |api: &KubeApi| api.object("machines", "t", "m").expect("m")["metadata"]["uid"].clone();
    assert_eq!(
        uid(&h.api),
        uid(&west),
        "both API servers gave out the same uid"
    );
    h.api.delete("machines", "t", "m");
    west.delete("machines", "t", "m");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let rows = loop {
        let rows = h
            .data(r#"{ events(filter: {kind: "Machine", name: "m"}) { nodes { change datacenter uid resourceVersion } } }"#)
            .await["events"]["nodes"]
            .clone();
        if rows.as_array().map_or(0, Vec::len) >= 2 {
            break rows;
        }
        assert!(tokio::time::Instant::now() < deadline, "rows: {rows}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut seen: Vec<(String, String, String)> = rows
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            (
                r["datacenter"].as_str().unwrap_or_default().to_string(),
                r["change"].as_str().unwrap_or_default().to_string(),
                format!("{}@{}", r["uid"], r["resourceVersion"]),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(seen.len(), 2, "{rows}");
    assert_eq!((seen[0].0.as_str(), seen[1].0.as_str()), ("east", "west"));
    assert!(seen.iter().all(|s| s.1 == "DELETED"));
    assert_eq!(
        seen[0].2, seen[1].2,
        "the same uid and version in both: {rows}"
    );
    // One datacenter's history by filter; the row's object is its own datacenter's.
    let west_rows = h
        .data(r#"{ events(filter: {datacenter: "west", kind: "Machine"}) { nodes { datacenter name } } }"#)
        .await;
    assert_eq!(
        west_rows["events"]["nodes"],
        json!([{"datacenter": "west", "name": "m"}])
    );
}

/// Two kubeconfig files that reach one cluster (the same Vitistack) are refused at start, naming
/// both files: the cluster's objects would otherwise be shown twice, as two datacenters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_files_for_one_cluster_are_refused_at_start_naming_both() {
    use clap::Parser;
    let api = api_with(|api| {
        api.apply(
            "vitistacks",
            json!({"metadata": {"name": "vitistack"}, "spec": {"displayName": "South",
                   "infrastructure": "prod", "region": "south", "zone": "az1"}}),
        );
    })
    .await;
    let h = Harness::unstarted(api);
    let dir = h.dir.join("datacenters");
    std::fs::create_dir_all(&dir).expect("dir");
    kubeconfig_for(&h.api, &dir.join("east.yaml"));
    kubeconfig_for(&h.api, &dir.join("west.yaml"));
    let db = format!("sqlite://{}/v.db", h.dir.display());
    let argv = [
        "test",
        "--log-json",
        "false",
        "--database-url",
        &db,
        "--datacenters-dir",
        dir.to_str().expect("utf-8"),
    ];
    let cfg = super::Args::try_parse_from(argv).expect("args").cfg;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let refused = match vitistack::app::start(&cfg, listener).await {
        Ok(app) => {
            app.abort();
            panic!("started with two files for one cluster");
        }
        Err(e) => format!("{e:#}"),
    };
    assert!(
        refused.contains("east.yaml") && refused.contains("west.yaml"),
        "{refused}"
    );
    assert!(refused.contains("same cluster"), "{refused}");
}

/// A datacenter's kubeconfig file replaced (a rotated credential, or the cluster moved): the
/// watches reconnect with it, and so do writes; a write never goes out through the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_kubeconfig_is_used_for_writes_too() {
    let east = api_with(|_| {}).await;
    let before = api_with(|api| {
        api.apply("kubernetesclusters", cluster("alpha", false));
    })
    .await;
    let after = api_with(|api| {
        let mut alpha = cluster("alpha", false);
        alpha["status"]["phase"] = json!("Provisioning");
        api.apply("kubernetesclusters", alpha);
    })
    .await;
    let keys = std::env::temp_dir().join(format!("vitistack-keys-{}", std::process::id()));
    std::fs::write(&keys, format!("root admin {ADMIN_KEY}\n")).expect("keys");
    let keys_arg = keys.to_str().expect("utf-8").to_string();
    let h = watching(
        east,
        &[("west", &before)],
        &[
            "--datacenters-rescan-seconds",
            "1",
            "--api-keys-file",
            &keys_arg,
        ],
    )
    .await;
    let pause = |value: bool| {
        let h = &h;
        async move {
            let op = if value {
                "pauseClusterReconciliation"
            } else {
                "resumeClusterReconciliation"
            };
            let query =
                format!("mutation {{ {op}(namespace: \"t\", name: \"alpha\") {{ changed }} }}");
            ask(h, ADMIN_KEY, &query, json!({})).await
        }
    };
    let paused = |api: &KubeApi| {
        api.object("kubernetesclusters", "t", "alpha")
            .is_some_and(|o| {
                o["metadata"]["annotations"]["upgrade.vitistack.io/do-not-reconcile"] == "true"
            })
    };
    h.until("west's alpha listed", |s| {
        s.snapshot()
            .count(vitistack::model::Kind::KubernetesCluster)
            == 1
    })
    .await;
    let v = pause(true).await;
    assert_eq!(
        v["data"]["pauseClusterReconciliation"]["changed"], true,
        "{v}"
    );
    assert!(paused(&before), "the write reached west's first API server");

    // West's file now reaches another API server: the graph shows its alpha, and the next write
    // goes there, not to the first.
    kubeconfig_for(&after, &h.dir.join("datacenters").join("west.yaml"));
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let d = ask(
            &h,
            ADMIN_KEY,
            r#"{ cluster(namespace: "t", name: "alpha", datacenter: "west") { phase } }"#,
            json!({}),
        )
        .await;
        if d["data"]["cluster"]["phase"] == "Provisioning" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "west never reconnected: {d}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let v = pause(true).await;
    assert_eq!(
        v["data"]["pauseClusterReconciliation"]["changed"], true,
        "{v}"
    );
    assert!(paused(&after), "the write reached the new API server");
    let v = pause(false).await;
    assert_eq!(
        v["data"]["resumeClusterReconciliation"]["changed"], true,
        "{v}"
    );
    assert!(!paused(&after), "resumed on the new API server");
    assert!(
        paused(&before),
        "the old API server got no write after the change"
    );
    let _ = std::fs::remove_file(&keys);
}
