//! `?` placeholders of a prepared statement (`COM_STMT_PREPARE`, `PREPARE s
//! FROM 'select ?'`) and the literals bound to them.

use tethys_common::TethysError;

/// Substitutes `?` placeholders (outside quotes and comments) with literals.
pub fn bind_params(sql: &str, params: &[String]) -> Result<String, TethysError> {
    let mut out = String::with_capacity(sql.len() + params.iter().map(|p| p.len()).sum::<usize>());
    let mut it = params.iter();
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                out.push(c);
                if c == '\\' {
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' | '`' => {
                    quote = Some(c);
                    out.push(c);
                }
                '?' => {
                    let p = it.next().ok_or_else(|| {
                        TethysError::Analysis("fewer parameters than placeholders".into())
                    })?;
                    out.push_str(p);
                }
                _ => out.push(c),
            },
        }
    }
    Ok(out)
}

/// The `?` placeholders of a statement (outside quotes).
pub fn count_placeholders(sql: &str) -> usize {
    let n = sql.len();
    let dummy: Vec<String> = vec![String::new(); n + 1];
    match bind_params(sql, &dummy) {
        Ok(s) => sql.len() - s.len(),
        Err(_) => 0,
    }
}

/// A string as a SQL literal.
pub fn quote_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('\'');
    for c in s.chars() {
        match c {
            '\'' => o.push_str("''"),
            '\\' => o.push_str("\\\\"),
            _ => o.push(c),
        }
    }
    o.push('\'');
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders() {
        assert_eq!(
            count_placeholders("select ?, '?', `?` from t where a = ?"),
            2
        );
        assert_eq!(
            bind_params("select ? , 'x?'", &["'a''b'".into()]).unwrap(),
            "select 'a''b' , 'x?'"
        );
        assert!(bind_params("select ?", &[]).is_err());
        assert_eq!(quote_str("it's"), "'it''s'");
    }
}
