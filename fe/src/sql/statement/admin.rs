//! ANALYZE.

use tethys_common::{Result, TethysError};

use crate::sql::tokens::Tokens;

use super::*;

/// `ANALYZE TABLE t [(cols)] [WITH SYNC]` / `ANALYZE DATABASE db [WITH SYNC]`.
/// Collection always finishes before the statement returns (as `WITH SYNC`
/// does in Doris); sampling is refused rather than silently ignored.
pub(super) fn parse_analyze(t: &mut Tokens) -> Result<Statement> {
    t.advance();
    let (target, columns) = if t.eat_kw("table") {
        let (db, name) = t.object_name()?;
        (AnalyzeTarget::Table { db, name }, optional_ident_list(t)?)
    } else if t.eat_kw("database") {
        (AnalyzeTarget::Database(t.ident()?), vec![])
    } else {
        return Err(t.unexpected("TABLE or DATABASE"));
    };
    while t.eat_kw("with") {
        if t.eat_kw("sample") {
            return Err(TethysError::NotSupported(
                "ANALYZE ... WITH SAMPLE; Tethys analyzes every row".into(),
            ));
        }
        if !(t.eat_kw("sync") || t.eat_kw("full")) {
            return Err(t.unexpected("SYNC or FULL"));
        }
    }
    t.finish()?;
    Ok(Statement::Analyze { target, columns })
}
