//! `SELECT ... FROM t PARTITION (p1, p2)`: only the named partitions are
//! read. DataFusion drops the clause (the query read every partition), so
//! the FE names the table `t` + [`MARK`] + `p1,p2` (aliased back to `t`)
//! and the catalog's schema provider serves a snapshot of `t` holding just
//! those partitions; an unknown partition is MySQL's error.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Ident, ObjectNamePart, Statement, TableAlias, TableFactor, VisitMut, VisitorMut,
};

/// Separates a table's name from the partitions it is read with.
pub const MARK: char = '\u{2}';

/// Rewrites every `t PARTITION (...)` of a statement.
pub fn rewrite(stmt: &mut Statement) {
    let _ = stmt.visit(&mut Partitions);
}

/// `(table, partitions)` of a name the rewrite made; `None` for a plain name.
pub fn split(name: &str) -> Option<(&str, Vec<&str>)> {
    let (table, parts) = name.split_once(MARK)?;
    Some((table, parts.split(',').collect()))
}

struct Partitions;

impl VisitorMut for Partitions {
    type Break = ();

    fn pre_visit_table_factor(&mut self, tf: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table {
            name,
            alias,
            partitions,
            ..
        } = tf
        else {
            return ControlFlow::Continue(());
        };
        if partitions.is_empty() {
            return ControlFlow::Continue(());
        }
        let Some(ObjectNamePart::Identifier(last)) = name.0.last_mut() else {
            return ControlFlow::Continue(());
        };
        let table = last.value.clone();
        let list: Vec<String> = partitions.iter().map(|p| p.value.clone()).collect();
        *last = Ident::with_quote('`', format!("{table}{MARK}{}", list.join(",")));
        if alias.is_none() {
            *alias = Some(TableAlias {
                explicit: true,
                name: Ident::with_quote('`', table),
                columns: vec![],
                at: None,
            });
        }
        partitions.clear();
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::MySqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    #[test]
    fn named_partitions_travel_in_the_table_name() {
        let mut s = Parser::parse_sql(
            &MySqlDialect {},
            "SELECT t.v FROM db.t PARTITION (p1, p2) JOIN u ON 1 = 1",
        )
        .expect("parses")
        .remove(0);
        rewrite(&mut s);
        let text = s.to_string();
        assert!(text.contains("db.`t\u{2}p1,p2` AS `t`"), "{text}");
        assert_eq!(split("t\u{2}p1,p2"), Some(("t", vec!["p1", "p2"])));
        assert_eq!(split("t"), None);
    }
}
