//! Splitting a multi-statement string into statements, and finding a
//! keyword outside quotes and parentheses.

/// The statements of `sql` that end in `;` (comments dropped, MySQL's
/// tokenizer deciding what is quoted) and the byte offset where the
/// unfinished rest begins; `None` while a quote or comment is open. The FE
/// and the `tethys shell` both split with it.
pub fn complete_statements(sql: &str) -> Option<(Vec<String>, usize)> {
    use datafusion::sql::sqlparser::tokenizer::{Token, Whitespace};
    let mut out = vec![];
    let mut cur = String::new();
    let mut rest_at = 0;
    for (tok, range) in crate::sql::tokens::with_spans(sql)? {
        match tok {
            Token::SemiColon => {
                if !cur.trim().is_empty() {
                    out.push(cur.trim().to_string());
                }
                cur.clear();
                rest_at = range.end;
            }
            Token::Whitespace(Whitespace::SingleLineComment { .. }) => cur.push('\n'),
            Token::Whitespace(Whitespace::MultiLineComment(_)) => cur.push(' '),
            _ => cur.push_str(&sql[range]),
        }
    }
    Some((out, rest_at))
}

/// Splits a multi-statement string on `;` outside quotes and comments; the
/// last statement needs no `;`. Text that does not tokenize is one
/// statement (its parser reports the error).
pub fn split_statements(sql: &str) -> Vec<String> {
    // Most statements hold no `;` and no comment: nothing to cut, and no
    // need to tokenize what the parser tokenizes again (a 20,000-row INSERT).
    if !sql.contains([';', '#']) && !sql.contains("--") && !sql.contains("/*") {
        let whole = sql.trim();
        return if whole.is_empty() {
            vec![]
        } else {
            vec![whole.to_string()]
        };
    }
    let Some((mut out, rest_at)) = complete_statements(sql) else {
        let whole = sql.trim();
        return if whole.is_empty() {
            vec![]
        } else {
            vec![whole.to_string()]
        };
    };
    if let Some((last, _)) = complete_statements(&format!("{}\n;", &sql[rest_at..])) {
        out.extend(last);
    }
    out
}

/// Finds the byte offset of a keyword at top level (outside quotes/parens).
pub(super) fn find_top_level_kw(sql: &str, kw: &str) -> Option<usize> {
    let b = sql.as_bytes();
    let mut quote: Option<u8> = None;
    let mut depth = 0i32;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
        } else {
            match c {
                b'\'' | b'"' | b'`' => quote = Some(c),
                b'(' => depth += 1,
                b')' => depth -= 1,
                _ => {
                    if depth == 0
                        && sql[i..].len() >= kw.len()
                        && sql.is_char_boundary(i + kw.len())
                        && sql[i..i + kw.len()].eq_ignore_ascii_case(kw)
                        && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
                        && sql[i + kw.len()..]
                            .bytes()
                            .next()
                            .is_none_or(|n| !(n.is_ascii_alphanumeric() || n == b'_'))
                    {
                        return Some(i);
                    }
                }
            }
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::split_statements;

    #[test]
    fn split_by_the_tokenizer() {
        assert_eq!(
            split_statements(
                "select 'it''s; fine'; # a; comment\nselect \"x;\" -- c;\n; select `a;b`"
            ),
            vec!["select 'it''s; fine'", "select \"x;\"", "select `a;b`"]
        );
        assert_eq!(split_statements("select 1 -- trailing"), vec!["select 1"]);
        assert_eq!(split_statements(" ; ;"), Vec::<String>::new());
        // Text that does not tokenize is one statement for the parser to refuse.
        assert_eq!(split_statements("select 'open; x"), vec!["select 'open; x"]);
    }
}
