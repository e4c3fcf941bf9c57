//! vitistack-graphql: a live, typed view of a Viti Stack management cluster.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod app;
pub mod auth;
pub mod both;
pub mod change;
pub mod clock;
pub mod config;
pub mod db;
pub mod domain;
pub mod error;
pub mod fuzz;
pub mod graphql;
pub mod history;
pub mod http;
pub mod inventory;
pub mod leader;
pub mod logging;
pub mod model;
pub mod outbound;
pub mod retry;
pub mod source;
pub mod store;

/// The server's version (the crate's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit the binary was built from (`unknown` outside a checkout); set by `build.rs`.
pub const COMMIT: &str = env!("VITISTACK_COMMIT");
/// `vitistack --version`: the version and the commit.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("VITISTACK_COMMIT"),
    ")"
);
