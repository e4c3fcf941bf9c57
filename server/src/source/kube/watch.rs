//! One kind's watcher (per namespace when scoped): list, watch from the list's version, resume
//! from bookmarks, relist on 410 or silence, back off on failures, and report each step in the
//! source status.

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::{Api, Client};

use super::{KubeSettings, page, resource_from_value, to_resource};
use crate::model::{Datacenter, Kind, Resource};
use crate::retry::Backoff;
use crate::source::status::SourceStatus;
use crate::store::{ChangeType, ObjectKey, Op, Store};

/// Watches in a row that may hang before the kind is relisted instead of watched again.
pub(super) const SILENT_WATCHES_BEFORE_RELIST: u32 = 2;

/// Page size of lists.
pub(super) const LIST_PAGE: u32 = 500;

/// How one watch ended.
pub(super) enum Ended {
    /// The API server closed it (at its timeout): progress when it sent something.
    Closed,
    /// The connection broke mid-stream: watch again from the same version.
    Broken(String),
    /// Nothing at all for the watch timeout plus the margin: it hangs.
    Silent,
    /// The version is too old (410 Gone): relist.
    Gone,
    /// The datacenter's API server answers again after it did not: what happened meanwhile may
    /// be lost to a watch (deletions compacted away): relist.
    Recovered,
}

/// What a watch delivered.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Delivered {
    /// An object added, modified or deleted.
    Event,
    /// A bookmark: the watch has reached a resourceVersion, nothing changed.
    Bookmark,
}

/// Why a request failed.
pub(super) enum Failure {
    /// The resource (this version of it) is not served.
    Absent,
    /// Too old a resourceVersion.
    Gone,
    /// Anything else.
    Other(String),
}

/// Why a list-and-watch stopped, which says what comes next.
pub(super) enum Stopped {
    /// The version is not served: try the next one, then wait.
    Absent,
    /// The resourceVersion is too old: relist at once.
    Gone,
    /// A failure (already recorded and waited out) or a silent watch: relist.
    Relist,
}

pub(super) fn failure(e: &kube::Error) -> Failure {
    match e {
        kube::Error::Api(s) if s.code == 404 => Failure::Absent,
        kube::Error::Api(s) if s.code == 410 => Failure::Gone,
        other => Failure::Other(other.to_string()),
    }
}

/// One kind (in one scope): list, watch, repeat.
pub(super) struct Watch {
    pub(super) client: Client,
    pub(super) store: Arc<Store>,
    pub(super) status: Arc<SourceStatus>,
    pub(super) settings: KubeSettings,
    pub(super) kind: Kind,
    pub(super) scope: Option<String>,
    pub(super) backoff: Backoff,
    pub(super) listed_once: bool,
    /// The last watch delivered something (an event or a bookmark) before it ended.
    pub(super) delivered: bool,
    /// Shared by every watcher of every datacenter: how many first lists run at once.
    pub(super) list_permits: Arc<tokio::sync::Semaphore>,
    /// Held until the kind's first list is applied (or its resource is found not served): the
    /// store then knows a first sync runs.
    pub(super) loading: Option<crate::store::Loading>,
    /// Counts the datacenter's recoveries (its probe answered again after failing): each one
    /// after this watcher's last list makes it list again.
    pub(super) recovered: tokio::sync::watch::Receiver<u64>,
}

impl Watch {
    fn scope_key(&self) -> String {
        self.scope.clone().unwrap_or_default()
    }

    fn api(&self, version: &str) -> Api<DynamicObject> {
        let ar = super::api_resource(self.kind, version);
        match &self.scope {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        }
    }

    /// The watch delivered something: the data is current as of now, at `rv`; the kind is no
    /// longer silent.
    fn received(&mut self, rv: &str, what: Delivered) {
        self.delivered = true;
        let (scope, now) = (self.scope_key(), jiff::Timestamp::now());
        self.status
            .update(&self.settings.datacenter, self.kind, |k| {
                k.received_at.insert(scope.clone(), now);
                k.resource_versions.insert(scope.clone(), rv.to_string());
                if what == Delivered::Event {
                    k.last_event_at = Some(now);
                }
                if k.silent_watches.remove(&scope).is_some() && k.failing_since.is_none() {
                    k.error = None;
                    tracing::info!(kind = self.kind.name(), "watch alive again");
                }
                if k.failing_since.take().is_some() && k.silent_watches.is_empty() {
                    k.error = None;
                }
            });
    }

    /// Record a failure and wait before the next try.
    async fn failed(&mut self, what: &str, error: String) {
        let delay = self.backoff.delay();
        tracing::warn!(kind = self.kind.name(), error = %error, retry_in = ?delay, "{what} failed; retrying");
        self.status
            .update(&self.settings.datacenter, self.kind, |k| {
                k.error = Some(format!("{what} failed: {error}"));
                k.failing_since.get_or_insert(jiff::Timestamp::now());
            });
        tokio::time::sleep(delay).await;
    }

    /// Run forever: find a served version, list, watch.
    pub(super) async fn run(mut self, first_version: &'static str) {
        let versions = self.kind.versions();
        let mut vi = versions
            .iter()
            .position(|v| *v == first_version)
            .unwrap_or(0);
        let mut absent_in_a_row = 0;
        loop {
            let version = versions[vi];
            let api_version = self.kind.api_version(version);
            self.status
                .update(&self.settings.datacenter, self.kind, |k| {
                    k.api_version = api_version.clone()
                });
            match self.list_and_watch(version).await {
                Stopped::Absent => {
                    // Kinds served in several versions (NetworkNamespace) try the next one, and
                    // come back round to the first.
                    vi = (vi + 1) % versions.len();
                    absent_in_a_row += 1;
                    if absent_in_a_row < versions.len() {
                        tracing::info!(
                            kind = self.kind.name(),
                            "{api_version} not served; trying {}",
                            versions[vi]
                        );
                        continue;
                    }
                    absent_in_a_row = 0;
                    let all = versions
                        .iter()
                        .map(|v| self.kind.api_version(v))
                        .collect::<Vec<_>>()
                        .join(", ");
                    let delay = self
                        .settings
                        .absent_retry
                        .mul_f64(0.75 + rand::random_range(0.0..=0.5));
                    tracing::warn!(kind = self.kind.name(), retry_in = ?delay, "resource not served; retrying");
                    // Nothing of it to load until it is served.
                    self.loading = None;
                    self.status
                        .update(&self.settings.datacenter, self.kind, |k| {
                            k.served = Some(false);
                            k.error = Some(format!(
                                "{all} is not served by the API server (CRD not installed?)"
                            ));
                            k.failing_since.get_or_insert(jiff::Timestamp::now());
                        });
                    tokio::time::sleep(delay).await;
                }
                Stopped::Gone | Stopped::Relist => absent_in_a_row = 0,
            }
        }
    }

    /// List, then watch until a relist is needed; returns why it stopped (Absent: the version
    /// is not served; otherwise: relist).
    async fn list_and_watch(&mut self, version: &'static str) -> Stopped {
        let api = self.api(version);
        let rv = match self.list(&api, version).await {
            Ok(rv) => rv,
            Err(Failure::Absent) => return Stopped::Absent,
            Err(Failure::Gone) => return Stopped::Gone,
            Err(Failure::Other(e)) => {
                self.failed("list", e).await;
                return Stopped::Relist;
            }
        };
        self.watch(&api, version, rv).await
    }

    /// One full list (paged), applied; returns its resourceVersion.
    async fn list(&mut self, api: &Api<DynamicObject>, version: &str) -> Result<String, Failure> {
        // First lists wait their turn (LIST_CONCURRENCY): a start with many datacenters does
        // not hold every one's objects in memory at once. Relists do not wait.
        let permits = self.list_permits.clone();
        let _turn = match self.listed_once {
            false => permits.acquire().await.ok(),
            true => None,
        };
        // This list sees everything up to now: recoveries before it need no other.
        self.recovered.borrow_and_update();
        let mut listed = Listed::default();
        let mut token: Option<String> = None;
        let rv = loop {
            let lp = ListParams {
                limit: Some(LIST_PAGE),
                continue_token: token.clone(),
                ..Default::default()
            };
            let text = self.list_page(api, &lp).await.map_err(|e| failure(&e))?;
            // Only this watcher writes its kind's objects in its scope, so the store's copy is
            // what a relist is compared with until it is applied. A first list finds none:
            // it looks nothing up.
            let stored = self.listed_once.then(|| self.store.snapshot());
            let (datacenter, kind, status) = (&self.settings.datacenter, self.kind, &self.status);
            let meta = page::read_page(&text, &mut |item| match resource_from_value(
                datacenter, kind, version, item,
            ) {
                Ok(r) => listed.add(stored.as_deref(), r),
                Err(e) => undecodable(status, ChangeType::Added, kind, &e),
            })
            .map_err(|e| failure(&kube::Error::SerdeError(e)))?;
            token = meta.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                break meta.resource_version.unwrap_or_default();
            }
        };
        if rv.is_empty() {
            return Err(Failure::Other("the list has no resourceVersion".into()));
        }
        let first = !self.listed_once;
        let changed = replace_kind(
            &self.store,
            &self.settings.datacenter,
            self.kind,
            self.scope.as_deref(),
            listed,
            first,
        )
        .await;
        self.listed_once = true;
        self.loading = None;
        self.backoff.reset();
        let (scope, now) = (self.scope_key(), jiff::Timestamp::now());
        self.status
            .update(&self.settings.datacenter, self.kind, |k| {
                k.served = Some(true);
                if first {
                    k.unsynced_scopes = k.unsynced_scopes.saturating_sub(1);
                }
                k.last_synced_at = Some(now);
                k.received_at.insert(scope.clone(), now);
                k.resource_versions.insert(scope, rv.clone());
                if k.failing_since.take().is_some() && k.silent_watches.is_empty() {
                    k.error = None;
                }
            });
        tracing::info!(
            kind = self.kind.name(),
            namespace = self.scope.as_deref().unwrap_or("*"),
            changed,
            "listed"
        );
        Ok(rv)
    }

    /// One list page's JSON text: the request `Api::list` makes, its answer read by
    /// [`page::read_page`] rather than decoded whole.
    async fn list_page(&self, api: &Api<DynamicObject>, lp: &ListParams) -> kube::Result<String> {
        let mut req = kube::core::Request::new(api.resource_url())
            .list(lp)
            .map_err(kube::Error::BuildRequest)?;
        req.extensions_mut().insert("list");
        self.client.request_text(req).await
    }

    /// Watch from `rv` until the kind must be relisted (or its version is not served).
    async fn watch(&mut self, api: &Api<DynamicObject>, version: &str, mut rv: String) -> Stopped {
        let timeout = self
            .settings
            .watch_timeout
            .as_secs()
            .clamp(1, u64::from(u32::MAX)) as u32;
        let params = WatchParams::default().timeout(timeout);
        loop {
            let stream = match api.watch(&params, &rv).await {
                Ok(s) => s,
                Err(e) => match failure(&e) {
                    Failure::Gone => return Stopped::Gone,
                    Failure::Absent => return Stopped::Absent,
                    Failure::Other(e) => {
                        self.failed("watch", e).await;
                        continue;
                    }
                },
            };
            let opened = tokio::time::Instant::now();
            let why = match self.follow(stream, version, &mut rv).await {
                // It sent an event or a bookmark, then the API server closed it at its timeout
                // (the proof of progress came with what it sent): watch on from there.
                Ended::Closed if self.delivered => {
                    self.backoff.reset();
                    continue;
                }
                Ended::Closed => {
                    if opened.elapsed() < self.settings.watch_timeout / 2 {
                        // Closed at once with nothing sent: not the API server's timeout; back off.
                        self.failed(
                            "watch",
                            "the watch closed at once without sending anything".into(),
                        )
                        .await;
                    }
                    // Asked for bookmarks, a live API server sends one before it closes a watch
                    // at its timeout: a close with neither event nor bookmark proves nothing.
                    "closed without an event or a bookmark"
                }
                Ended::Broken(e) => {
                    // A dropped connection: resume at once; a watch that keeps breaking before it
                    // delivers anything backs off like any failure (never a tight loop).
                    if self.delivered {
                        tracing::info!(kind = self.kind.name(), error = %e, "watch connection dropped; resuming");
                    } else {
                        self.failed("watch", e).await;
                    }
                    continue;
                }
                Ended::Gone => return Stopped::Gone,
                Ended::Recovered => {
                    tracing::info!(
                        kind = self.kind.name(),
                        "the API server answers again; relisting"
                    );
                    return Stopped::Relist;
                }
                Ended::Silent => "stayed open past its timeout without an event or a bookmark",
            };
            if self.silent(why) {
                return Stopped::Relist;
            }
        }
    }

    /// A watch ended without proving progress (`why`): counted, the kind reported stale from
    /// the last event or bookmark received; true when it is time to relist.
    fn silent(&self, why: &str) -> bool {
        let scope = self.scope_key();
        let timeout = self.settings.watch_timeout;
        let mut silent = 0;
        self.status.update(&self.settings.datacenter, self.kind, |k| {
            let n = k.silent_watches.entry(scope.clone()).or_insert(0);
            *n += 1;
            silent = *n;
            k.error = Some(format!(
                "the watch sent nothing (no event, no bookmark) in its {:.0} s: it {why}, {silent} time(s) in a row; the API server does not answer",
                timeout.as_secs_f64()
            ));
        });
        if silent >= SILENT_WATCHES_BEFORE_RELIST {
            tracing::warn!(
                kind = self.kind.name(),
                silent,
                "watches keep sending nothing; relisting"
            );
            return true;
        }
        tracing::warn!(kind = self.kind.name(), timeout = ?timeout, "the watch {why}; the kind is stale; watching again");
        false
    }

    /// Apply a watch's events until it ends.
    async fn follow(
        &mut self,
        stream: impl futures::Stream<Item = kube::Result<WatchEvent<DynamicObject>>>,
        version: &str,
        rv: &mut String,
    ) -> Ended {
        let window = self.settings.window();
        futures::pin_mut!(stream);
        self.delivered = false;
        loop {
            let next = tokio::time::timeout(window, stream.next());
            let item = tokio::select! {
                item = next => match item {
                    Err(_) => return Ended::Silent,
                    Ok(None) => return Ended::Closed,
                    Ok(Some(item)) => item,
                },
                Ok(()) = self.recovered.changed() => return Ended::Recovered,
            };
            let change = if matches!(item, Ok(WatchEvent::Added(_))) {
                ChangeType::Added
            } else {
                ChangeType::Modified
            };
            match item {
                Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj)) => {
                    let at = obj.metadata.resource_version.clone();
                    match to_resource(&self.settings.datacenter, self.kind, version, obj) {
                        Ok(r) => {
                            self.store.apply(vec![Op::Mirror(r)]);
                        }
                        Err(e) => undecodable(&self.status, change, self.kind, &e),
                    }
                    if let Some(at) = at {
                        *rv = at;
                    }
                    self.received(rv, Delivered::Event);
                }
                Ok(WatchEvent::Deleted(obj)) => {
                    let ns = obj.metadata.namespace.clone().unwrap_or_default();
                    let name = obj.metadata.name.clone().unwrap_or_default();
                    self.store.apply(vec![Op::Delete(ObjectKey::new(
                        &self.settings.datacenter,
                        self.kind,
                        &ns,
                        &name,
                    ))]);
                    if let Some(at) = obj.metadata.resource_version {
                        *rv = at;
                    }
                    self.received(rv, Delivered::Event);
                }
                Ok(WatchEvent::Bookmark(bm)) => {
                    *rv = bm.metadata.resource_version;
                    self.received(rv, Delivered::Bookmark);
                }
                Ok(WatchEvent::Error(s)) if s.code == 410 => return Ended::Gone,
                Ok(WatchEvent::Error(s)) => {
                    return Ended::Broken(format!("{} ({})", s.message, s.code));
                }
                Err(e) => return Ended::Broken(e.to_string()),
            }
        }
    }
}

pub(super) fn undecodable(
    status: &SourceStatus,
    change: ChangeType,
    kind: Kind,
    e: &serde_json::Error,
) {
    status.undecodable.add(kind, change);
    tracing::warn!(kind = kind.name(), error = %e, "object skipped: the model cannot read it");
}

/// What a list returned, as it arrives: the objects that differ from the store's, and for each
/// one the store already holds as listed, the store's own (so that a relist holds the kind's
/// objects once, not twice, while it runs: a relist of a datacenter whose objects did not change
/// costs their keys, not a second copy of them).
#[derive(Default)]
pub(super) struct Listed {
    changed: Vec<Resource>,
    unchanged: Vec<Arc<Resource>>,
}

impl Listed {
    /// Take one listed object: kept when it differs from `stored`'s copy (or nothing is
    /// stored to compare with), dropped otherwise.
    pub(super) fn add(&mut self, stored: Option<&crate::store::Snapshot>, r: Resource) {
        match stored.and_then(|s| s.get(r.datacenter(), r.kind(), r.namespace(), r.name())) {
            Some(held) if **held == r => self.unchanged.push(held.clone()),
            _ => self.changed.push(r),
        }
    }
}

/// Make the store's objects of `kind` (in `namespace`, or all) exactly `listed`: listed objects
/// are upserted as they are, objects not listed are deleted. The first list is the state the
/// source starts from (loaded, paced); a relist is applied atomically and its differences are
/// news.
pub(super) async fn replace_kind(
    store: &Store,
    datacenter: &Datacenter,
    kind: Kind,
    namespace: Option<&str>,
    listed: Listed,
    first: bool,
) -> usize {
    let snap = store.snapshot();
    let Listed { changed, unchanged } = listed;
    let keep: HashSet<ObjectKey> = changed
        .iter()
        .chain(unchanged.iter().map(|r| &**r))
        .map(ObjectKey::of)
        .collect();
    let existing: Vec<ObjectKey> = match namespace {
        Some(ns) => snap
            .list_in_datacenter(datacenter, kind, ns)
            .map(|r| ObjectKey::of(r))
            .collect(),
        None => snap
            .list_datacenter(datacenter, kind)
            .map(|r| ObjectKey::of(r))
            .collect(),
    };
    let mut ops: Vec<Op> = existing
        .into_iter()
        .filter(|k| !keep.contains(k))
        .map(Op::Delete)
        .collect();
    // An object found unchanged and replaced since (by nothing else in this process, but the
    // store does not promise that) is put back as listed.
    ops.extend(unchanged.into_iter().filter_map(|held| {
        let now = snap.get(
            held.datacenter(),
            held.kind(),
            held.namespace(),
            held.name(),
        );
        match now.is_some_and(|now| Arc::ptr_eq(now, &held)) {
            true => None,
            false => Some(Op::Mirror(Arc::unwrap_or_clone(held))),
        }
    }));
    ops.extend(changed.into_iter().map(Op::Mirror));
    if first {
        store.load(ops).await
    } else {
        store.apply(ops).len()
    }
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
