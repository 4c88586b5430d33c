//! Doris' join distribution hints, which sqlparser does not know:
//!
//! ```sql
//! SELECT count(*) FROM lineitem JOIN [shuffle] orders ON l_orderkey = o_orderkey;
//! SELECT count(*) FROM lineitem JOIN [broadcast] supplier ON l_suppkey = s_suppkey;
//! ```
//!
//! `[broadcast]` copies the hinted (right) table to every instance of the
//! other side and builds the hash table from it; `[shuffle]` hashes both
//! sides on the join keys. The hint is cut out of the text before parsing
//! (blanked, so positions do not move) and kept as the table it names; the
//! planner applies it to the hash join that table's scan feeds
//! (`planner::join_hints`), whatever order the joins are reordered into.

use datafusion::sql::sqlparser::tokenizer::Token;
use tethys_common::{Result, TethysError};

/// How a hinted join distributes its inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// The hinted table is the build side, copied to every probe instance.
    Broadcast,
    /// Both sides hashed on the join keys.
    Shuffle,
}

impl Distribution {
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Broadcast => "broadcast",
            Distribution::Shuffle => "shuffle",
        }
    }
}

/// One hint: the table right after `JOIN [hint]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinHint {
    /// The table's name (without its database), as written.
    pub table: String,
    pub distribution: Distribution,
}

/// `sql` with its join hints blanked out, and the hints; an unknown hint,
/// or one before something other than a table, is an error naming it.
pub fn strip(sql: &str) -> Result<(std::borrow::Cow<'_, str>, Vec<JoinHint>)> {
    if !sql.contains('[') {
        return Ok((sql.into(), vec![]));
    }
    let Some(toks) = super::tokens::with_spans(sql) else {
        return Ok((sql.into(), vec![]));
    };
    let significant: Vec<_> = toks
        .iter()
        .filter(|(t, _)| !matches!(t, Token::Whitespace(_)))
        .collect();
    let mut hints = vec![];
    let mut blanks = vec![];
    for (i, (t, _)) in significant.iter().enumerate() {
        let is_join = matches!(t, Token::Word(w) if w.quote_style.is_none()
            && w.value.eq_ignore_ascii_case("join"));
        if !is_join || !matches!(significant.get(i + 1), Some((Token::LBracket, _))) {
            continue;
        }
        let (Some((Token::Word(hint), _)), Some((Token::RBracket, end))) =
            (significant.get(i + 2), significant.get(i + 3))
        else {
            return Err(TethysError::Syntax(
                "a join hint is one word in brackets: JOIN [broadcast] or JOIN [shuffle]".into(),
            ));
        };
        let distribution = match hint.value.to_ascii_lowercase().as_str() {
            "broadcast" => Distribution::Broadcast,
            "shuffle" => Distribution::Shuffle,
            other => {
                return Err(TethysError::NotSupported(format!(
                    "join hint [{other}] is not supported (only [broadcast] and [shuffle] are)"
                )));
            }
        };
        let table = table_after(&significant[i + 4..]).ok_or_else(|| {
            TethysError::NotSupported(format!(
                "join hint [{}] before a subquery is not supported yet: hint a table",
                distribution.name()
            ))
        })?;
        hints.push(JoinHint {
            table,
            distribution,
        });
        blanks.push(significant[i + 1].1.start..end.end);
    }
    if blanks.is_empty() {
        return Ok((sql.into(), hints));
    }
    let mut out = sql.to_string();
    for r in blanks {
        out.replace_range(r.clone(), &" ".repeat(r.len()));
    }
    Ok((out.into(), hints))
}

/// The table name `[db.]table` that `toks` start with.
fn table_after(toks: &[&(Token, std::ops::Range<usize>)]) -> Option<String> {
    let word = |k: usize| match toks.get(k) {
        Some((Token::Word(w), _)) => Some(w.value.clone()),
        _ => None,
    };
    let first = word(0)?;
    match toks.get(1) {
        Some((Token::Period, _)) => word(2),
        _ => Some(first),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_are_blanked_and_kept_as_their_tables() {
        let sql =
            "SELECT 1 FROM a JOIN [BroadCast] d.b x ON a.k = x.k LEFT JOIN [shuffle] `c` ON 1";
        let (text, hints) = strip(sql).unwrap();
        assert_eq!(text.len(), sql.len());
        assert!(!text.contains('['), "{text}");
        assert!(text.contains("JOIN             d.b x"), "{text}");
        assert_eq!(
            hints,
            vec![
                JoinHint {
                    table: "b".into(),
                    distribution: Distribution::Broadcast
                },
                JoinHint {
                    table: "c".into(),
                    distribution: Distribution::Shuffle
                },
            ]
        );
        // Brackets elsewhere are not hints.
        let (text, hints) = strip("SELECT '[broadcast]' FROM t JOIN u ON 1").unwrap();
        assert!(hints.is_empty() && text.contains("[broadcast]"));
    }

    #[test]
    fn unknown_and_misplaced_hints_are_refused_by_name() {
        let e = strip("SELECT 1 FROM a JOIN [bucket] b ON 1").unwrap_err();
        assert!(e.to_string().contains("[bucket]"), "{e}");
        let e = strip("SELECT 1 FROM a JOIN [shuffle] (SELECT 1 k) b ON 1").unwrap_err();
        assert!(e.to_string().contains("subquery"), "{e}");
        assert!(strip("SELECT 1 FROM a JOIN [shuffle b ON 1").is_err());
    }
}
