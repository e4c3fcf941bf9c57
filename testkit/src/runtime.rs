//! The runtime the benchmark tools run on: two worker threads, as many as the machine's cores.

/// Run `bench` to completion (nothing for `cargo bench -- --list`).
pub fn main<F: std::future::Future<Output = ()>>(bench: impl FnOnce() -> F) {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(bench());
}
