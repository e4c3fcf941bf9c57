//! An object as the ordered map holds it: with a brief of what lists filter and sort it by most
//! (its kind, creation time and phase), kept beside it in the map's leaf.
//!
//! A list that passes half a kind of one million objects (a phase, newest first) read each
//! object's kind, phase and creation time through its key's and its own allocation: three or
//! four cache misses an object, about 150 ms for 460,000 Machines (`cargo bench --bench
//! search_query`). Read from the leaf, in the order the map keeps its entries, they cost none.
//!
//! A sort's ties are broken by namespace, name and datacenter, which live in the key's
//! allocation (and a name of more than 15 bytes in one more). When most of a list ties (half a
//! million Machines with no creation time, newest first), each tie read two of them: the brief
//! keeps the first bytes of namespace and name too ([`Abbreviated`]), which decide most ties.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::{Arc, LazyLock};

use super::{ObjectKey, Snapshot, reads};
use crate::model::vocab::{ClusterPhase, MachinePhase, NetworkPhase, ProviderPhase, Time};
use crate::model::{Datacenter, Kind, Labels, Resource};

/// An object, its brief and its labels (the object's own, shared: see [`Labels`]).
#[derive(Clone, PartialEq)]
pub struct Held {
    object: Arc<Resource>,
    brief: Brief,
    labels: Option<Labels>,
}

impl Held {
    /// `object`, with its brief read from it.
    pub fn new(object: Arc<Resource>) -> Self {
        let brief = Brief::of(&object);
        let labels = object.meta().labels.clone();
        Held {
            object,
            brief,
            labels,
        }
    }

    /// The object's labels, one step away where the object's are three: a label selector
    /// reads these ([`Labels::address`] tells the sets apart without reading them).
    pub fn labels(&self) -> Option<&Labels> {
        self.labels.as_ref()
    }

    /// The object.
    pub fn object(&self) -> &Arc<Resource> {
        &self.object
    }

    /// What lists read of it without following it.
    pub fn brief(&self) -> &Brief {
        &self.brief
    }

    /// The object, given back.
    pub fn into_object(self) -> Arc<Resource> {
        self.object
    }
}

/// An object's kind, creation time, phase, node role, the first bytes of its namespace and
/// name and the pairs of letters they hold, in 40 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Brief {
    /// `metadata.creationTimestamp`'s seconds and nanoseconds (none: a nanosecond of
    /// `i32::MIN`).
    second: i64,
    nanosecond: i32,
    abbreviated: Abbreviated,
    letters: Letters,
    kind: Kind,
    /// The phase: [`NO_PHASE`], [`OTHER_PHASE`] (text not in [`PHASES`]: read the object), or
    /// its place in [`PHASES`] plus one.
    phase: u8,
    /// The node role, as the phase but in [`ROLES`].
    role: u8,
}

/// No text (`Resource::phase` or `node_role` is None).
const NO_PHASE: u8 = 0;
/// A text not in the known ones.
const OTHER_PHASE: u8 = u8::MAX;

/// A text a brief says an object has (its phase, its role).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BriefText {
    /// None.
    None,
    /// This text.
    Known(&'static str),
    /// Text the brief does not keep: read it from the object.
    Other,
}

/// The node roles a Machine's labels say (`Resource::node_role`), sorted; a role is kept as its
/// place plus one, as a phase is.
const ROLES: [&str; 2] = ["control-plane", "worker"];

/// Every phase the operators and KubeVirt are known to write, sorted as text (so that the
/// order of their places is the order of their texts) and without repeats.
static PHASES: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    // KubeVirt's VirtualMachineInstance phases and VirtualMachine printable statuses.
    const KUBEVIRT: &[&str] = &[
        "Pending",
        "Scheduling",
        "Scheduled",
        "Running",
        "Succeeded",
        "Failed",
        "Unknown",
        "Stopped",
        "Provisioning",
        "Starting",
        "Paused",
        "Stopping",
        "Terminating",
        "CrashLoopBackOff",
        "Migrating",
        "ErrorUnschedulable",
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrorPvcNotFound",
        "DataVolumeError",
        "WaitingForVolumeBinding",
        "WaitingForReceiver",
    ];
    let mut all: Vec<&'static str> = [
        MachinePhase::KNOWN,
        ClusterPhase::KNOWN,
        NetworkPhase::KNOWN,
        ProviderPhase::KNOWN,
        KUBEVIRT,
    ]
    .concat();
    all.sort_unstable();
    all.dedup();
    // Places 1..=254 (0 and 255 mean none and other).
    all.truncate(usize::from(OTHER_PHASE) - 1);
    all
});

impl Brief {
    /// The brief of `r`.
    pub fn of(r: &Resource) -> Self {
        let (second, nanosecond) = match r.created() {
            Some(t) => (t.as_second(), t.subsec_nanosecond()),
            None => (0, i32::MIN),
        };
        Brief {
            second,
            nanosecond,
            abbreviated: Abbreviated::of(r.namespace(), r.name()),
            letters: Letters::of(r.namespace(), r.name()),
            kind: r.kind(),
            phase: place(&PHASES, r.phase()),
            role: place(&ROLES, r.node_role()),
        }
    }

    /// The object's kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// `metadata.creationTimestamp`, as `Resource::created` reads it.
    pub fn created(&self) -> Option<Time> {
        if self.nanosecond == i32::MIN {
            return None;
        }
        Time::new(self.second, self.nanosecond).ok()
    }

    /// The phase (`Resource::phase`), as far as the brief knows it.
    pub fn phase(&self) -> BriefText {
        text(&PHASES, self.phase)
    }

    /// The node role (`Resource::node_role`), as far as the brief knows it.
    pub fn role(&self) -> BriefText {
        text(&ROLES, self.role)
    }

    /// The first bytes of the namespace and name.
    pub fn abbreviated(&self) -> Abbreviated {
        self.abbreviated
    }

    /// The pairs of letters in the namespace and name.
    pub fn letters(&self) -> Letters {
        self.letters
    }
}

/// The pairs of adjacent bytes in a namespace, `/` and a name (ASCII lowercased), each a bit
/// of 64 chosen by its hash: a text none of whose pairs' bits are all set is in neither the
/// namespace, nor the name, nor `namespace/name`, and a name search need not read the name
/// (a name longer than 15 bytes is an allocation of its own; read for each of 460,000 Machines,
/// they were most of a name search's time, `cargo bench --bench search_query`). A namespace or
/// name that is not ASCII sets every bit (says nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Letters(u64);

impl Letters {
    /// The pairs of `namespace`, `/` and `name`.
    pub fn of(namespace: &str, name: &str) -> Self {
        if !namespace.is_ascii() || !name.is_ascii() {
            return Letters(u64::MAX);
        }
        let text = namespace.bytes().chain([b'/']).chain(name.bytes());
        Letters(pairs_of(text))
    }

    /// The bits of the pairs in `lower` (a search's text, lowercase): 0 (every text may hold
    /// it) when it is not ASCII.
    pub fn wanted(lower: &str) -> u64 {
        if lower.is_ascii() {
            pairs_of(lower.bytes())
        } else {
            0
        }
    }

    /// Whether the namespace, the name or `namespace/name` may hold the text whose pairs are
    /// `wanted` (false: none of them does).
    pub fn may_hold(self, wanted: u64) -> bool {
        self.0 & wanted == wanted
    }
}

/// A bit for each pair of adjacent bytes, lowercased.
fn pairs_of(bytes: impl Iterator<Item = u8>) -> u64 {
    let mut bits = 0;
    let mut last: Option<u8> = None;
    for b in bytes.map(|b| b.to_ascii_lowercase()) {
        if let Some(a) = last {
            let pair = (u64::from(a) << 8) | u64::from(b);
            bits |= 1 << (pair.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58);
        }
        last = Some(b);
    }
    bits
}

/// The first 16 bytes of a namespace, a zero byte and a name (zeros after the end): compared
/// as bytes, two of them order their namespaces and names as the pairs do (a namespace first,
/// then a name), as far as they differ. All zeros says nothing: a namespace with a zero byte
/// among its first 16 (which would order the bytes otherwise than the pairs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Abbreviated([u8; 16]);

impl Abbreviated {
    /// The abbreviation of `namespace` and `name`.
    pub fn of(namespace: &str, name: &str) -> Self {
        let mut bytes = [0u8; 16];
        let ns = namespace.as_bytes();
        if ns.iter().take(bytes.len()).any(|&b| b == 0) {
            return Abbreviated::default();
        }
        let name = name.as_bytes();
        // The namespace, its zero (already there), then the name, as far as 16 bytes reach.
        let n = ns.len().min(bytes.len());
        bytes[..n].copy_from_slice(&ns[..n]);
        if let Some(rest) = bytes.get_mut(n + 1..) {
            let m = name.len().min(rest.len());
            rest[..m].copy_from_slice(&name[..m]);
        }
        Abbreviated(bytes)
    }

    /// How the pairs abbreviated compare, when the abbreviations tell: both known and different.
    pub fn order(self, other: Abbreviated) -> Option<Ordering> {
        let unknown = Abbreviated::default();
        if self == other || self == unknown || other == unknown {
            return None;
        }
        // As two numbers read big-endian, which order as the bytes do: a slice's comparison
        // is a call to `memcmp` (10.8 % of the list of a phase's time, most of it ties).
        let number = |a: Abbreviated| u128::from_be_bytes(a.0);
        Some(number(self).cmp(&number(other)))
    }
}

/// `text`'s place in `known` (sorted) plus one, [`NO_PHASE`] for none, [`OTHER_PHASE`] for a
/// text not there.
fn place(known: &[&'static str], text: Option<&str>) -> u8 {
    match text {
        None => NO_PHASE,
        Some(text) => known
            .binary_search(&text)
            .ok()
            .and_then(|at| u8::try_from(at + 1).ok())
            .filter(|&p| p != OTHER_PHASE)
            .unwrap_or(OTHER_PHASE),
    }
}

/// What [`place`] gave back as text.
fn text(known: &[&'static str], place: u8) -> BriefText {
    match place {
        NO_PHASE => BriefText::None,
        OTHER_PHASE => BriefText::Other,
        at => known
            .get(usize::from(at) - 1)
            .map_or(BriefText::Other, |text| BriefText::Known(text)),
    }
}

impl Snapshot {
    /// Every object of a kind (of one datacenter, of one namespace, when given) with its key and
    /// brief, in key order (a namespace of every datacenter one datacenter after the other), or
    /// in its reverse when `backwards`. Each range's ends are found by the ordered map first, so
    /// no key is read on the way.
    pub fn held<'a>(
        &'a self,
        kind: Kind,
        datacenter: Option<&Datacenter>,
        namespace: Option<&str>,
        backwards: bool,
    ) -> Box<dyn Iterator<Item = (&'a ObjectKey, &'a Held)> + Send + 'a> {
        reads::note_inexact();
        let namespace_range = |dc: &Datacenter, ns: &str| {
            let (from, past) = ObjectKey::namespace_span(dc, kind, ns);
            (from, Bound::Excluded(past))
        };
        let ranges: Vec<(ObjectKey, Bound<ObjectKey>)> = match (datacenter, namespace) {
            (Some(dc), Some(ns)) => vec![namespace_range(dc, ns)],
            (Some(dc), None) => {
                let (from, past) = ObjectKey::datacenter_span(dc, kind);
                vec![(from, Bound::Excluded(past))]
            }
            (None, Some(ns)) => self
                .datacenters
                .keys()
                .map(|dc| namespace_range(dc, ns))
                .collect(),
            (None, None) => {
                // Up to the next kind's first key.
                let first = Datacenter::default();
                let next = Kind::ALL.iter().copied().filter(|k| *k > kind).min();
                vec![(
                    ObjectKey::new(&first, kind, "", ""),
                    next.map_or(Bound::Unbounded, |k| {
                        Bound::Excluded(ObjectKey::new(&first, k, "", ""))
                    }),
                )]
            }
        };
        let range = move |(from, to): (ObjectKey, Bound<ObjectKey>)| {
            self.objects
                .range::<_, ObjectKey>((Bound::Included(from), to))
        };
        if backwards {
            Box::new(ranges.into_iter().rev().flat_map(move |r| range(r).rev()))
        } else {
            Box::new(ranges.into_iter().flat_map(range))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(kind: Kind, value: serde_json::Value) -> Resource {
        let version = if kind == Kind::VirtualMachineInstance || kind == Kind::VirtualMachine {
            "v1"
        } else {
            "v1alpha1"
        };
        Resource::from_value(kind, version, value).expect("an object")
    }

    #[test]
    fn a_brief_says_what_the_object_does() {
        let cases = [
            object(
                Kind::Machine,
                json!({"metadata": {"name": "m", "namespace": "a",
                    "creationTimestamp": "2026-01-02T03:04:05Z",
                    "labels": {"cluster.vitistack.io/role": "controlplane"}}, "spec": {},
                    "status": {"phase": "Running"}}),
            ),
            object(
                Kind::Machine,
                json!({"metadata": {"name": "m", "namespace": "a",
                    "labels": {"vitistack.io/node-role": "gpu"}}, "spec": {},
                    "status": {"phase": "Hibernating"}}),
            ),
            object(
                Kind::Machine,
                json!({"metadata": {"name": "m", "namespace": "a",
                    "creationTimestamp": "1969-12-31T23:59:59.5Z"}, "spec": {}}),
            ),
            object(
                Kind::VirtualMachineInstance,
                json!({"metadata": {"name": "v", "namespace": "a"},
                    "status": {"phase": "Scheduling"}}),
            ),
        ];
        for r in &cases {
            let b = Brief::of(r);
            assert_eq!(b.kind(), r.kind());
            assert_eq!(b.created(), r.created(), "{:?}", r.created());
            match b.phase() {
                BriefText::None => assert_eq!(r.phase(), None),
                BriefText::Known(text) => assert_eq!(Some(text), r.phase()),
                BriefText::Other => assert_eq!(r.phase(), Some("Hibernating")),
            }
            match b.role() {
                BriefText::None => assert_eq!(r.node_role(), None),
                BriefText::Known(text) => assert_eq!(Some(text), r.node_role()),
                BriefText::Other => assert_eq!(r.node_role(), Some("gpu")),
            }
        }
        assert_eq!(Brief::of(&cases[1]).phase(), BriefText::Other);
        assert_eq!(Brief::of(&cases[2]).phase(), BriefText::None);
        assert_eq!(
            Brief::of(&cases[0]).role(),
            BriefText::Known("control-plane")
        );
        assert_eq!(Brief::of(&cases[1]).role(), BriefText::Other);
        assert_eq!(std::mem::size_of::<Brief>(), 40);
    }

    #[test]
    fn abbreviations_order_pairs_as_the_pairs_order() {
        // Namespaces and names near the abbreviation's 16 bytes, prefixes of each other, with
        // bytes below and above the separator's, and zero bytes.
        let texts = [
            "",
            "a",
            "a\u{1}",
            "a\0b",
            "ab",
            "team-3",
            "team-3-",
            "team-30",
            "t-demo-042-ab12-ctp0",
            "t-demo-042-ab12-ctp1",
            "t-demo-04",
            "0123456789abcdef",
            "0123456789abcdeg",
            "0123456789abcde",
            "0123456789abcdef0",
            "0123456789abcdef\0a",
            "\0",
            "é",
            "e\u{7f}",
        ];
        let mut told = 0;
        for (ns_a, name_a) in texts
            .iter()
            .flat_map(|a| texts.iter().map(move |b| (*a, *b)))
        {
            for (ns_b, name_b) in texts
                .iter()
                .flat_map(|a| texts.iter().map(move |b| (*a, *b)))
            {
                let (a, b) = (Abbreviated::of(ns_a, name_a), Abbreviated::of(ns_b, name_b));
                if let Some(o) = a.order(b) {
                    told += 1;
                    assert_eq!(
                        o,
                        (ns_a, name_a).cmp(&(ns_b, name_b)),
                        "{ns_a:?}/{name_a:?} against {ns_b:?}/{name_b:?}"
                    );
                }
            }
        }
        // Most pairs are told apart by their abbreviations.
        assert!(told > texts.len().pow(4) / 2, "{told}");
        assert_eq!(Abbreviated::of("a\0b", "c"), Abbreviated::default());
    }

    #[test]
    fn the_places_are_in_their_texts_order() {
        assert!(PHASES.windows(2).all(|w| w[0] < w[1]));
        assert!(ROLES.windows(2).all(|w| w[0] < w[1]));
        assert!(PHASES.contains(&"Running") && PHASES.contains(&"ConfigGenerated"));
    }
}
