//! What MySQL clients and BI tools read about the server and its tables:
//! character sets and collations, and the MySQL-shaped `information_schema`.

pub mod columns;
pub mod information_schema;

pub fn fmt_time(ms: i64) -> String {
    if ms <= 0 {
        return "NULL".into();
    }
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .map(|d| d.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| "NULL".into())
}
