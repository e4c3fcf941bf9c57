//! GraphQL over HTTP (the GraphQL-over-HTTP specification): reading a request from a POST body or
//! GET parameters, choosing the response's media type from `Accept`, and the status codes each
//! media type calls for.
//!
//! - `application/graphql-response+json` (asked for explicitly): a request that fails before it
//!   runs (unparsable document, validation, variable coercion, a limit) is answered 400 without
//!   a `data` entry; a request that ran is answered 200.
//! - `application/json` (asked for, `*/*`, or no `Accept` at all): 200 for every well-formed
//!   request, with the same body.
//! - A POST without `Content-Type: application/json` is refused with 415, a body that is not a
//!   GraphQL request (not JSON, no `query`, wrong parameter types) with 400, a mutation over GET
//!   with 405.

use crate::error::ErrorCode;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The media type a GraphQL answer is sent as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Media {
    /// `application/json`: 200 for every well-formed request.
    Json,
    /// `application/graphql-response+json`: 4xx for requests that fail before they run.
    GraphqlResponse,
}

impl Media {
    /// The `Content-Type` value.
    pub fn content_type(self) -> &'static str {
        match self {
            Media::Json => "application/json; charset=utf-8",
            Media::GraphqlResponse => "application/graphql-response+json; charset=utf-8",
        }
    }
}

/// The media type to answer with, from `Accept` (by quality, then order; `*/*`, `application/*`
/// and a missing header mean `application/json`). None when the client accepts neither.
pub fn negotiate(headers: &HeaderMap) -> Option<Media> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Some(Media::Json);
    };
    let mut best: Option<(f32, Media)> = None;
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let ty = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        let media = match ty.as_str() {
            "application/graphql-response+json" => Media::GraphqlResponse,
            "application/json" | "application/*" | "*/*" => Media::Json,
            _ => continue,
        };
        if q > 0.0 && best.is_none_or(|(bq, _)| q > bq) {
            best = Some((q, media));
        }
    }
    best.map(|(_, m)| m)
        .or_else(|| accept.trim().is_empty().then_some(Media::Json))
}

/// A refusal before anything runs: answered as a GraphQL error body (`errors` only).
#[derive(Debug)]
pub struct Rejected {
    media: Media,
    code: ErrorCode,
    message: String,
}

impl IntoResponse for Rejected {
    fn into_response(self) -> Response {
        let body =
            json!({"errors": [{"message": self.message, "extensions": {"code": self.code}}]});
        (
            self.code.status(),
            [(header::CONTENT_TYPE, self.media.content_type())],
            body.to_string(),
        )
            .into_response()
    }
}

/// A refusal with this code (and its status) and message.
pub fn refuse(media: Media, code: ErrorCode, message: impl Into<String>) -> Rejected {
    Rejected {
        media,
        code,
        message: message.into(),
    }
}

/// The client accepts no media type a GraphQL answer comes in.
pub fn not_acceptable() -> Response {
    refuse(
        Media::Json,
        ErrorCode::NotAcceptable,
        "Accept must allow application/graphql-response+json or application/json",
    )
    .into_response()
}

/// True when the request's `Content-Type` is `application/json` (with any parameters).
pub fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// Read a POST body: `Content-Type: application/json` and a JSON object with a string `query`
/// and optional `operationName` (string), `variables` and `extensions` (maps); null for the
/// optional ones is allowed.
pub fn parse_post(
    headers: &HeaderMap,
    body: &[u8],
    media: Media,
) -> Result<async_graphql::Request, Rejected> {
    if !is_json(headers) {
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let said = if content_type.is_empty() {
            "no Content-Type".to_string()
        } else {
            format!("Content-Type {content_type}")
        };
        return Err(refuse(
            media,
            ErrorCode::BadContentType,
            format!("a GraphQL POST must be Content-Type: application/json, not {said}"),
        ));
    }
    if body.is_empty() {
        return Err(refuse(
            media,
            ErrorCode::BadRequest,
            "the request body is empty: send {\"query\": \"…\"}",
        ));
    }
    // The common request (an object with a query string and maps or nulls beside it) is read
    // straight into the request; anything else is read as JSON first, for an error that says
    // what is wrong (a list, a query that is not a string, a duplicate key, ...). The JSON
    // value in between cost a tenth of a cached request.
    if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
        && let Ok(request) = serde_json::from_slice::<async_graphql::Request>(body)
        && !request.query.is_empty()
    {
        return Ok(request);
    }
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        refuse(
            media,
            ErrorCode::BadRequest,
            format!("the request body is not JSON: {e}"),
        )
    })?;
    from_params(value, media)
}

/// Read GET parameters (`query`, `operationName`, `variables` and `extensions` as JSON text).
pub fn parse_get(query_string: &str, media: Media) -> Result<async_graphql::Request, Rejected> {
    let mut request = async_graphql::http::parse_query_string(query_string).map_err(|e| {
        refuse(
            media,
            ErrorCode::BadRequest,
            format!("not a GraphQL GET request: {e}"),
        )
    })?;
    if request.operation_name.as_deref() == Some("") {
        request.operation_name = None;
    }
    Ok(request)
}

/// The request from its parameters, with the types the specification requires.
fn from_params(value: serde_json::Value, media: Media) -> Result<async_graphql::Request, Rejected> {
    let bad = |message: String| refuse(media, ErrorCode::BadRequest, message);
    let serde_json::Value::Object(map) = value else {
        return Err(bad(
            "a GraphQL request is a JSON object (batches are not accepted)".into(),
        ));
    };
    match map.get("query") {
        Some(serde_json::Value::String(_)) => {}
        Some(other) => {
            return Err(bad(format!(
                "the query parameter must be a string, not {}",
                kind_of(other)
            )));
        }
        None => return Err(bad("the query parameter is missing".into())),
    }
    for (name, want) in [
        ("operationName", "a string"),
        ("variables", "a map"),
        ("extensions", "a map"),
    ] {
        let ok = match map.get(name) {
            None | Some(serde_json::Value::Null) => true,
            Some(serde_json::Value::String(_)) => name == "operationName",
            Some(serde_json::Value::Object(_)) => name != "operationName",
            Some(_) => false,
        };
        if !ok {
            return Err(bad(format!(
                "the {name} parameter must be {want} or null, not {}",
                kind_of(&map[name])
            )));
        }
    }
    serde_json::from_value(serde_json::Value::Object(map))
        .map_err(|e| bad(format!("not a GraphQL request: {e}")))
}

fn kind_of(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The status and body of an executed (or refused) request in `media`. `rejected`: it failed
/// before it ran, and the body carries no `data`.
pub fn answer(media: Media, body: bytes::Bytes, rejected: bool) -> Response {
    let status = if rejected && media == Media::GraphqlResponse {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    (status, [(header::CONTENT_TYPE, media.content_type())], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, v.parse().expect("header"));
        h
    }

    #[test]
    fn accept_picks_the_media_type() {
        assert_eq!(negotiate(&HeaderMap::new()), Some(Media::Json));
        assert_eq!(negotiate(&accept("*/*")), Some(Media::Json));
        assert_eq!(negotiate(&accept("application/json")), Some(Media::Json));
        assert_eq!(
            negotiate(&accept("application/graphql-response+json")),
            Some(Media::GraphqlResponse)
        );
        assert_eq!(
            negotiate(&accept(
                "application/graphql-response+json, application/json;q=0.9"
            )),
            Some(Media::GraphqlResponse)
        );
        assert_eq!(
            negotiate(&accept(
                "application/graphql-response+json;q=0.5, application/json"
            )),
            Some(Media::Json)
        );
        assert_eq!(negotiate(&accept("text/html")), None);
    }

    #[test]
    fn get_parameters_are_decoded() {
        let r = parse_get(
            "query=%7B%20a%20%7D&variables=%7B%22x%22%3A1%7D&operationName=",
            Media::Json,
        )
        .map_err(|_| "refused")
        .expect("request");
        assert_eq!(r.query, "{ a }");
        assert_eq!(r.variables.to_string(), "{x: 1}");
        assert!(parse_get("variables=nope", Media::Json).is_err());
    }
}
