//! Who the dashboard is signed in as: the principal's name and role in the header, a sign-in
//! form when the server asks for a key (kept for this tab only), and a way to sign out.

use leptos::prelude::*;

use crate::gql::{Me, me};
use crate::net::{self, LinkState};

/// The signed-in principal, refetched at every (re)connection (views ask it for the role).
#[derive(Clone, Copy)]
pub struct Session(pub RwSignal<Option<me::MeMe>>);

impl Session {
    /// Fetch the principal whenever the connection is (re)established.
    pub fn provide(state: LinkState) {
        let me = RwSignal::new(None);
        Effect::new(move |_| {
            state.connections.track();
            leptos::task::spawn_local(async move {
                let answer = net::query_now::<Me>(me::Variables).await;
                let _ = me.try_set(answer.ok().and_then(|d| d.me));
            });
        });
        provide_context(Session(me));
    }
}

fn role_name(role: &me::Role) -> &'static str {
    match role {
        me::Role::VIEWER => "viewer",
        me::Role::OPERATOR => "operator",
        me::Role::ADMIN => "admin",
        me::Role::Other(_) => "unknown role",
    }
}

/// The header's account corner, and the sign-in form when one is needed.
/// What a caller limited to namespaces sees, for the header: ` · team-1, team-2` (two named,
/// then how many more); nothing for a caller who sees everything.
fn seen(m: &me::MeMe) -> String {
    if !m.limited {
        return String::new();
    }
    let mut all: Vec<&str> = m
        .sees
        .iter()
        .flat_map(|s| s.namespaces.iter().flatten().map(String::as_str))
        .collect();
    all.sort_unstable();
    all.dedup();
    match all.len() {
        0 => " · no namespace".to_string(),
        1 | 2 => format!(" · {}", all.join(", ")),
        n => format!(" · {}, {} +{}", all[0], all[1], n - 2),
    }
}

/// The OpenID provider's name when the server offers sign-in through it (`/auth/info`).
async fn provider() -> Option<String> {
    let (_, text) = net::fetch("/auth/info", &web_sys::RequestInit::new())
        .await
        .ok()?;
    let info: serde_json::Value = serde_json::from_str(&text).ok()?;
    info["oidc"]["signIn"].as_str()?;
    info["oidc"]["provider"].as_str().map(String::from)
}

/// Where the provider's sign-in returns: this page.
fn sign_in_url() -> String {
    let here = web_sys::window()
        .and_then(|w| w.location().pathname().ok())
        .unwrap_or_default();
    format!("/auth/login?to={here}")
}

#[component]
pub fn Account(state: LinkState) -> impl IntoView {
    let session = expect_context::<Session>().0;
    let sso = RwSignal::new(None::<String>);
    leptos::task::spawn_local(async move {
        let _ = sso.try_set(provider().await);
    });
    // Signed in through the provider: sign-out ends the server's session and the provider's.
    let by_session = move || {
        session
            .get()
            .is_some_and(|m| m.signed_in_with == "oidc-session")
    };
    let key = RwSignal::new(String::new());
    // The form was opened by the user (reading anonymously), not asked for by the server.
    let voluntary = RwSignal::new(false);
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let k = key.get_untracked();
        if !k.trim().is_empty() {
            voluntary.set(false);
            net::sign_in(&k);
            key.set(String::new());
        }
    };
    view! {
        <span class="account" data-testid="account">
            // Nobody while the server asks for a key (after a sign-out, a refusal).
            {move || (!state.signin.get()).then(|| session.get()).flatten().map(|m| {
                let who = if m.anonymous { "anonymous".to_string() } else { m.name.clone() };
                let groups: Vec<&str> = m.groups.iter().map(String::as_str).collect();
                let groups = if groups.is_empty() { String::new() } else { format!(" ({})", groups.join(", ")) };
                format!("{who}{groups} · {}{}", role_name(&m.role), seen(&m))
            })}
        </span>
        // The signal first: read on every run, so the condition is tracked even without a key.
        // A key is forgotten here; a session is ended by the form's POST (the server's, then the
        // provider's).
        <Show when=move || !state.signin.get() && (net::key().is_some() || by_session())>
            <form class="signout-form" method="post" action="/auth/logout" on:submit=move |ev| {
                if net::key().is_some() {
                    ev.prevent_default();
                    net::sign_out();
                }
            }>
                <button type="submit" class="signout">"Sign out"</button>
            </form>
        </Show>
        <Show when=move || !state.signin.get() && net::key().is_none() && !by_session()>
            <button type="button" class="signout" on:click=move |_| {
                voluntary.set(true);
                state.signin.set(true);
            }>"Sign in"</button>
        </Show>
        <Show when=move || state.signin.get()>
            <form class="signin" role="dialog" aria-label="Sign in" on:submit=submit>
                <p>{move || if voluntary.get() {
                    "Sign in with an API key to do more than read. It is kept for this tab only."
                } else if net::key().is_some() {
                    "The server refused this key (unknown, revoked or expired). Sign in again."
                } else {
                    "This server needs an API key. It is kept for this tab only."
                }}</p>
                <p hidden=move || sso.get().is_none()>
                    <a class="sso" data-testid="sso" rel="external" href=sign_in_url>{move || format!("Sign in with {}", sso.get().unwrap_or_default())}</a>
                    " or with an API key:"
                </p>
                <label>"API key "
                    <input type="password" autocomplete="off" name="key" data-testid="key"
                        prop:value=move || key.get()
                        on:input=move |ev| key.set(event_target_value(&ev))/>
                </label>
                <button type="submit">"Sign in"</button>
                <Show when=move || voluntary.get()>
                    " "
                    <button type="button" on:click=move |_| {
                        voluntary.set(false);
                        state.signin.set(false);
                    }>"Cancel"</button>
                </Show>
            </form>
        </Show>
    }
}
