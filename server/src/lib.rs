//! vitistack-graphql: a live, typed view of a Viti Stack management cluster.

pub mod model;
pub mod store;
pub mod source;
pub mod domain;
pub mod graphql;
pub mod app;
pub mod config;
pub mod http;
