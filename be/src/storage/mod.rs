//! Tablet storage: segments of column pages, rowsets, tablets and the engine
//! that holds them.

pub mod clock_cache;
pub mod compaction;
pub mod delete_bitmap;
pub mod encoding;
pub mod engine;
pub mod merge;
pub mod page;
pub mod page_cache;
pub mod segment;
pub mod short_key;
pub mod tablet;
pub mod zone_map;

pub use engine::StorageEngine;
