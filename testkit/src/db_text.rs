//! Reading a whole table as text, to look for what must not be there (credentials).

/// Every value of every row of `table` (in the database at `url`) as text, to look for what
/// must not be there.
pub async fn table_text(url: &str, table: &str) -> String {
    use sqlx::Row;
    fn cell<'r, R: Row>(row: &'r R, i: usize) -> String
    where
        usize: sqlx::ColumnIndex<R>,
        Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        Option<serde_json::Value>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    {
        if let Ok(v) = row.try_get::<Option<String>, _>(i) {
            return v.unwrap_or_default();
        }
        if let Ok(v) = row.try_get::<Option<i64>, _>(i) {
            return v.map(|n| n.to_string()).unwrap_or_default();
        }
        if let Ok(v) = row.try_get::<Option<serde_json::Value>, _>(i) {
            return v.map(|j| j.to_string()).unwrap_or_default();
        }
        String::new()
    }
    let db = vitistack::db::Db::open(url, &vitistack::db::PoolSettings::default())
        .await
        .expect("open");
    let q = format!("SELECT * FROM {table}");
    let mut out = String::new();
    match db.pool() {
        vitistack::db::Pool::Sqlite(p) => {
            for row in sqlx::query(sqlx::AssertSqlSafe(q))
                .fetch_all(p)
                .await
                .expect("rows")
            {
                for i in 0..row.len() {
                    out.push_str(&cell(&row, i));
                    out.push('\t');
                }
                out.push('\n');
            }
        }
        vitistack::db::Pool::Postgres(p) => {
            for row in sqlx::query(sqlx::AssertSqlSafe(q))
                .fetch_all(p)
                .await
                .expect("rows")
            {
                for i in 0..row.len() {
                    out.push_str(&cell(&row, i));
                    out.push('\t');
                }
                out.push('\n');
            }
        }
    }
    db.close().await;
    out
}
