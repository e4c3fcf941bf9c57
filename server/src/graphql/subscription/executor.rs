//! Our executor for subscriptions: validate once, hold only the change stream, render each event.
//!
//! async-graphql's `execute_stream` keeps, for the whole life of a subscription, one boxed async
//! block sized for its largest await point (request preparation and validation) plus the query
//! environment with the parsed operation: about 11 KiB per idle subscription. Here a subscription
//! costs its document text, its variables and our event stream:
//!
//! 1. The subscription document is run once as a *query* against the event schema, whose root
//!    type is also named `Subscription` and has the same fields and arguments (built from the same
//!    constructors in [`super::open`]; a test compares the two). The keyword
//!    `subscription` is replaced by `query` padded to the same length, so every position in an
//!    error message is the one the client sent. Parsing, validation, limits and argument
//!    coercion are async-graphql's own; the field's resolver opens the stream and hands it over.
//! 2. Each event is rendered by running the same document again with the event attached: the
//!    root field returns the event and async-graphql resolves the selection on it. The render
//!    future is boxed and lives only while an event is being rendered.
//! 3. Subscriptions that send the same document with the same variables share a *hub*: one task
//!    reads the changes ([`Mode::Live`]), renders each event once and hands the JSON to every
//!    subscriber (a thousand dashboards watching the fleet cost one render per change, not a
//!    thousand). Each subscriber renders only its own opening ([`Mode::Opening`]: its snapshot,
//!    the cluster or the value now) and takes the hub's events after the sequence number its
//!    opening read: an event published before it joined was applied before its snapshot, so
//!    nothing is missed and nothing comes twice. A subscriber that falls further behind than the
//!    hub's queue holds (or whose hub overflowed) gets RESYNC and a fresh opening
//!    ([`Mode::Resync`]); the hub never waits for anyone.

mod documents;
mod hub;
mod root;

pub use documents::{Prepared, SubscriptionDocuments, as_query, find_operation};
use hub::{Frame, Hub, HubKey, Ring, RingCursor, RingRead, to_json};
pub use hub::{Hubs, Payload};
pub use root::{ExecutorRoot, ExecutorSchema, ExecutorSchemas, Update};
use root::{Opened, Opening};

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use async_graphql::parser::types::{ExecutableDocument, Selection};
use async_graphql::{Request, Response, ServerError, Variables};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use std::sync::atomic::Ordering;

use super::{Active, After, Mode, Seq};
use crate::store::Store;

/// A document with its variables and operation, ready to run in any [`Mode`].
#[derive(Clone)]
struct Runner {
    schemas: ExecutorSchemas,
    store: Arc<Store>,
    /// What the subscriber may see: its opening, events and renders read only that.
    scope: crate::store::Scope,
    doc: Arc<ExecutableDocument>,
    /// Shared with the hub once the subscriber joins one: every subscriber of a hub has the
    /// same, and a map of even one variable is a kilobyte (a B-tree's leaf).
    variables: Arc<Variables>,
    operation: Option<String>,
    /// What error messages call the operation.
    title: Arc<str>,
}

impl Runner {
    fn request(&self) -> Request {
        let mut r = Request::new(String::new())
            .variables(Variables::clone(&self.variables))
            .data(self.scope.clone());
        r.set_parsed_query((*self.doc).clone());
        if let Some(op) = &self.operation {
            r = r.operation_name(op.clone());
        }
        r
    }

    /// Open the document's stream in `mode` (validated strictly when `strict`): the stream and
    /// the sequence number of the snapshot it read, or the response refusing it.
    async fn open(
        &self,
        mode: Mode,
        strict: bool,
    ) -> Result<(BoxStream<'static, Seq<Update>>, u64), Response> {
        let slot = Arc::new(Opening::default());
        let after = Arc::new(After::default());
        let schema = if strict {
            &self.schemas.open
        } else {
            &self.schemas.render
        };
        let response = schema
            .execute(
                self.request()
                    .data(slot.clone())
                    .data(mode)
                    .data(after.clone()),
            )
            .await;
        let mut streams = std::mem::take(&mut *slot.0.lock());
        let errors: Vec<ServerError> = response
            .errors
            .into_iter()
            .filter(|e| e.source::<Opened>().is_none())
            .collect();
        if !errors.is_empty() {
            return Err(Response::from_errors(errors));
        }
        if streams.len() != 1 {
            let e = ServerError::new(
                format!("{} must select only one top level field.", self.title),
                None,
            );
            return Err(Response::from_errors(vec![e]));
        }
        let seq = after.0.load(std::sync::atomic::Ordering::Acquire);
        Ok((streams.remove(0), seq))
    }

    /// Run the document with `event` attached: the client's selection of it, as JSON.
    fn render(&self, event: Update) -> BoxFuture<'static, Arc<str>> {
        let snapshot = self.store.view(&self.store.snapshot(), &self.scope);
        let mut r = self.request().data(event).data(snapshot);
        if let Some(h) = &self.schemas.history {
            r = r.data(crate::graphql::loaders::request_loaders(h.clone()));
        }
        let schema = self.schemas.render.clone();
        async move { Arc::from(to_json(&schema.execute(r).await)) }.boxed()
    }

    /// The hub of this document and variables, opened now if none is.
    async fn hub(&self) -> Result<Arc<Hub>, Response> {
        let key: HubKey = (
            Arc::from(self.doc_key()),
            serde_json::to_string(&self.variables).unwrap_or_default(),
            self.operation.clone(),
            self.scope.id(),
        );
        let hubs = self.schemas.hubs.clone();
        if let Some(hub) = hubs.get(&key) {
            return Ok(hub);
        }
        let (mut events, _) = self.open(Mode::Live, true).await?;
        let ring = Arc::new(Ring::new(
            hubs.capacity,
            hubs.metrics.as_ref().map(|m| m.overflows.clone()),
        ));
        let sender = ring.clone();
        // One for the hub's task and all its subscribers: theirs are the same (the hub's key
        // is this document, these variables and operation, and what the scope sees).
        let runner = Arc::new(self.clone());
        let shared = runner.clone();
        let counter = hubs.metrics.as_ref().map(|m| m.renders.clone());
        let gauge = hubs.metrics.as_ref().map(|m| m.shared.clone());
        let task = tokio::spawn(async move {
            while let Some(Seq { seq, event }) = events.next().await {
                let resync = event.resync();
                let aggregate = event.aggregate();
                let json = if resync {
                    Arc::from("")
                } else {
                    if let Some(c) = &counter {
                        c.inc();
                    }
                    runner.render(event).await
                };
                sender.push(Arc::new(Frame {
                    seq,
                    resync,
                    aggregate,
                    json,
                }));
            }
            sender.end();
        });
        if let Some(g) = &gauge {
            g.inc();
        }
        Ok(hubs.insert(
            key,
            Arc::new(Hub {
                ring,
                task,
                gauge,
                runner: shared,
            }),
        ))
    }

    /// The subscription field the document selects (for the metrics).
    fn field(&self) -> &'static str {
        let name = find_operation(&self.doc, self.operation.as_deref()).and_then(|op| {
            op.node
                .selection_set
                .node
                .items
                .iter()
                .find_map(|item| match &item.node {
                    Selection::Field(f) => Some(f.node.name.node.as_str()),
                    _ => None,
                })
        });
        match name {
            Some("resourceChanged") => "resourceChanged",
            Some("machineChanged") => "machineChanged",
            Some("clusterChanged") => "clusterChanged",
            Some("infrastructureSummary") => "infrastructureSummary",
            Some("hostsChanged") => "hostsChanged",
            _ => "other",
        }
    }

    /// What identifies the document: its parsed form is shared by every subscriber of the same
    /// text, so its address does.
    fn doc_key(&self) -> String {
        format!("{:p}", Arc::as_ptr(&self.doc))
    }
}

/// One subscriber: its opening, then its hub's events after the opening's sequence number.
/// (It runs documents with its hub's [`Runner`]: a copy of its own was a quarter of an idle
/// subscription's bytes, held twice by the stream around it.)
///
/// A stream polled by hand rather than an `unfold` of an async fn: that kept the async fn's
/// state (its largest await, the ring's `Notified`) beside the subscriber for as long as it
/// waited, 480 bytes in all; an idle one of these is its fields, and the ring wakes it through
/// its cursor.
struct HubSubscriber {
    /// Held so the hub lives while anyone listens.
    hub: Arc<Hub>,
    /// Its position in the hub's frames, and how the hub wakes it.
    at: Arc<RingCursor>,
    /// What it does before reading the hub's next frame.
    before: Before,
    /// Events up to here are in what was sent.
    after: u64,
    /// The last value sent (aggregates are sent only when they change).
    last: Option<Arc<str>>,
    /// Counts this subscriber and what it is sent; `resyncing` marks the next event a RESYNC.
    active: Active,
    resyncing: bool,
}

type Reopened = Result<(BoxStream<'static, Seq<Update>>, u64), Response>;

enum Before {
    /// Nothing: it reads the hub's frames.
    Nothing,
    /// A fresh opening being prepared (it fell behind): boxed, and only while it runs, so an
    /// idle subscriber is sized for waiting on the hub, not for running a document.
    Reopening(BoxFuture<'static, Reopened>),
    /// The opening (or a resync's) being sent: its events, each rendered in turn (the render
    /// with whether its value is an aggregate).
    Opening(
        BoxStream<'static, Seq<Update>>,
        Option<(BoxFuture<'static, Arc<str>>, bool)>,
    ),
}

impl HubSubscriber {
    /// `json` to send, unless it is an aggregate that did not change.
    fn changed(&mut self, json: &Arc<str>, aggregate: bool) -> bool {
        if aggregate {
            if self.last.as_ref() == Some(json) {
                return false;
            }
            self.last = Some(json.clone());
        }
        true
    }

    fn sent(&mut self, payload: Payload) -> Poll<Option<Payload>> {
        self.active.event(std::mem::take(&mut self.resyncing));
        Poll::Ready(Some(payload))
    }

    /// Missed changes: RESYNC and a fresh opening, read from now.
    fn reopen(&mut self) {
        let runner = self.hub.runner.clone();
        self.before =
            Before::Reopening(async move { runner.open(Mode::Resync, false).await }.boxed());
    }
}

impl futures::Stream for HubSubscriber {
    type Item = Payload;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Payload>> {
        let this = &mut *self;
        loop {
            match &mut this.before {
                Before::Reopening(opening) => match ready!(opening.poll_unpin(cx)) {
                    Ok((opening, after)) => {
                        this.before = Before::Opening(opening, None);
                        this.after = after;
                        this.resyncing = true;
                    }
                    Err(refused) => {
                        this.before = Before::Nothing;
                        return this.sent(Payload::Response(Box::new(refused)));
                    }
                },
                Before::Opening(events, rendering) => {
                    if let Some((render, aggregate)) = rendering {
                        let json = ready!(render.poll_unpin(cx));
                        let aggregate = *aggregate;
                        *rendering = None;
                        if this.changed(&json, aggregate) {
                            return this.sent(Payload::Json(json));
                        }
                        continue;
                    }
                    match ready!(events.poll_next_unpin(cx)) {
                        Some(Seq { event, .. }) => {
                            let aggregate = event.aggregate();
                            *rendering = Some((this.hub.runner.render(event), aggregate));
                        }
                        None => this.before = Before::Nothing,
                    }
                }
                Before::Nothing => {
                    let at = this.at.at.load(Ordering::Acquire);
                    match this.hub.ring.read(at) {
                        RingRead::Frame(frame) => {
                            this.at.at.store(at + 1, Ordering::Release);
                            if frame.resync {
                                this.reopen();
                            } else if frame.seq > this.after
                                && this.changed(&frame.json, frame.aggregate)
                            {
                                return this.sent(Payload::Json(frame.json.clone()));
                            }
                        }
                        RingRead::Lagged => {
                            // Fell out of the ring (counted by the ring when it happened).
                            this.at.overflowed.store(false, Ordering::Release);
                            this.at
                                .at
                                .store(this.hub.ring.end_position(), Ordering::Release);
                            this.reopen();
                        }
                        RingRead::Pending => {
                            // Registered before looking again, so a frame pushed in between
                            // still wakes it.
                            this.at.waker.register(cx.waker());
                            if let RingRead::Pending = this.hub.ring.read(at) {
                                return Poll::Pending;
                            }
                        }
                        RingRead::Ended => return Poll::Ready(None),
                    }
                }
            }
        }
    }
}

/// Run a subscription prepared by [`as_query`]; `variables` and `operation` are the request's.
/// The first item is an error response when the document is refused (the stream ends there);
/// else one payload per event.
pub fn subscribe(
    schemas: ExecutorSchemas,
    store: Arc<Store>,
    scope: crate::store::Scope,
    prepared: Prepared,
    variables: Variables,
    operation: Option<String>,
) -> BoxStream<'static, Payload> {
    let Prepared { query, title } = prepared;
    // Parsed once; every run (opening, each event) starts from the syntax tree.
    let doc = match schemas.documents.get(&query) {
        Ok(doc) => doc,
        Err(e) => {
            let refused = Payload::Response(Box::new(Response::from_errors(vec![e])));
            return futures::stream::once(async move { refused }).boxed();
        }
    };
    let runner = Runner {
        schemas,
        store,
        scope,
        doc,
        variables: Arc::new(variables),
        operation,
        title: Arc::from(title),
    };
    // Boxed so that the preparation's state is freed as soon as it is done.
    let opening: BoxFuture<'static, Result<HubSubscriber, Response>> = async move {
        // The hub first, then the opening: whatever the hub sent before this subscriber joined
        // was applied before the opening's snapshot.
        let hub = runner.hub().await?;
        let at = hub.ring.reader();
        let (opening, after) = runner.open(Mode::Opening, true).await?;
        // From here on the hub's runner serves: this subscriber's own goes.
        let active = Active::new(runner.schemas.metrics.as_ref(), runner.field());
        drop(runner);
        Ok(HubSubscriber {
            hub,
            at,
            before: Before::Opening(opening, None),
            after,
            last: None,
            active,
            resyncing: false,
        })
    }
    .boxed();
    Subscription::Preparing(opening).boxed()
}

/// A subscription's stream: its preparation, then its subscriber (one allocation for both,
/// where a future flattened into a stream took two).
enum Subscription {
    Preparing(BoxFuture<'static, Result<HubSubscriber, Response>>),
    Joined(HubSubscriber),
    Ended,
}

impl futures::Stream for Subscription {
    type Item = Payload;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Payload>> {
        let this = &mut *self;
        if let Subscription::Preparing(opening) = this {
            match ready!(opening.poll_unpin(cx)) {
                Ok(sub) => *this = Subscription::Joined(sub),
                Err(refused) => {
                    *this = Subscription::Ended;
                    return Poll::Ready(Some(Payload::Response(Box::new(refused))));
                }
            }
        }
        match this {
            Subscription::Joined(sub) => sub.poll_next_unpin(cx),
            _ => Poll::Ready(None),
        }
    }
}

#[cfg(test)]
mod tests;
