//! A small cursor over sqlparser tokens for the Doris statements sqlparser
//! does not know (CREATE TABLE with key/partition/distribution clauses, SHOW
//! variants, ALTER TABLE ... PARTITION, ...).

use datafusion::sql::sqlparser::dialect::MySqlDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use tethys_common::{Result, TethysError};

/// Every token of `sql` (whitespace and comments too) with the byte range
/// of its text; `None` when `sql` does not tokenize (an unterminated quote
/// or comment).
pub fn with_spans(sql: &str) -> Option<Vec<(Token, std::ops::Range<usize>)>> {
    let toks = Tokenizer::new(&MySqlDialect {}, sql)
        .tokenize_with_location()
        .ok()?;
    // Token starts come in text order: one walk over the characters turns
    // each (line, column) into a byte offset (a per-token search was
    // quadratic on a one-line INSERT of 20,000 rows).
    let mut starts = Vec::with_capacity(toks.len());
    let mut chars = sql.char_indices().peekable();
    let (mut line, mut col) = (1u64, 1u64);
    for t in &toks {
        let want = (t.span.start.line, t.span.start.column);
        while (line, col) < want {
            match chars.next() {
                Some((_, '\n')) => {
                    line += 1;
                    col = 1;
                }
                Some(_) => col += 1,
                None => break,
            }
        }
        starts.push(chars.peek().map_or(sql.len(), |(b, _)| *b));
    }
    Some(
        toks.into_iter()
            .enumerate()
            .filter(|(_, t)| t.token != Token::EOF)
            .map(|(i, t)| {
                let end = starts.get(i + 1).copied().unwrap_or(sql.len());
                (t.token, starts[i]..end)
            })
            .collect(),
    )
}

/// Tokens of one statement, whitespace and comments removed.
pub struct Tokens {
    toks: Vec<Token>,
    pos: usize,
}

impl Tokens {
    /// Tokenizes `sql` with MySQL rules (double quotes delimit strings).
    pub fn new(sql: &str) -> Result<Tokens> {
        let dialect = MySqlDialect {};
        let toks = Tokenizer::new(&dialect, sql)
            .tokenize()
            .map_err(|e| TethysError::Syntax(format!("{e}")))?
            .into_iter()
            .filter(|t| !matches!(t, Token::Whitespace(_)))
            .collect();
        Ok(Tokens { toks, pos: 0 })
    }

    pub fn peek(&self) -> Option<&Token> {
        self.toks.get(self.pos)
    }

    /// Every token, wherever the cursor is.
    pub fn all(&self) -> &[Token] {
        &self.toks
    }

    pub fn peek_at(&self, k: usize) -> Option<&Token> {
        self.toks.get(self.pos + k)
    }

    pub fn advance(&mut self) -> Option<Token> {
        let t = self.toks.get(self.pos).cloned();
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    /// True at the end, ignoring trailing semicolons.
    pub fn at_end(&self) -> bool {
        self.toks[self.pos.min(self.toks.len())..]
            .iter()
            .all(|t| matches!(t, Token::SemiColon | Token::EOF))
    }

    fn word_at(&self, k: usize) -> Option<&str> {
        match self.peek_at(k) {
            Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.as_str()),
            _ => None,
        }
    }

    /// Whether the next tokens are the given keywords (case-insensitive).
    pub fn peek_kws(&self, kws: &[&str]) -> bool {
        kws.iter()
            .enumerate()
            .all(|(i, k)| self.word_at(i).is_some_and(|w| w.eq_ignore_ascii_case(k)))
    }

    /// Consumes the keywords if they come next.
    pub fn eat_kws(&mut self, kws: &[&str]) -> bool {
        if self.peek_kws(kws) {
            self.pos += kws.len();
            true
        } else {
            false
        }
    }

    pub fn eat_kw(&mut self, kw: &str) -> bool {
        self.eat_kws(&[kw])
    }

    pub fn expect_kw(&mut self, kw: &str) -> Result<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{}'", kw.to_uppercase())))
        }
    }

    pub fn eat(&mut self, t: &Token) -> bool {
        if self.peek() == Some(t) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    pub fn expect(&mut self, t: &Token) -> Result<()> {
        if self.eat(t) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{t}'")))
        }
    }

    /// A syntax error at the current token.
    pub fn unexpected(&self, expected: &str) -> TethysError {
        let found = match self.peek() {
            None | Some(Token::EOF) => "end of statement".to_string(),
            Some(t) => format!("'{t}'"),
        };
        TethysError::Syntax(format!(
            "You have an error in your SQL syntax: expected {expected} but found {found} (token {})",
            self.pos + 1
        ))
    }

    /// An identifier (plain or back-quoted).
    pub fn ident(&mut self) -> Result<String> {
        match self.peek() {
            Some(Token::Word(w)) => {
                let v = w.value.clone();
                self.pos += 1;
                Ok(v)
            }
            _ => Err(self.unexpected("an identifier")),
        }
    }

    /// `name` or `db.name`.
    pub fn object_name(&mut self) -> Result<(Option<String>, String)> {
        let a = self.ident()?;
        if self.eat(&Token::Period) {
            let b = self.ident()?;
            Ok((Some(a), b))
        } else {
            Ok((None, a))
        }
    }

    /// A quoted string literal ('x' or "x").
    pub fn string(&mut self) -> Result<String> {
        match self.peek() {
            Some(Token::SingleQuotedString(s)) | Some(Token::DoubleQuotedString(s)) => {
                let v = s.clone();
                self.pos += 1;
                Ok(v)
            }
            _ => Err(self.unexpected("a quoted string")),
        }
    }

    /// An unsigned integer literal.
    pub fn number(&mut self) -> Result<u64> {
        match self.peek() {
            Some(Token::Number(n, _)) => {
                let v = n
                    .parse::<u64>()
                    .map_err(|_| TethysError::Syntax(format!("expected an integer, found {n}")))?;
                self.pos += 1;
                Ok(v)
            }
            _ => Err(self.unexpected("a number")),
        }
    }

    /// `( ident, ... )`.
    pub fn ident_list(&mut self) -> Result<Vec<String>> {
        self.expect(&Token::LParen)?;
        let mut v = vec![self.ident()?];
        while self.eat(&Token::Comma) {
            v.push(self.ident()?);
        }
        self.expect(&Token::RParen)?;
        Ok(v)
    }

    /// `( "k" = "v", ... )`.
    pub fn properties(&mut self) -> Result<Vec<(String, String)>> {
        self.expect(&Token::LParen)?;
        let mut v = vec![];
        if self.eat(&Token::RParen) {
            return Ok(v);
        }
        loop {
            let k = self.string()?;
            self.expect(&Token::Eq)?;
            let val = self.string()?;
            v.push((k, val));
            if !self.eat(&Token::Comma) {
                break;
            }
        }
        self.expect(&Token::RParen)?;
        Ok(v)
    }

    /// Fails unless the statement is fully consumed.
    pub fn finish(&self) -> Result<()> {
        if self.at_end() {
            Ok(())
        } else {
            Err(self.unexpected("end of statement"))
        }
    }
}
