//! Kubernetes mode: a bearer token is authenticated with a TokenReview, and its role is what
//! SubjectAccessReviews allow on `vitistack.io` resources, so the cluster's own RBAC decides.
//! Answers are kept for a short time (`AUTH_CACHE_SECONDS`), keyed by the token's hash.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use parking_lot::Mutex;

use super::{Refusal, Role};

/// The verb on a `vitistack.io` resource that grants each role (a ClusterRole granting it makes
/// its subjects that role; the chart ships one per role).
pub const GRANTS: [(Role, &str, &str); 3] = [
    (Role::Admin, "create", "vitistacks"),
    (Role::Operator, "patch", "kubernetesclusters"),
    (Role::Viewer, "get", "kubernetesclusters"),
];

/// How reviews are asked and kept.
#[derive(Clone, Debug)]
pub struct ReviewSettings {
    /// How long an answer is kept.
    pub ttl: Duration,
    /// Audiences the token must be meant for (empty: the API server's own).
    pub audiences: Vec<String>,
}

type Answer = Result<(Arc<str>, Role), Refusal>;

/// Reviews tokens with the API server, keeping answers for `ttl`.
pub struct Reviewer {
    client: kube::Client,
    settings: ReviewSettings,
    cache: Mutex<HashMap<[u8; 32], (Instant, Answer)>>,
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
        }
    }

    /// How long answers are kept.
    pub fn ttl(&self) -> Duration {
        self.settings.ttl
    }

    /// The user name and role of `token` (whose hash is `hash`).
    pub async fn review(&self, token: &str, hash: [u8; 32]) -> Answer {
        if let Some((at, answer)) = self.cache.lock().get(&hash)
            && at.elapsed() < self.settings.ttl
        {
            return answer.clone();
        }
        let answer = self.ask(token).await;
        if answer != Err(Refusal::Unavailable) {
            let mut cache = self.cache.lock();
            if cache.len() >= MAX_KEPT {
                let ttl = self.settings.ttl;
                cache.retain(|_, (at, _)| at.elapsed() < ttl);
                if cache.len() >= MAX_KEPT {
                    cache.clear();
                }
            }
            cache.insert(hash, (Instant::now(), answer.clone()));
        }
        answer
    }

    /// True while the token still grants `role` (asked again once its kept answer ran out).
    pub async fn still_valid(&self, token: &str, hash: [u8; 32], role: Role) -> bool {
        match self.review(token, hash).await {
            Ok((_, r)) => r >= role,
            // The API server not answering does not end a session it let in.
            Err(Refusal::Unavailable) => true,
            Err(_) => false,
        }
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
        let username = match (status.authenticated, user.username) {
            (Some(true), Some(u)) if !u.is_empty() => u,
            _ => return Err(Refusal::Invalid),
        };
        let access = Api::<SubjectAccessReview>::all(self.client.clone());
        for (role, verb, resource) in GRANTS {
            let sar = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(username.clone()),
                    groups: user.groups.clone(),
                    uid: user.uid.clone(),
                    extra: user.extra.clone(),
                    resource_attributes: Some(ResourceAttributes {
                        group: Some("vitistack.io".into()),
                        resource: Some(resource.into()),
                        verb: Some(verb.into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            };
            let answer = access
                .create(&PostParams::default(), &sar)
                .await
                .map_err(|e| {
                    tracing::warn!(error = %e, "SubjectAccessReview failed");
                    Refusal::Unavailable
                })?;
            if answer.status.is_some_and(|s| s.allowed) {
                return Ok((format!("kubernetes:{username}").into(), role));
            }
        }
        Err(Refusal::NoRole(username))
    }
}
