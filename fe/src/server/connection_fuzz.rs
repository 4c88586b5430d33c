//! Fuzz target for the MySQL packet reader and command state machine: a
//! client logs in as `root` and then sends any sequence of commands (SQL
//! noise as COM_QUERY and COM_STMT_PREPARE, any bytes as COM_STMT_EXECUTE
//! of a prepared statement, any command byte with any body), optionally
//! ending in bytes that are no packet at all. Whatever it sends, the
//! connection answers and ends within a second, and no command panics (not
//! even one the connection contains as error 1105).
//!
//! The FE has a catalog of its own (a temporary directory) and no backend:
//! what needs one fails with an error, which is an answer like any other.

use std::sync::{Arc, OnceLock};

use proptest::prelude::*;

use super::serve;
use crate::catalog::Catalog;
use crate::frontend::Frontend;
use crate::mysql::proto::*;

struct Fixture {
    rt: tokio::runtime::Runtime,
    fe: Arc<Frontend>,
    _dir: tempfile::TempDir,
}

fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().ok()?;
        let catalog = Arc::new(Catalog::open(dir.path()).ok()?);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .ok()?;
        Some(Fixture {
            rt,
            fe: Frontend::new(catalog),
            _dir: dir,
        })
    })
    .as_ref()
}

/// One packet: 3-byte length, sequence id, body.
fn packet(seq: u8, body: &[u8]) -> Vec<u8> {
    let n = body.len() as u32;
    let mut p = n.to_le_bytes()[..3].to_vec();
    p.push(seq);
    p.extend_from_slice(body);
    p
}

/// HandshakeResponse41 of `root` with an empty password.
fn login(multi_statements: bool, deprecate_eof: bool) -> Vec<u8> {
    let mut caps = CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION;
    if multi_statements {
        caps |= CLIENT_MULTI_STATEMENTS;
    }
    if deprecate_eof {
        caps |= CLIENT_DEPRECATE_EOF;
    }
    let mut b = caps.to_le_bytes().to_vec();
    b.extend_from_slice(&(1u32 << 24).to_le_bytes());
    b.push(33);
    b.extend_from_slice(&[0; 23]);
    b.extend_from_slice(b"root\0");
    b.push(0);
    packet(1, &b)
}

/// A command as (command byte, body).
fn command() -> impl Strategy<Value = (u8, Vec<u8>)> {
    let sql = || crate::sql::statement::tests::sql_soup().prop_map(String::into_bytes);
    let bytes = proptest::collection::vec(any::<u8>(), 0..64);
    prop_oneof![
        sql().prop_map(|s| (COM_QUERY, s)),
        sql().prop_map(|s| (COM_STMT_PREPARE, s)),
        // Statement 1 (the prepared `SELECT ?, concat(?, 'x')`) or any id,
        // then flags, iterations and any parameter bytes.
        (any::<bool>(), any::<u32>(), bytes.clone()).prop_map(|(first, id, rest)| {
            let id: u32 = if first { 1 } else { id };
            let mut b = id.to_le_bytes().to_vec();
            b.extend_from_slice(&[0, 1, 0, 0, 0]);
            b.extend_from_slice(&rest);
            (COM_STMT_EXECUTE, b)
        }),
        bytes.clone().prop_map(|b| (COM_STMT_CLOSE, b)),
        bytes.clone().prop_map(|b| (COM_FIELD_LIST, b)),
        bytes.clone().prop_map(|b| (COM_INIT_DB, b)),
        (any::<u8>(), bytes).prop_filter("not QUIT", |(c, _)| *c != COM_QUIT),
    ]
}

proptest! {
    #[test]
    fn fuzz_commands_never_panic(
        multi in any::<bool>(),
        deprecate_eof in any::<bool>(),
        commands in proptest::collection::vec(command(), 0..6),
        tail in proptest::collection::vec(any::<u8>(), 0..16),
    ) {
        let Some(f) = fixture() else {
            return Err(TestCaseError::fail("no fixture"));
        };
        let mut input = login(multi, deprecate_eof);
        let prepare = [&[COM_STMT_PREPARE][..], b"SELECT ?, concat(?, 'x')"].concat();
        input.extend_from_slice(&packet(0, &prepare));
        for (cmd, body) in &commands {
            input.extend_from_slice(&packet(0, &[&[*cmd][..], body].concat()));
        }
        input.extend_from_slice(&tail);
        let stream = tokio::io::join(std::io::Cursor::new(input), tokio::io::sink());
        let peer = std::net::SocketAddr::from(([127, 0, 0, 1], 3306));
        let started = std::time::Instant::now();
        let bugs = tethys_common::panic::contained();
        let logins = f.fe.connections.load(std::sync::atomic::Ordering::Relaxed);
        let served = f.rt.block_on(async {
            let task = tokio::spawn(serve(f.fe.clone(), stream, peer));
            tokio::time::timeout(std::time::Duration::from_secs(5), task).await
        });
        prop_assert!(matches!(served, Ok(Ok(()))), "{:?}", served.map(|r| r.map_err(|e| e.to_string())));
        // It logged in, so its commands reached the state machine.
        prop_assert_eq!(f.fe.connections.load(std::sync::atomic::Ordering::Relaxed), logins + 1);
        // No command met a bug (contained as error 1105, but a bug).
        prop_assert_eq!(tethys_common::panic::contained(), bugs);
        // An input that takes a second is a hang.
        prop_assert!(started.elapsed().as_secs() < 1, "{:?}", started.elapsed());
        // The connection is gone from SHOW PROCESSLIST, however it ended.
        prop_assert!(f.fe.conns().is_empty());
    }
}
