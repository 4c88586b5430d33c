//! Splitting a streamed body into source rows: CSV lines and fields (multi-
//! byte separators, `\N` for NULL), or JSON objects (one per line, or the
//! elements of an outer array).

use tethys_common::{Result, TethysError};

use super::options::{Format, LoadOptions};

/// One source row: its fields (`None` = NULL) and its text for error reports.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceRow {
    pub fields: Vec<Option<String>>,
    pub raw: String,
}

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

/// Splits one CSV line into fields.
pub fn split_csv(line: &[u8], sep: &[u8], trim_quotes: bool) -> SourceRow {
    let text = String::from_utf8_lossy(line).to_string();
    let mut fields = vec![];
    let mut start = 0;
    loop {
        let end = find(line, sep, start).unwrap_or(line.len());
        let mut f = &line[start..end];
        if trim_quotes && f.len() >= 2 && f[0] == b'"' && f[f.len() - 1] == b'"' {
            f = &f[1..f.len() - 1];
        }
        fields.push(if f == b"\\N" {
            None
        } else {
            Some(String::from_utf8_lossy(f).to_string())
        });
        if end >= line.len() {
            break;
        }
        start = end + sep.len();
    }
    SourceRow { fields, raw: text }
}

/// Splits one CSV line whose fields may be wrapped in `enclose` (where the
/// separator and line delimiter are data) with `escape` escaping the next byte.
pub fn split_csv_enclosed(line: &[u8], sep: &[u8], enclose: u8, escape: Option<u8>) -> SourceRow {
    let text = String::from_utf8_lossy(line).to_string();
    let mut fields = vec![];
    let mut i = 0;
    loop {
        let mut value = Vec::new();
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
        fields.push(if !quoted && value == b"\\N" {
            None
        } else {
            Some(String::from_utf8_lossy(&value).to_string())
        });
        if end >= line.len() {
            break;
        }
        i = end + sep.len();
    }
    SourceRow { fields, raw: text }
}

/// End of the next line at or after `from`, skipping delimiters inside
/// `enclose` quotes; `None` if the line is not complete yet.
fn find_line_end(
    buf: &[u8],
    delim: &[u8],
    sep: &[u8],
    from: usize,
    enclose: Option<u8>,
    escape: Option<u8>,
) -> Option<usize> {
    let Some(q) = enclose else {
        return find(buf, delim, from);
    };
    let mut in_quote = false;
    let mut i = from;
    let mut field_start = true;
    while i < buf.len() {
        let b = buf[i];
        if in_quote {
            if Some(b) == escape {
                i += 2;
                continue;
            }
            if b == q {
                in_quote = false;
            }
            i += 1;
            continue;
        }
        if b == q && field_start {
            in_quote = true;
            field_start = false;
            i += 1;
            continue;
        }
        if buf[i..].starts_with(delim) {
            return Some(i);
        }
        i += 1;
        field_start = buf[from..i].ends_with(sep);
    }
    None
}

/// Field text of a JSON value.
fn json_field(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
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

/// Maps one JSON object to fields in `names` order: by `paths` (one per
/// name, in order; names past the last path read NULL) when given, else by
/// key (matched case-insensitively).
pub fn json_row(
    v: &serde_json::Value,
    names: &[String],
    paths: Option<&[JsonPath]>,
) -> std::result::Result<SourceRow, String> {
    let raw = v.to_string();
    if let Some(paths) = paths {
        let fields = (0..names.len())
            .map(|i| paths.get(i).and_then(|p| p.get(v)).and_then(json_field))
            .collect();
        return Ok(SourceRow { fields, raw });
    }
    let serde_json::Value::Object(map) = v else {
        return Err(format!("a JSON row must be an object: {raw}"));
    };
    let fields = names
        .iter()
        .map(|n| {
            map.get(n)
                .or_else(|| {
                    map.iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case(n))
                        .map(|(_, v)| v)
                })
                .and_then(json_field)
        })
        .collect();
    Ok(SourceRow { fields, raw })
}

/// Incremental splitter over body chunks.
pub struct RowSplitter {
    opts: LoadOptions,
    names: Vec<String>,
    buf: Vec<u8>,
    skipped: usize,
    json_whole: Vec<u8>,
}

/// A row, or a line that could not be read as a row (reason, text).
pub type Parsed = std::result::Result<SourceRow, (String, String)>;

impl RowSplitter {
    pub fn new(opts: LoadOptions, names: Vec<String>) -> Self {
        RowSplitter {
            opts,
            names,
            buf: Vec::new(),
            skipped: 0,
            json_whole: Vec::new(),
        }
    }

    /// The rows of one JSON document (the body, or one line of it): from
    /// its `json_root`, one row per element when it is an array.
    fn json_document(&self, v: &serde_json::Value, out: &mut Vec<Parsed>) -> Result<()> {
        let v = match &self.opts.json_root {
            Some(root) => match root.get(v) {
                Some(r) => r,
                None => {
                    out.push(Err(("JSON Root not found.".into(), v.to_string())));
                    return Ok(());
                }
            },
            None => v,
        };
        let paths = self.opts.json_paths.as_deref();
        match v {
            serde_json::Value::Array(items) => {
                if !self.opts.strip_outer_array {
                    return Err(TethysError::DataQuality(
                        "JSON data is array-object, `strip_outer_array` must be TRUE.".into(),
                    ));
                }
                for item in items {
                    out.push(json_row(item, &self.names, paths).map_err(|e| (e, item.to_string())));
                }
            }
            obj => out.push(json_row(obj, &self.names, paths).map_err(|e| (e, obj.to_string()))),
        }
        Ok(())
    }

    fn by_lines(&self) -> bool {
        self.opts.format == Format::Csv || self.opts.read_json_by_line
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<Parsed>) -> Result<()> {
        if self.skipped < self.opts.skip_lines {
            self.skipped += 1;
            return Ok(());
        }
        match self.opts.format {
            Format::Csv => out.push(Ok(match self.opts.enclose {
                Some(q) => {
                    split_csv_enclosed(line, &self.opts.column_separator, q, self.opts.escape)
                }
                None => split_csv(
                    line,
                    &self.opts.column_separator,
                    self.opts.trim_double_quotes,
                ),
            })),
            Format::Json => {
                let trimmed = String::from_utf8_lossy(line);
                if trimmed.trim().is_empty() {
                    return Ok(());
                }
                match serde_json::from_str::<serde_json::Value>(trimmed.trim()) {
                    Ok(v) => self.json_document(&v, out)?,
                    Err(e) => out.push(Err((
                        format!("Parse json data failed: {e}"),
                        trimmed.to_string(),
                    ))),
                }
            }
        }
        Ok(())
    }

    /// Feeds a chunk; returns the rows completed by it.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Parsed>> {
        let mut out = vec![];
        if !self.by_lines() {
            if self.json_whole.len() + chunk.len() > JSON_MAX_BYTES {
                return Err(TethysError::DataQuality(format!(
                    "The size of this batch exceed the max size [{JSON_MAX_BYTES}] of json type data; \
                     split the file, or use read_json_by_line"
                )));
            }
            self.json_whole.extend_from_slice(chunk);
            return Ok(out);
        }
        self.buf.extend_from_slice(chunk);
        let delim = self.opts.line_delimiter.clone();
        let mut start = 0;
        while let Some(end) = find_line_end(
            &self.buf,
            &delim,
            &self.opts.column_separator,
            start,
            self.opts.enclose,
            self.opts.escape,
        ) {
            let line = self.buf[start..end].to_vec();
            self.line(&line, &mut out)?;
            start = end + delim.len();
        }
        self.buf.drain(..start);
        Ok(out)
    }

    /// Ends the body; returns the last rows.
    pub fn finish(&mut self) -> Result<Vec<Parsed>> {
        let mut out = vec![];
        if !self.by_lines() {
            let whole = std::mem::take(&mut self.json_whole);
            let text = String::from_utf8_lossy(&whole);
            if text.trim().is_empty() {
                return Ok(out);
            }
            let v: serde_json::Value = serde_json::from_str(text.trim())
                .map_err(|e| TethysError::DataQuality(format!("Parse json data failed: {e}")))?;
            self.json_document(&v, &mut out)?;
            return Ok(out);
        }
        let rest = std::mem::take(&mut self.buf);
        if !rest.is_empty() {
            self.line(&rest, &mut out)?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        s.feed(br#"{"data": [{"k": 1, "info": {"city": "Oslo"}}, {"k": 2}]}"#)
            .unwrap();
        let rows: Vec<_> = s
            .finish()
            .unwrap()
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(
            rows[0].fields,
            vec![Some("1".into()), Some("Oslo".into()), None]
        );
        assert_eq!(rows[1].fields, vec![Some("2".into()), None, None]);
        let mut o = opts(Format::Json);
        o.skip_lines = 0;
        o.read_json_by_line = true;
        o.json_root = Some(JsonPath::parse("$.data").unwrap());
        let mut s = RowSplitter::new(o, vec!["k".into()]);
        let rows = s.feed(b"{\"data\": {\"k\": 5}}\n{\"other\": 1}\n").unwrap();
        assert_eq!(rows[0].as_ref().unwrap().fields, vec![Some("5".into())]);
        assert_eq!(rows[1].as_ref().unwrap_err().0, "JSON Root not found.");
    }

    #[test]
    fn csv_across_chunks() {
        let mut s = RowSplitter::new(opts(Format::Csv), vec![]);
        let mut rows = s.feed(b"header\na||\"b\"||\\N\nc|").unwrap();
        rows.extend(s.feed(b"|d").unwrap());
        rows.extend(s.finish().unwrap());
        let rows: Vec<SourceRow> = rows.into_iter().map(|r| r.unwrap()).collect();
        assert_eq!(
            rows[0].fields,
            vec![Some("a".into()), Some("b".into()), None]
        );
        assert_eq!(rows[1].fields, vec![Some("c".into()), Some("d".into())]);
    }

    #[test]
    fn enclosed_fields() {
        let mut o = opts(Format::Csv);
        o.column_separator = b"|;".to_vec();
        o.skip_lines = 0;
        o.enclose = Some(b'"');
        o.escape = Some(b'\\');
        let mut s = RowSplitter::new(o, vec![]);
        let mut rows = s
            .feed(b"1|;\"a|;b\"|;x\n2|;\"line\nbreak\"|;\"say \\\"hi\\\"\"\n3|;")
            .unwrap();
        rows.extend(s.feed(b"\"\"\"\"|;z").unwrap());
        rows.extend(s.finish().unwrap());
        let rows: Vec<SourceRow> = rows.into_iter().map(|r| r.unwrap()).collect();
        assert_eq!(
            rows[0].fields,
            vec![Some("1".into()), Some("a|;b".into()), Some("x".into())]
        );
        assert_eq!(
            rows[1].fields,
            vec![
                Some("2".into()),
                Some("line\nbreak".into()),
                Some("say \"hi\"".into())
            ]
        );
        assert_eq!(
            rows[2].fields,
            vec![Some("3".into()), Some("\"".into()), Some("z".into())]
        );
    }

    #[test]
    fn json_array_and_lines() {
        let names = vec!["id".to_string(), "name".to_string()];
        let mut o = opts(Format::Json);
        o.skip_lines = 0;
        let mut s = RowSplitter::new(o.clone(), names.clone());
        s.feed(br#"[{"id": 1, "NAME": "a"}, {"id": 2}]"#).unwrap();
        let rows = s.finish().unwrap();
        assert_eq!(
            rows[0].as_ref().unwrap().fields,
            vec![Some("1".into()), Some("a".into())]
        );
        assert_eq!(
            rows[1].as_ref().unwrap().fields,
            vec![Some("2".into()), None]
        );
        o.read_json_by_line = true;
        let mut s = RowSplitter::new(o, names);
        let rows = s.feed(b"{\"id\":3,\"name\":\"c\"}\nnot json\n").unwrap();
        assert!(rows[0].is_ok());
        assert!(rows[1].is_err());
    }
}
