//! Splitting a streamed body into source rows: CSV lines and fields (multi-
//! byte separators, `\N` for NULL), or JSON objects (one per line, or the
//! elements of an outer array).

use tethys_common::{Result, TethysError};

use super::options::{Format, LoadOptions};

/// Source rows cut from the body, kept without an allocation per row or
/// field: each row's text and its fields' bytes sit back to back in one
/// buffer. A plain CSV field is a span of its row's text; unescaped CSV and
/// JSON values are appended after it.
#[derive(Debug, Default)]
pub struct RowBlock {
    bytes: Vec<u8>,
    /// Per field: its span in `bytes`, `None` for NULL.
    fields: Vec<Option<(usize, usize)>>,
    rows: Vec<RowSpan>,
}

#[derive(Debug, Clone, Copy)]
struct RowSpan {
    first_field: usize,
    n_fields: usize,
    raw: (usize, usize),
}

impl RowBlock {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Forgets every row, keeping the buffers' capacity.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.fields.clear();
        self.rows.clear();
    }

    /// Number of fields of a row.
    pub fn n_fields(&self, row: usize) -> usize {
        self.rows[row].n_fields
    }

    /// A field's bytes, `None` for NULL (or a field the row does not have).
    pub fn field(&self, row: usize, i: usize) -> Option<&[u8]> {
        let r = self.rows[row];
        if i >= r.n_fields {
            return None;
        }
        self.fields[r.first_field + i].map(|(a, b)| &self.bytes[a..b])
    }

    /// A row's source text, for error reports.
    pub fn raw_text(&self, row: usize) -> String {
        let (a, b) = self.rows[row].raw;
        String::from_utf8_lossy(&self.bytes[a..b]).into_owned()
    }

    /// Starts a row whose source text is `raw`; returns where the text starts.
    fn start_row(&mut self, raw: &[u8]) -> usize {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(raw);
        self.rows.push(RowSpan {
            first_field: self.fields.len(),
            n_fields: 0,
            raw: (start, self.bytes.len()),
        });
        start
    }

    /// Adds a field at `[a, b)` of `bytes` to the current row.
    fn span_field(&mut self, span: Option<(usize, usize)>) {
        self.fields.push(span);
        if let Some(r) = self.rows.last_mut() {
            r.n_fields += 1;
        }
    }

    /// Adds a field given by value to the current row.
    fn push_field(&mut self, v: Option<&[u8]>) {
        let span = v.map(|v| {
            let a = self.bytes.len();
            self.bytes.extend_from_slice(v);
            (a, self.bytes.len())
        });
        self.span_field(span);
    }

    /// A block of the given rows (their text is their debug form).
    #[cfg(test)]
    pub fn from_fields(rows: &[&[Option<&str>]]) -> RowBlock {
        let mut b = RowBlock::default();
        for r in rows {
            b.start_row(format!("{r:?}").as_bytes());
            for f in *r {
                b.push_field(f.map(str::as_bytes));
            }
        }
        b
    }

    /// Every row's fields as text.
    #[cfg(test)]
    pub fn to_strings(&self) -> Vec<Vec<Option<String>>> {
        (0..self.len())
            .map(|r| {
                (0..self.n_fields(r))
                    .map(|i| {
                        self.field(r, i)
                            .map(|b| String::from_utf8_lossy(b).into_owned())
                    })
                    .collect()
            })
            .collect()
    }
}

/// A line that could not be read as a row: (reason, its text).
pub type BadRow = (String, String);

/// Largest JSON body read as a whole (Doris' `streaming_load_json_max_mb`).
pub const JSON_MAX_BYTES: usize = 100 << 20;

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.len() == 1 {
        return hay[from..]
            .iter()
            .position(|b| *b == needle[0])
            .map(|p| p + from);
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Splits one CSV line into fields of a new row of `block`.
pub fn split_csv(block: &mut RowBlock, line: &[u8], sep: &[u8], trim_quotes: bool) {
    let base = block.start_row(line);
    let mut start = 0;
    loop {
        let end = find(line, sep, start).unwrap_or(line.len());
        let (mut a, mut b) = (start, end);
        if trim_quotes && b - a >= 2 && line[a] == b'"' && line[b - 1] == b'"' {
            a += 1;
            b -= 1;
        }
        let span = (&line[a..b] != b"\\N").then_some((base + a, base + b));
        block.span_field(span);
        if end >= line.len() {
            break;
        }
        start = end + sep.len();
    }
}

/// Splits one CSV line whose fields may be wrapped in `enclose` (where the
/// separator and line delimiter are data) with `escape` escaping the next
/// byte, into a new row of `block`.
pub fn split_csv_enclosed(
    block: &mut RowBlock,
    line: &[u8],
    sep: &[u8],
    enclose: u8,
    escape: Option<u8>,
) {
    block.start_row(line);
    let mut i = 0;
    let mut value = Vec::new();
    loop {
        value.clear();
        let mut quoted = false;
        if i < line.len() && line[i] == enclose {
            quoted = true;
            i += 1;
            while i < line.len() {
                let b = line[i];
                if Some(b) == escape && i + 1 < line.len() {
                    value.push(line[i + 1]);
                    i += 2;
                } else if b == enclose {
                    if i + 1 < line.len() && line[i + 1] == enclose {
                        value.push(enclose);
                        i += 2;
                    } else {
                        i += 1;
                        break;
                    }
                } else {
                    value.push(b);
                    i += 1;
                }
            }
        }
        let end = find(line, sep, i).unwrap_or(line.len());
        value.extend_from_slice(&line[i..end]);
        block.push_field((quoted || value != b"\\N").then_some(value.as_slice()));
        if end >= line.len() {
            break;
        }
        i = end + sep.len();
    }
}

/// Where the search for a line's end stopped: the next line's end is
/// looked for from here when more bytes arrive, so a long line is scanned
/// once, not again with every chunk.
#[derive(Debug, Clone, Copy, Default)]
struct LineScan {
    /// Offset in the unfinished bytes to look from next.
    pos: usize,
    /// Inside an `enclose` quote at `pos`.
    in_quote: bool,
}

/// End of the line that starts at `from`, skipping delimiters inside
/// `enclose` quotes and resuming where `scan` stopped; `None` if the line
/// is not complete yet (`scan` then says where to go on).
fn find_line_end(
    buf: &[u8],
    delim: &[u8],
    sep: &[u8],
    from: usize,
    scan: &mut LineScan,
    enclose: Option<u8>,
    escape: Option<u8>,
) -> Option<usize> {
    let mut i = scan.pos.max(from);
    let Some(q) = enclose else {
        let found = find(buf, delim, i);
        // A delimiter may straddle the end: look again at its first bytes.
        scan.pos = found.unwrap_or(buf.len().saturating_sub(delim.len() - 1).max(i));
        return found;
    };
    let mut in_quote = scan.in_quote;
    let stop = loop {
        let Some(&b) = buf.get(i) else {
            break i;
        };
        if in_quote {
            if Some(b) == escape {
                if i + 1 >= buf.len() {
                    break i;
                }
                i += 2;
                continue;
            }
            in_quote = b != q;
            i += 1;
            continue;
        }
        let field_start = i == from || buf[from..i].ends_with(sep);
        if b == q && field_start {
            in_quote = true;
            i += 1;
            continue;
        }
        if buf[i..].starts_with(delim) {
            *scan = LineScan::default();
            return Some(i);
        }
        if buf.len() - i < delim.len() && delim.starts_with(&buf[i..]) {
            break i;
        }
        i += 1;
    };
    *scan = LineScan {
        pos: stop,
        in_quote,
    };
    None
}

/// One step of a JSON path.
#[derive(Debug, Clone, PartialEq)]
enum JsonStep {
    Key(String),
    Index(usize),
}

/// A JSON path of the `jsonpaths` / `json_root` headers: `$`, `$.a.b`,
/// `$.a[0]`, `$['a b']`.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath(Vec<JsonStep>);

impl JsonPath {
    /// Parses a path; it must start at the root (`$`).
    pub fn parse(text: &str) -> Result<JsonPath> {
        let bad = |why: &str| TethysError::Analysis(format!("Invalid json path: {text} ({why})"));
        let t = text.trim();
        let mut rest = t
            .strip_prefix('$')
            .ok_or_else(|| bad("must start with $"))?;
        let mut steps = vec![];
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix('.') {
                let end = r.find(['.', '[']).unwrap_or(r.len());
                if end == 0 {
                    return Err(bad("empty key"));
                }
                steps.push(JsonStep::Key(r[..end].to_string()));
                rest = &r[end..];
            } else if let Some(r) = rest.strip_prefix('[') {
                let end = r.find(']').ok_or_else(|| bad("unclosed ["))?;
                let inner = r[..end].trim();
                let quoted = inner
                    .strip_prefix('\'')
                    .and_then(|x| x.strip_suffix('\''))
                    .or_else(|| inner.strip_prefix('"').and_then(|x| x.strip_suffix('"')));
                match quoted {
                    Some(k) => steps.push(JsonStep::Key(k.to_string())),
                    None => steps.push(JsonStep::Index(
                        inner
                            .parse()
                            .map_err(|_| bad("array index must be a number"))?,
                    )),
                }
                rest = &r[end + 1..];
            } else {
                return Err(bad("expected . or ["));
            }
        }
        Ok(JsonPath(steps))
    }

    /// Parses the `jsonpaths` header: a JSON array of path strings.
    pub fn parse_list(text: &str) -> Result<Vec<JsonPath>> {
        let items: Vec<String> = serde_json::from_str(text).map_err(|e| {
            TethysError::Analysis(format!(
                "Invalid jsonpaths: {text}; it must be a JSON array of strings such as [\"$.id\", \"$.name\"] ({e})"
            ))
        })?;
        items.iter().map(|p| JsonPath::parse(p)).collect()
    }

    /// The value at this path, if any.
    pub fn get<'a>(&self, v: &'a serde_json::Value) -> Option<&'a serde_json::Value> {
        let mut cur = v;
        for step in &self.0 {
            cur = match (step, cur) {
                (JsonStep::Key(k), serde_json::Value::Object(m)) => m.get(k)?,
                (JsonStep::Index(i), serde_json::Value::Array(a)) => a.get(*i)?,
                _ => return None,
            };
        }
        Some(cur)
    }
}

/// Field bytes of a JSON value: strings as they are, other values as JSON.
fn json_bytes(v: &serde_json::Value) -> Option<std::borrow::Cow<'_, [u8]>> {
    match v {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(std::borrow::Cow::Borrowed(s.as_bytes())),
        other => Some(std::borrow::Cow::Owned(other.to_string().into_bytes())),
    }
}

/// Adds one JSON row to `block`, its fields in `names` order: by `paths`
/// (one per name, in order; names past the last path read NULL) when given,
/// else by key (matched case-insensitively). A non-object without paths is
/// a bad row.
pub fn json_row(
    block: &mut RowBlock,
    v: &serde_json::Value,
    names: &[String],
    paths: Option<&[JsonPath]>,
) -> std::result::Result<(), BadRow> {
    let raw = v.to_string();
    if let Some(paths) = paths {
        block.start_row(raw.as_bytes());
        for i in 0..names.len() {
            let f = paths.get(i).and_then(|p| p.get(v)).and_then(json_bytes);
            block.push_field(f.as_deref());
        }
        return Ok(());
    }
    let serde_json::Value::Object(map) = v else {
        return Err((format!("a JSON row must be an object: {raw}"), raw));
    };
    block.start_row(raw.as_bytes());
    for n in names {
        let f = map
            .get(n)
            .or_else(|| {
                map.iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(n))
                    .map(|(_, v)| v)
            })
            .and_then(json_bytes);
        block.push_field(f.as_deref());
    }
    Ok(())
}

/// Incremental splitter over body chunks.
pub struct RowSplitter {
    opts: LoadOptions,
    names: Vec<String>,
    /// The unfinished line (a line split across chunks).
    buf: Vec<u8>,
    /// Where the search for its end goes on.
    scan: LineScan,
    /// The longest line taken ([`MAX_LINE_BYTES`]).
    max_line: usize,
    /// Dropping the rest of a longer line.
    dropping: bool,
    skipped: usize,
    json_whole: Vec<u8>,
}

/// The longest line a load takes; a longer one is a filtered row.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// Where rows of a chunk go: good rows, and lines that are not rows.
pub struct RowSink<'a> {
    pub block: &'a mut RowBlock,
    pub bad: &'a mut Vec<BadRow>,
}

/// The rows of one JSON document (the body, or one line of it): from its
/// `json_root`, one row per element when it is an array.
fn json_document(
    opts: &LoadOptions,
    names: &[String],
    v: &serde_json::Value,
    out: &mut RowSink,
) -> Result<()> {
    let v = match &opts.json_root {
        Some(root) => match root.get(v) {
            Some(r) => r,
            None => {
                out.bad.push(("JSON Root not found.".into(), v.to_string()));
                return Ok(());
            }
        },
        None => v,
    };
    let paths = opts.json_paths.as_deref();
    match v {
        serde_json::Value::Array(items) => {
            if !opts.strip_outer_array {
                return Err(TethysError::DataQuality(
                    "JSON data is array-object, `strip_outer_array` must be TRUE.".into(),
                ));
            }
            for item in items {
                if let Err(e) = json_row(out.block, item, names, paths) {
                    out.bad.push(e);
                }
            }
        }
        obj => {
            if let Err(e) = json_row(out.block, obj, names, paths) {
                out.bad.push(e);
            }
        }
    }
    Ok(())
}

/// Cuts one line into a row.
fn line(opts: &LoadOptions, names: &[String], line: &[u8], out: &mut RowSink) -> Result<()> {
    match opts.format {
        Format::Csv => match opts.enclose {
            Some(q) => split_csv_enclosed(out.block, line, &opts.column_separator, q, opts.escape),
            None => split_csv(
                out.block,
                line,
                &opts.column_separator,
                opts.trim_double_quotes,
            ),
        },
        Format::Json => {
            let text = String::from_utf8_lossy(line);
            let trimmed = text.trim();
            if trimmed.is_empty() {
                return Ok(());
            }
            match serde_json::from_str::<serde_json::Value>(trimmed) {
                Ok(v) => json_document(opts, names, &v, out)?,
                Err(e) => out
                    .bad
                    .push((format!("Parse json data failed: {e}"), trimmed.to_string())),
            }
        }
    }
    Ok(())
}

impl RowSplitter {
    pub fn new(opts: LoadOptions, names: Vec<String>) -> Self {
        RowSplitter {
            opts,
            names,
            buf: Vec::new(),
            scan: LineScan::default(),
            max_line: MAX_LINE_BYTES,
            dropping: false,
            skipped: 0,
            json_whole: Vec::new(),
        }
    }

    fn by_lines(&self) -> bool {
        self.opts.format == Format::Csv || self.opts.read_json_by_line
    }

    /// Feeds a chunk; the rows it completes go to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut RowSink) -> Result<()> {
        if !self.by_lines() {
            if self.json_whole.len() + chunk.len() > JSON_MAX_BYTES {
                return Err(TethysError::DataQuality(format!(
                    "The size of this batch exceed the max size [{JSON_MAX_BYTES}] of json type data; \
                     split the file, or use read_json_by_line"
                )));
            }
            self.json_whole.extend_from_slice(chunk);
            return Ok(());
        }
        let delim = &self.opts.line_delimiter;
        let mut chunk = chunk;
        if self.dropping {
            // The rest of an overlong line, up to its end.
            let Some(end) = find(chunk, delim, 0) else {
                return Ok(());
            };
            self.dropping = false;
            chunk = &chunk[end + delim.len()..];
        }
        // Lines wholly inside the chunk are cut from it directly; only a
        // line split across chunks is copied into `buf`.
        let data: &[u8] = if self.buf.is_empty() {
            chunk
        } else {
            self.buf.extend_from_slice(chunk);
            &self.buf
        };
        let mut start = 0;
        while let Some(end) = find_line_end(
            data,
            delim,
            &self.opts.column_separator,
            start,
            &mut self.scan,
            self.opts.enclose,
            self.opts.escape,
        ) {
            if self.skipped < self.opts.skip_lines {
                self.skipped += 1;
            } else {
                line(&self.opts, &self.names, &data[start..end], out)?;
            }
            start = end + delim.len();
        }
        if data.len() - start > self.max_line {
            let head = &data[start..(start + 100).min(data.len())];
            out.bad.push((
                format!("the line is longer than {} bytes", self.max_line),
                format!("{}...", String::from_utf8_lossy(head)),
            ));
            self.buf.clear();
            self.scan = LineScan::default();
            self.dropping = true;
            return Ok(());
        }
        self.scan.pos = self.scan.pos.saturating_sub(start);
        if self.buf.is_empty() {
            self.buf.extend_from_slice(&chunk[start..]);
        } else {
            self.buf.drain(..start);
        }
        Ok(())
    }

    /// Ends the body; the last rows go to `out`.
    pub fn finish(&mut self, out: &mut RowSink) -> Result<()> {
        if !self.by_lines() {
            let whole = std::mem::take(&mut self.json_whole);
            let text = String::from_utf8_lossy(&whole);
            if text.trim().is_empty() {
                return Ok(());
            }
            let v: serde_json::Value = serde_json::from_str(text.trim())
                .map_err(|e| TethysError::DataQuality(format!("Parse json data failed: {e}")))?;
            return json_document(&self.opts, &self.names, &v, out);
        }
        let rest = std::mem::take(&mut self.buf);
        if !rest.is_empty() && !self.dropping {
            if self.skipped < self.opts.skip_lines {
                self.skipped += 1;
            } else {
                line(&self.opts, &self.names, &rest, out)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Rows = Vec<Vec<Option<String>>>;

    /// Feeds `chunks` and finishes: (good rows, bad rows).
    fn run(s: &mut RowSplitter, chunks: &[&[u8]]) -> (Rows, Vec<BadRow>) {
        let mut block = RowBlock::default();
        let mut bad = vec![];
        let mut out = RowSink {
            block: &mut block,
            bad: &mut bad,
        };
        for c in chunks {
            s.feed(c, &mut out).unwrap();
        }
        s.finish(&mut out).unwrap();
        (block.to_strings(), bad)
    }

    fn opts(format: Format) -> LoadOptions {
        LoadOptions {
            label: String::new(),
            format,
            column_separator: b"||".to_vec(),
            line_delimiter: b"\n".to_vec(),
            columns: None,
            where_expr: None,
            max_filter_ratio: 0.0,
            strict_mode: false,
            timeout_secs: 0,
            skip_lines: 1,
            trim_double_quotes: true,
            strip_outer_array: true,
            read_json_by_line: false,
            two_phase_commit: false,
            comment: String::new(),
            compress: None,
            partitions: None,
            enclose: None,
            escape: None,
            group_commit: None,
            delete_rows: false,
            partial_columns: false,
            json_paths: None,
            json_root: None,
        }
    }

    #[test]
    fn json_paths_and_root() {
        let p = JsonPath::parse("$.a['b c'][1]").unwrap();
        let v: serde_json::Value = serde_json::json!({"a": {"b c": [10, 20]}});
        assert_eq!(p.get(&v), Some(&serde_json::json!(20)));
        assert!(JsonPath::parse("a.b").is_err());
        assert!(JsonPath::parse("$.a[x]").is_err());
        assert!(JsonPath::parse_list("$.a").is_err());
        let mut o = opts(Format::Json);
        o.skip_lines = 0;
        o.json_root = Some(JsonPath::parse("$.data").unwrap());
        o.json_paths = Some(JsonPath::parse_list(r#"["$.k", "$.info.city"]"#).unwrap());
        let mut s = RowSplitter::new(o, vec!["id".into(), "city".into(), "extra".into()]);
        let (rows, _) = run(
            &mut s,
            &[br#"{"data": [{"k": 1, "info": {"city": "Oslo"}}, {"k": 2}]}"#],
        );
        assert_eq!(rows[0], vec![Some("1".into()), Some("Oslo".into()), None]);
        assert_eq!(rows[1], vec![Some("2".into()), None, None]);
        let mut o = opts(Format::Json);
        o.skip_lines = 0;
        o.read_json_by_line = true;
        o.json_root = Some(JsonPath::parse("$.data").unwrap());
        let mut s = RowSplitter::new(o, vec!["k".into()]);
        let (rows, bad) = run(&mut s, &[b"{\"data\": {\"k\": 5}}\n{\"other\": 1}\n"]);
        assert_eq!(rows, vec![vec![Some("5".to_string())]]);
        assert_eq!(bad[0].0, "JSON Root not found.");
    }

    /// Bytes fed one chunk of `n` at a time.
    fn in_chunks(data: &[u8], n: usize) -> Vec<&[u8]> {
        data.chunks(n).collect()
    }

    #[test]
    fn lines_split_anywhere_across_chunks() {
        let mut o = opts(Format::Csv);
        o.skip_lines = 0;
        o.column_separator = b",".to_vec();
        o.line_delimiter = b"\r\n".to_vec();
        o.enclose = Some(b'"');
        o.escape = Some(b'\\');
        let data = b"\"x,\r\n y\",1\r\n\"q\\\"\r\n\",2\r\nz,3\r\n";
        for n in [1, 2, 3, 5, 64] {
            let mut s = RowSplitter::new(o.clone(), vec![]);
            let (rows, bad) = run(&mut s, &in_chunks(data, n));
            assert!(bad.is_empty(), "{n}: {bad:?}");
            assert_eq!(rows.len(), 3, "{n}: {rows:?}");
            assert_eq!(rows[0][1], Some("1".into()), "{n}");
            assert_eq!(rows[2], vec![Some("z".into()), Some("3".into())], "{n}");
        }
    }

    /// A line without its delimiter used to be scanned again from its start
    /// with every chunk: quadratic in the line.
    #[test]
    fn a_long_line_is_scanned_once() {
        let mut line = vec![b'a'; 4 << 20];
        line.extend_from_slice(b"\nb\n");
        for enclose in [None, Some(b'"')] {
            let mut o = opts(Format::Csv);
            o.skip_lines = 0;
            o.enclose = enclose;
            let mut s = RowSplitter::new(o, vec![]);
            let started = std::time::Instant::now();
            let (rows, _) = run(&mut s, &in_chunks(&line, 512));
            assert_eq!(rows.len(), 2);
            assert!(started.elapsed() < std::time::Duration::from_secs(10));
        }
    }

    #[test]
    fn an_overlong_line_is_a_filtered_row() {
        let mut o = opts(Format::Csv);
        o.skip_lines = 0;
        let mut s = RowSplitter::new(o, vec![]);
        s.max_line = 1000;
        let mut data = b"ok\n".to_vec();
        data.extend(vec![b'x'; 5000]);
        data.extend_from_slice(b"\nafter\n");
        let (rows, bad) = run(&mut s, &in_chunks(&data, 300));
        assert_eq!(
            rows,
            vec![
                vec![Some("ok".to_string())],
                vec![Some("after".to_string())]
            ]
        );
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].0, "the line is longer than 1000 bytes");
    }

    #[test]
    fn csv_across_chunks() {
        let mut s = RowSplitter::new(opts(Format::Csv), vec![]);
        let (rows, _) = run(&mut s, &[b"header\na||\"b\"||\\N\nc|", b"|d\ne||f\n", b"g"]);
        assert_eq!(rows[0], vec![Some("a".into()), Some("b".into()), None]);
        assert_eq!(rows[1], vec![Some("c".into()), Some("d".into())]);
        assert_eq!(rows[2], vec![Some("e".into()), Some("f".into())]);
        assert_eq!(rows[3], vec![Some("g".to_string())]);
    }

    #[test]
    fn enclosed_fields() {
        let mut o = opts(Format::Csv);
        o.column_separator = b"|;".to_vec();
        o.skip_lines = 0;
        o.enclose = Some(b'"');
        o.escape = Some(b'\\');
        let mut s = RowSplitter::new(o, vec![]);
        let (rows, _) = run(
            &mut s,
            &[
                b"1|;\"a|;b\"|;x\n2|;\"line\nbreak\"|;\"say \\\"hi\\\"\"\n3|;",
                b"\"\"\"\"|;z",
            ],
        );
        assert_eq!(
            rows[0],
            vec![Some("1".into()), Some("a|;b".into()), Some("x".into())]
        );
        assert_eq!(
            rows[1],
            vec![
                Some("2".into()),
                Some("line\nbreak".into()),
                Some("say \"hi\"".into())
            ]
        );
        assert_eq!(
            rows[2],
            vec![Some("3".into()), Some("\"".into()), Some("z".into())]
        );
    }

    #[test]
    fn json_array_and_lines() {
        let names = vec!["id".to_string(), "name".to_string()];
        let mut o = opts(Format::Json);
        o.skip_lines = 0;
        let mut s = RowSplitter::new(o.clone(), names.clone());
        let (rows, _) = run(&mut s, &[br#"[{"id": 1, "NAME": "a"}, {"id": 2}]"#]);
        assert_eq!(rows[0], vec![Some("1".into()), Some("a".into())]);
        assert_eq!(rows[1], vec![Some("2".into()), None]);
        o.read_json_by_line = true;
        let mut s = RowSplitter::new(o, names);
        let (rows, bad) = run(&mut s, &[b"{\"id\":3,\"name\":\"c\"}\nnot json\n"]);
        assert_eq!(rows.len(), 1);
        assert_eq!(bad.len(), 1);
    }

    proptest::proptest! {
        /// Any body, cut into chunks anywhere, under any separators,
        /// quoting and format, gives rows and filtered rows or an error,
        /// never a panic.
        #[test]
        fn fuzz_bodies_never_panic(
            body in proptest::collection::vec(
                proptest::sample::select(b"a1,;|\"'\\\n\r{}[]: \xe4\xb8\xad".to_vec()),
                0..400,
            ),
            cuts in proptest::collection::vec(1usize..64, 1..8),
            sep in proptest::sample::select(vec![&b","[..], b"||", b"\t", b";"]),
            delim in proptest::sample::select(vec![&b"\n"[..], b"\r\n", b"|"]),
            quoting in 0u8..4,
            json in 0u8..3,
            skip in 0usize..3,
        ) {
            let mut o = opts(if json > 0 { Format::Json } else { Format::Csv });
            o.read_json_by_line = json == 2;
            o.column_separator = sep.to_vec();
            o.line_delimiter = delim.to_vec();
            o.skip_lines = skip;
            o.enclose = (quoting & 1 == 1).then_some(b'"');
            o.escape = (quoting & 2 == 2).then_some(b'\\');
            let mut s = RowSplitter::new(o, vec!["a".into(), "b".into()]);
            s.max_line = 100;
            let mut block = RowBlock::default();
            let mut bad = vec![];
            let mut out = RowSink { block: &mut block, bad: &mut bad };
            let started = std::time::Instant::now();
            let mut rest = &body[..];
            for cut in cuts.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (chunk, after) = rest.split_at((*cut).min(rest.len()));
                if s.feed(chunk, &mut out).is_err() {
                    break;
                }
                rest = after;
            }
            let _ = s.finish(&mut out);
            // An input that takes a second is a hang.
            proptest::prop_assert!(started.elapsed().as_secs() < 1, "{:?}", started.elapsed());
        }
    }
}
