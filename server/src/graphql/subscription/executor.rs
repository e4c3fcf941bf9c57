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

use std::sync::Arc;

use async_graphql::Positioned;
use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, OperationDefinition, OperationType, Selection,
    SelectionSet,
};
use async_graphql::{
    Context, EmptyMutation, EmptySubscription, ID, Object, Request, Response, Schema, ServerError,
    Variables,
};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use parking_lot::Mutex;
use std::sync::atomic::Ordering;

use super::{Active, After, ClusterEvent, Mode, ResourceEvent, ResourceEventType, Seq, open};
use crate::graphql::paging::Filter;
use crate::graphql::query::InfrastructureSummary;
use crate::graphql::types::HostCapacity;
use crate::store::Store;

/// The schema our executor runs subscription documents against.
pub type ExecutorSchema = Schema<ExecutorRoot, EmptyMutation, EmptySubscription>;

/// The event schema twice: validating strictly (to open a subscription) and checking only the
/// limits (to render each event of a document already validated); and the parsed documents.
#[derive(Clone)]
pub struct ExecutorSchemas {
    /// Strict validation.
    pub open: ExecutorSchema,
    /// Limits only.
    pub render: ExecutorSchema,
    /// Documents parsed once, shared by the subscriptions that send the same text.
    pub documents: Arc<Documents>,
    /// The event log (each rendered event gets its own history loaders).
    pub history: Option<Arc<crate::history::History>>,
    /// Shared renders of identical subscriptions.
    pub hubs: Arc<Hubs>,
    /// Where each subscriber is counted (absent when printing the SDL).
    pub metrics: Option<super::SubscriptionMetrics>,
}

/// Parsed subscription documents by text: a document is parsed once, when its first
/// subscription opens, and shared (dashboards open the same subscriptions); an event's cost then
/// depends on the document's syntax tree, never on its text (whitespace, comments, the size of
/// the message). Entries go when their last subscription does.
#[derive(Default)]
pub struct Documents {
    parsed: Mutex<std::collections::HashMap<Arc<str>, std::sync::Weak<ExecutableDocument>>>,
}

impl Documents {
    /// The parsed document of `text` (parsed now if no open subscription holds it).
    pub fn get(&self, text: &str) -> Result<Arc<ExecutableDocument>, ServerError> {
        let mut parsed = self.parsed.lock();
        if let Some(doc) = parsed.get(text).and_then(std::sync::Weak::upgrade) {
            return Ok(doc);
        }
        let doc = Arc::new(async_graphql::parser::parse_query(text)?);
        if parsed.len() >= 1024 && parsed.len().is_power_of_two() {
            parsed.retain(|_, d| d.strong_count() > 0);
        }
        parsed.insert(Arc::from(text), Arc::downgrade(&doc));
        Ok(doc)
    }

    /// Distinct documents held now.
    pub fn len(&self) -> usize {
        self.parsed
            .lock()
            .values()
            .filter(|d| d.strong_count() > 0)
            .count()
    }

    /// True when no document is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One event of any subscription field.
#[derive(Clone)]
pub enum Update {
    /// `resourceChanged`, `machineChanged`.
    Resource(ResourceEvent),
    /// `clusterChanged`.
    Cluster(ClusterEvent),
    /// `infrastructureSummary`.
    Infrastructure(InfrastructureSummary),
    /// `hostsChanged`.
    Hosts(HostCapacity),
}

impl Update {
    /// The subscriber missed changes (RESYNC): each subscriber must read its own fresh opening.
    fn resync(&self) -> bool {
        let is = |e: &ResourceEvent| e.type_ == ResourceEventType::Resync;
        match self {
            Update::Resource(e) => is(e),
            Update::Cluster(e) => e.changed.as_ref().is_some_and(is),
            Update::Infrastructure(_) | Update::Hosts(_) => false,
        }
    }

    /// A value sent only when it changed (not a change event).
    fn aggregate(&self) -> bool {
        matches!(self, Update::Infrastructure(_) | Update::Hosts(_))
    }
}

/// Present while a subscription is opened: the root field's resolver leaves its stream here.
#[derive(Default)]
struct Opening(Mutex<Vec<BoxStream<'static, Seq<Update>>>>);

/// What the root field answers once it has left its stream in the [`Opening`]: a typed marker
/// (the field is non-null like the served one, so it cannot answer null; the document's result
/// is not sent), told apart from real errors by its type, not its words.
#[derive(Debug)]
struct Opened;

impl std::fmt::Display for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("subscription opened")
    }
}

/// The root field: open the stream (first run) or return the event being rendered.
fn field<T: Clone + Send + 'static>(
    ctx: &Context<'_>,
    pick: fn(&Update) -> Option<&T>,
    wrap: fn(T) -> Update,
    open: impl FnOnce() -> async_graphql::Result<BoxStream<'static, Seq<T>>>,
) -> async_graphql::Result<T> {
    if let Some(ev) = ctx.data_opt::<Update>() {
        return pick(ev)
            .cloned()
            .ok_or_else(|| async_graphql::Error::new("an event of another field"));
    }
    let Some(opening) = ctx.data_opt::<Arc<Opening>>() else {
        return Err(async_graphql::Error::new("no subscription is being opened"));
    };
    let stream = open()?;
    opening
        .0
        .lock()
        .push(stream.map(move |(seq, t)| (seq, wrap(t))).boxed());
    Err(async_graphql::Error::new_with_source(Opened))
}

/// The event schema's root: the `Subscription` fields with the same arguments, as query fields.
#[derive(Default)]
pub struct ExecutorRoot;

#[Object(name = "Subscription")]
impl ExecutorRoot {
    async fn resource_changed(
        &self,
        ctx: &Context<'_>,
        kinds: Option<Vec<String>>,
        namespace: Option<String>,
        label_selector: Option<String>,
        #[graphql(default = false)] snapshot: bool,
    ) -> async_graphql::Result<ResourceEvent> {
        field(ctx, pick_resource, Update::Resource, || {
            open::resource_changed(ctx, kinds, namespace, label_selector, snapshot)
        })
    }

    async fn machine_changed(
        &self,
        ctx: &Context<'_>,
        filter: Option<Filter>,
        cluster_id: Option<String>,
        #[graphql(default = false)] snapshot: bool,
    ) -> async_graphql::Result<ResourceEvent> {
        field(ctx, pick_resource, Update::Resource, || {
            open::machine_changed(ctx, filter, cluster_id, snapshot)
        })
    }

    async fn infrastructure_summary(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 250)] debounce_ms: u32,
    ) -> async_graphql::Result<InfrastructureSummary> {
        field(
            ctx,
            |e| match e {
                Update::Infrastructure(x) => Some(x),
                _ => None,
            },
            Update::Infrastructure,
            || open::infrastructure_summary(ctx, debounce_ms),
        )
    }

    async fn hosts_changed(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 250)] debounce_ms: u32,
    ) -> async_graphql::Result<HostCapacity> {
        field(
            ctx,
            |e| match e {
                Update::Hosts(x) => Some(x),
                _ => None,
            },
            Update::Hosts,
            || open::hosts_changed(ctx, debounce_ms),
        )
    }

    async fn cluster_changed(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> async_graphql::Result<ClusterEvent> {
        field(
            ctx,
            |e| match e {
                Update::Cluster(x) => Some(x),
                _ => None,
            },
            Update::Cluster,
            || open::cluster_changed(ctx, id),
        )
    }
}

fn pick_resource(e: &Update) -> Option<&ResourceEvent> {
    match e {
        Update::Resource(x) => Some(x),
        _ => None,
    }
}

/// The operation a request runs (None when the document names no runnable operation).
pub fn find_operation<'a>(
    doc: &'a ExecutableDocument,
    name: Option<&str>,
) -> Option<&'a Positioned<OperationDefinition>> {
    match (&doc.operations, name) {
        (DocumentOperations::Single(op), _) => Some(op),
        (DocumentOperations::Multiple(ops), Some(n)) => ops.get(n),
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => ops.values().next(),
        _ => None,
    }
}

/// A subscription document made ready for [`subscribe`].
#[derive(Debug, PartialEq, Eq)]
pub struct Prepared {
    /// The document with the subscription's keyword turned into `query` (same length).
    pub query: String,
    /// What error messages call the operation (`Subscription "Name"` or `Anonymous Subscription`).
    pub title: String,
}

/// The document with its subscription operation turned into a query of the same length, or None
/// when the request does not run a subscription operation.
pub fn as_query(text: &str, doc: &ExecutableDocument, name: Option<&str>) -> Option<Prepared> {
    let op = find_operation(doc, name)?;
    if op.node.ty != OperationType::Subscription {
        return None;
    }
    let title = match &doc.operations {
        DocumentOperations::Multiple(ops) => ops
            .iter()
            .find(|(_, o)| std::ptr::eq(*o, op))
            .map(|(n, _)| format!("Subscription \"{n}\"")),
        DocumentOperations::Single(_) => None,
    }
    .unwrap_or_else(|| "Anonymous Subscription".into());
    let at = offset(text, op.pos)?;
    const KEYWORD: &str = "subscription";
    if !text.get(at..)?.starts_with(KEYWORD) {
        return None;
    }
    // The other operations (and fragments only they use) are blanked out: they were written
    // for the real roots, and the event schema would refuse them.
    let mut used = std::collections::HashSet::new();
    spreads(&op.node.selection_set.node, doc, &mut used);
    let mut starts: Vec<(usize, bool)> = Vec::new();
    for (_, other) in doc.operations.iter() {
        starts.push((offset(text, other.pos)?, std::ptr::eq(other, op)));
    }
    for (name, fragment) in &doc.fragments {
        starts.push((offset(text, fragment.pos)?, used.contains(name.as_str())));
    }
    starts.sort_unstable();
    let mut out: Vec<u8> = text.as_bytes().to_vec();
    for (i, (from, keep)) in starts.iter().enumerate() {
        if *keep {
            continue;
        }
        let to = starts.get(i + 1).map_or(text.len(), |(next, _)| *next);
        // Blank with spaces, keeping newlines (and so every kept position).
        for b in &mut out[*from..to] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    }
    out[at..at + KEYWORD.len()].copy_from_slice(b"query       ");
    // Only ASCII bytes were written over whole characters' spans: still UTF-8 after a blanked
    // multi-byte character becomes several spaces.
    let query = String::from_utf8(out).ok()?;
    Some(Prepared { query, title })
}

/// The byte offset of a parser position (1-based line and column, columns counted in characters).
fn offset(text: &str, pos: async_graphql::Pos) -> Option<usize> {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(pos.line.saturating_sub(1))
        .map(str::len)
        .sum();
    let column = text
        .get(line_start..)?
        .char_indices()
        .nth(pos.column.checked_sub(1)?)?;
    Some(line_start + column.0)
}

/// The fragments a selection set uses, directly or through other fragments.
fn spreads<'a>(
    set: &'a SelectionSet,
    doc: &'a ExecutableDocument,
    used: &mut std::collections::HashSet<&'a str>,
) {
    for item in &set.items {
        match &item.node {
            Selection::Field(f) => spreads(&f.node.selection_set.node, doc, used),
            Selection::InlineFragment(f) => spreads(&f.node.selection_set.node, doc, used),
            Selection::FragmentSpread(f) => {
                let name = f.node.fragment_name.node.as_str();
                if used.insert(name)
                    && let Some(fragment) = doc.fragments.get(&f.node.fragment_name.node)
                {
                    spreads(&fragment.node.selection_set.node, doc, used);
                }
            }
        }
    }
}

/// What a subscription sends: a response (a refusal or an error, serialized by the transport),
/// or an event already rendered to JSON (shared by the subscribers of a hub).
#[derive(Debug)]
pub enum Payload {
    /// Not rendered yet.
    Response(Box<Response>),
    /// The response's JSON.
    Json(Arc<str>),
}

impl Payload {
    /// The response's JSON.
    pub fn json(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Payload::Json(j) => std::borrow::Cow::Borrowed(j),
            Payload::Response(r) => std::borrow::Cow::Owned(to_json(r)),
        }
    }
}

fn to_json(r: &Response) -> String {
    serde_json::to_string(r).unwrap_or_else(|e| {
        serde_json::json!({"errors": [{"message": format!("event not serializable: {e}")}]})
            .to_string()
    })
}

/// One event of a hub, rendered once.
struct Frame {
    /// The store's sequence number the event reflects.
    seq: u64,
    /// The hub missed changes: every subscriber reads a fresh opening.
    resync: bool,
    /// A value sent only when it changed.
    aggregate: bool,
    json: Arc<str>,
}

/// A hub's newest frames, read by each subscriber at its own pace. Written here rather than with
/// `tokio::sync::broadcast`, which allocates every slot up front: 1,024 slots of ~40 bytes per hub
/// (40 KiB) cost 4 KiB per subscriber with 1,000 hubs of ten subscribers each; this holds only
/// the frames sent (a pointer each) up to `capacity`.
struct Ring {
    inner: Mutex<RingFrames>,
    notify: tokio::sync::Notify,
    capacity: usize,
    /// Where each subscriber is, so that one falling out of the ring is counted when it
    /// happens (`vitistack_subscription_overflows_total`), not when it next reads.
    readers: Mutex<Vec<std::sync::Weak<Cursor>>>,
    overflows: Option<prometheus::IntCounter>,
}

/// A subscriber's position in its hub's ring, and whether it has fallen out of it.
#[derive(Default)]
struct Cursor {
    at: std::sync::atomic::AtomicU64,
    overflowed: std::sync::atomic::AtomicBool,
}

struct RingFrames {
    /// The position of `frames[0]` in the hub's stream.
    first: u64,
    frames: std::collections::VecDeque<Arc<Frame>>,
    ended: bool,
}

/// What a subscriber finds at its position in a ring.
enum Read {
    Frame(Arc<Frame>),
    /// The frames from its position on were dropped (it fell further behind than the ring holds).
    Lagged,
    /// Nothing yet.
    Pending,
    /// The hub's stream has ended.
    Ended,
}

impl Ring {
    fn new(capacity: usize, overflows: Option<prometheus::IntCounter>) -> Self {
        Ring {
            readers: Mutex::default(),
            overflows,
            inner: Mutex::new(RingFrames {
                first: 0,
                frames: Default::default(),
                ended: false,
            }),
            notify: tokio::sync::Notify::new(),
            capacity,
        }
    }

    fn push(&self, frame: Arc<Frame>) {
        let dropped = {
            let mut r = self.inner.lock();
            let dropped = (r.frames.len() >= self.capacity).then(|| {
                r.frames.pop_front();
                r.first += 1;
                r.first
            });
            r.frames.push_back(frame);
            dropped
        };
        if let Some(first) = dropped {
            // Readers whose next frame was just dropped have overflowed.
            let mut readers = self.readers.lock();
            readers.retain(|c| c.strong_count() > 0);
            for c in readers.iter().filter_map(std::sync::Weak::upgrade) {
                if c.at.load(Ordering::Acquire) < first
                    && !c.overflowed.swap(true, Ordering::AcqRel)
                    && let Some(m) = &self.overflows
                {
                    m.inc();
                }
            }
        }
        self.notify.notify_waiters();
    }

    /// A new reader at the end of the ring.
    fn reader(&self) -> Arc<Cursor> {
        let c = Arc::new(Cursor::default());
        c.at.store(self.end_position(), Ordering::Release);
        self.readers.lock().push(Arc::downgrade(&c));
        c
    }

    fn end(&self) {
        self.inner.lock().ended = true;
        self.notify.notify_waiters();
    }

    /// The position after the newest frame: where a subscriber joining now starts.
    fn end_position(&self) -> u64 {
        let r = self.inner.lock();
        r.first + r.frames.len() as u64
    }

    fn read(&self, at: u64) -> Read {
        let r = self.inner.lock();
        if at < r.first {
            return Read::Lagged;
        }
        match r.frames.get((at - r.first) as usize) {
            Some(f) => Read::Frame(f.clone()),
            None if r.ended => Read::Ended,
            None => Read::Pending,
        }
    }

    /// The frame at `at` once there is one.
    async fn next(&self, at: u64) -> Read {
        loop {
            let notified = self.notify.notified();
            let mut notified = std::pin::pin!(notified);
            // Registered before looking, so a frame pushed in between still wakes us.
            notified.as_mut().enable();
            match self.read(at) {
                Read::Pending => notified.await,
                other => return other,
            }
        }
    }
}

/// The shared stream of one document with one set of variables: its task renders each event
/// once; it stops when its last subscriber goes.
struct Hub {
    ring: Arc<Ring>,
    task: tokio::task::JoinHandle<()>,
    gauge: Option<prometheus::IntGauge>,
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(g) = &self.gauge {
            g.dec();
        }
    }
}

/// Which document, variables and operation a hub serves. (Once requests carry a principal, what
/// it may see must be part of the key too: a hub's render is handed out as is.)
type HubKey = (Arc<str>, String, Option<String>);

/// The open hubs.
pub struct Hubs {
    open: Mutex<std::collections::HashMap<HubKey, std::sync::Weak<Hub>>>,
    /// Events a hub may hold for a subscriber that has not taken them yet.
    capacity: usize,
    metrics: Option<super::SubscriptionMetrics>,
}

impl Hubs {
    /// No hub yet; each holds up to `capacity` events per subscriber.
    pub fn new(capacity: usize, metrics: Option<super::SubscriptionMetrics>) -> Self {
        Hubs {
            open: Mutex::default(),
            capacity: capacity.max(1),
            metrics,
        }
    }

    fn get(&self, key: &HubKey) -> Option<Arc<Hub>> {
        self.open.lock().get(key).and_then(std::sync::Weak::upgrade)
    }

    /// Keep `hub` for `key`, or the one another subscriber opened meanwhile.
    fn insert(&self, key: HubKey, hub: Arc<Hub>) -> Arc<Hub> {
        let mut open = self.open.lock();
        if let Some(other) = open.get(&key).and_then(std::sync::Weak::upgrade) {
            return other;
        }
        if open.len() >= 64 && open.len().is_power_of_two() {
            open.retain(|_, h| h.strong_count() > 0);
        }
        open.insert(key, Arc::downgrade(&hub));
        hub
    }
}

/// A document with its variables and operation, ready to run in any [`Mode`].
#[derive(Clone)]
struct Runner {
    schemas: ExecutorSchemas,
    store: Arc<Store>,
    doc: Arc<ExecutableDocument>,
    variables: Variables,
    operation: Option<String>,
    /// What error messages call the operation.
    title: Arc<str>,
}

impl Runner {
    fn request(&self) -> Request {
        let mut r = Request::new(String::new()).variables(self.variables.clone());
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
        let mut r = self.request().data(event).data(self.store.snapshot());
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
        let runner = self.clone();
        let counter = hubs.metrics.as_ref().map(|m| m.renders.clone());
        let gauge = hubs.metrics.as_ref().map(|m| m.shared.clone());
        let task = tokio::spawn(async move {
            while let Some((seq, event)) = events.next().await {
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
        Ok(hubs.insert(key, Arc::new(Hub { ring, task, gauge })))
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
struct Subscriber {
    runner: Runner,
    /// Held so the hub lives while anyone listens.
    hub: Arc<Hub>,
    /// Its position in the hub's frames.
    at: Arc<Cursor>,
    /// The opening (or a resync) being sent.
    opening: Option<BoxStream<'static, Seq<Update>>>,
    /// Events up to here are in what was sent.
    after: u64,
    /// The last value sent (aggregates are sent only when they change).
    last: Option<Arc<str>>,
    /// Counts this subscriber and what it is sent; `resyncing` marks the next event a RESYNC.
    active: Active,
    resyncing: bool,
}

impl Subscriber {
    async fn next(&mut self) -> Option<Payload> {
        let payload = self.take().await?;
        self.active.event(std::mem::take(&mut self.resyncing));
        Some(payload)
    }

    async fn take(&mut self) -> Option<Payload> {
        loop {
            if let Some(opening) = &mut self.opening {
                match opening.next().await {
                    Some((_, event)) => {
                        let aggregate = event.aggregate();
                        let json = self.runner.render(event).await;
                        if aggregate {
                            if self.last.as_ref() == Some(&json) {
                                continue;
                            }
                            self.last = Some(json.clone());
                        }
                        return Some(Payload::Json(json));
                    }
                    None => self.opening = None,
                }
            }
            let at = self.at.at.load(Ordering::Acquire);
            let frame = match self.hub.ring.next(at).await {
                Read::Frame(frame) => {
                    self.at.at.store(at + 1, Ordering::Release);
                    (!frame.resync).then_some(frame)
                }
                Read::Lagged => {
                    // Fell out of the ring (counted by the ring when it happened).
                    self.at.overflowed.store(false, Ordering::Release);
                    self.at
                        .at
                        .store(self.hub.ring.end_position(), Ordering::Release);
                    None
                }
                Read::Pending => continue,
                Read::Ended => return None,
            };
            let Some(frame) = frame else {
                // Missed changes: RESYNC and a fresh opening, read from now.
                // Boxed: an idle subscriber's future is then sized for waiting on the hub, not
                // for running a document (KiBs each, times thousands of subscribers).
                match Box::pin(self.runner.open(Mode::Resync, false)).await {
                    Ok((opening, after)) => {
                        self.opening = Some(opening);
                        self.after = after;
                        self.resyncing = true;
                    }
                    Err(refused) => return Some(Payload::Response(Box::new(refused))),
                }
                continue;
            };
            if frame.seq <= self.after {
                continue;
            }
            if frame.aggregate {
                if self.last.as_ref() == Some(&frame.json) {
                    continue;
                }
                self.last = Some(frame.json.clone());
            }
            return Some(Payload::Json(frame.json.clone()));
        }
    }
}

/// Run a subscription prepared by [`as_query`]; `variables` and `operation` are the request's.
/// The first item is an error response when the document is refused (the stream ends there);
/// else one payload per event.
pub fn subscribe(
    schemas: ExecutorSchemas,
    store: Arc<Store>,
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
        doc,
        variables,
        operation,
        title: Arc::from(title),
    };
    let refused =
        |r: Response| futures::stream::once(async move { Payload::Response(Box::new(r)) });
    // Boxed so that the preparation's state is freed as soon as it is done.
    let opening: BoxFuture<'static, BoxStream<'static, Payload>> = async move {
        // The hub first, then the opening: whatever the hub sent before this subscriber joined
        // was applied before the opening's snapshot.
        let hub = match runner.hub().await {
            Ok(hub) => hub,
            Err(r) => return refused(r).boxed(),
        };
        let at = hub.ring.reader();
        let (opening, after) = match runner.open(Mode::Opening, true).await {
            Ok(o) => o,
            Err(r) => return refused(r).boxed(),
        };
        let active = Active::new(runner.schemas.metrics.clone(), runner.field());
        let sub = Subscriber {
            runner,
            hub,
            at,
            opening: Some(opening),
            after,
            last: None,
            active,
            resyncing: false,
        };
        futures::stream::unfold(sub, |mut sub| async move {
            let payload = sub.next().await?;
            Some((payload, sub))
        })
        .boxed()
    }
    .boxed();
    futures::stream::once(opening).flatten().boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(text: &str, name: Option<&str>) -> Option<Prepared> {
        let doc = async_graphql::parser::parse_query(text).ok()?;
        as_query(text, &doc, name)
    }

    #[test]
    fn the_subscription_keyword_becomes_query_at_the_same_positions() {
        let text = "# a comment with ünïcode\n  subscription S($k: [String!]) { resourceChanged(kinds: $k) { type } }";
        let Prepared { query: q, title } = rewrite(text, None).expect("rewritten");
        assert_eq!(q.len(), text.len());
        assert_eq!(title, "Subscription \"S\"");
        assert!(q.contains("  query        S($k"), "{q}");
        let two = "query A { datacenter { name } }\nsubscription B { hostsChanged { hosts } }";
        assert_eq!(
            rewrite(two, Some("B")),
            Some(Prepared {
                query: "                               \nquery        B { hostsChanged { hosts } }"
                    .into(),
                title: "Subscription \"B\"".into()
            })
        );
        assert_eq!(rewrite(two, Some("A")), None, "a query stays a query");
        // Other operations and the fragments only they use are blanked (the event schema
        // would refuse them); positions in the kept operation do not move.
        let many = "query A { ...F }\nfragment F on Query { sequence }\nsubscription B { hostsChanged { ...G } }\nfragment G on HostCapacity { hosts }";
        let Prepared { query: q, .. } = rewrite(many, Some("B")).expect("rewritten");
        assert_eq!(q.len(), many.len());
        assert_eq!(
            q.trim(),
            "query        B { hostsChanged { ...G } }\nfragment G on HostCapacity { hosts }"
        );
        assert_eq!(rewrite(two, None), None, "two operations and no name");
        assert_eq!(rewrite("{ datacenter { name } }", None), None);
    }

    /// The event schema's root is what the served `Subscription` type says, field for field:
    /// names, argument names, types and defaults, and result types.
    #[tokio::test]
    async fn the_event_root_has_the_served_subscription_fields() {
        let settings = crate::graphql::SchemaSettings::default();
        let q = r#"{ __type(name: "Subscription") { fields { name
            type { ...T } args { name defaultValue type { ...T } } } } }
            fragment T on __Type { kind name ofType { kind name ofType { kind name ofType { kind name } } } }"#;
        let served = crate::graphql::build_schema(&settings).execute(q).await;
        let ours = crate::graphql::build_executor_schemas(&settings)
            .open
            .execute(q)
            .await;
        assert!(served.errors.is_empty() && ours.errors.is_empty());
        let fields = served.data.to_string();
        assert!(fields.contains("clusterChanged"), "{fields}");
        assert_eq!(fields, ours.data.to_string());
    }
}
