//! A started server with one database and table to load into, and the
//! temporary files a test loads: what the Stream Load and group commit tests
//! share.

use std::path::Path;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;

use crate::TethysServer;

/// A server, the `db.table` the test loads, and a directory for its files.
pub struct LoadFixture {
    pub server: TethysServer,
    pub dir: tempfile::TempDir,
    pub db: String,
    pub table: String,
}

impl LoadFixture {
    /// Starts `binary` with `args` and runs `ddl` (which creates `db.table`).
    pub async fn start(
        binary: &Path,
        args: &[&str],
        db: &str,
        table: &str,
        ddl: &[&str],
    ) -> LoadFixture {
        let server = TethysServer::start_with_args(binary, args)
            .await
            .expect("start");
        let mut c = Conn::new(server.opts()).await.expect("connect");
        for s in ddl {
            c.query_drop(*s)
                .await
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
        LoadFixture {
            server,
            dir: tempfile::tempdir().expect("tmp"),
            db: db.into(),
            table: table.into(),
        }
    }

    /// Writes a file to load; returns its path.
    pub fn file(&self, name: &str, content: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, content).expect("write");
        p.to_string_lossy().to_string()
    }

    /// Loads `file` into the table through the FE (307 followed), with
    /// extra headers; returns the response body.
    pub fn load(&self, file: &str, headers: &[&str]) -> String {
        self.server
            .stream_load(&self.db, &self.table, file, headers)
    }

    /// An FE HTTP URL under the database: `http://.../api/<db>/<tail>`.
    pub fn fe_url(&self, tail: &str) -> String {
        format!(
            "http://127.0.0.1:{}/api/{}/{tail}",
            self.server.fe_http_port, self.db
        )
    }

    /// The same path on the BE's HTTP port.
    pub fn be_url(&self, tail: &str) -> String {
        format!(
            "http://127.0.0.1:{}/api/{}/{tail}",
            self.server.be_http_port, self.db
        )
    }

    /// A new connection.
    pub async fn conn(&self) -> Conn {
        Conn::new(self.server.opts()).await.expect("connect")
    }

    /// The table's rows (-1 when the count has no value).
    pub async fn count(&self) -> i64 {
        self.conn()
            .await
            .query_first(format!("SELECT count(*) FROM {}.{}", self.db, self.table))
            .await
            .expect("count")
            .unwrap_or(-1)
    }

    /// Waits until the table holds `n` rows; panics after `within`.
    pub async fn wait_count(&self, n: i64, within: std::time::Duration) {
        let deadline = std::time::Instant::now() + within;
        loop {
            let c = self.count().await;
            if c == n {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "table holds {c} rows, expected {n} within {within:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
}
