//! `search`: any object of any kind and datacenter by its name (whole, its start, or the start of
//! one of its words), namespace, labels, IP or MAC address, host, image or cluster id; ranked
//! (the exact name first), paged, filtered like the lists, and within what the caller sees (it
//! reads the request's snapshot, as every list does).

use async_graphql::connection::{Connection, CursorType, Edge};
use async_graphql::{Context, InputObject, Object, SimpleObject};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::paging::{CompiledFilter, ConnectionFields, DEFAULT_PAGE_SIZE, Filter, max_page_size};
use super::types::{Node, snap, to_node};
use crate::error::ErrorCode;
use crate::store::search::{Field, Hit, Rank, Where};
use crate::store::search_page::Place;

/// Longest search text, in bytes.
pub const MAX_TEXT: usize = 512;
/// Most words in one search.
pub const MAX_WORDS: usize = 8;

/// `search`, on its own root merged into `QueryRoot`.
#[derive(Default)]
pub struct SearchQuery;

/// One object found.
#[derive(SimpleObject)]
pub struct SearchHit {
    /// The object.
    pub node: Node,
    /// How well it matched.
    pub rank: Rank,
    /// What matched.
    pub field: Field,
    /// The value that matched, as the object holds it (the name, `key=value`, the address, …).
    pub value: String,
}

/// Which objects a search looks at.
#[derive(InputObject, Clone, Debug, Default)]
pub struct SearchFilter {
    /// Only these kinds (`Machine`, `KubernetesCluster`, …).
    pub kinds: Option<Vec<String>>,
    /// Namespace, datacenter, phase, labels and name, as the lists filter.
    #[graphql(flatten)]
    pub filter: Filter,
}

/// A hit's place in the order: rank, name, kind, namespace, datacenter. Opaque to clients
/// (base64url of JSON `["s1", rank, name, kind, namespace, datacenter]`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SearchCursor(u8, String, String, String, String);

impl SearchCursor {
    fn of(hit: &Hit) -> Self {
        let p = hit.place();
        SearchCursor(
            p.rank,
            p.name.to_string(),
            p.kind.to_string(),
            p.namespace.to_string(),
            p.datacenter.to_string(),
        )
    }

    fn place(&self) -> Place<'_> {
        Place {
            rank: self.0,
            name: &self.1,
            kind: &self.2,
            namespace: &self.3,
            datacenter: &self.4,
        }
    }
}

impl CursorType for SearchCursor {
    type Error = super::paging::CursorError;

    fn decode_cursor(s: &str) -> Result<Self, Self::Error> {
        use super::paging::CursorError;
        let bytes = URL_SAFE_NO_PAD
            .decode(s)
            .map_err(|_| CursorError::NotBase64)?;
        let parts: (String, u8, String, String, String, String) =
            serde_json::from_slice(&bytes).map_err(|_| CursorError::Foreign)?;
        if parts.0 != "s1" {
            return Err(CursorError::Foreign);
        }
        Ok(SearchCursor(parts.1, parts.2, parts.3, parts.4, parts.5))
    }

    fn encode_cursor(&self) -> String {
        let parts = ("s1", self.0, &self.1, &self.2, &self.3, &self.4);
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&parts).unwrap_or_default())
    }
}

/// The words of a search text: lowercase, split on white space; refused past the limits.
fn words(text: &str) -> async_graphql::Result<Vec<String>> {
    if text.len() > MAX_TEXT {
        return Err(ErrorCode::BadRequest.graphql(format!(
            "search text is {} bytes, above the limit of {MAX_TEXT}",
            text.len()
        )));
    }
    let words: Vec<String> = text.split_whitespace().map(str::to_lowercase).collect();
    if words.len() > MAX_WORDS {
        return Err(ErrorCode::BadRequest.graphql(format!(
            "search text has {} words, above the limit of {MAX_WORDS}",
            words.len()
        )));
    }
    Ok(words)
}

#[Object]
impl SearchQuery {
    /// Every object, of every kind and datacenter the caller sees, whose name, namespace,
    /// labels (`key`, `key=value`), IP or MAC addresses, host, image or cluster id match every
    /// word of `text` (case-insensitive; a name matches when it is the word, starts with it,
    /// or has a word — after `-`, `.`, `_`, `:` or `/` — starting with it; `namespace/name`
    /// matches both; any other field must be the word). Ordered by rank (the exact name first),
    /// then name, kind, namespace and datacenter; `first` (default 50, at most MAX_PAGE_SIZE)
    /// after the cursor `after`. An empty text finds nothing.
    async fn search(
        &self,
        ctx: &Context<'_>,
        text: String,
        filter: Option<SearchFilter>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<Connection<SearchCursor, SearchHit, ConnectionFields>> {
        let words = words(&text)?;
        let max = max_page_size(ctx);
        let first = match first {
            None => DEFAULT_PAGE_SIZE.min(max),
            Some(n) => super::paging::page_size("first", n, max)?,
        };
        let cursor = after
            .as_deref()
            .map(|raw| {
                SearchCursor::decode_cursor(raw).map_err(|e| {
                    ErrorCode::BadCursor.graphql(format!("`after` cursor `{raw}` is invalid: {e}"))
                })
            })
            .transpose()?;
        let filter = filter.unwrap_or_default();
        let kinds = super::paging::parse_kinds(filter.kinds.as_deref())?;
        let compiled = CompiledFilter::new(&filter.filter)?;
        let scope = Where {
            kinds: kinds.as_deref(),
            datacenter: filter.filter.datacenter.as_deref(),
        };
        // Kinds and datacenter narrow where the search looks; anything else is checked on each.
        let keep = |r: &crate::model::Resource| compiled.matches(r);
        let keep: Option<&dyn Fn(&crate::model::Resource) -> bool> =
            (!compiled.only_datacenter()).then_some(&keep);
        let after = cursor.as_ref().map(SearchCursor::place);
        let page = snap(ctx).search_page(&words, scope, keep, after, first);
        let mut conn = Connection::with_additional_fields(
            page.earlier,
            page.more,
            ConnectionFields {
                total_count: page.total,
            },
        );
        conn.edges.extend(page.hits.into_iter().map(|hit| {
            let cursor = SearchCursor::of(&hit);
            Edge::new(
                cursor,
                SearchHit {
                    rank: hit.rank,
                    field: hit.field,
                    value: hit.value(&words),
                    node: to_node(hit.object),
                },
            )
        }));
        Ok(conn)
    }
}
