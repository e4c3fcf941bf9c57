//! Sign-in sessions in the database, on SQLite and on PostgreSQL: what one replica writes another
//! reads; a refresh is claimed by one replica at a time; ended sessions are dropped.

use vitistack::auth::session::{SessionRecord, SessionStore};
use vitistack::db::sessions::DbSessions;
use vitistack::db::{Db, PoolSettings};

use crate::persistence::TestDb;

fn record(id: &str, ends_ms: i64) -> SessionRecord {
    SessionRecord {
        id: id.to_string(),
        user: "alice".into(),
        groups: vec!["team-1".into(), "viewers".into()],
        created_ms: 1_000,
        ends_ms,
        token_expires_ms: 5_000,
        refreshed_ms: 1_000,
        sealed: "c2VhbGVk".into(),
        version: 0,
    }
}

async fn sessions_kept_and_claimed(db: TestDb) {
    let url = db.url();
    // Two replicas: two pools on the same database.
    let one = DbSessions(
        Db::open(&url, &PoolSettings::default())
            .await
            .expect("open"),
    );
    let two = DbSessions(
        Db::open(&url, &PoolSettings::default())
            .await
            .expect("open"),
    );
    one.insert(&record("ended", 1_500), 1_000)
        .await
        .expect("insert");
    one.insert(&record("s1", 10_000), 2_000)
        .await
        .expect("insert");
    assert!(
        two.load("ended").await.expect("load").is_none(),
        "an ended session is dropped at the next sign-in"
    );
    assert_eq!(
        two.load("s1").await.expect("load"),
        Some(record("s1", 10_000))
    );
    assert!(two.load("nobody").await.expect("load").is_none());

    // A refresh: the first replica claims it; the other cannot while the claim is fresh.
    assert!(one.claim("s1", 0, 3_000, 2_000).await.expect("claim"));
    assert!(
        !two.claim("s1", 0, 3_100, 2_100).await.expect("claim"),
        "the version moved"
    );
    assert!(
        !two.claim("s1", 1, 3_100, 2_100).await.expect("claim"),
        "claimed 100 ms ago"
    );
    let mut refreshed = record("s1", 10_000);
    refreshed.groups = vec!["team-2".into()];
    refreshed.token_expires_ms = 9_000;
    refreshed.refreshed_ms = 3_200;
    refreshed.sealed = "bmV3".into();
    refreshed.version = 2;
    one.update(&refreshed).await.expect("update");
    assert_eq!(two.load("s1").await.expect("load"), Some(refreshed.clone()));
    // An abandoned claim is taken over once stale.
    assert!(two.claim("s1", 2, 4_000, 3_900).await.expect("claim"));
    assert!(
        one.claim("s1", 3, 20_000, 4_001).await.expect("claim"),
        "stale after the claim time"
    );

    two.delete("s1").await.expect("delete");
    assert!(
        one.load("s1").await.expect("load").is_none(),
        "a sign-out on one replica ends it on all"
    );
}

#[tokio::test]
async fn sessions_on_sqlite() {
    sessions_kept_and_claimed(TestDb::sqlite()).await;
}

#[tokio::test]
async fn sessions_on_postgres() {
    sessions_kept_and_claimed(TestDb::postgres().await).await;
}
