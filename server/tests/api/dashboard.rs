//! The dashboard's files as the browser gets them: embedded in the binary, the right content
//! types, gzip when asked for, cached forever under `/assets/` and revalidated for the page, deep
//! links answered with the app, and nothing of the API shadowed.

use crate::spawn;

/// The binary under test must carry the dashboard (the test command builds it first).
fn require_dashboard() {
    assert!(
        vitistack::http::assets::embedded(),
        "the server was built without web/dist: run scripts/build-web.sh (scripts/test.sh does)"
    );
}

/// `(path, content type)` of every file the page references.
fn referenced(index: &str) -> Vec<String> {
    index
        .split('"')
        .filter(|s| s.starts_with("/assets/"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn the_page_and_its_files_come_with_types_compression_and_cache_headers() {
    require_dashboard();
    let app = spawn(&["--demo"]).await;
    let res = app
        .client
        .get(format!("{}/", app.base))
        .send()
        .await
        .expect("GET /");
    assert_eq!(res.status(), 200);
    let h = res.headers().clone();
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    assert_eq!(
        h["cache-control"], "no-cache",
        "the page is revalidated, so a new build shows at once"
    );
    let csp = h["content-security-policy"].to_str().expect("csp");
    assert!(
        csp.contains("default-src 'self'") && csp.contains("connect-src 'self'"),
        "{csp}"
    );
    let etag = h["etag"].clone();
    let index = res.text().await.expect("body");
    let files = referenced(&index);
    for ext in [".js", ".css", ".wasm"] {
        assert!(
            files.iter().any(|f| f.ends_with(ext)),
            "the page loads a {ext} file: {files:?}"
        );
    }

    // Revalidation: the same ETag answers 304 with no body.
    let again = app
        .client
        .get(format!("{}/", app.base))
        .header("if-none-match", etag)
        .send()
        .await
        .expect("GET / again");
    assert_eq!(again.status(), 304);

    for file in &files {
        let plain = app
            .client
            .get(format!("{}{file}", app.base))
            .send()
            .await
            .expect("asset");
        assert_eq!(plain.status(), 200, "{file}");
        let expected = match file.rsplit('.').next() {
            Some("js") => "text/javascript; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            Some("wasm") => "application/wasm",
            other => panic!("unexpected file type {other:?}"),
        };
        assert_eq!(plain.headers()["content-type"], expected, "{file}");
        assert_eq!(
            plain.headers()["cache-control"],
            "public, max-age=31536000, immutable",
            "{file}"
        );
        assert!(
            plain.headers().get("content-encoding").is_none(),
            "no gzip unless asked for"
        );
        let raw = plain.bytes().await.expect("bytes");

        let gz = app
            .client
            .get(format!("{}{file}", app.base))
            .header("accept-encoding", "br, gzip;q=0.8")
            .send()
            .await
            .expect("gzip asset");
        assert_eq!(gz.headers()["content-encoding"], "gzip", "{file}");
        assert_eq!(gz.headers()["vary"], "Accept-Encoding");
        let packed = gz.bytes().await.expect("bytes");
        assert!(
            packed.len() < raw.len(),
            "{file}: gzip {} ≥ plain {}",
            packed.len(),
            raw.len()
        );
        assert_eq!(&packed[..2], &[0x1f, 0x8b], "{file} is gzip data");

        let refused = app
            .client
            .get(format!("{}{file}", app.base))
            .header("accept-encoding", "gzip;q=0")
            .send()
            .await
            .expect("asset");
        assert!(
            refused.headers().get("content-encoding").is_none(),
            "gzip;q=0 refuses gzip"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn deep_links_load_the_app_and_the_api_is_never_shadowed() {
    require_dashboard();
    let app = spawn(&["--demo"]).await;
    let (_, index) = app.get("/").await;
    for page in [
        "/clusters?stage=NETWORK",
        "/clusters/team-a/web",
        "/hosts",
        "/objects/abc",
    ] {
        let (status, body) = app.get(page).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(body, index, "{page} answers with the app");
    }
    for missing in [
        "/assets/nope.js",
        "/favicon.ico",
        "/api/v9/unknown",
        "/health/unknown",
        "/graphql/unknown",
    ] {
        let (status, body) = app.get(missing).await;
        assert_eq!(status, 404, "{missing}");
        assert!(!body.contains("<html"), "{missing} is not the app");
    }
    let (status, body) = app.get("/health").await;
    assert_eq!(status, 200);
    assert!(body.contains("status"), "{body}");
    let res = app
        .client
        .post(format!("{}/clusters", app.base))
        .send()
        .await
        .expect("POST");
    assert_eq!(res.status(), 405);
    app.stop().await;
}
