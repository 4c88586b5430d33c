//! `?` placeholders of a prepared statement (`COM_STMT_PREPARE`, `PREPARE s
//! FROM 'select ?'`) and the literals bound to them.

use tethys_common::TethysError;

/// Substitutes `?` placeholders (outside quotes and comments) with literals.
pub fn bind_params(sql: &str, params: &[String]) -> Result<String, TethysError> {
    let mut it = params.iter();
    substitute(sql, || {
        it.next()
            .map(String::as_str)
            .ok_or_else(|| TethysError::Analysis("fewer parameters than placeholders".into()))
    })
}

/// The `?` placeholders of a statement (outside quotes).
pub fn count_placeholders(sql: &str) -> usize {
    let mut n = 0;
    let _ = substitute(sql, || {
        n += 1;
        Ok("")
    });
    n
}

/// `sql` with each `?` outside quotes replaced by what `next` gives.
fn substitute<'p>(
    sql: &str,
    mut next: impl FnMut() -> Result<&'p str, TethysError>,
) -> Result<String, TethysError> {
    let mut out = String::with_capacity(sql.len());
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
                '?' => out.push_str(next()?),
                _ => out.push(c),
            },
        }
    }
    Ok(out)
}

/// A number's text as a literal that pastes safely where a `?` stood: a
/// negative one in parentheses (`10 -?` bound to -5 reads `10 -(-5)`, one
/// operand whatever the operator before it), and text that is no plain
/// number (a DECIMAL parameter `1-- `, which commented out the rest of the
/// statement, or `NaN`) as a quoted string, which the statement then casts
/// or refuses like any string.
pub fn number_literal(text: &str) -> String {
    if !is_plain_number(text) {
        quote_str(text)
    } else if text.starts_with(['-', '+']) {
        format!("({text})")
    } else {
        text.to_string()
    }
}

/// `[+-]digits[.digits][e[+-]digits]`, with digits on at least one side of
/// the point.
fn is_plain_number(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    let mut mantissa = digits(&mut i);
    if b.get(i) == Some(&b'.') {
        i += 1;
        mantissa += digits(&mut i);
    }
    if mantissa == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
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

    #[test]
    fn numbers_paste_as_one_literal() {
        assert_eq!(number_literal("12"), "12");
        assert_eq!(number_literal("-5"), "(-5)");
        assert_eq!(number_literal("1.5e-3"), "1.5e-3");
        assert_eq!(number_literal(".5"), ".5");
        assert_eq!(number_literal("1--"), "'1--'");
        assert_eq!(number_literal("1e"), "'1e'");
        assert_eq!(number_literal("NaN"), "'NaN'");
        assert_eq!(number_literal("-"), "'-'");
        assert_eq!(
            bind_params("select 10 -?", &[number_literal("-5")]).unwrap(),
            "select 10 -(-5)"
        );
    }
}
