//! Why a request was not let in: the refusal, the message its caller reads and the code it
//! branches on.

use std::time::Duration;

use super::review;
use crate::error::ErrorCode;

/// Why a request was not let in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No credential, and anonymous access is not allowed from this address.
    Missing,
    /// A credential that is unknown, revoked or expired (or a token Kubernetes did not accept).
    Invalid,
    /// The Kubernetes API could not review the token.
    Unavailable,
    /// A token Kubernetes accepted for this user, whose RBAC grants no role here.
    NoRole(String),
    /// The review took longer than the operation limit (the Kubernetes API did not answer in time).
    TimedOut(Duration),
    /// A sign-in cookie sent by a page of another site.
    CrossSite,
    /// A token from the OpenID provider that was refused, and why (expired, another audience, an
    /// unknown key, unsigned).
    Token(String),
}

impl Refusal {
    /// The message a client reads.
    pub fn message(&self) -> String {
        match self {
            Refusal::Missing => "authentication required: send `Authorization: Bearer <key>` (on \
                 a WebSocket, `{\"Authorization\": \"Bearer <key>\"}` as the connection_init \
                 payload)"
                .into(),
            Refusal::Invalid => {
                "the key or token is not valid (unknown, revoked or expired)".into()
            }
            Refusal::Unavailable => {
                "the token could not be reviewed: the Kubernetes API did not answer; try again"
                    .into()
            }
            Refusal::TimedOut(limit) => crate::error::timeout_message(*limit),
            Refusal::Token(why) => format!("the token is not valid: {why}"),
            Refusal::CrossSite => "a page of another site may not use the sign-in cookie: \
                 call from this server's own pages, or send `Authorization: Bearer <token>`"
                .into(),
            Refusal::NoRole(user) => format!(
                "{user} is authenticated but has no role here: its RBAC allows none of {}",
                review::GRANTS
                    .iter()
                    .map(|(role, verb, resource)| format!(
                        "{verb} {resource}.vitistack.io ({role})"
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// Not a refusal: the credential could not be checked now (the Kubernetes API did not
    /// answer, or not in time); asking again later may let it in.
    pub fn is_temporary(&self) -> bool {
        matches!(self, Refusal::Unavailable | Refusal::TimedOut(_))
    }

    /// The error code clients branch on (its status: 401 without a valid credential, 403 with
    /// one that grants nothing, 503 when it cannot be checked).
    pub fn code(&self) -> ErrorCode {
        match self {
            Refusal::Missing | Refusal::Invalid | Refusal::Token(_) => ErrorCode::Unauthenticated,
            Refusal::NoRole(_) | Refusal::CrossSite => ErrorCode::Forbidden,
            Refusal::Unavailable => ErrorCode::AuthenticationUnavailable,
            Refusal::TimedOut(_) => ErrorCode::Timeout,
        }
    }
}
