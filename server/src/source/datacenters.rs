//! Each datacenter's state, for a source that watches several: `CONNECTING` until every kind has
//! been listed once, `SYNCED` while its API server answers, `STALE` once it has been silent for
//! `DC_STALE_AFTER_SECONDS` (a cheap probe every `DC_PROBE_INTERVAL_SECONDS` says so long before a
//! watch would time out), `UNREACHABLE` when it cannot be reached at all. A stale or unreachable
//! datacenter's last-known objects stay in the graph; what is said about it (the state, since
//! when, the last error) comes from here.

use std::collections::BTreeMap;
use std::time::Duration;

use parking_lot::Mutex;

use crate::model::Datacenter;

/// What one watched kind of a datacenter says about it (read from the source's status).
#[derive(Clone, Debug, Default)]
pub struct KindFacts {
    /// Listed once (or not served at all).
    pub synced: bool,
    /// The newest proof of currency over its watches (a list, an event, a bookmark).
    pub last_received: Option<jiff::Timestamp>,
    /// Why its watch fails, while it does.
    pub error: Option<String>,
    /// Its watch fails or went silent.
    pub stale: bool,
}

/// Why a datacenter's API server did not answer a probe.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{0}")]
pub struct NoAnswer(pub String);

/// A datacenter's state.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, async_graphql::Enum,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DatacenterState {
    /// Not every kind has been listed yet.
    Connecting,
    /// Listed, and its API server answers.
    Synced,
    /// Listed once, but its API server has not answered for `DC_STALE_AFTER_SECONDS` (or a
    /// watch went silent): its objects are the last known.
    Stale,
    /// Its API server cannot be reached (no client, or never answered).
    Unreachable,
}

impl DatacenterState {
    /// True when its objects may be behind its cluster.
    pub fn unavailable(self) -> bool {
        matches!(self, DatacenterState::Stale | DatacenterState::Unreachable)
    }
}

/// How datacenters are judged.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// How often each datacenter's API server is asked whether it answers.
    pub probe_interval: Duration,
    /// Silent for longer: stale.
    pub stale_after: Duration,
    /// `/ready` waits this long at most for every datacenter's first sync.
    pub ready_timeout: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            probe_interval: Duration::from_secs(5),
            stale_after: Duration::from_secs(15),
            ready_timeout: Duration::from_secs(120),
        }
    }
}

/// What is known of one datacenter besides its kinds.
#[derive(Clone, Debug, Default)]
struct Record {
    /// The last time its API server answered a probe.
    answered_at: Option<jiff::Timestamp>,
    /// Why the last probe, or building its client, failed (credentials never in it).
    error: Option<String>,
    /// No client could be built.
    no_client: bool,
    /// The last report its agent pushed (a datacenter fed by `/api/report`).
    pushed_at: Option<jiff::Timestamp>,
}

/// Every datacenter's record, and the policy they are judged by.
#[derive(Debug)]
pub struct Datacenters {
    records: Mutex<BTreeMap<Datacenter, Record>>,
    /// How datacenters are judged.
    pub policy: Policy,
    started: std::time::Instant,
}

/// A datacenter as reported (GraphQL `datacenters`, `/health`).
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DatacenterReport {
    /// Its key.
    pub key: Datacenter,
    /// Its state.
    pub state: DatacenterState,
    /// When its data was last proven current: a list, an event, a bookmark or an answered
    /// probe (RFC 3339).
    pub last_synced_at: Option<jiff::Timestamp>,
    /// Seconds since then.
    pub age_seconds: Option<f64>,
    /// What is wrong, while it is.
    pub last_error: Option<String>,
}

impl Datacenters {
    /// No datacenter yet.
    pub fn new(policy: Policy) -> Self {
        Datacenters {
            records: Mutex::new(BTreeMap::new()),
            policy,
            started: std::time::Instant::now(),
        }
    }

    /// A datacenter's API server answered a probe (or did not: `Err` with why).
    pub(crate) fn probed(&self, datacenter: &Datacenter, answer: Result<(), NoAnswer>) {
        let mut records = self.records.lock();
        let r = records.entry(datacenter.clone()).or_default();
        match answer {
            Ok(()) => {
                r.answered_at = Some(jiff::Timestamp::now());
                r.error = None;
                r.no_client = false;
            }
            Err(e) => r.error = Some(e.0),
        }
    }

    /// A datacenter's agent pushed a report (`/api/report`): its data is current now.
    pub(crate) fn pushed(&self, datacenter: &Datacenter, at: jiff::Timestamp) {
        let mut records = self.records.lock();
        let r = records.entry(datacenter.clone()).or_default();
        // A report read back later (another replica's, or one from before a restart) is
        // judged by when it was taken, and never makes a newer one older.
        if r.pushed_at.is_none_or(|p| p < at) {
            r.pushed_at = Some(at);
            r.error = None;
        }
    }

    /// No client could be built for a datacenter.
    pub(crate) fn no_client(&self, datacenter: &Datacenter, error: &str) {
        let mut records = self.records.lock();
        let r = records.entry(datacenter.clone()).or_default();
        r.no_client = true;
        r.error = Some(error.to_string());
    }

    /// Forget a datacenter (removed from the configuration).
    pub(crate) fn remove(&self, datacenter: &Datacenter) {
        self.records.lock().remove(datacenter);
    }

    /// True once `READY_TIMEOUT_SECONDS` have passed since the start.
    pub fn ready_timeout_passed(&self) -> bool {
        self.started.elapsed() >= self.policy.ready_timeout
    }

    /// Judge every datacenter from its record and what its kinds say, now.
    pub fn report(
        &self,
        kinds: &[(Datacenter, KindFacts)],
        now: jiff::Timestamp,
    ) -> Vec<DatacenterReport> {
        let records = self.records.lock();
        let mut keys: Vec<&Datacenter> = records.keys().collect();
        keys.extend(kinds.iter().map(|(dc, _)| dc));
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .map(|dc| {
                let record = records.get(dc).cloned().unwrap_or_default();
                let own: Vec<&KindFacts> = kinds
                    .iter()
                    .filter(|(d, _)| d == dc)
                    .map(|(_, k)| k)
                    .collect();
                judge(dc, &record, &own, self.policy.stale_after, now)
            })
            .collect()
    }
}

fn judge(
    dc: &Datacenter,
    record: &Record,
    kinds: &[&KindFacts],
    stale_after: Duration,
    now: jiff::Timestamp,
) -> DatacenterReport {
    // A datacenter fed by its agent's reports is listed by its first report.
    let synced =
        record.pushed_at.is_some() || (!kinds.is_empty() && kinds.iter().all(|k| k.synced));
    let proofs = kinds
        .iter()
        .filter_map(|k| k.last_received)
        .chain(record.answered_at)
        .chain(record.pushed_at);
    let last = proofs.max();
    let age = last.map(|t| (now - t).total(jiff::Unit::Second).unwrap_or(0.0).max(0.0));
    let kind_error = kinds.iter().find_map(|k| k.error.clone());
    let silent = age.is_none_or(|a| a > stale_after.as_secs_f64());
    let state = if record.no_client || (!synced && record.error.is_some()) {
        DatacenterState::Unreachable
    } else if !synced {
        DatacenterState::Connecting
    } else if silent || kinds.iter().any(|k| k.stale) {
        DatacenterState::Stale
    } else {
        DatacenterState::Synced
    };
    DatacenterReport {
        key: dc.clone(),
        state,
        last_synced_at: last,
        age_seconds: age,
        last_error: match state {
            DatacenterState::Synced => None,
            _ => record.error.clone().or(kind_error).or_else(|| {
                record
                    .pushed_at
                    .zip(age)
                    .map(|(_, a)| format!("no report from its agent for {a:.0} s"))
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(synced: bool, last_received: Option<jiff::Timestamp>) -> KindFacts {
        KindFacts {
            synced,
            last_received,
            ..KindFacts::default()
        }
    }

    #[test]
    fn states_follow_listing_probes_and_silence() {
        let dc = Datacenter::new("east");
        let now = jiff::Timestamp::now();
        let ago = |s: i64| now - jiff::SignedDuration::from_secs(s);
        let stale_after = Duration::from_secs(15);
        let state = |record: &Record, kinds: &[KindFacts]| {
            let refs: Vec<&KindFacts> = kinds.iter().collect();
            judge(&dc, record, &refs, stale_after, now).state
        };
        let fresh = Record::default();
        assert_eq!(
            state(&fresh, &[kind(false, None)]),
            DatacenterState::Connecting
        );
        let failing = Record {
            error: Some("connection refused".into()),
            ..Record::default()
        };
        assert_eq!(
            state(&failing, &[kind(false, None)]),
            DatacenterState::Unreachable
        );
        let answered = Record {
            answered_at: Some(ago(2)),
            ..Record::default()
        };
        assert_eq!(
            state(&answered, &[kind(true, Some(ago(60)))]),
            DatacenterState::Synced
        );
        // Listed once, then silent past the bound: stale, with the age of the last proof.
        let silent = Record {
            answered_at: Some(ago(20)),
            error: Some("probe timed out".into()),
            ..Record::default()
        };
        let report = judge(
            &dc,
            &silent,
            &[&kind(true, Some(ago(30)))],
            stale_after,
            now,
        );
        assert_eq!(report.state, DatacenterState::Stale);
        assert_eq!(report.last_error.as_deref(), Some("probe timed out"));
        assert!(
            report
                .age_seconds
                .is_some_and(|a| (19.0..=21.0).contains(&a))
        );
        let no_client = Record {
            no_client: true,
            error: Some("kubeconfig x: no such file".into()),
            ..Record::default()
        };
        assert_eq!(state(&no_client, &[]), DatacenterState::Unreachable);
        // Fed by its agent: synced by a recent report, stale once the reports stop.
        let pushed = |s: i64| Record {
            pushed_at: Some(ago(s)),
            ..Record::default()
        };
        assert_eq!(state(&pushed(3), &[]), DatacenterState::Synced);
        let silent = judge(&dc, &pushed(40), &[], stale_after, now);
        assert_eq!(silent.state, DatacenterState::Stale);
        assert_eq!(
            silent.last_error.as_deref(),
            Some("no report from its agent for 40 s")
        );
    }
}
