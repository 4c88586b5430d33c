//! The MySQL wire protocol, owned by Tethys: framing ([`packet`]), packet
//! encodings ([`proto`]), values ([`value`]) and session-state tracking
//! ([`session_track`]). The connection that speaks it is the server's
//! (`server/connection.rs`).

pub mod packet;
pub mod proto;
pub mod session_track;
pub mod value;
