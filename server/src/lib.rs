//! vitistack-graphql: a live, typed view of a Viti Stack management cluster.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod app;
pub mod auth;
pub mod change;
pub mod config;
pub mod db;
pub mod domain;
pub mod fuzz;
pub mod graphql;
pub mod history;
pub mod http;
pub mod model;
pub mod source;
pub mod store;
