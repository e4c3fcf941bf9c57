//! A consistent view of the graph at one sequence number: the objects, ordered and hashed, the
//! secondary indexes, and what is derived or memoised for exactly these objects.

use std::sync::Arc;

use imbl::OrdMap;
use parking_lot::Mutex;

use super::held::Held;
use super::members::{FastMap, Members, add_member, drop_member};
use super::{Change, Idx, ObjectKey, index_entries, reads, scoped};
use crate::model::{Datacenter, Kind, Resource};

/// State derived from the objects and brought up to date with every write (the fleet's
/// aggregates). The store does not know what it is: whoever makes the store says how to derive
/// it ([`Store::derive_with`]).
pub type DerivedState = Arc<dyn std::any::Any + Send + Sync>;

/// How derived state follows the objects: from the state before (None: derive from scratch),
/// the snapshot after and the changes in between, the state after.
pub type Deriver =
    Box<dyn Fn(Option<&DerivedState>, &Snapshot, &[Arc<Change>]) -> DerivedState + Send + Sync>;

/// A consistent view of the graph at one sequence number.
#[derive(Clone, Default)]
pub struct Snapshot {
    pub(super) seq: u64,
    /// Ordered, for listing a kind or a namespace.
    pub(super) objects: OrdMap<ObjectKey, Held>,
    /// The same objects hashed, for point lookups (relationships resolve through these).
    pub(super) by_key: FastMap<ObjectKey, Arc<Resource>>,
    /// By `metadata.uid`'s hash ([`uid_key`]): one object, unless two datacenters' API servers
    /// gave out the same uid (a test server might) or two uids share a hash.
    pub(super) by_uid: FastMap<u64, Members>,
    /// Relationships, each within one datacenter: keyed by [`index_key`].
    pub(super) index: FastMap<(Idx, String), Members>,
    /// How many objects each datacenter holds.
    pub(super) datacenters: OrdMap<Datacenter, usize>,
    /// What the store's deriver keeps for exactly these objects.
    pub(super) derived: Option<DerivedState>,
    /// Values computed from exactly these objects on first use (see [`Snapshot::memo`]); every
    /// write starts a new one.
    pub(super) memo: Arc<Mutex<Vec<DerivedState>>>,
    /// Search's indexes, in the snapshots the store keeps (see [`Snapshot::search`]).
    pub(super) search: Option<super::search::SearchIndex>,
    /// Objects new in the write being made whose places in the ordered sets (`objects`, search's
    /// words) are not taken yet: [`Snapshot::settle`] takes them, in an order unrelated to the
    /// keys'. Empty in every snapshot a reader sees.
    pub(super) unsettled: Vec<(ObjectKey, Arc<Resource>)>,
}

/// An index entry's key: the value, prefixed by the datacenter's key and a NUL when it is not the
/// one datacenter of a single-cluster server (whose values holding a NUL get a NUL in front, so
/// no value of one datacenter reads as another's). A key part of its own for the datacenter made
/// every copied index node clone a shared string, and writes 10–12 % slower (`cargo bench --bench
/// graph_query -- write`).
fn index_key(idx: Idx, datacenter: &Datacenter, value: String) -> (Idx, String) {
    if !datacenter.is_single() {
        (idx, format!("{datacenter}\u{0}{value}"))
    } else if value.contains('\u{0}') {
        (idx, format!("\u{0}{value}"))
    } else {
        (idx, value)
    }
}

impl Snapshot {
    /// An empty snapshot that keeps search's indexes with its objects (the store's).
    pub(super) fn searchable() -> Snapshot {
        Snapshot {
            search: Some(Default::default()),
            ..Default::default()
        }
    }

    /// The sequence number of the last change this snapshot contains.
    pub fn seq(&self) -> u64 {
        reads::note_inexact();
        self.seq
    }

    /// A copy to write the next snapshot into: values memoised for this one do not carry over.
    pub(super) fn successor(&self) -> Snapshot {
        Snapshot {
            memo: Default::default(),
            ..self.clone()
        }
    }

    /// The derived state of type `T` for exactly this snapshot's objects, when the store keeps
    /// one.
    pub fn derived<T: std::any::Any>(&self) -> Option<&T> {
        reads::note_inexact();
        self.derived.as_deref()?.downcast_ref::<T>()
    }

    /// A value computed from this snapshot once and shared by every reader of it (a summary
    /// all subscribers of a burst send): `compute` runs on first use of a `T` (rarely twice,
    /// when two readers race; both get an equal value).
    pub fn memo<T: std::any::Any + Send + Sync>(
        &self,
        compute: impl FnOnce(&Snapshot) -> T,
    ) -> Arc<T> {
        reads::note_inexact();
        let found = self
            .memo
            .lock()
            .iter()
            .find_map(|v| v.clone().downcast::<T>().ok());
        if let Some(v) = found {
            return v;
        }
        let v = Arc::new(compute(self));
        self.memo.lock().push(v.clone() as DerivedState);
        v
    }

    /// A value computed from this snapshot once per `key` and shared by every reader asking for
    /// that key (one datacenter's summary, sent to every subscriber filtered to it).
    pub fn memo_keyed<K, T>(&self, key: K, compute: impl FnOnce(&Snapshot) -> T) -> T
    where
        K: PartialEq + Send + Sync + 'static,
        T: Clone + Send + Sync + 'static,
    {
        /// The values of one (key type, value type), by key.
        struct Keyed<K, T>(parking_lot::Mutex<Vec<(K, T)>>);
        let memo = self.memo(|_| Keyed::<K, T>(parking_lot::Mutex::new(Vec::new())));
        if let Some((_, v)) = memo.0.lock().iter().find(|(k, _)| *k == key) {
            return v.clone();
        }
        let v = compute(self);
        memo.0.lock().push((key, v.clone()));
        v
    }

    /// Look an object up by identity.
    pub fn get(
        &self,
        datacenter: &Datacenter,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Option<&Arc<Resource>> {
        let key = ObjectKey::new(datacenter, kind, namespace, name);
        let found = self.by_key.get(&key);
        reads::note_key(|| key, found);
        found
    }

    /// Look an object up by name in the datacenter given, or, without one, in whichever
    /// datacenter holds it: `Err` with every datacenter that holds one when several do.
    pub fn find(
        &self,
        datacenter: Option<&Datacenter>,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<&Arc<Resource>>, Vec<Datacenter>> {
        if let Some(dc) = datacenter {
            return Ok(self.get(dc, kind, namespace, name));
        }
        // Which datacenters exist is not a point read.
        reads::note_inexact();
        let mut found = self
            .datacenters
            .keys()
            .filter_map(|dc| self.get(dc, kind, namespace, name));
        let first = found.next();
        match found.next() {
            None => Ok(first),
            Some(second) => {
                let mut all: Vec<Datacenter> = vec![
                    first.map(|r| r.datacenter().clone()).unwrap_or_default(),
                    second.datacenter().clone(),
                ];
                all.extend(found.map(|r| r.datacenter().clone()));
                Err(all)
            }
        }
    }

    /// Look an object up by key.
    pub fn get_key(&self, key: &ObjectKey) -> Option<&Arc<Resource>> {
        let found = self.by_key.get(key);
        reads::note_key(|| key.clone(), found);
        found
    }

    /// Look an object up by `metadata.uid` (the first by key, in the rare case that two
    /// datacenters hold the uid).
    pub fn by_uid(&self, uid: &str) -> Option<&Arc<Resource>> {
        let found = self.by_uid_untracked(uid);
        reads::note_uid(uid, found);
        found
    }

    /// Look an object of one datacenter up by `metadata.uid`.
    pub fn by_uid_in(&self, datacenter: &Datacenter, uid: &str) -> Option<&Arc<Resource>> {
        reads::note_inexact();
        self.with_uid(uid).find(|r| r.datacenter() == datacenter)
    }

    pub(super) fn by_uid_untracked(&self, uid: &str) -> Option<&Arc<Resource>> {
        self.with_uid(uid).next()
    }

    /// The objects whose uid is `uid`, in key order.
    fn with_uid<'s>(&'s self, uid: &str) -> impl Iterator<Item = &'s Arc<Resource>> {
        self.by_uid
            .get(&uid_key(uid))
            .into_iter()
            .flat_map(Members::iter)
            .filter_map(move |k| self.by_key.get(k))
            .filter(move |r| r.uid() == uid)
    }

    /// The datacenters that hold at least one object, in key order.
    pub fn datacenters(&self) -> impl Iterator<Item = &Datacenter> + '_ {
        reads::note_inexact();
        self.datacenters.keys()
    }

    /// Every object of a kind, ordered by datacenter, namespace, name.
    pub fn list(&self, kind: Kind) -> impl Iterator<Item = &Arc<Resource>> + '_ {
        reads::note_inexact();
        let start = ObjectKey::new(&Datacenter::default(), kind, "", "");
        self.objects
            .range(start..)
            .take_while(move |(_, v)| v.brief().kind() == kind)
            .map(|(_, v)| v.object())
    }

    /// Every object of a kind in one datacenter, or in all of them (`None`).
    pub fn list_scope<'a>(
        &'a self,
        datacenter: Option<&Datacenter>,
        kind: Kind,
    ) -> Box<dyn Iterator<Item = &'a Arc<Resource>> + 'a> {
        match datacenter {
            Some(dc) => Box::new(self.list_datacenter(dc, kind)),
            None => Box::new(self.list(kind)),
        }
    }

    /// Every object of a kind in one namespace (of every datacenter, one after the other),
    /// ordered by datacenter and name.
    pub fn list_in<'a>(
        &'a self,
        kind: Kind,
        namespace: &'a str,
    ) -> impl Iterator<Item = &'a Arc<Resource>> + 'a {
        self.list_after(kind, Some(namespace), None)
    }

    /// Every object of a kind in one datacenter, ordered by namespace then name.
    pub fn list_datacenter<'a>(
        &'a self,
        datacenter: &Datacenter,
        kind: Kind,
    ) -> impl Iterator<Item = &'a Arc<Resource>> + 'a {
        reads::note_inexact();
        let start = ObjectKey::new(datacenter, kind, "", "");
        let dc = datacenter.clone();
        self.objects
            .range(start..)
            .take_while(move |(k, _)| k.kind == kind && k.datacenter == dc)
            .map(|(_, v)| v.object())
    }

    /// Every object of a kind in one namespace of one datacenter, ordered by name.
    pub fn list_in_datacenter<'a>(
        &'a self,
        datacenter: &Datacenter,
        kind: Kind,
        namespace: &'a str,
    ) -> impl Iterator<Item = &'a Arc<Resource>> + 'a {
        reads::note_inexact();
        let start = ObjectKey::new(datacenter, kind, namespace, "");
        let dc = datacenter.clone();
        self.objects
            .range(start..)
            .take_while(move |(k, _)| {
                k.kind == kind && k.datacenter == dc && k.namespace == namespace
            })
            .map(|(_, v)| v.object())
    }

    /// Objects of a kind (in one namespace, when given) after `after`, in key order: a cursor
    /// can walk a kind one object at a time. A namespace is one range per datacenter.
    pub fn list_after<'a>(
        &'a self,
        kind: Kind,
        namespace: Option<&'a str>,
        after: Option<&ObjectKey>,
    ) -> impl Iterator<Item = &'a Arc<Resource>> + 'a {
        use std::ops::Bound;
        reads::note_inexact();
        let after = after.cloned();
        // Without a namespace the kind is one range; with one, each datacenter's namespace is.
        let ranges: Vec<ObjectKey> = match namespace {
            None => vec![ObjectKey::new(&Datacenter::default(), kind, "", "")],
            Some(ns) => self
                .datacenters
                .keys()
                .map(|dc| ObjectKey::new(dc, kind, ns, ""))
                .collect(),
        };
        ranges.into_iter().flat_map(move |start| {
            let dc = start.datacenter.clone();
            let from = match &after {
                Some(k) if *k >= start => Bound::Excluded(k.clone()),
                _ => Bound::Included(start),
            };
            self.objects
                .range((from, Bound::Unbounded))
                .take_while(move |(k, _)| {
                    k.kind == kind
                        && namespace.is_none_or(|ns| k.datacenter == dc && k.namespace == ns)
                })
                .map(|(_, v)| v.object())
        })
    }

    /// Number of objects of a kind.
    pub fn count(&self, kind: Kind) -> usize {
        self.list(kind).count()
    }

    /// Objects of one datacenter found through a secondary index, ordered by key.
    pub fn lookup(
        &self,
        datacenter: &Datacenter,
        idx: Idx,
        value: &str,
    ) -> impl Iterator<Item = &Arc<Resource>> + '_ {
        reads::note_index(self, datacenter, idx, value);
        self.lookup_untracked(datacenter, idx, value)
    }

    pub(super) fn lookup_untracked(
        &self,
        datacenter: &Datacenter,
        idx: Idx,
        value: &str,
    ) -> impl Iterator<Item = &Arc<Resource>> + '_ {
        self.index
            .get(&index_key(idx, datacenter, value.to_string()))
            .into_iter()
            .flat_map(Members::iter)
            .filter_map(|k| self.by_key.get(k))
    }

    /// The Machines of a KubernetesCluster, ordered by key: those labelled with its clusterId
    /// (`vitistack.io/clusterid`), then those of older talos-operator releases labelled with its
    /// name (`cluster.vitistack.io/cluster-name`).
    pub fn cluster_machines(&self, kc: &Resource) -> Vec<&Arc<Resource>> {
        match kc {
            Resource::KubernetesCluster(c) => self.machines_of(c),
            _ => Vec::new(),
        }
    }

    /// The same for a cluster that need not be in the graph (a planned one).
    pub fn machines_of(&self, kc: &crate::model::KubernetesCluster) -> Vec<&Arc<Resource>> {
        let dc = &kc.datacenter;
        let ns = kc.metadata.namespace.as_deref().unwrap_or_default();
        let name = kc.metadata.name.as_deref().unwrap_or_default();
        self.lookup(
            dc,
            Idx::MachineByCluster,
            &scoped(ns, &kc.spec.data.cluster_id),
        )
        .chain(self.lookup(dc, Idx::MachineByClusterName, &scoped(ns, name)))
        .collect()
    }

    /// The KubernetesCluster a Machine belongs to: the one whose clusterId its
    /// `vitistack.io/clusterid` label names, else the one its `cluster.vitistack.io/cluster-name`
    /// label names.
    pub fn machine_cluster(&self, m: &Resource) -> Option<&Arc<Resource>> {
        let (dc, ns) = (m.datacenter(), m.namespace());
        match m.label(crate::model::LABEL_CLUSTER_ID) {
            Some(id) => self.lookup_one(dc, Idx::ClusterById, &scoped(ns, id)),
            None => self.get(
                dc,
                Kind::KubernetesCluster,
                ns,
                m.label(crate::model::LABEL_CLUSTER_NAME)?,
            ),
        }
    }

    /// The clusterId of the cluster a Machine belongs to: its `vitistack.io/clusterid` label,
    /// else the `spec.data.clusterId` of the cluster its name label names.
    pub fn machine_cluster_id<'a>(&'a self, m: &'a Resource) -> Option<&'a str> {
        match m.label(crate::model::LABEL_CLUSTER_ID) {
            Some(id) => Some(id),
            None => match self.machine_cluster(m)?.as_ref() {
                Resource::KubernetesCluster(kc) => Some(kc.spec.data.cluster_id.as_str()),
                _ => None,
            },
        }
    }

    /// The first object of one datacenter found through a secondary index.
    pub fn lookup_one(
        &self,
        datacenter: &Datacenter,
        idx: Idx,
        value: &str,
    ) -> Option<&Arc<Resource>> {
        self.lookup(datacenter, idx, value).next()
    }

    /// Total number of objects.
    pub fn len(&self) -> usize {
        reads::note_inexact();
        self.objects.len()
    }

    /// True when the graph holds nothing.
    pub fn is_empty(&self) -> bool {
        reads::note_inexact();
        self.objects.is_empty()
    }

    /// A snapshot of exactly `objects`, whose keys are distinct: what inserting them one by one
    /// makes (seq and derived state aside), built on two threads, the maps of objects on this
    /// one and the relationship and uid indexes on another, each index value's keys gathered
    /// first and kept once. A past moment is built whole so: one by one, on one thread, its
    /// 9,096 objects took 40–80 ms of a cold moment's 200 (`cargo bench --bench timeline_query`).
    pub(super) fn of_objects(objects: &[(ObjectKey, Arc<Resource>)]) -> Snapshot {
        type Gathered<K> = std::collections::HashMap<K, Vec<ObjectKey>, rustc_hash::FxBuildHasher>;
        let indexes = || {
            let (mut index, mut uids): (Gathered<(Idx, String)>, Gathered<u64>) =
                Default::default();
            for (key, r) in objects {
                for (idx, value) in index_entries(r) {
                    let entry = index_key(idx, r.datacenter(), value);
                    index.entry(entry).or_default().push(key.clone());
                }
                if !r.uid().is_empty() {
                    uids.entry(uid_key(&r.uid())).or_default().push(key.clone());
                }
            }
            let members = |mut keys: Vec<ObjectKey>| {
                keys.sort_unstable();
                keys.dedup();
                Members::from_sorted(keys)
            };
            let index: FastMap<_, _> = index.into_iter().map(|(k, v)| (k, members(v))).collect();
            let by_uid: FastMap<_, _> = uids.into_iter().map(|(k, v)| (k, members(v))).collect();
            (index, by_uid)
        };
        let maps = || {
            let mut snap = Snapshot::default();
            for (key, r) in objects {
                *snap.datacenters.entry(key.datacenter.clone()).or_default() += 1;
                snap.by_key.insert(key.clone(), r.clone());
                // In the order given (a timeline's checkpoint: by key), unlike a write's new
                // objects ([`Snapshot::settle`]): a past moment is asked for at once, and inserts
                // out of key order cost time (its memory is bounded by the cache of moments).
                snap.objects.insert(key.clone(), Held::new(r.clone()));
            }
            snap
        };
        // A thread costs more than a few objects do.
        let ((index, by_uid), mut snap) = crate::both::both(objects.len() < 64, indexes, maps);
        snap.index = index;
        snap.by_uid = by_uid;
        snap
    }

    /// Put an object in (replacing the one under its key), with its index entries.
    ///
    /// A change that leaves the object's index entries and uid as they were (a status update,
    /// most changes) touches no index: every copied index node is an allocation.
    ///
    /// A new object's places in the ordered sets are taken when the write settles (see
    /// [`Snapshot::settle`]); until then it is found by key (`by_key`) only.
    pub(super) fn insert(&mut self, key: ObjectKey, object: Arc<Resource>) {
        match self.by_key.get(&key).cloned() {
            Some(previous) => {
                self.settle_for(&key);
                let (before, after) = (index_entries(&previous), index_entries(&object));
                if before != after {
                    self.drop_entries(&key, previous.datacenter(), before);
                    self.add_entries(&key, object.datacenter(), after);
                }
                if previous.uid() != object.uid() {
                    self.drop_uid(&key, &previous.uid());
                    self.add_uid(&key, &object.uid());
                }
                if let Some(search) = &mut self.search {
                    search.change(&key, &previous, &object);
                }
                self.by_key.insert(key.clone(), object.clone());
                self.objects.insert(key, Held::new(object));
            }
            None => {
                *self.datacenters.entry(key.datacenter.clone()).or_default() += 1;
                self.add_entries(&key, object.datacenter(), index_entries(&object));
                self.add_uid(&key, &object.uid());
                self.by_key.insert(key.clone(), object.clone());
                self.unsettled.push((key, object));
            }
        }
    }

    /// Take an object out, with its index entries.
    pub(super) fn remove(&mut self, key: &ObjectKey) -> Option<Arc<Resource>> {
        self.settle_for(key);
        let previous = self.objects.remove(key)?.into_object();
        self.by_key.remove(key);
        self.unindex(key, &previous);
        if let Some(n) = self.datacenters.get_mut(&key.datacenter) {
            *n -= 1;
            if *n == 0 {
                self.datacenters.remove(&key.datacenter);
            }
        }
        Some(previous)
    }

    fn unindex(&mut self, key: &ObjectKey, r: &Resource) {
        self.drop_entries(key, r.datacenter(), index_entries(r));
        self.drop_uid(key, &r.uid());
        if let Some(search) = &mut self.search {
            search.remove(key, r);
        }
    }

    fn drop_entries(&mut self, key: &ObjectKey, dc: &Datacenter, entries: Vec<(Idx, String)>) {
        for (idx, value) in entries {
            drop_member(&mut self.index, &index_key(idx, dc, value), key);
        }
    }

    fn drop_uid(&mut self, key: &ObjectKey, uid: &str) {
        if !uid.is_empty() {
            drop_member(&mut self.by_uid, &uid_key(uid), key);
        }
    }

    fn add_entries(&mut self, key: &ObjectKey, dc: &Datacenter, entries: Vec<(Idx, String)>) {
        for (idx, value) in entries {
            add_member(&mut self.index, index_key(idx, dc, value), key);
        }
    }

    fn add_uid(&mut self, key: &ObjectKey, uid: &str) {
        if !uid.is_empty() {
            add_member(&mut self.by_uid, uid_key(uid), key);
        }
    }
}

/// A uid's key in [`Snapshot::by_uid`]: its hash, 8 bytes where the uid's text took 72 with its
/// allocation (`cargo bench --bench fleet_memory`). The objects under one key are told apart by
/// their uid when looked up.
fn uid_key(uid: &str) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(uid)
}
