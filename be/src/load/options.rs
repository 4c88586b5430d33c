//! Stream Load request headers.

use axum::http::HeaderMap;
use tethys_common::{Result, TethysError};

/// Input formats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Format {
    Csv,
    Json,
}

/// Everything the headers of one load say.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub label: String,
    pub format: Format,
    pub column_separator: Vec<u8>,
    pub line_delimiter: Vec<u8>,
    /// The `columns` header as written (names and `name = expr` items).
    pub columns: Option<String>,
    /// The `where` header.
    pub where_expr: Option<String>,
    pub max_filter_ratio: f64,
    pub strict_mode: bool,
    pub timeout_secs: i64,
    pub skip_lines: usize,
    pub trim_double_quotes: bool,
    pub strip_outer_array: bool,
    pub read_json_by_line: bool,
    pub two_phase_commit: bool,
    pub comment: String,
    pub compress: Option<super::decompress::Codec>,
    /// CSV enclose (quote) byte and escape byte.
    pub enclose: Option<u8>,
    pub escape: Option<u8>,
    /// The `partitions` header: rows of other partitions are filtered.
    pub partitions: Option<Vec<String>>,
    /// The `jsonpaths` header: where each source column is in a JSON row.
    pub json_paths: Option<Vec<super::parse::JsonPath>>,
    /// The `json_root` header: where the rows are in a JSON document.
    pub json_root: Option<super::parse::JsonPath>,
    /// The `group_commit` header (`None`: off_mode).
    pub group_commit: Option<super::group_commit::GroupMode>,
    /// `merge_type: DELETE`: the loaded rows delete their keys
    /// (merge-on-write UNIQUE tables).
    pub delete_rows: bool,
    /// `partial_columns: true`: the columns the load gives update the keys'
    /// rows, the others keep their values (merge-on-write UNIQUE tables).
    pub partial_columns: bool,
}

/// Doris Stream Load headers Tethys does not act on yet: a load that sends
/// one is refused rather than run without its effect. (Headers that are no
/// Stream Load header, `Expect`, `User-Agent` and the like, are HTTP's.)
const UNSUPPORTED_HEADERS: &[&str] = &[
    "temporary_partitions",
    "timezone",
    "time_zone",
    "exec_mem_limit",
    "fuzzy_parse",
    "num_as_string",
    "delete",
    "function_column.sequence_col",
    "hidden_columns",
    "send_batch_parallelism",
    "load_to_single_tablet",
    "memtable_on_sink_node",
    "load_stream_per_node",
    "enable_profile",
    "negative",
];

/// A header's value: UTF-8 text (`columns: 金额, ...`), which
/// [`check_utf8`] has made sure of before any header is read.
fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name)
        .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
        .map(str::trim)
}

/// Refuses a header that is not UTF-8: read as absent, a `columns`,
/// `where` or `partitions` header would be dropped and every row loaded.
fn check_utf8(h: &HeaderMap) -> Result<()> {
    match h
        .iter()
        .find(|(_, v)| std::str::from_utf8(v.as_bytes()).is_err())
    {
        Some((name, _)) => Err(TethysError::Analysis(format!(
            "the {name} header is not UTF-8 text"
        ))),
        None => Ok(()),
    }
}

fn flag(h: &HeaderMap, name: &str) -> Result<bool> {
    match header(h, name).map(|v| v.to_ascii_lowercase()) {
        None => Ok(false),
        Some(v) if v == "true" => Ok(true),
        Some(v) if v == "false" || v.is_empty() => Ok(false),
        Some(v) => Err(TethysError::Analysis(format!(
            "invalid value of header {name}: {v}"
        ))),
    }
}

fn single_byte(h: &HeaderMap, name: &str) -> Result<Option<u8>> {
    match header(h, name) {
        None | Some("") => Ok(None),
        Some(v) => {
            let b = separator(v)?;
            if b.len() != 1 {
                return Err(TethysError::Analysis(format!(
                    "{name} must be a single byte: {v}"
                )));
            }
            Ok(Some(b[0]))
        }
    }
}

/// Decodes a separator: `\t`, `\n`, `\x01`-style escapes, or literal bytes.
pub fn separator(text: &str) -> Result<Vec<u8>> {
    let b = text.as_bytes();
    let mut out = vec![];
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            match b[i + 1] {
                b't' => {
                    out.push(b'\t');
                    i += 2;
                    continue;
                }
                b'n' => {
                    out.push(b'\n');
                    i += 2;
                    continue;
                }
                b'r' => {
                    out.push(b'\r');
                    i += 2;
                    continue;
                }
                b'x' if i + 4 <= b.len() => {
                    let hex = std::str::from_utf8(&b[i + 2..i + 4]).unwrap_or("");
                    let v = u8::from_str_radix(hex, 16)
                        .map_err(|_| TethysError::Analysis(format!("invalid separator {text}")))?;
                    out.push(v);
                    i += 4;
                    continue;
                }
                _ => {}
            }
        }
        out.push(b[i]);
        i += 1;
    }
    if out.is_empty() {
        return Err(TethysError::Analysis("a separator cannot be empty".into()));
    }
    Ok(out)
}

impl LoadOptions {
    /// Reads the headers; unsupported ones are refused with a clear message.
    pub fn from_headers(h: &HeaderMap) -> Result<LoadOptions> {
        check_utf8(h)?;
        if let Some(name) = UNSUPPORTED_HEADERS.iter().find(|n| h.contains_key(**n)) {
            return Err(TethysError::NotSupported(format!(
                "the {name} header is not supported yet"
            )));
        }
        let group_commit = match header(h, "group_commit") {
            Some(g) => super::group_commit::GroupMode::parse(g).map_err(|_| {
                TethysError::Analysis(
                    "Header `group_commit` can only be `sync_mode`, `async_mode` or `off_mode`."
                        .into(),
                )
            })?,
            None => None,
        };
        let delete_rows = match header(h, "merge_type").map(|v| v.to_ascii_uppercase()) {
            None => false,
            Some(v) if v.is_empty() || v == "APPEND" => false,
            Some(v) if v == "DELETE" => true,
            Some(v) if v == "MERGE" => {
                return Err(TethysError::NotSupported(
                    "merge_type MERGE (a delete condition per row) is not supported yet; \
                     load the deletes with merge_type DELETE"
                        .into(),
                ));
            }
            Some(v) => {
                return Err(TethysError::Analysis(format!(
                    "unknown merge_type {v}: APPEND, DELETE or MERGE"
                )));
            }
        };
        let partial_columns = flag(h, "partial_columns")?;
        if partial_columns && (delete_rows || group_commit.is_some()) {
            return Err(TethysError::NotSupported(
                "partial_columns cannot be combined with merge_type DELETE or group commit".into(),
            ));
        }
        if delete_rows && group_commit.is_some() {
            return Err(TethysError::NotSupported(
                "group commit does not take merge_type DELETE".into(),
            ));
        }
        let fmt = header(h, "format").unwrap_or("csv").to_ascii_lowercase();
        let (format, mut skip_lines) = match fmt.as_str() {
            "csv" | "" => (Format::Csv, 0),
            "csv_with_names" => (Format::Csv, 1),
            "csv_with_names_and_types" => (Format::Csv, 2),
            "json" => (Format::Json, 0),
            other => {
                return Err(TethysError::Analysis(format!(
                    "unknown data format, format={other}"
                )));
            }
        };
        if skip_lines == 0
            && let Some(s) = header(h, "skip_lines")
        {
            skip_lines = s
                .parse()
                .map_err(|_| TethysError::Analysis(format!("invalid skip_lines: {s}")))?;
        }
        let columns = match header(h, "columns") {
            Some(c) if !c.is_empty() => Some(c.to_string()),
            _ => None,
        };
        let max_filter_ratio = match header(h, "max_filter_ratio") {
            Some(v) => {
                let r: f64 = v
                    .parse()
                    .map_err(|_| TethysError::Analysis(format!("invalid max_filter_ratio: {v}")))?;
                if !(0.0..=1.0).contains(&r) {
                    return Err(TethysError::Analysis(format!(
                        "max_filter_ratio must be between 0 and 1: {v}"
                    )));
                }
                r
            }
            None => 0.0,
        };
        let timeout_secs = match header(h, "timeout") {
            Some(v) => {
                let t = v
                    .parse::<i64>()
                    .map_err(|_| TethysError::Analysis("Invalid timeout format".into()))?;
                tethys_common::config::checked_load_timeout(t)?
            }
            None => 0,
        };
        Ok(LoadOptions {
            label: header(h, "label").unwrap_or_default().to_string(),
            format,
            column_separator: separator(header(h, "column_separator").unwrap_or("\\t"))?,
            line_delimiter: separator(header(h, "line_delimiter").unwrap_or("\\n"))?,
            columns,
            where_expr: header(h, "where")
                .filter(|w| !w.is_empty())
                .map(str::to_string),
            max_filter_ratio,
            strict_mode: flag(h, "strict_mode")?,
            timeout_secs,
            skip_lines,
            trim_double_quotes: flag(h, "trim_double_quotes")?,
            strip_outer_array: flag(h, "strip_outer_array")?,
            read_json_by_line: flag(h, "read_json_by_line")?,
            two_phase_commit: flag(h, "two_phase_commit")?,
            group_commit,
            delete_rows,
            partial_columns,
            json_paths: match header(h, "jsonpaths").filter(|v| !v.is_empty()) {
                Some(v) => Some(super::parse::JsonPath::parse_list(v)?),
                None => None,
            },
            json_root: match header(h, "json_root").filter(|v| !v.is_empty()) {
                Some(v) => Some(super::parse::JsonPath::parse(v)?),
                None => None,
            },
            comment: header(h, "comment").unwrap_or_default().to_string(),
            enclose: single_byte(h, "enclose")?,
            escape: single_byte(h, "escape")?,
            partitions: header(h, "partitions").filter(|p| !p.is_empty()).map(|p| {
                p.split(',')
                    .map(|x| x.trim().trim_matches('`').to_string())
                    .filter(|x| !x.is_empty())
                    .collect()
            }),
            compress: {
                let c = super::decompress::Codec::parse(
                    header(h, "compress_type").unwrap_or_default(),
                )?;
                if c.is_some() && format == Format::Json {
                    return Err(TethysError::Analysis(
                        "compress data of JSON format is not supported.".into(),
                    ));
                }
                c
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators() {
        assert_eq!(separator("\\t").unwrap(), b"\t");
        assert_eq!(separator(",").unwrap(), b",");
        assert_eq!(separator("\\x01").unwrap(), vec![1u8]);
        assert_eq!(separator("||").unwrap(), b"||");
        assert!(separator("").is_err());
    }

    proptest::proptest! {
        /// Any header names and values (of the ones a load reads, with any
        /// text) give options or an error, never a panic.
        #[test]
        fn fuzz_headers_never_panic(
            pairs in proptest::collection::vec(
                (
                    proptest::sample::select(vec![
                        "label", "format", "column_separator", "line_delimiter", "columns",
                        "where", "max_filter_ratio", "strict_mode", "timeout", "skip_lines",
                        "enclose", "escape", "jsonpaths", "json_root", "compress_type",
                        "partitions", "merge_type", "group_commit", "two_phase_commit",
                        "partial_columns", "trim_double_quotes", "timezone", "x-other",
                    ]),
                    proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24),
                ),
                0..8,
            ),
        ) {
            let mut h = HeaderMap::new();
            for (name, value) in pairs {
                if let Ok(v) = axum::http::HeaderValue::from_bytes(&value) {
                    h.append(name, v);
                }
            }
            let started = std::time::Instant::now();
            let _ = LoadOptions::from_headers(&h);
            // An input that takes a second is a hang.
            proptest::prop_assert!(started.elapsed().as_secs() < 1, "{:?}", started.elapsed());
        }
    }
}
