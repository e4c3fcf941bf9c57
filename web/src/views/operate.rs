//! Changing a cluster, for an operator: new sizes for the control plane and each pool, a preview
//! of what talos-operator will do (Machines added and removed, whether they fit on the hosts and
//! how many hosts could still fail), then apply; pausing or resuming reconciliation; requesting an
//! upgrade; deleting it (its name typed to confirm).

use leptos::prelude::*;

use crate::format::gib;
use crate::gql::{
    DeleteCluster, PauseCluster, RequestUpgrade, ResumeCluster, ScaleCluster, delete_cluster,
    pause_cluster, request_upgrade, resume_cluster, scale_cluster,
};
use crate::net;
use crate::signin::Session;

type Plan = scale_cluster::ScaleClusterScaleClusterPlan;

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
    expect_context::<Session>()
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
            <Suspense fallback=|| view! { <p class="empty">"Loading the change panel…"</p> }>
                {move || Suspend::new(async move { panel(shape).await })}
            </Suspense>
        </Show>
    }
}

#[leptos::lazy]
fn panel(shape: Memo<Option<Shape>>) -> AnyView {
    view! { <Panel shape/> }.into_any()
}

fn verdict_class(v: &scale_cluster::CapacityVerdict) -> &'static str {
    use scale_cluster::CapacityVerdict as V;
    match v {
        V::FITS => "ok",
        V::BELOW_REDUNDANCY => "warn",
        V::DOES_NOT_FIT => "bad",
        _ => "unknown",
    }
}

fn verdict_text(v: &scale_cluster::CapacityVerdict) -> &'static str {
    use scale_cluster::CapacityVerdict as V;
    match v {
        V::FITS => "Fits",
        V::BELOW_REDUNDANCY => "Fits, too few hosts could fail",
        V::DOES_NOT_FIT => "Does not fit",
        _ => "Capacity unknown",
    }
}

#[component]
fn Panel(shape: Memo<Option<Shape>>) -> impl IntoView {
    let Some(Shape {
        namespace,
        name,
        control_plane,
        pools,
        ..
    }) = shape.get_untracked()
    else {
        return ().into_any();
    };
    let paused = move || shape.with(|s| s.as_ref().is_some_and(|s| s.paused));
    let cp = RwSignal::new(control_plane);
    let sizes = RwSignal::new(pools.clone());
    let allow = RwSignal::new(false);
    // The plan shown and the sizes it was made for (Apply writes only what was previewed).
    let plan = RwSignal::new(None::<(Plan, (i64, Vec<(String, i64)>))>);
    let busy = RwSignal::new(false);
    let message = RwSignal::new(None::<(bool, String)>);
    // A new size of the cluster (ours, applied, or someone else's) resets the form to it.
    Effect::new(move |_| {
        if let Some(s) = shape.get() {
            cp.set(s.control_plane);
            sizes.set(s.pools);
        }
    });
    let target = (namespace.clone(), name.clone());
    let send = {
        let target = target.clone();
        move |dry_run: bool| {
            let (namespace, name) = target.clone();
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
            busy.set(true);
            message.set(None);
            leptos::task::spawn_local(async move {
                let answer = net::query::<ScaleCluster>(variables).await;
                let _ = busy.try_set(false);
                match answer {
                    Ok(d) if dry_run => {
                        let _ = plan.try_set(d.scale_cluster.plan.map(|p| (p, wanted)));
                    }
                    Ok(d) => {
                        let _ = plan.try_set(None);
                        let text = if d.scale_cluster.changed {
                            "Applied: talos-operator will now reconcile the new size."
                        } else {
                            "Nothing to change: the cluster already has this size."
                        };
                        let _ = message.try_set(Some((true, text.to_string())));
                    }
                    Err(e) => {
                        let _ = message.try_set(Some((false, e)));
                    }
                }
            });
        }
    };
    let preview = {
        let send = send.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            send(true);
        }
    };
    let apply = move |_| send(false);
    let current = move || (cp.get(), sizes.get());
    let previewed = move || plan.with(|p| p.as_ref().map(|(_, w)| w.clone())) == Some(current());
    let toggle = {
        let (namespace, name) = target.clone();
        move |_| {
            let (namespace, name) = (namespace.clone(), name.clone());
            busy.set(true);
            let paused = paused();
            leptos::task::spawn_local(async move {
                let answer = if paused {
                    net::query::<ResumeCluster>(resume_cluster::Variables { namespace, name })
                        .await
                        .map(|_| "Resumed: talos-operator reconciles this cluster again.")
                } else {
                    net::query::<PauseCluster>(pause_cluster::Variables { namespace, name })
                        .await
                        .map(|_| "Paused: talos-operator leaves this cluster alone.")
                };
                let _ = busy.try_set(false);
                let _ = message.try_set(Some(match answer {
                    Ok(t) => (true, t.to_string()),
                    Err(e) => (false, e),
                }));
            });
        }
    };
    let talos = RwSignal::new(String::new());
    let kubernetes = RwSignal::new(String::new());
    let upgrade = {
        let (namespace, name) = target.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            let opt = |s: String| Some(s.trim().to_string()).filter(|s| !s.is_empty());
            let variables = request_upgrade::Variables {
                namespace: namespace.clone(),
                name: name.clone(),
                talos: opt(talos.get_untracked()),
                kubernetes: opt(kubernetes.get_untracked()),
            };
            busy.set(true);
            leptos::task::spawn_local(async move {
                let answer = net::query::<RequestUpgrade>(variables).await;
                let _ = busy.try_set(false);
                let _ = message.try_set(Some(match answer {
                    Ok(_) => (
                        true,
                        "Upgrade requested: talos-operator picks up the target versions."
                            .to_string(),
                    ),
                    Err(e) => (false, e),
                }));
            });
        }
    };
    let confirm = RwSignal::new(String::new());
    let delete = {
        let (namespace, name) = target.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            let variables = delete_cluster::Variables {
                namespace: namespace.clone(),
                name: name.clone(),
                confirm: confirm.get_untracked(),
            };
            busy.set(true);
            leptos::task::spawn_local(async move {
                let answer = net::query::<DeleteCluster>(variables).await;
                let _ = busy.try_set(false);
                let _ = message.try_set(Some(match answer {
                    Ok(_) => (true, "Deleting: talos-operator removes its VIP, Secret and Machines, then the cluster.".to_string()),
                    Err(e) => (false, e),
                }));
            });
        }
    };
    let delete_name = name.clone();
    let pool_inputs = pools
        .iter()
        .enumerate()
        .map(|(i, (pool, _))| {
            let label = format!("Pool {pool} ");
            view! {
                <label>{label}
                    <input type="number" min="0" max="100" data-testid=format!("pool-{pool}")
                        prop:value=move || sizes.with(|s| s.get(i).map(|p| p.1).unwrap_or(0)).to_string()
                        on:input=move |ev| {
                            let v = event_target_value(&ev).parse().unwrap_or(0);
                            sizes.update(|s| if let Some(p) = s.get_mut(i) { p.1 = v });
                        }/>
                </label>
            }
        })
        .collect_view();
    view! {
        <section class="operate" aria-labelledby="operate-title" data-testid="operate">
            <h2 id="operate-title">"Change this cluster"</h2>
            <p class="explain">
                {move || if paused() { "Reconciliation is paused: talos-operator does not act on this cluster. " } else { "" }}
                <button type="button" data-testid="pause" disabled=move || busy.get() on:click=toggle>
                    {move || if paused() { "Resume reconciliation" } else { "Pause reconciliation" }}
                </button>
            </p>
            <form class="scale" on:submit=preview>
                <label>"Control plane "
                    <input type="number" min="1" max="9" step="2" data-testid="control-plane"
                        prop:value=move || cp.get().to_string()
                        on:input=move |ev| cp.set(event_target_value(&ev).parse().unwrap_or(1))/>
                </label>
                {pool_inputs}
                <button type="submit" data-testid="preview" disabled=move || busy.get()>"Preview"</button>
            </form>
            <form class="scale" on:submit=upgrade>
                <label>"Talos version "
                    <input type="text" placeholder="v1.11.5" size="9" data-testid="talos-target"
                        prop:value=move || talos.get() on:input=move |ev| talos.set(event_target_value(&ev))/>
                </label>
                <label>"Kubernetes version "
                    <input type="text" placeholder="v1.34.1" size="9" data-testid="kubernetes-target"
                        prop:value=move || kubernetes.get() on:input=move |ev| kubernetes.set(event_target_value(&ev))/>
                </label>
                <button type="submit" data-testid="upgrade" disabled=move || busy.get()>"Request upgrade"</button>
            </form>
            <form class="scale" on:submit=delete>
                <label>{format!("Type {delete_name} to delete it ")}
                    <input type="text" size="16" data-testid="confirm" autocomplete="off"
                        prop:value=move || confirm.get() on:input=move |ev| confirm.set(event_target_value(&ev))/>
                </label>
                <button type="submit" class="danger" data-testid="delete"
                    disabled={ let n = delete_name.clone(); move || busy.get() || confirm.get() != n }>"Delete cluster"</button>
            </form>
            {move || message.get().map(|(ok, text)| view! {
                <p class=if ok { "done" } else { "problem" } data-testid="operate-message" role="status">{text}</p>
            })}
            {move || plan.get().map(|(p, _)| plan_view(p))}
            <Show when=move || plan.with(|p| p.as_ref().is_some_and(|(p, _)| p.valid)) && previewed()>
                <p class="apply">
                    <label><input type="checkbox" data-testid="allow"
                        prop:checked=move || allow.get()
                        on:change=move |ev| allow.set(event_target_checked(&ev))/>
                        " Write it even if it does not fit"</label>
                    " "
                    <button type="button" class="primary" data-testid="apply" disabled=move || busy.get() on:click=apply.clone()>"Apply"</button>
                </p>
            </Show>
        </section>
    }
    .into_any()
}

fn plan_view(p: Plan) -> impl IntoView {
    let c = p.capacity;
    let class = format!("verdict {}", verdict_class(&c.verdict));
    let facts = format!(
        "{} new vCPU and {} GiB more memory on {} hosts; hosts that can fail: {} now, {} after (minimum {}).",
        c.added_vcpus,
        gib(c.added_memory_bytes, 1),
        c.hosts,
        c.hosts_that_can_fail_before,
        c.hosts_that_can_fail_after,
        c.minimum_hosts_that_can_fail
    );
    let added: Vec<_> = p.machines.iter().filter(|m| !m.exists).cloned().collect();
    let rows = added
        .into_iter()
        .map(|m| {
            let role = match m.role {
                scale_cluster::PlannedRole::CONTROL_PLANE => "control plane",
                _ => "worker",
            };
            view! {
                <tr><td>{m.name}</td><td>{role}</td><td>{m.node_pool.unwrap_or_default()}</td><td>{m.machine_class}</td></tr>
            }
        })
        .collect_view();
    let removed = p.removed.join(", ");
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
    view! {
        <div class="plan" data-testid="plan">
            <p><span class=class data-testid="verdict">{verdict_text(&c.verdict)}</span>" "{c.message}</p>
            <p class="explain">{facts}</p>
            <ul class="problems" data-testid="problems">{problems}</ul>
            <ul class="warnings">{warnings}</ul>
            <table class="list" data-testid="added">
                <thead><tr><th>"New machine"</th><th>"Role"</th><th>"Pool"</th><th>"Class"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
            <p data-testid="removed">{if removed.is_empty() { "No machine is removed.".to_string() } else { format!("Removed: {removed}") }}</p>
        </div>
    }
}
