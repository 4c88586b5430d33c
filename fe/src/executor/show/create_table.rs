//! SHOW CREATE TABLE: the text of a table's DDL, in a form that re-parses to the same table.

use crate::catalog::*;

/// SHOW CREATE TABLE text, in a form that re-parses to the same table.
pub fn show_create_table(t: &Table) -> String {
    let mut s = format!("CREATE TABLE `{}` (\n", t.name);
    let cols: Vec<String> = t
        .schema
        .columns
        .iter()
        .map(|c| {
            let mut l = format!("  `{}` {}", c.name, c.column_type.sql());
            if t.schema.keys_type == KeysType::Aggregate
                && let Some(a) = c.aggregation
            {
                l.push(' ');
                l.push_str(a.sql());
            }
            l.push_str(if c.nullable { " NULL" } else { " NOT NULL" });
            if let Some(d) = &c.default {
                if d == "CURRENT_TIMESTAMP" || d == "CURRENT_DATE" || d == "BITMAP_EMPTY" {
                    l.push_str(&format!(" DEFAULT {d}"));
                } else {
                    l.push_str(&format!(" DEFAULT \"{}\"", d.replace('"', "\\\"")));
                }
            }
            if !c.comment.is_empty() {
                l.push_str(&format!(" COMMENT '{}'", c.comment.replace('\'', "\\'")));
            }
            l
        })
        .collect();
    s.push_str(&cols.join(",\n"));
    s.push_str("\n) ENGINE=OLAP\n");
    let keys: Vec<String> = t.schema.columns[..t.schema.num_key_columns]
        .iter()
        .map(|c| format!("`{}`", c.name))
        .collect();
    s.push_str(&format!(
        "{}({})\n",
        t.schema.keys_type.sql(),
        keys.join(", ")
    ));
    s.push_str(&format!(
        "COMMENT '{}'\n",
        if t.comment.is_empty() {
            "OLAP".into()
        } else {
            t.comment.replace('\'', "\\'")
        }
    ));
    if let (Some(col), Some(ty)) = (&t.partition_column, t.partition_column_type()) {
        s.push_str(&format!("PARTITION BY RANGE(`{col}`)\n("));
        let parts: Vec<String> = t
            .partitions
            .iter()
            .map(|p| match p.range {
                Some((Bound::Min, hi)) => match hi {
                    Bound::Max => format!("PARTITION {} VALUES LESS THAN (MAXVALUE)", p.name),
                    _ => format!(
                        "PARTITION {} VALUES LESS THAN (\"{}\")",
                        p.name,
                        hi.display(&ty)
                    ),
                },
                Some((lo, Bound::Max)) => format!(
                    "PARTITION {} VALUES [(\"{}\"), (MAXVALUE))",
                    p.name,
                    lo.display(&ty)
                ),
                Some((lo, hi)) => format!(
                    "PARTITION {} VALUES [(\"{}\"), (\"{}\"))",
                    p.name,
                    lo.display(&ty),
                    hi.display(&ty)
                ),
                None => String::new(),
            })
            .collect();
        s.push_str(&parts.join(",\n"));
        s.push_str(")\n");
    }
    let buckets = if t.auto_buckets {
        "AUTO".to_string()
    } else {
        t.distribution.buckets().to_string()
    };
    match &t.distribution {
        Distribution::Hash { columns, .. } => {
            let c: Vec<String> = columns.iter().map(|c| format!("`{c}`")).collect();
            s.push_str(&format!(
                "DISTRIBUTED BY HASH({}) BUCKETS {buckets}\n",
                c.join(", ")
            ));
        }
        Distribution::Random { .. } => {
            s.push_str(&format!("DISTRIBUTED BY RANDOM BUCKETS {buckets}\n"))
        }
    }
    s.push_str("PROPERTIES (\n");
    // Doris always shows the group commit thresholds, last.
    let gc = |k: &str, d: i64| {
        (
            k.to_string(),
            t.properties
                .get(k)
                .cloned()
                .unwrap_or_else(|| d.to_string()),
        )
    };
    let props: Vec<String> = t
        .properties
        .iter()
        .filter(|(k, _)| !k.starts_with("group_commit_"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .chain([
            gc(
                "group_commit_interval_ms",
                tethys_common::config::GROUP_COMMIT_INTERVAL_MS,
            ),
            gc(
                "group_commit_data_bytes",
                tethys_common::config::GROUP_COMMIT_DATA_BYTES,
            ),
        ])
        .map(|(k, v)| format!("\"{k}\" = \"{v}\""))
        .collect();
    s.push_str(&props.join(",\n"));
    s.push_str("\n);");
    s
}
