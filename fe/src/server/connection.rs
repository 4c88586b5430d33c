//! One client connection: handshake and authentication, then the command
//! loop (COM_QUERY, COM_INIT_DB, COM_PING, COM_FIELD_LIST, COM_STMT_*),
//! with statements cancellable by KILL and bounded by `query_timeout`.

use std::net::SocketAddr;
use std::sync::Arc;

use rand::Rng;
use tethys_common::config::MYSQL_SERVER_VERSION;
use tethys_common::{TethysError, debug_point};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::executor::{self, Output};
use crate::frontend::{ConnHandle, Frontend};
use crate::mysql::packet::PacketIo;
use crate::mysql::proto::*;
use crate::mysql::value::{RowEncoder, column_def};
use crate::session::Session;
use crate::sql::params::{Param, Prepared};
use crate::sql::{self, Statement};

/// How long a client may take to complete the handshake.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What a command left to do.
enum Step {
    /// It wrote an answer to flush.
    Answered,
    /// It needs no answer.
    Silent,
    /// The client quit.
    Quit,
}

/// Takes the connection out of SHOW PROCESSLIST however its task ends.
struct Registered {
    fe: Arc<Frontend>,
    id: u32,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.fe.unregister_conn(self.id);
    }
}

struct Conn<S> {
    io: PacketIo<S>,
    fe: Arc<Frontend>,
    session: Session,
    handle: Arc<ConnHandle>,
    caps: u32,
    /// The session as the running statement found it, for session tracking.
    before: Option<crate::mysql::session_track::Before>,
}

/// Serves one client until it quits or the connection breaks.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send>(
    fe: Arc<Frontend>,
    stream: S,
    peer: SocketAddr,
) {
    let mut io = PacketIo::new(stream);
    let conn_id = fe.reserve_conn_id();
    let mut scramble = [0u8; 20];
    {
        let mut rng = rand::rng();
        for b in scramble.iter_mut() {
            *b = rng.random_range(b'!'..=b'~');
        }
    }
    io.write_packet(&handshake_v10(conn_id, &scramble, MYSQL_SERVER_VERSION));
    if io.flush().await.is_err() {
        return;
    }
    let Ok(Ok(Some(pkt))) = tokio::time::timeout(CONNECT_TIMEOUT, io.read_packet()).await else {
        return;
    };
    let Ok(mut hs) = parse_handshake_response(&pkt) else {
        io.write_packet(&err_packet(1043, "08S01", "Bad handshake"));
        let _ = io.flush().await;
        return;
    };
    if let Some(p) = &hs.plugin
        && !p.is_empty()
        && p != NATIVE_PASSWORD
    {
        // Ask the client to answer with mysql_native_password instead.
        let mut sw = vec![0xfe];
        sw.extend_from_slice(NATIVE_PASSWORD.as_bytes());
        sw.push(0);
        sw.extend_from_slice(&scramble);
        sw.push(0);
        io.write_packet(&sw);
        if io.flush().await.is_err() {
            return;
        }
        let Ok(Ok(Some(resp))) = tokio::time::timeout(CONNECT_TIMEOUT, io.read_packet()).await
        else {
            return;
        };
        hs.auth = resp;
    }
    let host = peer.ip().to_string();
    let ok_auth = crate::auth::password_of(&hs.user)
        .is_some_and(|pw| check_native_password(&scramble, pw, &hs.auth));
    if !ok_auth {
        let e = TethysError::AccessDenied {
            user: format!("{}@{}", hs.user, host),
            using_password: !hs.auth.is_empty(),
        };
        let (code, state) = e.mysql_code();
        io.write_packet(&err_packet(code, state, &e.to_string()));
        let _ = io.flush().await;
        return;
    }
    let mut session = Session::new(conn_id, hs.user.clone(), host.clone());
    session.prepared =
        crate::session::prepared::PreparedStatements::counted_in(fe.limits.prepared_in_use.clone());
    session.vars = fe.global_variables();
    if let Some(db) = &hs.database {
        let found = fe.catalog.read().database(db).map(|d| d.name.clone());
        match found {
            Some(d) => session.database = Some(d),
            None if db.eq_ignore_ascii_case("information_schema") => {
                session.database = Some("information_schema".into())
            }
            None => {
                let e = TethysError::UnknownDatabase(db.clone());
                let (code, state) = e.mysql_code();
                io.write_packet(&err_packet(code, state, &e.to_string()));
                let _ = io.flush().await;
                return;
            }
        }
    }
    let handle = match fe.register_conn_with_id(conn_id, &hs.user, &host) {
        Ok(h) => h,
        Err(e) => {
            let (code, state) = e.mysql_code();
            io.write_packet(&err_packet(code, state, &e.to_string()));
            let _ = io.flush().await;
            return;
        }
    };
    let _registered = Registered {
        fe: fe.clone(),
        id: conn_id,
    };
    *handle.db.lock().unwrap_or_else(|p| p.into_inner()) = session.database.clone();
    let caps = hs.capabilities & SERVER_CAPABILITIES;
    io.max_packet = crate::mysql::packet::MAX_CLIENT_PACKET;
    io.write_packet(&ok_packet(0, 0, SERVER_STATUS_AUTOCOMMIT, caps));
    if io.flush().await.is_err() {
        return;
    }
    let mut conn = Conn {
        io,
        fe: fe.clone(),
        session,
        handle,
        caps,
        before: None,
    };
    let _ = conn.run().await;
}

/// Reads an integer parameter of `bytes` little-endian bytes as text:
/// unsigned, or sign-extended from its width.
fn int_param(r: &mut Reader<'_>, bytes: usize, unsigned: bool) -> Result<String, Malformed> {
    let mut le = [0u8; 8];
    le[..bytes].copy_from_slice(r.take(bytes)?);
    let v = u64::from_le_bytes(le);
    let unused = 64 - 8 * bytes as u32;
    Ok(if unsigned {
        v.to_string()
    } else {
        (((v << unused) as i64) >> unused).to_string()
    })
}

/// Reads one binary-protocol parameter.
fn read_param(r: &mut Reader<'_>, ty: u8, unsigned: bool) -> Result<Param, Malformed> {
    use crate::mysql::value::*;
    Ok(match ty {
        T_TINY => Param::number(&int_param(r, 1, unsigned)?),
        T_SHORT | T_YEAR => Param::number(&int_param(r, 2, unsigned)?),
        T_LONG | T_INT24 => Param::number(&int_param(r, 4, unsigned)?),
        T_LONGLONG => Param::number(&int_param(r, 8, unsigned)?),
        T_FLOAT => {
            let b = r.take(4)?;
            Param::number(&f32::from_le_bytes([b[0], b[1], b[2], b[3]]).to_string())
        }
        T_DOUBLE => {
            let b = r.take(8)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            Param::number(&f64::from_le_bytes(a).to_string())
        }
        T_DATE | T_DATETIME | T_TIMESTAMP => {
            let n = r.u8()? as usize;
            let b = r.take(n)?;
            let g = |i: usize| b.get(i).copied().unwrap_or(0) as u32;
            let year = if n >= 2 {
                u16::from_le_bytes([b[0], b[1]]) as u32
            } else {
                0
            };
            let micros = if n >= 11 {
                u32::from_le_bytes([b[7], b[8], b[9], b[10]])
            } else {
                0
            };
            let mut s = format!("{year:04}-{:02}-{:02}", g(2), g(3));
            if ty != T_DATE {
                s.push_str(&format!(" {:02}:{:02}:{:02}", g(4), g(5), g(6)));
                if micros > 0 {
                    s.push_str(&format!(".{micros:06}"));
                }
            }
            Param::Text(s)
        }
        T_TIME => {
            let n = r.u8()? as usize;
            let b = r.take(n)?;
            let g = |i: usize| b.get(i).copied().unwrap_or(0) as u64;
            // Days up to 2^32 - 1: hours in 64 bits (found by fuzzing).
            let days = if n >= 5 {
                u32::from_le_bytes([b[1], b[2], b[3], b[4]]) as u64
            } else {
                0
            };
            let sign = if g(0) == 1 { "-" } else { "" };
            Param::Text(format!(
                "{sign}{:02}:{:02}:{:02}",
                days * 24 + g(5),
                g(6),
                g(7)
            ))
        }
        T_NULL => Param::Null,
        T_NEWDECIMAL | T_DECIMAL => Param::number(&String::from_utf8_lossy(r.lenenc_bytes()?)),
        _ => {
            let b = r.lenenc_bytes()?;
            match std::str::from_utf8(b) {
                Ok(s) => Param::Text(s.to_string()),
                Err(_) => Param::Bytes(b.to_vec()),
            }
        }
    })
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Conn<S> {
    fn deprecate_eof(&self) -> bool {
        self.caps & CLIENT_DEPRECATE_EOF != 0
    }

    fn send_err(&mut self, e: &TethysError) {
        let (code, state) = e.mysql_code();
        let msg = format!("errCode = 2, detailMessage = {e}");
        self.io.write_packet(&err_packet(code, state, &msg));
    }

    fn send_ok(&mut self, affected: u64, info: &str, more: bool) {
        let mut status = SERVER_STATUS_AUTOCOMMIT;
        if more {
            status |= SERVER_MORE_RESULTS_EXISTS;
        }
        let state = match self.before.take() {
            Some(b) if self.caps & CLIENT_SESSION_TRACK != 0 => b.changes(&self.session),
            _ => vec![],
        };
        let ok = OkPacket {
            header: 0,
            affected,
            status,
            info,
            session_state: &state,
        };
        self.io.write_packet(&ok.encode(self.caps));
    }

    async fn run(&mut self) -> std::io::Result<()> {
        loop {
            // An idle connection is closed after wait_timeout, as in MySQL.
            let idle = std::time::Duration::from_secs(
                self.session
                    .vars
                    .get("wait_timeout")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(28_800),
            );
            let Ok(read) = tokio::time::timeout(idle, self.io.read_packet()).await else {
                return Ok(());
            };
            let Some(pkt) = read? else {
                return Ok(());
            };
            if self.handle.killed.load(std::sync::atomic::Ordering::SeqCst) {
                return Ok(());
            }
            let Some((&cmd, body)) = pkt.split_first() else {
                continue;
            };
            let step = tethys_common::panic::contain("the command", self.command(cmd, body));
            match step.await {
                Ok(Step::Quit) => return Ok(()),
                Ok(Step::Silent) => continue,
                Ok(Step::Answered) => {}
                Err(e) => {
                    // A bug stopped the command: the client gets error 1105
                    // (after whatever part of an answer was written) and the
                    // connection goes on from a clean state.
                    self.handle.set_command("");
                    self.session.take_assigned();
                    self.send_err(&e);
                }
            }
            self.io.flush().await?;
        }
    }

    /// Runs one command; what it wrote is flushed by the caller.
    async fn command(&mut self, cmd: u8, body: &[u8]) -> Step {
        debug_point::panic_if_hit("FeCommand.panic");
        match cmd {
            COM_QUIT => return Step::Quit,
            COM_PING => self.send_ok(0, "", false),
            COM_INIT_DB => {
                let db = String::from_utf8_lossy(body).to_string();
                self.run_statement_text(&format!("USE `{}`", db.replace('`', "``")), false)
                    .await;
            }
            COM_QUERY => {
                let sql = String::from_utf8_lossy(body).to_string();
                self.run_statement_text(&sql, false).await;
            }
            COM_FIELD_LIST => self.field_list(body).await,
            COM_STMT_PREPARE => {
                let sql = String::from_utf8_lossy(body).to_string();
                self.prepare(sql).await;
            }
            COM_STMT_EXECUTE => self.execute_prepared(body).await,
            COM_STMT_CLOSE => {
                if body.len() >= 4 {
                    let id = u32::from_le_bytes([body[0], body[1], body[2], body[3]]);
                    self.session.prepared.close(id);
                }
                // No response for COM_STMT_CLOSE.
                return Step::Silent;
            }
            COM_STMT_SEND_LONG_DATA => return Step::Silent,
            COM_STMT_RESET | COM_RESET_CONNECTION | COM_SET_OPTION => self.send_ok(0, "", false),
            COM_STATISTICS => {
                let s = format!(
                    "Uptime: 0  Threads: {}  Questions: 0",
                    self.fe.conns().len()
                );
                self.io.write_packet(s.as_bytes());
            }
            other => self.send_err(&TethysError::NotSupported(format!(
                "Unknown command {other:#04x}"
            ))),
        }
        Step::Answered
    }

    async fn field_list(&mut self, body: &[u8]) {
        let table =
            String::from_utf8_lossy(body.split(|b| *b == 0).next().unwrap_or_default()).to_string();
        let t = self.session.database.as_ref().and_then(|db| {
            self.fe
                .catalog
                .read()
                .database(db)
                .and_then(|d| d.table(&table))
                .cloned()
        });
        let Some(t) = t else {
            self.send_err(&TethysError::UnknownTable {
                database: self.session.database.clone().unwrap_or_default(),
                table,
            });
            return;
        };
        let schema = t.schema.arrow_schema();
        for f in schema.fields() {
            let mut cd = column_def(f);
            cd.table = t.name.clone();
            cd.schema = self.session.database.clone().unwrap_or_default();
            let mut p = column_def_packet(&cd);
            p.push(0xfb);
            self.io.write_packet(&p);
        }
        self.end_result(false);
    }

    fn end_result(&mut self, more: bool) {
        let mut status = SERVER_STATUS_AUTOCOMMIT;
        if more {
            status |= SERVER_MORE_RESULTS_EXISTS;
        }
        if self.deprecate_eof() {
            self.io.write_packet(&ok_packet(0xfe, 0, status, self.caps));
        } else {
            self.io.write_packet(&eof_packet(status));
        }
    }

    /// COM_STMT_PREPARE: parses the statement once and keeps it; answers
    /// its parameters and, for a query, the columns it returns (planned
    /// with NULL parameters). libmariadb decodes the binary rows of
    /// COM_STMT_EXECUTE with these; announcing none made MariaDB
    /// Connector/ODBC's SQLColumns crash in mysql_stmt_store_result.
    async fn prepare(&mut self, sql: String) {
        let max = self
            .fe
            .limits
            .max_prepared_stmts
            .load(std::sync::atomic::Ordering::Relaxed);
        let prepared = match Prepared::new(&sql) {
            Ok(p) => p,
            Err(e) => {
                self.send_err(&e);
                return;
            }
        };
        let params = prepared.params();
        let columns = match prepared.bind(&vec![Param::Null; params]) {
            Ok(stmt) => executor::result_schema(&self.fe, &self.session, stmt)
                .await
                .ok()
                .flatten(),
            Err(_) => None,
        };
        let id = match self.session.prepared.add(prepared, max) {
            Ok(id) => id,
            Err(e) => {
                self.send_err(&e);
                return;
            }
        };
        let ncols = columns.as_ref().map_or(0, |s| s.fields().len());
        let mut p = vec![0u8];
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(&(ncols as u16).to_le_bytes());
        p.extend_from_slice(&(params as u16).to_le_bytes());
        p.push(0);
        p.extend_from_slice(&0u16.to_le_bytes());
        self.io.write_packet(&p);
        if params > 0 {
            for i in 0..params {
                let cd = ColumnDef {
                    schema: String::new(),
                    table: String::new(),
                    name: format!("?{i}"),
                    charset: CHARSET_BINARY,
                    length: 0,
                    column_type: crate::mysql::value::T_VAR_STRING,
                    flags: 0,
                    decimals: 0,
                };
                self.io.write_packet(&column_def_packet(&cd));
            }
            if !self.deprecate_eof() {
                self.io.write_packet(&eof_packet(SERVER_STATUS_AUTOCOMMIT));
            }
        }
        if let Some(schema) = &columns
            && ncols > 0
        {
            for f in schema.fields() {
                self.io.write_packet(&column_def_packet(&column_def(f)));
            }
            if !self.deprecate_eof() {
                self.io.write_packet(&eof_packet(SERVER_STATUS_AUTOCOMMIT));
            }
        }
    }

    /// COM_STMT_EXECUTE: the kept statement with the packet's values bound.
    async fn execute_prepared(&mut self, body: &[u8]) {
        let mut r = Reader::new(body);
        let parsed = (|| -> Result<(u32, Vec<Param>), Malformed> {
            let id = r.u32()?;
            let _flags = r.u8()?;
            let _iters = r.u32()?;
            let Some(st) = self.session.prepared.get_mut(id) else {
                return Ok((id, vec![]));
            };
            let n = st.params();
            let mut values = vec![];
            if n > 0 {
                let bitmap = r.take(n.div_ceil(8))?.to_vec();
                let bound = r.u8()?;
                if bound == 1 {
                    st.wire_types =
                        (0..n)
                            .map(|_| Ok((r.u8()?, r.u8()?)))
                            .collect::<Result<Vec<_>, Malformed>>()?;
                }
                if st.wire_types.len() != n {
                    return Err(Malformed);
                }
                for i in 0..n {
                    if bitmap[i / 8] & (1 << (i % 8)) != 0 {
                        values.push(Param::Null);
                    } else {
                        let (ty, flags) = st.wire_types[i];
                        values.push(read_param(&mut r, ty, flags & 0x80 != 0)?);
                    }
                }
            }
            Ok((id, values))
        })();
        let (id, values) = match parsed {
            Ok(v) => v,
            Err(_) => {
                self.send_err(&TethysError::Analysis(
                    "malformed COM_STMT_EXECUTE packet".into(),
                ));
                return;
            }
        };
        let Some(st) = self.session.prepared.get_mut(id) else {
            self.send_err(&TethysError::Analysis(format!(
                "Unknown prepared statement handler ({id}) given to mysqld_stmt_execute"
            )));
            return;
        };
        match st.bind(&values) {
            Ok(stmt) => {
                let text = match &stmt {
                    Statement::Bound(b) => b.text.clone(),
                    _ => st.text().to_string(),
                };
                self.handle.set_command(&text);
                self.run_statement(stmt, true, false).await;
                self.handle.set_command("");
            }
            Err(e) => self.send_err(&e),
        }
    }

    /// Runs every statement of a COM_QUERY (or a bound prepared statement).
    async fn run_statement_text(&mut self, sql: &str, binary: bool) {
        let stmts = if self.caps & CLIENT_MULTI_STATEMENTS != 0 && !binary {
            sql::split_statements(sql)
        } else {
            vec![sql.trim().trim_end_matches(';').to_string()]
        };
        let stmts = if stmts.is_empty() {
            vec![String::new()]
        } else {
            stmts
        };
        let n = stmts.len();
        for (i, s) in stmts.iter().enumerate() {
            let more = i + 1 < n;
            self.handle.set_command(s);
            let ok = self.run_one(s, binary, more).await;
            self.handle.set_command("");
            if !ok {
                break;
            }
        }
    }

    /// Runs one statement's text and writes its result; false if it failed.
    async fn run_one(&mut self, sql: &str, binary: bool, more: bool) -> bool {
        match sql::parse(sql) {
            Ok(stmt) => self.run_statement(stmt, binary, more).await,
            Err(e) => {
                self.send_err(&e);
                false
            }
        }
    }

    /// Runs one parsed statement and writes its result; false if it failed.
    async fn run_statement(&mut self, stmt: Statement, binary: bool, more: bool) -> bool {
        let is_insert = match &stmt {
            Statement::Insert { .. } => true,
            Statement::Bound(b) => b.insert,
            _ => false,
        };
        let timeout = if is_insert {
            std::time::Duration::from_secs(self.session.vars.insert_timeout_secs())
        } else {
            self.session.vars.query_timeout()
        };
        let mut kill = self.handle.kill_signal();
        kill.borrow_and_update();
        let fe = self.fe.clone();
        self.before = Some(crate::mysql::session_track::Before::of(&self.session));
        let result = {
            let work = async {
                let out = executor::execute(&fe, &mut self.session, stmt).await?;
                self.write_output(out, binary, more).await
            };
            tokio::select! {
                r = work => r,
                _ = kill.changed() => Err(TethysError::Cancelled),
                _ = tokio::time::sleep(timeout) => Err(TethysError::Timeout(timeout.as_secs())),
            }
        };
        *self.handle.db.lock().unwrap_or_else(|p| p.into_inner()) = self.session.database.clone();
        match result {
            Ok(()) => true,
            Err(e) => {
                self.send_err(&e);
                false
            }
        }
    }

    async fn write_output(
        &mut self,
        out: Output,
        binary: bool,
        more: bool,
    ) -> Result<(), TethysError> {
        match out {
            Output::Ok { affected, info } => {
                self.send_ok(affected, &info, more);
                Ok(())
            }
            Output::Rows(mut stream) => {
                use futures::StreamExt;
                let schema = stream.schema();
                let mut p = vec![];
                put_lenenc_int(&mut p, schema.fields().len() as u64);
                self.io.write_packet(&p);
                for f in schema.fields() {
                    self.io.write_packet(&column_def_packet(&column_def(f)));
                }
                if !self.deprecate_eof() {
                    self.io.write_packet(&eof_packet(SERVER_STATUS_AUTOCOMMIT));
                }
                let mut row = Vec::with_capacity(256);
                while let Some(batch) = stream.next().await {
                    let batch = batch.map_err(TethysError::from)?;
                    {
                        let enc = RowEncoder::new(&batch);
                        for i in 0..batch.num_rows() {
                            if binary {
                                enc.binary_row(i, &mut row);
                            } else {
                                enc.text_row(i, &mut row);
                            }
                            self.io.write_packet(&row);
                        }
                    }
                    if self.io.pending() > 1 << 20 {
                        self.io
                            .flush()
                            .await
                            .map_err(|e| TethysError::io("sending rows to the client", e))?;
                    }
                }
                self.end_result(more);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
#[path = "connection_fuzz.rs"]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_parameters_are_signed_unless_flagged_unsigned() {
        let read = |bytes: &[u8], unsigned: bool| {
            int_param(&mut Reader::new(bytes), bytes.len(), unsigned).unwrap()
        };
        assert_eq!(read(&[0xff], false), "-1");
        assert_eq!(read(&[0xff], true), "255");
        assert_eq!(read(&[0x00, 0x80], false), "-32768");
        assert_eq!(read(&[0xfe, 0xff, 0xff, 0xff], false), "-2");
        assert_eq!(read(&[0xfe, 0xff, 0xff, 0xff], true), "4294967294");
        assert_eq!(read(&[0xff; 8], false), "-1");
        assert_eq!(read(&[0xff; 8], true), "18446744073709551615");
        assert!(int_param(&mut Reader::new(&[1, 2]), 4, false).is_err());
    }

    #[test]
    fn a_time_parameter_of_any_days_reads() {
        use crate::mysql::value::T_TIME;
        let bytes = [8, 0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3];
        let text = read_param(&mut Reader::new(&bytes), T_TIME, false).unwrap();
        assert_eq!(text, Param::Text("103079215081:02:03".into()));
    }

    proptest::proptest! {
        /// Whatever bytes a client sends as a handshake or as a parameter
        /// of any type, the answer is a value or `Malformed`, never a panic.
        #[test]
        fn fuzz_client_bytes_never_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            ty in proptest::prelude::any::<u8>(),
            unsigned in proptest::prelude::any::<bool>(),
        ) {
            let started = std::time::Instant::now();
            let _ = crate::mysql::proto::parse_handshake_response(&bytes);
            // (A NULL parameter reads no bytes: a bounded number of reads.)
            let mut r = Reader::new(&bytes);
            for _ in 0..=bytes.len() {
                if read_param(&mut r, ty, unsigned).is_err() {
                    break;
                }
            }
            // An input that takes a second is a hang.
            proptest::prop_assert!(started.elapsed().as_secs() < 1, "{:?}", started.elapsed());
        }
    }
}
