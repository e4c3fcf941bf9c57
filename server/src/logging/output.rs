//! The log's way out: lines are appended to a buffer in memory and a thread of its own writes
//! what has gathered to stdout in one write (nothing dropped; loggers wait only when 4 MiB are
//! pending).

use std::sync::OnceLock;

/// The log's way out. A line is appended to a buffer in memory; a thread of its own writes what
/// has gathered to stdout in one write. Writing each line to stdout from the thread that logged it
/// cost a system call and a turn on stdout's lock per request, and waking a writer thread for each
/// line cost as much again: with the access log on, the cached counts query was answered at 0.30×
/// the rate of a server answering the same bytes (`e2e/load/limit.sh`). The writer is woken by
/// the first line after it fell idle, then gathers for [`GATHER`] before it writes, so under load
/// a line costs a lock and a copy. Nothing is dropped: past [`LOG_BUFFER_BYTES`] a logging thread
/// waits until the writer has caught up, as a blocking stdout would make it.
#[derive(Clone)]
pub(super) struct Output(std::sync::Arc<Pending>);

/// Bytes of lines held while the writer is busy before loggers wait for it.
pub(super) const LOG_BUFFER_BYTES: usize = 4 << 20;

/// How long the writer lets lines gather after the first one: the most a line waits.
pub(super) const GATHER: std::time::Duration = std::time::Duration::from_millis(5);

/// The writer, once started ([`flush`] reaches it).
pub(super) static OUTPUT: OnceLock<Output> = OnceLock::new();

#[derive(Default)]
pub(super) struct Pending {
    state: std::sync::Mutex<Lines>,
    /// The writer fell idle and a line came.
    ready: std::sync::Condvar,
    /// The writer took a batch, or finished writing one.
    drained: std::sync::Condvar,
}

#[derive(Default)]
pub(super) struct Lines {
    buf: Vec<u8>,
    /// The writer is writing a batch it took.
    writing: bool,
    /// The writer waits for a line (only then does a logger wake it).
    idle: bool,
}

impl Output {
    /// The writer thread (one per process; a second `init` shares it).
    pub(super) fn start() -> Output {
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

    pub(super) fn append(&self, line: &[u8]) {
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

    pub(super) fn flush(&self) {
        let mut lines = lock(&self.0.state);
        while !lines.buf.is_empty() || lines.writing {
            lines = wait(&self.0.drained, lines);
        }
    }
}

pub(super) fn lock(m: &std::sync::Mutex<Lines>) -> std::sync::MutexGuard<'_, Lines> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(super) fn wait<'a>(
    c: &std::sync::Condvar,
    g: std::sync::MutexGuard<'a, Lines>,
) -> std::sync::MutexGuard<'a, Lines> {
    c.wait(g).unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The writer thread: waits for a line, lets more gather, writes them in one go, repeats.
pub(super) fn write_lines(pending: &Pending) {
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
pub(super) struct LineOut<'a>(&'a Output);

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
