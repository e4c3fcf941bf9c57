//! Lists and watches: the request's resource, a page of a list, and a watch's stream of
//! changes after a resourceVersion (bookmarks, 410 after compaction, its deadline).

use super::*;

/// (resource id, namespace) from a request path.
pub(super) fn route(path: &str) -> Option<(String, Option<String>)> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    match rest {
        [plural] => Some((format!("{group}/{version}/{plural}"), None)),
        ["namespaces", ns, plural] => {
            Some((format!("{group}/{version}/{plural}"), Some(ns.to_string())))
        }
        _ => None,
    }
}

/// 404 for a resource the server does not serve, as kube-apiserver words it.
pub(super) fn no_such_resource() -> Response {
    status(
        404,
        "NotFound",
        "the server could not find the requested resource".into(),
    )
}

pub(super) async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let Some((id, namespace)) = route(uri.path()) else {
        return no_such_resource();
    };
    let watching = matches!(q.get("watch").map(String::as_str), Some("true" | "1"));
    shared.requests.lock().push(Request {
        resource: id.clone(),
        watch: watching,
        resource_version: q.get("resourceVersion").cloned(),
        bookmarks: q.get("allowWatchBookmarks").map(String::as_str) == Some("true"),
        at: Instant::now(),
    });
    let served = shared
        .inner
        .lock()
        .resources
        .get(&id)
        .is_some_and(|s| s.def.served);
    if !served {
        return no_such_resource();
    }
    let selector = match Selector::parse(&q) {
        Ok(s) => s,
        Err(e) => return status(400, "BadRequest", e),
    };
    if watching {
        watch_response(shared, id, namespace, &q, selector)
    } else {
        let mut held = shared.hold_lists.subscribe();
        let _ = held.wait_for(|on| !*on).await;
        list_response(&shared, &id, namespace.as_deref(), &q, &selector)
    }
}

pub(super) fn list_response(
    shared: &Shared,
    id: &str,
    namespace: Option<&str>,
    q: &HashMap<String, String>,
    selector: &Selector,
) -> Response {
    let inner = shared.inner.lock();
    let Some(state) = inner.resources.get(id) else {
        return status(404, "NotFound", "not found".into());
    };
    // continue = "<rv of the first page>:<offset>"
    let (list_rv, offset) = match q.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            let Some((rv, off)) = token.split_once(':') else {
                return status(400, "BadRequest", format!("invalid continue token {token}"));
            };
            let (Ok(rv), Ok(off)) = (rv.parse::<u64>(), off.parse::<usize>()) else {
                return status(400, "BadRequest", format!("invalid continue token {token}"));
            };
            if rv < inner.compacted_to {
                return status(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result."
                        .into(),
                );
            }
            (rv, off)
        }
        None => (inner.rv, 0),
    };
    let limit = q
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let matching = state
        .objects
        .iter()
        .filter(|((ns, _), _)| namespace.is_none_or(|want| want == ns))
        .filter(|(_, o)| selector.matches(o));
    let items: Vec<&Value> = matching
        .skip(offset)
        .take(limit.saturating_add(1))
        .map(|(_, v)| v)
        .collect();
    let more = items.len() > limit;
    let items: Vec<&Value> = items.into_iter().take(limit).collect();
    let mut metadata = json!({"resourceVersion": list_rv.to_string()});
    if more {
        metadata["continue"] = json!(format!("{list_rv}:{}", offset + items.len()));
        metadata["remainingItemCount"] = json!(0);
    }
    let body = json!({"kind": format!("{}List", state.def.kind), "apiVersion": state.def.api_version(),
        "metadata": metadata, "items": items});
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

pub(super) fn line(typ: &str, object: &Value) -> Bytes {
    let mut s = json!({"type": typ, "object": object}).to_string();
    s.push('\n');
    Bytes::from(s)
}

pub(super) fn watch_response(
    shared: Arc<Shared>,
    id: String,
    namespace: Option<String>,
    q: &HashMap<String, String>,
    selector: Selector,
) -> Response {
    let since: u64 = q
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let bookmarks = q.get("allowWatchBookmarks").map(String::as_str) == Some("true");
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs);
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(256);

    // Under the lock: the replay and the live subscription join without a gap.
    // `current`: every change up to it is either in the replay or was for another resource, so
    // bookmarks may name it.
    let (replay, mut live, kind, api_version, gone, current) = {
        let inner = shared.inner.lock();
        let def = inner.resources.get(&id).map(|s| s.def.clone());
        let (kind, api_version) = def
            .map(|d| (d.kind.to_string(), d.api_version()))
            .unwrap_or_default();
        let since = if since == 0 { inner.rv } else { since };
        let gone = (since < inner.compacted_to).then_some((since, inner.compacted_to));
        let replay: Vec<Ev> = inner
            .history
            .iter()
            .filter(|e| e.rv > since && e.resource == id)
            .filter(|e| namespace.as_ref().is_none_or(|ns| ns == &e.namespace))
            .cloned()
            .collect();
        (
            replay,
            shared.events.subscribe(),
            kind,
            api_version,
            gone,
            inner.rv,
        )
    };
    let mut drop_rx = shared.drop_gen.subscribe();
    let hangs_at_open = shared.hangs.load(Ordering::SeqCst);
    tokio::spawn(async move {
        let hung = || {
            shared.hang.load(Ordering::SeqCst)
                || shared.hangs.load(Ordering::SeqCst) > hangs_at_open
        };
        if let Some((asked, oldest)) = gone {
            let err = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("too old resource version: {asked} ({oldest})"), "reason": "Expired", "code": 410});
            let _ = tx.send(Ok(line("ERROR", &err))).await;
            return;
        }
        let stalled = || shared.stall.load(Ordering::SeqCst);
        // Once a watch has seen the stall it sends nothing more: what it held back would have
        // to come first.
        let mut silent = stalled();
        let mut last_rv = since;
        let mut seen_rv = since.max(current);
        for ev in replay {
            if hung() || silent {
                break;
            }
            last_rv = ev.rv;
            let Some(typ) = selector.event(&ev) else {
                continue;
            };
            if tx.send(Ok(line(typ, &ev.object))).await.is_err() {
                return;
            }
        }
        let far = tokio::time::Instant::now() + Duration::from_secs(24 * 3600);
        let deadline = timeout.map_or(far, |t| tokio::time::Instant::now() + t);
        // kube-apiserver's last bookmark: 2 s before the deadline, when that is still ahead.
        let mut last_bookmark = timeout
            .filter(|t| *t > Duration::from_secs(2))
            .map(|_| deadline - Duration::from_secs(2));
        let mut tick = tokio::time::interval(shared.bookmark_every);
        tick.tick().await;
        loop {
            if hung() {
                // Silent for good: the client has to notice and reconnect.
                tokio::select! {
                    _ = drop_rx.changed() => {
                        let _ = tx.send(Err(std::io::Error::other("connection dropped"))).await;
                    }
                    _ = tx.closed() => {}
                }
                return;
            }
            silent = silent || stalled();
            let bookmark = json!({"kind": kind, "apiVersion": api_version,
                "metadata": {"resourceVersion": seen_rv.max(last_rv).to_string()}});
            tokio::select! {
                ev = live.recv() => match ev {
                    Ok(ev) => {
                        // Everything up to here has been seen (the channel is ordered), so a
                        // bookmark may name this version.
                        seen_rv = seen_rv.max(ev.rv);
                        if ev.resource != id
                            || ev.rv <= last_rv
                            || namespace.as_ref().is_some_and(|ns| ns != &ev.namespace)
                            || hung()
                            || silent
                            || stalled()
                        {
                            continue;
                        }
                        last_rv = ev.rv;
                        let Some(typ) = selector.event(&ev) else {
                            continue;
                        };
                        if tx.send(Ok(line(typ, &ev.object))).await.is_err() {
                            return;
                        }
                    }
                    Err(_) => {
                        let err = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": "watch fell behind", "reason": "Expired", "code": 410});
                        let _ = tx.send(Ok(line("ERROR", &err))).await;
                        return;
                    }
                },
                _ = tick.tick(), if bookmarks && !silent => {
                    if tx.send(Ok(line("BOOKMARK", &bookmark))).await.is_err() {
                        return;
                    }
                }
                _ = tokio::time::sleep_until(last_bookmark.unwrap_or(far)), if bookmarks && last_bookmark.is_some() => {
                    last_bookmark = None;
                    if !silent && tx.send(Ok(line("BOOKMARK", &bookmark))).await.is_err() {
                        return;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => return,
                _ = drop_rx.changed() => {
                    let _ = tx.send(Err(std::io::Error::other("connection dropped"))).await;
                    return;
                }
                _ = tx.closed() => return,
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| status(500, "InternalError", "response".into()))
}
