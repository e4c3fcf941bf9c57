//! Views derived from the graph: the pipeline stage and diagnosis of a cluster.

pub mod aggregates;
pub mod applications;
pub mod hosts;
pub mod operators;
pub mod pipeline;
pub mod resources;
pub mod status_page;
pub mod summary;
pub mod vitistack_status;
