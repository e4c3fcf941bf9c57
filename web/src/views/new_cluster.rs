//! Creating a cluster, for an operator: the form talos-operator's KubernetesCluster needs, a
//! preview of what it will become (every Machine, the YAML, what would refuse it, whether it fits
//! on the hosts), then Create, which opens the new cluster's page.

use leptos::prelude::*;
use leptos_router::hooks::use_navigate;

use crate::gql::{ClusterPlan, CreateCluster, cluster_plan, create_cluster};
use crate::net;

type Plan = cluster_plan::ClusterPlanClusterPlan;

/// The form's fields, in order: (label, variable, placeholder).
const FIELDS: &[(&str, &str, &str)] = &[
    ("Namespace", "namespace", "team-a"),
    ("Name", "name", "prod-1"),
    ("NetworkNamespace", "nn", "net-001"),
    ("Datacenter", "datacenter", "test-south-az1"),
    ("Region", "region", "south"),
    ("Zone", "zone", "az1"),
    ("Project", "project", "project-a"),
    ("Workspace", "workspace", "workspace-a"),
    ("Work order", "workorder", "wo-00001"),
    ("Environment", "environment", "dev"),
    ("Kubernetes version", "version", "1.33.1"),
    ("Control-plane class", "cp_class", "large"),
    ("Pool name", "pool", "workers"),
    ("Pool class", "pool_class", "medium"),
];

/// The form's code, loaded when it is first opened (a separate WebAssembly module).
#[leptos::lazy]
fn form() -> AnyView {
    view! { <Form/> }.into_any()
}

/// The "New cluster" button and form; nothing for a viewer.
#[component]
pub fn NewCluster() -> impl IntoView {
    let open = RwSignal::new(false);
    view! {
        <Show when=move || super::operate::may_change()>
            <p>
                <button type="button" class="new-cluster" data-testid="new-cluster"
                    on:click=move |_| open.update(|o| *o = !*o)>
                    {move || if open.get() { "Close the new cluster form" } else { "New cluster" }}
                </button>
            </p>
            <Show when=move || open.get()>
                <Suspense fallback=|| view! { <p class="empty">"Loading the form…"</p> }>
                    {move || Suspend::new(async move { form().await })}
                </Suspense>
            </Show>
        </Show>
    }
}

#[component]
fn Form() -> impl IntoView {
    let values: Vec<RwSignal<String>> = FIELDS
        .iter()
        .map(|_| RwSignal::new(String::new()))
        .collect();
    let cp = RwSignal::new(3_i64);
    let workers = RwSignal::new(2_i64);
    let allow = RwSignal::new(false);
    let plan = RwSignal::new(None::<Plan>);
    let busy = RwSignal::new(false);
    let message = RwSignal::new(None::<String>);
    let value = {
        let values = values.clone();
        move |var: &str| {
            FIELDS
                .iter()
                .position(|(_, v, _)| *v == var)
                .map(|i| values[i].get_untracked().trim().to_string())
                .unwrap_or_default()
        }
    };
    let input = move || {
        let opt = |s: String| Some(s).filter(|s| !s.is_empty());
        let pool = value("pool");
        cluster_plan::ClusterInput {
            namespace: value("namespace"),
            name: value("name"),
            cluster_id: None,
            provider: None,
            datacenter: value("datacenter"),
            region: value("region"),
            zone: value("zone"),
            project: value("project"),
            workspace: value("workspace"),
            workorder: value("workorder"),
            environment: value("environment"),
            network_namespace_name: opt(value("nn")),
            version: value("version"),
            control_plane: cluster_plan::ControlPlaneInput {
                replicas: cp.get_untracked(),
                machine_class: opt(value("cp_class")),
                provider: None,
                version: None,
            },
            node_pools: if pool.is_empty() {
                Vec::new()
            } else {
                vec![cluster_plan::NodePoolInput {
                    name: pool,
                    replicas: workers.get_untracked(),
                    machine_class: opt(value("pool_class")),
                    provider: None,
                    version: None,
                }]
            },
        }
    };
    let preview = {
        let input = input.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            let variables = cluster_plan::Variables { input: input() };
            busy.set(true);
            message.set(None);
            leptos::task::spawn_local(async move {
                let answer = net::query::<ClusterPlan>(variables).await;
                let _ = busy.try_set(false);
                match answer {
                    Ok(d) => {
                        let _ = plan.try_set(Some(d.cluster_plan));
                    }
                    Err(e) => {
                        let _ = message.try_set(Some(e));
                    }
                }
            });
        }
    };
    let navigate = use_navigate();
    let create = move |_| {
        // The same input as previewed, in the create mutation's own generated types.
        let i = input();
        let as_create = create_cluster::ClusterInput {
            namespace: i.namespace,
            name: i.name,
            cluster_id: i.cluster_id,
            provider: i.provider,
            datacenter: i.datacenter,
            region: i.region,
            zone: i.zone,
            project: i.project,
            workspace: i.workspace,
            workorder: i.workorder,
            environment: i.environment,
            network_namespace_name: i.network_namespace_name,
            version: i.version,
            control_plane: create_cluster::ControlPlaneInput {
                replicas: i.control_plane.replicas,
                machine_class: i.control_plane.machine_class,
                provider: i.control_plane.provider,
                version: i.control_plane.version,
            },
            node_pools: i
                .node_pools
                .into_iter()
                .map(|p| create_cluster::NodePoolInput {
                    name: p.name,
                    replicas: p.replicas,
                    machine_class: p.machine_class,
                    provider: p.provider,
                    version: p.version,
                })
                .collect(),
        };
        let variables = create_cluster::Variables {
            input: as_create,
            allow: allow.get_untracked(),
        };
        busy.set(true);
        let navigate = navigate.clone();
        leptos::task::spawn_local(async move {
            let answer = net::query::<CreateCluster>(variables).await;
            let _ = busy.try_set(false);
            match answer {
                Ok(d) => {
                    let c = d.create_kubernetes_cluster.cluster;
                    let ns = c.namespace.unwrap_or_default();
                    navigate(&format!("/clusters/{ns}/{}", c.name), Default::default());
                }
                Err(e) => {
                    let _ = message.try_set(Some(e));
                }
            }
        });
    };
    let inputs = FIELDS
        .iter()
        .zip(values.iter().copied())
        .map(|((label, var, placeholder), v)| {
            view! {
                <label>{format!("{label} ")}
                    <input type="text" size="14" placeholder=*placeholder data-testid=format!("new-{var}")
                        prop:value=move || v.get() on:input=move |ev| v.set(event_target_value(&ev))/>
                </label>
            }
        })
        .collect_view();
    view! {
        <section class="operate" aria-labelledby="new-title" data-testid="new-form">
            <h2 id="new-title">"New cluster"</h2>
            <form class="scale" on:submit=preview>
                {inputs}
                <label>"Control planes "
                    <input type="number" min="1" max="9" step="2" data-testid="new-cp"
                        prop:value=move || cp.get().to_string()
                        on:input=move |ev| cp.set(event_target_value(&ev).parse().unwrap_or(1))/>
                </label>
                <label>"Workers "
                    <input type="number" min="0" max="100" data-testid="new-workers"
                        prop:value=move || workers.get().to_string()
                        on:input=move |ev| workers.set(event_target_value(&ev).parse().unwrap_or(0))/>
                </label>
                <button type="submit" data-testid="new-preview" disabled=move || busy.get()>"Preview"</button>
            </form>
            {move || message.get().map(|text| view! { <p class="problem" role="status" data-testid="new-message">{text}</p> })}
            {move || plan.get().map(plan_view)}
            <Show when=move || plan.with(|p| p.as_ref().is_some_and(|p| p.valid))>
                <p class="apply">
                    <label><input type="checkbox" prop:checked=move || allow.get()
                        on:change=move |ev| allow.set(event_target_checked(&ev))/>
                        " Create it even if it does not fit"</label>
                    " "
                    <button type="button" class="primary" data-testid="new-create" disabled=move || busy.get()
                        on:click=create.clone()>"Create"</button>
                </p>
            </Show>
        </section>
    }
}

fn plan_view(p: Plan) -> impl IntoView {
    use cluster_plan::CapacityVerdict as V;
    let (class, text) = match p.capacity.verdict {
        V::FITS => ("verdict ok", "Fits"),
        V::BELOW_REDUNDANCY => ("verdict warn", "Fits, too few hosts could fail"),
        V::DOES_NOT_FIT => ("verdict bad", "Does not fit"),
        _ => ("verdict unknown", "Capacity unknown"),
    };
    let problems = p
        .problems
        .into_iter()
        .map(|e| view! { <li><code>{e.path}</code>": "{e.reason}</li> })
        .collect_view();
    let warnings = p
        .warnings
        .into_iter()
        .map(|w| view! { <li>{w}</li> })
        .collect_view();
    let rows = p
        .machines
        .into_iter()
        .map(|m| {
            let role = match m.role {
                cluster_plan::PlannedRole::CONTROL_PLANE => "control plane",
                _ => "worker",
            };
            view! { <tr><td>{m.name}</td><td>{role}</td><td>{m.node_pool.unwrap_or_default()}</td><td>{m.machine_class}</td></tr> }
        })
        .collect_view();
    view! {
        <div class="plan" data-testid="new-plan">
            <p><span class=class data-testid="new-verdict">{text}</span>" "{p.capacity.message}</p>
            <ul class="problems" data-testid="new-problems">{problems}</ul>
            <ul class="warnings">{warnings}</ul>
            <table class="list" data-testid="new-machines">
                <thead><tr><th>"Machine"</th><th>"Role"</th><th>"Pool"</th><th>"Class"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
            <details><summary>"KubernetesCluster YAML"</summary><pre data-testid="new-yaml">{p.cluster_yaml}</pre></details>
        </div>
    }
}
