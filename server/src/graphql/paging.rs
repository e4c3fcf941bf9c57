//! Relay connections over store objects: filters, label selectors, sorting, and keyset cursors that
//! stay valid while objects come and go.

use crate::error::ErrorCode;
use std::sync::Arc;

use async_graphql::connection::CursorType;
use async_graphql::{Enum, InputObject, SimpleObject};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::folded::Folded;
#[cfg(test)]
use super::folded::contains_folded;
use super::selector::Selector;
use crate::model::{Labels, Resource};
use crate::store::ObjectKey;
use crate::store::held::{Abbreviated, BriefText, Held};

/// Query limits shared by every resolver.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest `first`/`last` a connection accepts.
    pub max_page_size: usize,
}

/// The largest `first`/`last` (MAX_PAGE_SIZE; 500 in a schema built without limits).
pub fn max_page_size(ctx: &async_graphql::Context<'_>) -> usize {
    ctx.data_opt::<Limits>().map_or(500, |l| l.max_page_size)
}

/// Page size when neither `first` nor `last` is given.
pub const DEFAULT_PAGE_SIZE: usize = 50;

/// Filters every list accepts.
#[derive(InputObject, Default, Clone, Debug)]
pub struct Filter {
    /// Only objects in this namespace.
    pub namespace: Option<String>,
    /// Only objects of this datacenter (its key; `""` = the one datacenter of a single-cluster
    /// server).
    pub datacenter: Option<String>,
    /// Only objects whose status phase is one of these (case-insensitive; `""` = no phase yet).
    pub phase: Option<Vec<String>>,
    /// A Kubernetes label selector: `a=b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, comma-separated.
    pub label_selector: Option<String>,
    /// Case-insensitive substring of the name (or namespace/name).
    pub search: Option<String>,
}

/// Fields a list can be sorted by; ties are broken by namespace, then name.
#[derive(Enum, Copy, Clone, Debug, Eq, PartialEq, Default)]
pub enum SortField {
    /// `metadata.name`.
    #[default]
    Name,
    /// `metadata.namespace`, then name.
    Namespace,
    /// `metadata.creationTimestamp`.
    Created,
    /// Status phase.
    Phase,
}

/// Sort direction.
#[derive(Enum, Copy, Clone, Debug, Eq, PartialEq, Default)]
pub enum SortDirection {
    /// Ascending.
    #[default]
    Asc,
    /// Descending.
    Desc,
}

/// How to order a list.
#[derive(InputObject, Clone, Copy, Debug, Default)]
pub struct Sort {
    /// The field.
    #[graphql(default)]
    pub field: SortField,
    /// The direction.
    #[graphql(default)]
    pub direction: SortDirection,
}

/// Extra fields on every connection.
#[derive(SimpleObject, Clone, Debug)]
pub struct ConnectionFields {
    /// Number of objects matching the filter, across all pages.
    pub total_count: usize,
}

/// Pagination arguments as received.
#[derive(Clone, Debug, Default)]
pub struct PageArgs {
    /// Items after this cursor.
    pub after: Option<String>,
    /// Items before this cursor.
    pub before: Option<String>,
    /// The first N items.
    pub first: Option<i32>,
    /// The last N items.
    pub last: Option<i32>,
}

/// A cursor: the position of an item in one sort order. Opaque to clients (base64url of JSON
/// `["c1", field, sort value, namespace, name]`, and the datacenter's key after the name when it
/// is not empty). Edges hold the item and encode only when asked.
#[derive(Clone, Debug)]
pub enum Cursor {
    /// A cursor for an item of a page (encoded lazily).
    Item(SortField, Arc<Resource>),
    /// A cursor decoded from a client.
    Decoded { field: String, key: SortKey },
}

/// (sort value, namespace, name, datacenter).
pub(super) type SortKey = (String, String, String, String);

/// Why a text is not a cursor of this server's lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    #[error("not base64url")]
    NotBase64,
    #[error("not a cursor of this server")]
    Foreign,
}

impl CursorType for Cursor {
    type Error = CursorError;

    fn decode_cursor(s: &str) -> Result<Self, Self::Error> {
        let bytes = URL_SAFE_NO_PAD
            .decode(s)
            .map_err(|_| CursorError::NotBase64)?;
        let parts: Vec<String> =
            serde_json::from_slice(&bytes).map_err(|_| CursorError::Foreign)?;
        match parts.as_slice() {
            [v, field, value, ns, name] if v == "c1" => Ok(Cursor::Decoded {
                field: field.clone(),
                key: (value.clone(), ns.clone(), name.clone(), String::new()),
            }),
            [v, field, value, ns, name, dc] if v == "c1" && !dc.is_empty() => Ok(Cursor::Decoded {
                field: field.clone(),
                key: (value.clone(), ns.clone(), name.clone(), dc.clone()),
            }),
            _ => Err(CursorError::Foreign),
        }
    }

    fn encode_cursor(&self) -> String {
        let (field, key) = match self {
            Cursor::Item(f, r) => {
                let (v, ns, name) = sort_value(r, *f);
                (
                    field_name(*f).to_string(),
                    (
                        v.into_owned(),
                        ns.to_string(),
                        name.to_string(),
                        r.datacenter().to_string(),
                    ),
                )
            }
            Cursor::Decoded { field, key } => (field.clone(), key.clone()),
        };
        // A single-cluster server's cursors keep their five parts (and stay valid).
        let mut parts = vec!["c1", &field, &key.0, &key.1, &key.2];
        if !key.3.is_empty() {
            parts.push(&key.3);
        }
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&parts).unwrap_or_default())
    }
}

pub(super) fn field_name(f: SortField) -> &'static str {
    match f {
        SortField::Name => "name",
        SortField::Namespace => "namespace",
        SortField::Created => "created",
        SortField::Phase => "phase",
    }
}

/// The sort key of an item, borrowing where it can.
fn sort_value(r: &Resource, f: SortField) -> (std::borrow::Cow<'_, str>, &str, &str) {
    let value = match f {
        SortField::Name => std::borrow::Cow::Borrowed(r.name()),
        SortField::Namespace => std::borrow::Cow::Borrowed(r.namespace()),
        SortField::Created => {
            std::borrow::Cow::Owned(r.created().map(|t| t.to_string()).unwrap_or_default())
        }
        SortField::Phase => std::borrow::Cow::Borrowed(r.phase().unwrap_or_default()),
    };
    (value, r.namespace(), r.name())
}

/// A filter ready to test objects (the label selector parsed once).
#[derive(Clone, Default)]
pub struct CompiledFilter {
    namespace: Option<String>,
    datacenter: Option<String>,
    phases: Option<Vec<String>>,
    selector: Option<Selector>,
    search: Option<Folded>,
}

impl CompiledFilter {
    /// Compile. Fails on an unreadable label selector.
    pub fn new(f: &Filter) -> async_graphql::Result<Self> {
        let selector = f
            .label_selector
            .as_ref()
            .map(|sel| {
                super::selector::parse(sel).map_err(|e| {
                    ErrorCode::BadLabelSelector.graphql(format!("labelSelector `{sel}`: {e}"))
                })
            })
            .transpose()?;
        Ok(CompiledFilter {
            namespace: f.namespace.clone(),
            datacenter: f.datacenter.clone(),
            phases: f
                .phase
                .as_ref()
                .map(|ps| ps.iter().map(|p| p.to_ascii_lowercase()).collect()),
            selector,
            search: f.search.as_deref().map(Folded::new),
        })
    }

    /// The namespace it is limited to, if any.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// True when the filter asks for a datacenter at most (which a search narrows to itself).
    pub fn only_datacenter(&self) -> bool {
        self.namespace.is_none()
            && self.phases.is_none()
            && self.selector.is_none()
            && self.search.is_none()
    }

    /// True when it searches names.
    pub fn searches(&self) -> bool {
        self.search.is_some()
    }

    /// False when its name search cannot find the entry's namespace or name, told by the
    /// entry's brief ([`crate::store::held::Letters`]) without reading them.
    pub fn may_find_name(&self, held: &Held) -> bool {
        self.search
            .as_ref()
            .is_none_or(|q| q.may_be_in(held.brief().letters()))
    }

    /// The filter for objects read from its namespace's and datacenter's ranges already: the
    /// rest of it.
    pub fn without_place(&self) -> CompiledFilter {
        CompiledFilter {
            namespace: None,
            datacenter: None,
            ..self.clone()
        }
    }

    /// [`CompiledFilter::matches`] for an entry of the store's ordered map: its key and brief
    /// answer all but a label selector and a phase the brief does not keep, which are read of
    /// the object (the labels of the entry's, see [`Held::labels`]).
    pub fn matches_held(&self, key: &ObjectKey, held: &Held) -> bool {
        self.matches_held_remembering(key, held, &mut SelectorMemo::default())
    }

    /// [`CompiledFilter::matches_held`] for one of many entries: what the label selector said
    /// of a label set is kept in `memo`, and the entries that share the set are not tested
    /// again (460,000 Machines carry about 46,000 sets in `cargo bench --bench search_query`).
    pub fn matches_held_remembering(
        &self,
        key: &ObjectKey,
        held: &Held,
        memo: &mut SelectorMemo,
    ) -> bool {
        let phase = || match held.brief().phase() {
            BriefText::None => "",
            BriefText::Known(text) => text,
            BriefText::Other => held.object().phase().unwrap_or_default(),
        };
        // The key's texts are in its own allocation: read only by a filter that asks for them
        // (read for every entry, they were 28 % of the list of a phase's time, `perf` on
        // `cargo bench --bench search_query`).
        let place = || (&*key.namespace, &*key.name, key.datacenter.key());
        if !self.may_find_name(held) {
            return false;
        }
        self.passes(place, phase, |s| memo.matches(s, held.labels()))
    }

    /// True when `r` passes every part of the filter.
    pub fn matches(&self, r: &Resource) -> bool {
        let place = || (r.namespace(), r.name(), r.datacenter().key());
        self.passes(
            place,
            || r.phase().unwrap_or_default(),
            |s| s.matches(r.meta().labels.as_deref()),
        )
    }

    /// The test of both readings: an object's namespace, name and datacenter's key, and its
    /// phase and the object itself (for its labels), each read only when a part asks for it.
    fn passes<'r>(
        &self,
        place: impl FnOnce() -> (&'r str, &'r str, &'r str),
        phase: impl FnOnce() -> &'r str,
        selects: impl FnOnce(&Selector) -> bool,
    ) -> bool {
        // The phase first: a brief keeps it, and most lists that ask for one pass few.
        let phase_passes = self.phases.as_ref().is_none_or(|wanted| {
            let phase = phase();
            wanted.iter().any(|w| w.eq_ignore_ascii_case(phase))
        });
        if !phase_passes {
            return false;
        }
        let placed = self.namespace.is_some() || self.datacenter.is_some() || self.search.is_some();
        if placed {
            let (namespace, name, datacenter) = place();
            let passes = self.namespace.as_ref().is_none_or(|ns| ns == namespace)
                && self
                    .datacenter
                    .as_ref()
                    .is_none_or(|dc| dc.as_str() == datacenter)
                && self.search.as_ref().is_none_or(|q| {
                    // Without a '/', the text cannot span the namespace and the name.
                    if q.contains('/') {
                        q.found_in(&format!("{namespace}/{name}"))
                    } else {
                        q.found_in(name) || q.found_in(namespace)
                    }
                });
            if !passes {
                return false;
            }
        }
        self.selector.as_ref().is_none_or(selects)
    }
}

/// What a label selector said of each label set it was asked of, by the set's address
/// ([`Labels::address`]; valid while the sets are held: for one read of one snapshot). Keeps
/// at most [`REMEMBERED_SETS`]; past them, a set is tested each time it is met.
#[derive(Default)]
pub struct SelectorMemo(rustc_hash::FxHashMap<usize, bool>);

/// Most label sets a [`SelectorMemo`] keeps.
const REMEMBERED_SETS: usize = 1 << 16;

impl SelectorMemo {
    /// Whether `labels` pass `selector` (no labels: as an empty set does).
    fn matches(&mut self, selector: &Selector, labels: Option<&Labels>) -> bool {
        let Some(labels) = labels else {
            return selector.matches(None);
        };
        let at = labels.address();
        if let Some(&said) = self.0.get(&at) {
            return said;
        }
        let said = selector.matches(Some(labels));
        if self.0.len() < REMEMBERED_SETS {
            self.0.insert(at, said);
        }
        said
    }
}

/// The kinds a filter names (`Machine`, `machines`, `m`, …): `BAD_KIND` for one this server
/// does not serve.
pub fn parse_kinds(
    kinds: Option<&[String]>,
) -> async_graphql::Result<Option<Vec<crate::model::Kind>>> {
    kinds
        .map(|ks| {
            ks.iter()
                .map(|k| {
                    k.parse::<crate::model::Kind>().map_err(|_| {
                        ErrorCode::BadKind.graphql(format!(
                            "filter.kinds: `{k}` is not a kind this server serves"
                        ))
                    })
                })
                .collect()
        })
        .transpose()
}

/// A page size asked as `name` (`first`, `last`): `BAD_PAGE_SIZE` when negative,
/// `PAGE_SIZE_LIMIT` above `max_page`.
pub fn page_size(name: &str, n: i32, max_page: usize) -> async_graphql::Result<usize> {
    if n < 0 {
        return Err(
            ErrorCode::BadPageSize.graphql(format!("`{name}` must not be negative (got {n})"))
        );
    }
    if n as usize > max_page {
        return Err(ErrorCode::PageSizeLimit.graphql(format!(
            "`{name}` is {n}, above the maximum page size of {max_page} (MAX_PAGE_SIZE); page with `after` instead"
        )));
    }
    Ok(n as usize)
}

/// An item's sort value: text borrowed from it, or its creation time (compared as a time, and
/// formatted only for a cursor).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SortValue<'a> {
    Text(&'a str),
    Time(Option<jiff::Timestamp>),
}

pub(super) fn sort_of(r: &Resource, f: SortField) -> SortValue<'_> {
    match f {
        SortField::Created => SortValue::Time(r.created()),
        _ => match sort_value(r, f).0 {
            std::borrow::Cow::Borrowed(text) => SortValue::Text(text),
            std::borrow::Cow::Owned(_) => SortValue::Text(""),
        },
    }
}

/// A cursor's sort value, as [`sort_of`] gives an item's.
fn cursor_sort(key: &SortKey, f: SortField) -> Result<SortValue<'_>, String> {
    match f {
        SortField::Created if key.0.is_empty() => Ok(SortValue::Time(None)),
        SortField::Created => key
            .0
            .parse()
            .map(|t| SortValue::Time(Some(t)))
            .map_err(|_| format!("its creation time `{}` is not a time", key.0)),
        _ => Ok(SortValue::Text(&key.0)),
    }
}

/// Where a decoded cursor stands: its sort value, its tie's abbreviation and its tie.
pub(super) type Bound<'k> = (SortValue<'k>, Abbreviated, (&'k str, &'k str, &'k str));

/// A decoded cursor as the place it stands for; `BAD_CURSOR` when its value is not one of this
/// sort's (a creation time that is not a time).
pub(super) fn bound<'k>(
    arg: &str,
    raw: Option<&str>,
    key: Option<&'k SortKey>,
    field: SortField,
) -> async_graphql::Result<Option<Bound<'k>>> {
    let Some(k) = key else { return Ok(None) };
    let value = cursor_sort(k, field).map_err(|e| {
        ErrorCode::BadCursor.graphql(format!(
            "`{arg}` cursor `{}` is invalid: {e}",
            raw.unwrap_or_default()
        ))
    })?;
    let abbreviated = Abbreviated::of(&k.1, &k.2);
    Ok(Some((
        value,
        abbreviated,
        (k.1.as_str(), k.2.as_str(), k.3.as_str()),
    )))
}

/// Ties: namespace, name, then datacenter (two datacenters may hold one namespace/name).
fn tie(r: &Resource) -> (&str, &str, &str) {
    (r.namespace(), r.name(), r.datacenter().key())
}

/// What [`paginate`] reads of an item: its object, its sort value and its tie. An object
/// answers them itself; an entry of the store's ordered map from its key and brief, without
/// reading the object (`brief_list.rs`).
pub trait Row<'a>: Copy {
    /// The object.
    fn object(self) -> &'a Arc<Resource>;
    /// Its value for `field`, as [`sort_of`] reads it of the object.
    fn sort(self, field: SortField) -> SortValue<'a>;
    /// Its namespace, name and datacenter's key, as [`tie`] reads them of the object.
    fn tie(self) -> (&'a str, &'a str, &'a str);
    /// The first bytes of its namespace and name, where it keeps them (they decide most ties
    /// without reading the tie); none (all zeros) where it does not.
    fn abbreviated(self) -> Abbreviated {
        Abbreviated::default()
    }
}

impl<'a> Row<'a> for &'a Arc<Resource> {
    fn object(self) -> &'a Arc<Resource> {
        self
    }

    fn sort(self, field: SortField) -> SortValue<'a> {
        sort_of(self, field)
    }

    fn tie(self) -> (&'a str, &'a str, &'a str) {
        tie(self)
    }
}

#[cfg(test)]
#[path = "paging_tests.rs"]
mod tests;
