//! The log: one JSON object per line in the old aggregator's documented shape (`timestamp`,
//! `level`, `component`, `requestId`, `message` and the event's own fields) or human-readable
//! text, at a level that can be changed while the server runs.
//!
//! tracing-subscriber's own JSON format nests fields and span data and writes levels in upper
//! case; the documented shape is flat and lower case, hence this formatter.

use std::fmt;
use std::sync::OnceLock;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry, reload};

type Handle = reload::Handle<EnvFilter, Registry>;

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
    let output = if json {
        tracing_subscriber::fmt::layer()
            .event_format(JsonLine)
            .fmt_fields(NoText)
            .with_ansi(false)
            .with_writer(out)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_target(false)
            .with_ansi(ansi)
            .with_writer(out)
            .boxed()
    };
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

/// Change the level while running: a level (`error`, `warn`, `info`, `debug`, `trace`) or a
/// filter directive list. Refused, with the reason, when it cannot be read or no logger runs.
pub fn set_level(level: &str) -> Result<(), String> {
    let level = level.trim();
    if level.is_empty() || level.len() > 512 {
        return Err("the level must be 1 to 512 characters".into());
    }
    let filter =
        EnvFilter::try_new(level).map_err(|e| format!("not a log level or filter: {e}"))?;
    let (handle, text) = FILTER
        .get()
        .ok_or_else(|| "no logger is installed in this process".to_string())?;
    handle.reload(filter).map_err(|e| e.to_string())?;
    *text.lock() = level.to_string();
    tracing::info!(level, "log level changed");
    Ok(())
}

/// The log's way out. A line is appended to a buffer in memory; a thread of its own writes what
/// has gathered to stdout in one write. Writing each line to stdout from the thread that logged it
/// cost a system call and a turn on stdout's lock per request, and waking a writer thread for each
/// line cost as much again: with the access log on, the cached counts query was answered at 0.30×
/// the rate of a server answering the same bytes (`e2e/load/limit.sh`). The writer is woken by
/// the first line after it fell idle, then gathers for [`GATHER`] before it writes, so under load
/// a line costs a lock and a copy. Nothing is dropped: past [`LOG_BUFFER_BYTES`] a logging thread
/// waits until the writer has caught up, as a blocking stdout would make it.
#[derive(Clone)]
struct Output(std::sync::Arc<Pending>);

/// Bytes of lines held while the writer is busy before loggers wait for it.
const LOG_BUFFER_BYTES: usize = 4 << 20;

/// How long the writer lets lines gather after the first one: the most a line waits.
const GATHER: std::time::Duration = std::time::Duration::from_millis(5);

/// The writer, once started ([`flush`] reaches it).
static OUTPUT: OnceLock<Output> = OnceLock::new();

#[derive(Default)]
struct Pending {
    state: std::sync::Mutex<Lines>,
    /// The writer fell idle and a line came.
    ready: std::sync::Condvar,
    /// The writer took a batch, or finished writing one.
    drained: std::sync::Condvar,
}

#[derive(Default)]
struct Lines {
    buf: Vec<u8>,
    /// The writer is writing a batch it took.
    writing: bool,
    /// The writer waits for a line (only then does a logger wake it).
    idle: bool,
}

impl Output {
    /// The writer thread (one per process; a second `init` shares it).
    fn start() -> Output {
        OUTPUT
            .get_or_init(|| {
                let out = Output(Default::default());
                let pending = out.0.clone();
                let started = std::thread::Builder::new()
                    .name("vitistack-log".into())
                    .spawn(move || write_lines(&pending));
                if let Err(e) = started {
                    // Without the thread, lines would wait forever: say so where it can be seen.
                    eprintln!("cannot start the log writer: {e}");
                }
                out
            })
            .clone()
    }

    fn append(&self, line: &[u8]) {
        let mut lines = lock(&self.0.state);
        while lines.buf.len() >= LOG_BUFFER_BYTES {
            lines = wait(&self.0.drained, lines);
        }
        lines.buf.extend_from_slice(line);
        let wake = std::mem::take(&mut lines.idle);
        drop(lines);
        if wake {
            self.0.ready.notify_one();
        }
    }

    fn flush(&self) {
        let mut lines = lock(&self.0.state);
        while !lines.buf.is_empty() || lines.writing {
            lines = wait(&self.0.drained, lines);
        }
    }
}

fn lock(m: &std::sync::Mutex<Lines>) -> std::sync::MutexGuard<'_, Lines> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn wait<'a>(
    c: &std::sync::Condvar,
    g: std::sync::MutexGuard<'a, Lines>,
) -> std::sync::MutexGuard<'a, Lines> {
    c.wait(g).unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The writer thread: waits for a line, lets more gather, writes them in one go, repeats.
fn write_lines(pending: &Pending) {
    use std::io::Write;
    let mut batch = Vec::new();
    loop {
        {
            let mut lines = lock(&pending.state);
            lines.writing = false;
            pending.drained.notify_all();
            while lines.buf.is_empty() {
                lines.idle = true;
                lines = wait(&pending.ready, lines);
            }
            lines.idle = false;
        }
        std::thread::sleep(GATHER);
        {
            let mut lines = lock(&pending.state);
            std::mem::swap(&mut lines.buf, &mut batch);
            lines.writing = true;
        }
        pending.drained.notify_all();
        // A stdout that cannot be written (closed) loses the lines: there is nowhere else.
        let _ = std::io::stdout().lock().write_all(&batch);
        batch.clear();
    }
}

/// What the formatter writes one event into (the whole line, in one write).
struct LineOut<'a>(&'a Output);

impl std::io::Write for LineOut<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.append(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Output {
    type Writer = LineOut<'a>;

    fn make_writer(&'a self) -> LineOut<'a> {
        LineOut(self)
    }
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
        let mut plain = 0;
        for (i, b) in s.bytes().enumerate() {
            let escaped = match b {
                b'"' => "\\\"",
                b'\\' => "\\\\",
                b'\n' => "\\n",
                b'\r' => "\\r",
                b'\t' => "\\t",
                0..=0x1f => "",
                _ => continue,
            };
            self.0.write_str(&s[plain..i])?;
            if escaped.is_empty() {
                write!(self.0, "\\u{b:04x}")?;
            } else {
                self.0.write_str(escaped)?;
            }
            plain = i + 1;
        }
        self.0.write_str(&s[plain..])
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

/// One JSON object per event: `timestamp` (RFC 3339), `level` (lower case), `component` (the
/// module, e.g. `http`, `source`, `history`; another crate's name for its own lines), the
/// documented request keys in their order, then the other fields of the spans it happened in
/// (outermost first) and its own (`message` among them). A field of the event wins over a span's
/// of the same name, an inner span's over an outer's.
struct JsonLine;

impl<S, N> FormatEvent<S, N> for JsonLine
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
        let spans: Vec<_> = ctx
            .event_scope()
            .map(|scope| scope.from_root().collect())
            .unwrap_or_default();
        let extensions: Vec<_> = spans.iter().map(|s| s.extensions()).collect();
        // Every field once, its winning value: spans from the root, then the event's own.
        let mut fields: Vec<(&str, &str)> = Vec::with_capacity(8);
        let recorded = extensions
            .iter()
            .filter_map(|e| e.get::<Recorded>())
            .flat_map(|r| r.0.0.iter());
        for (name, json) in recorded.chain(own.0.iter()) {
            match fields.iter_mut().find(|(n, _)| n == name) {
                Some((_, v)) => *v = json,
                None => fields.push((name, json)),
            }
        }
        let level = match *event.metadata().level() {
            tracing::Level::ERROR => "error",
            tracing::Level::WARN => "warn",
            tracing::Level::INFO => "info",
            tracing::Level::DEBUG => "debug",
            tracing::Level::TRACE => "trace",
        };
        write!(
            writer,
            "{{\"timestamp\":\"{}\",\"level\":\"{level}\",\"component\":{}",
            jiff::Timestamp::now(),
            JsonStr(component(event.metadata().target()))
        )?;
        let documented = DOCUMENTED
            .iter()
            .filter_map(|k| fields.iter().find(|(n, _)| n == k));
        let others = fields.iter().filter(|(n, _)| !DOCUMENTED.contains(n));
        for (name, json) in documented.chain(others) {
            write!(writer, ",{}:{json}", JsonStr(name))?;
        }
        writeln!(writer, "}}")
    }
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
mod tests {
    use super::{JsonStr, component};

    #[test]
    fn strings_are_written_as_json_a_parser_reads_back() {
        for s in [
            "",
            "plain",
            "quote \" backslash \\ slash /",
            "lines\nand\ttabs\r",
            "control \u{1} \u{1f} and DEL \u{7f}",
            "ünïcödé ✓ and 🦀",
            "\u{0}",
        ] {
            let json = JsonStr(s).to_string();
            let back: String = serde_json::from_str(&json).expect(&json);
            assert_eq!(back, s, "{json}");
        }
    }

    #[test]
    fn component_is_the_module_or_the_crate() {
        assert_eq!(component("vitistack::source::kube"), "source");
        assert_eq!(component("vitistack::http"), "http");
        assert_eq!(component("vitistack"), "vitistack");
        assert_eq!(component("sqlx::query"), "sqlx");
    }
}
