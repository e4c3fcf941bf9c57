//! What one document may cost, checked before it runs, on every transport (HTTP, WebSocket,
//! SSE) and for subscriptions too: tokens (counted before parsing), aliases, depth, and
//! complexity. Each refusal names the limit, the setting that raises it and both values.
//!
//! Complexity: every field costs 1 plus what it selects; a field that returns many items
//! multiplies what it selects by how many it may return: `first` (else `last`) when given, the
//! default page size for a connection without them (a selection of `nodes`/`edges`), the
//! number of `ids` for `nodes(ids:)`. Computed on the document (the largest over its
//! operations), with variables resolved, before validation: a costly document never runs.

use crate::error::ErrorCode;
use std::sync::Arc;

use async_graphql::extensions::{Extension, ExtensionContext, ExtensionFactory, NextParseQuery};
use async_graphql::parser::types::{ExecutableDocument, Selection, SelectionSet};
use async_graphql::{ServerError, ServerResult, Variables};

/// The limits (`MAX_QUERY_TOKENS`, `MAX_QUERY_ALIASES`, `MAX_QUERY_COMPLEXITY`; depth is
/// async-graphql's own `MAX_QUERY_DEPTH`).
#[derive(Clone, Copy, Debug)]
pub struct QueryLimits {
    /// Lexical tokens of the document text.
    pub max_tokens: usize,
    /// Aliased fields in the document.
    pub max_aliases: usize,
    /// Complexity (see the module documentation).
    pub max_complexity: usize,
    /// Introspection (`__schema`, `__type`) answered (`INTROSPECTION`).
    pub introspection: bool,
    /// Deepest selection (`MAX_QUERY_DEPTH`; enforced by the schema, named in its errors here).
    pub max_depth: usize,
}

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits {
            max_tokens: 10_000,
            max_aliases: 100,
            max_complexity: 200_000,
            introspection: true,
            max_depth: 16,
        }
    }
}

/// async-graphql's wording of a too-deep document (its parser's own recursion guard, and the
/// schema's depth limit) names neither our limit nor its value: say both.
pub fn name_depth_errors(response: &mut async_graphql::Response, max_depth: usize) {
    for e in &mut response.errors {
        if e.message == "Query is nested too deep."
            || e.message
                .starts_with("The recursion depth of the query cannot be greater than")
        {
            e.message = format!(
                "the query is nested deeper than the limit of {max_depth} levels (MAX_QUERY_DEPTH)"
            );
            e.extensions
                .get_or_insert_with(Default::default)
                .set("code", ErrorCode::DepthLimit);
        }
    }
}

/// A refusal naming the limit: `code` is the error's `extensions.code`.
fn refusal(code: ErrorCode, message: String) -> ServerError {
    code.graphql(message)
        .into_server_error(async_graphql::Pos::default())
}

/// Count the lexical tokens of a GraphQL document (punctuators, names, numbers, strings; not
/// whitespace, commas or comments), stopping once past `max`. Linear in the text, no allocation:
/// a huge document is refused before the parser builds anything.
pub fn count_tokens(text: &str, max: usize) -> usize {
    let b = text.as_bytes();
    let (mut i, mut n) = (0, 0);
    while i < b.len() && n <= max {
        match b[i] {
            b' ' | b'\t' | b'\n' | b'\r' | b',' => i += 1,
            0xEF if b[i..].starts_with(&[0xEF, 0xBB, 0xBF]) => i += 3, // byte order mark
            b'#' => {
                while i < b.len() && b[i] != b'\n' && b[i] != b'\r' {
                    i += 1;
                }
            }
            b'"' if b[i..].starts_with(b"\"\"\"") => {
                n += 1;
                i += 3;
                while i < b.len() && !b[i..].starts_with(b"\"\"\"") {
                    i += if b[i..].starts_with(b"\\\"\"\"") {
                        4
                    } else {
                        1
                    };
                }
                i += 3;
            }
            b'"' => {
                n += 1;
                i += 1;
                while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'.' if b[i..].starts_with(b"...") => {
                n += 1;
                i += 3;
            }
            c if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' => {
                n += 1;
                i += 1;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'_' | b'.' | b'+' | b'-'))
                {
                    i += 1;
                }
            }
            _ => {
                n += 1;
                i += 1;
            }
        }
    }
    n
}

/// Refuse a document text with more tokens than `limits` allow.
pub fn check_tokens(text: &str, limits: &QueryLimits) -> Result<(), ServerError> {
    let n = count_tokens(text, limits.max_tokens);
    if n > limits.max_tokens {
        return Err(refusal(
            ErrorCode::TokenLimit,
            format!(
                "the document has more than {} tokens, the limit (MAX_QUERY_TOKENS)",
                limits.max_tokens
            ),
        ));
    }
    Ok(())
}

fn aliases_in(set: &SelectionSet, n: &mut usize) {
    for item in &set.items {
        match &item.node {
            Selection::Field(f) => {
                *n += usize::from(f.node.alias.is_some());
                aliases_in(&f.node.selection_set.node, n);
            }
            Selection::InlineFragment(f) => aliases_in(&f.node.selection_set.node, n),
            Selection::FragmentSpread(_) => {}
        }
    }
}

fn introspects(set: &SelectionSet) -> bool {
    set.items.iter().any(|item| match &item.node {
        Selection::Field(f) => {
            matches!(f.node.name.node.as_str(), "__schema" | "__type")
                || introspects(&f.node.selection_set.node)
        }
        Selection::InlineFragment(f) => introspects(&f.node.selection_set.node),
        Selection::FragmentSpread(_) => false,
    })
}

/// Refuse introspection when it is switched off (async-graphql alone would answer `null`).
pub fn check_introspection(
    doc: &ExecutableDocument,
    limits: &QueryLimits,
) -> Result<(), ServerError> {
    if limits.introspection {
        return Ok(());
    }
    let sets = doc
        .operations
        .iter()
        .map(|(_, op)| &op.node.selection_set.node)
        .chain(doc.fragments.values().map(|f| &f.node.selection_set.node));
    for set in sets {
        if introspects(set) {
            return Err(refusal(
                ErrorCode::IntrospectionOff,
                "introspection (__schema, __type) is switched off here (INTROSPECTION=false)"
                    .into(),
            ));
        }
    }
    Ok(())
}

/// Refuse a document with more aliased fields than `limits` allow (every operation and
/// fragment counted once).
pub fn check_aliases(doc: &ExecutableDocument, limits: &QueryLimits) -> Result<(), ServerError> {
    let mut n = 0;
    for (_, op) in doc.operations.iter() {
        aliases_in(&op.node.selection_set.node, &mut n);
    }
    for f in doc.fragments.values() {
        aliases_in(&f.node.selection_set.node, &mut n);
    }
    if n > limits.max_aliases {
        return Err(refusal(
            ErrorCode::AliasLimit,
            format!(
                "the document has {n} aliased fields, above the limit of {} (MAX_QUERY_ALIASES)",
                limits.max_aliases
            ),
        ));
    }
    Ok(())
}

/// The number of items an argument asks for (a count, or a list's length).
fn count_of(value: &async_graphql::Value) -> Option<usize> {
    match value {
        async_graphql::Value::Number(n) => n.as_u64().map(|n| n as usize),
        async_graphql::Value::List(items) => Some(items.len()),
        _ => None,
    }
}

struct Cost<'a> {
    doc: &'a ExecutableDocument,
    variables: &'a Variables,
    defaults: &'a dyn Fn(&str) -> Option<async_graphql::Value>,
    /// Fragments being expanded (a cycle is invalid; it must not loop here before validation
    /// says so).
    open: Vec<&'a str>,
}

impl<'a> Cost<'a> {
    fn set(&mut self, set: &'a SelectionSet) -> usize {
        let mut total: usize = 0;
        for item in &set.items {
            let c = match &item.node {
                Selection::Field(f) => self.field(&f.node),
                Selection::InlineFragment(f) => self.set(&f.node.selection_set.node),
                Selection::FragmentSpread(s) => {
                    let name = s.node.fragment_name.node.as_str();
                    match self.doc.fragments.get(&s.node.fragment_name.node) {
                        Some(frag) if !self.open.contains(&name) => {
                            self.open.push(name);
                            let c = self.set(&frag.node.selection_set.node);
                            self.open.pop();
                            c
                        }
                        _ => 0,
                    }
                }
            };
            total = total.saturating_add(c);
        }
        total
    }

    fn field(&mut self, f: &'a async_graphql::parser::types::Field) -> usize {
        let children = &f.selection_set.node;
        let inner = self.set(children);
        let (variables, defaults) = (self.variables, self.defaults);
        let arg = |name: &str| {
            let (_, v) = f.arguments.iter().find(|(n, _)| n.node.as_str() == name)?;
            let value = v
                .node
                .clone()
                .into_const_with(|var: async_graphql::Name| {
                    variables
                        .get(&var)
                        .cloned()
                        .or_else(|| defaults(var.as_str()))
                        .ok_or(())
                })
                .ok()?;
            count_of(&value)
        };
        let selects = |name: &str| {
            children.items.iter().any(
                |i| matches!(&i.node, Selection::Field(c) if c.node.name.node.as_str() == name),
            )
        };
        let items = arg("first")
            .or_else(|| arg("last"))
            .or_else(|| {
                (f.name.node.as_str() == "nodes")
                    .then(|| arg("ids"))
                    .flatten()
            })
            .or_else(|| {
                (selects("nodes") || selects("edges")).then_some(super::paging::DEFAULT_PAGE_SIZE)
            })
            .unwrap_or(1);
        inner.saturating_mul(items.max(1)).saturating_add(1)
    }
}

/// The complexity of the costliest operation of `doc` (see the module documentation).
pub fn complexity(doc: &ExecutableDocument, variables: &Variables) -> usize {
    let mut worst = 0;
    for (_, op) in doc.operations.iter() {
        let defaults = |name: &str| {
            op.node
                .variable_definitions
                .iter()
                .find(|d| d.node.name.node.as_str() == name)
                .and_then(|d| d.node.default_value.as_ref().map(|v| v.node.clone()))
        };
        let mut cost = Cost {
            doc,
            variables,
            defaults: &defaults,
            open: Vec::new(),
        };
        worst = worst.max(cost.set(&op.node.selection_set.node));
    }
    worst
}

/// Refuse a document whose complexity is above what `limits` allow.
pub fn check_complexity(
    doc: &ExecutableDocument,
    variables: &Variables,
    limits: &QueryLimits,
) -> Result<(), ServerError> {
    let c = complexity(doc, variables);
    if c > limits.max_complexity {
        return Err(refusal(
            ErrorCode::ComplexityLimit,
            format!(
                "the query's complexity is {c}, above the limit of {} (MAX_QUERY_COMPLEXITY): \
                 ask for fewer items (`first`) or fewer fields",
                limits.max_complexity
            ),
        ));
    }
    Ok(())
}

/// The extension enforcing the limits on every document a schema runs.
pub struct Enforce(pub QueryLimits);

impl ExtensionFactory for Enforce {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(Enforcer(self.0))
    }
}

struct Enforcer(QueryLimits);

#[async_graphql::async_trait::async_trait]
impl Extension for Enforcer {
    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        check_tokens(query, &self.0)?;
        let doc = next.run(ctx, query, variables).await?;
        check_aliases(&doc, &self.0)?;
        check_introspection(&doc, &self.0)?;
        check_complexity(&doc, variables, &self.0)?;
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(q: &str, vars: serde_json::Value) -> usize {
        let doc = async_graphql::parser::parse_query(q).expect("parse");
        complexity(&doc, &Variables::from_json(vars))
    }

    #[test]
    fn lists_multiply_what_they_select() {
        assert_eq!(cost("{ a b }", serde_json::json!({})), 2);
        // 10 machines × (name + phase) + the field itself, inside a connection.
        assert_eq!(
            cost(
                "{ machines(first: 10) { nodes { name phase } } }",
                serde_json::json!({})
            ),
            (2 + 1) * 10 + 1
        );
        // Without `first`: the default page.
        assert_eq!(
            cost("{ machines { nodes { name } } }", serde_json::json!({})),
            2 * 50 + 1
        );
        // Nested pages multiply; variables and their defaults are resolved.
        assert_eq!(
            cost(
                "query($n: Int = 3, $m: Int) { clusters(first: $n) { nodes { machines(first: $m) { nodes { name } } } } }",
                serde_json::json!({"m": 4})
            ),
            (((1 + 1) * 4 + 1) + 1) * 3 + 1
        );
        assert_eq!(
            cost(
                "{ nodes(ids: [\"a\", \"b\"]) { id } }",
                serde_json::json!({})
            ),
            2 + 1
        );
        // Fragments count where they are spread; a cycle does not loop.
        assert_eq!(
            cost(
                "{ machines(first: 2) { ...F } } fragment F on X { name ...F }",
                serde_json::json!({})
            ),
            2 + 1
        );
    }

    #[test]
    fn tokens_are_counted_as_the_lexer_sees_them() {
        let max = 1000;
        assert_eq!(count_tokens("{ a }", max), 3);
        assert_eq!(
            count_tokens("query Q($x: Int = 1) { a(x: $x) { b } }", max),
            22
        );
        assert_eq!(
            count_tokens(
                "# a comment { } ( )\n{ a(s: \"x { y } z\", t: \"\"\"q\"\"\") }",
                max
            ),
            11
        );
        assert_eq!(count_tokens("{ ...F } fragment F on T { a }", max), 11);
        assert_eq!(count_tokens("  ,,, \n\t ", max), 0);
        // Stops counting past the limit.
        let big = "{ a } ".repeat(100_000);
        assert_eq!(count_tokens(&big, 10), 11);
    }
}
