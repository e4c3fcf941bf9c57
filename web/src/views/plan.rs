//! The preview of a planned change, one for both plans the server makes: a new cluster's
//! (`clusterPlan`) and a new size's (`scaleCluster(dryRun: true)`). Whether it fits on the hosts,
//! what would refuse it, the Machines it adds and removes, and (for a new cluster) its YAML.

use leptos::prelude::*;

use crate::format::gib;
use crate::gql::{CapacityVerdict, PlannedRole, cluster_plan, scale_cluster};

/// A plan as the preview shows it.
#[derive(Clone, PartialEq)]
pub struct Plan {
    pub valid: bool,
    pub verdict: CapacityVerdict,
    pub message: String,
    /// The capacity figures in words (a new size's plan has them).
    pub facts: Option<String>,
    /// (field path, reason) of each problem that would refuse it.
    pub problems: Vec<(String, String)>,
    pub warnings: Vec<String>,
    /// The Machines it adds: (name, role, pool, class).
    pub added: Vec<(String, PlannedRole, String, String)>,
    /// The Machines it removes (a new size's plan).
    pub removed: Option<Vec<String>>,
    /// The KubernetesCluster it would write (a new cluster's plan).
    pub yaml: Option<String>,
}

impl From<scale_cluster::ScaleClusterScaleClusterPlan> for Plan {
    fn from(p: scale_cluster::ScaleClusterScaleClusterPlan) -> Self {
        let c = p.capacity;
        let facts = format!(
            "{} new vCPU and {} GiB more memory on {} hosts; hosts that can fail: {} now, {} after (minimum {}).",
            c.added_vcpus,
            gib(c.added_memory_bytes, 1),
            c.hosts,
            c.hosts_that_can_fail_before,
            c.hosts_that_can_fail_after,
            c.minimum_hosts_that_can_fail
        );
        Plan {
            valid: p.valid,
            verdict: c.verdict,
            message: c.message,
            facts: Some(facts),
            problems: p.problems.into_iter().map(|e| (e.path, e.reason)).collect(),
            warnings: p.warnings,
            added: p
                .machines
                .into_iter()
                .filter(|m| !m.exists)
                .map(|m| {
                    (
                        m.name,
                        m.role,
                        m.node_pool.unwrap_or_default(),
                        m.machine_class,
                    )
                })
                .collect(),
            removed: Some(p.removed),
            yaml: None,
        }
    }
}

impl From<cluster_plan::ClusterPlanClusterPlan> for Plan {
    fn from(p: cluster_plan::ClusterPlanClusterPlan) -> Self {
        Plan {
            valid: p.valid,
            verdict: p.capacity.verdict,
            message: p.capacity.message,
            facts: None,
            problems: p.problems.into_iter().map(|e| (e.path, e.reason)).collect(),
            warnings: p.warnings,
            added: p
                .machines
                .into_iter()
                .map(|m| {
                    (
                        m.name,
                        m.role,
                        m.node_pool.unwrap_or_default(),
                        m.machine_class,
                    )
                })
                .collect(),
            removed: None,
            yaml: Some(p.cluster_yaml),
        }
    }
}

/// The test ids (and the Machines column's header) of one place the preview is shown.
pub struct Ids {
    pub plan: &'static str,
    pub verdict: &'static str,
    pub problems: &'static str,
    pub machines: &'static str,
    pub machine: &'static str,
}

/// The preview of `plan`.
#[component]
pub fn PlanPreview(plan: Plan, ids: &'static Ids) -> impl IntoView {
    let (verdict, class) = plan.verdict.words();
    let problems = plan
        .problems
        .into_iter()
        .map(|(path, reason)| view! { <li><code>{path}</code>": "{reason}</li> })
        .collect_view();
    let warnings = plan
        .warnings
        .into_iter()
        .map(|w| view! { <li>{w}</li> })
        .collect_view();
    let rows = plan
        .added
        .into_iter()
        .map(|(name, role, pool, class)| {
            let role = match role {
                PlannedRole::ControlPlane => "control plane",
                _ => "worker",
            };
            view! { <tr><td>{name}</td><td>{role}</td><td>{pool}</td><td>{class}</td></tr> }
        })
        .collect_view();
    let removed = plan.removed.map(|r| {
        let text = if r.is_empty() {
            "No machine is removed.".to_string()
        } else {
            format!("Removed: {}", r.join(", "))
        };
        view! { <p data-testid="removed">{text}</p> }
    });
    let yaml = plan.yaml.map(|y| {
        view! { <details><summary>"KubernetesCluster YAML"</summary><pre data-testid="new-yaml">{y}</pre></details> }
    });
    view! {
        <div class="plan" data-testid=ids.plan>
            <p><span class=class data-testid=ids.verdict>{verdict}</span>" "{plan.message}</p>
            {plan.facts.map(|f| view! { <p class="explain">{f}</p> })}
            <ul class="problems" data-testid=ids.problems>{problems}</ul>
            <ul class="warnings">{warnings}</ul>
            <table class="list" data-testid=ids.machines>
                <thead><tr><th>{ids.machine}</th><th>"Role"</th><th>"Pool"</th><th>"Class"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
            {removed}
            {yaml}
        </div>
    }
}
