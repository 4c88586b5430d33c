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

/// The byte offset of keyword `kw` at top level of `sql` (outside quotes,
/// comments and parentheses), as MySQL's tokenizer reads it; `None` when it
/// is not there or `sql` does not tokenize (its parser reports that).
pub(super) fn find_top_level_kw(sql: &str, kw: &str) -> Option<usize> {
    use datafusion::sql::sqlparser::tokenizer::Token;
    let mut depth = 0i32;
    for (tok, range) in crate::sql::tokens::with_spans(sql)? {
        match tok {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Word(w)
                if depth == 0 && w.quote_style.is_none() && w.value.eq_ignore_ascii_case(kw) =>
            {
                return Some(range.start);
            }
            _ => {}
        }
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

    #[test]
    fn keywords_are_found_past_names_in_any_script() {
        use super::find_top_level_kw;
        let sql = "DELETE FROM 订单 WHERE 金额 > 1";
        let at = find_top_level_kw(sql, "where").expect("where");
        assert_eq!(&sql[at..at + 5], "WHERE");
        assert_eq!(
            find_top_level_kw("INSERT INTO 订单 VALUES (1)", "with"),
            None
        );
        assert_eq!(find_top_level_kw("SELECT 'where' FROM t", "where"), None);
        assert_eq!(
            find_top_level_kw("SELECT (a where) FROM `where`", "where"),
            None
        );
        assert_eq!(
            find_top_level_kw("SELECT a FROM t -- where\n", "where"),
            None
        );
    }
}
