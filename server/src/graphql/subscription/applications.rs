//! `applicationChanged`: the inventory's changes as a subscription, snapshot-then-stream, in the
//! parts the subscription executor opens ([`Mode`]).

use std::sync::Arc;

use async_graphql::{Context, Enum, Object};
use futures::StreamExt;
use futures::stream::BoxStream;

use super::{Active, After, Mode, Seq};
use crate::graphql::applications::{ApplicationFilter, ApplicationObj, HealthValue, inventory};
use crate::inventory::{AppChange, AppEntry, Inventory, Snapshot};

/// What happened to an application.
#[derive(Enum, Copy, Clone, Debug, Eq, PartialEq)]
pub enum ApplicationChangeType {
    Added,
    Updated,
    Removed,
    /// The snapshot's applications have all been sent; changes follow.
    Synced,
    /// Changes were missed (a slow reader): the snapshot follows again.
    Resync,
}

/// One event of `applicationChanged`.
#[derive(Clone)]
pub struct ApplicationEvent {
    typ: ApplicationChangeType,
    change: Option<Arc<AppChange>>,
    current: Option<Arc<AppEntry>>,
}

impl ApplicationEvent {
    fn marker(typ: ApplicationChangeType) -> Self {
        ApplicationEvent {
            typ,
            change: None,
            current: None,
        }
    }

    /// The subscriber missed changes.
    pub fn is_resync(&self) -> bool {
        self.typ == ApplicationChangeType::Resync
    }
}

#[Object]
impl ApplicationEvent {
    #[graphql(name = "type")]
    async fn typ(&self) -> ApplicationChangeType {
        self.typ
    }
    /// The application as it is now (as it was, for REMOVED).
    async fn application(&self) -> Option<ApplicationObj> {
        self.current
            .clone()
            .or_else(|| self.change.as_ref()?.entry().cloned())
            .map(ApplicationObj)
    }
    /// Its health before this change.
    async fn previous_health(&self) -> Option<HealthValue> {
        Some(self.change.as_ref()?.before.as_ref()?.app.health.into())
    }
    /// Its revision before this change.
    async fn previous_revision(&self) -> Option<u64> {
        Some(self.change.as_ref()?.before.as_ref()?.app.release.revision)
    }
}

/// `applicationChanged`: with `snapshot`, the applications passing `filter` first (ADDED), then
/// SYNCED; then every change of one that passes (before or after it). Each event carries the
/// inventory's generation (what the subscription executor orders openings and changes by).
/// `mode` picks the part (see [`Mode`]); `after` learns where an opening left off.
pub(crate) fn application_changed(
    ctx: &Context<'_>,
    filter: Option<ApplicationFilter>,
    snapshot: bool,
    mode: Mode,
    after: Option<&Arc<After>>,
    active: Active,
) -> async_graphql::Result<BoxStream<'static, Seq<ApplicationEvent>>> {
    let inv = inventory(ctx)?.clone();
    let filter = filter.unwrap_or_default();
    // Listening before reading: nothing falls between the snapshot and the stream.
    let rx = inv.changes();
    let scope = crate::graphql::scope_of(ctx);
    let snap = inv.snapshot().visible(&scope);
    let mut queue = std::collections::VecDeque::new();
    match mode {
        Mode::Whole | Mode::Opening if snapshot => {
            queue.extend(snapshot_events(&snap, &filter));
        }
        Mode::Resync => {
            queue.push_back(Seq::new(
                snap.generation,
                ApplicationEvent::marker(ApplicationChangeType::Resync),
            ));
            queue.extend(snapshot_events(&snap, &filter));
        }
        _ => {}
    }
    if matches!(mode, Mode::Opening | Mode::Resync) {
        After::note(after, snap.generation);
        return Ok(futures::stream::iter(queue).boxed());
    }
    let state = Following {
        rx,
        inv,
        scope,
        filter,
        since: snap.generation,
        queue,
        live: mode == Mode::Live,
        _active: active,
    };
    Ok(futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(e) = st.queue.pop_front() {
                return Some((e, st));
            }
            match st.rx.recv().await {
                Ok(c) => {
                    if c.generation <= st.since {
                        continue;
                    }
                    let passes = |a: &AppEntry| {
                        st.scope
                            .sees_namespace(&a.datacenter, &a.app.release.namespace)
                            && st.filter.passes(a)
                    };
                    let before = c.before.as_deref().is_some_and(passes);
                    let after = c.after.as_deref().is_some_and(passes);
                    let typ = match (before, after) {
                        (false, true) => ApplicationChangeType::Added,
                        (true, true) => ApplicationChangeType::Updated,
                        (true, false) => ApplicationChangeType::Removed,
                        (false, false) => continue,
                    };
                    let e = Seq::new(
                        c.generation,
                        ApplicationEvent {
                            typ,
                            change: Some(c),
                            current: None,
                        },
                    );
                    return Some((e, st));
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    let s = st.inv.snapshot().visible(&st.scope);
                    st.since = s.generation;
                    st.queue.push_back(Seq::new(
                        s.generation,
                        ApplicationEvent::marker(ApplicationChangeType::Resync),
                    ));
                    // Live (the executor's hub): each subscriber reads its own fresh opening.
                    if !st.live {
                        let again = snapshot_events(&s, &st.filter);
                        st.queue.extend(again);
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .boxed())
}

/// What `applicationChanged` follows.
struct Following {
    rx: tokio::sync::broadcast::Receiver<Arc<AppChange>>,
    inv: Arc<Inventory>,
    /// What the subscriber may see.
    scope: crate::store::Scope,
    filter: ApplicationFilter,
    since: u64,
    queue: std::collections::VecDeque<Seq<ApplicationEvent>>,
    live: bool,
    _active: Active,
}

/// The applications of `s` passing `filter` (ADDED), then SYNCED.
fn snapshot_events(s: &Snapshot, filter: &ApplicationFilter) -> Vec<Seq<ApplicationEvent>> {
    let mut out: Vec<Seq<ApplicationEvent>> = s
        .apps
        .values()
        .filter(|a| filter.passes(a))
        .map(|a| {
            Seq::new(
                s.generation,
                ApplicationEvent {
                    typ: ApplicationChangeType::Added,
                    change: None,
                    current: Some(a.clone()),
                },
            )
        })
        .collect();
    out.push(Seq::new(
        s.generation,
        ApplicationEvent::marker(ApplicationChangeType::Synced),
    ));
    out
}
