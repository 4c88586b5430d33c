//! MySQL packet framing: 3-byte little-endian length, 1-byte sequence id,
//! payloads of 16 MiB - 1 split across packets.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const MAX_PAYLOAD: usize = 0xff_ffff;

/// Largest logical packet accepted from a client (multi-packet bodies included).
pub const MAX_CLIENT_PACKET: usize = 64 << 20;

/// Largest packet accepted before a client has logged in: a handshake
/// response is a few hundred bytes.
pub const MAX_LOGIN_PACKET: usize = 64 << 10;

/// Reads and writes MySQL packets on one connection.
pub struct PacketIo<S> {
    stream: S,
    /// Sequence id of the next packet to write.
    pub seq: u8,
    out: Vec<u8>,
    /// The largest logical packet [`PacketIo::read_packet`] accepts.
    pub max_packet: usize,
}

impl<S: AsyncRead + AsyncWrite + Unpin> PacketIo<S> {
    pub fn new(stream: S) -> Self {
        PacketIo {
            stream,
            seq: 0,
            out: Vec::with_capacity(1 << 16),
            max_packet: MAX_LOGIN_PACKET,
        }
    }

    /// Reads one logical packet. `Ok(None)` on a clean EOF between packets.
    /// Memory grows with the bytes that arrive, not with the length a
    /// header claims.
    pub async fn read_packet(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        let mut payload = Vec::new();
        loop {
            let mut hdr = [0u8; 4];
            match self.stream.read_exact(&mut hdr).await {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && payload.is_empty() => {
                    return Ok(None);
                }
                Err(e) => return Err(e),
            }
            let len = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], 0]) as usize;
            self.seq = hdr[3].wrapping_add(1);
            if payload.len() + len > self.max_packet {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("packet larger than {} bytes", self.max_packet),
                ));
            }
            let got = (&mut self.stream)
                .take(len as u64)
                .read_to_end(&mut payload)
                .await?;
            if got < len {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            if len < MAX_PAYLOAD {
                return Ok(Some(payload));
            }
        }
    }

    /// Queues one logical packet (split as needed) for writing.
    pub fn write_packet(&mut self, payload: &[u8]) {
        let mut rest = payload;
        loop {
            let n = rest.len().min(MAX_PAYLOAD);
            self.out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
            self.out.push(self.seq);
            self.seq = self.seq.wrapping_add(1);
            self.out.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            if n < MAX_PAYLOAD {
                break;
            }
        }
    }

    /// Bytes queued but not yet flushed.
    pub fn pending(&self) -> usize {
        self.out.len()
    }

    /// Sends everything queued.
    pub async fn flush(&mut self) -> std::io::Result<()> {
        if !self.out.is_empty() {
            self.stream.write_all(&self.out).await?;
            self.out.clear();
        }
        self.stream.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn roundtrip_large_packet() {
        let (a, b) = tokio::io::duplex(1 << 20);
        let mut w = PacketIo::new(a);
        let mut r = PacketIo::new(b);
        r.max_packet = MAX_CLIENT_PACKET;
        let big = vec![7u8; MAX_PAYLOAD + 10];
        let writer = tokio::spawn(async move {
            w.write_packet(&big);
            w.write_packet(b"x");
            w.flush().await.unwrap();
            w
        });
        let p = r.read_packet().await.unwrap().unwrap();
        assert_eq!(p.len(), MAX_PAYLOAD + 10);
        assert_eq!(r.read_packet().await.unwrap().unwrap(), b"x");
        drop(writer.await.unwrap());
        assert!(r.read_packet().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_packet_over_the_limit_is_refused_before_its_bytes_arrive() {
        use tokio::io::AsyncWriteExt;
        let (mut a, b) = tokio::io::duplex(1 << 10);
        let mut r = PacketIo::new(b);
        // A header claiming 16 MiB and nothing after it: refused at once.
        a.write_all(&[0xff, 0xff, 0xff, 0]).await.unwrap();
        let e = r.read_packet().await.unwrap_err();
        assert!(e.to_string().contains("larger than 65536 bytes"), "{e}");
        // A packet cut short is an error, not a shorter packet.
        let (mut a, b) = tokio::io::duplex(1 << 10);
        let mut r = PacketIo::new(b);
        a.write_all(&[10, 0, 0, 0, 1, 2, 3]).await.unwrap();
        drop(a);
        assert!(r.read_packet().await.is_err());
    }
}
