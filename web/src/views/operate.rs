//! Changing a cluster, for an operator: new sizes for the control plane and each pool, a preview
//! of what talos-operator will do (Machines added and removed, whether they fit on the hosts and
//! how many hosts could still fail), then apply; pausing or resuming reconciliation; requesting an
//! upgrade; deleting it (its name typed to confirm).

use leptos::prelude::*;

use super::plan::{Ids, Plan, PlanPreview};
use crate::gql::{
    DeleteCluster, PauseCluster, RequestUpgrade, ResumeCluster, ScaleCluster, delete_cluster,
    pause_cluster, request_upgrade, resume_cluster, scale_cluster,
};
use crate::net;
use crate::signin::Session;

/// The cluster as the panel needs it.
#[derive(Clone, PartialEq)]
pub struct Shape {
    pub namespace: String,
    pub name: String,
    pub control_plane: i64,
    pub pools: Vec<(String, i64)>,
    pub paused: bool,
}

/// True when the signed-in caller may change clusters (operator or admin).
pub fn may_change() -> bool {
    use crate::gql::me::Role;
    // A page showing the past changes nothing (a change acts on the present).
    crate::net::past::at().is_none()
        && expect_context::<Session>()
            .0
            .get()
            .is_some_and(|m| matches!(m.role, Role::OPERATOR | Role::ADMIN))
}

/// The panel, once the cluster is known; nothing for a viewer. Its code is loaded only then
/// (a separate WebAssembly module): viewers never download it.
#[component]
pub fn Operate(shape: Memo<Option<Shape>>) -> impl IntoView {
    view! {
        <Show when=move || may_change() && shape.with(Option::is_some)>
            <Transition fallback=|| view! { <p class="empty">"Loading the change panel…"</p> }>
                {move || Suspend::new(async move { panel(shape).await })}
            </Transition>
        </Show>
    }
}

#[leptos::lazy]
fn panel(shape: Memo<Option<Shape>>) -> AnyView {
    view! { <Panel shape/> }.into_any()
}

/// The test ids of the change panel's preview.
static IDS: Ids = Ids {
    plan: "plan",
    verdict: "verdict",
    problems: "problems",
    machines: "added",
    machine: "New machine",
};

/// What every form of the panel shares: the cluster, whether a request is in flight, and the
/// outcome of the last one (ok, words).
#[derive(Clone, Copy)]
struct PanelState {
    shape: Memo<Option<Shape>>,
    busy: RwSignal<bool>,
    message: RwSignal<Option<(bool, String)>>,
}

impl PanelState {
    /// (namespace, name) of the cluster.
    fn target(self) -> (String, String) {
        self.shape
            .with_untracked(|s| s.as_ref().map(|s| (s.namespace.clone(), s.name.clone())))
            .unwrap_or_default()
    }

    /// Sends `request` and shows what `done` says (or the error) when it answers.
    fn send<T: 'static>(
        self,
        request: impl std::future::Future<Output = Result<T, String>> + 'static,
        done: impl FnOnce(T) -> Option<String> + 'static,
    ) {
        self.busy.set(true);
        self.message.set(None);
        leptos::task::spawn_local(async move {
            let answer = request.await;
            let _ = self.busy.try_set(false);
            let _ = self.message.try_set(match answer {
                Ok(t) => done(t).map(|text| (true, text)),
                Err(e) => Some((false, e)),
            });
        });
    }
}

#[component]
fn Panel(shape: Memo<Option<Shape>>) -> impl IntoView {
    let panel = PanelState {
        shape,
        busy: RwSignal::new(false),
        message: RwSignal::new(None),
    };
    let message = panel.message;
    view! {
        <section class="operate" aria-labelledby="operate-title" data-testid="operate">
            <h2 id="operate-title">"Change this cluster"</h2>
            <PauseToggle panel/>
            <Scale panel/>
            <Upgrade panel/>
            <Delete panel/>
            {move || message.get().map(|(ok, text)| view! {
                <p class=if ok { "done" } else { "problem" } data-testid="operate-message" role="status">{text}</p>
            })}
        </section>
    }
}

/// Pausing or resuming talos-operator's reconciliation of the cluster.
#[component]
fn PauseToggle(panel: PanelState) -> impl IntoView {
    let paused = move || panel.shape.with(|s| s.as_ref().is_some_and(|s| s.paused));
    let toggle = move |_| {
        let (namespace, name) = panel.target();
        if paused() {
            let request =
                net::query::<ResumeCluster>(resume_cluster::Variables { namespace, name });
            panel.send(request, |_| {
                Some("Resumed: talos-operator reconciles this cluster again.".into())
            });
        } else {
            let request = net::query::<PauseCluster>(pause_cluster::Variables { namespace, name });
            panel.send(request, |_| {
                Some("Paused: talos-operator leaves this cluster alone.".into())
            });
        }
    };
    view! {
        <p class="explain">
            {move || if paused() { "Reconciliation is paused: talos-operator does not act on this cluster. " } else { "" }}
            <button type="button" data-testid="pause" disabled=move || panel.busy.get() on:click=toggle>
                {move || if paused() { "Resume reconciliation" } else { "Pause reconciliation" }}
            </button>
        </p>
    }
}

/// New sizes for the control plane and each pool: previewed, then applied.
#[component]
fn Scale(panel: PanelState) -> impl IntoView {
    let Some(start) = panel.shape.get_untracked() else {
        return ().into_any();
    };
    let cp = RwSignal::new(start.control_plane);
    let sizes = RwSignal::new(start.pools.clone());
    let allow = RwSignal::new(false);
    // The plan shown and the sizes it was made for (Apply writes only what was previewed).
    let plan = RwSignal::new(None::<(Plan, (i64, Vec<(String, i64)>))>);
    // A new size of the cluster (ours, applied, or someone else's) resets the form to it.
    Effect::new(move |_| {
        if let Some(s) = panel.shape.get() {
            cp.set(s.control_plane);
            sizes.set(s.pools);
        }
    });
    let send = move |dry_run: bool| {
        let (namespace, name) = panel.target();
        let wanted = (cp.get_untracked(), sizes.get_untracked());
        let variables = scale_cluster::Variables {
            namespace,
            name,
            control_plane: Some(wanted.0),
            pools: wanted
                .1
                .iter()
                .map(|(n, r)| scale_cluster::PoolScale {
                    name: n.clone(),
                    replicas: *r,
                })
                .collect(),
            dry_run,
            allow: allow.get_untracked(),
        };
        let request = net::query::<ScaleCluster>(variables);
        panel.send(request, move |d| {
            if dry_run {
                let _ = plan.try_set(d.scale_cluster.plan.map(|p| (p.into(), wanted)));
                return None;
            }
            let _ = plan.try_set(None);
            Some(if d.scale_cluster.changed {
                "Applied: talos-operator will now reconcile the new size.".into()
            } else {
                "Nothing to change: the cluster already has this size.".into()
            })
        });
    };
    let current = move || (cp.get(), sizes.get());
    let previewed = move || plan.with(|p| p.as_ref().map(|(_, w)| w.clone())) == Some(current());
    let pool_inputs = pool_inputs(&start.pools, sizes);
    view! {
        <form class="scale" on:submit=move |ev| { ev.prevent_default(); send(true); }>
            <label>"Control plane "
                <input type="number" min="1" max="9" step="2" data-testid="control-plane"
                    prop:value=move || cp.get().to_string()
                    on:input=move |ev| cp.set(event_target_value(&ev).parse().unwrap_or(1))/>
            </label>
            {pool_inputs}
            <button type="submit" data-testid="preview" disabled=move || panel.busy.get()>"Preview"</button>
        </form>
        {move || plan.get().map(|(p, _)| view! { <PlanPreview plan=p ids=&IDS/> })}
        <Show when=move || plan.with(|p| p.as_ref().is_some_and(|(p, _)| p.valid)) && previewed()>
            <p class="apply">
                <label><input type="checkbox" data-testid="allow"
                    prop:checked=move || allow.get()
                    on:change=move |ev| allow.set(event_target_checked(&ev))/>
                    " Write it even if it does not fit"</label>
                " "
                <button type="button" class="primary" data-testid="apply" disabled=move || panel.busy.get()
                    on:click=move |_| send(false)>"Apply"</button>
            </p>
        </Show>
    }
    .into_any()
}

/// A size input for each of the cluster's node pools, writing into `sizes`.
fn pool_inputs(
    pools: &[(String, i64)],
    sizes: RwSignal<Vec<(String, i64)>>,
) -> impl IntoView + use<> {
    pools
        .iter()
        .enumerate()
        .map(|(i, (pool, _))| {
            view! {
                <label>{format!("Pool {pool} ")}
                    <input type="number" min="0" max="100" data-testid=format!("pool-{pool}")
                        prop:value=move || sizes.with(|s| s.get(i).map(|p| p.1).unwrap_or(0)).to_string()
                        on:input=move |ev| {
                            let v = event_target_value(&ev).parse().unwrap_or(0);
                            sizes.update(|s| if let Some(p) = s.get_mut(i) { p.1 = v });
                        }/>
                </label>
            }
        })
        .collect_view()
}

/// Requesting an upgrade: target Talos and Kubernetes versions.
#[component]
fn Upgrade(panel: PanelState) -> impl IntoView {
    let talos = RwSignal::new(String::new());
    let kubernetes = RwSignal::new(String::new());
    let upgrade = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let (namespace, name) = panel.target();
        let opt = |s: String| Some(s.trim().to_string()).filter(|s| !s.is_empty());
        let variables = request_upgrade::Variables {
            namespace,
            name,
            talos: opt(talos.get_untracked()),
            kubernetes: opt(kubernetes.get_untracked()),
        };
        panel.send(net::query::<RequestUpgrade>(variables), |_| {
            Some("Upgrade requested: talos-operator picks up the target versions.".into())
        });
    };
    view! {
        <form class="scale" on:submit=upgrade>
            <label>"Talos version "
                <input type="text" placeholder="v1.11.5" size="9" data-testid="talos-target"
                    prop:value=move || talos.get() on:input=move |ev| talos.set(event_target_value(&ev))/>
            </label>
            <label>"Kubernetes version "
                <input type="text" placeholder="v1.34.1" size="9" data-testid="kubernetes-target"
                    prop:value=move || kubernetes.get() on:input=move |ev| kubernetes.set(event_target_value(&ev))/>
            </label>
            <button type="submit" data-testid="upgrade" disabled=move || panel.busy.get()>"Request upgrade"</button>
        </form>
    }
}

/// Deleting the cluster, its name typed to confirm.
#[component]
fn Delete(panel: PanelState) -> impl IntoView {
    let confirm = RwSignal::new(String::new());
    let (_, name) = panel.target();
    let delete = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let (namespace, name) = panel.target();
        let variables = delete_cluster::Variables {
            namespace,
            name,
            confirm: confirm.get_untracked(),
        };
        panel.send(net::query::<DeleteCluster>(variables), |_| {
            Some(
                "Deleting: talos-operator removes its VIP, Secret and Machines, then the cluster."
                    .into(),
            )
        });
    };
    let typed = name.clone();
    view! {
        <form class="scale" on:submit=delete>
            <label>{format!("Type {name} to delete it ")}
                <input type="text" size="16" data-testid="confirm" autocomplete="off"
                    prop:value=move || confirm.get() on:input=move |ev| confirm.set(event_target_value(&ev))/>
            </label>
            <button type="submit" class="danger" data-testid="delete"
                disabled=move || panel.busy.get() || confirm.get() != typed>"Delete cluster"</button>
        </form>
    }
}
