//! The bodies of the fuzz targets (`fuzz/`, run with cargo-fuzz by `scripts/fuzz.sh`): each of our
//! own parsers of client and file input takes any bytes and answers with a value or an error, never
//! a panic, and what it accepts round-trips. The unit tests run the same bodies over the seed
//! inputs in `fuzz/seeds/` and the crashes the fuzzer found (kept as regression inputs there).

use async_graphql::connection::CursorType;

use crate::graphql::limits::{QueryLimits, complexity, count_tokens};
use crate::graphql::paging::Cursor;
use crate::graphql::selector::{Requirement, Selector, parse};
use crate::graphql::types::decode_id;

fn text(data: &[u8]) -> &str {
    std::str::from_utf8(data).unwrap_or_default()
}

/// A selector written back as text.
fn render(s: &Selector) -> String {
    let list = |v: &[String]| v.join(",");
    s.0.iter()
        .map(|r| match r {
            Requirement::Equals(k, v) => format!("{k}={v}"),
            Requirement::NotEquals(k, v) => format!("{k}!={v}"),
            Requirement::In(k, v) => format!("{k} in ({})", list(v)),
            Requirement::NotIn(k, v) => format!("{k} notin ({})", list(v)),
            Requirement::Exists(k) => k.clone(),
            Requirement::DoesNotExist(k) => format!("!{k}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Label selectors: parsed or refused; a parsed one reads the same written back, and matches
/// label sets made of its own keys and values without panicking.
pub fn label_selector(data: &[u8]) {
    let Ok(sel) = parse(text(data)) else { return };
    let again = parse(&render(&sel));
    assert_eq!(again.as_ref(), Ok(&sel), "{:?} written back", text(data));
    let mut labels = std::collections::BTreeMap::new();
    for r in &sel.0 {
        match r {
            Requirement::Equals(k, v) | Requirement::NotEquals(k, v) => {
                labels.insert(k.clone(), v.clone());
            }
            Requirement::In(k, v) | Requirement::NotIn(k, v) => {
                labels.insert(k.clone(), v.first().cloned().unwrap_or_default());
            }
            Requirement::Exists(k) | Requirement::DoesNotExist(k) => {
                labels.insert(k.clone(), String::new());
            }
        }
    }
    let _ = sel.matches(Some(&labels.into()));
    let _ = sel.matches(None);
}

/// Global ids: decoded or refused; a decoded one encodes back to an id naming the same object.
pub fn global_id(data: &[u8]) {
    let Ok(key) = decode_id(text(data)) else {
        return;
    };
    let id = crate::graphql::types::key_id(&key);
    assert_eq!(decode_id(&id).as_ref(), Ok(&key));
}

/// Connection cursors: decoded or refused; a decoded one encodes back to the same position.
pub fn cursor(data: &[u8]) {
    let Ok(c) = Cursor::decode_cursor(text(data)) else {
        return;
    };
    let again = Cursor::decode_cursor(&c.encode_cursor()).map(|d| d.encode_cursor());
    assert_eq!(again, Ok(c.encode_cursor()));
}

/// Manifest files: every document accepted or refused with its file named; an accepted file's
/// objects read back the same from their JSON.
pub fn manifest(data: &[u8]) {
    let report = crate::source::manifest::parse_str("fuzz.yaml", text(data));
    if !report.accepted() {
        assert!(report.objects.is_empty(), "a refused file keeps no object");
        for e in &report.errors {
            assert!(format!("{e}").contains("fuzz.yaml"), "{e} names the file");
        }
        return;
    }
    for o in &report.objects {
        let json = serde_json::to_string(&o.to_value()).unwrap_or_default();
        let again = crate::source::manifest::parse_str("again.json", &json);
        assert!(again.accepted(), "{json}: {:?}", again.errors);
        assert_eq!(again.objects.len(), 1);
        assert_eq!(again.objects[0].to_value(), o.to_value());
    }
}

/// Query documents: tokens are counted without reading past the limit, and a parsed document's
/// complexity is computed whatever its fragments and arguments.
pub fn document(data: &[u8]) {
    let text = text(data);
    let limits = QueryLimits::default();
    let n = count_tokens(text, limits.max_tokens);
    assert!(n <= limits.max_tokens + 1);
    if n > limits.max_tokens {
        return;
    }
    if let Ok(doc) = async_graphql::parser::parse_query(text) {
        let _ = complexity(&doc, &async_graphql::Variables::default());
    }
}

/// WebSocket messages: decoded or refused with a close code of the protocol, for either
/// subprotocol; a decoded message written back decodes the same; a subscription's payload reads
/// as a request or is refused with 4400; an init payload's token is found without panicking.
pub fn ws_message(data: &[u8]) {
    use crate::http::ws_message::{ClientMessage, Protocol, decode, init_token, request};
    for protocol in [Protocol::Transport, Protocol::Legacy] {
        let message = match decode(protocol, text(data)) {
            Ok(m) => m,
            Err(close) => {
                assert_eq!(close.code, 4400, "{close:?}");
                continue;
            }
        };
        let (ty, id, payload) = match (&message, protocol) {
            (ClientMessage::Init(p), _) => ("connection_init", None, Some(p)),
            (ClientMessage::Ping, _) => ("ping", None, None),
            (ClientMessage::Pong, _) => ("pong", None, None),
            (ClientMessage::Subscribe { id, payload }, Protocol::Transport) => {
                ("subscribe", Some(id), Some(payload))
            }
            (ClientMessage::Subscribe { id, payload }, Protocol::Legacy) => {
                ("start", Some(id), Some(payload))
            }
            (ClientMessage::Complete { id }, Protocol::Transport) => ("complete", Some(id), None),
            (ClientMessage::Complete { id }, Protocol::Legacy) => ("stop", Some(id), None),
            (ClientMessage::Terminate, _) => ("connection_terminate", None, None),
        };
        let mut back = serde_json::json!({"type": ty});
        if let Some(id) = id {
            back["id"] = serde_json::json!(id);
        }
        if let Some(p) = payload.filter(|p| !p.is_null()) {
            back["payload"] = p.clone();
        }
        assert_eq!(decode(protocol, &back.to_string()).as_ref(), Ok(&message));
        match &message {
            ClientMessage::Subscribe { id, payload } => {
                if let Err(close) = request(id, payload.clone()) {
                    assert_eq!(close.code, 4400);
                }
            }
            ClientMessage::Init(payload) => {
                let _ = init_token(payload);
            }
            _ => {}
        }
    }
}

/// API key files: accepted or refused naming the line; a refusal never quotes a key (any word of
/// 16 characters or more in the third column), and an accepted file finds each of its plain keys.
pub fn api_keys(data: &[u8]) {
    use crate::auth::keys::{KeySet, hash};
    let text = text(data);
    let column = |n: usize| {
        text.lines()
            .filter_map(move |l| l.split('#').next()?.split_whitespace().nth(n))
    };
    let names: Vec<&str> = column(0).collect();
    // Keys, and words that may be keys written in the wrong column (a key that is also written
    // as a name may be quoted as that name).
    let words: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split('#').next())
        .flat_map(|l| l.split_whitespace().skip(1))
        .filter(|w| w.len() >= 16 && !names.contains(w))
        .collect();
    // (Not the words our own messages are made of, nor what a time's error may quote.)
    let times: Vec<&str> = words
        .iter()
        .copied()
        .filter(|w| w.starts_with("expires="))
        .collect();
    let words: Vec<&str> = words
        .into_iter()
        .filter(|w| !w.contains(['`', '(', ')', '[', ']']) && !times.iter().any(|t| t.contains(w)))
        .collect();
    let keys: Vec<&str> = column(2)
        .filter(|k| k.len() >= 16 && !k.starts_with("sha256:") && !names.contains(k))
        .collect();
    match KeySet::parse(text, "keys") {
        Err(e) => {
            let e = e.to_string();
            assert!(e.starts_with("keys:"), "{e} names the line");
            for w in words {
                assert!(!e.contains(w), "{e} quotes what may be a key");
            }
        }
        Ok(set) => {
            for k in keys {
                assert!(set.holds(&hash(k)), "{k} is not found");
            }
        }
    }
}

#[cfg(test)]
mod tests;

/// Helm releases (a release Secret's or ConfigMap's `release`): read or refused, never a panic
/// and never past the size cap. The bytes are taken as what Helm base64-encodes (gzipped JSON or
/// JSON), and also as a manifest; a refusal never quotes the input, and what is read keeps its
/// manifest objects sorted and unique.
pub fn helm_release(data: &[u8]) {
    use crate::model::helm::{HelmError, from_configmap_data};
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(data);
    let check = |r: Result<crate::model::helm::HelmRelease, HelmError>| match r {
        Ok(rel) => {
            let mut sorted = rel.objects.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted, rel.objects);
        }
        Err(HelmError::BadJson(why)) => {
            // Only the kind of fault and its place.
            assert!(why.contains(" error at line "), "{why}");
        }
        Err(_) => {}
    };
    check(from_configmap_data(&b64));
    let as_manifest = serde_json::json!({"name": "fuzz", "namespace": "ns", "version": 1,
        "manifest": text(data)});
    check(from_configmap_data(&crate::model::helm::encode(
        &as_manifest,
    )));
}
