//! Doris' regular-expression extractors (RE2 syntax, which Rust's `regex`
//! shares, POSIX classes such as `[[:lower:]]` included):
//!
//! ```sql
//! SELECT regexp_extract('AbCdE', '([[:lower:]]+)C([[:lower:]]+)', 2);      -- 'd'
//! SELECT regexp_extract_all('x=a3&x=18abc&x=2&y=3', 'x=([0-9]+)([a-z]+)'); -- ['18']
//! ```
//!
//! `regexp_extract` gives `''` when nothing matches or the group does not
//! exist (`regexp_extract_or_null` gives NULL); `regexp_extract_all` gives
//! the first group of every match as `['a','b']`, `''` when nothing
//! matches or the pattern has no group. An invalid pattern is an error.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::ScalarUDF;
use regex::Regex;

use super::text::{TextFn, int_arg};

pub(super) fn udfs() -> Vec<Arc<ScalarUDF>> {
    vec![
        TextFn::udf("regexp_extract", 3, 3, |a| extract(a, "")),
        TextFn::udf("regexp_extract_or_null", 3, 3, |a| extract(a, "_or_null")),
        TextFn::udf("regexp_extract_all", 2, 2, |a| {
            Ok(Some(extract_all(a[0], &compiled(a[1])?)))
        }),
    ]
}

/// Compiled patterns of this thread, most recent uses: a column of patterns
/// compiles each distinct one once (bounded, cleared when full).
pub(super) fn compiled(pattern: &str) -> Result<Regex> {
    const KEEP: usize = 64;
    thread_local! {
        static CACHE: RefCell<HashMap<String, Regex>> = RefCell::new(HashMap::new());
    }
    CACHE.with(|c| {
        if let Some(re) = c.borrow().get(pattern) {
            return Ok(re.clone());
        }
        let re = Regex::new(pattern).map_err(|e| {
            DataFusionError::Execution(format!("Invalid regex expression: {pattern}: {e}"))
        })?;
        let mut cache = c.borrow_mut();
        if cache.len() >= KEEP {
            cache.clear();
        }
        cache.insert(pattern.to_string(), re.clone());
        Ok(re)
    })
}

/// `regexp_extract(s, pattern, group)`; `suffix` is `_or_null` for the
/// variant that answers NULL instead of `''`.
fn extract(a: &[&str], suffix: &str) -> Result<Option<String>> {
    let group = int_arg(&format!("regexp_extract{suffix}"), a[2])?;
    let re = compiled(a[1])?;
    let none = if suffix.is_empty() {
        Some(String::new())
    } else {
        None
    };
    if group < 0 {
        return Ok(None);
    }
    let Some(caps) = re.captures(a[0]) else {
        return Ok(none);
    };
    Ok(match caps.get(group as usize) {
        Some(m) => Some(m.as_str().to_string()),
        None if (group as usize) < caps.len() => Some(String::new()),
        None => none,
    })
}

/// The first group of every match, as Doris prints a list of strings.
pub fn extract_all(s: &str, re: &Regex) -> String {
    if re.captures_len() < 2 {
        return String::new();
    }
    let found: Vec<&str> = re
        .captures_iter(s)
        .filter_map(|c| c.get(1).map(|m| m.as_str()))
        .collect();
    if found.is_empty() {
        return String::new();
    }
    format!("['{}']", found.join("','"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doris_extract() {
        let x = |s, p, g: &str| extract(&[s, p, g], "").unwrap();
        assert_eq!(
            x("AbCdE", "([[:lower:]]+)C([[:lower:]]+)", "1").as_deref(),
            Some("b")
        );
        assert_eq!(
            x("AbCdE", "([[:lower:]]+)C([[:lower:]]+)", "2").as_deref(),
            Some("d")
        );
        assert_eq!(x("AbCdE", "(x)", "1").as_deref(), Some(""));
        assert_eq!(x("AbCdE", "(b)", "5").as_deref(), Some(""));
        assert_eq!(x("AbCdE", "(b)", "-1"), None);
        assert_eq!(extract(&["AbCdE", "(x)", "1"], "_or_null").unwrap(), None);
        assert!(extract(&["a", "(", "1"], "").is_err());
    }

    #[test]
    fn doris_extract_all() {
        let re = compiled("x=([0-9]+)([a-z]+)").unwrap();
        assert_eq!(
            extract_all("x=a3&x=18abc&x=2&y=3&x=4&x=17bcd", &re),
            "['18','17']"
        );
        assert_eq!(extract_all("no", &re), "");
        assert_eq!(extract_all("abc", &compiled("b").unwrap()), "");
    }
}
