//! Where the store's objects come from and how current each kind is: the state the sources keep
//! and the report `/health/operators`, GraphQL `sources` and `/metrics` serve.

use std::collections::BTreeMap;

use parking_lot::Mutex;

use crate::model::Kind;

/// The state of one watched kind, for `/health/operators`, GraphQL `sources` and `/metrics`.
#[derive(Clone, Debug)]
pub struct KindStatus {
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
    /// Since when the watch has been failing (None while healthy).
    pub failing_since: Option<jiff::Timestamp>,
    /// The last error, while failing.
    pub error: Option<String>,
    /// Watch scopes (namespaces) of this kind not listed yet.
    pub unsynced_scopes: usize,
}

impl KindStatus {
    fn new(kind: Kind, version: &str, unsynced_scopes: usize) -> Self {
        KindStatus {
            kind,
            api_version: kind.api_version(version),
            served: None,
            objects: 0,
            last_synced_at: None,
            last_event_at: None,
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

    /// Seconds the data of this kind may be behind the cluster: 0 while the watch is healthy,
    /// else the time since it started failing.
    pub fn stale_seconds(&self, now: jiff::Timestamp) -> f64 {
        match self.failing_since {
            Some(t) => (now - t).total(jiff::Unit::Second).unwrap_or(0.0).max(0.0),
            None if self.synced() => 0.0,
            None => f64::NAN,
        }
    }
}

/// Where the store's objects come from, and how current each kind is.
#[derive(Debug)]
pub struct SourceStatus {
    /// `embedded` or `kube`.
    pub mode: &'static str,
    kinds: Mutex<BTreeMap<&'static str, KindStatus>>,
}

impl SourceStatus {
    /// The embedded source: every kind is served and current by construction.
    pub fn embedded() -> Self {
        let kinds = Kind::ALL
            .iter()
            .map(|k| {
                (
                    k.name(),
                    KindStatus {
                        served: Some(true),
                        ..KindStatus::new(*k, k.versions()[0], 0)
                    },
                )
            })
            .collect();
        SourceStatus {
            mode: "embedded",
            kinds: Mutex::new(kinds),
        }
    }

    pub(crate) fn kube(kinds: &[(Kind, &'static str)], scopes: impl Fn(Kind) -> usize) -> Self {
        let kinds = kinds
            .iter()
            .map(|(k, version)| (k.name(), KindStatus::new(*k, version, scopes(*k))))
            .collect();
        SourceStatus {
            mode: "kube",
            kinds: Mutex::new(kinds),
        }
    }

    /// Every kind's status, with object counts from a snapshot.
    pub fn kinds(&self, snap: &crate::store::Snapshot) -> Vec<KindStatus> {
        self.kinds
            .lock()
            .values()
            .cloned()
            .map(|mut k| {
                k.objects = snap.count(k.kind);
                k
            })
            .collect()
    }

    /// Ready when every kind has either synced once or is known not to be installed.
    pub fn ready(&self) -> bool {
        self.kinds
            .lock()
            .values()
            .all(|k| k.synced() || k.served == Some(false))
    }

    pub(crate) fn update(&self, kind: Kind, f: impl FnOnce(&mut KindStatus)) {
        if let Some(k) = self.kinds.lock().get_mut(kind.name()) {
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
    /// True when every served kind has synced once.
    pub ready: bool,
    /// One entry per kind.
    pub kinds: Vec<KindReport>,
}

/// How current one kind is.
#[derive(Debug, serde::Serialize, async_graphql::SimpleObject)]
#[graphql(name = "SourceKind")]
pub struct KindReport {
    /// Kind name.
    pub name: String,
    /// `group/version` watched.
    pub api_version: String,
    /// False when the API server does not serve it (CRD not installed); null before it answered.
    pub served: Option<bool>,
    /// Listed at least once.
    pub synced: bool,
    /// Objects in the store.
    pub objects: usize,
    /// Last full list (RFC 3339).
    pub last_synced_at: Option<String>,
    /// Last event applied (RFC 3339).
    pub last_event_at: Option<String>,
    /// Seconds behind while failing, 0 when healthy, null before the first sync.
    pub stale_seconds: Option<f64>,
    /// Last error while failing.
    pub error: Option<String>,
}

impl SourceStatus {
    /// The `/health/operators` report.
    pub fn report(&self, snap: &crate::store::Snapshot) -> OperatorsReport {
        let now = jiff::Timestamp::now();
        OperatorsReport {
            mode: self.mode.to_string(),
            ready: self.ready(),
            kinds: self
                .kinds(snap)
                .into_iter()
                .map(|k| KindReport {
                    name: k.kind.name().to_string(),
                    stale_seconds: Some(k.stale_seconds(now)).filter(|s| s.is_finite()),
                    synced: k.synced(),
                    api_version: k.api_version,
                    served: k.served,
                    objects: k.objects,
                    last_synced_at: k.last_synced_at.map(|t| t.to_string()),
                    last_event_at: k.last_event_at.map(|t| t.to_string()),
                    error: k.error,
                })
                .collect(),
        }
    }
}
