//! What the server's tests, benchmarks and examples share (a crate rather than `#[path]`
//! includes, so each part is compiled once and has one name):
//!
//! - [`kube_api`]: a Kubernetes API test server (list/watch, server-side apply, reviews);
//! - [`server`]: the release server as a child process (`serve --demo`) and WebSockets to it;
//! - [`proc`]: the server watching the test server, as a child process, and its memory from /proc;
//! - [`runtime`]: the runtime the benchmark tools run on;
//! - [`db_text`]: a whole database table as text (to look for what must not be stored);
//! - [`postgres`]: a PostgreSQL database of a test's own;
//! - [`documented`]: the old aggregator's documented JSON shapes and a comparison against them.

pub mod db_text;
pub mod documented;
pub mod kube_api;
pub mod postgres;
pub mod proc;
pub mod runtime;
pub mod server;

pub use db_text::table_text;
