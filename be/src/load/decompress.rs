//! A Stream Load body as plain bytes, arriving chunk by chunk with bounded
//! memory, decompressed on the way when `compress_type` says so (gz, lz4
//! frames, zstd).
//!
//! Both the bytes that arrive and the bytes they decompress to count
//! against `streaming_load_max_mb` (a 10 KB gzip bomb that expands to
//! terabytes is refused at the limit). A decoder runs on the blocking pool
//! (at most [`MAX_DECODERS`] at once; more loads wait for a turn) between
//! two bounded channels, so neither the compressed input nor the plain
//! output piles up: a chunk's whole expansion never becomes one block.

use std::io::Read;
use std::sync::LazyLock;

use axum::body::BodyDataStream;
use bytes::Bytes;
use futures::StreamExt;
use tethys_common::{Result, TethysError};
use tokio::sync::{Semaphore, mpsc};

/// Largest body, compressed or not, MB (Doris' `streaming_load_max_mb`).
pub const MAX_BODY_MB: u64 = 10_240;
pub const MAX_BODY_BYTES: u64 = MAX_BODY_MB << 20;

/// Decoders running at once across loads.
pub const MAX_DECODERS: usize = 8;

static DECODERS: LazyLock<std::sync::Arc<Semaphore>> =
    LazyLock::new(|| std::sync::Arc::new(Semaphore::new(MAX_DECODERS)));

/// Plain chunks a decoder may have ready before it waits for the load.
const OUTPUT_CHUNKS: usize = 4;
/// The size of a plain chunk.
const OUTPUT_CHUNK_BYTES: usize = 1 << 16;

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

    fn decoder<'r>(self, input: impl Read + 'r) -> std::io::Result<Box<dyn Read + 'r>> {
        Ok(match self {
            Codec::Gz => Box::new(flate2::read::MultiGzDecoder::new(input)),
            Codec::Lz4 => Box::new(lz4_flex::frame::FrameDecoder::new(input)),
            Codec::Zstd => Box::new(zstd::stream::read::Decoder::new(input)?),
        })
    }
}

fn too_big(what: &str, limit: u64) -> TethysError {
    TethysError::DataQuality(format!(
        "the {what} body exceeds streaming_load_max_mb ({} MB)",
        limit >> 20
    ))
}

/// Compressed bytes arriving on a channel, read by a blocking decoder.
struct ChannelReader {
    rx: mpsc::Receiver<Bytes>,
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

/// A decoder working on the blocking pool.
struct Decoding {
    /// Compressed input; `None` once the body ended.
    input: Option<mpsc::Sender<Bytes>>,
    /// A chunk read from the body, waiting for room in `input`.
    pending: Option<Bytes>,
    output: mpsc::Receiver<std::result::Result<Bytes, TethysError>>,
}

/// A load's body as plain chunks.
pub struct PlainBody {
    body: BodyDataStream,
    body_ended: bool,
    /// Bytes that arrived (compressed, if the body is).
    pub arrived: u64,
    limit: u64,
    decoding: Option<Decoding>,
}

impl PlainBody {
    /// `body`, decompressed with `codec`; at most `limit` bytes in and out.
    pub async fn new(body: BodyDataStream, codec: Option<Codec>, limit: u64) -> PlainBody {
        let decoding = match codec {
            Some(codec) => Some(start_decoder(codec, limit).await),
            None => None,
        };
        PlainBody {
            body,
            body_ended: false,
            arrived: 0,
            limit,
            decoding,
        }
    }

    /// The next plain chunk; `None` at the end of the body.
    pub async fn next(&mut self) -> Result<Option<Bytes>> {
        let Some(d) = self.decoding.as_mut() else {
            return match self.body.next().await {
                Some(chunk) => Ok(Some(arrived(&mut self.arrived, self.limit, chunk)?)),
                None => Ok(None),
            };
        };
        loop {
            // Room for the waiting chunk, asked of a handle of the input so
            // that the branches below may drop the input itself.
            let input = d.input.clone().filter(|_| d.pending.is_some());
            tokio::select! {
                // Plain output first: it is what frees the decoder.
                biased;
                out = d.output.recv() => return out.transpose(),
                permit = async move {
                    match input {
                        Some(tx) => tx.reserve_owned().await.ok(),
                        None => std::future::pending().await,
                    }
                } => match (permit, d.pending.take()) {
                    (Some(p), Some(chunk)) => {
                        p.send(chunk);
                    }
                    // The decoder stopped reading: its answer is in the output.
                    _ => d.input = None,
                },
                chunk = self.body.next(), if !self.body_ended && d.pending.is_none() => {
                    match chunk {
                        Some(c) => d.pending = Some(arrived(&mut self.arrived, self.limit, c)?),
                        None => {
                            self.body_ended = true;
                            d.input = None;
                        }
                    }
                }
            }
        }
    }
}

/// Counts a chunk that arrived against the limit.
fn arrived(
    total: &mut u64,
    limit: u64,
    chunk: std::result::Result<Bytes, axum::Error>,
) -> Result<Bytes> {
    let chunk = chunk.map_err(|e| {
        TethysError::Backend(format!(
            "reading the request body failed (client gone?): {e}"
        ))
    })?;
    *total += chunk.len() as u64;
    if *total > limit {
        return Err(too_big("request", limit));
    }
    Ok(chunk)
}

/// Starts a decoder once one of the [`MAX_DECODERS`] turns is free.
async fn start_decoder(codec: Codec, limit: u64) -> Decoding {
    let (in_tx, in_rx) = mpsc::channel::<Bytes>(4);
    let (out_tx, out_rx) = mpsc::channel(OUTPUT_CHUNKS);
    let turn = DECODERS.clone().acquire_owned().await;
    tokio::task::spawn_blocking(move || {
        let _turn = turn;
        let send = |item| out_tx.blocking_send(item).is_ok();
        let reader = ChannelReader {
            rx: in_rx,
            cur: Bytes::new(),
        };
        let mut decoder = match codec.decoder(reader) {
            Ok(d) => d,
            Err(e) => {
                send(Err(undecodable(e)));
                return;
            }
        };
        let mut plain: u64 = 0;
        loop {
            let mut buf = vec![0u8; OUTPUT_CHUNK_BYTES];
            match decoder.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    plain += n as u64;
                    if plain > limit {
                        send(Err(too_big("decompressed", limit)));
                        return;
                    }
                    buf.truncate(n);
                    if !send(Ok(Bytes::from(buf))) {
                        return;
                    }
                }
                Err(e) => {
                    send(Err(undecodable(e)));
                    return;
                }
            }
        }
    });
    Decoding {
        input: Some(in_tx),
        pending: None,
        output: out_rx,
    }
}

fn undecodable(e: std::io::Error) -> TethysError {
    TethysError::DataQuality(format!("the body does not decompress: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn body_of(bytes: Vec<u8>, part: usize) -> BodyDataStream {
        let chunks: Vec<std::result::Result<Bytes, std::io::Error>> = bytes
            .chunks(part)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        axum::body::Body::from_stream(futures::stream::iter(chunks)).into_data_stream()
    }

    async fn read_all(codec: Option<Codec>, bytes: Vec<u8>, limit: u64) -> Result<Vec<u8>> {
        let mut b = PlainBody::new(body_of(bytes, 7), codec, limit).await;
        let mut got = vec![];
        while let Some(c) = b.next().await? {
            assert!(c.len() <= OUTPUT_CHUNK_BYTES);
            got.extend_from_slice(&c);
        }
        Ok(got)
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(vec![], flate2::Compression::default());
        gz.write_all(data).unwrap();
        gz.finish().unwrap()
    }

    #[tokio::test]
    async fn codecs() {
        let data = b"2026-01-01,1,a\n".repeat(1000);
        let limit = MAX_BODY_BYTES;
        assert_eq!(
            read_all(Some(Codec::Gz), gzip(&data), limit).await.unwrap(),
            data
        );
        let mut lz = lz4_flex::frame::FrameEncoder::new(vec![]);
        lz.write_all(&data).unwrap();
        let lz = lz.finish().unwrap();
        assert_eq!(read_all(Some(Codec::Lz4), lz, limit).await.unwrap(), data);
        let zs = zstd::encode_all(&data[..], 3).unwrap();
        assert_eq!(read_all(Some(Codec::Zstd), zs, limit).await.unwrap(), data);
        assert_eq!(read_all(None, data.clone(), limit).await.unwrap(), data);
        let bad = read_all(Some(Codec::Gz), b"not gzip at all".to_vec(), limit).await;
        assert!(bad.unwrap_err().to_string().contains("does not decompress"));
        assert!(Codec::parse("bz2").is_err());
        assert_eq!(Codec::parse("GZ").unwrap(), Some(Codec::Gz));
    }

    #[tokio::test]
    async fn bombs_and_big_bodies_stop_at_the_limit() {
        // 64 MiB of zeros in about 64 KiB of gzip.
        let bomb = gzip(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 1 << 20);
        let e = read_all(Some(Codec::Gz), bomb, 8 << 20).await.unwrap_err();
        assert!(
            e.to_string()
                .contains("the decompressed body exceeds streaming_load_max_mb (8 MB)"),
            "{e}"
        );
        let e = read_all(None, vec![b'x'; 3 << 20], 2 << 20)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("the request body exceeds"), "{e}");
    }
}
