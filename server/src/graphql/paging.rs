//! Relay connections over store objects: filters, label selectors, sorting, and keyset cursors that
//! stay valid while objects come and go.

use crate::error::ErrorCode;
use std::cmp::Ordering;
use std::sync::Arc;

use async_graphql::connection::{Connection, CursorType, Edge};
use async_graphql::{Enum, InputObject, OutputType, SimpleObject};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::model::Resource;

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
type SortKey = (String, String, String, String);

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

fn field_name(f: SortField) -> &'static str {
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
    selector: Option<super::selector::Selector>,
    search: Option<String>,
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
            search: f.search.as_ref().map(|q| q.to_lowercase()),
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

    /// True when `r` passes every part of the filter.
    pub fn matches(&self, r: &Resource) -> bool {
        self.namespace.as_ref().is_none_or(|ns| ns == r.namespace())
            && self
                .datacenter
                .as_ref()
                .is_none_or(|dc| dc.as_str() == r.datacenter().key())
            && self.phases.as_ref().is_none_or(|wanted| {
                wanted.contains(&r.phase().unwrap_or_default().to_ascii_lowercase())
            })
            && self
                .selector
                .as_ref()
                .is_none_or(|s| s.matches(r.meta().labels.as_ref()))
            && self.search.as_ref().is_none_or(|q| {
                format!("{}/{}", r.namespace(), r.name())
                    .to_lowercase()
                    .contains(q.as_str())
            })
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

/// Apply a filter. Fails on an unreadable label selector.
pub fn apply_filter(
    items: &mut Vec<Arc<Resource>>,
    filter: Option<&Filter>,
) -> async_graphql::Result<()> {
    let Some(f) = filter else { return Ok(()) };
    let f = CompiledFilter::new(f)?;
    items.retain(|r| f.matches(r));
    Ok(())
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

/// Sort, then cut one page, building a Relay connection. `max_page` bounds `first`/`last`.
pub fn paginate<T, F>(
    items: Vec<Arc<Resource>>,
    sort: Option<Sort>,
    page: PageArgs,
    max_page: usize,
    wrap: F,
) -> async_graphql::Result<Connection<Cursor, T, ConnectionFields>>
where
    T: OutputType,
    F: Fn(Arc<Resource>) -> Option<T>,
{
    let sort = sort.unwrap_or_default();
    let field = field_name(sort.field);
    for (name, v) in [("first", page.first), ("last", page.last)] {
        if let Some(n) = v {
            page_size(name, n, max_page)?;
        }
    }
    let desc = sort.direction == SortDirection::Desc;
    let directed = |o: Ordering| if desc { o.reverse() } else { o };
    // Creation times are formatted once per item; the other fields are borrowed.
    let mut keyed: Vec<(std::borrow::Cow<'_, str>, &Arc<Resource>)> = items
        .iter()
        .map(|r| (sort_value(r, sort.field).0, r))
        .collect();
    // Ties: namespace, name, then datacenter (two datacenters may hold one namespace/name).
    fn tie(r: &Resource) -> (&str, &str, &str) {
        (r.namespace(), r.name(), r.datacenter().key())
    }
    keyed.sort_by(|a, b| directed(a.0.cmp(&b.0).then_with(|| tie(a.1).cmp(&tie(b.1)))));
    let total = keyed.len();
    let decode = |arg: &str, raw: &Option<String>| -> async_graphql::Result<Option<SortKey>> {
        let Some(raw) = raw else { return Ok(None) };
        let c = Cursor::decode_cursor(raw).map_err(|e| {
            ErrorCode::BadCursor.graphql(format!("`{arg}` cursor `{raw}` is invalid: {e}"))
        })?;
        let Cursor::Decoded {
            field: made_for,
            key,
        } = c
        else {
            return Ok(None);
        };
        if made_for != field {
            return Err(ErrorCode::BadCursor.graphql(format!(
                "`{arg}` cursor was made for sorting by {made_for}, this query sorts by {field}"
            )));
        }
        Ok(Some(key))
    };
    let after = decode("after", &page.after)?;
    let before = decode("before", &page.before)?;
    let position = |x: &(std::borrow::Cow<'_, str>, &Arc<Resource>), k: &SortKey| {
        directed(
            (
                x.0.as_ref(),
                x.1.namespace(),
                x.1.name(),
                x.1.datacenter().key(),
            )
                .cmp(&(k.0.as_str(), k.1.as_str(), k.2.as_str(), k.3.as_str())),
        )
    };
    let mut start = after
        .map(|k| keyed.partition_point(|x| position(x, &k) != Ordering::Greater))
        .unwrap_or(0);
    let mut end = before
        .map(|k| keyed.partition_point(|x| position(x, &k) == Ordering::Less))
        .unwrap_or(total);
    end = end.max(start);
    match (page.first, page.last) {
        (Some(n), _) => end = end.min(start + n as usize),
        (None, Some(n)) => start = end.saturating_sub(n as usize).max(start),
        (None, None) => end = end.min(start + DEFAULT_PAGE_SIZE.min(max_page)),
    }
    if let (Some(_), Some(n)) = (page.first, page.last) {
        start = end.saturating_sub(n as usize).max(start);
    }
    // hasPreviousPage / hasNextPage: whether any matching item lies before / after this page.
    let mut conn = Connection::with_additional_fields(
        start > 0,
        end < total,
        ConnectionFields { total_count: total },
    );
    conn.edges
        .extend(keyed[start..end].iter().filter_map(|(_, r)| {
            Some(Edge::new(
                Cursor::Item(sort.field, Arc::clone(r)),
                wrap(Arc::clone(r))?,
            ))
        }));
    Ok(conn)
}
