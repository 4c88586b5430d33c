//! Colocation groups: tables that declare one group are bucketed alike and
//! keep bucket `b` of every partition on the same backends, so a join on
//! their distribution columns needs no exchange (Doris' colocate join).
//!
//! ```sql
//! CREATE TABLE orders (...) DISTRIBUTED BY HASH(o_orderkey) BUCKETS 8
//!     PROPERTIES ("colocate_with" = "tpch");
//! CREATE TABLE lineitem (...) DISTRIBUTED BY HASH(l_orderkey) BUCKETS 8
//!     PROPERTIES ("colocate_with" = "tpch");
//! EXPLAIN SELECT count(*) FROM orders JOIN lineitem ON o_orderkey = l_orderkey;
//! --   join op: INNER JOIN(COLOCATE)[]
//! ```
//!
//! A group is derived from the tables' journaled `colocate_with` property,
//! not stored beside them: its members are the tables naming it (in their
//! database, or in any database for a `__global__` name), its bucketing is
//! theirs, and its backend sequence (the backends of each bucket) is the
//! placement of its first table's first partition. New partitions of every
//! member follow that sequence. A group is *stable* while every tablet of
//! every member sits on its bucket's backends; the tablet scheduler's
//! repairs can break that (a dead backend's replicas move elsewhere), and an
//! unstable group's joins exchange data as other joins do.

use std::collections::BTreeSet;

use tethys_common::{Result, TethysError};

use tethys_common::schema::TableSchema;

use super::model::{CatalogState, Database, Distribution, Table};

/// The table property naming a table's group.
pub const COLOCATE_WITH: &str = "colocate_with";

/// Groups with this prefix span databases, as in Doris.
const GLOBAL_PREFIX: &str = "__global__";

/// One colocation group as the catalog holds it now.
#[derive(Debug, Clone)]
pub struct ColocateGroup<'a> {
    /// Doris' `GroupId`: `<db id>.<first table id>` (global: `0.<id>`).
    pub id: String,
    /// The full name: `<db id>_<name>`, or the `__global__` name.
    pub name: String,
    /// Members, first created first.
    pub tables: Vec<&'a Table>,
    /// The backends holding each bucket (replica backend ids, sorted).
    pub sequence: Vec<Vec<i64>>,
}

impl<'a> ColocateGroup<'a> {
    fn first(&self) -> &'a Table {
        self.tables[0]
    }

    /// Buckets of every member.
    pub fn buckets(&self) -> u32 {
        self.first().distribution.buckets()
    }

    /// Replicas of every tablet of every member.
    pub fn replicas(&self) -> usize {
        self.first().replication_num()
    }

    /// The distribution column types, as SHOW PROC prints them.
    pub fn dist_types(&self) -> Vec<String> {
        dist_types(self.first())
    }

    /// Whether every tablet of every member sits on its bucket's backends.
    pub fn is_stable(&self) -> bool {
        self.tables.iter().all(|t| {
            t.partitions.iter().all(|p| {
                p.tablets.len() == self.sequence.len()
                    && p.tablets
                        .iter()
                        .zip(&self.sequence)
                        .all(|(tablet, seq)| backends_of(tablet) == *seq)
            })
        })
    }
}

fn backends_of(t: &super::model::TabletRef) -> Vec<i64> {
    let mut b: Vec<i64> = t.backend_ids().collect();
    b.sort_unstable();
    b
}

fn dist_types(t: &Table) -> Vec<String> {
    distribution_types(&t.schema, &t.distribution)
}

/// The types of the distribution columns of a table of `schema`.
pub fn distribution_types(schema: &TableSchema, distribution: &Distribution) -> Vec<String> {
    match distribution {
        Distribution::Hash { columns, .. } => columns
            .iter()
            .map(|c| {
                schema
                    .index_of(c)
                    .map_or_else(|| "?".to_string(), |i| schema.columns[i].column_type.sql())
            })
            .collect(),
        Distribution::Random { .. } => vec![],
    }
}

/// The group name `value` of a table in `db` stands for.
fn full_name(db: &Database, value: &str) -> String {
    if value.starts_with(GLOBAL_PREFIX) {
        value.to_string()
    } else {
        format!("{}_{}", db.id, value)
    }
}

impl CatalogState {
    /// Every colocation group with at least one table, by full name.
    pub fn colocate_groups(&self) -> Vec<ColocateGroup<'_>> {
        let mut names = BTreeSet::new();
        for d in self.databases.values() {
            for t in d.tables.values() {
                if let Some(v) = t.properties.get(COLOCATE_WITH) {
                    names.insert(full_name(d, v));
                }
            }
        }
        names
            .into_iter()
            .filter_map(|n| self.colocate_group(&n))
            .collect()
    }

    /// The group `table` (of `db`) belongs to, if any.
    pub fn group_of(&self, db: &Database, table: &Table) -> Option<ColocateGroup<'_>> {
        let v = table.properties.get(COLOCATE_WITH)?;
        self.colocate_group(&full_name(db, v))
    }

    /// The group of full name `name`, when a table names it.
    fn colocate_group(&self, name: &str) -> Option<ColocateGroup<'_>> {
        let mut tables: Vec<(&Database, &Table)> = self
            .databases
            .values()
            .flat_map(|d| d.tables.values().map(move |t| (d, t)))
            .filter(|(d, t)| {
                t.properties
                    .get(COLOCATE_WITH)
                    .is_some_and(|v| full_name(d, v) == name)
            })
            .collect();
        tables.sort_by_key(|(_, t)| t.id);
        let (db, first) = *tables.first()?;
        let sequence = first
            .partitions
            .first()
            .map(|p| p.tablets.iter().map(backends_of).collect())
            .unwrap_or_default();
        let db_id = if name.starts_with(GLOBAL_PREFIX) {
            0
        } else {
            db.id
        };
        Some(ColocateGroup {
            id: format!("{db_id}.{}", first.id),
            name: name.to_string(),
            tables: tables.into_iter().map(|(_, t)| t).collect(),
            sequence,
        })
    }

    /// The backend sequence a new table of `db` declaring group `value`
    /// joins, after checking it can (Doris' messages); `None`: the group is
    /// new.
    pub fn join_group(
        &self,
        db: &Database,
        value: &str,
        schema: &TableSchema,
        distribution: &Distribution,
        replicas: usize,
    ) -> Result<Option<Vec<Vec<i64>>>> {
        let refuse = |m: String| Err(TethysError::Analysis(m));
        let Distribution::Hash { columns, buckets } = distribution else {
            return refuse("Random distribution for colocate table is unsupported".into());
        };
        let Some(g) = self.colocate_group(&full_name(db, value)) else {
            return Ok(None);
        };
        if *buckets != g.buckets() {
            return refuse(format!(
                "Colocate tables must have same bucket num: {buckets} should be {}",
                g.buckets()
            ));
        }
        let want = g.dist_types();
        if columns.len() != want.len() {
            return refuse(format!(
                "Colocate tables distribution columns size must be same: {} should be {}",
                columns.len(),
                want.len()
            ));
        }
        for (have, want) in distribution_types(schema, distribution).iter().zip(&want) {
            if have != want {
                return refuse(format!(
                    "Colocate tables distribution columns must have the same data type: \
                     {have} should be {want}"
                ));
            }
        }
        if replicas != g.replicas() {
            return refuse(format!(
                "Colocate tables must have same replication allocation: \
                 {{ tag.location.default: {replicas} }} should be {{ tag.location.default: {} }}",
                g.replicas()
            ));
        }
        Ok(Some(g.sequence))
    }

    /// The backend sequence new partitions of `table` (of `db`) follow.
    pub fn sequence_of(&self, db: &Database, table: &Table) -> Option<Vec<Vec<i64>>> {
        self.group_of(db, table).map(|g| g.sequence)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use tethys_common::schema::Column;
    use tethys_common::types::ColumnType;

    use super::*;
    use crate::catalog::model::{Partition, Replica, TabletRef};

    fn schema(ty: ColumnType) -> TableSchema {
        TableSchema {
            columns: vec![Column {
                name: "k".into(),
                column_type: ty,
                nullable: false,
                is_key: true,
                default: None,
                comment: String::new(),
                aggregation: None,
            }],
            num_key_columns: 1,
            ..Default::default()
        }
    }

    /// A table of `group` whose bucket b is on backend `on[b]`.
    fn table(id: i64, group: &str, on: &[i64]) -> Table {
        let tablets = on
            .iter()
            .enumerate()
            .map(|(b, be)| TabletRef {
                id: id * 100 + b as i64,
                replicas: vec![Replica::new(id * 1000 + b as i64, *be, 1)],
            })
            .collect();
        Table {
            id,
            name: format!("t{id}"),
            schema: schema(ColumnType::Int),
            partition_column: None,
            partitions: vec![Partition {
                id: id * 10,
                name: format!("t{id}"),
                range: None,
                buckets: on.len() as u32,
                tablets,
                visible_version: 1,
                visible_version_time: 0,
                committed_version: 1,
            }],
            distribution: Distribution::Hash {
                columns: vec!["k".into()],
                buckets: on.len() as u32,
            },
            auto_buckets: false,
            properties: BTreeMap::from([
                (COLOCATE_WITH.to_string(), group.to_string()),
                (
                    "replication_allocation".to_string(),
                    "tag.location.default: 1".to_string(),
                ),
            ]),
            comment: String::new(),
            create_time: 0,
            column_stats: Default::default(),
        }
    }

    fn state(tables: Vec<Table>) -> CatalogState {
        let mut s = CatalogState::default();
        s.databases.insert(
            "d".into(),
            Database {
                id: 7,
                name: "d".into(),
                tables: tables.into_iter().map(|t| (t.name.clone(), t)).collect(),
                create_time: 0,
            },
        );
        s
    }

    #[test]
    fn a_group_is_its_tables_placed_alike() {
        let s = state(vec![table(2, "g", &[1, 2, 3]), table(5, "g", &[1, 2, 3])]);
        let groups = s.colocate_groups();
        assert_eq!(groups.len(), 1);
        let g = &groups[0];
        assert_eq!((g.id.as_str(), g.name.as_str()), ("7.2", "7_g"));
        assert_eq!(
            g.tables.iter().map(|t| t.id).collect::<Vec<_>>(),
            vec![2, 5]
        );
        assert_eq!(g.sequence, vec![vec![1], vec![2], vec![3]]);
        assert!(g.is_stable());
        // A replica repaired onto another backend: unstable.
        let s = state(vec![table(2, "g", &[1, 2, 3]), table(5, "g", &[1, 3, 3])]);
        assert!(!s.colocate_groups()[0].is_stable());
    }

    #[test]
    fn a_table_joins_only_a_group_it_fits() {
        let s = state(vec![table(2, "g", &[1, 2, 3])]);
        let d = &s.databases["d"];
        let hash = |buckets| Distribution::Hash {
            columns: vec!["k".into()],
            buckets,
        };
        let int = schema(ColumnType::Int);
        assert_eq!(
            s.join_group(d, "g", &int, &hash(3), 1).unwrap(),
            Some(vec![vec![1], vec![2], vec![3]])
        );
        assert_eq!(s.join_group(d, "h", &int, &hash(5), 1).unwrap(), None);
        let refused = |r: Result<Option<Vec<Vec<i64>>>>| r.unwrap_err().to_string();
        assert!(
            refused(s.join_group(d, "g", &int, &hash(4), 1)).contains("bucket num: 4 should be 3")
        );
        assert!(
            refused(s.join_group(d, "g", &schema(ColumnType::BigInt), &hash(3), 1))
                .contains("same data type")
        );
        assert!(
            refused(s.join_group(d, "g", &int, &hash(3), 2)).contains("replication allocation")
        );
        let random = Distribution::Random { buckets: 3 };
        assert!(refused(s.join_group(d, "g", &int, &random, 1)).contains("Random distribution"));
    }
}
