//! Every error code a client can receive: in GraphQL errors (`extensions.code`), in the JSON
//! errors of the REST and admin routes (`{"error", "code"}`), and in a WebSocket `error`
//! message. One enum, so a code is written once: its wire name, the HTTP status it has when it
//! refuses a whole request, and what it means (the README's table of codes is tested against
//! [`ErrorCode::table`]).

use async_graphql::ErrorExtensions;
use axum::http::StatusCode;

macro_rules! codes {
    ($($variant:ident = $wire:literal, $status:ident, $meaning:literal;)*) => {
        /// A client-facing error code. `as_str` is what clients and metric labels see.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $(#[doc = $meaning] $variant,)*
        }

        impl ErrorCode {
            /// Every code, in the README's order.
            pub const ALL: &[ErrorCode] = &[$(ErrorCode::$variant),*];

            /// The code as clients see it (`extensions.code`, `code`), and as a metric label.
            pub const fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $wire,)* }
            }

            /// The HTTP status of a response this code refuses as a whole (a GraphQL error
            /// inside a 200 answer keeps the 200).
            pub const fn status(self) -> StatusCode {
                match self { $(ErrorCode::$variant => StatusCode::$status,)* }
            }

            /// What the code means, in one sentence.
            pub const fn meaning(self) -> &'static str {
                match self { $(ErrorCode::$variant => $meaning,)* }
            }
        }
    };
}

codes! {
    // Who is asking.
    Unauthenticated = "UNAUTHENTICATED", UNAUTHORIZED, "No credentials, or credentials the server does not accept.";
    Forbidden = "FORBIDDEN", FORBIDDEN, "The caller's role does not allow this (or its key was revoked while a stream was open).";
    AccessChanged = "ACCESS_CHANGED", CONFLICT, "What the caller may see or do changed while its stream was open (a RoleBinding, a group, a key's role or namespaces): the stream ends, and a new one is given what the caller may see now.";
    AuthenticationUnavailable = "AUTHENTICATION_UNAVAILABLE", SERVICE_UNAVAILABLE, "The Kubernetes token review could not be reached; try again.";
    RateLimited = "RATE_LIMITED", TOO_MANY_REQUESTS, "The caller's requests per second are over its role's limit (`Retry-After` says when to retry).";
    // The request as HTTP.
    BadRequest = "BAD_REQUEST", BAD_REQUEST, "The request is not a GraphQL request (no query, bad JSON, bad variables), or an admin request is malformed.";
    BadContentType = "BAD_CONTENT_TYPE", UNSUPPORTED_MEDIA_TYPE, "A POST whose Content-Type is not JSON.";
    NotAcceptable = "NOT_ACCEPTABLE", NOT_ACCEPTABLE, "The Accept header names no media type the server answers in.";
    MethodNotAllowed = "METHOD_NOT_ALLOWED", METHOD_NOT_ALLOWED, "A mutation sent with GET, or a method the route does not take.";
    BodyLimit = "BODY_LIMIT", PAYLOAD_TOO_LARGE, "The request body is larger than the server accepts (the limit is named).";
    Timeout = "TIMEOUT", GATEWAY_TIMEOUT, "The operation ran longer than `OPERATION_TIMEOUT_SECONDS` (`API_TIMEOUT`).";
    ConnectionLimit = "CONNECTION_LIMIT", TOO_MANY_REQUESTS, "Too many WebSocket or SSE streams, in total or from this client (the limit is named).";
    OperationLimit = "OPERATION_LIMIT", TOO_MANY_REQUESTS, "Too many subscriptions on one WebSocket (`STREAM_MAX_OPERATIONS_PER_SOCKET`).";
    GraphiqlOff = "GRAPHIQL_OFF", NOT_FOUND, "GraphiQL is turned off (`GRAPHIQL=false`).";
    MetricsOff = "METRICS_OFF", NOT_FOUND, "`/metrics` is turned off (`METRICS_ENABLED=false`).";
    NotFound = "NOT_FOUND", NOT_FOUND, "No object (or route entry) with that id, name or uid.";
    InvalidUuid = "INVALID_UUID", BAD_REQUEST, "A REST route's `{uid}` is not a UUID.";
    Internal = "INTERNAL", INTERNAL_SERVER_ERROR, "The server failed while answering (logged with the request id).";
    // The query's shape.
    DepthLimit = "DEPTH_LIMIT", BAD_REQUEST, "The query nests deeper than `MAX_QUERY_DEPTH`.";
    TokenLimit = "TOKEN_LIMIT", BAD_REQUEST, "The document has more tokens than `MAX_QUERY_TOKENS`.";
    AliasLimit = "ALIAS_LIMIT", BAD_REQUEST, "The query has more aliases than `MAX_QUERY_ALIASES`.";
    ComplexityLimit = "COMPLEXITY_LIMIT", BAD_REQUEST, "The query's estimated cost is over `MAX_QUERY_COMPLEXITY`.";
    IntrospectionOff = "INTROSPECTION_OFF", BAD_REQUEST, "Introspection is turned off (`INTROSPECTION=false`).";
    // Arguments.
    Ambiguous = "AMBIGUOUS", BAD_REQUEST, "A look-up by name matches objects in several datacenters; name one (`datacenter`, listed in `extensions.datacenters`).";
    BadId = "BAD_ID", BAD_REQUEST, "An `id` that is not one of this server's global ids (or of the wrong kind).";
    TooManyIds = "TOO_MANY_IDS", BAD_REQUEST, "`nodes(ids:)` with more ids than `MAX_PAGE_SIZE`.";
    MissingArgument = "MISSING_ARGUMENT", BAD_REQUEST, "Neither of two alternative arguments was given (e.g. `id` or `namespace` + `name`).";
    BadPageSize = "BAD_PAGE_SIZE", BAD_REQUEST, "A negative `first`/`last`, or both at once.";
    PageSizeLimit = "PAGE_SIZE_LIMIT", BAD_REQUEST, "`first`/`last` over `MAX_PAGE_SIZE`.";
    BadCursor = "BAD_CURSOR", BAD_REQUEST, "An `after`/`before` that is not a cursor of this list.";
    BadLabelSelector = "BAD_LABEL_SELECTOR", BAD_REQUEST, "A `labelSelector` that does not parse (its reason is given).";
    BadTime = "BAD_TIME", BAD_REQUEST, "A time that is not RFC 3339.";
    BadDays = "BAD_DAYS", BAD_REQUEST, "A number of days outside what history keeps.";
    BadDebounce = "BAD_DEBOUNCE", BAD_REQUEST, "A subscription's `debounceMs` outside its range.";
    BadKind = "BAD_KIND", BAD_REQUEST, "A kind name the server does not know.";
    BadLevel = "BAD_LEVEL", BAD_REQUEST, "`/admin/log-level` with a level that is not a log filter.";
    NoLogger = "NO_LOGGER", CONFLICT, "The log level cannot be changed: this process did not install the logger.";
    // Changes (mutations).
    ReadOnly = "READ_ONLY", FORBIDDEN, "Mutations are turned off (`MUTATIONS=false`), or the source cannot write.";
    Invalid = "INVALID", UNPROCESSABLE_ENTITY, "The change breaks the CRD's schema (field path and reason given).";
    AlreadyExists = "ALREADY_EXISTS", CONFLICT, "An object with that namespace and name exists.";
    Conflict = "CONFLICT", CONFLICT, "The object changed since it was read, or another manager owns the field.";
    Capacity = "CAPACITY", UNPROCESSABLE_ENTITY, "The change does not fit the hosts (or leaves fewer than `MIN_HOSTS_THAT_CAN_FAIL`).";
    RefusedByCluster = "REFUSED_BY_CLUSTER", BAD_GATEWAY, "The Kubernetes API refused the write (its message is given).";
    Unavailable = "UNAVAILABLE", SERVICE_UNAVAILABLE, "The Kubernetes API could not be reached for the write.";
    NotYetVisible = "NOT_YET_VISIBLE", GATEWAY_TIMEOUT, "The write was accepted but not seen in the graph within `CHANGE_WAIT_SECONDS`.";
    DatacenterUnavailable = "DATACENTER_UNAVAILABLE", SERVICE_UNAVAILABLE, "A datacenter is stale or unreachable: the answer holds its objects as last seen (`extensions.datacenter`, `state`, `ageSeconds`); the others are current.";
    ApplicationsOff = "APPLICATIONS_OFF", NOT_FOUND, "The application inventory is off on this server (`APPLICATIONS=true` turns it on).";
    // History.
    HistoryTrimmed = "HISTORY_TRIMMED", NOT_FOUND, "A moment (`at`, `changes`) before the oldest one the history keeps (`extensions.oldest` names it; `HISTORY_MAX_BYTES`, `HISTORY_RETENTION_DAYS`).";
    DatabaseUnavailable = "DATABASE_UNAVAILABLE", SERVICE_UNAVAILABLE, "The database is away, and history (or keeping the inventory's pause) needs it; the rest of the API is unaffected.";
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl From<ErrorCode> for async_graphql::Value {
    fn from(code: ErrorCode) -> Self {
        async_graphql::Value::from(code.as_str())
    }
}

impl ErrorCode {
    /// A GraphQL error with this code in `extensions.code`.
    pub fn graphql(self, message: impl Into<String>) -> async_graphql::Error {
        async_graphql::Error::new(message).extend_with(move |_, e| e.set("code", self))
    }

    /// The README's table of codes (Markdown), as the enum has it.
    pub fn table() -> String {
        let mut out = String::from("| code | HTTP status | meaning |\n|---|---|---|\n");
        for c in Self::ALL {
            out.push_str(&format!(
                "| `{}` | {} | {} |\n",
                c.as_str(),
                c.status().as_u16(),
                c.meaning()
            ));
        }
        out
    }
}

/// The message of an operation that ran past the operation limit.
pub fn timeout_message(limit: std::time::Duration) -> String {
    format!(
        "the operation ran longer than the limit of {} s (OPERATION_TIMEOUT_SECONDS, API_TIMEOUT) and was stopped",
        limit.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    #[test]
    fn wire_names_are_unique_and_shouting_snake_case() {
        let mut seen = std::collections::BTreeSet::new();
        for c in ErrorCode::ALL {
            assert!(seen.insert(c.as_str()), "{} twice", c.as_str());
            assert!(
                c.as_str()
                    .chars()
                    .all(|ch| ch.is_ascii_uppercase() || ch == '_'),
                "{}",
                c.as_str()
            );
            assert!(c.status().is_client_error() || c.status().is_server_error());
        }
    }

    /// A code is written once, here: no other source file spells one as a string (tests and
    /// comments aside), so a new code cannot bypass the enum and the README's table.
    #[test]
    fn no_code_is_written_as_a_literal_elsewhere() {
        fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).expect("src").flatten() {
                let p = e.path();
                if p.is_dir() {
                    files(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut all = Vec::new();
        files(&src, &mut all);
        let mut found = Vec::new();
        for path in all {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if matches!(name, "error.rs" | "tests.rs" | "generated.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read");
            let code = text
                .split("#[cfg(test)]\nmod tests")
                .next()
                .unwrap_or_default();
            for (n, line) in code.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for c in ErrorCode::ALL {
                    if line.contains(&format!("\"{}\"", c.as_str())) {
                        found.push(format!("{}:{}: {}", path.display(), n + 1, c.as_str()));
                    }
                }
            }
        }
        assert!(found.is_empty(), "use ErrorCode instead: {found:#?}");
    }

    /// The README lists every code the server sends, with the status the enum gives it.
    #[test]
    fn the_readme_table_is_the_enum() {
        let readme = include_str!("../../README.md");
        let table = ErrorCode::table();
        assert!(
            readme.contains(&table),
            "README.md's table of error codes differs from ErrorCode; it should read:\n{table}"
        );
    }
}
