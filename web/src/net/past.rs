//! The moment the dashboard shows: the present, or a past moment named by `?at=` in the page's
//! address (RFC 3339). At a past moment every query is asked inside the server's
//! `at(time:) { … }` and the streams the views open become one query each, so every view shows
//! that moment without a view of its own; choosing another moment loads the page anew.
//!
//! The operations stay the files in `web/graphql/` (checked against the schema when the dashboard
//! compiles): their text is wrapped here, and the answer unwrapped, so the views read the same
//! types at any moment.

thread_local! {
    static AT: Option<String> = from_address();
}

/// The moment in the page's address (`?at=`), when it reads as one.
fn from_address() -> Option<String> {
    let search = web_sys::window()?.location().search().ok()?;
    let raw = search
        .trim_start_matches('?')
        .split('&')
        .find_map(|p| p.strip_prefix("at="))?;
    let text = js_sys::decode_uri_component(raw).ok()?.as_string()?;
    plausible(&text).then_some(text)
}

/// A time the page may put in a query's text: digits, `T`, `Z`, `:`, `.`, `+`, `-` (the server
/// says whether it is a time; nothing here can leave the string it goes into).
fn plausible(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 40
        && text
            .chars()
            .all(|c| c.is_ascii_digit() || "TZ:.+-".contains(c))
}

/// The past moment the page shows (None: the present).
pub fn at() -> Option<String> {
    AT.with(Clone::clone)
}

/// The index of the `}` closing the `{` at `open` (strings skipped).
fn closing(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    for (i, c) in text.char_indices().skip_while(|(i, _)| *i < open) {
        match c {
            '"' => in_string = !in_string,
            '{' if !in_string => depth += 1,
            '}' if !in_string => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `text` with the block of field `field` (its name and selection) left out.
fn without_block(text: &str, field: &str) -> Option<String> {
    let start = text.find(&format!("{field} {{"))?;
    let close = closing(text, start + field.len() + 1)?;
    Some(format!("{}{}", &text[..start], &text[close + 1..]))
}

/// The query that answers, at a moment, what subscription `text` (after its keyword) sends
/// first; None for a stream the past has no answer for.
fn as_query(text: &str, at: &str) -> Option<String> {
    let text = format!("query{text}");
    if text.contains("infrastructureSummary(") {
        return Some(text.replacen(
            "infrastructureSummary(",
            "infrastructureSummary: infrastructure(",
            1,
        ));
    }
    if text.contains("hostsChanged(") {
        return Some(text.replacen("hostsChanged(", "hostsChanged: hostCapacity(", 1));
    }
    // The cluster page's stream: its `sequence` and the cluster (no change: nothing happens).
    let head = "clusterChanged(id: $id) {";
    if text.contains(head) {
        let text = without_block(&text, "changed")?.replacen(
            head,
            &format!("clusterChanged: at(time: \"{at}\") {{"),
            1,
        );
        let start = text.find("cluster {")?;
        let close = closing(&text, start + "cluster ".len())?;
        return Some(format!(
            "{}cluster: node(id: $id) {{ ... on KubernetesCluster {{{}}} }}{}",
            &text[..start],
            &text[start + "cluster {".len()..close],
            &text[close + 1..]
        ));
    }
    None
}

/// Operation `text` asked at moment `at`: its root selection inside `at(time:)` (the answer's
/// data is then under `at`); None for a mutation or a stream the past has no answer for.
pub fn wrap(text: &str, at: &str) -> Option<String> {
    let text = match text.strip_prefix("subscription") {
        Some(rest) => as_query(rest, at)?,
        None if text.starts_with("query") => text.to_owned(),
        None => return None,
    };
    let open = text.find('{')?;
    let close = closing(&text, open)?;
    Some(format!(
        "{}{{ at(time: \"{at}\") {{{}}} }}{}",
        &text[..open],
        &text[open + 1..close],
        &text[close + 1..]
    ))
}

/// `path` (with its own query string, if any) at the moment the page shows.
pub fn href(path: &str) -> String {
    match at() {
        None => path.to_owned(),
        Some(at) => {
            let sep = if path.contains('?') { '&' } else { '?' };
            format!("{path}{sep}at={}", js_sys::encode_uri_component(&at))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: &str = "2026-11-29T06:00:00.000Z";

    #[test]
    fn a_query_is_asked_inside_at() {
        let q =
            "query HostList($first: Int) {\n  hosts(first: $first) {\n    nodes { name }\n  }\n}\n";
        assert_eq!(
            wrap(q, AT).as_deref(),
            Some(
                "query HostList($first: Int) { at(time: \"2026-11-29T06:00:00.000Z\") {\n  hosts(first: $first) {\n    nodes { name }\n  }\n} }\n"
            )
        );
    }

    #[test]
    fn a_mutation_or_an_unknown_stream_is_not() {
        assert_eq!(wrap("mutation M { scale { ok } }", AT), None);
        assert_eq!(
            wrap(
                "subscription Changes($kinds: [String!]) { resourceChanged(kinds: $kinds) { type } }",
                AT
            ),
            None
        );
    }

    #[test]
    fn the_overview_streams_become_their_queries() {
        let s = "subscription SummaryLive($datacenter: String) {\n  infrastructureSummary(datacenter: $datacenter) { clusters { total } }\n}";
        let q = wrap(s, AT).unwrap_or_default();
        assert!(q.starts_with("query SummaryLive($datacenter: String) { at(time: "));
        assert!(q.contains(
            "infrastructureSummary: infrastructure(datacenter: $datacenter) { clusters { total } }"
        ));
        let s = "subscription HostsLive($datacenter: String) { hostsChanged(datacenter: $datacenter) { hosts } }";
        assert!(
            wrap(s, AT)
                .unwrap_or_default()
                .contains("hostsChanged: hostCapacity(datacenter: $datacenter) { hosts }")
        );
    }

    #[test]
    fn the_cluster_stream_becomes_the_cluster_then() {
        let s = "subscription ClusterLive($id: ID!) {\n  clusterChanged(id: $id) {\n    sequence\n    cluster {\n      id\n      machines(first: 500) { nodes { name } }\n    }\n    changed {\n      type\n      object { uid }\n    }\n  }\n}\n";
        let q = wrap(s, AT).unwrap_or_default();
        assert!(!q.contains("changed {"), "{q}");
        assert!(q.contains("clusterChanged: at(time: \"2026-11-29T06:00:00.000Z\") {"));
        assert!(q.contains("cluster: node(id: $id) { ... on KubernetesCluster {\n      id\n      machines(first: 500) { nodes { name } }\n    } }"), "{q}");
        assert_eq!(q.matches('{').count(), q.matches('}').count(), "{q}");
    }

    #[test]
    fn only_plausible_times_go_into_a_query() {
        assert!(plausible(AT));
        assert!(plausible("2026-11-29T07:00:00+01:00"));
        assert!(!plausible("\") { me { id } } #"));
        assert!(!plausible(""));
    }
}
