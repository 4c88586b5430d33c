//! Doris' URL functions:
//!
//! ```sql
//! SELECT parse_url('https://user@doris.apache.org:9030/docs/index.html?lang=zh#top', 'HOST'),
//!        parse_url(referrer, 'QUERY', 'utm_source'), url_decode('a%20b%2Bc')
//! ```
//!
//! `parse_url(url, part[, key])` takes PROTOCOL, AUTHORITY, USERINFO, HOST,
//! PORT, PATH, FILE, QUERY (or one key of it) or REF, and is NULL when the
//! URL has no such part or no `://`; another part name is an error.
//! `url_decode` reads `%XX` escapes and `+` as a space; `url_encode`
//! writes a form encoding (a space is `+`).

use std::sync::Arc;

use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::ScalarUDF;

use super::text::TextFn;

pub(super) fn udfs() -> Vec<Arc<ScalarUDF>> {
    vec![
        TextFn::udf("parse_url", 2, 3, |a| {
            parse_url(a[0], a[1], a.get(2).copied())
        }),
        TextFn::udf("url_decode", 1, 1, |a| Ok(Some(url_decode(a[0])))),
        TextFn::udf("url_encode", 1, 1, |a| {
            Ok(Some(
                form_urlencoded::byte_serialize(a[0].as_bytes()).collect(),
            ))
        }),
    ]
}

/// `%XX` escapes decoded and `+` read as a space.
pub fn url_decode(s: &str) -> String {
    let spaced = s.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8_lossy()
        .into_owned()
}

/// One part of a URL (see the module doc).
pub fn parse_url(url: &str, part: &str, key: Option<&str>) -> Result<Option<String>> {
    let part = part.trim().to_ascii_uppercase();
    let known = [
        "PROTOCOL",
        "AUTHORITY",
        "USERINFO",
        "HOST",
        "PORT",
        "PATH",
        "FILE",
        "QUERY",
        "REF",
    ];
    if !known.contains(&part.as_str()) {
        return Err(DataFusionError::Execution(format!(
            "parse_url: unknown URL part '{part}' (one of {})",
            known.join(", ")
        )));
    }
    if key.is_some() && part != "QUERY" {
        return Err(DataFusionError::Execution(
            "parse_url: a key is only taken with QUERY".into(),
        ));
    }
    let url = url.trim();
    let Some((protocol, rest)) = url.split_once("://") else {
        return Ok(None);
    };
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(auth_end);
    let (before_ref, fragment) = match tail.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (tail, None),
    };
    let (path, query) = match before_ref.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (before_ref, None),
    };
    let (userinfo, host_port) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    // `[::1]:80`: the port follows the bracket.
    let port_at = match host_port.rfind(']') {
        Some(b) => host_port[b..].find(':').map(|i| b + i),
        None => host_port.rfind(':'),
    };
    let (host, port) = match port_at {
        Some(i) => (&host_port[..i], Some(&host_port[i + 1..])),
        None => (host_port, None),
    };
    let some = |s: &str| Some(s.to_string());
    Ok(match part.as_str() {
        "PROTOCOL" => some(protocol),
        "AUTHORITY" => some(authority),
        "USERINFO" => userinfo.and_then(some),
        "HOST" => some(host),
        "PORT" => port.filter(|p| !p.is_empty()).and_then(some),
        "PATH" => (!path.is_empty()).then(|| path.to_string()),
        "FILE" => match query {
            Some(q) => Some(format!("{path}?{q}")),
            None => (!path.is_empty()).then(|| path.to_string()),
        },
        "QUERY" => match (query, key) {
            (Some(q), Some(k)) => q
                .split('&')
                .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string()),
            (q, _) => q.and_then(some),
        },
        _ => fragment.and_then(some),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doris_parse_url() {
        let u = "https://user:pw@doris.apache.org:9030/docs/a.html?lang=zh&x=1#top";
        let p = |part, key| parse_url(u, part, key).unwrap();
        assert_eq!(p("PROTOCOL", None).as_deref(), Some("https"));
        assert_eq!(p("host", None).as_deref(), Some("doris.apache.org"));
        assert_eq!(p("PORT", None).as_deref(), Some("9030"));
        assert_eq!(p("USERINFO", None).as_deref(), Some("user:pw"));
        assert_eq!(
            p("AUTHORITY", None).as_deref(),
            Some("user:pw@doris.apache.org:9030")
        );
        assert_eq!(p("PATH", None).as_deref(), Some("/docs/a.html"));
        assert_eq!(p("FILE", None).as_deref(), Some("/docs/a.html?lang=zh&x=1"));
        assert_eq!(p("QUERY", None).as_deref(), Some("lang=zh&x=1"));
        assert_eq!(p("QUERY", Some("x")).as_deref(), Some("1"));
        assert_eq!(p("QUERY", Some("y")), None);
        assert_eq!(p("REF", None).as_deref(), Some("top"));
        assert_eq!(parse_url("doris.apache.org/x", "HOST", None).unwrap(), None);
        assert_eq!(parse_url("http://a.com", "PATH", None).unwrap(), None);
        assert!(parse_url(u, "NOPE", None).is_err());
        assert_eq!(url_decode("a%20b%2Bc+d"), "a b+c d");
    }
}
