//! vitistack-graphql: a live, typed view of a Viti Stack management cluster.

pub mod model;
pub mod store;
