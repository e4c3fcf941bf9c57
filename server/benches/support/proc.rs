//! Reading a process's memory figures from /proc (Linux), for the benchmarks that run the server
//! as its own process.

/// A `VmRSS:`/`VmHWM:`-style field of `/proc/PID/status`, in KiB (0 when unreadable).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}
