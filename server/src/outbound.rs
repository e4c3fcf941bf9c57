//! What requests this server sends out (webhooks, the inventory push) may say about their
//! endpoints: the scheme and host only, never the path, query or credentials a URL can carry.

/// How an endpoint appears in logs, errors and the database: its scheme and host only. Webhook
/// URLs are secrets (chat-style webhooks carry their key in the path or the query).
pub fn endpoint_label(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if scheme.is_empty() {
        format!("<endpoint {host}>")
    } else {
        format!("{scheme}://{host}")
    }
}

/// An error with its causes ("error sending request: … : Connection refused").
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let c = cause.to_string();
        if !text.contains(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
        source = cause.source();
    }
    text
}

/// `text` with every occurrence of the endpoint's URL (whole, or its path and query) replaced by
/// its label.
pub fn scrub(text: &str, url: &str, label: &str) -> String {
    let mut out = text.replace(url, label);
    if let Some(rest) = url
        .split_once("://")
        .and_then(|(_, r)| r.find('/').map(|i| &r[i..]))
        .filter(|rest| rest.len() > 1)
    {
        out = out.replace(rest, "/…");
    }
    out
}
