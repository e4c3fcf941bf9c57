//! Parts of answers kept across changes: the value of one object's selection in a connection
//! (a cluster with its machines, a machine with its class and network), reused by a later request
//! of the same query while every object the part read is unchanged.
//!
//! The whole-answer cache (`http::cache`) is dropped by every change to the graph, and a live fleet
//! changes several times a second; yet a change touches a handful of objects, and a page of fifty
//! clusters is mostly the same page. So each connection item is resolved through [`Memo`]: its
//! value is kept with the point reads that produced it (`store::reads`), keyed by the request
//! (query text, operation, variables), the position of its selection in the document and the
//! object's identity. A later request reuses it when every one of those reads returns the same
//! objects in the new snapshot, which makes the reused value exactly what resolving it again gives.
//! A part that read something point reads cannot describe (a whole kind, a count, the history, the
//! clock), or that produced an error, is never kept.
//!
//! Written here rather than taken from a crate: async-graphql keeps whole answers at most (its
//! cache-control hints), and the exactness comes from the store's identity-preserving snapshots.

use std::borrow::Cow;
use std::future::Future;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use async_graphql::parser::types::Field;
use async_graphql::registry::Registry;
use async_graphql::{ContextSelectionSet, OutputType, Positioned, ServerResult, Value};

use super::generations::Generations;
use crate::model::Resource;
use crate::store::Snapshot;
use crate::store::reads::{self, ReadSet, Recording};

/// What identifies a request's answer besides the snapshot: the query text, the operation, the
/// variables and the caller's scope (`store::Scope::id`: people who see the same share answers).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct RequestKey {
    query: String,
    operation: Option<String>,
    variables: String,
    scope: u64,
}

impl RequestKey {
    /// The key for a request, or None when its answer may depend on more than the key (extensions
    /// such as persisted queries or tracing flags).
    pub fn of(request: &async_graphql::Request) -> Option<RequestKey> {
        if !request.extensions.is_empty() {
            return None;
        }
        Some(RequestKey {
            query: request.query.clone(),
            operation: request.operation_name.clone(),
            variables: serde_json::to_string(&request.variables).ok()?,
            scope: 0,
        })
    }

    /// The same request asked by a caller with this scope.
    pub fn scoped(self, scope: &crate::store::Scope) -> RequestKey {
        RequestKey {
            scope: scope.id(),
            ..self
        }
    }

    /// The operation named.
    pub fn operation(&self) -> Option<&str> {
        self.operation.as_deref()
    }

    /// The caller's scope's id (0: everything).
    pub fn scope(&self) -> u64 {
        self.scope
    }

    /// The variables, as JSON.
    pub fn variables(&self) -> &str {
        &self.variables
    }

    /// Bytes held.
    pub fn size(&self) -> usize {
        self.query.len() + self.variables.len() + self.operation.as_ref().map_or(0, String::len)
    }
}

/// A GraphQL object type that shows one store object.
pub trait ShowsObject {
    /// The object shown.
    fn object(&self) -> &Arc<Resource>;

    /// True when this type shows `r` (its kind is one of this type's).
    fn shows(r: &Resource) -> bool
    where
        Self: Sized;
}

/// Where a part sits: the request, the field and selection set in its document, the object.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct PartKey {
    request: u64,
    field: (usize, usize),
    selection: (usize, usize),
    object: usize,
}

/// A kept part.
struct Part {
    request: Arc<RequestKey>,
    object: Arc<Resource>,
    reads: Arc<ReadSet>,
    value: Value,
    bytes: usize,
}

impl super::generations::Weighed for Part {
    fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Kept parts, bounded in bytes (two generations, see [`super::generations`]).
pub struct PartCache {
    parts: Generations<PartKey, Part>,
    hits: prometheus::IntCounter,
    misses: prometheus::IntCounter,
}

impl PartCache {
    /// A cache of at most `max_bytes` (0: nothing is kept).
    pub fn new(
        max_bytes: usize,
        hits: prometheus::IntCounter,
        misses: prometheus::IntCounter,
    ) -> Self {
        PartCache {
            parts: Generations::new(max_bytes),
            hits,
            misses,
        }
    }

    /// What a request carries to read and keep parts (None when nothing is kept or the request
    /// has no key).
    pub fn for_request(
        self: &Arc<Self>,
        key: Option<&RequestKey>,
        snapshot: Arc<Snapshot>,
    ) -> Option<RequestParts> {
        let key = key.filter(|_| !self.parts.is_off())?;
        Some(RequestParts {
            cache: self.clone(),
            hash: rustc_hash::FxBuildHasher.hash_one(key),
            key: Arc::new(key.clone()),
            snapshot,
        })
    }
}

/// A request's access to the kept parts (request data).
#[derive(Clone)]
pub struct RequestParts {
    cache: Arc<PartCache>,
    hash: u64,
    key: Arc<RequestKey>,
    snapshot: Arc<Snapshot>,
}

impl RequestParts {
    fn part_key(
        &self,
        ctx: &ContextSelectionSet<'_>,
        field: &Positioned<Field>,
        object: &Arc<Resource>,
    ) -> PartKey {
        PartKey {
            request: self.hash,
            field: (field.pos.line, field.pos.column),
            selection: (ctx.item.pos.line, ctx.item.pos.column),
            object: Arc::as_ptr(object) as usize,
        }
    }

    /// The kept value at `key`, when it is this request's and its reads hold now.
    fn reuse(&self, key: &PartKey, object: &Arc<Resource>) -> Option<Arc<Part>> {
        let part = self.cache.parts.find(key)?;
        if Arc::ptr_eq(&part.object, object)
            && *part.request == *self.key
            && part.reads.holds(&self.snapshot)
        {
            return Some(part);
        }
        self.cache.parts.forget(key, &part);
        None
    }
}

/// A connection item whose value is kept across changes (see the module's comment). It is the
/// item's own type in the schema.
#[derive(Clone, Debug)]
pub struct Memo<T>(pub T);

fn errors_so_far(ctx: &ContextSelectionSet<'_>) -> Option<usize> {
    ctx.query_env.errors.lock().ok().map(|e| e.len())
}

impl<T: OutputType + ShowsObject> OutputType for Memo<T> {
    fn type_name() -> Cow<'static, str> {
        T::type_name()
    }

    fn qualified_type_name() -> String {
        T::qualified_type_name()
    }

    fn introspection_type_name(&self) -> Cow<'static, str> {
        self.0.introspection_type_name()
    }

    fn create_type_info(registry: &mut Registry) -> String {
        T::create_type_info(registry)
    }

    async fn resolve(
        &self,
        ctx: &ContextSelectionSet<'_>,
        field: &Positioned<Field>,
    ) -> ServerResult<Value> {
        let Some(parts) = ctx.data_opt::<RequestParts>() else {
            return self.0.resolve(ctx, field).await;
        };
        let object = self.0.object();
        let key = parts.part_key(ctx, field, object);
        if let Some(part) = parts.reuse(&key, object) {
            parts.cache.hits.inc();
            reads::include(part.reads.clone());
            return Ok(part.value.clone());
        }
        parts.cache.misses.inc();
        let errors = errors_so_far(ctx);
        let (result, recording) = Recorded::new(self.0.resolve(ctx, field)).await;
        let kept = match (&result, recording.finish()) {
            (Ok(value), Some(read)) if errors.is_some() && errors_so_far(ctx) == errors => {
                let read = Arc::new(read);
                reads::include(read.clone());
                parts.cache.parts.keep(
                    key,
                    Arc::new(Part {
                        request: parts.key.clone(),
                        object: object.clone(),
                        // The request's text counts in every part that keeps it alive, so a
                        // large document cannot hold more than the bound through small parts.
                        bytes: size_of_value(value) + 256 * (read.len() + 1) + parts.key.size(),
                        reads: read,
                        value: value.clone(),
                    }),
                );
                true
            }
            _ => false,
        };
        if !kept {
            // What contains this part cannot be kept either.
            reads::note_inexact();
        }
        result
    }
}

/// A future polled with its own recording active (across all its polls), giving the recording
/// back with its output.
struct Recorded<F> {
    inner: Pin<Box<F>>,
    recording: Option<Recording>,
}

impl<F: Future> Recorded<F> {
    fn new(inner: F) -> Self {
        Recorded {
            inner: Box::pin(inner),
            recording: Some(Recording::default()),
        }
    }
}

impl<F: Future> Future for Recorded<F> {
    type Output = (F::Output, Recording);

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let recording = this.recording.take().unwrap_or_default();
        let (poll, recording) = reads::recording(recording, || this.inner.as_mut().poll(cx));
        match poll {
            Poll::Ready(v) => Poll::Ready((v, recording)),
            Poll::Pending => {
                this.recording = Some(recording);
                Poll::Pending
            }
        }
    }
}

/// Bytes a value holds, roughly (what the bound counts).
fn size_of_value(v: &Value) -> usize {
    const NODE: usize = std::mem::size_of::<Value>();
    match v {
        Value::String(s) => NODE + s.len(),
        Value::Binary(b) => NODE + b.len(),
        Value::List(items) => NODE + items.iter().map(size_of_value).sum::<usize>(),
        Value::Object(map) => {
            NODE + map
                .iter()
                .map(|(k, v)| k.len() + 16 + size_of_value(v))
                .sum::<usize>()
        }
        _ => NODE,
    }
}

#[cfg(test)]
mod tests;
