//! A GraphQL request's way through the server, over POST, GET and SSE: admit the caller, read
//! the request, answer from the cache or execute it (queries on one snapshot, within the time
//! limit), and the one rule for a request rejected before it ran. WebSockets (`ws.rs`) take the
//! same steps per operation.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::json;

use async_graphql::http::GraphiQLSource;
use axum::response::Html;

use super::{AppState, Held, access, cache, graphql_http, streams};
use async_graphql::parser::types::OperationType;
use futures::stream::BoxStream;

use crate::auth::{Principal, Standing};
use crate::error::ErrorCode;
use crate::graphql::subscription::executor::Payload;
use async_graphql::parser::types::ExecutableDocument;

/// GET with a `query` parameter executes a query (GraphQL over HTTP; mutations are refused with
/// 405); a bare GET opens GraphiQL.
pub(super) async fn graphql_get(
    State(app): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: axum::http::HeaderMap,
    uri: axum::http::Uri,
) -> Response {
    let Some(query) = uri
        .query()
        .filter(|q| q.split('&').any(|p| p.starts_with("query=")))
    else {
        if !app.access.graphiql {
            return graphql_http::refuse(graphql_http::Media::Json,
                ErrorCode::GraphiqlOff,
                "GraphiQL is switched off here (GRAPHIQL=false); send queries with POST or GET ?query=",
            )
            .into_response();
        }
        let page = GraphiQLSource::build()
            .endpoint("/graphql")
            .subscription_endpoint("/graphql/ws")
            .title("vitistack GraphQL")
            .finish();
        return Html(page).into_response();
    };
    // Who is asking comes first: nothing else is said to a caller without a credential. (Not
    // an extractor here: the GraphiQL page above is served to anyone.)
    let Caller { principal, media } = match Caller::admit(&app, peer, &headers).await {
        Ok(c) => c,
        Err(refused) => return refused,
    };
    let Some(media) = media else {
        return graphql_http::not_acceptable();
    };
    let mut request = match graphql_http::parse_get(query, media) {
        Ok(r) => r,
        Err(refused) => return refused.into_response(),
    };
    let name = request.operation_name.clone();
    // Only a document not known to hold queries alone is parsed to find the operation's type.
    if !app.documents.known_queries(&request.query)
        && let Ok(doc) = request.parsed_query()
        && let Some(ty) = operation_type(doc, name.as_deref())
        && ty != async_graphql::parser::types::OperationType::Query
    {
        return graphql_http::refuse(media,
            ErrorCode::MethodNotAllowed,
            format!(
                "a {ty} cannot run over GET: use POST (subscriptions: /graphql/ws or /graphql/stream)"
            ),
        )
        .into_response();
    }
    execute(&app, request, media, principal, None).await
}

/// GraphQL over SSE (GET with `query`, `variables`, `operationName` parameters).
pub(super) async fn graphql_sse_get(
    State(app): State<AppState>,
    Caller { principal, .. }: Caller,
    uri: axum::http::Uri,
) -> Response {
    match graphql_http::parse_get(uri.query().unwrap_or_default(), graphql_http::Media::Json) {
        Ok(req) => sse(app, principal, req),
        Err(refused) => refused.into_response(),
    }
}

/// GraphQL over SSE (POST with a JSON body, as on `/graphql`).
pub(super) async fn graphql_sse_post(
    State(app): State<AppState>,
    Caller { principal, .. }: Caller,
    headers: axum::http::HeaderMap,
    body: bytes::Bytes,
) -> Response {
    match graphql_http::parse_post(&headers, &body, graphql_http::Media::Json) {
        Ok(req) => sse(app, principal, req),
        Err(refused) => refused.into_response(),
    }
}

/// One operation as an event stream: `next` events (each a GraphQL response), then `complete`.
/// Same semantics as a WebSocket operation; counts against the same connection caps.
pub(super) fn sse(
    app: AppState,
    principal: crate::auth::Principal,
    request: async_graphql::Request,
) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let admission = match app.gate.admit(principal.address) {
        Ok(a) => a,
        Err(reason) => {
            return graphql_http::refuse(
                graphql_http::Media::Json,
                ErrorCode::ConnectionLimit,
                reason.to_string(),
            )
            .into_response();
        }
    };
    let open = Held::new(&app.metrics.sse_open);
    let keepalive = app.gate.settings.keepalive;
    // A stream whose key is revoked ends with a FORBIDDEN error, as a socket closes with 4403;
    // one whose caller's access changed with ACCESS_CHANGED, as a socket closes with 4205.
    let ended_as = Arc::new(std::sync::OnceLock::new());
    let revoked = {
        let ended_as = ended_as.clone();
        let ended = streams::ended(app.access.auth.clone(), principal.clone());
        async move {
            let _ = ended_as.set(ended.await);
        }
    };
    let mut going_away = app.going_away.clone();
    let events = execute_stream(&app, request, principal)
        .map(|payload| {
            Ok::<_, std::convert::Infallible>(Event::default().event("next").data(payload.json()))
        })
        .take_until(revoked)
        .take_until(async move { streams::gone(&mut going_away).await })
        .chain(
            futures::stream::once(async move { ended_as.get().copied() }).filter_map(
                |ended| async move {
                    let (message, code) = match ended? {
                        Standing::Kept => return None,
                        Standing::Changed => (streams::CHANGED, ErrorCode::AccessChanged),
                        Standing::Ended => (streams::REVOKED, ErrorCode::Forbidden),
                    };
                    let body =
                        json!({"errors": [{"message": message, "extensions": {"code": code}}]});
                    Some(Ok(Event::default().event("next").data(body.to_string())))
                },
            ),
        )
        .chain(futures::stream::once(async move {
            // Held until the stream ends or the client goes away.
            drop((admission, open));
            Ok(Event::default().event("complete").data(""))
        }));
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keepalive))
        .into_response()
}

/// A GraphQL caller: admitted (authenticated, within its rate limit, as the REST routes'
/// `Admitted`), with the media type its answer goes in (None: its `Accept` allows none). As an
/// extractor, a caller that may not ask is answered the refusal, as a GraphQL error in the media
/// type it accepts, before the handler runs.
pub(super) struct Caller {
    pub(super) principal: Principal,
    pub(super) media: Option<graphql_http::Media>,
}

impl Caller {
    /// Admit the caller at `peer` with these headers, or the answer refusing it.
    pub(super) async fn admit(
        app: &AppState,
        peer: SocketAddr,
        headers: &axum::http::HeaderMap,
    ) -> Result<Caller, Response> {
        let media = graphql_http::negotiate(headers);
        let principal = app
            .access
            .admit(
                peer.ip(),
                headers,
                media.unwrap_or(graphql_http::Media::Json),
            )
            .await?;
        Ok(Caller { principal, media })
    }
}

impl axum::extract::FromRequestParts<AppState> for Caller {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        app: &AppState,
    ) -> Result<Self, Response> {
        let media = graphql_http::negotiate(&parts.headers);
        let principal = app
            .access
            .admit_parts(
                parts,
                access::graphql_body(media.unwrap_or(graphql_http::Media::Json)),
            )
            .await?;
        Ok(Caller { principal, media })
    }
}

/// A request's headers, taken from it rather than copied (axum's `HeaderMap` extractor clones
/// them); for a handler whose other extractors do not read headers.
pub(super) struct Headers(axum::http::HeaderMap);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Headers {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Headers(std::mem::take(&mut parts.headers)))
    }
}

/// POST: a JSON answer in the media type the client accepts, or an SSE stream when it accepts
/// only `text/event-stream`.
pub(super) async fn graphql(
    State(app): State<AppState>,
    // Who is asking comes first: nothing else is said to a caller without a credential.
    Caller {
        principal,
        media: negotiated,
    }: Caller,
    Headers(headers): Headers,
    body: bytes::Bytes,
) -> Response {
    let wants_sse = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/event-stream") && !a.contains("json"));
    let media = if wants_sse {
        graphql_http::Media::Json
    } else {
        match negotiated {
            Some(m) => m,
            None => return graphql_http::not_acceptable(),
        }
    };
    // A body asked before on this version of the graph is answered as it was.
    if !wants_sse
        && graphql_http::is_json(&headers)
        && let Some(answer) =
            app.cache
                .by_body(app.store.snapshot().seq(), principal.scope.id(), &body)
    {
        let kept = match answer.rejected {
            true => answer.body,
            false => with_unavailable_datacenters(&app, &principal.scope, answer.body),
        };
        return graphql_http::answer(media, kept, answer.rejected);
    }
    let request = match graphql_http::parse_post(&headers, &body, media) {
        Ok(r) => r,
        Err(refused) => return refused.into_response(),
    };
    if wants_sse {
        return sse(app, principal, request);
    }
    execute(&app, request, media, principal, Some(&body)).await
}

/// The answer to a request that did not finish within `API_TIMEOUT`.
pub(super) fn timed_out(app: &AppState, media: graphql_http::Media) -> Response {
    graphql_http::refuse(
        media,
        ErrorCode::Timeout,
        access::timeout_message(app.access.timeout),
    )
    .into_response()
}

/// Execute a query or mutation within `API_TIMEOUT`. Only work that runs is timed: an answer
/// taken from the cache is not (a timer per request cost a cached request a twentieth of its
/// time), and a request that shares a concurrent identical one's execution shares its time limit.
pub(super) async fn execute(
    app: &AppState,
    mut request: async_graphql::Request,
    media: graphql_http::Media,
    principal: crate::auth::Principal,
    body: Option<&[u8]>,
) -> Response {
    let started = Instant::now();
    // One snapshot per request: every field of the answer reads the same version of the graph,
    // and only what the caller may see of it.
    let snapshot = app.store.view(&app.store.snapshot(), &principal.scope);
    let seq = snapshot.seq();
    let key = cache::RequestKey::of(&request).map(|k| k.scoped(&principal.scope));
    let scope = principal.scope.clone();
    request = request.data(principal);
    let key = key.as_ref();
    // A known document of shareable queries is parsed only when its answer is not cached; any
    // other document is parsed first, to find out whether its answer may be shared at all.
    let plan = if app.documents.known_shareable(&request.query) {
        None
    } else {
        Some(app.documents.prepare(&mut request, key))
    };
    let plan = match plan {
        // Mutations, and queries whose answer depends on the caller: never cached, never shared
        // with a concurrent identical request. A mutation reads the live graph, not this
        // snapshot: its answer shows the graph after its write.
        Some(plan) if !plan.shareable() => {
            // Boxed, as is the execution below: an executing request's state is large, and a
            // request answered from the cache would otherwise carry (and move) it too.
            let leaving = Leaving {
                media,
                started,
                scope: &scope,
            };
            let run = Box::pin(execute_unshared(
                app, request, &plan, snapshot, key, leaving,
            ));
            return match tokio::time::timeout(app.access.timeout, run).await {
                Ok(response) => response,
                Err(_) => timed_out(app, media),
            };
        }
        other => other,
    };
    let scope_in = scope.clone();
    let (answer, _) = app
        .cache
        .get_or_execute(seq, key, || {
            Box::pin(async move {
                let plan = match plan {
                    Some(p) => p,
                    None => app.documents.prepare(&mut request, key),
                };
                let is_query = plan.only_queries();
                let volatile = crate::graphql::Volatile::default();
                let request = app
                    .query_data(request, snapshot, &scope_in, key)
                    .await
                    .data(volatile.clone());
                let run = app.documents.execute(&app.schema, &plan, key, request);
                let Ok(response) = tokio::time::timeout(app.access.timeout, run).await else {
                    return cache::Answer {
                        body: bytes::Bytes::new(),
                        cacheable: false,
                        rejected: false,
                        timed_out: true,
                    };
                };
                let ok = response.errors.is_empty();
                app.metrics.observe_graphql(started.elapsed(), ok);
                cache::Answer {
                    body: answer_body(&response),
                    cacheable: ok && is_query && !volatile.is_marked(),
                    rejected: crate::graphql::rejected(&response),
                    timed_out: false,
                }
            })
        })
        .await;
    if answer.timed_out {
        return timed_out(app, media);
    }
    if let (true, Some(key), Some(body)) = (answer.cacheable, key, body) {
        app.cache.index_body(seq, key, body);
    }
    let body = match answer.rejected {
        true => answer.body,
        false => with_unavailable_datacenters(app, &scope, answer.body),
    };
    graphql_http::answer(media, body, answer.rejected)
}

/// An answer with a `DATACENTER_UNAVAILABLE` error for each datacenter that is stale or away
/// now: its objects are in the answer as last seen, and the caller is told. Added as the answer
/// leaves (never kept in the cache: a datacenter's state changes without the graph changing).
/// Only the datacenters the caller sees something of are named.
pub(super) fn with_unavailable_datacenters(
    app: &AppState,
    scope: &crate::store::Scope,
    body: bytes::Bytes,
) -> bytes::Bytes {
    if app.source.datacenters.is_none() {
        return body;
    }
    let away: Vec<_> = app
        .source
        .datacenter_reports()
        .into_iter()
        .filter(|d| d.state.unavailable() && scope.sees_datacenter(&d.key))
        .collect();
    if away.is_empty() {
        return body;
    }
    let Ok(mut answer) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return body;
    };
    let Some(map) = answer.as_object_mut() else {
        return body;
    };
    let errors = map.entry("errors").or_insert_with(|| json!([]));
    if let Some(list) = errors.as_array_mut() {
        for d in away {
            let state = serde_json::to_value(d.state).unwrap_or_default();
            let age = d
                .age_seconds
                .map(|a| format!(", as last seen {a:.0} s ago"))
                .unwrap_or_default();
            let why = d.last_error.map(|e| format!(" ({e})")).unwrap_or_default();
            list.push(json!({
                "message": format!("datacenter {} is {}: its objects are in the answer{age}{why}",
                    d.key, state.as_str().unwrap_or_default().to_lowercase()),
                "extensions": {"code": ErrorCode::DatacenterUnavailable, "datacenter": d.key,
                               "state": state, "ageSeconds": d.age_seconds},
            }));
        }
    }
    serde_json::to_vec(&answer)
        .map(bytes::Bytes::from)
        .unwrap_or(body)
}

/// How an answer leaves: its media type, when its request began (for the metrics), and what its
/// caller sees (the datacenters it is told are away).
pub(super) struct Leaving<'a> {
    pub media: graphql_http::Media,
    pub started: Instant,
    pub scope: &'a crate::store::Scope,
}

/// Run a request whose answer is not shared: with this snapshot for queries, on the live graph
/// for mutations.
pub(super) async fn execute_unshared(
    app: &AppState,
    request: async_graphql::Request,
    plan: &crate::graphql::documents::Plan,
    snapshot: Arc<crate::store::Snapshot>,
    key: Option<&cache::RequestKey>,
    leaving: Leaving<'_>,
) -> Response {
    let Leaving {
        media,
        started,
        scope,
    } = leaving;
    let request = if plan.only_queries() {
        app.query_data(request, snapshot, scope, key).await
    } else {
        drop(snapshot);
        app.live_data(request)
    };
    let queries = plan.only_queries();
    let response = app.documents.execute(&app.schema, plan, key, request).await;
    app.metrics
        .observe_graphql(started.elapsed(), response.errors.is_empty());
    let rejected = crate::graphql::rejected(&response);
    let body = match queries && !rejected {
        true => with_unavailable_datacenters(app, scope, answer_body(&response)),
        false => answer_body(&response),
    };
    graphql_http::answer(media, body, rejected)
}

/// The JSON body of a response (a request that never ran has no `data` entry at all).
pub(super) fn answer_body(response: &async_graphql::Response) -> bytes::Bytes {
    let body = if crate::graphql::rejected(response) {
        serde_json::to_vec(&json!({"errors": response.errors}))
    } else {
        serde_json::to_vec(response)
    };
    body.map(bytes::Bytes::from).unwrap_or_else(|e| {
        bytes::Bytes::from(
            json!({"errors": [{"message": format!("answer not serializable: {e}")}]}).to_string(),
        )
    })
}

/// Execute `request` as a stream: queries read one snapshot for the whole answer; subscriptions
/// go to our executor (`graphql::subscription::executor`) and read the live store as their events happen.
pub(super) fn execute_stream(
    app: &AppState,
    mut request: async_graphql::Request,
    principal: Principal,
) -> BoxStream<'static, Payload> {
    // The document is parsed once per text (see `graphql::documents`), and refused before it runs
    // when it is over a limit: a huge document costs its length once, nothing more.
    let key = super::cache::RequestKey::of(&request).map(|k| k.scoped(&principal.scope));
    let plan = app.documents.prepare(&mut request, key.as_ref());
    if let Some(e) = plan.refused() {
        let refused = Payload::Response(Box::new(async_graphql::Response::from_errors(vec![
            e.clone(),
        ])));
        return futures::stream::once(async move { refused }).boxed();
    }
    let name = request.operation_name.clone();
    let query = request.query.clone();
    let subscription = (!plan.only_queries())
        .then(|| request.parsed_query().ok())
        .flatten()
        .and_then(|d| {
            (operation_type(d, name.as_deref()) == Some(OperationType::Subscription)).then(|| {
                crate::graphql::subscription::executor::as_query(&query, d, name.as_deref())
            })
        });
    match subscription {
        Some(Some(prepared)) => crate::graphql::subscription::executor::subscribe(
            app.subscription_schemas.clone(),
            app.store.clone(),
            principal.scope.clone(),
            prepared,
            std::mem::take(&mut request.variables),
            name,
        ),
        // A subscription whose keyword could not be located: async-graphql's own executor.
        Some(None) => app
            .schema
            .execute_stream(request.data(principal.scope.clone()))
            .map(response)
            .boxed(),
        None => {
            let app = app.clone();
            futures::stream::once(async move {
                let key = key.as_ref();
                let request = if plan.only_queries() {
                    let snapshot = app.store.view(&app.store.snapshot(), &principal.scope);
                    app.query_data(request, snapshot, &principal.scope, key)
                        .await
                } else {
                    app.live_data(request)
                }
                .data(principal);
                response(
                    app.documents
                        .execute(&app.schema, &plan, key, request)
                        .await,
                )
            })
            .boxed()
        }
    }
}

fn response(r: async_graphql::Response) -> Payload {
    Payload::Response(Box::new(r))
}

/// The type of the operation a document would run (None when it names no runnable operation).
pub fn operation_type(doc: &ExecutableDocument, name: Option<&str>) -> Option<OperationType> {
    crate::graphql::subscription::executor::find_operation(doc, name).map(|op| op.node.ty)
}
