//! Changes counted by kind and type since start: what the store applied, what a source could not
//! read. Read at scrape time (the old operator's `events_processed_total`).

use std::sync::atomic::{AtomicU64, Ordering};

use super::ChangeType;
use crate::model::Kind;

/// One counter per (kind, change type).
#[derive(Debug)]
pub struct ChangeCounts(Vec<[AtomicU64; 3]>);

impl Default for ChangeCounts {
    fn default() -> Self {
        ChangeCounts(Kind::ALL.iter().map(|_| Default::default()).collect())
    }
}

impl ChangeCounts {
    /// Count one change.
    pub fn add(&self, kind: Kind, change: ChangeType) {
        if let Some(c) = self.0.get(kind as usize) {
            c[change as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Changes of this kind and type counted so far.
    pub fn get(&self, kind: Kind, change: ChangeType) -> u64 {
        self.0
            .get(kind as usize)
            .map_or(0, |c| c[change as usize].load(Ordering::Relaxed))
    }

    /// Changes of this type counted so far, of every kind.
    pub fn total(&self, change: ChangeType) -> u64 {
        Kind::ALL.iter().map(|k| self.get(*k, change)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_kind_and_change_apart() {
        let c = ChangeCounts::default();
        c.add(Kind::Machine, ChangeType::Added);
        c.add(Kind::Machine, ChangeType::Added);
        c.add(Kind::KubernetesCluster, ChangeType::Deleted);
        assert_eq!(c.get(Kind::Machine, ChangeType::Added), 2);
        assert_eq!(c.get(Kind::Machine, ChangeType::Deleted), 0);
        assert_eq!(c.get(Kind::KubernetesCluster, ChangeType::Deleted), 1);
        assert_eq!(c.total(ChangeType::Added), 2);
        // Every kind has its counters: the last one too.
        let last = *Kind::ALL.last().expect("kinds");
        c.add(last, ChangeType::Modified);
        assert_eq!(c.get(last, ChangeType::Modified), 1);
    }
}
