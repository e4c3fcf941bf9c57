//! The old status page's agents and readers, unchanged: agents POST their `StatusData` to
//! `/api/report` with a token of their own datacenter, and the reports become that datacenter's
//! hosts and VMs; `/api/status` and the `/events` stream answer the old shapes. The payloads are
//! built here from the old program's documented shape (kubevirt-status-page, `main.go`).

use serde_json::{Value, json};

use super::{PATIENCE, TestApp, eventually, spawn};

const EAST_TOKEN: &str = "east-agent-token-0123456789";
const WEST_TOKEN: &str = "west-agent-token-9876543210";

/// A token file for east (the token itself) and west (its hash), in a directory of its own.
fn tokens_file() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("vitistack-hub-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("tokens");
    let west = vitistack::auth::keys::to_hex(&vitistack::auth::keys::hash(WEST_TOKEN));
    std::fs::write(
        &path,
        format!("# one line per datacenter\neast {EAST_TOKEN}\nwest sha256:{west}\n"),
    )
    .expect("tokens");
    path
}

fn vm(name: &str, node: &str, cores: i64, memory_mb: i64, cluster: &str) -> Value {
    json!({"name": name, "namespace": "tenant-a", "status": "Running", "nodeName": node,
           "cpuCores": cores, "memoryMB": memory_mb, "cluster": cluster})
}

/// An agent's report as the old agent built it: hosts with their VMs, and the VMs by cluster.
fn report(datacenter: &str, vms: &[Value]) -> Value {
    json!({
        "datacenter": datacenter,
        "nodes": [
            {"name": "kv-01", "roles": ["worker"], "status": "Ready", "cpuCapacity": 32,
             "memoryCapMB": 131072, "cpuAllocatable": 31, "memAllocMB": 129024,
             "vms": vms.iter().filter(|v| v["nodeName"] == "kv-01").collect::<Vec<_>>()},
            {"name": "kv-02", "roles": ["worker"], "status": "NotReady", "cpuCapacity": 16,
             "memoryCapMB": 65536, "cpuAllocatable": 15, "memAllocMB": 64512, "vms": null}
        ],
        "clusters": [{"name": "prod", "nodes": ["kv-01"], "vms": vms}],
        "updated": "2026-11-26T08:00:00Z"
    })
}

async fn post(app: &TestApp, token: Option<&str>, body: impl Into<reqwest::Body>) -> (u16, String) {
    let mut req = app
        .client
        .post(format!("{}/api/report", app.base))
        .header("content-type", "application/json")
        .body(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let res = req.send().await.expect("request");
    (res.status().as_u16(), res.text().await.expect("body"))
}

async fn push(app: &TestApp, token: &str, body: &Value) {
    let (status, text) = post(app, Some(token), body.to_string()).await;
    assert_eq!(status, 204, "report refused: {text}");
}

async fn east_state(app: &TestApp) -> Option<(String, Value)> {
    let d = app
        .data_of_any_state("{ datacenters { key state lastError } }", json!({}))
        .await;
    d["datacenters"]
        .as_array()?
        .iter()
        .find(|d| d["key"] == "east")
        .map(|d| {
            (
                d["state"].as_str().unwrap_or_default().to_string(),
                d["lastError"].clone(),
            )
        })
}

/// The old stream's frames: `data: <json>` blocks, no event names.
struct Frames {
    res: reqwest::Response,
    buf: String,
}

impl Frames {
    async fn next(&mut self) -> Value {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let data: String = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if !data.is_empty() {
                    return serde_json::from_str(&data).expect("a JSON frame");
                }
                continue;
            }
            let chunk = tokio::time::timeout(PATIENCE, self.res.chunk())
                .await
                .expect("a frame in time")
                .expect("body")
                .expect("stream open");
            self.buf
                .push_str(std::str::from_utf8(&chunk).expect("utf-8"));
        }
    }
}

fn east_of(hub: &Value) -> Value {
    hub["datacenters"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["datacenter"] == "east"))
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn an_old_agents_report_becomes_its_datacenters_hosts_and_vms() {
    let tokens = tokens_file();
    let app = spawn(&[
        "--hub-tokens-file",
        tokens.to_str().expect("path"),
        "--dc-stale-after-seconds",
        "2",
    ])
    .await;
    let first = report(
        "east",
        &[
            vm("prod-wrk1", "kv-01", 4, 8192, "prod"),
            vm("prod-wrk2", "kv-01", 2, 4096, "prod"),
        ],
    );

    // Refusals: nothing of a refused report is applied, and no token is ever repeated.
    let (status, body) = post(&app, None, first.to_string()).await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = post(&app, Some("not-a-token-of-the-file"), first.to_string()).await;
    assert_eq!(status, 401, "{body}");
    assert!(!body.contains("not-a-token"), "{body}");
    let (status, body) = post(&app, Some(WEST_TOKEN), first.to_string()).await;
    assert_eq!(status, 403, "west's token cannot write east: {body}");
    assert!(
        body.contains("`west` only") && !body.contains(WEST_TOKEN),
        "{body}"
    );
    let (status, body) = post(
        &app,
        Some(EAST_TOKEN),
        "{\"datacenter\": \"east\", nodes: }",
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("not StatusData JSON"), "{body}");
    let mut empty = first.clone();
    empty["datacenter"] = json!("");
    let (status, body) = post(&app, Some(EAST_TOKEN), empty.to_string()).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("`datacenter` is empty"), "{body}");
    let mut negative = first.clone();
    negative["nodes"][0]["vms"][1]["memoryMB"] = json!(-5);
    let (status, body) = post(&app, Some(EAST_TOKEN), negative.to_string()).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("`nodes[0].vms[1].memoryMB` must not be negative"),
        "{body}"
    );
    let (status, _) = app.get("/api/report").await;
    assert_eq!(status, 405);
    let too_large = format!(
        "{{\"datacenter\":\"east\",\"updated\":\"{}\"}}",
        "x".repeat(11 << 20)
    );
    let (status, body) = post(&app, Some(EAST_TOKEN), too_large).await;
    assert_eq!(status, 413, "{body}");
    let hosts = "{ hosts(filter: {datacenter: \"east\"}) { totalCount } }";
    assert_eq!(
        app.data_of_any_state(hosts, json!({})).await["hosts"]["totalCount"],
        0
    );

    // A report larger than the GraphQL body limit, within the old hub's 10 MiB, is taken.
    let mut padded = first.clone();
    padded["updated"] = json!("y".repeat(3 << 20));
    push(&app, EAST_TOKEN, &padded).await;

    // The datacenter's hosts and VMs, with the report's figures.
    let d = app
        .data_of_any_state(
            r#"{ hosts(filter: {datacenter: "east"}) { totalCount nodes { name datacenter
                   cpuCapacity memoryAllocatableBytes readiness roles
                   vms { name namespace datacenter phase } } } }"#,
            json!({}),
        )
        .await;
    assert_eq!(d["hosts"]["totalCount"], 2);
    let kv01 = &d["hosts"]["nodes"][0];
    assert_eq!(kv01["name"], "kv-01");
    assert_eq!(kv01["datacenter"], "east");
    assert_eq!(kv01["cpuCapacity"], 32.0);
    assert_eq!(kv01["memoryAllocatableBytes"], 129024.0 * 1024.0 * 1024.0);
    assert_eq!(kv01["readiness"], "READY");
    assert_eq!(kv01["roles"], json!(["worker"]));
    assert_eq!(
        kv01["vms"],
        json!([
            {"name": "prod-wrk1", "namespace": "tenant-a", "datacenter": "east", "phase": "Running"},
            {"name": "prod-wrk2", "namespace": "tenant-a", "datacenter": "east", "phase": "Running"}
        ])
    );
    assert_eq!(d["hosts"]["nodes"][1]["readiness"], "NOT_READY");
    let listed = east_state(&app).await;
    assert!(listed.is_some(), "east is listed among the datacenters");

    // `/api/status`: the old hub's shape, the report's figures read back.
    let (status, text) = app.get("/api/status").await;
    assert_eq!(status, 200, "{text}");
    let hub: Value = serde_json::from_str(&text).expect("json");
    let east = east_of(&hub);
    assert_eq!(east["nodes"][0]["cpuCapacity"], 32);
    assert_eq!(east["nodes"][0]["memoryCapMB"], 131072);
    assert_eq!(east["nodes"][0]["memAllocMB"], 129024);
    assert_eq!(east["nodes"][1]["status"], "NotReady");
    assert_eq!(
        east["nodes"][0]["vms"][0],
        vm("prod-wrk1", "kv-01", 4, 8192, "prod")
    );
    assert_eq!(east["clusters"][0]["name"], "prod");
    assert_eq!(east["clusters"][0]["nodes"], json!(["kv-01"]));
    assert_eq!(east["clusters"][0]["vms"].as_array().map(Vec::len), Some(2));
    assert!(east["stale"].is_boolean());

    // The old stream: a frame at once, then one after a report changes the VMs.
    let res = app
        .client
        .get(format!("{}/events", app.base))
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("stream");
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(res.headers()["access-control-allow-origin"], "*");
    let mut frames = Frames {
        res,
        buf: String::new(),
    };
    let opening = frames.next().await;
    assert_eq!(
        east_of(&opening)["nodes"][0]["vms"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    // The next report drops prod-wrk2 and adds prod-wrk3: gone and new in the graph.
    let second = report(
        "east",
        &[
            vm("prod-wrk1", "kv-01", 4, 8192, "prod"),
            vm("prod-wrk3", "kv-01", 8, 16384, "prod"),
        ],
    );
    push(&app, EAST_TOKEN, &second).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let frame = frames.next().await;
        let names: Vec<String> = east_of(&frame)["nodes"][0]["vms"]
            .as_array()
            .map(|v| {
                v.iter()
                    .filter_map(|v| v["name"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        if names == ["prod-wrk1", "prod-wrk3"] {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no frame with the second report: {names:?}"
        );
    }
    drop(frames);
    let d = app
        .data_of_any_state(
            r#"{ hosts(filter: {datacenter: "east", search: "kv-01"}) { nodes { vms { name } } } }"#,
            json!({}),
        )
        .await;
    assert_eq!(
        d["hosts"]["nodes"][0]["vms"],
        json!([{"name": "prod-wrk1"}, {"name": "prod-wrk3"}])
    );

    // A browser's `/events` is still the dashboard's page.
    let res = app
        .client
        .get(format!("{}/events", app.base))
        .header("accept", "text/html")
        .send()
        .await
        .expect("page");
    assert_eq!(res.status().as_u16(), 200);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .is_ok_and(|c| c.starts_with("text/html"))
    );

    // Reports stop: east goes STALE (its hosts stay, flagged), and a report brings it back.
    eventually("east STALE once its reports stop", || async {
        east_state(&app).await.is_some_and(|(s, _)| s == "STALE")
    })
    .await;
    let (_, error) = east_state(&app).await.expect("east");
    assert!(
        error
            .as_str()
            .is_some_and(|e| e.starts_with("no report from its agent for")),
        "{error}"
    );
    let stale: Value = serde_json::from_str(&app.get("/api/status").await.1).expect("json");
    assert_eq!(east_of(&stale)["stale"], true);
    assert_eq!(east_of(&stale)["nodes"].as_array().map(Vec::len), Some(2));
    let answer = app
        .query(
            "{ hosts(filter: {datacenter: \"east\"}) { totalCount } }",
            json!({}),
        )
        .await;
    assert_eq!(answer["data"]["hosts"]["totalCount"], 2, "{answer}");
    assert!(
        answer["errors"].as_array().is_some_and(|e| e
            .iter()
            .any(|e| e["extensions"]["code"] == "DATACENTER_UNAVAILABLE"
                && e["extensions"]["datacenter"] == "east")),
        "partial data and the error: {answer}"
    );
    eventually("east SYNCED again after a report", || async {
        push(&app, EAST_TOKEN, &second).await;
        east_state(&app).await.is_some_and(|(s, _)| s == "SYNCED")
    })
    .await;
    app.stop().await;
    let _ = std::fs::remove_dir_all(tokens.parent().expect("dir"));
}

#[tokio::test]
async fn a_bad_token_file_stops_the_start_naming_the_line_not_the_token() {
    let dir = std::env::temp_dir().join(format!("vitistack-hub-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("tokens");
    std::fs::write(&path, "east short-secret\n").expect("tokens");
    let cfg = <crate::Args as clap::Parser>::try_parse_from([
        "test",
        "--database-url",
        "sqlite::memory:",
        "--hub-tokens-file",
        path.to_str().expect("path"),
    ])
    .expect("args")
    .cfg;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let error = match vitistack::app::start(&cfg, listener).await {
        Ok(_) => panic!("a bad token file must stop the start"),
        Err(e) => e.to_string(),
    };
    assert!(
        error.contains(":1: the token of `east` is 12 characters long"),
        "{error}"
    );
    assert!(!error.contains("short-secret"), "{error}");
    // Without the file, reports are refused (and say why).
    let app = spawn(&[]).await;
    let (status, body) = post(&app, Some(EAST_TOKEN), report("east", &[]).to_string()).await;
    assert_eq!(status, 401);
    assert!(body.contains("HUB_TOKENS_FILE is not set"), "{body}");
    // One cluster and no agents: `/api/status` is the old agent's own answer.
    let status: Value = serde_json::from_str(&app.get("/api/status").await.1).expect("json");
    assert!(
        status.get("datacenter").is_none() && status["nodes"].is_array(),
        "{status}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// GET `path` with an optional key and `Accept`; the status and, for a stream, its first frame
/// (else the body).
async fn read_as(app: &TestApp, path: &str, key: Option<&str>, stream: bool) -> (u16, Value) {
    let mut req = app.client.get(format!("{}{path}", app.base));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    if stream {
        req = req.header("accept", "text/event-stream");
    }
    let res = req.send().await.expect("request");
    let status = res.status().as_u16();
    if stream && status == 200 {
        let mut frames = Frames {
            res,
            buf: String::new(),
        };
        return (status, frames.next().await);
    }
    let text = res.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test]
async fn the_old_pages_readers_need_a_key_unless_hub_open_read_opens_exactly_their_two_routes() {
    use super::auth::{KeysFile, VIEWER, three_keys};
    let keys = KeysFile::new(&three_keys());
    let tokens = tokens_file();
    let common = [
        "--api-keys-file",
        keys.path(),
        "--hub-tokens-file",
        tokens.to_str().expect("path"),
    ];

    // By default a reader without a key is refused, as every other reader is; with a key it
    // reads the same JSON.
    let closed = spawn(&common).await;
    push(
        &closed,
        EAST_TOKEN,
        &report("east", &[vm("web-1", "kv-01", 2, 2048, "prod")]),
    )
    .await;
    for stream in [false, true] {
        let path = if stream { "/events" } else { "/api/status" };
        let (status, body) = read_as(&closed, path, None, stream).await;
        assert_eq!(status, 401, "{path} without a key: {body}");
        assert_eq!(body["code"], "UNAUTHENTICATED", "{body}");
        let (status, body) = read_as(&closed, path, Some(VIEWER), stream).await;
        assert_eq!(status, 200, "{path} with a key: {body}");
        assert_eq!(east_of(&body)["nodes"][0]["name"], "kv-01", "{body}");
    }

    // HUB_OPEN_READ: both routes answer without a key (from an address no ANONYMOUS_READ_FROM
    // network holds), the same JSON; every other route still refuses, and a wrong key is still
    // refused on the opened ones too.
    let mut args = common.to_vec();
    args.push("--hub-open-read");
    let open = spawn(&args).await;
    push(
        &open,
        EAST_TOKEN,
        &report("east", &[vm("web-1", "kv-01", 2, 2048, "prod")]),
    )
    .await;
    for stream in [false, true] {
        let path = if stream { "/events" } else { "/api/status" };
        let (status, body) = read_as(&open, path, None, stream).await;
        assert_eq!(status, 200, "{path} without a key: {body}");
        let east = east_of(&body);
        assert_eq!(east["nodes"][0]["name"], "kv-01", "{body}");
        assert_eq!(east["clusters"][0]["vms"][0]["name"], "web-1", "{body}");
        let (status, body) = read_as(&open, path, Some("not-a-key-0123456789"), stream).await;
        assert_eq!(status, 401, "{path} with a wrong key: {body}");
    }
    for path in [
        "/api/v1/clusters",
        "/api/v1/infrastructure",
        "/v1/machineproviders",
    ] {
        let (status, body) = read_as(&open, path, None, false).await;
        assert_eq!(status, 401, "{path} is not opened: {body}");
    }
    let res = open
        .client
        .post(format!("{}/graphql", open.base))
        .json(&json!({"query": "{ hosts { totalCount } }"}))
        .send()
        .await
        .expect("request");
    assert_eq!(res.status().as_u16(), 401, "GraphQL is not opened");
    // Reports still need their agent's token.
    let (status, _) = post(&open, None, report("east", &[]).to_string()).await;
    assert_eq!(status, 401);
    let _ = std::fs::remove_dir_all(tokens.parent().expect("dir"));
}
