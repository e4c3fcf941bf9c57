//! Where the store's objects come from and how current each kind is: the state the sources keep
//! and the report `/health/operators`, GraphQL `sources` and `/metrics` serve.
//!
//! A kind is current while its watches prove they are alive: an event, a bookmark or a completed
//! list. A watch that ends without sending either (closed at its timeout with nothing, or open
//! past it: the API server hangs or stalls, a proxy swallows the stream) does not prove anything;
//! from then on the kind is *stale* until a watch proves alive again, and its staleness counts
//! from the last proof received. So is a kind whose watch fails.

use std::collections::BTreeMap;
use std::time::Duration;

use parking_lot::Mutex;

use crate::model::{Datacenter, Kind};

/// The state of one watched kind, for `/health/operators`, GraphQL `sources` and `/metrics`.
#[derive(Clone, Debug)]
pub struct KindStatus {
    /// The datacenter it is watched in.
    pub datacenter: Datacenter,
    /// The kind.
    pub kind: Kind,
    /// `group/version` watched.
    pub api_version: String,
    /// None until the first answer; false when the resource is not installed (404).
    pub served: Option<bool>,
    /// Objects of this kind in the store.
    pub objects: usize,
    /// When the last full list was applied.
    pub last_synced_at: Option<jiff::Timestamp>,
    /// When the last watch event was applied.
    pub last_event_at: Option<jiff::Timestamp>,
    /// Per watch scope (namespace, "" for all): when the data was last proven current (a list, an
    /// event, a bookmark).
    pub received_at: BTreeMap<String, jiff::Timestamp>,
    /// Per watch scope: watches in a row that ended by sending nothing at all.
    pub silent_watches: BTreeMap<String, u32>,
    /// Per watch scope: the resourceVersion the watch has reached.
    pub resource_versions: BTreeMap<String, String>,
    /// Since when the watch has been failing (None while healthy).
    pub failing_since: Option<jiff::Timestamp>,
    /// The last error, while failing or silent.
    pub error: Option<String>,
    /// Watch scopes (namespaces) of this kind not listed yet.
    pub unsynced_scopes: usize,
}

impl KindStatus {
    fn new(datacenter: &Datacenter, kind: Kind, version: &str, unsynced_scopes: usize) -> Self {
        KindStatus {
            datacenter: datacenter.clone(),
            kind,
            api_version: kind.api_version(version),
            served: None,
            objects: 0,
            last_synced_at: None,
            last_event_at: None,
            received_at: BTreeMap::new(),
            silent_watches: BTreeMap::new(),
            resource_versions: BTreeMap::new(),
            failing_since: None,
            error: None,
            unsynced_scopes,
        }
    }

    /// True once every watched namespace of the kind has been listed in full (stays true
    /// across relists).
    pub fn synced(&self) -> bool {
        self.unsynced_scopes == 0
    }

    /// The oldest proof of currency over the kind's scopes.
    fn oldest_received(&self) -> Option<jiff::Timestamp> {
        self.received_at.values().min().copied()
    }

    /// True when the kind's data may be behind the cluster: its watch fails, a watch of it went
    /// silent and none has proven alive since, or nothing proved it current within `window`
    /// (the watch timeout plus a margin).
    pub fn stale(&self, now: jiff::Timestamp, window: Duration) -> bool {
        if self.served == Some(false) {
            // Not installed: reported as such (`served: false`), nothing to be behind on.
            return false;
        }
        if !self.synced() {
            return self.failing_since.is_some();
        }
        self.failing_since.is_some()
            || self.silent_watches.values().any(|n| *n > 0)
            || self
                .oldest_received()
                .is_some_and(|t| seconds(now, t) > window.as_secs_f64())
    }

    /// Seconds the kind's data may be behind the cluster: 0 while current, else the time since
    /// it was last proven current (since the failure began, if it never was); NaN before the
    /// first sync.
    pub fn stale_seconds(&self, now: jiff::Timestamp, window: Duration) -> f64 {
        if !self.stale(now, window) {
            return if self.synced() || self.served == Some(false) {
                0.0
            } else {
                f64::NAN
            };
        }
        match (self.oldest_received(), self.failing_since) {
            (Some(t), _) | (None, Some(t)) => seconds(now, t).max(0.0),
            (None, None) => f64::NAN,
        }
    }
}

fn seconds(now: jiff::Timestamp, then: jiff::Timestamp) -> f64 {
    (now - then).total(jiff::Unit::Second).unwrap_or(0.0)
}

/// Where the store's objects come from, and how current each kind is.
#[derive(Debug)]
pub struct SourceStatus {
    /// `embedded` or `kube`.
    pub mode: &'static str,
    /// Longest a live watch stays silent (its timeout plus a margin).
    pub window: Duration,
    /// By datacenter, then kind name.
    kinds: Mutex<BTreeMap<(Datacenter, &'static str), KindStatus>>,
    /// Objects the source received but the model could not read (skipped), by kind and the
    /// change they would have been (listed objects count as added).
    pub undecodable: crate::store::ChangeCounts,
    /// Each datacenter's state, when the source watches several (one cluster: `None`, and
    /// readiness is as it always was).
    pub datacenters: Option<super::datacenters::Datacenters>,
}

impl SourceStatus {
    /// The embedded source, holding the datacenters `own` (the one datacenter, or the demo's):
    /// every kind is served by construction. With a policy, datacenters are judged (the demo's
    /// go away now and then; other datacenters' agents push reports).
    pub fn embedded(own: &[Datacenter], several: Option<super::datacenters::Policy>) -> Self {
        let kinds = own
            .iter()
            .flat_map(|dc| {
                Kind::ALL.iter().map(move |k| {
                    (
                        (dc.clone(), k.name()),
                        KindStatus {
                            served: Some(true),
                            ..KindStatus::new(dc, *k, k.versions()[0], 0)
                        },
                    )
                })
            })
            .collect();
        SourceStatus {
            mode: "embedded",
            window: Duration::MAX,
            kinds: Mutex::new(kinds),
            undecodable: Default::default(),
            datacenters: several.map(super::datacenters::Datacenters::new),
        }
    }

    /// The kube source, before any datacenter is added (see [`SourceStatus::add_datacenter`]);
    /// with a policy when it watches several datacenters.
    pub(crate) fn kube(window: Duration, several: Option<super::datacenters::Policy>) -> Self {
        SourceStatus {
            mode: "kube",
            window,
            kinds: Mutex::new(BTreeMap::new()),
            undecodable: Default::default(),
            datacenters: several.map(super::datacenters::Datacenters::new),
        }
    }

    /// Start following the kinds watched in `datacenter` (`scopes`: how many namespaces each
    /// is watched in), none of them listed yet.
    pub(crate) fn add_datacenter(
        &self,
        datacenter: &Datacenter,
        kinds: &[(Kind, &'static str)],
        scopes: impl Fn(Kind) -> usize,
    ) {
        let mut all = self.kinds.lock();
        for (k, version) in kinds {
            all.insert(
                (datacenter.clone(), k.name()),
                KindStatus::new(datacenter, *k, version, scopes(*k)),
            );
        }
    }

    /// A datacenter whose cluster cannot be reached at all (no client could be built): each of
    /// its kinds is reported failing, with the reason, until it connects.
    pub(crate) fn unreachable(
        &self,
        datacenter: &Datacenter,
        kinds: &[(Kind, &'static str)],
        error: &str,
    ) {
        self.add_datacenter(datacenter, kinds, |_| 1);
        if let Some(d) = &self.datacenters {
            d.no_client(datacenter, error);
        }
        let now = jiff::Timestamp::now();
        for (_, k) in self
            .kinds
            .lock()
            .iter_mut()
            .filter(|((dc, _), _)| dc == datacenter)
        {
            k.failing_since = Some(now);
            k.error = Some(error.to_string());
        }
    }

    /// Stop following a datacenter (it was removed from the configuration).
    pub(crate) fn remove_datacenter(&self, datacenter: &Datacenter) {
        self.kinds.lock().retain(|(dc, _), _| dc != datacenter);
        if let Some(d) = &self.datacenters {
            d.remove(datacenter);
        }
    }

    /// True when the source watches `datacenter` itself.
    pub fn watches(&self, datacenter: &Datacenter) -> bool {
        self.kinds
            .lock()
            .range((datacenter.clone(), "")..)
            .next()
            .is_some_and(|((dc, _), _)| dc == datacenter)
    }

    /// An agent's report for `datacenter`, taken at `at` (see [`super::hub`]).
    pub(crate) fn pushed(&self, datacenter: &Datacenter, at: jiff::Timestamp) {
        if let Some(d) = &self.datacenters {
            d.pushed(datacenter, at);
        }
    }

    /// Every datacenter judged now, as `datacenters` serves them: each one of several, or the
    /// one datacenter of a single-cluster source, judged by its lists.
    pub fn datacenters_now(&self) -> Vec<super::datacenters::DatacenterReport> {
        use super::datacenters::{DatacenterReport, DatacenterState};
        if self.datacenters.is_some() {
            return self.datacenter_reports();
        }
        let state = match (self.synced(), self.ready()) {
            (_, true) => DatacenterState::Synced,
            (true, false) => DatacenterState::Stale,
            (false, false) => DatacenterState::Connecting,
        };
        vec![DatacenterReport {
            key: Datacenter::default(),
            state,
            last_synced_at: None,
            age_seconds: None,
            last_error: None,
        }]
    }

    /// Every datacenter judged now (several datacenters; otherwise none).
    pub fn datacenter_reports(&self) -> Vec<super::datacenters::DatacenterReport> {
        let Some(d) = &self.datacenters else {
            return Vec::new();
        };
        let now = jiff::Timestamp::now();
        // The embedded source's one datacenter is current by construction (the demo's
        // datacenters answer probes, see `demo_weather`).
        let embedded = self.mode == "embedded";
        let kinds: Vec<(Datacenter, super::datacenters::KindFacts)> =
            self.kinds
                .lock()
                .values()
                .map(|k| {
                    let facts =
                        super::datacenters::KindFacts {
                            synced: k.synced() || k.served == Some(false),
                            last_received: (embedded && k.datacenter.is_single())
                                .then_some(now)
                                .or(k.received_at.values().max().copied()),
                            error: k.error.clone(),
                            stale: k.stale(now, self.window),
                        };
                    (k.datacenter.clone(), facts)
                })
                .collect();
        d.report(&kinds, now)
    }

    /// Why the graph is not current on a kind now: `not installed`, or `behind` (stale);
    /// None when it is current (or not watched).
    pub fn lag(&self, snap: &crate::store::Snapshot) -> impl Fn(Kind) -> Option<&'static str> {
        let kinds = self.kinds(snap);
        let now = jiff::Timestamp::now();
        let window = self.window;
        move |k| {
            let s = kinds.iter().find(|s| s.kind == k)?;
            if s.served == Some(false) {
                Some("not installed")
            } else if s.stale(now, window) {
                Some("behind")
            } else {
                None
            }
        }
    }

    /// Every kind's status in every datacenter, with object counts from a snapshot.
    pub fn kinds(&self, snap: &crate::store::Snapshot) -> Vec<KindStatus> {
        let single = self.mode == "embedded";
        self.kinds
            .lock()
            .values()
            .cloned()
            .map(|mut k| {
                // The embedded source's one datacenter covers every object it holds.
                k.objects = if single && k.datacenter.is_single() {
                    snap.count(k.kind)
                } else {
                    snap.list_datacenter(&k.datacenter, k.kind).count()
                };
                k
            })
            .collect()
    }

    /// Synced when every kind has either been listed once or is known not to be installed.
    pub fn synced(&self) -> bool {
        self.kinds
            .lock()
            .values()
            .all(|k| k.synced() || k.served == Some(false))
    }

    /// True when every kind of `datacenter` has been listed once or is known not to be
    /// installed (so what the graph holds of it is whole).
    pub fn datacenter_synced(&self, datacenter: &Datacenter) -> bool {
        self.kinds
            .lock()
            .range((datacenter.clone(), "")..)
            .take_while(|((dc, _), _)| dc == datacenter)
            .all(|(_, k)| k.synced() || k.served == Some(false))
    }

    /// The kinds whose data may be behind the cluster now.
    pub fn stale_kinds(&self) -> Vec<&'static str> {
        let now = jiff::Timestamp::now();
        self.kinds
            .lock()
            .iter()
            .filter(|(_, k)| k.stale(now, self.window))
            .map(|((_, n), _)| *n)
            .collect()
    }

    /// Ready to serve. One cluster: synced, and no kind stale (the API server answers and its
    /// watches are alive). Several datacenters: every one has synced once, or
    /// `READY_TIMEOUT_SECONDS` have passed; one that is stale or away is served as it was last
    /// known (and said to be), not a reason to stop serving the others.
    pub fn ready(&self) -> bool {
        match &self.datacenters {
            None => self.synced() && self.stale_kinds().is_empty(),
            Some(d) => self.synced() || d.ready_timeout_passed(),
        }
    }

    pub(crate) fn update(
        &self,
        datacenter: &Datacenter,
        kind: Kind,
        f: impl FnOnce(&mut KindStatus),
    ) {
        if let Some(k) = self
            .kinds
            .lock()
            .get_mut(&(datacenter.clone(), kind.name()))
        {
            f(k);
        }
    }
}

/// Where the data comes from and how current each kind is (`/health/operators`, GraphQL
/// `sources`).
#[derive(Debug, serde::Serialize, async_graphql::SimpleObject)]
#[graphql(name = "Sources")]
pub struct OperatorsReport {
    /// `embedded` (files, demo, database) or `kube` (watches on a cluster).
    pub mode: String,
    /// True when every served kind has synced once and none is stale.
    pub ready: bool,
    /// One entry per kind.
    pub kinds: Vec<KindReport>,
}

/// How current one kind is.
#[derive(Debug, serde::Serialize, async_graphql::SimpleObject)]
#[graphql(name = "SourceKind")]
pub struct KindReport {
    /// The datacenter's key (empty for the one datacenter of a single-cluster server).
    pub datacenter: String,
    /// Kind name.
    pub name: String,
    /// `group/version` watched.
    pub api_version: String,
    /// False when the API server does not serve it (CRD not installed); null before it answered.
    pub served: Option<bool>,
    /// Listed at least once.
    pub synced: bool,
    /// The data may be behind the cluster: the watch fails, or went silent (sent neither events
    /// nor bookmarks before it ended) and no watch has proven alive since.
    pub stale: bool,
    /// Objects in the store.
    pub objects: usize,
    /// Last full list (RFC 3339).
    pub last_synced_at: Option<String>,
    /// Last event applied (RFC 3339).
    pub last_event_at: Option<String>,
    /// When the data was last proven current: a list, an event or a bookmark (RFC 3339; the
    /// oldest over the watched namespaces).
    pub last_received_at: Option<String>,
    /// The resourceVersion the watch has reached (the lowest over the watched namespaces).
    pub resource_version: Option<String>,
    /// 0 while current; while stale, seconds since the data was last proven current; null
    /// before the first sync.
    pub stale_seconds: Option<f64>,
    /// What is wrong, while failing or silent.
    pub error: Option<String>,
}

impl SourceStatus {
    /// The `/health/operators` report.
    pub fn report(&self, snap: &crate::store::Snapshot) -> OperatorsReport {
        let now = jiff::Timestamp::now();
        let kinds: Vec<KindReport> = self
            .kinds(snap)
            .into_iter()
            .map(|k| KindReport {
                datacenter: k.datacenter.key().to_string(),
                name: k.kind.name().to_string(),
                stale: k.stale(now, self.window),
                stale_seconds: Some(k.stale_seconds(now, self.window)).filter(|s| s.is_finite()),
                synced: k.synced(),
                last_received_at: k.oldest_received().map(|t| t.to_string()),
                resource_version: k
                    .resource_versions
                    .values()
                    .min_by_key(|v| v.parse::<u64>().unwrap_or(u64::MAX))
                    .cloned(),
                api_version: k.api_version.clone(),
                served: k.served,
                objects: k.objects,
                last_synced_at: k.last_synced_at.map(|t| t.to_string()),
                last_event_at: k.last_event_at.map(|t| t.to_string()),
                error: k.error.clone().or_else(|| {
                    // Stale by the clock before the watch's own timer noticed.
                    k.stale(now, self.window).then(|| {
                        format!(
                            "the watch sent nothing (no event, no bookmark) for more than {:.0} s",
                            self.window.as_secs_f64()
                        )
                    })
                }),
            })
            .collect();
        OperatorsReport {
            mode: self.mode.to_string(),
            ready: self.synced() && !kinds.iter().any(|k| k.stale),
            kinds,
        }
    }
}
