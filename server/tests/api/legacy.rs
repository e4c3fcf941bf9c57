//! The old aggregator's contract: its REST routes and `/health`, shape by shape against the
//! JSON its documentation promises (`testkit/src/documented.json`), and their figures against the
//! GraphQL graph they are drawn from.

use serde_json::Value;

use crate::documented::{differences, documented};
use crate::{TestApp, spawn};

/// GET a route that must answer 200 with JSON; the body and the headers.
async fn get_ok(app: &TestApp, route: &str) -> (Value, reqwest::header::HeaderMap) {
    let res = app
        .client
        .get(format!("{}{route}", app.base))
        .send()
        .await
        .expect("GET");
    let headers = res.headers().clone();
    assert_eq!(res.status(), 200, "{route}");
    (res.json().await.expect("JSON"), headers)
}

/// GET a route and check its body against the documented shape; the body and its headers.
async fn conforming(app: &TestApp, route: &str) -> (Value, reqwest::header::HeaderMap) {
    let (body, headers) = get_ok(app, route).await;
    let mut out = Vec::new();
    differences(route, &documented(route), &body, &mut out);
    assert!(
        out.is_empty(),
        "{route} differs from the documented shape:\n{}",
        out.join("\n")
    );
    (body, headers)
}

fn total(headers: &reqwest::header::HeaderMap) -> usize {
    headers
        .get("x-total-count")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("X-Total-Count")
}

#[tokio::test]
async fn rest_routes_answer_the_documented_shapes_with_the_graphs_figures() {
    let app = spawn(&["--demo"]).await;
    let graph = app
        .data(
            "{ clusterSummary { total } infrastructure { machines { total running failed } networks { namespaces readyNamespaces } }
               vitistackName version { version commit }
               machineProviders(first: 100) { nodes { name uid } } kubernetesProviders(first: 100) { nodes { name uid } } }",
            serde_json::json!({}),
        )
        .await;

    let (clusters, headers) = conforming(&app, "/api/v1/clusters").await;
    let list = clusters["clusters"].as_array().expect("clusters");
    assert_eq!(
        list.len(),
        graph["clusterSummary"]["total"].as_u64().expect("total") as usize
    );
    assert_eq!(total(&headers), list.len(), "X-Total-Count");
    let names: Vec<(&str, &str)> = list
        .iter()
        .map(|c| {
            (
                c["namespace"].as_str().unwrap_or(""),
                c["name"].as_str().unwrap_or(""),
            )
        })
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "clusters come by namespace and name");
    for c in list {
        let nodes = &c["nodes"];
        assert!(nodes["ready"].as_u64() <= nodes["total"].as_u64(), "{c}");
        assert!(
            ["active", "inactive", "failed"].contains(&c["status"].as_str().unwrap_or("")),
            "{c}"
        );
    }
    assert!(
        list.iter()
            .any(|c| c["status"] == "active" && c["nodes"]["ready"].as_u64() > Some(0)),
        "a running demo cluster"
    );
    assert!(list.iter().any(|c| c["operators"]["talos"] == true));

    let (infra, _) = conforming(&app, "/api/v1/infrastructure").await;
    let m = &infra["summary"]["machines"];
    assert_eq!(m["total"], graph["infrastructure"]["machines"]["total"]);
    assert_eq!(m["running"], graph["infrastructure"]["machines"]["running"]);
    assert_eq!(m["failed"], graph["infrastructure"]["machines"]["failed"]);
    assert!(
        m["running"].as_u64().unwrap_or(0)
            + m["pending"].as_u64().unwrap_or(0)
            + m["failed"].as_u64().unwrap_or(0)
            <= m["total"].as_u64().unwrap_or(0)
    );
    assert_eq!(
        infra["summary"]["networks"]["total"],
        graph["infrastructure"]["networks"]["namespaces"]
    );
    assert_eq!(
        infra["summary"]["networks"]["active"],
        graph["infrastructure"]["networks"]["readyNamespaces"]
    );
    for op in ["proxmox", "talos", "kea", "kubevirt"] {
        let r = &infra["operators"][op]["resources"];
        assert!(r["total"].as_u64().is_some(), "{op}: {r}");
    }
    assert!(infra["operators"]["kubevirt"]["resources"]["total"].as_u64() > Some(0));

    let (version, _) = conforming(&app, "/v1/info/version").await;
    assert_eq!(version["version"], graph["version"]["version"]);
    assert_eq!(version["commit"], graph["version"]["commit"]);
    assert_eq!(version["version"], vitistack::VERSION);
    let (name, _) = conforming(&app, "/v1/vitistack/name").await;
    assert_eq!(name["name"], graph["vitistackName"]);

    for (route, field) in [
        ("/v1/machineproviders", "machineProviders"),
        ("/v1/kubernetesproviders", "kubernetesProviders"),
    ] {
        let (items, headers) = get_ok(&app, route).await;
        let n = total(&headers);
        let items: Vec<Value> = serde_json::from_value(items).expect("a JSON array");
        let in_graph = graph[field]["nodes"].as_array().expect("nodes");
        assert_eq!(items.len(), in_graph.len(), "{route}");
        assert_eq!(n, items.len(), "{route} X-Total-Count");
        assert!(!items.is_empty(), "{route}: the demo has some");
        let mut names: Vec<&str> = items
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap_or(""))
            .collect();
        let listed = names.clone();
        names.sort();
        assert_eq!(listed, names, "{route} sorted by name");
        for o in &items {
            assert!(
                o["apiVersion"]
                    .as_str()
                    .is_some_and(|v| v.starts_with("vitistack.io/")),
                "{o}"
            );
            assert!(o["metadata"].get("managedFields").is_none(), "{o}");
            let uid = o["metadata"]["uid"].as_str().expect("uid");
            let (code, one) = app.get(&format!("{route}/{uid}")).await;
            assert_eq!(code, 200, "{route}/{uid}");
            let one: Value = serde_json::from_str(&one).expect("JSON");
            assert_eq!(&one, o, "{route}/{uid} is the listed object");
        }
        let (code, body) = app.get(&format!("{route}/not-a-uuid")).await;
        assert_eq!(code, 400, "{body}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).expect("JSON")["error"],
            "Invalid UUID format"
        );
        let (code, body) = app
            .get(&format!("{route}/7b0c4a52-8c3f-4f64-9a51-2e1f3a1d9c00"))
            .await;
        assert_eq!(code, 404, "{body}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).expect("JSON")["code"],
            "NOT_FOUND"
        );
    }
    // A MachineProvider's uid is not a KubernetesProvider.
    let mp = graph["machineProviders"]["nodes"][0]["uid"]
        .as_str()
        .expect("uid");
    assert_eq!(
        app.get(&format!("/v1/kubernetesproviders/{mp}")).await.0,
        404
    );

    let (health, _) = conforming(&app, "/health").await;
    assert_eq!(health["status"], "healthy", "{health}");
    assert_eq!(app.get("/health/live").await.0, 200);
    let (code, cache) = app.get("/health/cache").await;
    assert_eq!(code, 200, "{cache}");
    app.stop().await;
}

#[tokio::test]
async fn rest_routes_need_a_credential_where_the_old_ones_did() {
    let dir = tempfile_dir();
    let keys = dir.join("keys");
    std::fs::write(&keys, "reader viewer reader-key-0123456789\n").expect("keys");
    let app = spawn(&["--demo", "--api-keys-file", keys.to_str().expect("path")]).await;
    for route in [
        "/api/v1/clusters",
        "/api/v1/infrastructure",
        "/v1/vitistack/name",
        "/v1/machineproviders",
        "/v1/kubernetesproviders",
    ] {
        let (code, body) = app.get(route).await;
        assert_eq!(code, 401, "{route}: {body}");
        let body: Value = serde_json::from_str(&body).expect("JSON error");
        assert!(body["error"].as_str().is_some(), "{route}: {body}");
        let res = app
            .client
            .get(format!("{}{route}", app.base))
            .bearer_auth("reader-key-0123456789")
            .send()
            .await
            .expect("GET");
        assert_eq!(res.status(), 200, "{route} with a key");
    }
    // As before: the version and the API description need none.
    assert_eq!(app.get("/v1/info/version").await.0, 200);
    let (code, doc) = app.get("/api/v1/openapi.json").await;
    assert_eq!(code, 200);
    let doc: Value = serde_json::from_str(&doc).expect("OpenAPI JSON");
    assert_eq!(doc["openapi"], "3.1.0");
    app.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// The OpenAPI document names exactly the routes `http/rest.rs` registers.
#[test]
fn the_openapi_document_lists_every_rest_route() {
    let source = include_str!("../../src/http/rest.rs");
    // Every `.route(` call, its path on the same line or the next.
    let mut routes: Vec<String> = source
        .split(".route(")
        .skip(1)
        .filter_map(|call| call.trim_start().strip_prefix('"'))
        .filter_map(|l| l.split('"').next())
        .map(String::from)
        .collect();
    routes.sort();
    let doc: Value = serde_json::from_str(vitistack::http::rest::OPENAPI).expect("OpenAPI JSON");
    let mut documented: Vec<String> = doc["paths"]
        .as_object()
        .expect("paths")
        .keys()
        .cloned()
        .collect();
    documented.sort();
    assert_eq!(
        routes, documented,
        "routes in rest.rs vs paths in openapi.json"
    );
    assert!(routes.len() >= 9);
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "vitistack-legacy-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    h.finish()
}

/// A one-route HTTP server answering `status` with `body`; its address.
async fn answering(status: u16, body: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let code = axum::http::StatusCode::from_u16(status).expect("status");
    let app = axum::Router::new().fallback(move || async move {
        (
            code,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/healthz")
}

#[tokio::test]
async fn operators_are_judged_by_their_endpoints_when_configured() {
    let failing = answering(500, r#"{"error":"boom"}"#).await;
    let well = answering(200, r#"{"version":"v1.4.2"}"#).await;
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}/healthz", l.local_addr().expect("addr"))
    };
    let app = spawn(&[
        "--demo",
        "--talos-operator-endpoint",
        &failing,
        "--kea-operator-endpoint",
        &closed,
        "--kubevirt-operator-endpoint",
        &well,
        "--talos-sync-interval",
        "200ms",
        "--kea-sync-interval",
        "200ms",
        "--kubevirt-sync-interval",
        "200ms",
    ])
    .await;
    crate::eventually("every probe answered", || async {
        let (_, body) = app.get("/health").await;
        let h: Value = serde_json::from_str(&body).unwrap_or_default();
        h["checks"]["operators"]["kea"] == "unreachable"
            && h["checks"]["operators"]["talos"] == "unhealthy"
            && h["checks"]["operators"]["kubevirt"] == "healthy"
    })
    .await;
    // Serving current data with operators not healthy: degraded, still 200.
    let (health, _) = conforming(&app, "/health").await;
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(
        health["checks"]["operators"]["proxmox"], "healthy",
        "no endpoint: judged from the graph"
    );
    let (code, body) = app.get("/health/operators").await;
    assert_eq!(code, 503, "{body}");
    let ops: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(ops["status"], "unreachable");
    let talos = &ops["operators"]["talos"];
    assert!(
        talos["reason"]
            .as_str()
            .is_some_and(|r| r.contains("HTTP 500")),
        "{talos}"
    );
    let kea = &ops["operators"]["kea"];
    assert!(
        kea["reason"]
            .as_str()
            .is_some_and(|r| r.contains("cannot connect")),
        "{kea}"
    );
    assert!(
        !kea["endpoint"].as_str().unwrap_or("/").contains("/healthz"),
        "only the origin is shown: {kea}"
    );
    let (infra, _) = conforming(&app, "/api/v1/infrastructure").await;
    assert_eq!(
        infra["operators"]["kubevirt"]["version"], "v1.4.2",
        "the version its endpoint gave"
    );
    assert_eq!(infra["operators"]["kubevirt"]["status"], "healthy");
    assert_eq!(infra["operators"]["talos"]["status"], "unhealthy");
    // And in GraphQL.
    let data = app
        .data(
            "{ operators { operator status reason version } }",
            serde_json::json!({}),
        )
        .await;
    let talos = data["operators"]
        .as_array()
        .expect("operators")
        .iter()
        .find(|o| o["operator"] == "talos")
        .cloned()
        .expect("talos");
    assert_eq!(talos["status"], "UNHEALTHY", "{talos}");
    app.stop().await;
}

#[tokio::test]
async fn a_bad_operator_endpoint_or_interval_stops_the_start_naming_the_variable() {
    for (args, var) in [
        (
            vec!["--talos-operator-endpoint", "ftp://x"],
            "TALOS_OPERATOR_ENDPOINT",
        ),
        (vec!["--kea-sync-interval", "soon"], "KEA_SYNC_INTERVAL"),
        (
            vec!["--proxmox-sync-interval", "0s"],
            "PROXMOX_SYNC_INTERVAL",
        ),
    ] {
        let mut argv = vec!["test"];
        argv.extend(args);
        let cfg = <crate::Args as clap::Parser>::try_parse_from(argv)
            .expect("args")
            .cfg;
        let err = cfg.validate().expect_err("refused").to_string();
        assert!(err.contains(var), "{err}");
    }
}

#[tokio::test]
async fn metrics_can_be_switched_off() {
    let app = spawn(&["--metrics-enabled", "false"]).await;
    let (code, body) = app.get("/metrics").await;
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("METRICS_ENABLED"), "{body}");
    app.stop().await;
}
