//! The log: one JSON object per line in the old aggregator's documented shape (`timestamp`,
//! `level`, `component`, `requestId`, `message` and the event's own fields) or human-readable
//! text, at a level that can be changed while the server runs.
//!
//! tracing-subscriber's own JSON format nests fields and span data and writes levels in upper
//! case; the documented shape is flat and lower case, hence this formatter.

use std::fmt;
use std::sync::OnceLock;

use serde_json::{Map, Value};
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
    let output = if json {
        tracing_subscriber::fmt::layer()
            .event_format(JsonLine)
            .with_ansi(false)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_target(false)
            .with_ansi(ansi)
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

/// The fields a span was opened with, kept as JSON for the lines logged inside it (a request's
/// `requestId`, `method`, `path`).
struct SpanFields;

struct Recorded(Map<String, Value>);

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
        let mut fields = Fields(Map::new());
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Recorded(fields.0));
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
            let mut fields = Fields(std::mem::take(&mut recorded.0));
            values.record(&mut fields);
            recorded.0 = fields.0;
        }
    }
}

/// Collects an event's or span's fields as JSON values.
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), Value::from(format!("{value:?}")));
    }
}

/// One JSON object per event: `timestamp` (RFC 3339), `level` (lower case), `component` (the
/// module, e.g. `http`, `source`, `history`; another crate's name for its own lines),
/// the fields of the spans it happened in (outermost first), then its own fields (`message`
/// among them).
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
        // The documented keys first, in the documented order; later fields of the same name win.
        let mut rest = Map::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                if let Some(recorded) = span.extensions().get::<Recorded>() {
                    rest.extend(recorded.0.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
            }
        }
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        rest.extend(fields.0);
        let head = [
            ("timestamp", Value::from(jiff::Timestamp::now().to_string())),
            (
                "level",
                Value::from(event.metadata().level().as_str().to_ascii_lowercase()),
            ),
            (
                "component",
                Value::from(component(event.metadata().target())),
            ),
        ];
        let mut text = String::from("{");
        let order = [
            "requestId",
            "method",
            "path",
            "statusCode",
            "duration",
            "userAgent",
        ];
        let documented = order
            .iter()
            .filter_map(|k| rest.get(*k).map(|v| (*k, v.clone())));
        let others = rest
            .iter()
            .filter(|(k, _)| !order.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str(), v.clone()));
        for (i, (key, value)) in head.into_iter().chain(documented).chain(others).enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(&Value::from(key).to_string());
            text.push(':');
            text.push_str(&value.to_string());
        }
        text.push('}');
        writeln!(writer, "{text}")
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
    use super::component;

    #[test]
    fn component_is_the_module_or_the_crate() {
        assert_eq!(component("vitistack::source::kube"), "source");
        assert_eq!(component("vitistack::http"), "http");
        assert_eq!(component("vitistack"), "vitistack");
        assert_eq!(component("sqlx::query"), "sqlx");
    }
}
