//! Search: every object by the words people look for — its name and the start of each word of it,
//! its namespace, labels (`key` and `key=value`), IP and MAC addresses, host, image and cluster id
//! — kept in step with the objects on every write, like the relationship indexes.
//!
//! Two indexes: the start of each word of every name, ordered by the rest of the name (a prefix is
//! one range), and every other searchable value as (its hash, the key) pairs in one ordered set
//! (a value's objects are one range; each candidate is checked against its object, so a
//! collision costs a comparison, not a wrong answer). A hash takes 8 bytes where the value's own
//! string took 24 and an allocation; one set of pairs takes about 30 bytes an entry where a hash
//! map of per-value key sets took about 110 for a value one object holds (IP and MAC addresses).
//! The namespace is not indexed: the store's ordered map holds a namespace's objects as one range
//! per kind and datacenter.
//! Snapshots the store does not keep (a reader's restricted view, a past moment) are searched
//! by reading every object instead: they are built whole and asked once or twice.

use std::cmp::Ordering;
use std::sync::Arc;

use imbl::OrdSet;

pub use super::search_fields::{Field, Value, fields};
use super::{ObjectKey, Snapshot, reads};
use crate::model::kubevirt::guessed_cluster;
use crate::model::{Kind, LABEL_SOURCE_MACHINE, Resource};

/// How well an object matches one word of a search, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, async_graphql::Enum)]
#[graphql(name = "SearchRank")]
pub enum Rank {
    /// The name is the word.
    ExactName,
    /// The name starts with the word.
    NamePrefix,
    /// One of the name's words (after `-`, `.`, `_`, `:` or `/`) starts with it.
    WordPrefix,
    /// Another field is the word exactly.
    Field,
}

/// One object a search found: how well, and through what.
#[derive(Clone, Debug)]
pub struct Hit {
    /// The object.
    pub object: Arc<Resource>,
    /// The best rank among the search's words.
    pub rank: Rank,
    /// What the best-ranked word matched.
    pub field: Field,
}

impl Hit {
    /// The value the best-ranked of `words` (the search's) matched, as the object holds it (the
    /// name, `key=value`, the address, …). Found again for the hits shown rather than kept with
    /// every hit: a namespace's 125,000 hits took as many strings.
    pub fn value(&self, words: &[String]) -> String {
        best_match(&self.object, words).map_or_else(String::new, |(_, _, v)| v.to_string())
    }
}

/// Where a search looks, besides what its caller's `keep` decides: these kinds, this datacenter
/// (its key). They narrow the ranges a namespace is read from, so that a search for a namespace
/// limited to one kind reads that kind's objects only.
#[derive(Clone, Copy, Debug, Default)]
pub struct Where<'a> {
    /// Only these kinds (all when `None`).
    pub kinds: Option<&'a [Kind]>,
    /// Only the datacenter of this key (all when `None`).
    pub datacenter: Option<&'a str>,
}

impl Where<'_> {
    /// Whether `r` is of these kinds and this datacenter.
    pub fn holds(&self, r: &Resource) -> bool {
        self.kinds.is_none_or(|ks| ks.contains(&r.kind()))
            && self.datacenter.is_none_or(|dc| dc == r.datacenter().key())
    }
}

/// Largest number of word starts kept per name (a longer name is still found by its first
/// words and by its whole name).
const MAX_WORDS: usize = 8;

/// A word start that marks a probe (sorts before every entry of the same text).
const PROBE: u16 = u16::MAX;

/// One word of a name: the key and the byte offset where the word starts, ordered by the name
/// from there on (ASCII case-insensitively), then by key.
#[derive(Clone, Debug)]
pub(super) struct WordAt {
    key: ObjectKey,
    at: u16,
}

impl WordAt {
    fn text(&self) -> &str {
        if self.at == PROBE {
            &self.key.name
        } else {
            self.key.name.get(self.at as usize..).unwrap_or_default()
        }
    }
}

fn cmp_ignore_case(a: &str, b: &str) -> Ordering {
    a.bytes()
        .map(|c| c.to_ascii_lowercase())
        .cmp(b.bytes().map(|c| c.to_ascii_lowercase()))
}

impl Ord for WordAt {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_ignore_case(self.text(), other.text())
            .then_with(|| (other.at == PROBE).cmp(&(self.at == PROBE)))
            .then_with(|| self.key.cmp(&other.key))
            .then_with(|| self.at.cmp(&other.at))
    }
}

impl PartialOrd for WordAt {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for WordAt {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for WordAt {}

/// Whether `text` starts with `prefix`, ASCII case-insensitively.
fn starts_ignore_case(text: &str, prefix: &str) -> bool {
    text.len() >= prefix.len()
        && text.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

fn is_separator(c: u8) -> bool {
    matches!(c, b'-' | b'.' | b'_' | b':' | b'/')
}

/// Where the words of a name start after the first (which starts at 0).
fn word_starts(name: &str) -> impl Iterator<Item = usize> + '_ {
    let bytes = name.as_bytes();
    (1..bytes.len())
        .filter(move |&i| is_separator(bytes[i - 1]) && !is_separator(bytes[i]))
        .take_while(|&i| i < PROBE as usize)
        .take(MAX_WORDS - 1)
}

/// The word entries of a key's name: its start, then each word's.
fn words_of(key: &ObjectKey) -> impl Iterator<Item = WordAt> + '_ {
    std::iter::once(0)
        .chain(word_starts(&key.name))
        .map(|at| WordAt {
            key: key.clone(),
            at: at as u16,
        })
}

/// The search indexes of a snapshot the store keeps.
#[derive(Clone, Default)]
pub(super) struct SearchIndex {
    words: OrdSet<WordAt>,
    /// (a value's hash, an object holding it); `None` only in a probe, before every key.
    values: OrdSet<(u64, Option<ObjectKey>)>,
}

/// The hashes of an object's searchable values other than its name and namespace, sorted,
/// without repeats. A value equal to the name (a Machine's host name often is) is found through
/// the name already, the namespace through the store's ordered map.
fn value_hashes(r: &Resource) -> Vec<u64> {
    let mut out = Vec::new();
    let name = r.name();
    fields(r, &mut |field, v| {
        if field != Field::Namespace && !v.is(name) {
            out.push(v.hash())
        }
    });
    // Held for the lists, not a field search shows: the cluster a VM's source Machine's name
    // gives, its cluster when no label says (`virtualMachineInstances(clusterId)`, narrow.rs);
    // not when its own name gives the same (the names' index finds it).
    let virt = matches!(
        r,
        Resource::VirtualMachine(_) | Resource::VirtualMachineInstance(_)
    );
    if let Some(id) = r
        .label(LABEL_SOURCE_MACHINE)
        .and_then(guessed_cluster)
        .filter(|id| virt && guessed_cluster(name) != Some(id))
    {
        out.push(Value::Plain(id).hash());
    }
    out.sort_unstable();
    out.dedup();
    out
}

impl SearchIndex {
    /// Index a new object.
    pub(super) fn add(&mut self, key: &ObjectKey, r: &Resource) {
        for w in words_of(key) {
            self.words.insert(w);
        }
        for h in value_hashes(r) {
            self.values.insert((h, Some(key.clone())));
        }
    }

    /// An object changed (same key): its values follow.
    pub(super) fn change(&mut self, key: &ObjectKey, before: &Resource, after: &Resource) {
        let (old, new) = (value_hashes(before), value_hashes(after));
        if old == new {
            return;
        }
        for h in old.iter().filter(|h| new.binary_search(h).is_err()) {
            self.values.remove(&(*h, Some(key.clone())));
        }
        for h in new.iter().filter(|h| old.binary_search(h).is_err()) {
            self.values.insert((*h, Some(key.clone())));
        }
    }

    /// An object went away.
    pub(super) fn remove(&mut self, key: &ObjectKey, r: &Resource) {
        for w in words_of(key) {
            self.words.remove(&w);
        }
        for h in value_hashes(r) {
            self.values.remove(&(h, Some(key.clone())));
        }
    }

    /// Keys that may match `word` (lowercase) but by namespace: every name with a word starting
    /// with it, every object holding a value equal to it. May repeat a key; never misses one.
    /// Stops after more than `limit` (then `out` holds more than `limit`, not all).
    pub(super) fn candidates(&self, word: &str, limit: usize, out: &mut Vec<ObjectKey>) {
        let name_prefix = |prefix: &str, out: &mut Vec<ObjectKey>| {
            let probe = WordAt {
                key: ObjectKey::new(&Default::default(), Kind::ALL[0], "", prefix),
                at: PROBE,
            };
            for w in self.words.range(probe..) {
                if !starts_ignore_case(w.text(), prefix) || out.len() > limit {
                    break;
                }
                out.push(w.key.clone());
            }
        };
        name_prefix(word, out);
        if let Some((_, name)) = word.split_once('/')
            && !name.is_empty()
        {
            name_prefix(name, out);
        }
        let h = Value::Plain(word).hash();
        let same = self.values.range((h, None)..);
        let room = limit.saturating_add(1).saturating_sub(out.len());
        out.extend(
            same.map_while(|(at, key)| key.clone().filter(|_| *at == h))
                .take(room),
        );
    }
}

/// How `r` matches every word of a search (lowercase), if it does: the best rank among the
/// words, with the field and value that word matched.
fn best_match<'r>(r: &'r Resource, words: &[String]) -> Option<(Rank, Field, Value<'r>)> {
    let mut best: Option<(Rank, Field, Value<'r>)> = None;
    for w in words {
        let found = match_word(r, w)?;
        if best.as_ref().is_none_or(|b| found.0 < b.0) {
            best = Some(found);
        }
    }
    best
}

/// How `r` matches one word of a search (lowercase), if it does: the best rank, the field and
/// the value matched. A word `namespace/name…` matches an object of that namespace whose name
/// matches the rest.
pub fn match_word<'r>(r: &'r Resource, word: &str) -> Option<(Rank, Field, Value<'r>)> {
    let name = r.name();
    let by_name = |part: &str| {
        let rank = name_rank(name, part)?;
        Some((rank, Field::Name, Value::Plain(name)))
    };
    let mut best = by_name(word);
    if let Some((ns, rest)) = word.split_once('/')
        && !rest.is_empty()
        && r.namespace().eq_ignore_ascii_case(ns)
        && let Some(found) = by_name(rest)
    {
        best = match best {
            Some(b) if b.0 <= found.0 => Some(b),
            _ => Some(found),
        };
    }
    if best.is_some() {
        return best;
    }
    // The namespace is the first of the other fields: asked first, without reading the rest (a
    // namespace's objects are most of what a search reads).
    if r.namespace().eq_ignore_ascii_case(word) {
        return Some((Rank::Field, Field::Namespace, Value::Plain(r.namespace())));
    }
    let mut found = None;
    fields(r, &mut |field, value| {
        if found.is_none() && value.is(word) {
            found = Some((Rank::Field, field, value));
        }
    });
    found
}

fn name_rank(name: &str, word: &str) -> Option<Rank> {
    if name.eq_ignore_ascii_case(word) {
        Some(Rank::ExactName)
    } else if starts_ignore_case(name, word) {
        Some(Rank::NamePrefix)
    } else if word_starts(name).any(|at| starts_ignore_case(&name[at..], word)) {
        Some(Rank::WordPrefix)
    } else {
        None
    }
}

impl Snapshot {
    /// Every object within `scope` that matches every word of `words` (lowercase; see
    /// [`match_word`]) and passes `keep`, with its best match; in no particular order. A snapshot
    /// the store keeps finds its candidates through its indexes, any other reads each object.
    pub fn search(
        &self,
        words: &[String],
        scope: Where<'_>,
        keep: &dyn Fn(&Resource) -> bool,
    ) -> Vec<Hit> {
        // Which objects match depends on every object: not a point read.
        reads::note_inexact();
        if words.is_empty() {
            return Vec::new();
        }
        let judge = |r: &Arc<Resource>| -> Option<Hit> {
            if !scope.holds(r) || !keep(r) {
                return None;
            }
            let (rank, field, _) = best_match(r, words)?;
            Some(Hit {
                object: r.clone(),
                rank,
                field,
            })
        };
        let Some(index) = &self.search else {
            return self
                .objects
                .values()
                .map(|h| h.object())
                .filter_map(judge)
                .collect();
        };
        // The word with the fewest candidates chooses them (its namespace's objects counted
        // only when there is a choice); every word is checked on each.
        let mut fewest: Option<(usize, &str, Vec<ObjectKey>)> = None;
        for w in words {
            let mut found = Vec::new();
            index.candidates(w, usize::MAX, &mut found);
            let mut n = found.len();
            if words.len() > 1 {
                self.in_namespace(w, scope, &mut |_| n += 1);
            }
            if fewest.as_ref().is_none_or(|f| n < f.0) {
                fewest = Some((n, w, found));
            }
        }
        let Some((_, word, mut keys)) = fewest else {
            return Vec::new();
        };
        // The namespace's objects are read from its ranges, whole and in order: the indexes'
        // candidates among them would come twice. (A namespace of 125,000 objects, its keys
        // sorted and each looked up again, took 279 ms p95 at one million objects.)
        keys.retain(|k| k.namespace != word);
        keys.sort_unstable();
        keys.dedup();
        let mut hits: Vec<Hit> = keys
            .iter()
            .filter_map(|k| self.by_key.get(k))
            .filter_map(judge)
            .collect();
        self.in_namespace(word, scope, &mut |r| hits.extend(judge(r)));
        hits
    }

    /// The objects whose name starts with `value` or that hold it as one of their searchable
    /// values (see [`fields`]), ASCII case aside, found through the search indexes, if there are
    /// `at_most` or fewer; None for more, or for a snapshot without the indexes (a restricted
    /// view, a past moment): the caller reads the objects instead. Each object found costs
    /// several times what reading one does (at one million objects, a label 230,000 Machines
    /// hold took 3-4 times as long as reading all 460,000). Without repeats, in no particular
    /// order; more than match (a name's prefix, a hash's collision, another case): the caller
    /// checks each.
    pub fn holding(&self, value: &str, at_most: usize) -> Option<Vec<&Arc<Resource>>> {
        reads::note_inexact();
        let index = self.search.as_ref()?;
        let mut keys = Vec::new();
        index.candidates(&value.to_ascii_lowercase(), at_most, &mut keys);
        if keys.len() > at_most {
            return None;
        }
        let mut found: Vec<&Arc<Resource>> =
            keys.iter().filter_map(|k| self.by_key.get(k)).collect();
        // Repeats by address: a sort of keys compares their strings.
        found.sort_unstable_by_key(|r| Arc::as_ptr(r));
        found.dedup_by_key(|r| Arc::as_ptr(*r));
        Some(found)
    }

    /// Every object of `scope` in namespace `ns`: one range of the ordered map per kind and
    /// datacenter.
    fn in_namespace(&self, ns: &str, scope: Where<'_>, each: &mut dyn FnMut(&Arc<Resource>)) {
        for (from, to) in self.spans(ns, scope) {
            for (_, r) in self.span_from(&from, &to) {
                each(r.object());
            }
        }
    }
}
