//! OK, EOF and ERR packets parsed byte by byte, for each capability
//! combination a client can negotiate. The server offers
//! `CLIENT_SESSION_TRACK` (without it Node's mysql2 read an INSERT's
//! length-encoded info as `K{'label':...}`); an OK's info is length-encoded
//! either way, present even when empty under session tracking;
//! `CLIENT_DEPRECATE_EOF` decides whether a result set ends with EOF or OK.

use std::path::PathBuf;
use std::time::Duration;

use tethys_sql_tests::TethysServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PROTOCOL_41: u32 = 512;
const TRANSACTIONS: u32 = 8192;
const SECURE_CONNECTION: u32 = 32768;
const PLUGIN_AUTH: u32 = 1 << 19;
const SESSION_TRACK: u32 = 1 << 23;
const DEPRECATE_EOF: u32 = 1 << 24;

struct Wire {
    s: TcpStream,
}

impl Wire {
    async fn read_packet(&mut self) -> Vec<u8> {
        let mut h = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(30), self.s.read_exact(&mut h))
            .await
            .expect("packet in time")
            .expect("header");
        let len = u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize;
        let mut body = vec![0u8; len];
        self.s.read_exact(&mut body).await.expect("body");
        body
    }

    async fn write_packet(&mut self, seq: u8, body: &[u8]) {
        let mut p = (body.len() as u32).to_le_bytes()[..3].to_vec();
        p.push(seq);
        p.extend_from_slice(body);
        self.s.write_all(&p).await.expect("write");
    }

    /// Sends a handshake response (root, empty password) with exactly
    /// `caps`; returns the server's greeting and its answer.
    async fn handshake(port: u16, caps: u32) -> (Wire, Vec<u8>, Vec<u8>) {
        let s = TcpStream::connect(("127.0.0.1", port)).await.expect("tcp");
        let mut w = Wire { s };
        let hello = w.read_packet().await;
        let mut resp = Vec::new();
        resp.extend_from_slice(&caps.to_le_bytes());
        resp.extend_from_slice(&(1u32 << 24).to_le_bytes());
        resp.push(45);
        resp.extend_from_slice(&[0u8; 23]);
        resp.extend_from_slice(b"root\0");
        resp.push(0); // empty auth response
        resp.extend_from_slice(b"mysql_native_password\0");
        w.write_packet(1, &resp).await;
        let answer = w.read_packet().await;
        (w, hello, answer)
    }

    /// Connects with the given capabilities (and protocol 4.1).
    async fn connect(port: u16, caps: u32) -> Wire {
        let all = caps | PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH;
        let (w, hello, ok) = Wire::handshake(port, all).await;
        assert_eq!(hello[0], 10, "protocol version");
        let at = 1 + hello[1..].iter().position(|b| *b == 0).expect("version") + 1 + 4 + 8 + 1;
        let low = u16::from_le_bytes([hello[at], hello[at + 1]]) as u32;
        let high = u16::from_le_bytes([hello[at + 5], hello[at + 6]]) as u32;
        let offered = low | (high << 16);
        assert_ne!(offered & SESSION_TRACK, 0, "CLIENT_SESSION_TRACK offered");
        assert_ne!(offered & DEPRECATE_EOF, 0, "CLIENT_DEPRECATE_EOF offered");
        assert_eq!(ok[0], 0, "auth OK: {ok:?}");
        w
    }

    async fn query(&mut self, sql: &str) -> Vec<u8> {
        let mut body = vec![3u8];
        body.extend_from_slice(sql.as_bytes());
        self.write_packet(0, &body).await;
        self.read_packet().await
    }
}

/// A length-encoded integer at `p[*at..]`.
fn lenenc(p: &[u8], at: &mut usize) -> u64 {
    let b = p[*at];
    *at += 1;
    let n = match b {
        0xfc => 2,
        0xfd => 3,
        0xfe => 8,
        _ => return b as u64,
    };
    let mut v = [0u8; 8];
    v[..n].copy_from_slice(&p[*at..*at + n]);
    *at += n;
    u64::from_le_bytes(v)
}

/// (affected rows, status, info) of an OK packet, its info framed per `track`.
fn parse_ok(p: &[u8], track: bool) -> (u64, u16, String) {
    assert!(p[0] == 0 || p[0] == 0xfe, "OK packet: {p:?}");
    let mut at = 1;
    let affected = lenenc(p, &mut at);
    let _id = lenenc(p, &mut at);
    let status = u16::from_le_bytes([p[at], p[at + 1]]);
    at += 4;
    let info = if track || at < p.len() {
        let n = lenenc(p, &mut at) as usize;
        assert_eq!(at + n, p.len(), "no session state after the info: {p:?}");
        &p[at..at + n]
    } else {
        &p[at..]
    };
    (
        affected,
        status,
        String::from_utf8(info.to_vec()).expect("utf8"),
    )
}

#[tokio::test]
async fn ok_eof_and_err_framing_for_each_capability_combination() {
    let server = TethysServer::start(&PathBuf::from(env!("CARGO_BIN_EXE_tethys")))
        .await
        .expect("start");
    let mut setup = Wire::connect(server.query_port, TRANSACTIONS).await;
    for sql in [
        "CREATE DATABASE w",
        "CREATE TABLE w.t (k INT NOT NULL) DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 1",
    ] {
        assert_eq!(setup.query(sql).await[0], 0, "{sql}");
    }
    // Clients must speak protocol 4.1, as MySQL 8 requires: an older
    // handshake is refused with MySQL's "Bad handshake".
    let (_, _, refused) =
        Wire::handshake(server.query_port, TRANSACTIONS | SECURE_CONNECTION).await;
    assert_eq!(refused[0], 0xff, "{refused:?}");
    assert_eq!(u16::from_le_bytes([refused[1], refused[2]]), 1043);
    for (i, caps) in [
        TRANSACTIONS,
        TRANSACTIONS | SESSION_TRACK,
        TRANSACTIONS | DEPRECATE_EOF,
        TRANSACTIONS | SESSION_TRACK | DEPRECATE_EOF,
    ]
    .into_iter()
    .enumerate()
    {
        let track = caps & SESSION_TRACK != 0;
        let mut w = Wire::connect(server.query_port, caps).await;
        // An INSERT's OK carries Doris' label/status/txnId info.
        let ok = w
            .query(&format!(
                "INSERT INTO w.t WITH LABEL wire_{i} VALUES (1), (2)"
            ))
            .await;
        let (affected, status, info) = parse_ok(&ok, track);
        assert_eq!(affected, 2);
        assert_eq!(status & 2, 2, "autocommit status");
        assert!(
            info.starts_with("{'label':'wire_"),
            "caps {caps:#x}: info {info:?}"
        );
        // A statement without info: no trailing bytes without tracking; with
        // it an empty info, and the session state USE changed (the schema).
        let ok = w.query("USE w").await;
        if track {
            assert_eq!(
                &ok[3..5],
                &[2, 0x40],
                "SERVER_SESSION_STATE_CHANGED: {ok:?}"
            );
            assert_eq!(
                &ok[7..],
                &[0, 4, 1, 2, 1, b'w'],
                "empty info, schema w: {ok:?}"
            );
        } else {
            assert_eq!(ok, vec![0, 0, 0, 2, 0, 0, 0]);
        }
        let ok = w.query("SET time_zone = '+08:00', batch_size = 100").await;
        if track {
            let mut state = vec![0, 17, 9];
            state.extend_from_slice(b"time_zone");
            state.push(6);
            state.extend_from_slice(b"+08:00");
            assert_eq!(&ok[7..9], &[0, state.len() as u8], "{ok:?}");
            assert_eq!(&ok[9..], &state[..], "only the tracked variable: {ok:?}");
        } else {
            assert_eq!(ok, vec![0, 0, 0, 2, 0, 0, 0]);
        }
        if track {
            // The tracking variables choose what is reported: now batch_size
            // with a state-change flag, and no schema.
            let ok = w
                .query(
                    "SET session_track_system_variables = 'batch_size', \
                     session_track_schema = 0, session_track_state_change = 1",
                )
                .await;
            assert_eq!(ok, vec![0, 0, 0, 2, 0, 0, 0, 0], "nothing tracked changed");
            let ok = w.query("SET batch_size = 200, time_zone = 'UTC'").await;
            let mut state = vec![0, 15, 10];
            state.extend_from_slice(b"batch_size");
            state.push(3);
            state.extend_from_slice(b"200");
            state.extend_from_slice(&[2, 2, 1, b'1']);
            assert_eq!(&ok[7..9], &[0, state.len() as u8], "{ok:?}");
            assert_eq!(&ok[9..], &state[..], "batch_size and the flag: {ok:?}");
            let ok = w.query("USE information_schema").await;
            assert_eq!(ok, vec![0, 0, 0, 2, 0, 0, 0, 0], "schema not tracked");
            w.query("USE w").await;
        }
        // A result set: column count, column definition, [EOF], row, EOF or OK.
        let count = w.query("SELECT 7 AS x").await;
        assert_eq!(count, vec![1]);
        let def = w.read_packet().await;
        assert_eq!(&def[..4], &[3, b'd', b'e', b'f'], "column definition");
        if caps & DEPRECATE_EOF == 0 {
            let eof = w.read_packet().await;
            assert_eq!(eof, vec![0xfe, 0, 0, 2, 0], "EOF after the columns");
        }
        let row = w.read_packet().await;
        assert_eq!(row, vec![1, b'7']);
        let end = w.read_packet().await;
        if caps & DEPRECATE_EOF == 0 {
            assert_eq!(end, vec![0xfe, 0, 0, 2, 0], "EOF after the rows");
        } else {
            assert_eq!(end[0], 0xfe);
            assert_eq!(parse_ok(&end, track), (0, 2, String::new()));
        }
        // ERR: 0xff, code, '#', SQLSTATE, message to the end.
        let err = w.query("SELECT * FROM w.missing").await;
        assert_eq!(err[0], 0xff);
        assert_eq!(u16::from_le_bytes([err[1], err[2]]), 1146);
        assert_eq!(&err[3..9], b"#42S02");
        let msg = String::from_utf8(err[9..].to_vec()).expect("utf8");
        assert!(msg.contains("missing"), "{msg}");
    }
}

/// A DECIMAL parameter is a value, never SQL: bound as text `1-- ` it used
/// to be pasted as `SELECT 1-- , 2`, commenting out the second column.
#[tokio::test]
async fn a_decimal_parameter_cannot_comment_out_the_statement() {
    let server = TethysServer::start(&PathBuf::from(env!("CARGO_BIN_EXE_tethys")))
        .await
        .expect("start");
    let mut w = Wire::connect(server.query_port, DEPRECATE_EOF).await;
    let mut prepare = vec![0x16u8];
    prepare.extend_from_slice(b"SELECT ?, 2");
    w.write_packet(0, &prepare).await;
    let ok = w.read_packet().await;
    assert_eq!(ok[0], 0, "prepare OK: {ok:?}");
    let id = u32::from_le_bytes([ok[1], ok[2], ok[3], ok[4]]);
    let columns = u16::from_le_bytes([ok[5], ok[6]]);
    let params = u16::from_le_bytes([ok[7], ok[8]]);
    assert_eq!(params, 1);
    // Parameter and column definitions (no EOFs under DEPRECATE_EOF).
    for _ in 0..params + columns {
        w.read_packet().await;
    }
    let mut exec = vec![0x17u8];
    exec.extend_from_slice(&id.to_le_bytes());
    exec.push(0); // no cursor
    exec.extend_from_slice(&1u32.to_le_bytes());
    exec.push(0); // null bitmap
    exec.push(1); // types follow
    exec.extend_from_slice(&[0xf6, 0]); // MYSQL_TYPE_NEWDECIMAL
    exec.push(4);
    exec.extend_from_slice(b"1-- ");
    w.write_packet(0, &exec).await;
    let head = w.read_packet().await;
    // Either a refusal or a result of both columns; never one column.
    if head[0] != 0xff {
        let mut at = 0;
        assert_eq!(lenenc(&head, &mut at), 2, "columns of the result: {head:?}");
    }
}
