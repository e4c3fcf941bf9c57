//! Resizing a cluster (`scaleCluster`, `scaleNodePool`, `scaleControlPlane`): the new sizes checked
//! against the cluster's pools, planned, and applied in one server-side apply.

use async_graphql::Context;
use serde_json::{Value, json};

use super::{
    ClusterChange, MutationRoot, PoolScale, announce, answer, changer, check_capacity,
    existing_cluster, settings, write_cluster,
};
use crate::change::cluster;
use crate::change::{ChangeError, Edit, field, full_value};
use crate::store::ObjectKey;

/// The cluster's pools with new sizes; refused when a pool does not exist or a size is negative.
fn scaled_pools(
    kc: &Value,
    namespace: &str,
    name: &str,
    scales: &[PoolScale],
) -> Result<Vec<Value>, ChangeError> {
    let pools = kc["spec"]["topology"]["workers"]["nodePools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = pools.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut problems = Vec::new();
    for (i, s) in scales.iter().enumerate() {
        let at = if scales.len() == 1 {
            String::new()
        } else {
            format!("nodePools[{i}].")
        };
        if !names.contains(&s.name.as_str()) {
            problems.push(field(
                &format!("{at}{}", if at.is_empty() { "pool" } else { "name" }),
                format!(
                    "Not found: cluster {namespace}/{name} has no node pool \"{}\" (it has: {})",
                    s.name,
                    if names.is_empty() {
                        "none".into()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        }
        if s.replicas < 0 {
            problems.push(field(
                &format!("{at}replicas"),
                "Invalid value: must be 0 or more",
            ));
        }
    }
    if !problems.is_empty() {
        return Err(ChangeError::invalid("the scale", problems));
    }
    Ok(pools
        .into_iter()
        .map(|mut p| {
            if let Some(s) = scales
                .iter()
                .find(|s| p["name"].as_str() == Some(s.name.as_str()))
            {
                p["replicas"] = json!(s.replicas);
            }
            p
        })
        .collect())
}

/// A new size for a cluster: what `scaleCluster`, `scaleNodePool` and `scaleControlPlane` ask.
pub(super) struct Resize {
    pub namespace: String,
    pub name: String,
    pub control_plane: Option<i32>,
    pub pools: Vec<PoolScale>,
    pub allow_over_capacity: bool,
    pub dry_run: bool,
}

impl MutationRoot {
    /// Plan the resized cluster; with `dry_run` answer the plan, else refuse it when invalid or
    /// (unless allowed) over capacity, and apply the sizes in one server-side apply.
    pub(super) async fn resize(
        &self,
        ctx: &Context<'_>,
        r: Resize,
    ) -> async_graphql::Result<ClusterChange> {
        let changer = changer(ctx)?;
        let Resize {
            namespace, name, ..
        } = &r;
        let current = existing_cluster(ctx, namespace, name)?;
        let mut kc = full_value(&current);
        let mut config = json!({"metadata": {"name": name, "namespace": namespace}});
        if let Some(n) = r.control_plane {
            kc["spec"]["topology"]["controlplane"]["replicas"] = json!(n);
            config["spec"]["topology"]["controlplane"]["replicas"] = json!(n);
        }
        if !r.pools.is_empty() {
            let pools = scaled_pools(&kc, namespace, name, &r.pools)?;
            kc["spec"]["topology"]["workers"]["nodePools"] = json!(pools);
            config["spec"]["topology"]["workers"]["nodePools"] = json!(pools);
        }
        let (o, min) = settings(ctx);
        let plan = cluster::plan_object(
            &super::fleet(ctx),
            current.datacenter(),
            &kc,
            Vec::new(),
            o,
            min,
        );
        if r.dry_run {
            return answer(
                crate::change::Written {
                    object: current,
                    changed: false,
                },
                Some(plan),
            );
        }
        cluster::refuse_invalid(&plan, "the scaled cluster")?;
        check_capacity(&plan, r.allow_over_capacity)?;
        let mut sizes: Vec<String> = r
            .control_plane
            .map(|n| format!("control plane {n}"))
            .into_iter()
            .collect();
        sizes.extend(
            r.pools
                .iter()
                .map(|p| format!("pool {} {}", p.name, p.replicas)),
        );
        let event = announce("Scaled", "Scale", format!("scaled: {}", sizes.join(", ")));
        write_cluster(
            ctx,
            changer,
            &ObjectKey::of(&current),
            Edit::Apply(config),
            Some(plan),
            event,
        )
        .await
    }
}
