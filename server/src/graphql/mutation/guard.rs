//! Who may change what: the role a mutation needs, and a refused change as a GraphQL error
//! (its code, and each field with its reason).

use async_graphql::{Context, ErrorExtensions, Guard};

use crate::auth::{Principal, Role};
use crate::change::ChangeError;
use crate::error::ErrorCode;

/// Refuses callers below a role.
pub struct RoleGuard(pub Role);

impl Guard for RoleGuard {
    async fn check(&self, ctx: &Context<'_>) -> async_graphql::Result<()> {
        let Some(p) = ctx.data_opt::<Principal>() else {
            return Err(ErrorCode::Forbidden.graphql("this operation needs a caller"));
        };
        if p.role >= self.0 {
            return Ok(());
        }
        let need = role_name(self.0);
        let has = role_name(p.role);
        Err(async_graphql::Error::new(format!(
            "this operation needs the {need} role; {} has {has}",
            p.name
        ))
        .extend_with(|_, e| {
            e.set("code", ErrorCode::Forbidden);
            e.set("required", need);
            e.set("role", has);
        }))
    }
}

pub(super) fn role_name(r: Role) -> &'static str {
    match r {
        Role::Viewer => "viewer",
        Role::Operator => "operator",
        Role::Admin => "admin",
    }
}

impl From<ChangeError> for async_graphql::Error {
    fn from(e: ChangeError) -> Self {
        let fields: Vec<async_graphql::Value> = e
            .fields
            .iter()
            .map(|f| {
                let mut m = async_graphql::indexmap::IndexMap::new();
                m.insert(
                    async_graphql::Name::new("path"),
                    async_graphql::Value::from(f.path.as_str()),
                );
                m.insert(
                    async_graphql::Name::new("reason"),
                    async_graphql::Value::from(f.reason.as_str()),
                );
                async_graphql::Value::Object(m)
            })
            .collect();
        async_graphql::Error::new(e.message).extend_with(move |_, ext| {
            ext.set("code", e.code);
            if !fields.is_empty() {
                ext.set("fields", async_graphql::Value::List(fields.clone()));
            }
        })
    }
}
