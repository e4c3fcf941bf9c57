//! Kubernetes mode: a bearer token is authenticated with a TokenReview, and what its user may do
//! and see is what the cluster's RBAC says, asked with SubjectAccessReviews (the user and groups
//! the review gave):
//! - a role over the whole fleet from a cluster-wide grant on `vitistack.io` resources
//!   ([`GRANTS`]): that user sees everything, as before;
//! - otherwise, per datacenter, the kinds it may `list` everywhere and, for namespaced kinds, the
//!   namespaces it may `list` them in (a tenant with a RoleBinding in its namespace sees that
//!   namespace); a viewer, or an operator where it may `patch` KubernetesClusters somewhere.
//!
//! Mutations ask again for the target itself ([`Reviewer::may`]): `patch`, `create` or `delete`
//! on the object in its namespace and datacenter. Answers are kept for a short time
//! (`AUTH_CACHE_SECONDS`), keyed by the token's hash; open sockets re-check them then.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use parking_lot::{Mutex, RwLock};

use super::{Refusal, Role};
use crate::model::{Datacenter, Kind};
use crate::store::{Grants, KindGrants, Namespaces, ObjectKey, Scope};

/// The verb on a `vitistack.io` resource that grants each role over the whole fleet (a
/// ClusterRole granting it makes its subjects that role; the chart ships one per role).
pub const GRANTS: [(Role, &str, &str); 3] = [
    (Role::Admin, "create", "vitistacks"),
    (Role::Operator, "patch", "kubernetesclusters"),
    (Role::Viewer, "get", "kubernetesclusters"),
];

/// SubjectAccessReviews asked at once while a user's scope is worked out.
const IN_FLIGHT: usize = 16;

/// How reviews are asked and kept.
#[derive(Clone, Debug)]
pub struct ReviewSettings {
    /// How long an answer is kept.
    pub ttl: Duration,
    /// Audiences the token must be meant for (empty: the API server's own).
    pub audiences: Vec<String>,
}

/// Where a person's access is asked: a datacenter's API server, and the namespaces it holds
/// (those a namespace-by-namespace grant is asked for).
#[derive(Clone)]
pub struct Target {
    /// The datacenter.
    pub datacenter: Datacenter,
    /// A client of its API server (None: the one tokens are reviewed with).
    pub client: Option<kube::Client>,
    /// Its namespaces.
    pub namespaces: Vec<String>,
}

/// The datacenters to ask, as they are now (given by the app once its sources run; a
/// datacenter's client may have to be made first).
pub type Targets = Arc<dyn Fn() -> futures::future::BoxFuture<'static, Vec<Target>> + Send + Sync>;

/// What a review found.
#[derive(Debug)]
pub struct Reviewed {
    /// `kubernetes:USER`.
    pub name: Arc<str>,
    /// What it may do.
    pub role: Role,
    /// What it may see.
    pub scope: Scope,
    /// Who the API server says it is (asked again for mutations).
    user: UserInfo,
    /// Its groups but `system:authenticated` (everyone's), as changes record them: worked out
    /// once per review, shared by every request the kept answer lets in.
    pub groups: Arc<[String]>,
}

/// The groups the API server named, but `system:authenticated`.
fn named_groups(user: &UserInfo) -> Arc<[String]> {
    user.groups
        .iter()
        .flatten()
        .filter(|g| *g != "system:authenticated")
        .cloned()
        .collect()
}

type Answer = Result<Arc<Reviewed>, Refusal>;

/// Reviews tokens with the API server, keeping answers for `ttl`.
pub struct Reviewer {
    client: kube::Client,
    settings: ReviewSettings,
    cache: Mutex<HashMap<[u8; 32], (Instant, Answer)>>,
    targets: RwLock<Option<Targets>>,
}

/// Most answers kept (past it, expired ones are dropped, then the whole cache).
const MAX_KEPT: usize = 10_000;

impl Reviewer {
    /// A reviewer asking through `client`.
    pub fn new(client: kube::Client, settings: ReviewSettings) -> Self {
        Reviewer {
            client,
            settings,
            cache: Mutex::new(HashMap::new()),
            targets: RwLock::new(None),
        }
    }

    /// How long answers are kept.
    pub fn ttl(&self) -> Duration {
        self.settings.ttl
    }

    /// Ask these datacenters for namespace-by-namespace grants from now on.
    pub fn set_targets(&self, targets: Targets) {
        *self.targets.write() = Some(targets);
        self.cache.lock().clear();
    }

    async fn targets(&self) -> Vec<Target> {
        let targets = self.targets.read().clone();
        match targets {
            Some(t) => t().await,
            None => Vec::new(),
        }
    }

    /// How old a kept answer may be when an open socket checks its principal again: half the
    /// time a request trusts it, at the pace sockets are asked (so a revoked grant closes a
    /// socket within about `ttl / 2`, and refuses a request within `ttl`).
    pub fn recheck(&self) -> Duration {
        (self.settings.ttl / 2).max(Duration::from_millis(250))
    }

    /// Who `token` (whose hash is `hash`) is, and what it may do and see.
    pub async fn review(&self, token: &str, hash: [u8; 32]) -> Answer {
        self.review_within(token, hash, self.settings.ttl).await
    }

    /// [`Reviewer::review`], with a kept answer used only while younger than `max_age`.
    async fn review_within(&self, token: &str, hash: [u8; 32], max_age: Duration) -> Answer {
        self.kept_or(hash, max_age, self.ask(token)).await
    }

    /// The answer kept under `key` while younger than `max_age`, else `ask`'s (kept).
    async fn kept_or(
        &self,
        key: [u8; 32],
        max_age: Duration,
        ask: impl std::future::Future<Output = Answer>,
    ) -> Answer {
        if let Some((at, answer)) = self.cache.lock().get(&key)
            && at.elapsed() < max_age
        {
            return answer.clone();
        }
        let answer = ask.await;
        self.keep(key, &answer);
        answer
    }

    /// How old a kept answer may be at an open socket's check: a little younger than the pace
    /// of the checks, so each check asks again.
    fn recheck_age(&self) -> Duration {
        self.recheck().saturating_sub(Duration::from_millis(100))
    }

    fn keep(&self, key: [u8; 32], answer: &Answer) {
        if matches!(answer, Err(Refusal::Unavailable)) {
            return;
        }
        let mut cache = self.cache.lock();
        if cache.len() >= MAX_KEPT {
            let ttl = self.settings.ttl;
            cache.retain(|_, (at, _)| at.elapsed() < ttl);
            if cache.len() >= MAX_KEPT {
                cache.clear();
            }
        }
        cache.insert(key, (Instant::now(), answer.clone()));
    }

    /// The token's role and scope now, from an answer at most half of `AUTH_CACHE_SECONDS` old
    /// (open sockets ask again sooner than requests do).
    pub async fn recheck_token(&self, token: &str, hash: [u8; 32]) -> Answer {
        self.review_within(token, hash, self.recheck_age()).await
    }

    /// Whether the token's user may `verb` the object `key` (its own RBAC, asked of the API
    /// server of the object's datacenter).
    pub async fn may(
        &self,
        token: &str,
        hash: [u8; 32],
        verb: &str,
        key: &ObjectKey,
    ) -> Result<bool, Refusal> {
        let reviewed = self.review(token, hash).await?;
        self.may_user(&reviewed.user, verb, key).await
    }

    async fn may_user(
        &self,
        user: &UserInfo,
        verb: &str,
        key: &ObjectKey,
    ) -> Result<bool, Refusal> {
        let client = self
            .targets()
            .await
            .into_iter()
            .find(|t| t.datacenter == key.datacenter)
            .and_then(|t| t.client)
            .unwrap_or_else(|| self.client.clone());
        let ns = key.kind.namespaced().then_some(key.namespace.as_str());
        allowed(&client, user, ns, key.kind.group(), key.kind.plural(), verb).await
    }

    async fn ask(&self, token: &str) -> Answer {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: (!self.settings.audiences.is_empty())
                    .then(|| self.settings.audiences.clone()),
            },
            ..Default::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "TokenReview failed");
                Refusal::Unavailable
            })?;
        let status = reviewed.status.unwrap_or_default();
        let user = status.user.unwrap_or_default();
        match (status.authenticated, &user.username) {
            (Some(true), Some(u)) if !u.is_empty() => {}
            _ => return Err(Refusal::Invalid),
        };
        self.access(user, "kubernetes").await
    }

    /// What a person the OpenID provider names (`user`, `groups`) may do and see, as RBAC says
    /// (kept as token reviews are, by who they are).
    pub async fn review_person(&self, user: &str, groups: &[String]) -> Answer {
        self.review_person_within(user, groups, self.settings.ttl)
            .await
    }

    /// [`Reviewer::review_person`] for an open socket's check (answers younger than
    /// [`Reviewer::recheck_token`]).
    pub async fn recheck_person(&self, user: &str, groups: &[String]) -> Answer {
        self.review_person_within(user, groups, self.recheck_age())
            .await
    }

    async fn review_person_within(
        &self,
        user: &str,
        groups: &[String],
        max_age: Duration,
    ) -> Answer {
        let info = UserInfo {
            username: Some(user.to_string()),
            groups: Some(groups.to_vec()),
            ..Default::default()
        };
        self.kept_or(person_key(user, groups), max_age, self.access(info, "oidc"))
            .await
    }

    /// Whether a person the provider names may `verb` the object `key` (their own RBAC).
    pub async fn may_person(
        &self,
        user: &str,
        groups: &[String],
        verb: &str,
        key: &ObjectKey,
    ) -> Result<bool, Refusal> {
        let reviewed = self.review_person(user, groups).await?;
        self.may_user(&reviewed.user, verb, key).await
    }

    /// The role and scope RBAC gives `user`, named `PREFIX:USER`.
    async fn access(&self, user: UserInfo, prefix: &str) -> Answer {
        let username = user.username.clone().unwrap_or_default();
        let name: Arc<str> = format!("{prefix}:{username}").into();
        for (role, verb, resource) in GRANTS {
            if allowed(&self.client, &user, None, "vitistack.io", resource, verb).await? {
                return Ok(Arc::new(Reviewed {
                    name,
                    role,
                    scope: Scope::All,
                    groups: named_groups(&user),
                    user,
                }));
            }
        }
        // No role over the whole fleet: what RBAC grants datacenter by datacenter and
        // namespace by namespace.
        let mut grants = Grants::default();
        let mut operator = false;
        for target in self.targets().await {
            let client = target.client.clone().unwrap_or_else(|| self.client.clone());
            let (kinds, patches) = scope_in(&client, &target, &user).await?;
            operator |= patches;
            if !kinds.is_empty() {
                grants.datacenters.insert(Some(target.datacenter), kinds);
            }
        }
        if grants.datacenters.is_empty() {
            return Err(Refusal::NoRole(username));
        }
        Ok(Arc::new(Reviewed {
            name,
            role: if operator {
                Role::Operator
            } else {
                Role::Viewer
            },
            scope: Scope::limited(grants),
            groups: named_groups(&user),
            user,
        }))
    }
}

/// What `user` may list in `target`: each kind shown and its namespaces, and whether it may
/// patch KubernetesClusters in one of them.
async fn scope_in(
    client: &kube::Client,
    target: &Target,
    user: &UserInfo,
) -> Result<(KindGrants, bool), Refusal> {
    let ask = |kind: Kind, ns: Option<String>, verb: &'static str| {
        question(client.clone(), user.clone(), kind, ns, verb)
    };
    // Cluster-wide first: a kind listed everywhere needs no question per namespace.
    let questions: Vec<Question> = Kind::ALL.iter().map(|k| ask(*k, None, "list")).collect();
    let everywhere: Vec<_> = futures::stream::iter(questions)
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let mut kinds = KindGrants::new();
    for (kind, _, _, ok) in everywhere {
        if ok? {
            kinds.insert(kind, Namespaces::All);
        }
    }
    let mut questions: Vec<Question> = Vec::new();
    for kind in Kind::ALL
        .iter()
        .filter(|k| k.namespaced() && !kinds.contains_key(k))
    {
        for ns in &target.namespaces {
            questions.push(ask(*kind, Some(ns.clone()), "list"));
        }
    }
    for ns in &target.namespaces {
        questions.push(ask(Kind::KubernetesCluster, Some(ns.clone()), "patch"));
    }
    let answers: Vec<_> = futures::stream::iter(questions)
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let mut by_kind: BTreeMap<Kind, BTreeSet<String>> = BTreeMap::new();
    let mut patches = false;
    for (kind, ns, verb, ok) in answers {
        if !ok? {
            continue;
        }
        match (verb, ns) {
            ("patch", _) => patches = true,
            (_, Some(ns)) => {
                by_kind.entry(kind).or_default().insert(ns);
            }
            _ => {}
        }
    }
    for (kind, set) in by_kind {
        kinds.insert(kind, Namespaces::Only(set));
    }
    Ok((kinds, patches))
}

/// A question of [`scope_in`], owning what it asks with (so many can be in flight).
type Question = futures::future::BoxFuture<
    'static,
    (Kind, Option<String>, &'static str, Result<bool, Refusal>),
>;

fn question(
    client: kube::Client,
    user: UserInfo,
    kind: Kind,
    ns: Option<String>,
    verb: &'static str,
) -> Question {
    Box::pin(async move {
        let ok = allowed(
            &client,
            &user,
            ns.as_deref(),
            kind.group(),
            kind.plural(),
            verb,
        )
        .await;
        (kind, ns, verb, ok)
    })
}

/// One SubjectAccessReview: may `user` `verb` `resource` of `group` (in `namespace`, or
/// cluster-wide)?
async fn allowed(
    client: &kube::Client,
    user: &UserInfo,
    namespace: Option<&str>,
    group: &str,
    resource: &str,
    verb: &str,
) -> Result<bool, Refusal> {
    let sar = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            groups: user.groups.clone(),
            uid: user.uid.clone(),
            extra: user.extra.clone(),
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.into()),
                resource: Some(resource.into()),
                verb: Some(verb.into()),
                namespace: namespace.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &sar)
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "SubjectAccessReview failed");
            Refusal::Unavailable
        })?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// The cache key of a person the provider names: their name and groups (a change of groups is
/// asked anew).
fn person_key(user: &str, groups: &[String]) -> [u8; 32] {
    let mut text = format!("oidc\0{user}");
    for g in groups {
        text.push('\0');
        text.push_str(g);
    }
    super::keys::hash(&text)
}
