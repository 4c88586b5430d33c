//! Checksummed records of an append-only log: the FE's edit log and the
//! BE's group commit WALs.
//!
//! A record is `u32 length | u32 crc32c(payload) | u32 crc32c(the 8 bytes
//! before) | payload`, little-endian. The header's own checksum vouches for
//! the length, which tells the two ways a log can end badly apart:
//!
//! * the file ends inside a record: a crash in the middle of an append that
//!   was never acknowledged (the append fsyncs before it is). The log ends at
//!   the last whole record (a torn tail) and the writer cuts the rest;
//! * a whole record fails a checksum: the disk changed bytes that were
//!   acknowledged. That is damage, reported with its offset, never skipped,
//!   even in the last record (the first framing of both logs had no header
//!   checksum and took a bad last record for a torn one, losing it).

use std::io::Read;

/// Bytes before a record's payload.
pub const HEADER_LEN: usize = 12;

/// A whole record that fails a check, at `offset` bytes into the records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub offset: u64,
    pub why: String,
}

/// One record as it is appended.
pub fn frame(payload: &[u8]) -> Option<Vec<u8>> {
    let len = u32::try_from(payload.len()).ok()?;
    let mut out = Vec::with_capacity(payload.len() + HEADER_LEN);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    let header_crc = crc32c::crc32c(&out);
    out.extend_from_slice(&header_crc.to_le_bytes());
    out.extend_from_slice(payload);
    Some(out)
}

/// Reads records back until the end, a torn tail, or damage.
pub struct FrameReader<R> {
    inner: R,
    /// Where the next record starts: after the last whole record.
    offset: u64,
    max_payload: usize,
    torn: bool,
}

impl<R: Read> FrameReader<R> {
    /// `max_payload` bounds what one record may claim (a larger length is
    /// damage, not an allocation).
    pub fn new(inner: R, max_payload: usize) -> Self {
        FrameReader {
            inner,
            offset: 0,
            max_payload,
            torn: false,
        }
    }

    /// Bytes of whole records read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Whether the records ended inside a record (a torn append).
    pub fn torn(&self) -> bool {
        self.torn
    }

    /// The next record's payload; `Ok(None)` at the end or a torn tail.
    pub fn next_record(&mut self) -> Result<Option<Vec<u8>>, Damage> {
        let mut head = [0u8; HEADER_LEN];
        let got = self.fill(&mut head)?;
        if got == 0 {
            return Ok(None);
        }
        if got < HEADER_LEN {
            self.torn = true;
            return Ok(None);
        }
        let word = |i: usize| u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
        if crc32c::crc32c(&head[..8]) != word(8) {
            return Err(self.damage("has a header that fails its checksum".into()));
        }
        let len = word(0) as usize;
        if len > self.max_payload {
            return Err(self.damage(format!(
                "claims {len} bytes, more than a record may hold ({})",
                self.max_payload
            )));
        }
        let mut payload = vec![0u8; len];
        if self.fill(&mut payload)? < len {
            self.torn = true;
            return Ok(None);
        }
        if crc32c::crc32c(&payload) != word(4) {
            return Err(self.damage("fails its checksum".into()));
        }
        self.offset += (HEADER_LEN + len) as u64;
        Ok(Some(payload))
    }

    fn damage(&self, why: String) -> Damage {
        Damage {
            offset: self.offset,
            why,
        }
    }

    /// Reads until `buf` is full or the input ends; the bytes read.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, Damage> {
        let mut got = 0;
        while got < buf.len() {
            match self.inner.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.damage(format!("cannot be read: {e}"))),
            }
        }
        Ok(got)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(payloads: &[&[u8]]) -> Vec<u8> {
        payloads.iter().flat_map(|p| frame(p).unwrap()).collect()
    }

    fn read_all(bytes: &[u8]) -> (Result<Vec<Vec<u8>>, Damage>, bool, u64) {
        let mut r = FrameReader::new(bytes, 1 << 20);
        let mut out = vec![];
        loop {
            match r.next_record() {
                Ok(Some(p)) => out.push(p),
                Ok(None) => return (Ok(out), r.torn(), r.offset()),
                Err(d) => return (Err(d), r.torn(), r.offset()),
            }
        }
    }

    #[test]
    fn whole_records_read_back() {
        let bytes = log(&[b"one", b"", b"three"]);
        let (got, torn, offset) = read_all(&bytes);
        assert_eq!(
            got.unwrap(),
            vec![b"one".to_vec(), vec![], b"three".to_vec()]
        );
        assert!(!torn);
        assert_eq!(offset, bytes.len() as u64);
    }

    proptest::proptest! {
        /// A log cut anywhere reads as the records before the cut (torn when
        /// the cut is inside one); a byte flipped anywhere is damage at the
        /// record holding it, never fewer records without a word.
        #[test]
        fn cuts_are_torn_tails_and_flips_are_damage(
            at in proptest::prelude::any::<proptest::sample::Index>(),
            flip in 1u8..=255,
        ) {
            let bytes = log(&[b"first record", b"second", b"the last record"]);
            let i = at.index(bytes.len());
            let (got, torn, offset) = read_all(&bytes[..i]);
            let whole = got.unwrap().len();
            let ends = [0usize, 24, 42, 69];
            proptest::prop_assert_eq!(ends[whole] as u64, offset);
            proptest::prop_assert_eq!(torn, i != ends[whole]);
            let mut flipped = bytes.clone();
            flipped[i] ^= flip;
            let (got, _, _) = read_all(&flipped);
            let damage = got.unwrap_err();
            let record = ends.iter().rposition(|&e| e <= i).unwrap();
            proptest::prop_assert_eq!(damage.offset, ends[record] as u64);
        }
    }
}
