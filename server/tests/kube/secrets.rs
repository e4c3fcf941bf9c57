//! Credentials never leave the server. For every kind, a marker is planted in every field the
//! redaction rule names (the paths it finds in each embedded CRD schema, the extra paths, a
//! free-form map key and an annotation), the objects arrive through the watch, change and go; the
//! markers must then be found nowhere: GraphQL (`raw` and every typed field, live and `at` a
//! moment before they changed, which must answer as the live lists did then), subscriptions,
//! the event log (GraphQL and the table), webhook bodies, the database, and the server's own log
//! at debug level. The real binary runs against the Kubernetes API test server.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use vitistack::model::Kind;

use super::{Harness, KubeApi, PATIENCE, kube_api};

const NAMESPACE: &str = "sec";

/// The embedded CRD schema of a kind (as the server compiled it in).
fn crd_schema(kind: Kind, version: &str) -> Value {
    let file = format!(
        "{}/src/model/schemas/{}.{version}.json",
        env!("CARGO_MANIFEST_DIR"),
        kind.plural()
    );
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("schema file")).expect("json");
    doc["schema"].clone()
}

/// The smallest value a schema node accepts as a typed object: required fields filled in.
fn minimal(schema: &Value) -> Value {
    if let Some(d) = schema.get("default") {
        return d.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        return json!("1");
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => {
            let mut m = Map::new();
            for name in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let prop = &schema["properties"][name];
                m.insert(name.to_string(), minimal(prop));
            }
            Value::Object(m)
        }
        Some("array") => json!([]),
        Some("integer") => json!(schema.get("minimum").and_then(Value::as_i64).unwrap_or(1)),
        Some("number") => json!(1.0),
        Some("boolean") => json!(false),
        _ => json!("x"),
    }
}

/// Put `marker` at `path` (dotted, `[]` for array items) of `obj`, creating what is missing from
/// the schema. Strings get the marker; free-form maps get it under a plain key and a credential
/// key; arrays of strings get it as their item.
fn plant(obj: &mut Value, schema: &Value, path: &str, marker: &str) {
    let mut node = obj;
    let mut sch = schema;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let (name, arrays) = match part.find("[]") {
            Some(at) => (&part[..at], part[at..].matches("[]").count()),
            None => (*part, 0),
        };
        sch = &sch["properties"][name];
        if !node.is_object() {
            *node = json!({});
        }
        let map = node.as_object_mut().expect("object");
        let last = i == parts.len() - 1 && arrays == 0;
        if last {
            let value = match sch.get("type").and_then(Value::as_str) {
                Some("object") => json!({"plain": marker, "auth-token": marker}),
                Some("array") => json!([marker]),
                _ => json!(marker),
            };
            map.insert(name.to_string(), value);
            return;
        }
        node = map.entry(name.to_string()).or_insert_with(|| minimal(sch));
        for _ in 0..arrays {
            sch = &sch["items"];
            let items = match node {
                Value::Array(a) => a,
                other => {
                    *other = json!([]);
                    other.as_array_mut().expect("array")
                }
            };
            if items.is_empty() {
                items.push(minimal(sch));
            }
            node = &mut items[0];
        }
    }
}

/// One object per vitistack kind (and a KubeVirt VM with cloud-init user data), with a marker in
/// every credential field. Returns (plural, object, markers planted).
fn planted_objects(round: &str) -> Vec<(&'static str, Value, Vec<String>)> {
    let mut out = Vec::new();
    for kind in Kind::ALL.iter().copied().filter(|k| k.is_vitistack()) {
        let version = vitistack::source::kube::watched_kinds()
            .into_iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, v)| v)
            .expect("watched");
        let schema = crd_schema(kind, version);
        let mut obj = minimal(&schema);
        let mut meta = json!({"name": format!("s-{}", kind.plural())});
        if kind.namespaced() {
            meta["namespace"] = json!(NAMESPACE);
        }
        let mut markers = Vec::new();
        let mark = |markers: &mut Vec<String>| {
            let m = format!("ZQX{round}{}{}MARK", kind.short_name(), markers.len());
            markers.push(m.clone());
            m
        };
        meta["annotations"] = json!({
            "kubectl.kubernetes.io/last-applied-configuration": mark(&mut markers),
            "example.com/api-token": mark(&mut markers),
        });
        meta["labels"] = json!({"round": round});
        obj["metadata"] = meta;
        let paths: Vec<String> = vitistack::model::validation::schema_for(kind, version)
            .expect("schema")
            .secret_paths
            .iter()
            .cloned()
            .chain(
                vitistack::model::redact::EXTRA_PATHS
                    .iter()
                    .filter(|(k, _)| *k == kind)
                    .map(|(_, p)| p.to_string()),
            )
            .filter(|p| !p.contains('{'))
            .collect();
        for p in &paths {
            let m = mark(&mut markers);
            plant(&mut obj, &schema, p, &m);
        }
        // A credential-named key in a free-form map the rule does not blank whole.
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            let m = mark(&mut markers);
            spec.entry("tags")
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .map(|t| t.insert("deploy_password".into(), json!(m)));
        }
        out.push((kind.plural(), obj, markers));
    }
    let vm_marker = format!("ZQX{round}vmMARK");
    out.push((
        "virtualmachines",
        json!({"metadata": {"name": "s-vm", "namespace": NAMESPACE, "labels": {"round": round}},
            "spec": {"running": true, "template": {"spec": {
                "domain": {"cpu": {"cores": 1}},
                "volumes": [{"name": "ci", "cloudInitNoCloud": {"userData": vm_marker}}]}}}}),
        vec![vm_marker],
    ));
    out
}

/// Receives webhook bodies.
pub(crate) async fn receiver() -> (String, Arc<Mutex<Vec<String>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let bodies = got.clone();
    let app = axum::Router::new().route(
        "/hook/path-key-ZQXhook",
        axum::routing::post(move |body: String| {
            let bodies = bodies.clone();
            async move {
                bodies.lock().push(body);
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!(
        "http://{}/hook/path-key-ZQXhook",
        listener.local_addr().expect("addr")
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, got)
}

/// Every query field returning a connection, selecting every field of its nodes that takes no
/// required argument (objects one level deep), built from introspection.
async fn typed_queries(client: &reqwest::Client, base: &str) -> Vec<String> {
    let intro = r#"{ __schema { queryType { name } types { name kind fields { name
        args { type { kind } } type { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } }"#;
    let body: Value = client
        .post(format!("{base}/graphql"))
        .bearer_auth(API_KEY)
        .json(&json!({ "query": intro }))
        .send()
        .await
        .expect("introspect")
        .json()
        .await
        .expect("json");
    let types = body["data"]["__schema"]["types"]
        .as_array()
        .expect("types")
        .clone();
    let by_name = |n: &str| types.iter().find(|t| t["name"] == n).cloned();
    let named = |mut t: &Value| {
        while t["name"].is_null() && !t["ofType"].is_null() {
            t = &t["ofType"];
        }
        (
            t["kind"].as_str().unwrap_or_default().to_string(),
            t["name"].as_str().unwrap_or_default().to_string(),
        )
    };
    let no_required_args = |f: &Value| {
        f["args"]
            .as_array()
            .is_none_or(|a| a.iter().all(|x| x["type"]["kind"] != "NON_NULL"))
    };
    // Fields of an object type (or each member of an interface/union) to `depth` levels.
    fn selection(
        ty: &str,
        depth: usize,
        by_name: &dyn Fn(&str) -> Option<Value>,
        named: &dyn Fn(&Value) -> (String, String),
        ok: &dyn Fn(&Value) -> bool,
    ) -> String {
        let Some(t) = by_name(ty) else {
            return "__typename".into();
        };
        let mut out = vec!["__typename".to_string()];
        for f in t["fields"].as_array().into_iter().flatten() {
            if !ok(f) {
                continue;
            }
            let name = f["name"].as_str().unwrap_or_default();
            let (kind, inner) = named(&f["type"]);
            match kind.as_str() {
                "SCALAR" | "ENUM" => out.push(name.to_string()),
                "OBJECT" if depth > 0 && !inner.ends_with("Connection") => {
                    out.push(format!(
                        "{name} {{ {} }}",
                        selection(&inner, depth - 1, by_name, named, ok)
                    ));
                }
                _ => {}
            }
        }
        out.join(" ")
    }
    let query = by_name("Query").expect("Query");
    let mut out = Vec::new();
    for f in query["fields"].as_array().into_iter().flatten() {
        let (_, inner) = named(&f["type"]);
        if !inner.ends_with("Connection") || inner == "HistoryEventConnection" {
            continue;
        }
        let Some(conn) = by_name(&inner) else {
            continue;
        };
        let node_type = conn["fields"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|x| x["name"] == "nodes")
            .map(|x| named(&x["type"]).1)
            .unwrap_or_default();
        out.push(format!(
            "{{ {}(first: 500) {{ nodes {{ {} }} }} }}",
            f["name"].as_str().unwrap_or_default(),
            selection(&node_type, 1, &by_name, &named, &no_required_args)
        ));
    }
    out
}

/// The API key the test's clients send (it must never appear anywhere either).
const API_KEY: &str = "ZQXapikey-0123456789abcdef";

async fn post(client: &reqwest::Client, base: &str, query: &str) -> String {
    client
        .post(format!("{base}/graphql"))
        .bearer_auth(API_KEY)
        .json(&json!({ "query": query }))
        .send()
        .await
        .expect("query")
        .text()
        .await
        .expect("body")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credential_is_found_anywhere() {
    let api = KubeApi::start(&kube_api::watched_resources(), Duration::from_millis(200)).await;
    let first = planted_objects("a");
    for (plural, obj, _) in &first {
        api.apply(plural, obj.clone());
    }
    let h = Harness::unstarted(api);
    let (hook_url, bodies) = receiver().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let log = h.dir.join("log");
    let keys = h.dir.join("keys");
    std::fs::write(&keys, format!("tester admin {API_KEY}\n")).expect("keys");
    let db_url = format!("sqlite://{}/v.db", h.dir.display());
    let mut events: Vec<String> = vitistack::history::webhooks::DEFAULT_EVENTS
        .iter()
        .map(|e| e.to_string())
        .collect();
    for k in Kind::ALL {
        for c in ["created", "updated", "deleted"] {
            events.push(format!("{}.{c}", k.name().to_ascii_lowercase()));
        }
    }
    let mut child = vitistack_testkit::proc::command(env!("CARGO_BIN_EXE_vitistack"))
        .env("KUBECONFIG", h.dir.join("kubeconfig"))
        .env("KUBE_CONTEXT", "test")
        .env("PORT", port.to_string())
        .env("BIND_ADDRESS", "127.0.0.1")
        .env("DATABASE_URL", &db_url)
        .env("LOG_LEVEL", "debug")
        .env("LOG_JSON_LOGGING", "true")
        .env("API_KEYS_FILE", &keys)
        .env("METRICS_REQUIRE_KEY", "true")
        .env("HISTORY_FLUSH_INTERVAL_MS", "20")
        .env("WEBHOOK_URLS", &hook_url)
        .env("WEBHOOK_EVENTS", events.join(","))
        .env("WEBHOOK_SECRET", "hmac-ZQXsigning")
        .stdout(std::fs::File::create(&log).expect("log"))
        .stderr(std::fs::File::create(h.dir.join("err")).expect("log"))
        .spawn()
        .map(vitistack_testkit::proc::TestChild::from)
        .expect("start the binary");
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Ok(r) = client.get(format!("{base}/ready")).send().await
            && r.status().is_success()
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never ready: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A subscriber with every object, raw, from the snapshot on.
    let mut ws = super::open_ws(&format!("http://127.0.0.1:{port}")).await;
    use tokio_tungstenite::tungstenite::Message;
    let frames = Arc::new(Mutex::new(Vec::<String>::new()));
    ws.send(Message::Text(
        json!({"type": "connection_init", "payload": {"Authorization": format!("Bearer {API_KEY}")}})
            .to_string()
            .into(),
    ))
    .await
    .expect("init");
    let fragments: String = [
        "ClusterStorage",
        "ClusterStorageClass",
        "ControlPlaneVirtualSharedIP",
        "EtcdBackup",
        "Host",
        "IPAllocation",
        "KubernetesCluster",
        "KubernetesProvider",
        "KubevirtConfig",
        "Machine",
        "MachineClass",
        "MachineProvider",
        "NetworkConfiguration",
        "NetworkNamespace",
        "ProxmoxConfig",
        "VirtualMachine",
        "VirtualMachineInstance",
        "Vitistack",
    ]
    .iter()
    .map(|t| format!(" ... on {t} {{ raw }}"))
    .collect();
    let sub = format!(
        "subscription {{ resourceChanged(snapshot: true) {{ type object {{{fragments} }} }} }}"
    );
    ws.send(Message::Text(
        json!({"id": "s", "type": "subscribe", "payload": {"query": sub}})
            .to_string()
            .into(),
    ))
    .await
    .expect("subscribe");
    let sink = frames.clone();
    let reader = tokio::spawn(async move {
        while let Some(Ok(m)) = ws.next().await {
            if let Message::Text(t) = m {
                sink.lock().push(t.to_string());
            }
        }
    });
    let synced =
        |frames: &Arc<Mutex<Vec<String>>>| frames.lock().iter().any(|f| f.contains("SYNCED"));
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !synced(&frames) {
        assert!(tokio::time::Instant::now() < deadline, "no snapshot");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }

    // Every object is in the graph (so the markers had their chance), read through every field.
    let mut answers = String::new();
    for q in typed_queries(&client, &base).await {
        answers.push_str(&post(&client, &base, &q).await);
    }
    for (plural, obj, _) in &first {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        assert!(answers.contains(name), "{plural} {name} is not served");
    }

    // The same lists, kept with the moment they answer for: once the objects have changed and
    // gone, `at` that moment must give this answer again (from the timeline, redacted as well).
    let lists: Vec<String> = typed_queries(&client, &base)
        .await
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let body = q.trim().trim_start_matches('{').trim_end_matches('}');
            format!(
                "l{i}: {}",
                body.trim().replace("(first: 500)", "(first: 20)")
            )
        })
        .collect();
    let lists = lists.join(" ");
    let then_live: Value =
        serde_json::from_str(&post(&client, &base, &format!("{{ {lists} }}")).await).expect("json");
    let moment = vitistack::history::rfc3339(vitistack::history::now_ms());

    // The objects change (new markers) and then go: history rows and webhooks for each.
    let second = planted_objects("b");
    for (plural, obj, _) in &second {
        h.api.apply(plural, obj.clone());
    }
    for (plural, obj, _) in &second {
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        h.api.delete(plural, ns, name);
    }
    let wanted = first.len() * 2;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let history = loop {
        let text = post(
            &client,
            &base,
            "{ events(first: 500) { nodes { type kind name diff phaseBefore phaseAfter } } }",
        )
        .await;
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let n = v["data"]["events"]["nodes"].as_array().map_or(0, Vec::len);
        if n >= wanted && bodies.lock().len() >= wanted {
            break text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{n} history events and {} webhooks of {wanted}",
            bodies.lock().len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    answers.push_str(&history);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let text = post(
            &client,
            &base,
            &format!("{{ at(time: \"{moment}\") {{ {lists} }} }}"),
        )
        .await;
        let v: Value = serde_json::from_str(&text).expect("json");
        if v["data"]["at"] == then_live["data"] {
            answers.push_str(&text);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "at {moment}: {}\nlive then: {then_live}",
            &text[..text.len().min(3000)]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    answers.push_str(&post(&client, &base, "{ sources { kinds { name error } } }").await);
    let metrics = client
        .get(format!("{base}/metrics"))
        .bearer_auth(API_KEY)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    let database = client
        .get(format!("{base}/health/database"))
        .send()
        .await
        .expect("db health")
        .text()
        .await
        .expect("text");
    // Stop the server (its last writes land), then read what it left behind.
    let _ = std::process::Command::new("kill")
        .arg(child.id().to_string())
        .status();
    let _ = child.wait();
    reader.abort();
    let mut stored = String::new();
    for table in ["objects", "events", "webhook_deliveries"] {
        stored.push_str(&crate::db_text::table_text(&db_url, table).await);
    }
    let logs = std::fs::read_to_string(&log).unwrap_or_default()
        + &std::fs::read_to_string(h.dir.join("err")).unwrap_or_default();
    assert!(
        logs.contains("\"level\":\"debug\""),
        "the server logged at debug level"
    );
    let frames = frames.lock().join("\n");
    assert!(
        frames.matches("\"DELETED\"").count() >= first.len(),
        "the subscriber saw every deletion"
    );
    let bodies = bodies.lock().join("\n");
    let places = [
        ("GraphQL answers", &answers),
        ("subscription frames", &frames),
        ("webhook bodies", &bodies),
        ("the database", &stored),
        ("the server's log", &logs),
        ("/metrics", &metrics),
        ("/health/database", &database),
    ];
    let mut planted = 0;
    for (_, _, markers) in first.iter().chain(&second) {
        for m in markers {
            planted += 1;
            for (place, text) in &places {
                assert!(!text.contains(m.as_str()), "{m} found in {place}");
            }
        }
    }
    for (place, text) in &places {
        for secret in ["ZQXhook", "hmac-ZQXsigning", API_KEY] {
            assert!(!text.contains(secret), "{secret} found in {place}");
        }
    }
    assert!(planted > 60, "{planted} markers planted");
}
