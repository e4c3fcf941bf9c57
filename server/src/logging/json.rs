//! JSON text pushed straight into a line's buffer: strings escaped, unsigned numbers, and the
//! time. The access line is written with these, not through `fmt`: there is one a request, and
//! through the formatting machinery (`write!`, `Display`, an escaping `fmt::Write` adapter) it
//! cost 5,280 instructions of the 36,857 a cached counts query cost (callgrind); pushed, 2,040
//! (BENCHMARKS.md, issue 46).

/// Push `s` as a JSON string literal (quotes included).
pub(super) fn push_str(out: &mut String, s: &str) {
    out.push('"');
    push_escaped(out, s);
    out.push('"');
}

/// Push `s` escaped for the inside of a JSON string: `"` `\` and control characters; the rest
/// (UTF-8 included) as it is. A string with nothing to escape is pushed in one copy.
pub(super) fn push_escaped(out: &mut String, s: &str) {
    for_each_escaped(s, |piece| {
        out.push_str(piece);
        Ok(())
    })
    .unwrap_or_default();
}

/// `s` escaped for the inside of a JSON string, in pieces (runs of plain text and escapes) handed
/// to `put` in order; stops at `put`'s first error.
pub(super) fn for_each_escaped(
    s: &str,
    mut put: impl FnMut(&str) -> std::fmt::Result,
) -> std::fmt::Result {
    // Most text has nothing to escape: one pass that the compiler vectorises, then one piece.
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        return put(s);
    }
    let mut plain = 0;
    let mut hex = *b"\\u0000";
    for (i, b) in s.bytes().enumerate() {
        let escaped = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                hex[4] = HEX[usize::from(b >> 4)];
                hex[5] = HEX[usize::from(b & 0xf)];
                std::str::from_utf8(&hex).unwrap_or_default()
            }
            _ => continue,
        };
        put(&s[plain..i])?;
        put(escaped)?;
        plain = i + 1;
    }
    put(&s[plain..])
}

/// Push `n` in decimal, at least `width` digits (zero-padded).
pub(super) fn push_uint(out: &mut String, n: u64, width: usize) {
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(n);
    for _ in digits.len()..width {
        out.push('0');
    }
    out.push_str(digits);
}

/// Push the time now as RFC 3339 in UTC with nanoseconds (`2026-11-25T20:14:03.123456789Z`).
/// The date and second are formatted once a second (per thread), the nanoseconds each time.
pub(super) fn push_now(out: &mut String) {
    thread_local! {
        static SECOND: std::cell::RefCell<(i64, String)> =
            const { std::cell::RefCell::new((i64::MIN, String::new())) };
    }
    let now = jiff::Timestamp::now();
    let (second, nanos) = (now.as_second(), now.subsec_nanosecond());
    SECOND.with_borrow_mut(|(cached, text)| {
        if *cached != second {
            *cached = second;
            text.clear();
            // `2026-11-25T20:14:03Z` without its `Z`.
            let whole = jiff::Timestamp::from_second(second)
                .unwrap_or(now)
                .to_string();
            text.push_str(whole.trim_end_matches('Z'));
        }
        out.push_str(text);
    });
    out.push('.');
    push_uint(out, u64::try_from(nanos).unwrap_or(0), 9);
    out.push('Z');
}
