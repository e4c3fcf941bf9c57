//! The demo's datacenters' weather (`DEMO_DATACENTERS`): each answers its probe while it is up,
//! and now and then one goes away (`DEMO_OUTAGE_SECONDS`: in each such period the last third is
//! one datacenter's outage, taking turns), so a stale datacenter, its greyed data and its
//! recovery can be seen without a cluster. While away its simulator stands still.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::datacenters::NoAnswer;
use super::status::SourceStatus;
use crate::model::Datacenter;

/// Names of the demo's datacenters (then `dc-N`).
const NAMES: &[&str] = &[
    "oslo",
    "bergen",
    "trondheim",
    "stavanger",
    "tromso",
    "kristiansand",
    "bodo",
    "alesund",
];

/// The demo's `n` datacenters (none for one: the one datacenter of a single-cluster server).
pub fn datacenters(n: usize) -> Vec<Datacenter> {
    if n < 2 {
        return Vec::new();
    }
    (0..n)
        .map(|i| match NAMES.get(i) {
            Some(name) => Datacenter::new(name),
            None => Datacenter::new(&format!("dc-{}", i + 1)),
        })
        .collect()
}

/// Which of `n` datacenters is away `elapsed` into the demo (outages every `every`).
fn away_now(n: usize, every: Duration, elapsed: Duration) -> Option<usize> {
    let period = every.as_millis().max(1);
    let at = elapsed.as_millis();
    let cycle = (at / period) as usize;
    // The last third of each period, the datacenters taking turns (the last one first).
    (at % period >= period * 2 / 3 && n > 0).then(|| (n - 1 + cycle) % n)
}

/// Answer every datacenter's probe (the away one's with its outage) often enough that one that
/// is up never looks silent, and set the flags its simulators stand still by. Runs until
/// aborted.
pub fn start(
    status: Arc<SourceStatus>,
    datacenters: Vec<Datacenter>,
    every: Option<Duration>,
    policy: super::datacenters::Policy,
) -> (Vec<Arc<AtomicBool>>, tokio::task::JoinHandle<()>) {
    let probe = policy.probe_interval.min(policy.stale_after / 3);
    let away: Vec<Arc<AtomicBool>> = datacenters
        .iter()
        .map(|_| Arc::new(AtomicBool::new(false)))
        .collect();
    let flags = away.clone();
    let report = move |elapsed: Duration| {
        let out = every.and_then(|e| away_now(datacenters.len(), e, elapsed));
        for (i, dc) in datacenters.iter().enumerate() {
            let is_away = out == Some(i);
            flags[i].store(is_away, Ordering::Relaxed);
            if let Some(d) = &status.datacenters {
                d.probed(
                    dc,
                    if is_away {
                        Err(NoAnswer(format!(
                            "demo: datacenter {dc} is away (a simulated outage)"
                        )))
                    } else {
                        Ok(())
                    },
                );
            }
        }
    };
    // Answered before anything is served: no datacenter starts out stale.
    report(Duration::ZERO);
    let started = tokio::time::Instant::now();
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(probe.max(Duration::from_millis(100)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tick.tick().await;
            report(started.elapsed());
        }
    });
    (away, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outages_take_turns_in_the_last_third_of_each_period() {
        let every = Duration::from_secs(90);
        let at = |s: u64| away_now(3, every, Duration::from_secs(s));
        assert_eq!(at(0), None);
        assert_eq!(at(59), None);
        assert_eq!(at(60), Some(2));
        assert_eq!(at(89), Some(2));
        assert_eq!(at(90), None);
        assert_eq!(at(150), Some(0));
        assert_eq!(at(240), Some(1));
        assert_eq!(datacenters(1), Vec::<Datacenter>::new());
        let nine = datacenters(9);
        assert_eq!((nine[0].key(), nine[8].key()), ("oslo", "dc-9"));
    }
}
