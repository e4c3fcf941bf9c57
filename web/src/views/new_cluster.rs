//! Creating a cluster, for an operator: the form talos-operator's KubernetesCluster needs, a
//! preview of what it will become (every Machine, the YAML, what would refuse it, whether it fits
//! on the hosts), then Create, which opens the new cluster's page.

use leptos::prelude::*;
use leptos_router::hooks::use_navigate;

use super::plan::{Ids, Plan, PlanPreview};
use crate::gql::{ClusterPlan, CreateCluster, cluster_plan, create_cluster};
use crate::net;

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
                <Transition fallback=|| view! { <p class="empty">"Loading the form…"</p> }>
                    {move || Suspend::new(async move { form().await })}
                </Transition>
            </Show>
        </Show>
    }
}

/// What the form holds: one value per field, the control-plane and worker counts.
#[derive(Clone)]
struct Entered {
    values: Vec<RwSignal<String>>,
    cp: RwSignal<i64>,
    workers: RwSignal<i64>,
}

impl Entered {
    /// The trimmed value of field `var`.
    fn value(&self, var: &str) -> String {
        FIELDS
            .iter()
            .position(|(_, v, _)| *v == var)
            .map(|i| self.values[i].get_untracked().trim().to_string())
            .unwrap_or_default()
    }

    /// The cluster as the plan mutation takes it.
    fn input(&self) -> cluster_plan::ClusterInput {
        let opt = |s: String| Some(s).filter(|s| !s.is_empty());
        let pool = self.value("pool");
        cluster_plan::ClusterInput {
            namespace: self.value("namespace"),
            name: self.value("name"),
            cluster_id: None,
            provider: None,
            datacenter: self.value("datacenter"),
            region: self.value("region"),
            zone: self.value("zone"),
            project: self.value("project"),
            workspace: self.value("workspace"),
            workorder: self.value("workorder"),
            environment: self.value("environment"),
            network_namespace_name: opt(self.value("nn")),
            version: self.value("version"),
            control_plane: cluster_plan::ControlPlaneInput {
                replicas: self.cp.get_untracked(),
                machine_class: opt(self.value("cp_class")),
                provider: None,
                version: None,
            },
            node_pools: if pool.is_empty() {
                Vec::new()
            } else {
                vec![cluster_plan::NodePoolInput {
                    name: pool,
                    replicas: self.workers.get_untracked(),
                    machine_class: opt(self.value("pool_class")),
                    provider: None,
                    version: None,
                }]
            },
        }
    }
}

/// The same input as previewed, in the create mutation's own generated types.
fn as_create(i: cluster_plan::ClusterInput) -> create_cluster::ClusterInput {
    create_cluster::ClusterInput {
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
    }
}

/// The test ids of the new-cluster preview.
static IDS: Ids = Ids {
    plan: "new-plan",
    verdict: "new-verdict",
    problems: "new-problems",
    machines: "new-machines",
    machine: "Machine",
};

/// A labelled text input for each of the form's fields.
fn field_inputs(values: &[RwSignal<String>]) -> impl IntoView + use<> {
    FIELDS
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
        .collect_view()
}

#[component]
fn Form() -> impl IntoView {
    let entered = Entered {
        values: FIELDS
            .iter()
            .map(|_| RwSignal::new(String::new()))
            .collect(),
        cp: RwSignal::new(3_i64),
        workers: RwSignal::new(2_i64),
    };
    let allow = RwSignal::new(false);
    let plan = RwSignal::new(None::<Plan>);
    let busy = RwSignal::new(false);
    let message = RwSignal::new(None::<String>);
    let preview = {
        let entered = entered.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            let variables = cluster_plan::Variables {
                input: entered.input(),
            };
            busy.set(true);
            message.set(None);
            leptos::task::spawn_local(async move {
                let answer = net::query::<ClusterPlan>(variables).await;
                let _ = busy.try_set(false);
                match answer {
                    Ok(d) => drop(plan.try_set(Some(d.cluster_plan.into()))),
                    Err(e) => drop(message.try_set(Some(e))),
                }
            });
        }
    };
    let navigate = use_navigate();
    let create = {
        let entered = entered.clone();
        move |_| {
            let variables = create_cluster::Variables {
                input: as_create(entered.input()),
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
                    Err(e) => drop(message.try_set(Some(e))),
                }
            });
        }
    };
    let (cp, workers) = (entered.cp, entered.workers);
    let inputs = field_inputs(&entered.values);
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
            {move || plan.get().map(|p| view! { <PlanPreview plan=p ids=&IDS/> })}
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
