//! MySQL wire encodings: capability flags, length-encoded values, and the
//! handshake, OK, ERR, EOF and column-definition packets.

use sha1::{Digest, Sha1};

pub const CLIENT_LONG_PASSWORD: u32 = 1;
pub const CLIENT_FOUND_ROWS: u32 = 2;
pub const CLIENT_LONG_FLAG: u32 = 4;
pub const CLIENT_CONNECT_WITH_DB: u32 = 8;
pub const CLIENT_PROTOCOL_41: u32 = 512;
pub const CLIENT_INTERACTIVE: u32 = 1024;
pub const CLIENT_SSL: u32 = 2048;
pub const CLIENT_TRANSACTIONS: u32 = 8192;
pub const CLIENT_SECURE_CONNECTION: u32 = 32768;
pub const CLIENT_MULTI_STATEMENTS: u32 = 1 << 16;
pub const CLIENT_MULTI_RESULTS: u32 = 1 << 17;
pub const CLIENT_PS_MULTI_RESULTS: u32 = 1 << 18;
pub const CLIENT_PLUGIN_AUTH: u32 = 1 << 19;
pub const CLIENT_CONNECT_ATTRS: u32 = 1 << 20;
pub const CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA: u32 = 1 << 21;
pub const CLIENT_SESSION_TRACK: u32 = 1 << 23;
pub const CLIENT_DEPRECATE_EOF: u32 = 1 << 24;

/// Capabilities this server offers.
pub const SERVER_CAPABILITIES: u32 = CLIENT_LONG_PASSWORD
    | CLIENT_FOUND_ROWS
    | CLIENT_LONG_FLAG
    | CLIENT_CONNECT_WITH_DB
    | CLIENT_PROTOCOL_41
    | CLIENT_INTERACTIVE
    | CLIENT_TRANSACTIONS
    | CLIENT_SECURE_CONNECTION
    | CLIENT_MULTI_STATEMENTS
    | CLIENT_MULTI_RESULTS
    | CLIENT_PS_MULTI_RESULTS
    | CLIENT_PLUGIN_AUTH
    | CLIENT_CONNECT_ATTRS
    | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
    | CLIENT_SESSION_TRACK
    | CLIENT_DEPRECATE_EOF;

pub const SERVER_STATUS_AUTOCOMMIT: u16 = 0x0002;
pub const SERVER_MORE_RESULTS_EXISTS: u16 = 0x0008;
pub const SERVER_SESSION_STATE_CHANGED: u16 = 0x4000;

/// utf8_general_ci, what Doris announces.
pub const CHARSET_UTF8: u16 = 33;
/// binary
pub const CHARSET_BINARY: u16 = 63;

pub const NATIVE_PASSWORD: &str = "mysql_native_password";

pub const COM_QUIT: u8 = 0x01;
pub const COM_INIT_DB: u8 = 0x02;
pub const COM_QUERY: u8 = 0x03;
pub const COM_FIELD_LIST: u8 = 0x04;
pub const COM_STATISTICS: u8 = 0x09;
pub const COM_PING: u8 = 0x0e;
pub const COM_STMT_PREPARE: u8 = 0x16;
pub const COM_STMT_EXECUTE: u8 = 0x17;
pub const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
pub const COM_STMT_CLOSE: u8 = 0x19;
pub const COM_STMT_RESET: u8 = 0x1a;
pub const COM_SET_OPTION: u8 = 0x1b;
pub const COM_RESET_CONNECTION: u8 = 0x1f;

/// Appends a length-encoded integer.
pub fn put_lenenc_int(out: &mut Vec<u8>, v: u64) {
    if v < 251 {
        out.push(v as u8);
    } else if v < 1 << 16 {
        out.push(0xfc);
        out.extend_from_slice(&(v as u16).to_le_bytes());
    } else if v < 1 << 24 {
        out.push(0xfd);
        out.extend_from_slice(&(v as u32).to_le_bytes()[..3]);
    } else {
        out.push(0xfe);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// Appends a length-encoded string.
pub fn put_lenenc_str(out: &mut Vec<u8>, s: &[u8]) {
    put_lenenc_int(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// A reader over a client packet that never panics on short input.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// The client sent a packet shorter or stranger than the protocol allows.
#[derive(Debug)]
pub struct Malformed;

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        let end = self.pos.checked_add(n).ok_or(Malformed)?;
        if end > self.buf.len() {
            return Err(Malformed);
        }
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }
    pub fn u16(&mut self) -> Result<u16, Malformed> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    pub fn u32(&mut self) -> Result<u32, Malformed> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn u64(&mut self) -> Result<u64, Malformed> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    pub fn lenenc_int(&mut self) -> Result<u64, Malformed> {
        match self.u8()? {
            0xfc => Ok(self.u16()? as u64),
            0xfd => {
                let b = self.take(3)?;
                Ok(u32::from_le_bytes([b[0], b[1], b[2], 0]) as u64)
            }
            0xfe => self.u64(),
            0xfb | 0xff => Err(Malformed),
            v => Ok(v as u64),
        }
    }
    pub fn lenenc_bytes(&mut self) -> Result<&'a [u8], Malformed> {
        let n = self.lenenc_int()?;
        self.take(usize::try_from(n).map_err(|_| Malformed)?)
    }
    pub fn null_str(&mut self) -> Result<&'a [u8], Malformed> {
        let rest = &self.buf[self.pos.min(self.buf.len())..];
        let n = rest.iter().position(|b| *b == 0).ok_or(Malformed)?;
        let s = &rest[..n];
        self.pos += n + 1;
        Ok(s)
    }
    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos.min(self.buf.len())..];
        self.pos = self.buf.len();
        s
    }
}

/// Builds the initial handshake (protocol v10).
pub fn handshake_v10(conn_id: u32, scramble: &[u8; 20], server_version: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(128);
    p.push(10);
    p.extend_from_slice(server_version.as_bytes());
    p.push(0);
    p.extend_from_slice(&conn_id.to_le_bytes());
    p.extend_from_slice(&scramble[..8]);
    p.push(0);
    p.extend_from_slice(&(SERVER_CAPABILITIES as u16).to_le_bytes());
    p.push(CHARSET_UTF8 as u8);
    p.extend_from_slice(&SERVER_STATUS_AUTOCOMMIT.to_le_bytes());
    p.extend_from_slice(&((SERVER_CAPABILITIES >> 16) as u16).to_le_bytes());
    p.push(21);
    p.extend_from_slice(&[0u8; 10]);
    p.extend_from_slice(&scramble[8..]);
    p.push(0);
    p.extend_from_slice(NATIVE_PASSWORD.as_bytes());
    p.push(0);
    p
}

/// What a client said in its handshake response.
#[derive(Debug, Default)]
pub struct HandshakeResponse {
    pub capabilities: u32,
    pub user: String,
    pub auth: Vec<u8>,
    pub database: Option<String>,
    pub plugin: Option<String>,
}

/// Parses HandshakeResponse41.
pub fn parse_handshake_response(p: &[u8]) -> Result<HandshakeResponse, Malformed> {
    let mut r = Reader::new(p);
    let caps = r.u32()?;
    if caps & CLIENT_PROTOCOL_41 == 0 {
        return Err(Malformed);
    }
    let _max_packet = r.u32()?;
    let _charset = r.u8()?;
    r.take(23)?;
    let user = String::from_utf8_lossy(r.null_str()?).to_string();
    let auth = if caps & CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA != 0 {
        r.lenenc_bytes()?.to_vec()
    } else if caps & CLIENT_SECURE_CONNECTION != 0 {
        let n = r.u8()? as usize;
        r.take(n)?.to_vec()
    } else {
        r.null_str()?.to_vec()
    };
    let mut database = None;
    if caps & CLIENT_CONNECT_WITH_DB != 0 && r.remaining() > 0 {
        let db = String::from_utf8_lossy(r.null_str()?).to_string();
        if !db.is_empty() {
            database = Some(db);
        }
    }
    let mut plugin = None;
    if caps & CLIENT_PLUGIN_AUTH != 0 && r.remaining() > 0 {
        plugin = Some(String::from_utf8_lossy(r.null_str().unwrap_or_default()).to_string());
    }
    Ok(HandshakeResponse {
        capabilities: caps,
        user,
        auth,
        database,
        plugin,
    })
}

/// Checks a mysql_native_password response against a stored password.
pub fn check_native_password(scramble: &[u8; 20], password: &str, response: &[u8]) -> bool {
    if password.is_empty() {
        return response.is_empty();
    }
    if response.len() != 20 {
        return false;
    }
    let stage1 = Sha1::digest(password.as_bytes());
    let stage2 = Sha1::digest(stage1);
    let mut h = Sha1::new();
    h.update(scramble);
    h.update(stage2);
    let mix = h.finalize();
    (0..20).all(|i| response[i] ^ mix[i] == stage1[i])
}

/// An OK packet. The info text is a length-encoded string, as MySQL's
/// `net_send_ok` writes it (the protocol documentation's `string<EOF>` is
/// not what servers send, nor what libmysqlclient or Rust's mysql_common
/// read); with `CLIENT_SESSION_TRACK` it is there even when empty, and
/// `session_state` (see `session_track`) follows it. Offering
/// session tracking is what makes Node's mysql2 read it length-encoded: it
/// reads `string<EOF>` from servers that do not.
pub struct OkPacket<'a> {
    /// 0x00, or 0xFE when it ends a result set under DEPRECATE_EOF.
    pub header: u8,
    pub affected: u64,
    pub status: u16,
    pub info: &'a str,
    pub session_state: &'a [u8],
}

impl OkPacket<'_> {
    /// The packet for a client with capabilities `caps` (no last insert
    /// id, no warnings: Tethys has neither).
    pub fn encode(&self, caps: u32) -> Vec<u8> {
        let track = caps & CLIENT_SESSION_TRACK != 0;
        let status = if track && !self.session_state.is_empty() {
            self.status | SERVER_SESSION_STATE_CHANGED
        } else {
            self.status
        };
        let mut p = vec![self.header];
        put_lenenc_int(&mut p, self.affected);
        put_lenenc_int(&mut p, 0);
        if caps & CLIENT_PROTOCOL_41 != 0 {
            p.extend_from_slice(&status.to_le_bytes());
            p.extend_from_slice(&0u16.to_le_bytes());
        } else if caps & CLIENT_TRANSACTIONS != 0 {
            p.extend_from_slice(&status.to_le_bytes());
        }
        if track || !self.info.is_empty() {
            put_lenenc_str(&mut p, self.info.as_bytes());
        }
        if track && !self.session_state.is_empty() {
            put_lenenc_str(&mut p, self.session_state);
        }
        p
    }
}

/// An OK packet with no info.
pub fn ok_packet(header: u8, affected: u64, status: u16, caps: u32) -> Vec<u8> {
    OkPacket {
        header,
        affected,
        status,
        info: "",
        session_state: &[],
    }
    .encode(caps)
}

/// An ERR packet.
pub fn err_packet(code: u16, sqlstate: &str, msg: &str) -> Vec<u8> {
    let mut p = vec![0xff];
    p.extend_from_slice(&code.to_le_bytes());
    p.push(b'#');
    let mut st = sqlstate.as_bytes().to_vec();
    st.resize(5, b'0');
    p.extend_from_slice(&st);
    p.extend_from_slice(msg.as_bytes());
    p
}

/// An EOF packet.
pub fn eof_packet(status: u16) -> Vec<u8> {
    let mut p = vec![0xfe, 0, 0];
    p.extend_from_slice(&status.to_le_bytes());
    p
}

/// One column of a result set, as the protocol describes it.
#[derive(Debug, Clone)]
pub struct ColumnDef {
    pub schema: String,
    pub table: String,
    pub name: String,
    pub charset: u16,
    pub length: u32,
    pub column_type: u8,
    pub flags: u16,
    pub decimals: u8,
}

/// A ColumnDefinition41 packet.
pub fn column_def_packet(c: &ColumnDef) -> Vec<u8> {
    let mut p = Vec::with_capacity(64 + c.name.len());
    put_lenenc_str(&mut p, b"def");
    put_lenenc_str(&mut p, c.schema.as_bytes());
    put_lenenc_str(&mut p, c.table.as_bytes());
    put_lenenc_str(&mut p, c.table.as_bytes());
    put_lenenc_str(&mut p, c.name.as_bytes());
    put_lenenc_str(&mut p, c.name.as_bytes());
    p.push(0x0c);
    p.extend_from_slice(&c.charset.to_le_bytes());
    p.extend_from_slice(&c.length.to_le_bytes());
    p.push(c.column_type);
    p.extend_from_slice(&c.flags.to_le_bytes());
    p.push(c.decimals);
    p.extend_from_slice(&[0, 0]);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ok_packet_framing_for_each_capability_combination() {
        let info = "{'label':'l1'}";
        let base = CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS;
        // Header, affected 1, id 0, status, warnings, length-encoded info.
        let mut want = vec![0, 1, 0, 2, 0, 0, 0, info.len() as u8];
        want.extend_from_slice(info.as_bytes());
        let insert = OkPacket {
            header: 0,
            affected: 1,
            status: 2,
            info,
            session_state: &[],
        };
        assert_eq!(insert.encode(base), want);
        assert_eq!(insert.encode(base | CLIENT_SESSION_TRACK), want);
        // An empty info is left out, unless session tracking was negotiated.
        assert_eq!(ok_packet(0, 0, 2, base), vec![0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(
            ok_packet(0xfe, 0, 2, base | CLIENT_SESSION_TRACK),
            vec![0xfe, 0, 0, 2, 0, 0, 0, 0]
        );
        assert_eq!(ok_packet(0xfe, 0, 2, base), vec![0xfe, 0, 0, 2, 0, 0, 0]);
        // Before protocol 4.1 there are no warnings, and without
        // CLIENT_TRANSACTIONS no status either.
        assert_eq!(ok_packet(0, 0, 2, CLIENT_TRANSACTIONS), vec![0, 0, 0, 2, 0]);
        assert_eq!(ok_packet(0, 0, 2, 0), vec![0, 0, 0]);
        // Session state follows the info, with SERVER_SESSION_STATE_CHANGED set.
        let with_state = OkPacket {
            header: 0,
            affected: 0,
            status: 2,
            info: "",
            session_state: &[1, 2, 1, b'd'],
        };
        assert_eq!(
            with_state.encode(base | CLIENT_SESSION_TRACK),
            vec![0, 0, 0, 2, 0x40, 0, 0, 0, 4, 1, 2, 1, b'd']
        );
        assert_eq!(with_state.encode(base), vec![0, 0, 0, 2, 0, 0, 0]);
    }

    #[test]
    fn lenenc() {
        for v in [0u64, 250, 251, 65535, 65536, 1 << 24, u64::MAX] {
            let mut b = vec![];
            put_lenenc_int(&mut b, v);
            assert_eq!(Reader::new(&b).lenenc_int().unwrap(), v);
        }
        assert!(Reader::new(&[0xfc, 1]).lenenc_int().is_err());
    }

    #[test]
    fn native_password() {
        let scramble = *b"abcdefghijklmnopqrst";
        let pw = "secret";
        let s1 = Sha1::digest(pw.as_bytes());
        let s2 = Sha1::digest(s1);
        let mut h = Sha1::new();
        h.update(scramble);
        h.update(s2);
        let mix = h.finalize();
        let resp: Vec<u8> = (0..20).map(|i| s1[i] ^ mix[i]).collect();
        assert!(check_native_password(&scramble, pw, &resp));
        assert!(!check_native_password(&scramble, "other", &resp));
        assert!(check_native_password(&scramble, "", &[]));
        assert!(!check_native_password(&scramble, "", &resp));
    }

    #[test]
    fn malformed_handshake_is_an_error() {
        assert!(parse_handshake_response(&[1, 2, 3]).is_err());
        let mut p = vec![];
        p.extend_from_slice(&(CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION).to_le_bytes());
        p.extend_from_slice(&[0; 4 + 1 + 23]);
        p.extend_from_slice(b"root\0");
        p.push(50); // claims 50 bytes of auth data that are not there
        assert!(parse_handshake_response(&p).is_err());
    }
}
