//! How deep a statement's expressions may nest.
//!
//! ```sql
//! SELECT 1+1+1+ ... +1   -- 2,000 terms
//! ```
//!
//! parsed into a left-deep tree 2,000 levels high, and the recursive passes
//! over it (rewrites, planning, dropping it) overflowed a runtime thread's
//! stack, which aborts the whole process: every session, the BE beside the FE.
//! sqlparser bounds parentheses (50 levels) but not a chain of operators.
//! Doris bounds both with `expr_depth_limit` (3000): a statement is refused
//! with its message before anything recursive sees it.
//!
//! The depth is bounded from the tokens, in one pass without recursion: in
//! each parenthesized group (and the statement itself), a run of operators
//! of one precedence class (not broken by one of a lower class, a comma or a
//! clause keyword) stacks that many levels; the runs of each class and the
//! deepest group inside add up. A left-deep chain reaches the bound; long
//! flat lists (`IN (1, 2, ...)`, wide SELECT lists, many VALUES rows, an AND
//! of comparisons) pass however long they are.

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::Token;
use tethys_common::{Result, TethysError};

/// Doris' `expr_depth_limit`.
pub const EXPR_DEPTH_LIMIT: usize = 3000;

/// Operator precedence classes, lowest first (MySQL's order): an operator
/// ends the runs of every class above its own.
const CLASSES: usize = 10;

/// One open group: per precedence class, the operators of the current run
/// and the longest run; the deepest group inside.
#[derive(Default)]
struct Group {
    runs: [usize; CLASSES],
    longest: [usize; CLASSES],
    deepest_child: usize,
}

impl Group {
    /// A chain of n operators of one class is n levels; each operand of it
    /// is a chain of higher classes (or a group).
    fn depth(&self) -> usize {
        self.longest.iter().sum::<usize>() + self.deepest_child + 1
    }

    fn operator(&mut self, class: usize) {
        self.runs[class] += 1;
        self.longest[class] = self.longest[class].max(self.runs[class]);
        for r in &mut self.runs[class + 1..] {
            *r = 0;
        }
    }

    fn separator(&mut self) {
        self.runs = [0; CLASSES];
    }
}

/// An upper bound of the expression depth of a statement's tokens.
pub fn depth_bound(tokens: &[Token]) -> usize {
    let mut stack = vec![Group::default()];
    let close = |stack: &mut Vec<Group>| {
        let d = stack.pop().map_or(0, |g| g.depth());
        if let Some(top) = stack.last_mut() {
            top.deepest_child = top.deepest_child.max(d);
        }
    };
    for t in tokens {
        match t {
            Token::LParen | Token::LBracket => stack.push(Group::default()),
            Token::RParen | Token::RBracket if stack.len() > 1 => close(&mut stack),
            t if separates(t) => {
                if let Some(top) = stack.last_mut() {
                    top.separator();
                }
            }
            t => {
                if let (Some(class), Some(top)) = (operator_class(t), stack.last_mut()) {
                    top.operator(class);
                }
            }
        }
    }
    // Groups left open (a syntax error to come) count as closed.
    while stack.len() > 1 {
        close(&mut stack);
    }
    stack.last().map_or(0, |g| g.depth())
}

/// Refuses a statement whose expressions may nest deeper than Doris allows.
pub fn check(tokens: &[Token]) -> Result<()> {
    if depth_bound(tokens) > EXPR_DEPTH_LIMIT {
        return Err(TethysError::Analysis(format!(
            "Exceeded the maximum depth of an expression tree ({EXPR_DEPTH_LIMIT})."
        )));
    }
    Ok(())
}

/// Tokens that end one item of a list or clause: what follows does not
/// stack on what came before.
fn separates(t: &Token) -> bool {
    match t {
        Token::Comma | Token::SemiColon => true,
        Token::Word(w) => matches!(
            w.keyword,
            Keyword::SELECT
                | Keyword::FROM
                | Keyword::WHERE
                | Keyword::GROUP
                | Keyword::HAVING
                | Keyword::ORDER
                | Keyword::LIMIT
                | Keyword::UNION
                | Keyword::JOIN
                | Keyword::ON
                | Keyword::WHEN
                | Keyword::THEN
                | Keyword::ELSE
                | Keyword::VALUES
                | Keyword::SET
        ),
        _ => false,
    }
}

/// The precedence class of a token that joins expressions into one a
/// level higher (`None` for other tokens).
fn operator_class(t: &Token) -> Option<usize> {
    Some(match t {
        Token::Word(w) => match w.keyword {
            Keyword::OR | Keyword::XOR => 0,
            Keyword::AND => 1,
            Keyword::NOT => 2,
            Keyword::IS
            | Keyword::LIKE
            | Keyword::RLIKE
            | Keyword::REGEXP
            | Keyword::IN
            | Keyword::BETWEEN
            | Keyword::CASE => 3,
            Keyword::DIV => 8,
            _ => return None,
        },
        Token::Eq
        | Token::DoubleEq
        | Token::Neq
        | Token::Lt
        | Token::Gt
        | Token::LtEq
        | Token::GtEq
        | Token::Spaceship => 3,
        Token::Pipe => 4,
        Token::Ampersand => 5,
        Token::ShiftLeft | Token::ShiftRight => 6,
        Token::Plus | Token::Minus | Token::StringConcat => 7,
        Token::Mul | Token::Div | Token::Mod | Token::DuckIntDiv => 8,
        Token::Caret | Token::ExclamationMark => 9,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::MySqlDialect;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    fn bound(sql: &str) -> usize {
        let toks = Tokenizer::new(&MySqlDialect {}, sql).tokenize().unwrap();
        depth_bound(&toks)
    }

    #[test]
    fn chains_count_and_lists_do_not() {
        assert_eq!(bound("SELECT 1"), 1);
        assert_eq!(bound("SELECT 1+2+3"), 3);
        assert_eq!(bound("SELECT (1+2)*3"), 4);
        let chain = format!("SELECT {}", vec!["1"; 5000].join("+"));
        assert!(bound(&chain) > EXPR_DEPTH_LIMIT);
        let list = format!("SELECT 1 IN ({})", vec!["1"; 100_000].join(","));
        assert!(bound(&list) < 10, "{}", bound(&list));
        let wide = format!("SELECT {}", vec!["a + b"; 10_000].join(", "));
        assert!(bound(&wide) < 10);
        let rows = format!(
            "INSERT INTO t VALUES {}",
            vec!["(1, -2, 'x')"; 10_000].join(", ")
        );
        assert!(bound(&rows) < 10);
        // An AND of 2,000 comparisons is about 2,000 levels, as Doris counts.
        let ands = format!("SELECT 1 WHERE {}", vec!["a = 1"; 2000].join(" AND "));
        assert!((2000..2010).contains(&bound(&ands)), "{}", bound(&ands));
        let ands = format!("SELECT 1 WHERE {}", vec!["a = 1"; 4000].join(" AND "));
        assert!(bound(&ands) > EXPR_DEPTH_LIMIT);
    }
}
