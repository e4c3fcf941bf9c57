use super::{JsonStr, Now, component};

#[test]
fn strings_are_written_as_json_a_parser_reads_back() {
    for s in [
        "",
        "plain",
        "quote \" backslash \\ slash /",
        "lines\nand\ttabs\r",
        "control \u{1} \u{1f} and DEL \u{7f}",
        "ünïcödé ✓ and 🦀",
        "\u{0}",
    ] {
        let json = JsonStr(s).to_string();
        let back: String = serde_json::from_str(&json).expect(&json);
        assert_eq!(back, s, "{json}");
    }
}

#[test]
fn the_time_is_rfc_3339_and_moves_on() {
    let before = jiff::Timestamp::now();
    let first: jiff::Timestamp = Now.to_string().parse().expect("RFC 3339");
    let second: jiff::Timestamp = Now.to_string().parse().expect("RFC 3339");
    let after = jiff::Timestamp::now();
    assert!(before <= first && first <= second && second <= after);
}

#[test]
fn component_is_the_module_or_the_crate() {
    assert_eq!(component("vitistack::source::kube"), "source");
    assert_eq!(component("vitistack::http"), "http");
    assert_eq!(component("vitistack"), "vitistack");
    assert_eq!(component("sqlx::query"), "sqlx");
}

#[test]
fn an_access_line_is_one_json_object_with_every_field_escaped() {
    let request = super::RequestContext {
        id: axum::http::HeaderValue::from_static("req-1"),
        method: axum::http::Method::POST,
        uri: "/graphql/we\"ird\\path?q=1".parse().expect("uri"),
    };
    for (micros, duration) in [(1_234_567, "1234.567"), (5, "0.005"), (0, "0.000")] {
        let line = super::AccessLine {
            request: &request,
            status: 200,
            took: std::time::Duration::from_micros(micros),
            user_agent: "agent \"x\"\n\u{1}✓",
        };
        let mut text = String::new();
        super::write_access(&mut text, &line).expect("written");
        assert!(
            text.ends_with("}\n") && text.matches('\n').count() == 1,
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&text).expect(&text);
        assert_eq!(v["requestId"], "req-1");
        assert_eq!(v["method"], "POST");
        assert_eq!(v["path"], "/graphql/we\"ird\\path");
        assert_eq!(v["statusCode"], 200);
        assert_eq!(v["userAgent"], "agent \"x\"\n\u{1}✓");
        assert_eq!(v["message"], "POST /graphql/we\"ird\\path 200");
        assert_eq!(v["level"], "info");
        assert_eq!(v["component"], "http");
        // The duration in milliseconds with three decimals, as a JSON number.
        assert!(
            text.contains(&format!("\"duration\":{duration},")),
            "{text}"
        );
        let at: jiff::Timestamp = v["timestamp"]
            .as_str()
            .expect("time")
            .parse()
            .expect("RFC 3339");
        assert!(at <= jiff::Timestamp::now());
    }
}

#[test]
fn a_context_carried_into_a_task_holds_none_of_the_requests_buffer() {
    // hyper's URI and header values are slices of the connection's read buffer.
    let buffer =
        bytes::Bytes::from(b"GET /graphql/ws?x=1 HTTP/1.1\r\nX-Request-Id: abc\r\n".to_vec());
    let request = super::RequestContext {
        id: axum::http::HeaderValue::from_maybe_shared(buffer.slice(44..47)).expect("id"),
        method: axum::http::Method::GET,
        uri: axum::http::Uri::from_maybe_shared(buffer.slice(4..19)).expect("uri"),
    };
    let carried = super::RequestContext::detached(&request);
    assert_eq!(carried.fields(), request.fields());
    assert_eq!(carried.uri.query(), Some("x=1"));
    let inside = |p: *const u8| buffer.as_ptr_range().contains(&p);
    assert!(inside(request.uri.path().as_ptr()) && inside(request.id.as_bytes().as_ptr()));
    assert!(!inside(carried.uri.path().as_ptr()), "the path is its own");
    assert!(!inside(carried.id.as_bytes().as_ptr()), "the id is its own");
}
