//! Subscription documents: parsed once and shared while a subscription holds them, and a
//! subscription operation rewritten as a query of the event schema (positions kept).

use std::sync::Arc;

use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, OperationDefinition, OperationType, Selection,
    SelectionSet,
};
use async_graphql::{Positioned, ServerError};
use parking_lot::Mutex;

/// Parsed subscription documents by text: a document is parsed once, when its first
/// subscription opens, and shared (dashboards open the same subscriptions); an event's cost then
/// depends on the document's syntax tree, never on its text (whitespace, comments, the size of
/// the message). Entries go when their last subscription does.
#[derive(Default)]
pub struct SubscriptionDocuments {
    parsed: Mutex<std::collections::HashMap<Arc<str>, std::sync::Weak<ExecutableDocument>>>,
}

impl SubscriptionDocuments {
    /// The parsed document of `text` (parsed now if no open subscription holds it).
    pub fn get(&self, text: &str) -> Result<Arc<ExecutableDocument>, ServerError> {
        let mut parsed = self.parsed.lock();
        if let Some(doc) = parsed.get(text).and_then(std::sync::Weak::upgrade) {
            return Ok(doc);
        }
        let doc = Arc::new(async_graphql::parser::parse_query(text)?);
        if parsed.len() >= 1024 && parsed.len().is_power_of_two() {
            parsed.retain(|_, d| d.strong_count() > 0);
        }
        parsed.insert(Arc::from(text), Arc::downgrade(&doc));
        Ok(doc)
    }

    /// Distinct documents held now.
    pub fn len(&self) -> usize {
        self.parsed
            .lock()
            .values()
            .filter(|d| d.strong_count() > 0)
            .count()
    }

    /// True when no document is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The operation a request runs (None when the document names no runnable operation).
pub fn find_operation<'a>(
    doc: &'a ExecutableDocument,
    name: Option<&str>,
) -> Option<&'a Positioned<OperationDefinition>> {
    match (&doc.operations, name) {
        (DocumentOperations::Single(op), _) => Some(op),
        (DocumentOperations::Multiple(ops), Some(n)) => ops.get(n),
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => ops.values().next(),
        _ => None,
    }
}

/// A subscription document made ready for [`subscribe`].
#[derive(Debug, PartialEq, Eq)]
pub struct Prepared {
    /// The document with the subscription's keyword turned into `query` (same length).
    pub query: String,
    /// What error messages call the operation (`Subscription "Name"` or `Anonymous Subscription`).
    pub title: String,
}

/// The document with its subscription operation turned into a query of the same length, or None
/// when the request does not run a subscription operation.
pub fn as_query(text: &str, doc: &ExecutableDocument, name: Option<&str>) -> Option<Prepared> {
    let op = find_operation(doc, name)?;
    if op.node.ty != OperationType::Subscription {
        return None;
    }
    let title = match &doc.operations {
        DocumentOperations::Multiple(ops) => ops
            .iter()
            .find(|(_, o)| std::ptr::eq(*o, op))
            .map(|(n, _)| format!("Subscription \"{n}\"")),
        DocumentOperations::Single(_) => None,
    }
    .unwrap_or_else(|| "Anonymous Subscription".into());
    let at = offset(text, op.pos)?;
    const KEYWORD: &str = "subscription";
    if !text.get(at..)?.starts_with(KEYWORD) {
        return None;
    }
    // The other operations (and fragments only they use) are blanked out: they were written
    // for the real roots, and the event schema would refuse them.
    let mut used = std::collections::HashSet::new();
    spreads(&op.node.selection_set.node, doc, &mut used);
    let mut starts: Vec<(usize, bool)> = Vec::new();
    for (_, other) in doc.operations.iter() {
        starts.push((offset(text, other.pos)?, std::ptr::eq(other, op)));
    }
    for (name, fragment) in &doc.fragments {
        starts.push((offset(text, fragment.pos)?, used.contains(name.as_str())));
    }
    starts.sort_unstable();
    let mut out: Vec<u8> = text.as_bytes().to_vec();
    for (i, (from, keep)) in starts.iter().enumerate() {
        if *keep {
            continue;
        }
        let to = starts.get(i + 1).map_or(text.len(), |(next, _)| *next);
        // Blank with spaces, keeping newlines (and so every kept position).
        for b in &mut out[*from..to] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    }
    out[at..at + KEYWORD.len()].copy_from_slice(b"query       ");
    // Only ASCII bytes were written over whole characters' spans: still UTF-8 after a blanked
    // multi-byte character becomes several spaces.
    let query = String::from_utf8(out).ok()?;
    Some(Prepared { query, title })
}

/// The byte offset of a parser position (1-based line and column, columns counted in characters).
pub(super) fn offset(text: &str, pos: async_graphql::Pos) -> Option<usize> {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(pos.line.saturating_sub(1))
        .map(str::len)
        .sum();
    let column = text
        .get(line_start..)?
        .char_indices()
        .nth(pos.column.checked_sub(1)?)?;
    Some(line_start + column.0)
}

/// The fragments a selection set uses, directly or through other fragments.
pub(super) fn spreads<'a>(
    set: &'a SelectionSet,
    doc: &'a ExecutableDocument,
    used: &mut std::collections::HashSet<&'a str>,
) {
    for item in &set.items {
        match &item.node {
            Selection::Field(f) => spreads(&f.node.selection_set.node, doc, used),
            Selection::InlineFragment(f) => spreads(&f.node.selection_set.node, doc, used),
            Selection::FragmentSpread(f) => {
                let name = f.node.fragment_name.node.as_str();
                if used.insert(name)
                    && let Some(fragment) = doc.fragments.get(&f.node.fragment_name.node)
                {
                    spreads(&fragment.node.selection_set.node, doc, used);
                }
            }
        }
    }
}
