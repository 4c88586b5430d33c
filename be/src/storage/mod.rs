//! Tablet storage: segments of column pages, rowsets, tablets and the engine
//! that holds them.
//!
//! Outside `storage/`, only the engine ([`StorageEngine`]: create, write,
//! publish, compact tablets) and the read API ([`read`]: snapshot a tablet
//! at a version, prune with its metadata, read pages through the page cache)
//! are visible; the modules below are the storage's own.

mod bloom;
mod clock_cache;
mod clone;
mod compaction;
mod delete_bitmap;
mod encoding;
mod engine;
mod merge;
mod page;
mod page_cache;
pub mod read;
mod segment;
mod short_key;
mod tablet;
mod zone_map;

pub use clone::{Snapshot, plain_name};
pub use compaction::CompactionKind;
pub use delete_bitmap::default_key_index_cache_bytes;
pub use engine::{CompactionConfig, StorageEngine};
pub use page_cache::default_capacity as default_page_cache_bytes;
pub use tablet::{MAX_TABLET_VERSION_NUM, RowsetMeta, Tablet, TabletMeta, WriteKind};

/// The page encodings, for `cargo bench -p tethys-be --bench encodings`
/// (a bench is a crate of its own and sees only what is public).
#[doc(hidden)]
pub mod bench {
    pub use super::encoding::Encoding;
    pub use super::page::{decode_page, encode_page, sum_page};
}
