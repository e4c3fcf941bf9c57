//! Query documents parsed once: the syntax tree of each query text a client sends, and the
//! operations and variables it has passed strict validation with.
//!
//! Clients send the same few documents over and over (a dashboard's page, a script's counts), and
//! async-graphql's parser (pest) was most of the time of a small query that is not answered from
//! the response cache: 62 % of executing the counts query, strict validation another 21 %. So,
//! as Apollo Server keeps parsed and validated documents, a known text is not parsed again (its
//! tree is copied, which is a few allocations), and a request whose exact operation and variables
//! passed strict validation before runs on the same schema built with validation that checks only
//! the limits (depth, complexity, fragment cycles). Validation is a function of the schema, the
//! document, the operation and the variables, so skipping it for a request it accepted before
//! changes no answer; a test compares every answer with the strictly validated one.
//!
//! Bounded in bytes like the part cache: two generations, the older dropped whole.

use std::sync::Arc;

use async_graphql::parser::types::{DocumentOperations, ExecutableDocument, OperationType};
use async_graphql::{Request, Response, Value};
use parking_lot::Mutex;

use super::AppSchema;
use super::generations::{Generations, Weighed};
use super::limits::{
    QueryLimits, check_aliases, check_complexity, check_introspection, check_tokens,
};
use super::parts::RequestKey;

/// Requests (operation, variables) remembered as validated, per document; older ones are
/// forgotten first.
const VALIDATED_PER_DOCUMENT: usize = 16;

/// Variables longer than this (as JSON) are validated every time rather than remembered.
const MAX_REMEMBERED_VARIABLES: usize = 1024;

/// A known document.
struct Known {
    doc: ExecutableDocument,
    only_queries: bool,
    /// The answer depends on who asks (`me`): it must not be shared between callers.
    per_caller: bool,
    /// (operation, variables as JSON) of requests that passed strict validation.
    validated: Mutex<Vec<(Option<String>, String)>>,
    bytes: usize,
}

/// True when a remembered (operation, variables) is the request's.
fn is_request((op, vars): &(Option<String>, String), key: &RequestKey) -> bool {
    op.as_deref() == key.operation() && vars == key.variables()
}

impl Known {
    fn validated(&self, key: &RequestKey) -> bool {
        self.validated.lock().iter().any(|v| is_request(v, key))
    }

    fn remember(&self, key: &RequestKey) {
        if key.variables().len() > MAX_REMEMBERED_VARIABLES {
            return;
        }
        let mut validated = self.validated.lock();
        if validated.iter().any(|v| is_request(v, key)) {
            return;
        }
        if validated.len() >= VALIDATED_PER_DOCUMENT {
            validated.remove(0);
        }
        validated.push((
            key.operation().map(str::to_string),
            key.variables().to_string(),
        ));
    }
}

/// Bytes a document of `text` is counted as: the text, its syntax tree (names, positions and
/// vectors come to about ten times the text; sixteen times is counted), what its validated
/// requests may hold, and the map entry.
fn size_of(text: &str) -> usize {
    text.len() * 17 + VALIDATED_PER_DOCUMENT * (MAX_REMEMBERED_VARIABLES + 64) + 256
}

impl Weighed for Known {
    fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The known documents and the schema that runs requests validated before.
pub struct QueryDocuments {
    fast: AppSchema,
    limits: QueryLimits,
    known: Generations<Arc<str>, Known>,
    hits: prometheus::IntCounter,
    misses: prometheus::IntCounter,
}

/// What [`Documents::prepare`] found out about a request.
pub struct Plan {
    known: Option<Arc<Known>>,
    validated: bool,
    only_queries: bool,
    per_caller: bool,
    refused: Option<async_graphql::ServerError>,
}

impl Plan {
    /// Every operation of the document is a query (false when it does not parse).
    pub fn only_queries(&self) -> bool {
        self.only_queries
    }

    /// Every operation is a query and its answer is the same for every caller: it may be
    /// cached and shared between concurrent identical requests.
    pub fn shareable(&self) -> bool {
        self.only_queries && !self.per_caller
    }

    /// The limit the request is over, if any: it must not run.
    pub fn refused(&self) -> Option<&async_graphql::ServerError> {
        self.refused.as_ref()
    }
}

/// The cost limits other than depth (which the schema checks), on a parsed document.
fn over_limits(
    doc: &ExecutableDocument,
    variables: &async_graphql::Variables,
    limits: &QueryLimits,
) -> Option<async_graphql::ServerError> {
    check_aliases(doc, limits)
        .and_then(|()| check_introspection(doc, limits))
        .and_then(|()| check_complexity(doc, variables, limits))
        .err()
}

/// True when every operation of `doc` is a query.
fn only_queries(doc: &ExecutableDocument) -> bool {
    match &doc.operations {
        DocumentOperations::Single(op) => op.node.ty == OperationType::Query,
        DocumentOperations::Multiple(ops) => {
            ops.values().all(|op| op.node.ty == OperationType::Query)
        }
    }
}

/// True when the document selects a field whose answer depends on the caller (`me`, a root
/// field; any field of that name counts, which is only ever more careful).
fn reads_caller(doc: &ExecutableDocument) -> bool {
    use async_graphql::parser::types::{Selection, SelectionSet};
    fn walk(set: &SelectionSet) -> bool {
        set.items.iter().any(|s| match &s.node {
            Selection::Field(f) => f.node.name.node == "me" || walk(&f.node.selection_set.node),
            Selection::InlineFragment(i) => walk(&i.node.selection_set.node),
            Selection::FragmentSpread(_) => false,
        })
    }
    let ops = match &doc.operations {
        DocumentOperations::Single(op) => walk(&op.node.selection_set.node),
        DocumentOperations::Multiple(ops) => {
            ops.values().any(|op| walk(&op.node.selection_set.node))
        }
    };
    ops || doc
        .fragments
        .values()
        .any(|f| walk(&f.node.selection_set.node))
}

/// True when a response ran: it passed validation (a request refused before running has no
/// data and only errors without a path).
fn ran(response: &Response) -> bool {
    response.data != Value::Null
        || response.errors.is_empty()
        || response.errors.iter().any(|e| !e.path.is_empty())
}

impl QueryDocuments {
    /// QueryDocuments of at most `max_bytes` in all (0: every request is parsed and validated), run
    /// on `fast` (the schema built with [`async_graphql::ValidationMode::Fast`]) once validated.
    pub fn new(
        fast: AppSchema,
        limits: QueryLimits,
        max_bytes: usize,
        hits: prometheus::IntCounter,
        misses: prometheus::IntCounter,
    ) -> Self {
        QueryDocuments {
            fast,
            limits,
            known: Generations::new(max_bytes),
            hits,
            misses,
        }
    }

    /// True when `text` is a known document whose operations are all queries (known without
    /// parsing it).
    pub fn known_queries(&self, text: &str) -> bool {
        self.known.find(text).is_some_and(|k| k.only_queries)
    }

    /// True when `text` is a known document of queries whose answers are the same for every
    /// caller (known without parsing it).
    pub fn known_shareable(&self, text: &str) -> bool {
        self.known
            .find(text)
            .is_some_and(|k| k.only_queries && !k.per_caller)
    }

    /// Give `request` its parsed document (a copy of the known one, or parsed now and kept), check
    /// the cost limits (tokens before parsing, then aliases and complexity) and say how it runs.
    /// `key` identifies the request (None: it is validated strictly). A document that does not
    /// parse is left to the schema, which answers with the parser's errors.
    pub fn prepare(&self, request: &mut Request, key: Option<&RequestKey>) -> Plan {
        let unknown = Plan {
            known: None,
            validated: false,
            only_queries: false,
            per_caller: false,
            refused: None,
        };
        if let Err(e) = check_tokens(&request.query, &self.limits) {
            return Plan {
                refused: Some(e),
                ..unknown
            };
        }
        if let Some(known) = self.known.find(request.query.as_str()) {
            self.hits.inc();
            if let Some(e) = over_limits(&known.doc, &request.variables, &self.limits) {
                return Plan {
                    refused: Some(e),
                    ..unknown
                };
            }
            request.set_parsed_query(known.doc.clone());
            return Plan {
                validated: key.is_some_and(|k| known.validated(k)),
                only_queries: known.only_queries,
                per_caller: known.per_caller,
                known: Some(known),
                refused: None,
            };
        }
        self.misses.inc();
        let Ok(doc) = async_graphql::parser::parse_query(&request.query) else {
            return unknown;
        };
        if let Some(e) = over_limits(&doc, &request.variables, &self.limits) {
            return Plan {
                refused: Some(e),
                ..unknown
            };
        }
        let only = only_queries(&doc);
        let per_caller = reads_caller(&doc);
        let known = (!self.known.is_off()).then(|| {
            let known = Arc::new(Known {
                doc: doc.clone(),
                only_queries: only,
                per_caller,
                validated: Mutex::default(),
                bytes: size_of(&request.query),
            });
            self.known
                .keep(Arc::from(request.query.as_str()), known.clone());
            known
        });
        request.set_parsed_query(doc);
        Plan {
            known,
            validated: false,
            only_queries: only,
            per_caller,
            refused: None,
        }
    }

    /// Run a prepared request: on the fast schema when it was validated before, else on `strict`
    /// (and remembered as validated when it passes).
    pub async fn execute(
        &self,
        strict: &AppSchema,
        plan: &Plan,
        key: Option<&RequestKey>,
        request: Request,
    ) -> Response {
        if let Some(e) = &plan.refused {
            return Response::from_errors(vec![e.clone()]);
        }
        if plan.validated {
            return self.fast.execute(request).await;
        }
        let mut response = strict.execute(request).await;
        if let (Some(known), Some(key)) = (&plan.known, key)
            && ran(&response)
        {
            known.remember(key);
        }
        super::limits::name_depth_errors(&mut response, self.limits.max_depth);
        response
    }

    /// Distinct documents held now.
    pub fn len(&self) -> usize {
        self.known.len()
    }

    /// True when no document is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests;
