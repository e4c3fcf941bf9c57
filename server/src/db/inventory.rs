//! The application inventory's cluster UUIDs (`inventory_clusters`), one per datacenter: the
//! first replica to ask makes it, every later ask (any replica, any restart) reads it.

use super::{Db, DbError, with_pool};

/// The cluster UUID of `datacenter`, made now (as `fresh`) if none is kept yet.
pub async fn cluster_uuid(db: &Db, datacenter: &str, fresh: &str) -> Result<String, DbError> {
    let pg = db.engine() == super::Engine::Postgres;
    let insert = if pg {
        "INSERT INTO inventory_clusters (datacenter, cluster_uuid) VALUES ($1, $2) ON CONFLICT (datacenter) DO NOTHING"
    } else {
        "INSERT INTO inventory_clusters (datacenter, cluster_uuid) VALUES (?1, ?2) ON CONFLICT (datacenter) DO NOTHING"
    };
    let select = if pg {
        "SELECT cluster_uuid FROM inventory_clusters WHERE datacenter = $1"
    } else {
        "SELECT cluster_uuid FROM inventory_clusters WHERE datacenter = ?1"
    };
    let _turn = db.write_turn().await;
    let uuid: String = with_pool!(db, p => {
        sqlx::query(insert).bind(datacenter).bind(fresh).execute(p).await?;
        sqlx::query_scalar(select).bind(datacenter).fetch_one(p).await?
    });
    Ok(uuid)
}
