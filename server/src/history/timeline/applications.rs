//! The application inventory in the timeline: each application (as the API serves it: its live
//! revision, what it runs, its health and revisions) and, per datacenter, what links the
//! inventory to the graph (the `kube-system` UID naming the cluster its applications run on) and
//! the namespaces read. The writer records how they differ from one inventory snapshot to the
//! next, as it records objects; the reader gives the inventory back as it was at a moment.
//!
//! A record's JSON carries `kind` (`Application` or `ApplicationInventory`), which no object
//! kind of the graph has, and `datacenter`, so the reader tells them from objects.
//! Helm values are never part of an application (the inventory never reads them).

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use crate::inventory::{AppEntry, Snapshot};
use crate::model::Datacenter;

/// The `kind` of an application's record.
pub const APPLICATION: &str = "Application";
/// The `kind` of a datacenter's inventory record.
pub const INVENTORY: &str = "ApplicationInventory";

/// What one record holds.
#[derive(Clone, Debug)]
pub enum Record {
    /// An application.
    App(Arc<AppEntry>),
    /// A datacenter's inventory: its cluster's `kube-system` UID and the namespaces read.
    Datacenter {
        datacenter: Datacenter,
        kube_system_uid: Option<String>,
        namespaces: Vec<String>,
    },
}

impl Record {
    /// Who it is: datacenter, kind, namespace, name.
    pub fn ident(&self) -> (String, &'static str, String, String) {
        match self {
            Record::App(a) => (
                a.datacenter.key().to_string(),
                APPLICATION,
                a.app.release.namespace.clone(),
                a.app.release.name.clone(),
            ),
            Record::Datacenter { datacenter, .. } => (
                datacenter.key().to_string(),
                INVENTORY,
                String::new(),
                String::new(),
            ),
        }
    }

    /// Its JSON as the timeline keeps it.
    pub fn value(&self) -> Value {
        let mut v = match self {
            Record::App(a) => serde_json::to_value(&**a).unwrap_or(Value::Null),
            Record::Datacenter {
                datacenter,
                kube_system_uid,
                namespaces,
            } => serde_json::json!({
                "datacenter": datacenter.key(),
                "kubeSystemUid": kube_system_uid,
                "namespaces": namespaces,
            }),
        };
        if let Value::Object(m) = &mut v {
            m.insert("kind".into(), Value::String(self.ident().1.into()));
        }
        v
    }
}

/// A datacenter's inventory record in `s` (None: it holds nothing of that datacenter).
fn datacenter_record(s: &Snapshot, dc: &Datacenter) -> Option<Record> {
    let uid = s.kube_system_uids.get(dc).cloned();
    let namespaces: Vec<String> = s
        .namespaces
        .get(dc)
        .map(|n| n.iter().cloned().collect())
        .unwrap_or_default();
    (uid.is_some() || !namespaces.is_empty()).then(|| Record::Datacenter {
        datacenter: dc.clone(),
        kube_system_uid: uid,
        namespaces,
    })
}

fn same(a: &Record, b: &Record) -> bool {
    match (a, b) {
        (Record::App(x), Record::App(y)) => Arc::ptr_eq(x, y) || x == y,
        (
            Record::Datacenter {
                kube_system_uid: u1,
                namespaces: n1,
                ..
            },
            Record::Datacenter {
                kube_system_uid: u2,
                namespaces: n2,
                ..
            },
        ) => u1 == u2 && n1 == n2,
        _ => false,
    }
}

/// Every record of `s`.
pub fn every(s: &Snapshot) -> Vec<Record> {
    let dcs: BTreeSet<&Datacenter> = s
        .kube_system_uids
        .keys()
        .chain(s.namespaces.keys())
        .collect();
    s.apps
        .values()
        .map(|a| Record::App(a.clone()))
        .chain(dcs.into_iter().filter_map(|dc| datacenter_record(s, dc)))
        .collect()
}

/// The records that differ from `old` to `new`: (before, after), None where there is none.
/// An unchanged application is the same shared entry in both, so this costs a pointer compare
/// per application.
pub fn differences(old: &Snapshot, new: &Snapshot) -> Vec<(Option<Record>, Option<Record>)> {
    let mut out = Vec::new();
    for (k, a) in &old.apps {
        if !new.apps.contains_key(k) {
            out.push((Some(Record::App(a.clone())), None));
        }
    }
    for (k, a) in &new.apps {
        let after = Record::App(a.clone());
        match old.apps.get(k).map(|b| Record::App(b.clone())) {
            Some(before) if same(&before, &after) => {}
            before => out.push((before, Some(after))),
        }
    }
    let dcs: BTreeSet<&Datacenter> = [old, new]
        .iter()
        .flat_map(|s| s.kube_system_uids.keys().chain(s.namespaces.keys()))
        .collect();
    for dc in dcs {
        match (datacenter_record(old, dc), datacenter_record(new, dc)) {
            (Some(b), Some(a)) if same(&b, &a) => {}
            (None, None) => {}
            (b, a) => out.push((b, a)),
        }
    }
    out
}

/// Whether a kept value is a record (rather than an object of the graph).
pub fn is_record(v: &Value) -> bool {
    matches!(
        v.get("kind").and_then(Value::as_str),
        Some(APPLICATION | INVENTORY)
    )
}

/// The inventory the records say, read in order (a later record of the same application wins).
pub fn inventory(records: Vec<Value>) -> Result<Snapshot, String> {
    let mut s = Snapshot::default();
    for mut v in records {
        let kind = v.get("kind").and_then(Value::as_str).map(str::to_string);
        if let Value::Object(m) = &mut v {
            m.remove("kind");
        }
        match kind.as_deref() {
            Some(APPLICATION) => {
                let a: AppEntry =
                    serde_json::from_value(v).map_err(|e| format!("an application record: {e}"))?;
                s.apps.insert(a.key(), Arc::new(a));
            }
            Some(INVENTORY) => {
                #[derive(serde::Deserialize)]
                #[serde(rename_all = "camelCase")]
                struct Dc {
                    datacenter: String,
                    kube_system_uid: Option<String>,
                    #[serde(default)]
                    namespaces: Vec<String>,
                }
                let d: Dc = serde_json::from_value(v)
                    .map_err(|e| format!("a datacenter's inventory record: {e}"))?;
                let dc = Datacenter::new(&d.datacenter);
                if let Some(uid) = d.kube_system_uid {
                    s.kube_system_uids.insert(dc.clone(), uid);
                }
                if !d.namespaces.is_empty() {
                    s.namespaces
                        .insert(dc, d.namespaces.into_iter().collect::<BTreeSet<_>>());
                }
            }
            other => return Err(format!("a record of kind {other:?}")),
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::applications::{Application, Health, PodFacts};
    use crate::model::helm::{HelmRelease, ReleaseStatus};
    use std::collections::BTreeMap;

    fn by_key(s: &Snapshot) -> BTreeMap<crate::inventory::AppKey, AppEntry> {
        s.apps
            .iter()
            .map(|(k, a)| (k.clone(), (**a).clone()))
            .collect()
    }

    fn app(dc: &str, name: &str, revision: u64, ready: bool) -> Arc<AppEntry> {
        let release = HelmRelease {
            name: name.into(),
            namespace: "shop".into(),
            revision,
            status: ReleaseStatus::Deployed,
            updated: Some("2026-11-29T10:00:00Z".into()),
            chart: "web".into(),
            chart_version: "1.2.3".into(),
            app_version: "4".into(),
            objects: Vec::new(),
            managed_by_helm: true,
        };
        let mut pod = PodFacts::default();
        pod.meta.name = format!("{name}-0");
        pod.meta.namespace = "shop".into();
        pod.ready = ready;
        Arc::new(AppEntry {
            datacenter: Datacenter::new(dc),
            app: Application {
                release,
                pods: vec![pod],
                services: Vec::new(),
                volumes: Vec::new(),
                ingresses: Vec::new(),
                health: if ready {
                    Health::Healthy
                } else {
                    Health::Degraded
                },
                reasons: Vec::new(),
            },
            app_uuid: Some("u-1".into()),
            revisions: Vec::new(),
        })
    }

    fn snapshot(apps: &[Arc<AppEntry>], uid: Option<&str>) -> Snapshot {
        let mut s = Snapshot::default();
        for a in apps {
            s.apps.insert(a.key(), a.clone());
            s.namespaces
                .entry(a.datacenter.clone())
                .or_default()
                .insert("shop".into());
        }
        if let Some(u) = uid {
            s.kube_system_uids.insert(Datacenter::new("oslo"), u.into());
        }
        s
    }

    /// Replays (before, after) pairs over `start`'s records, as the reader replays versions.
    fn replay(start: &Snapshot, steps: &[&Snapshot]) -> Snapshot {
        let mut held: BTreeMap<(String, &'static str, String, String), Value> = every(start)
            .into_iter()
            .map(|r| (r.ident(), r.value()))
            .collect();
        let mut prev = start;
        for next in steps {
            for (b, a) in differences(prev, next) {
                match a {
                    Some(a) => drop(held.insert(a.ident(), a.value())),
                    None => drop(held.remove(&b.expect("a removal names its record").ident())),
                }
            }
            prev = next;
        }
        inventory(held.into_values().collect()).expect("records read back")
    }

    #[test]
    fn an_inventory_comes_back_from_its_records_and_their_changes() {
        let web = app("oslo", "web", 1, true);
        let db = app("oslo", "db", 3, true);
        let s0 = snapshot(&[web.clone(), db.clone()], Some("ks-1"));
        // A pod turns unready, an application goes, another comes, the cluster link changes.
        let s1 = snapshot(&[app("oslo", "web", 1, false), db.clone()], Some("ks-1"));
        let s2 = snapshot(
            &[app("oslo", "web", 2, true), app("bergen", "cache", 1, true)],
            None,
        );
        let back = replay(&s0, &[&s1, &s2]);
        assert_eq!(by_key(&back), by_key(&s2));
        assert_eq!(back.kube_system_uids, s2.kube_system_uids);
        assert_eq!(back.namespaces, s2.namespaces);
        // Unchanged entries are not records of a change.
        assert!(differences(&s1, &s1).is_empty());
        assert_eq!(differences(&s0, &s1).len(), 1, "only web changed");
        assert!(every(&s0).iter().all(|r| is_record(&r.value())));
        assert!(!is_record(&serde_json::json!({"kind": "Machine"})));
        assert!(inventory(vec![serde_json::json!({"kind": "Application", "x": 1})]).is_err());
    }
}
