//! The wall clock as the server records it: milliseconds since the Unix epoch (what the event
//! log, the inventory and the delivery records store).

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}
