//! Views derived from the graph: the pipeline stage and diagnosis of a cluster.

pub mod hosts;
pub mod pipeline;
