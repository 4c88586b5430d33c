//! CREATE / DROP / ALTER of databases, tables and partitions: columns,
//! keys, partitions, distribution and properties.

use datafusion::sql::sqlparser::tokenizer::Token;
use tethys_common::types::ColumnType;
use tethys_common::{Result, TethysError};

use crate::sql::tokens::Tokens;

use super::*;

pub(super) fn parse_create(t: &mut Tokens) -> Result<Statement> {
    t.advance();
    if t.eat_kw("database") || t.eat_kw("schema") {
        let if_not_exists = t.eat_kws(&["if", "not", "exists"]);
        let name = t.ident()?;
        if t.eat_kw("properties")
            && let Some((k, v)) = t.properties()?.first()
        {
            return Err(TethysError::NotSupported(format!(
                "database property \"{k}\" = \"{v}\" is not supported yet"
            )));
        }
        t.finish()?;
        return Ok(Statement::CreateDatabase {
            name,
            if_not_exists,
        });
    }
    t.eat_kw("external");
    if !t.eat_kw("table") {
        return Err(TethysError::NotSupported(
            "only CREATE DATABASE and CREATE TABLE are supported yet".into(),
        ));
    }
    let if_not_exists = t.eat_kws(&["if", "not", "exists"]);
    let (db, name) = t.object_name()?;
    if t.peek_kws(&["like"]) || t.peek_kws(&["as"]) {
        return Err(TethysError::NotSupported(
            "CREATE TABLE ... LIKE / AS SELECT is not supported yet".into(),
        ));
    }
    t.expect(&Token::LParen)?;
    let mut columns = vec![];
    loop {
        if t.peek_kws(&["index"]) {
            return Err(TethysError::NotSupported(
                "INDEX clauses are not supported yet".into(),
            ));
        }
        columns.push(parse_column(t)?);
        if !t.eat(&Token::Comma) {
            break;
        }
    }
    t.expect(&Token::RParen)?;
    let mut ct = CreateTable {
        db,
        name,
        if_not_exists,
        columns,
        keys_type: None,
        key_columns: vec![],
        comment: None,
        partition_column: None,
        partitions: vec![],
        distribution: None,
        properties: vec![],
    };
    loop {
        if t.at_end() {
            break;
        }
        if t.eat_kw("engine") {
            t.expect(&Token::Eq)?;
            let e = t.ident()?;
            if !e.eq_ignore_ascii_case("olap") {
                return Err(TethysError::NotSupported(format!(
                    "ENGINE = {e} is not supported; use OLAP"
                )));
            }
        } else if t.peek_kws(&["duplicate", "key"])
            || t.peek_kws(&["aggregate", "key"])
            || t.peek_kws(&["unique", "key"])
        {
            let kind = t.ident()?.to_ascii_uppercase();
            t.advance();
            ct.keys_type = Some(kind);
            ct.key_columns = t.ident_list()?;
        } else if t.eat_kw("comment") {
            ct.comment = Some(t.string()?);
        } else if t.peek_kws(&["auto", "partition"]) {
            return Err(TethysError::NotSupported(
                "AUTO PARTITION is not supported yet".into(),
            ));
        } else if t.eat_kws(&["partition", "by"]) {
            if t.eat_kw("list") {
                return Err(TethysError::NotSupported(
                    "PARTITION BY LIST is not supported yet".into(),
                ));
            }
            t.expect_kw("range")?;
            ct.partition_column = Some(t.ident_list()?);
            t.expect(&Token::LParen)?;
            if !t.eat(&Token::RParen) {
                loop {
                    if t.peek_kws(&["from"]) {
                        return Err(TethysError::NotSupported(
                            "batch partitions (FROM ... TO ... INTERVAL) are not supported yet"
                                .into(),
                        ));
                    }
                    t.expect_kw("partition")?;
                    ct.partitions.push(parse_partition_def(t)?);
                    if !t.eat(&Token::Comma) {
                        break;
                    }
                }
                t.expect(&Token::RParen)?;
            }
        } else if t.eat_kws(&["distributed", "by"]) {
            ct.distribution = Some(parse_distribution(t)?);
        } else if t.eat_kw("properties") {
            ct.properties = t.properties()?;
        } else if t.peek_kws(&["rollup"]) {
            return Err(TethysError::NotSupported(
                "ROLLUP is not supported yet".into(),
            ));
        } else {
            return Err(t.unexpected(
                "a table clause (ENGINE, KEY, PARTITION BY, DISTRIBUTED BY, PROPERTIES)",
            ));
        }
    }
    Ok(Statement::CreateTable(Box::new(ct)))
}

pub(super) fn parse_distribution(t: &mut Tokens) -> Result<DistributionDef> {
    let hash_columns = if t.eat_kw("hash") {
        t.ident_list()?
    } else if t.eat_kw("random") {
        vec![]
    } else {
        return Err(t.unexpected("HASH or RANDOM"));
    };
    let buckets = if t.eat_kw("buckets") {
        if t.eat_kw("auto") {
            None
        } else {
            let n = t.number()?;
            if n == 0 || n > 65535 {
                return Err(TethysError::Analysis(
                    "BUCKETS must be between 1 and 65535".into(),
                ));
            }
            Some(n as u32)
        }
    } else {
        None
    };
    Ok(DistributionDef {
        hash_columns,
        buckets,
    })
}

pub(super) fn parse_partition_value_tuple(t: &mut Tokens) -> Result<Option<String>> {
    if t.eat_kw("maxvalue") {
        return Ok(None);
    }
    t.expect(&Token::LParen)?;
    let v = if t.eat_kw("maxvalue") {
        None
    } else {
        let s = match t.peek() {
            Some(Token::Number(n, _)) => {
                let n = n.clone();
                t.advance();
                n
            }
            Some(Token::Minus) => {
                t.advance();
                format!("-{}", t.number()?)
            }
            _ => t.string()?,
        };
        Some(s)
    };
    if t.eat(&Token::Comma) {
        return Err(TethysError::NotSupported(
            "multi-column range partitions are not supported yet".into(),
        ));
    }
    t.expect(&Token::RParen)?;
    Ok(v)
}

pub(super) fn parse_partition_def(t: &mut Tokens) -> Result<PartitionDef> {
    let if_not_exists = t.eat_kws(&["if", "not", "exists"]);
    let name = t.ident()?;
    t.expect_kw("values")?;
    let values = if t.eat_kws(&["less", "than"]) {
        PartitionValues::LessThan(parse_partition_value_tuple(t)?)
    } else if t.eat(&Token::LBracket) {
        let lo = parse_partition_value_tuple(t)?;
        t.expect(&Token::Comma)?;
        let hi = parse_partition_value_tuple(t)?;
        t.expect(&Token::RParen)?;
        match (lo, hi) {
            (Some(lo), Some(hi)) => PartitionValues::Fixed(lo, hi),
            _ => {
                return Err(TethysError::Analysis(
                    "a fixed range [(\"a\"), (\"b\")) needs two values".into(),
                ));
            }
        }
    } else if t.peek_kws(&["in"]) {
        return Err(TethysError::NotSupported(
            "LIST partitions are not supported yet".into(),
        ));
    } else {
        return Err(t.unexpected("LESS THAN or ["));
    };
    Ok(PartitionDef {
        name,
        if_not_exists,
        values,
        buckets: None,
    })
}

pub(super) fn parse_column(t: &mut Tokens) -> Result<ColumnDef> {
    let name = t.ident()?;
    let tname = t.ident()?;
    let mut args = vec![];
    if t.eat(&Token::LParen) {
        loop {
            args.push(t.number()?);
            if !t.eat(&Token::Comma) {
                break;
            }
        }
        t.expect(&Token::RParen)?;
    }
    if t.eat(&Token::Lt) {
        return Err(TethysError::NotSupported(format!(
            "column type {}<...> is not supported yet",
            tname.to_uppercase()
        )));
    }
    let column_type = ColumnType::from_parts(&tname, &args)?;
    let mut c = ColumnDef {
        name,
        column_type,
        nullable: None,
        is_key: false,
        aggregation: None,
        default: None,
        comment: String::new(),
    };
    loop {
        if t.eat_kw("key") {
            c.is_key = true;
        } else if t.eat_kws(&["not", "null"]) {
            c.nullable = Some(false);
        } else if t.eat_kw("null") {
            c.nullable = Some(true);
        } else if t.eat_kw("default") {
            c.default = match t.advance() {
                Some(Token::SingleQuotedString(s)) | Some(Token::DoubleQuotedString(s)) => Some(s),
                Some(Token::Number(n, _)) => Some(n),
                Some(Token::Minus) => Some(format!("-{}", t.number()?)),
                Some(Token::Word(w)) if w.value.eq_ignore_ascii_case("null") => None,
                Some(Token::Word(w)) if w.value.eq_ignore_ascii_case("bitmap_empty") => {
                    Some("BITMAP_EMPTY".into())
                }
                Some(Token::Word(w))
                    if w.value.eq_ignore_ascii_case("current_timestamp")
                        || w.value.eq_ignore_ascii_case("current_date") =>
                {
                    if t.eat(&Token::LParen) {
                        while !t.eat(&Token::RParen) {
                            if t.advance().is_none() {
                                return Err(t.unexpected("')'"));
                            }
                        }
                    }
                    Some(w.value.to_ascii_uppercase())
                }
                _ => return Err(t.unexpected("a default value")),
            };
        } else if t.eat_kw("comment") {
            c.comment = t.string()?;
        } else if t.eat_kw("auto_increment") {
            return Err(TethysError::NotSupported(
                "AUTO_INCREMENT columns are not supported yet".into(),
            ));
        } else if let Some(agg) = [
            "sum",
            "max",
            "min",
            "replace",
            "replace_if_not_null",
            "hll_union",
            "bitmap_union",
        ]
        .iter()
        .find(|a| t.peek_kws(&[a]))
        {
            t.advance();
            c.aggregation = Some(agg.to_ascii_uppercase());
        } else {
            break;
        }
    }
    Ok(c)
}

pub(super) fn parse_drop(t: &mut Tokens) -> Result<Statement> {
    t.advance();
    if t.eat_kw("database") || t.eat_kw("schema") {
        let if_exists = t.eat_kws(&["if", "exists"]);
        let name = t.ident()?;
        t.eat_kw("force");
        t.finish()?;
        return Ok(Statement::DropDatabase { name, if_exists });
    }
    if t.eat_kw("table") {
        let if_exists = t.eat_kws(&["if", "exists"]);
        let (db, name) = t.object_name()?;
        t.eat_kw("force");
        t.finish()?;
        return Ok(Statement::DropTable {
            db,
            name,
            if_exists,
        });
    }
    if t.eat_kw("stats") {
        let (db, table) = t.object_name()?;
        let columns = optional_ident_list(t)?;
        t.finish()?;
        return Ok(Statement::DropStats { db, table, columns });
    }
    Err(TethysError::NotSupported(
        "only DROP DATABASE, DROP TABLE and DROP STATS are supported yet".into(),
    ))
}

pub(super) fn parse_alter(t: &mut Tokens) -> Result<Statement> {
    t.advance();
    if t.peek_kws(&["system"]) {
        return super::parse_alter_system(t);
    }
    t.expect_kw("table")?;
    let (db, table) = t.object_name()?;
    if t.eat_kws(&["add", "partition"]) {
        let mut p = parse_partition_def(t)?;
        if t.peek() == Some(&Token::LParen) {
            t.properties()?;
        }
        if t.eat_kws(&["distributed", "by"]) {
            let d = parse_distribution(t)?;
            p.buckets = d.buckets;
        }
        t.finish()?;
        return Ok(Statement::AddPartition {
            db,
            table,
            partition: p,
        });
    }
    if t.eat_kws(&["drop", "partition"]) {
        let if_exists = t.eat_kws(&["if", "exists"]);
        let name = t.ident()?;
        t.eat_kw("force");
        t.finish()?;
        return Ok(Statement::DropPartition {
            db,
            table,
            name,
            if_exists,
        });
    }
    if t.eat_kw("set") {
        let properties = t.properties()?;
        t.finish()?;
        return Ok(Statement::SetTableProperties {
            db,
            table,
            properties,
        });
    }
    Err(TethysError::NotSupported(
        "only ALTER TABLE ... ADD PARTITION / DROP PARTITION / SET (...) is supported yet".into(),
    ))
}
