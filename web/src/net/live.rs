//! Queries kept current: a Leptos `LocalResource` per query, refetched when an object of the
//! kinds it reads changes (announced by the `changes` subscription), when that subscription
//! starts (its `SYNCED`: a change made between the first fetch and the server registering the
//! subscription is read then) and after every (re)connection (at a past moment, nothing
//! changes: fetched once). The resource runs its fetches one after another, so a burst of changes while
//! one is in flight causes exactly one more fetch, and it keeps the last answer while the next
//! one loads.
//!
//! Every query's resource holds its answer type-erased (`Arc<dyn Any>`) and fetches through a
//! boxed function: a resource per answer type (or per fetcher) compiled Leptos's async machinery
//! ten times over (about 80 KB of WebAssembly before optimisation, over the page's size budget);
//! [`Live`] gives the typed answer back.

use std::any::Any;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use graphql_client::GraphQLQuery;
use leptos::prelude::*;

use super::{LinkState, query, query_now, subscribe};
use crate::gql::{Changes, changes};

/// An answer: the query's data, or why there is none.
type Answer = Result<Arc<dyn Any + Send + Sync>, String>;

/// One fetch of a query's answer.
type Fetch = Pin<Box<dyn Future<Output = Answer>>>;

/// The resource of every live query: one type, so Leptos's async machinery is compiled once.
fn resource(fetch: Box<dyn Fn() -> Fetch>) -> LocalResource<Answer> {
    LocalResource::new(fetch)
}

/// The answers of a query kept current.
pub struct Live<T> {
    resource: LocalResource<Answer>,
    data: PhantomData<fn() -> T>,
}

impl<T> Clone for Live<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Live<T> {}

impl<T: 'static> Live<T> {
    /// Reads the latest answer (None until the first one), tracked.
    pub fn with<R>(&self, f: impl FnOnce(Option<Result<&T, &String>>) -> R) -> R {
        self.resource.with(|answer| {
            f(answer.as_ref().and_then(|a| match a {
                Ok(data) => data.downcast_ref::<T>().map(Ok),
                Err(e) => Some(Err(e)),
            }))
        })
    }

    /// The latest data, if the last answer had any (tracked).
    pub fn data<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.with(|a| a.and_then(Result::ok).map(f))
    }
}

impl<T: Clone + 'static> Live<T> {
    /// A copy of the latest answer (tracked).
    pub fn get(&self) -> Option<Result<T, String>> {
        self.with(|a| a.map(|r| r.cloned().map_err(Clone::clone)))
    }
}

/// `Q` kept current: fetched at once, again whenever an object of `kinds` changes, after every
/// reconnection, and whenever a signal `variables` reads changes.
pub fn live<Q>(
    variables: impl Fn() -> Q::Variables + 'static,
    kinds: &[&str],
    state: LinkState,
) -> Live<Q::ResponseData>
where
    Q: GraphQLQuery + 'static,
    Q::ResponseData: Send + Sync,
{
    live_on::<Q>(
        variables,
        Some(kinds.iter().map(|k| k.to_string()).collect()),
        state,
        false,
    )
}

/// [`live`] fetched again after a change of any kind.
pub fn live_all<Q>(
    variables: impl Fn() -> Q::Variables + 'static,
    state: LinkState,
) -> Live<Q::ResponseData>
where
    Q: GraphQLQuery + 'static,
    Q::ResponseData: Send + Sync,
{
    live_on::<Q>(variables, None, state, false)
}

/// `Q` kept current: refetched after a change of `kinds` (None: of any kind); `now`: answered
/// from the present whatever moment the page shows (else at the page's moment).
pub fn live_on<Q>(
    variables: impl Fn() -> Q::Variables + 'static,
    kinds: Option<Vec<String>>,
    state: LinkState,
    now: bool,
) -> Live<Q::ResponseData>
where
    Q: GraphQLQuery + 'static,
    Q::ResponseData: Send + Sync,
{
    let fetch = move || -> Fetch {
        state.connections.track();
        let variables = variables();
        Box::pin(async move {
            let answer = if now {
                query_now::<Q>(variables).await
            } else {
                query::<Q>(variables).await
            };
            answer.map(|data| Arc::new(data) as Arc<dyn Any + Send + Sync>)
        })
    };
    let resource = resource(Box::new(fetch));
    subscribe::<Changes>(changes::Variables { kinds }, move |_| resource.refetch());
    Live {
        resource,
        data: PhantomData,
    }
}
