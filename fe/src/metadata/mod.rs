//! What MySQL clients and BI tools read about the server and its tables:
//! character sets and collations, and the MySQL-shaped `information_schema`.

pub mod charsets;
pub mod columns;
pub mod information_schema;
