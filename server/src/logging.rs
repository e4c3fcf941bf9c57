//! The log: one JSON object per line in the old aggregator's documented shape (`timestamp`,
//! `level`, `component`, `requestId`, `message` and the event's own fields) or human-readable
//! text, at a level that can be changed while the server runs.
//!
//! tracing-subscriber's own JSON format nests fields and span data and writes levels in upper
//! case; the documented shape is flat and lower case, hence this formatter.
//!
//! A request's context (its id, method and path) is a task-local value of the task serving it,
//! not a tracing span, and the request's own line ([`access`]) is formatted here directly rather
//! than dispatched through tracing: the span and the dispatch were a sixth of the time of a
//! cached answer. Every line logged while a request is served carries its context.

mod json;
mod output;

use output::{OUTPUT, Output};

use std::fmt;
use std::sync::OnceLock;

use axum::http::{HeaderValue, Method, Uri};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry, reload};

type Handle = reload::Handle<EnvFilter, Registry>;

/// How lines are written.
#[derive(Clone, Copy)]
enum Format {
    /// One JSON object per line, in the documented shape.
    Json,
    /// Human-readable text (colours on a terminal).
    Text { ansi: bool },
}

/// The format [`init`] chose (JSON until then).
static FORMAT: OnceLock<Format> = OnceLock::new();

fn format() -> Format {
    FORMAT.get().copied().unwrap_or(Format::Json)
}

/// The request a task is serving: what every line logged while serving it carries.
#[derive(Clone, Debug)]
pub struct RequestContext {
    /// `X-Request-Id` (the caller's, or made for it).
    pub id: HeaderValue,
    /// The method.
    pub method: Method,
    /// The URI (its path is logged).
    pub uri: Uri,
}

impl RequestContext {
    /// The same context in allocations of its own (see [`current_request`]).
    fn detached(&self) -> RequestContext {
        let own =
            |v: &HeaderValue| HeaderValue::from_bytes(v.as_bytes()).unwrap_or_else(|_| v.clone());
        let uri = self.uri.path_and_query().map_or("/", |p| p.as_str());
        RequestContext {
            id: own(&self.id),
            method: self.method.clone(),
            uri: Uri::try_from(uri).unwrap_or_else(|_| self.uri.clone()),
        }
    }

    fn id(&self) -> &str {
        self.id.to_str().unwrap_or_default()
    }

    /// `requestId`, `method` and `path` as JSON text.
    fn fields(&self) -> [(&'static str, String); 3] {
        [
            ("requestId", JsonStr(self.id()).to_string()),
            ("method", JsonStr(self.method.as_str()).to_string()),
            ("path", JsonStr(self.uri.path()).to_string()),
        ]
    }
}

tokio::task_local! {
    static REQUEST: RequestContext;
}

/// Run `serve` as the task serving `request`: lines it logs carry the request's context. Gives
/// the context back with the output.
pub async fn in_request<F: Future>(
    request: RequestContext,
    serve: F,
) -> (F::Output, Option<RequestContext>) {
    let mut scoped = std::pin::pin!(REQUEST.scope(request, serve));
    let output = scoped.as_mut().await;
    (output, scoped.take_value())
}

/// Run `serve` (a task of its own, e.g. a WebSocket's) as part of `request`. (tokio's scope
/// alone: the async fn above keeps its arguments beside the scope that holds them, twice the
/// context for the life of a socket.)
pub fn scoped<F: Future>(request: RequestContext, serve: F) -> impl Future<Output = F::Output> {
    REQUEST.scope(request, serve)
}

/// The request the current task is serving, if any, to carry into a task of its own: with its
/// own copy of the id and the URI. hyper's header values and URI are slices of the connection's
/// read buffer, so a WebSocket's task holding the request's would keep that buffer (8 KiB) for
/// the socket's life after the connection gave the socket up.
pub fn current_request() -> Option<RequestContext> {
    REQUEST.try_with(RequestContext::detached).ok()
}

/// A request's own line: what was asked, the answer's status, how long it took.
pub struct AccessLine<'a> {
    /// The request.
    pub request: &'a RequestContext,
    /// The answer's status code.
    pub status: u16,
    /// From the request's arrival to its answer.
    pub took: std::time::Duration,
    /// `User-Agent` (at most 256 characters are logged).
    pub user_agent: &'a str,
}

/// Log a request's line at `info` (the caller checks the level: `tracing::enabled!`). Formatted
/// straight into the log's buffer, in the same shape as every other line.
pub fn access(line: &AccessLine<'_>) {
    let Some(out) = OUTPUT.get() else {
        return;
    };
    thread_local! {
        static BUF: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
    }
    BUF.with_borrow_mut(|buf| {
        buf.clear();
        if write_access(buf, line).is_ok() {
            out.append(buf.as_bytes());
        }
    });
}

fn write_access(out: &mut String, line: &AccessLine<'_>) -> fmt::Result {
    let r = line.request;
    let (method, path) = (r.method.as_str(), r.uri.path());
    let user_agent = match line.user_agent.char_indices().nth(256) {
        Some((end, _)) => &line.user_agent[..end],
        None => line.user_agent,
    };
    let micros = line.took.as_micros();
    let status = line.status;
    match format() {
        // Pushed, not formatted: this line is written for every request (see `json`).
        Format::Json => {
            out.push_str("{\"timestamp\":\"");
            json::push_now(out);
            out.push_str("\",\"level\":\"info\",\"component\":\"http\",\"requestId\":");
            json::push_str(out, r.id());
            for (name, value) in [(",\"method\":", method), (",\"path\":", path)] {
                out.push_str(name);
                json::push_str(out, value);
            }
            out.push_str(",\"statusCode\":");
            json::push_uint(out, u64::from(status), 0);
            out.push_str(",\"duration\":");
            json::push_uint(out, u64::try_from(micros / 1000).unwrap_or(u64::MAX), 0);
            out.push('.');
            json::push_uint(out, u64::try_from(micros % 1000).unwrap_or(0), 3);
            out.push_str(",\"userAgent\":");
            json::push_str(out, user_agent);
            // The message: "{method} {path} {status}", escaped as one string.
            out.push_str(",\"message\":\"");
            json::push_escaped(out, method);
            out.push(' ');
            json::push_escaped(out, path);
            out.push(' ');
            json::push_uint(out, u64::from(status), 0);
            out.push_str("\"}\n");
            Ok(())
        }
        Format::Text { ansi } => {
            let message = format!("{method} {path} {status}");
            let mut fields: Vec<(&str, &str)> = Vec::with_capacity(7);
            let request = r.fields();
            fields.extend(request.iter().map(|(n, v)| (*n, v.as_str())));
            let (status, duration, user_agent) = (
                status.to_string(),
                format!("{}.{:03}", micros / 1000, micros % 1000),
                JsonStr(user_agent).to_string(),
            );
            fields.push(("statusCode", &status));
            fields.push(("duration", &duration));
            fields.push(("userAgent", &user_agent));
            write_text(out, ansi, tracing::Level::INFO, "http", &message, &fields)
        }
    }
}

/// The running filter and its text (set once, by [`init`]).
static FILTER: OnceLock<(Handle, parking_lot::Mutex<String>)> = OnceLock::new();

/// Install the global logger at `level` (a level such as `debug`, or a filter such as
/// `info,vitistack::source=debug`); an unreadable level falls back to `info` and says so.
pub fn init(level: &str, json: bool) {
    let (filter, used, refused) = match EnvFilter::try_new(level) {
        Ok(f) => (f, level.to_string(), None),
        Err(e) => (EnvFilter::new("info"), "info".to_string(), Some(e)),
    };
    let (filter, handle) = reload::Layer::new(filter);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let out = Output::start();
    let _ = FORMAT.set(if json {
        Format::Json
    } else {
        Format::Text { ansi }
    });
    let output = tracing_subscriber::fmt::layer()
        .event_format(Line)
        .fmt_fields(NoText)
        .with_ansi(false)
        .with_writer(out);
    let installed = tracing_subscriber::registry()
        .with(filter)
        .with(SpanFields)
        .with(output)
        .try_init()
        .is_ok();
    if installed {
        let _ = FILTER.set((handle, parking_lot::Mutex::new(used)));
    }
    if let Some(e) = refused {
        tracing::warn!(level, error = %e, "LOG_LEVEL not understood; logging at info");
    }
}

/// Write every line logged so far before returning (call it before the process exits).
pub fn flush() {
    if let Some(out) = OUTPUT.get() {
        out.flush();
    }
}

/// The level (filter) in force now.
pub fn level() -> Option<String> {
    FILTER.get().map(|(_, text)| text.lock().clone())
}

/// Why the log level was not changed.
#[derive(Debug, thiserror::Error)]
pub enum LevelError {
    #[error("the level must be 1 to 512 characters")]
    Length,
    #[error("not a log level or filter: {0}")]
    Filter(String),
    /// This process did not install the logger (the server runs inside another program).
    #[error("no logger is installed in this process")]
    NoLogger,
    #[error("{0}")]
    Reload(String),
}

/// Change the level while running: a level (`error`, `warn`, `info`, `debug`, `trace`) or a
/// filter directive list. Refused, with the reason, when it cannot be read or no logger runs.
pub fn set_level(level: &str) -> Result<(), LevelError> {
    let level = level.trim();
    if level.is_empty() || level.len() > 512 {
        return Err(LevelError::Length);
    }
    let filter = EnvFilter::try_new(level).map_err(|e| LevelError::Filter(e.to_string()))?;
    let (handle, text) = FILTER.get().ok_or(LevelError::NoLogger)?;
    handle
        .reload(filter)
        .map_err(|e| LevelError::Reload(e.to_string()))?;
    *text.lock() = level.to_string();
    tracing::info!(level, "log level changed");
    Ok(())
}

/// The fields a span was opened with, kept as JSON for the lines logged inside it (a request's
/// `requestId`, `method`, `path`).
struct SpanFields;

struct Recorded(Fields);

impl<S> Layer<S> for SpanFields
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Recorded(fields));
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: Context<'_, S>,
    ) {
        if let Some(span) = ctx.span(id)
            && let Some(recorded) = span.extensions_mut().get_mut::<Recorded>()
        {
            values.record(&mut recorded.0);
        }
    }
}

/// An event's or span's fields: each name with its value as JSON text, in the order recorded (a
/// field recorded again keeps its place and takes the new value). A line is a handful of fields:
/// a list is cheaper than a map, and the text is written out as it is.
#[derive(Default)]
struct Fields(Vec<(&'static str, String)>);

impl Fields {
    fn set(&mut self, name: &'static str, json: String) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => *v = json,
            None => self.0.push((name, json)),
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        let mut json = String::with_capacity(value.len() + 2);
        let _ = write_json_str(&mut json, format_args!("{value}"));
        self.set(field.name(), json);
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field.name(), value.to_string());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field.name(), value.to_string());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        // JSON has no NaN or infinity.
        let json = if value.is_finite() {
            value.to_string()
        } else {
            "null".into()
        };
        self.set(field.name(), json);
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field.name(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // Escaped as it is formatted: no copy of the text first (the message is one of these).
        let mut json = String::with_capacity(48);
        let _ = write_json_str(&mut json, format_args!("{value:?}"));
        self.set(field.name(), json);
    }
}

/// The fields of a span as text, for the fmt layer's own span record: the JSON line reads
/// [`Recorded`] instead, so nothing is formatted for it (formatting them cost each request's
/// span a second pass over its fields).
struct NoText;

impl<'w> FormatFields<'w> for NoText {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        _: Writer<'w>,
        _: R,
    ) -> fmt::Result {
        Ok(())
    }
}

/// A string as a JSON string literal (quoted, escaped).
struct JsonStr<'a>(&'a str);

impl fmt::Display for JsonStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_json_str(f, format_args!("{}", self.0))
    }
}

/// Write `text` to `out` as a JSON string literal, escaping it piece by piece as it is formatted.
fn write_json_str(out: &mut impl fmt::Write, text: fmt::Arguments<'_>) -> fmt::Result {
    out.write_char('"')?;
    fmt::write(&mut Escape(out), text)?;
    out.write_char('"')
}

/// Writes what it is given escaped for the inside of a JSON string.
struct Escape<'a, W: fmt::Write>(&'a mut W);

impl<W: fmt::Write> fmt::Write for Escape<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        json::for_each_escaped(s, |piece| self.0.write_str(piece))
    }
}

/// The keys a request's line documents, in their documented order (after the head).
const DOCUMENTED: [&str; 6] = [
    "requestId",
    "method",
    "path",
    "statusCode",
    "duration",
    "userAgent",
];

/// One line per event. As JSON: one object with `timestamp` (RFC 3339), `level` (lower case),
/// `component` (the module, e.g. `http`, `source`, `history`; another crate's name for its own
/// lines), the documented request keys in their order, then the other fields of the request, of
/// the spans it happened in (outermost first) and its own (`message` among them). A field of the
/// event wins over a span's of the same name, an inner span's over an outer's, and a span's over
/// the request's. As text: time, level, component, message, then the same fields as `name=value`.
struct Line;

impl<S, N> FormatEvent<S, N> for Line
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut own = Fields::default();
        event.record(&mut own);
        let request = REQUEST.try_with(RequestContext::fields).ok();
        let spans: Vec<_> = ctx
            .event_scope()
            .map(|scope| scope.from_root().collect())
            .unwrap_or_default();
        let extensions: Vec<_> = spans.iter().map(|s| s.extensions()).collect();
        // Every field once, its winning value: the request's, spans from the root, then the
        // event's own.
        let mut fields: Vec<(&str, &str)> = Vec::with_capacity(8);
        let recorded = extensions
            .iter()
            .filter_map(|e| e.get::<Recorded>())
            .flat_map(|r| r.0.0.iter());
        let request = request.iter().flatten();
        for (name, json) in request.chain(recorded).chain(own.0.iter()) {
            match fields.iter_mut().find(|(n, _)| n == name) {
                Some((_, v)) => *v = json,
                None => fields.push((name, json)),
            }
        }
        let level = *event.metadata().level();
        let component = component(event.metadata().target());
        match format() {
            Format::Json => write_json(&mut writer, level, component, &fields),
            Format::Text { ansi } => {
                let message = fields
                    .iter()
                    .find(|(n, _)| *n == "message")
                    .map(|(_, json)| {
                        serde_json::from_str::<String>(json).unwrap_or_else(|_| json.to_string())
                    })
                    .unwrap_or_default();
                fields.retain(|(n, _)| *n != "message");
                write_text(&mut writer, ansi, level, component, &message, &fields)
            }
        }
    }
}

/// The time now in RFC 3339 (UTC, nanoseconds). The date and time of day are formatted once a
/// second per thread: only the fraction changes from line to line.
struct Now;

impl fmt::Display for Now {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::with_capacity(32);
        json::push_now(&mut text);
        f.write_str(&text)
    }
}

fn level_name(level: tracing::Level) -> &'static str {
    match level {
        tracing::Level::ERROR => "error",
        tracing::Level::WARN => "warn",
        tracing::Level::INFO => "info",
        tracing::Level::DEBUG => "debug",
        tracing::Level::TRACE => "trace",
    }
}

/// A line as one JSON object: the head, the documented keys in their order, then the others.
fn write_json(
    out: &mut impl fmt::Write,
    level: tracing::Level,
    component: &str,
    fields: &[(&str, &str)],
) -> fmt::Result {
    write!(
        out,
        "{{\"timestamp\":\"{}\",\"level\":\"{}\",\"component\":{}",
        Now,
        level_name(level),
        JsonStr(component)
    )?;
    let documented = DOCUMENTED
        .iter()
        .filter_map(|k| fields.iter().find(|(n, _)| n == k));
    let others = fields.iter().filter(|(n, _)| !DOCUMENTED.contains(n));
    for (name, json) in documented.chain(others) {
        write!(out, ",{}:{json}", JsonStr(name))?;
    }
    writeln!(out, "}}")
}

/// A line as text: `time LEVEL component: message name=value …` (values as JSON).
fn write_text(
    out: &mut impl fmt::Write,
    ansi: bool,
    level: tracing::Level,
    component: &str,
    message: &str,
    fields: &[(&str, &str)],
) -> fmt::Result {
    let (on, off) = match (ansi, level) {
        (false, _) => ("", ""),
        (true, tracing::Level::ERROR) => ("\x1b[31m", "\x1b[0m"),
        (true, tracing::Level::WARN) => ("\x1b[33m", "\x1b[0m"),
        (true, tracing::Level::INFO) => ("\x1b[32m", "\x1b[0m"),
        (true, _) => ("\x1b[34m", "\x1b[0m"),
    };
    write!(
        out,
        "{} {on}{:>5}{off} {component}: {message}",
        Now,
        level.as_str()
    )?;
    for (name, json) in fields {
        write!(out, " {name}={json}")?;
    }
    writeln!(out)
}

/// `vitistack::source::kube` → `source`; `hyper_util::client` → `hyper_util`.
fn component(target: &str) -> &str {
    let mut parts = target.split("::");
    match (parts.next(), parts.next()) {
        (Some("vitistack"), Some(module)) => module,
        (Some(krate), _) => krate,
        (None, _) => target,
    }
}

#[cfg(test)]
mod tests;
