//! Decompressing a Stream Load body as it streams in (`compress_type`: gz,
//! lz4 frames, zstd). A decoder thread reads compressed chunks from a bounded
//! channel and hands back decompressed chunks, so a compressed body is never
//! held whole in memory.

use std::io::Read;

use bytes::Bytes;
use tethys_common::{Result, TethysError};

/// Body compression codecs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Codec {
    Gz,
    Lz4,
    Zstd,
}

impl Codec {
    /// Parses the `compress_type` header.
    pub fn parse(text: &str) -> Result<Option<Codec>> {
        match text.trim().to_ascii_lowercase().as_str() {
            "" => Ok(None),
            "gz" | "gzip" => Ok(Some(Codec::Gz)),
            "lz4" | "lz4frame" => Ok(Some(Codec::Lz4)),
            "zstd" => Ok(Some(Codec::Zstd)),
            "lzo" | "lzop" | "bz2" | "deflate" => Err(TethysError::NotSupported(format!(
                "compress_type {text} is not supported yet; use gz, lz4 or zstd"
            ))),
            other => Err(TethysError::Analysis(format!(
                "unknown compress_type: {other}"
            ))),
        }
    }
}

/// Reads compressed bytes arriving on a channel.
struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    cur: Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.cur.is_empty() {
            match self.rx.blocking_recv() {
                Some(b) => self.cur = b,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len());
        buf[..n].copy_from_slice(&self.cur[..n]);
        self.cur = self.cur.slice(n..);
        Ok(n)
    }
}

/// A streaming decompressor.
pub struct Decompressor {
    input: Option<tokio::sync::mpsc::Sender<Bytes>>,
    output: tokio::sync::mpsc::UnboundedReceiver<std::result::Result<Vec<u8>, String>>,
}

impl Decompressor {
    pub fn new(codec: Codec) -> Decompressor {
        let (in_tx, in_rx) = tokio::sync::mpsc::channel::<Bytes>(4);
        let (out_tx, out_rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            let reader = ChannelReader {
                rx: in_rx,
                cur: Bytes::new(),
            };
            let mut decoder: Box<dyn Read> = match codec {
                Codec::Gz => Box::new(flate2::read::MultiGzDecoder::new(reader)),
                Codec::Lz4 => Box::new(lz4_flex::frame::FrameDecoder::new(reader)),
                Codec::Zstd => match zstd::stream::read::Decoder::new(reader) {
                    Ok(d) => Box::new(d),
                    Err(e) => {
                        let _ = out_tx.send(Err(e.to_string()));
                        return;
                    }
                },
            };
            let mut buf = vec![0u8; 1 << 16];
            loop {
                match decoder.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        if out_tx.send(Ok(buf[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = out_tx.send(Err(e.to_string()));
                        return;
                    }
                }
            }
        });
        Decompressor {
            input: Some(in_tx),
            output: out_rx,
        }
    }

    fn drain(&mut self, out: &mut Vec<Vec<u8>>) -> Result<()> {
        while let Ok(item) = self.output.try_recv() {
            out.push(item.map_err(|e| {
                TethysError::DataQuality(format!("the body does not decompress: {e}"))
            })?);
        }
        Ok(())
    }

    /// Feeds compressed bytes; returns what has been decompressed so far.
    pub async fn push(&mut self, chunk: Bytes) -> Result<Vec<Vec<u8>>> {
        let mut out = vec![];
        if let Some(tx) = &self.input
            && tx.send(chunk).await.is_err()
        {
            // The decoder stopped early; its error (if any) is in the output.
            self.input = None;
        }
        self.drain(&mut out)?;
        Ok(out)
    }

    /// Ends the input; returns the rest of the output.
    pub async fn finish(mut self) -> Result<Vec<Vec<u8>>> {
        self.input = None;
        let mut out = vec![];
        while let Some(item) = self.output.recv().await {
            out.push(item.map_err(|e| {
                TethysError::DataQuality(format!("the body does not decompress: {e}"))
            })?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    async fn roundtrip(codec: Codec, compressed: Vec<u8>, expect: &[u8]) {
        let mut d = Decompressor::new(codec);
        let mut got = vec![];
        for part in compressed.chunks(7) {
            for o in d.push(Bytes::copy_from_slice(part)).await.unwrap() {
                got.extend(o);
            }
        }
        for o in d.finish().await.unwrap() {
            got.extend(o);
        }
        assert_eq!(got, expect);
    }

    #[tokio::test]
    async fn codecs() {
        let data = b"2026-01-01,1,a\n".repeat(1000);
        let mut gz = flate2::write::GzEncoder::new(vec![], flate2::Compression::default());
        gz.write_all(&data).unwrap();
        roundtrip(Codec::Gz, gz.finish().unwrap(), &data).await;
        let mut lz = lz4_flex::frame::FrameEncoder::new(vec![]);
        lz.write_all(&data).unwrap();
        roundtrip(Codec::Lz4, lz.finish().unwrap(), &data).await;
        roundtrip(Codec::Zstd, zstd::encode_all(&data[..], 3).unwrap(), &data).await;
        let mut d = Decompressor::new(Codec::Gz);
        let _ = d.push(Bytes::from_static(b"not gzip at all")).await;
        assert!(d.finish().await.is_err());
        assert!(Codec::parse("bz2").is_err());
        assert_eq!(Codec::parse("GZ").unwrap(), Some(Codec::Gz));
    }
}
