//! Authentication and abuse limits as a client meets them: API keys on HTTP (POST and GET),
//! WebSocket (`connection_init` payload or the upgrade's header) and SSE; anonymous read off by
//! default; a revoked or expired key closing its sockets with 4403 (a demoted one with 4205); rate limits per principal
//! counting operations; trusted proxies; Origin refusal and CORS; the introspection, GraphiQL
//! and `/metrics` switches.

use std::path::PathBuf;

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::protocol::SseReader;
use super::{TempSqlite, TestApp, Ws, recv, send_json, spawn};

pub const VIEWER: &str = "viewer-key-0123456789abcdef";
pub const OPERATOR: &str = "operator-key-0123456789abcdef";
pub const ADMIN: &str = "admin-key-0123456789abcdef";

/// A keys file in the temp directory, removed when dropped.
pub struct KeysFile(PathBuf);

impl KeysFile {
    pub fn new(text: &str) -> KeysFile {
        let path = std::env::temp_dir().join(format!("vitistack-keys-{}", uuid::Uuid::new_v4()));
        std::fs::write(&path, text).expect("write keys");
        KeysFile(path)
    }

    pub fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 path")
    }

    /// Replace the file's text at once (write then rename, as a Secret volume does).
    fn rewrite(&self, text: &str) {
        let tmp = self.0.with_extension("new");
        std::fs::write(&tmp, text).expect("write keys");
        std::fs::rename(&tmp, &self.0).expect("rename keys");
    }
}

impl Drop for KeysFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub fn three_keys() -> String {
    let hashed: String = sha256_hex(OPERATOR);
    format!(
        "# name role key\nci viewer {VIEWER}\nops operator sha256:{hashed}\nroot admin {ADMIN}\n"
    )
}

fn sha256_hex(s: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// POST a query with an optional key; status, headers and body.
pub async fn post(
    app: &TestApp,
    key: Option<&str>,
    query: &str,
) -> (u16, reqwest::header::HeaderMap, Value) {
    post_vars(app, key, query, json!({})).await
}

/// [`post`] with variables.
pub async fn post_vars(
    app: &TestApp,
    key: Option<&str>,
    query: &str,
    variables: Value,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut req = app
        .client
        .post(format!("{}/graphql", app.base))
        .json(&json!({"query": query, "variables": variables}));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let res = req.send().await.expect("request");
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    (status, headers, res.json().await.unwrap_or(Value::Null))
}

/// Open a graphql-transport-ws socket, with `header` as the upgrade's `Authorization` and
/// `origin` as its `Origin`.
pub async fn open(
    app: &TestApp,
    header: Option<&str>,
    origin: Option<&str>,
) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
    let url = format!("{}/graphql/ws", app.base.replacen("http", "ws", 1));
    let mut req = url.into_client_request().expect("request");
    let h = req.headers_mut();
    h.insert(
        "Sec-WebSocket-Protocol",
        "graphql-transport-ws".parse().expect("h"),
    );
    if let Some(v) = header {
        h.insert("Authorization", v.parse().expect("h"));
    }
    if let Some(o) = origin {
        h.insert("Origin", o.parse().expect("h"));
    }
    tokio_tungstenite::connect_async(req)
        .await
        .map(|(ws, _)| ws)
}

/// `connection_init` with `payload`; the answer (ack or close).
pub async fn init(ws: &mut Ws, payload: Value) -> Value {
    send_json(ws, json!({"type": "connection_init", "payload": payload})).await;
    recv(ws).await
}

const ME: &str = "{ me { name role anonymous } }";
const SUB: &str = "subscription { resourceChanged(kinds: [\"Machine\"], namespace: \"auth\", snapshot: true) { type } }";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_transport_needs_a_key_and_knows_its_principal() {
    let keys = KeysFile::new(&three_keys());
    let app = spawn(&["--api-keys-file", keys.path()]).await;

    // No key: 401 with WWW-Authenticate, no data; a wrong key too.
    for key in [None, Some("not-a-key-0123456789")] {
        let (status, headers, body) = post(&app, key, "{ sequence }").await;
        assert_eq!(status, 401, "{body}");
        assert_eq!(headers["www-authenticate"], "Bearer realm=\"vitistack\"");
        assert_eq!(
            body["errors"][0]["extensions"]["code"], "UNAUTHENTICATED",
            "{body}"
        );
        assert!(body.get("data").is_none(), "{body}");
    }
    let (_, _, body) = post(&app, None, "{ sequence }").await;
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Authorization: Bearer")),
        "{body}"
    );
    // Each key is its principal with its role (the operator's key is kept only as its hash).
    for (key, name, role) in [
        (VIEWER, "key:ci", "VIEWER"),
        (OPERATOR, "key:ops", "OPERATOR"),
        (ADMIN, "key:root", "ADMIN"),
    ] {
        let (status, _, body) = post(&app, Some(key), ME).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["data"]["me"],
            json!({"name": name, "role": role, "anonymous": false})
        );
    }
    // GET with parameters.
    let url = format!("{}/graphql?query=%7B%20sequence%20%7D", app.base);
    let res = app.client.get(&url).send().await.expect("get");
    assert_eq!(res.status().as_u16(), 401);
    let res = app
        .client
        .get(&url)
        .bearer_auth(VIEWER)
        .send()
        .await
        .expect("get");
    assert_eq!(res.status().as_u16(), 200);

    // The probes and metrics stay open.
    for path in ["/health/live", "/ready", "/metrics", "/health"] {
        assert_eq!(app.get(path).await.0, 200, "{path}");
    }

    // SSE: refused without a key, served with one.
    let stream = format!("{}/graphql/stream", app.base);
    let res = app
        .client
        .post(&stream)
        .json(&json!({"query": ME}))
        .send()
        .await
        .expect("sse");
    assert_eq!(res.status().as_u16(), 401);
    let res = app
        .client
        .post(&stream)
        .bearer_auth(OPERATOR)
        .json(&json!({"query": ME}))
        .send()
        .await
        .expect("sse");
    assert_eq!(res.status().as_u16(), 200);
    let (event, v) = SseReader::new(res).next().await;
    assert_eq!(
        (event.as_str(), &v["data"]["me"]["name"]),
        ("next", &json!("key:ops"))
    );

    // WebSocket: no credential, or a wrong one, closes with 4403.
    for payload in [
        json!({}),
        json!({"Authorization": "Bearer not-a-key-0123456789"}),
    ] {
        let mut ws = open(&app, None, None).await.expect("upgrade");
        let v = init(&mut ws, payload).await;
        assert_eq!(v["close"], 4403, "{v}");
        assert!(
            v["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("Forbidden")),
            "{v}"
        );
    }
    // The key in the payload (every spelling clients use), or on the upgrade request.
    for payload in [
        json!({"Authorization": format!("Bearer {VIEWER}")}),
        json!({"authorization": VIEWER}),
        json!({"headers": {"Authorization": format!("Bearer {VIEWER}")}}),
        json!({"token": VIEWER}),
    ] {
        let mut ws = open(&app, None, None).await.expect("upgrade");
        assert_eq!(
            init(&mut ws, payload.clone()).await["type"],
            "connection_ack",
            "{payload}"
        );
        send_json(
            &mut ws,
            json!({"id": "1", "type": "subscribe", "payload": {"query": ME}}),
        )
        .await;
        let v = recv(&mut ws).await;
        assert_eq!(v["payload"]["data"]["me"]["name"], "key:ci", "{v}");
    }
    let mut ws = open(&app, Some(&format!("Bearer {ADMIN}")), None)
        .await
        .expect("upgrade");
    assert_eq!(init(&mut ws, json!(null)).await["type"], "connection_ack");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_read_only_from_the_trusted_network() {
    // The test client is 127.0.0.1: trusted here...
    let app = spawn(&["--anonymous-read-from", "127.0.0.0/8"]).await;
    let (status, _, body) = post(&app, None, ME).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["data"]["me"],
        json!({"name": "anonymous", "role": "VIEWER", "anonymous": true})
    );
    let mut ws = open(&app, None, None).await.expect("upgrade");
    assert_eq!(init(&mut ws, json!({})).await["type"], "connection_ack");
    app.stop().await;
    // ...and not here.
    let app = spawn(&["--anonymous-read-from", "10.0.0.0/8"]).await;
    assert_eq!(post(&app, None, ME).await.0, 401);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_or_expired_key_closes_its_sockets_with_4403() {
    let soon = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(3);
    let keys = KeysFile::new(&format!(
        "{}brief viewer brief-key-0123456789abcdef expires={soon}\n",
        three_keys()
    ));
    let app = spawn(&[
        "--api-keys-file",
        keys.path(),
        "--api-keys-reload-seconds",
        "0.2",
    ])
    .await;

    let mut sockets = Vec::new();
    for key in [VIEWER, OPERATOR, "brief-key-0123456789abcdef"] {
        let mut ws = open(&app, None, None).await.expect("upgrade");
        assert_eq!(
            init(&mut ws, json!({"token": key})).await["type"],
            "connection_ack"
        );
        send_json(
            &mut ws,
            json!({"id": "s", "type": "subscribe", "payload": {"query": SUB}}),
        )
        .await;
        assert_eq!(
            recv(&mut ws).await["payload"]["data"]["resourceChanged"]["type"],
            "SYNCED"
        );
        sockets.push(ws);
    }
    let sse = app
        .client
        .post(format!("{}/graphql/stream", app.base))
        .bearer_auth(VIEWER)
        .json(&json!({"query": SUB}))
        .send()
        .await
        .expect("sse");
    let mut sse = SseReader::new(sse);
    assert_eq!(
        sse.next().await.1["data"]["resourceChanged"]["type"],
        "SYNCED"
    );

    // The expiring key's socket closes on its own once the time has come.
    let v = recv(&mut sockets[2]).await;
    assert_eq!(v["close"], 4403, "{v}");
    assert!(jiff::Timestamp::now() >= soon);

    // The viewer key is removed from the file: its socket and stream end, the others stay.
    keys.rewrite(&three_keys().replace(&format!("ci viewer {VIEWER}\n"), ""));
    let v = recv(&mut sockets[0]).await;
    assert_eq!(
        v,
        json!({"close": 4403, "reason": "Forbidden: the key was revoked or has expired"})
    );
    let (event, v) = sse.next().await;
    assert_eq!(
        (event.as_str(), &v["errors"][0]["extensions"]["code"]),
        ("next", &json!("FORBIDDEN"))
    );
    assert_eq!(sse.next().await.0, "complete");
    send_json(&mut sockets[1], json!({"type": "ping"})).await;
    assert_eq!(
        recv(&mut sockets[1]).await["type"],
        "pong",
        "the operator's socket stays open"
    );
    assert_eq!(post(&app, Some(VIEWER), ME).await.0, 401);

    // A file being rewritten badly keeps the keys in force.
    keys.rewrite("ops operator short\n");
    send_json(&mut sockets[1], json!({"type": "ping"})).await;
    assert_eq!(recv(&mut sockets[1]).await["type"], "pong");
    assert_eq!(post(&app, Some(OPERATOR), ME).await.0, 200);

    // The operator key is demoted: its socket closes saying its access changed (not refused),
    // and the next one is a viewer's.
    keys.rewrite(&three_keys().replace("ops operator", "ops viewer"));
    assert_eq!(
        recv(&mut sockets[1]).await,
        json!({"close": 4205, "reason": "Access changed: connect again to see what you may see now"})
    );
    assert_eq!(
        post(&app, Some(OPERATOR), ME).await.2["data"]["me"]["role"],
        "VIEWER"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_count_operations_per_principal_and_role() {
    let keys = KeysFile::new(&three_keys());
    let app = spawn(&[
        "--api-keys-file",
        keys.path(),
        "--rate-limit",
        "60/3",
        "--rate-limit-admin",
        "0",
        "--anonymous-read-from",
        "0.0.0.0/0",
        "--trusted-proxies",
        "127.0.0.1/32",
    ])
    .await;
    for _ in 0..3 {
        assert_eq!(post(&app, Some(VIEWER), "{ sequence }").await.0, 200);
    }
    let (status, headers, body) = post(&app, Some(VIEWER), "{ sequence }").await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["errors"][0]["extensions"]["code"], "RATE_LIMITED");
    let message = body["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("key:ci")
            && message.contains("60 operations per minute with a burst of 3"),
        "{message}"
    );
    let retry: u64 = headers["retry-after"]
        .to_str()
        .expect("h")
        .parse()
        .expect("seconds");
    assert!((1..=2).contains(&retry), "{retry}");

    // A subscription counts as an operation too: the operator's allowance on a socket.
    let mut ws = open(&app, None, None).await.expect("upgrade");
    assert_eq!(
        init(&mut ws, json!({"token": OPERATOR})).await["type"],
        "connection_ack"
    );
    for id in ["1", "2", "3"] {
        send_json(
            &mut ws,
            json!({"id": id, "type": "subscribe", "payload": {"query": "{ sequence }"}}),
        )
        .await;
        assert_eq!(recv(&mut ws).await["type"], "next");
        assert_eq!(recv(&mut ws).await["type"], "complete");
    }
    send_json(
        &mut ws,
        json!({"id": "4", "type": "subscribe", "payload": {"query": "{ sequence }"}}),
    )
    .await;
    let v = recv(&mut ws).await;
    assert_eq!(
        (&v["type"], &v["payload"][0]["extensions"]["code"]),
        (&json!("error"), &json!("RATE_LIMITED")),
        "{v}"
    );
    // ...and the socket stays open.
    send_json(&mut ws, json!({"type": "ping"})).await;
    assert_eq!(recv(&mut ws).await["type"], "pong");

    // The admin role is unlimited here.
    for _ in 0..20 {
        assert_eq!(post(&app, Some(ADMIN), "{ sequence }").await.0, 200);
    }
    // Anonymous clients count per address, taken from X-Forwarded-For of the trusted proxy.
    let from = |addr: &'static str| {
        app.client
            .post(format!("{}/graphql", app.base))
            .header("x-forwarded-for", addr)
            .json(&json!({"query": "{ sequence }"}))
            .send()
    };
    for _ in 0..3 {
        assert_eq!(
            from("198.51.100.1").await.expect("r").status().as_u16(),
            200
        );
    }
    let res = from("198.51.100.1").await.expect("r");
    assert_eq!(res.status().as_u16(), 429);
    let body: Value = res.json().await.expect("json");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("anonymous@198.51.100.1")),
        "{body}"
    );
    assert_eq!(
        from("198.51.100.2").await.expect("r").status().as_u16(),
        200
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origins_switches_and_metrics_behind_a_key() {
    let keys = KeysFile::new(&three_keys());
    let app = spawn(&[
        "--api-keys-file",
        keys.path(),
        "--cors-allowed-origins",
        "https://ops.example.com",
        "--introspection",
        "false",
        "--graphiql",
        "false",
        "--metrics-require-key",
        "true",
    ])
    .await;
    // A page from another origin cannot open a socket; the page's own origin and an allowed
    // one can, and so can a client that sends no Origin.
    let host = app.base.trim_start_matches("http://").to_string();
    match open(&app, None, Some("https://evil.example.org")).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(res)) => {
            assert_eq!(res.status().as_u16(), 403)
        }
        other => panic!("a foreign origin was let in: {:?}", other.map(|_| ())),
    }
    for origin in [
        Some(format!("http://{host}")),
        Some("https://ops.example.com".into()),
        None,
    ] {
        let mut ws = open(&app, None, origin.as_deref())
            .await
            .expect("allowed origin");
        assert_eq!(
            init(&mut ws, json!({"token": VIEWER})).await["type"],
            "connection_ack"
        );
    }
    // CORS: the allowed origin gets its preflight answered, another does not.
    let preflight = |origin: &'static str| {
        app.client
            .request(reqwest::Method::OPTIONS, format!("{}/graphql", app.base))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization,content-type",
            )
            .send()
    };
    let res = preflight("https://ops.example.com")
        .await
        .expect("preflight");
    assert_eq!(
        res.headers()["access-control-allow-origin"],
        "https://ops.example.com"
    );
    let res = preflight("https://evil.example.org")
        .await
        .expect("preflight");
    assert!(res.headers().get("access-control-allow-origin").is_none());

    // Introspection and GraphiQL are off; ordinary queries are not.
    let (_, _, body) = post(&app, Some(VIEWER), "{ __schema { queryType { name } } }").await;
    assert_eq!(
        body["errors"][0]["extensions"]["code"], "INTROSPECTION_OFF",
        "{body}"
    );
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("INTROSPECTION=false")),
        "{body}"
    );
    assert_eq!(post(&app, Some(VIEWER), "{ sequence }").await.0, 200);
    assert_eq!(app.get("/graphql").await.0, 404);

    // /metrics needs a key now; the probes do not.
    assert_eq!(app.get("/metrics").await.0, 401);
    let res = app
        .client
        .get(format!("{}/metrics", app.base))
        .bearer_auth(VIEWER)
        .send()
        .await
        .expect("metrics");
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(app.get("/health/live").await.0, 200);
    assert_eq!(app.get("/ready").await.0, 200);
    app.stop().await;
}

#[tokio::test]
async fn a_bad_keys_file_stops_the_start_naming_the_line() {
    let keys = KeysFile::new("ci viewer good-key-0123456789\nops wizard other-key-0123456789\n");
    let cfg = {
        use clap::Parser;
        #[derive(Parser)]
        struct Args {
            #[command(flatten)]
            cfg: vitistack::config::ServeConfig,
        }
        let db = TempSqlite::default();
        Args::try_parse_from([
            "t",
            "--api-keys-file",
            keys.path(),
            "--database-url",
            &db.url(),
        ])
        .expect("args")
        .cfg
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let e = match vitistack::app::start(&cfg, listener).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("started with a bad keys file"),
    };
    assert!(
        e.contains(&format!(
            "{}:2: the role (second column) must be viewer, operator or admin",
            keys.path()
        )),
        "{e}"
    );
    assert!(!e.contains("other-key"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_serves_https_and_wss_with_the_configured_certificate() {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let dir = std::env::temp_dir().join(format!("vitistack-tls-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).expect("cert");
    std::fs::write(&key, certified.signing_key.serialize_pem()).expect("key");
    let keys = KeysFile::new(&three_keys());
    let app = spawn(&[
        "--api-keys-file",
        keys.path(),
        "--tls-cert-file",
        cert.to_str().expect("utf-8"),
        "--tls-key-file",
        key.to_str().expect("utf-8"),
    ])
    .await;
    let addr = app.running().addr;
    let client = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(certified.cert.pem().as_bytes()).expect("pem"),
        )
        .resolve("localhost", addr)
        .build()
        .expect("client");
    let url = format!("https://localhost:{}/graphql", addr.port());
    let res = client
        .post(&url)
        .bearer_auth(VIEWER)
        .json(&json!({"query": ME}))
        .send()
        .await
        .expect("https");
    assert_eq!(res.status().as_u16(), 200);
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["data"]["me"]["name"], "key:ci");
    // The same port does not speak plain HTTP.
    assert!(
        app.client
            .get(format!("http://{addr}/health/live"))
            .send()
            .await
            .is_err()
    );
    // A client that does not trust the certificate is refused at the handshake.
    let untrusting = reqwest::Client::builder()
        .resolve("localhost", addr)
        .build()
        .expect("client");
    assert!(
        untrusting
            .get(format!("https://localhost:{}/health/live", addr.port()))
            .send()
            .await
            .is_err()
    );
    app.stop().await;

    // A key that does not match the certificate stops the start, naming both settings.
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    std::fs::write(&key, other.signing_key.serialize_pem()).expect("key");
    let cfg = {
        use clap::Parser;
        #[derive(Parser)]
        struct Args {
            #[command(flatten)]
            cfg: vitistack::config::ServeConfig,
        }
        let db = TempSqlite::default();
        Args::try_parse_from([
            "t",
            "--database-url",
            &db.url(),
            "--tls-cert-file",
            cert.to_str().expect("utf-8"),
            "--tls-key-file",
            key.to_str().expect("utf-8"),
        ])
        .expect("args")
        .cfg
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    match vitistack::app::start(&cfg, listener).await {
        Err(e) => assert!(
            e.to_string().contains("TLS_CERT_FILE / TLS_KEY_FILE"),
            "{e}"
        ),
        Ok(_) => panic!("started with a key that does not match"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// TLS_CA_FILE (the old operator's `tls.caFile`): every client must present a certificate signed
/// by one of its CAs; TLS_MIN_VERSION (`tls.minVersion`) refuses older protocol versions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_ca_file_asks_every_client_for_a_certificate_and_min_version_holds() {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let authority = || {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA")
    };
    let (ca, stranger_ca) = (authority(), authority());
    let leaf = |name: &str, by: &CertifiedIssuer<'_, KeyPair>| {
        let key = KeyPair::generate().expect("key");
        let cert = CertificateParams::new(vec![name.to_string()])
            .expect("params")
            .signed_by(&key, by)
            .expect("signed");
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf("localhost", &ca);
    let dir = std::env::temp_dir().join(format!("vitistack-mtls-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write");
        p.to_str().expect("utf-8").to_string()
    };
    let (cert, key, ca_file) = (
        path("cert.pem", &server_cert),
        path("key.pem", &server_key),
        path("ca.pem", &ca.pem()),
    );
    let keys = KeysFile::new(&three_keys());
    let client = |identity: Option<(String, String)>, max12: bool, addr: std::net::SocketAddr| {
        let mut b = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).expect("ca"))
            .resolve("localhost", addr);
        if let Some((c, k)) = identity {
            b = b.identity(reqwest::Identity::from_pem(format!("{c}{k}").as_bytes()).expect("id"));
        }
        if max12 {
            b = b.max_tls_version(reqwest::tls::Version::TLS_1_2);
        }
        b.build().expect("client")
    };
    let me = async |c: reqwest::Client, port: u16| {
        c.post(format!("https://localhost:{port}/graphql"))
            .bearer_auth(VIEWER)
            .json(&json!({"query": ME}))
            .send()
            .await
            .map(|r| r.status().as_u16())
    };

    let with_tls = async |extra: &[&str]| {
        let mut args = vec![
            "--api-keys-file",
            keys.path(),
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
        ];
        args.extend_from_slice(extra);
        spawn(&args).await
    };

    let app = with_tls(&["--tls-ca-file", &ca_file]).await;
    let addr = app.running().addr;
    let ours = leaf("client", &ca);
    let theirs = leaf("client", &stranger_ca);
    assert_eq!(
        me(client(Some(ours.clone()), false, addr), addr.port())
            .await
            .expect("a client with a certificate of the CA is served"),
        200
    );
    assert!(
        me(client(None, false, addr), addr.port()).await.is_err(),
        "a client without a certificate must be refused at the handshake"
    );
    assert!(
        me(client(Some(theirs), false, addr), addr.port())
            .await
            .is_err(),
        "a certificate of another CA must be refused"
    );
    // TLS 1.2 is served by default.
    assert_eq!(
        me(client(Some(ours.clone()), true, addr), addr.port())
            .await
            .expect("1.2"),
        200
    );
    app.stop().await;

    let app = with_tls(&["--tls-min-version", "1.3"]).await;
    let addr = app.running().addr;
    assert_eq!(
        me(client(None, false, addr), addr.port())
            .await
            .expect("1.3"),
        200,
        "no CA file: no client certificate asked"
    );
    assert!(
        me(client(None, true, addr), addr.port()).await.is_err(),
        "a TLS 1.2 client must be refused with TLS_MIN_VERSION=1.3"
    );
    app.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_past_the_timeout_is_stopped_and_named() {
    use sqlx::Connection;
    // A history read that waits: another session holds the events table locked.
    let db = super::persistence::TestDb::postgres().await;
    let app = spawn(&[
        "--database-url",
        &db.url(),
        "--operation-timeout-seconds",
        "0.5",
    ])
    .await;
    const EVENTS: &str = "{ events(first: 5) { nodes { sequence } } }";
    super::eventually("the events table exists", || async {
        app.query(EVENTS, json!({})).await.get("errors").is_none()
    })
    .await;
    let mut holder = sqlx::PgConnection::connect(&db.url())
        .await
        .expect("connect");
    sqlx::query("BEGIN")
        .execute(&mut holder)
        .await
        .expect("begin");
    sqlx::query("LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
        .execute(&mut holder)
        .await
        .expect("lock");
    let res = app
        .client
        .post(format!("{}/graphql", app.base))
        .json(&json!({"query": EVENTS}))
        .send()
        .await
        .expect("request");
    assert_eq!(res.status().as_u16(), 504);
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["errors"][0]["extensions"]["code"], "TIMEOUT", "{body}");
    assert_eq!(
        body["errors"][0]["message"],
        "the operation ran longer than the limit of 0.5 s (OPERATION_TIMEOUT_SECONDS, API_TIMEOUT) and was stopped"
    );
    // The graph itself does not wait on the database.
    assert!(app.query("{ sequence }", json!({})).await["data"]["sequence"].is_u64());
    sqlx::query("ROLLBACK")
        .execute(&mut holder)
        .await
        .expect("rollback");
    // Once the lock is gone, history answers again (the statements that waited behind it go
    // first: on a loaded machine the first answer after may still be over the half second).
    super::eventually("history answering once the lock is gone", || async {
        app.query(EVENTS, json!({})).await.get("errors").is_none()
    })
    .await;
    app.stop().await;
}
