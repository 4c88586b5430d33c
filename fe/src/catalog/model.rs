//! The catalog's data: databases, tables, partitions, tablets, backends and
//! load transactions. Everything here is serializable because it is the FE's
//! persistent image.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use tethys_common::schema::TableSchema;
use tethys_common::types::ColumnType;
use tethys_common::{Result, TethysError};

pub use tethys_common::schema::KeysType;

/// A bound of a range partition, in the partition column's integer form
/// (days for DATE, microseconds for DATETIME, the value for integers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Bound {
    Min,
    Value(i128),
    Max,
}

impl Bound {
    /// Parses a partition value literal for a column type.
    pub fn parse(text: &str, ty: &ColumnType) -> Result<Bound> {
        let bad = || {
            TethysError::Analysis(format!(
                "Invalid partition value '{text}' for type {}",
                ty.desc()
            ))
        };
        let t = text.trim();
        match ty {
            ColumnType::TinyInt
            | ColumnType::SmallInt
            | ColumnType::Int
            | ColumnType::BigInt
            | ColumnType::LargeInt => {
                let v: i128 = t.parse().map_err(|_| bad())?;
                let (lo, hi): (i128, i128) = match ty {
                    ColumnType::TinyInt => (i8::MIN as i128, i8::MAX as i128),
                    ColumnType::SmallInt => (i16::MIN as i128, i16::MAX as i128),
                    ColumnType::Int => (i32::MIN as i128, i32::MAX as i128),
                    ColumnType::BigInt => (i64::MIN as i128, i64::MAX as i128),
                    _ => (i128::MIN, i128::MAX),
                };
                if v < lo || v > hi {
                    return Err(bad());
                }
                Ok(Bound::Value(v))
            }
            ColumnType::Date => {
                let d = parse_date(t).ok_or_else(bad)?;
                Ok(Bound::Value(days_since_epoch(d) as i128))
            }
            ColumnType::DateTime { .. } => {
                let dt = parse_datetime(t).ok_or_else(bad)?;
                Ok(Bound::Value(dt.and_utc().timestamp_micros() as i128))
            }
            _ => Err(TethysError::Analysis(format!(
                "partition column of type {} is not supported for RANGE partitioning",
                ty.desc()
            ))),
        }
    }

    /// The literal text of this bound for a column type.
    pub fn display(&self, ty: &ColumnType) -> String {
        match self {
            Bound::Min => "MINVALUE".into(),
            Bound::Max => "MAXVALUE".into(),
            Bound::Value(v) => match ty {
                ColumnType::Date => {
                    let d = NaiveDate::from_num_days_from_ce_opt(*v as i32 + 719_163);
                    d.map(|d| d.format("%Y-%m-%d").to_string())
                        .unwrap_or_default()
                }
                ColumnType::DateTime { .. } => DateTime::<Utc>::from_timestamp_micros(*v as i64)
                    .map(|d| d.naive_utc().format("%Y-%m-%d %H:%M:%S").to_string())
                    .unwrap_or_default(),
                _ => v.to_string(),
            },
        }
    }
}

fn days_since_epoch(d: NaiveDate) -> i64 {
    d.signed_duration_since(NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default())
        .num_days()
}

fn parse_date(t: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(t, "%Y-%m-%d")
        .or_else(|_| NaiveDate::parse_from_str(t, "%Y%m%d"))
        .ok()
        .or_else(|| parse_datetime(t).map(|dt| dt.date()))
}

fn parse_datetime(t: &str) -> Option<chrono::NaiveDateTime> {
    for f in [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y%m%d%H%M%S",
    ] {
        if let Ok(dt) = chrono::NaiveDateTime::parse_from_str(t, f) {
            return Some(dt);
        }
    }
    NaiveDate::parse_from_str(t, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
}

/// A tablet and its replicas, each on a distinct backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "TabletRefWire")]
pub struct TabletRef {
    pub id: i64,
    pub replicas: Vec<Replica>,
}

/// One copy of a tablet on a backend, and the versions it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replica {
    /// Unique among replicas (SHOW TABLETS' ReplicaId); the tablet's id + 1
    /// for the one replica of a catalog written before replicas.
    #[serde(default)]
    pub id: i64,
    pub backend_id: i64,
    /// It holds every version up to this one (it may serve reads at any
    /// of them). [`Replica::IN_STEP`] in a catalog written before replicas:
    /// in step with its partition, set when the catalog opens.
    pub version: i64,
    /// The latest version it missed (a failed write or publish), 0 when
    /// none: it serves nothing newer than `version` until repaired.
    #[serde(default)]
    pub last_failed_version: i64,
    /// The latest version it got.
    #[serde(default)]
    pub last_success_version: i64,
    /// Set when a clone made it (or brought it up to date): transactions
    /// with smaller ids began before, so may not have written it, and are
    /// not published to it.
    #[serde(default)]
    pub since_txn: i64,
}

impl Replica {
    /// The version of a replica of a catalog written before replicas.
    pub const IN_STEP: i64 = -1;

    pub fn new(id: i64, backend_id: i64, version: i64) -> Replica {
        Replica {
            id,
            backend_id,
            version,
            last_failed_version: 0,
            last_success_version: version,
            since_txn: 0,
        }
    }

    /// Its partition's `version` became visible; the replica got it unless
    /// it `missed` it or lacks the version before (then it stays behind).
    pub fn published(&mut self, version: i64, missed: bool) {
        if self.version == Replica::IN_STEP {
            // In step with the partition: set when the catalog opens.
            return;
        }
        if !missed && self.version >= version - 1 {
            self.version = self.version.max(version);
            self.last_success_version = version;
        } else {
            self.last_failed_version = self.last_failed_version.max(version);
        }
    }

    /// Whether it lacks versions it should have (a clone repairs it).
    pub fn lagging(&self, visible: i64) -> bool {
        self.version < visible
    }
}

/// A tablet as the edit log and image hold it: with its replicas, or (a
/// catalog written before replicas) the one backend holding it.
#[derive(Deserialize)]
struct TabletRefWire {
    id: i64,
    #[serde(default)]
    replicas: Vec<Replica>,
    #[serde(default)]
    backend_id: Option<i64>,
}

impl From<TabletRefWire> for TabletRef {
    fn from(w: TabletRefWire) -> TabletRef {
        let mut replicas = w.replicas;
        if let Some(b) = w.backend_id
            && replicas.is_empty()
        {
            replicas.push(Replica::new(w.id + 1, b, Replica::IN_STEP));
        }
        TabletRef { id: w.id, replicas }
    }
}

impl TabletRef {
    /// Backends holding a replica.
    pub fn backend_ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.replicas.iter().map(|r| r.backend_id)
    }

    pub fn replica_on(&self, backend_id: i64) -> Option<&Replica> {
        self.replicas.iter().find(|r| r.backend_id == backend_id)
    }

    /// The replicas that hold `version` on a backend `alive` accepts: the
    /// ones a read at `version` may use and a load may write.
    pub fn current<'a>(
        &'a self,
        version: i64,
        alive: impl Fn(i64) -> bool + 'a,
    ) -> impl Iterator<Item = &'a Replica> + 'a {
        self.replicas
            .iter()
            .filter(move |r| r.version >= version && alive(r.backend_id))
    }

    /// The backend a read at `version` uses: a replica holding it on an
    /// alive backend (one spread by tablet id, so reads share the replicas),
    /// else on any backend (liveness may lag), else Doris' error.
    pub fn read_replica(
        &self,
        version: i64,
        alive: &std::collections::BTreeSet<i64>,
    ) -> tethys_common::Result<i64> {
        self.read_replica_by(version, alive, self.id.unsigned_abs())
    }

    /// [`Self::read_replica`], spreading by `spread` instead of the tablet
    /// id: a colocation group's tablets spread by bucket, so the tablets of
    /// one bucket are read on one backend.
    pub fn read_replica_by(
        &self,
        version: i64,
        alive: &std::collections::BTreeSet<i64>,
        spread: u64,
    ) -> tethys_common::Result<i64> {
        let mut up: Vec<i64> = self
            .current(version, |b| alive.contains(&b))
            .map(|r| r.backend_id)
            .collect();
        if up.is_empty() {
            up = self
                .current(version, |_| true)
                .map(|r| r.backend_id)
                .collect();
        }
        up.sort_unstable();
        match up.len() {
            0 => Err(tethys_common::TethysError::Backend(format!(
                "Failed to get scan range, no queryable replica found in tablet: {} \
                 (version {version}; replicas: {})",
                self.id,
                self.replicas
                    .iter()
                    .map(|r| format!("backend {} at version {}", r.backend_id, r.version))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
            n => Ok(up[(spread % n as u64) as usize]),
        }
    }
}

/// One partition of a table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Partition {
    pub id: i64,
    pub name: String,
    /// `[lower, upper)`; `None` for the single partition of an unpartitioned table.
    pub range: Option<(Bound, Bound)>,
    pub buckets: u32,
    pub tablets: Vec<TabletRef>,
    /// Version queries read.
    pub visible_version: i64,
    pub visible_version_time: i64,
    /// Highest version a committed transaction holds (>= visible).
    pub committed_version: i64,
}

/// How rows are spread over a partition's tablets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Distribution {
    Hash { columns: Vec<String>, buckets: u32 },
    Random { buckets: u32 },
}

impl Distribution {
    pub fn buckets(&self) -> u32 {
        match self {
            Distribution::Hash { buckets, .. } | Distribution::Random { buckets } => *buckets,
        }
    }
}

/// A table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    pub id: i64,
    pub name: String,
    /// Columns, keys and the key model (`schema.keys_type`).
    pub schema: TableSchema,
    /// RANGE partition column, `None` when unpartitioned.
    pub partition_column: Option<String>,
    pub partitions: Vec<Partition>,
    pub distribution: Distribution,
    /// Whether BUCKETS was AUTO (or omitted).
    pub auto_buckets: bool,
    pub properties: BTreeMap<String, String>,
    pub comment: String,
    pub create_time: i64,
    /// Column statistics from the last `ANALYZE TABLE`, by column name.
    #[serde(default)]
    pub column_stats: BTreeMap<String, ColumnStats>,
}

/// Statistics of one column, collected by `ANALYZE TABLE` and used by the
/// planner to estimate how many rows a predicate keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnStats {
    /// Rows of the table when the column was analyzed.
    pub count: u64,
    /// Distinct non-null values (HyperLogLog estimate).
    pub ndv: u64,
    pub num_null: u64,
    /// Bytes of the column's values (string lengths, or width times rows).
    pub data_size: u64,
    /// Smallest and largest value as text, `None` when all values are null.
    pub min: Option<String>,
    pub max: Option<String>,
    /// The bounds as numbers on the axis predicates compare on (days for
    /// DATE, microseconds for DATETIME, the value for numbers and
    /// decimals); `None` for strings and booleans.
    pub min_num: Option<f64>,
    pub max_num: Option<f64>,
    /// When it was collected (ms since the epoch).
    pub updated_time: i64,
}

impl Table {
    /// Replicas of each tablet (`replication_allocation`'s count; 1 for a
    /// table created before replicas).
    pub fn replication_num(&self) -> usize {
        self.properties
            .get("replication_allocation")
            .and_then(|v| v.rsplit(':').next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(1)
    }

    /// Column type of the partition column.
    pub fn partition_column_type(&self) -> Option<ColumnType> {
        let c = self.partition_column.as_ref()?;
        self.schema
            .index_of(c)
            .map(|i| self.schema.columns[i].column_type)
    }

    /// The partition holding value `v` of the partition column.
    pub fn partition_for(&self, v: i128) -> Option<&Partition> {
        self.partitions.iter().find(|p| match p.range {
            Some((lo, hi)) => lo <= Bound::Value(v) && Bound::Value(v) < hi,
            None => true,
        })
    }

    pub fn partition(&self, name: &str) -> Option<&Partition> {
        self.partitions
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name))
    }

    /// Partition `name`, or Doris' error for a statement naming one the
    /// table does not have.
    pub fn existing_partition(&self, name: &str) -> Result<&Partition> {
        self.partition(name).ok_or_else(|| {
            TethysError::Analysis(format!(
                "Partition {name} does not exist in table {}",
                self.name
            ))
        })
    }

    /// The row router of this table (shared with Stream Load coordinators).
    pub fn tablet_count(&self) -> usize {
        self.partitions.iter().map(|p| p.tablets.len()).sum()
    }
}

/// A database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Database {
    pub id: i64,
    pub name: String,
    pub tables: BTreeMap<String, Table>,
    pub create_time: i64,
}

impl Database {
    /// A table by name: exact match first, then case-insensitive.
    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.get(name).or_else(|| {
            let mut it = self
                .tables
                .values()
                .filter(|t| t.name.eq_ignore_ascii_case(name));
            let first = it.next();
            if it.next().is_some() { None } else { first }
        })
    }
}

/// A registered backend.
pub use tethys_common::backend_client::BackendInfo;

/// The state of a load transaction, as in Doris.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnState {
    Prepare,
    /// Written and durable but invisible until a two-phase commit decides.
    Precommitted,
    Committed,
    Visible,
    Aborted,
}

impl TxnState {
    pub fn name(&self) -> &'static str {
        self.to_pb().doris_name()
    }

    /// The state on the wire.
    pub fn to_pb(self) -> tethys_proto::TxnStatus {
        use tethys_proto::TxnStatus as S;
        match self {
            TxnState::Prepare => S::Prepare,
            TxnState::Precommitted => S::Precommitted,
            TxnState::Committed => S::Committed,
            TxnState::Visible => S::Visible,
            TxnState::Aborted => S::Aborted,
        }
    }
}

/// What a load did (rows, bytes, outcome), for SHOW LOAD / SHOW STREAM LOAD.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadStats {
    pub table: String,
    pub total_rows: i64,
    pub loaded_rows: i64,
    pub filtered_rows: i64,
    pub unselected_rows: i64,
    pub load_bytes: i64,
    pub message: String,
    pub error_url: String,
    pub user: String,
    pub comment: String,
}

/// The new version of one partition a transaction commits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionVersion {
    pub table_id: i64,
    pub partition_id: i64,
    pub version: i64,
}

/// A load transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TxnRecord {
    pub id: i64,
    pub label: String,
    pub db: String,
    pub state: TxnState,
    pub source: String,
    pub versions: Vec<PartitionVersion>,
    pub prepare_time: i64,
    pub commit_time: i64,
    pub finish_time: i64,
    pub reason: String,
    /// (table id, partition id) pairs a pre-committed load wrote to.
    #[serde(default)]
    pub touched: Vec<(i64, i64)>,
    /// How long the transaction may stay open (0: no limit).
    #[serde(default)]
    pub timeout_ms: i64,
    /// (tablet id, backend id) replicas whose writes failed: they get no
    /// version of this transaction.
    #[serde(default)]
    pub failed_replicas: Vec<(i64, i64)>,
    /// The backend coordinating the load (0: the FE or unknown); its
    /// restart aborts the transaction while it is PREPARE.
    #[serde(default)]
    pub coordinator: i64,
    /// What the load did, once known.
    #[serde(default)]
    pub stats: Option<LoadStats>,
}

/// The whole catalog.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CatalogState {
    pub next_id: i64,
    pub databases: BTreeMap<String, Database>,
    pub backends: BTreeMap<i64, BackendInfo>,
    /// Backends being decommissioned: their replicas move away, then they
    /// are dropped.
    #[serde(default)]
    pub decommissioned: std::collections::BTreeSet<i64>,
    pub txns: BTreeMap<i64, TxnRecord>,
    /// `SET GLOBAL` values (canonical variable name to value), kept across
    /// restarts as Doris keeps them; new sessions start from them.
    #[serde(default)]
    pub globals: BTreeMap<String, String>,
    /// The cluster's id, given to every backend by heartbeat (0 in a
    /// catalog written before clusters: the FE picks one when it opens).
    #[serde(default)]
    pub cluster_id: i64,
    /// The cluster's token (`common/src/token.rs`): every call between its
    /// processes carries it. Empty in a catalog written before tokens: the
    /// FE makes one when it opens.
    #[serde(default)]
    pub cluster_token: String,
}

impl CatalogState {
    /// Gives the replicas of a catalog written before replicas (one per
    /// tablet, [`Replica::IN_STEP`]) their partition's visible version.
    pub fn replicas_in_step(&mut self) {
        for p in self
            .databases
            .values_mut()
            .flat_map(|d| d.tables.values_mut())
            .flat_map(|t| t.partitions.iter_mut())
        {
            let v = p.visible_version;
            for r in p.tablets.iter_mut().flat_map(|t| t.replicas.iter_mut()) {
                if r.version == Replica::IN_STEP {
                    r.version = v;
                    r.last_success_version = v;
                }
            }
        }
    }

    /// A database by name (exact, then case-insensitive).
    pub fn database(&self, name: &str) -> Option<&Database> {
        self.databases.get(name).or_else(|| {
            self.databases
                .values()
                .find(|d| d.name.eq_ignore_ascii_case(name))
        })
    }

    /// A table and its database, or MySQL's error for whichever is missing:
    /// the one catalog lookup the statements, loads and RPCs share.
    pub fn find_table(&self, db: &str, name: &str) -> tethys_common::Result<(&Database, &Table)> {
        let d = self
            .database(db)
            .ok_or_else(|| tethys_common::TethysError::UnknownDatabase(db.to_string()))?;
        let t = d
            .table(name)
            .ok_or_else(|| tethys_common::TethysError::UnknownTable {
                database: d.name.clone(),
                table: name.to_string(),
            })?;
        Ok((d, t))
    }

    pub fn database_mut(&mut self, name: &str) -> Option<&mut Database> {
        let key = self.database(name)?.name.clone();
        self.databases.get_mut(&key)
    }

    /// Every tablet of every table.
    pub fn tablets(&self) -> impl Iterator<Item = &TabletRef> {
        self.databases
            .values()
            .flat_map(|d| d.tables.values())
            .flat_map(|t| t.partitions.iter())
            .flat_map(|p| p.tablets.iter())
    }

    /// Every tablet of every table, to change.
    pub fn tablets_mut(&mut self) -> impl Iterator<Item = &mut TabletRef> {
        self.databases
            .values_mut()
            .flat_map(|d| d.tables.values_mut())
            .flat_map(|t| t.partitions.iter_mut())
            .flat_map(|p| p.tablets.iter_mut())
    }

    /// A tablet by id, to change.
    pub fn tablet_mut(&mut self, tablet_id: i64) -> Option<&mut TabletRef> {
        self.tablets_mut().find(|t| t.id == tablet_id)
    }

    /// The replicas each backend holds (a backend holding none is absent).
    pub fn replicas_per_backend(&self) -> BTreeMap<i64, usize> {
        let mut n = BTreeMap::new();
        for b in self.tablets().flat_map(|t| t.backend_ids()) {
            *n.entry(b).or_insert(0) += 1;
        }
        n
    }

    pub fn table_by_id(&self, table_id: i64) -> Option<&Table> {
        self.databases
            .values()
            .flat_map(|d| d.tables.values())
            .find(|t| t.id == table_id)
    }

    pub fn table_by_id_mut(&mut self, table_id: i64) -> Option<&mut Table> {
        self.databases
            .values_mut()
            .flat_map(|d| d.tables.values_mut())
            .find(|t| t.id == table_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds() {
        let d = ColumnType::Date;
        let b = Bound::parse("2026-08-01", &d).unwrap();
        assert_eq!(b.display(&d), "2026-08-01");
        let dt = ColumnType::DateTime { precision: 0 };
        let b2 = Bound::parse("2026-08-01", &dt).unwrap();
        assert_eq!(b2.display(&dt), "2026-08-01 00:00:00");
        assert!(Bound::parse("2026-13-01", &d).is_err());
        assert!(Bound::parse("300", &ColumnType::TinyInt).is_err());
        assert!(Bound::Min < Bound::Value(0) && Bound::Value(0) < Bound::Max);
    }
}
