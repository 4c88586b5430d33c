//! Runs one statement for a session and produces what the protocol layer
//! sends back: an OK with affected rows, or a stream of result batches.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use tethys_common::{Result, TethysError};

use crate::frontend::Frontend;
use crate::session::Session;
use crate::sql::statement::Statement;

mod admin;
mod analyze;
mod ddl;
mod dml;
mod prepared;
mod profiled;
mod query;
mod session;
mod set_var;
mod show;
mod system;

pub use analyze::auto_analyze;
pub use ddl::ensure_all_tablets;
pub(crate) use query::result_schema;
pub(crate) use show::filtered_nullable;
pub use system::{finish_decommissions, heartbeat_round};

/// The frontend, as every statement family's `execute` takes it.
type Fe = Arc<Frontend>;

/// What a statement returns.
pub enum Output {
    Ok { affected: u64, info: String },
    Rows(SendableRecordBatchStream),
}

fn ok() -> Output {
    Output::Ok {
        affected: 0,
        info: String::new(),
    }
}

/// A result of string columns.
pub(crate) fn string_rows(columns: &[&str], rows: Vec<Vec<String>>) -> Result<Output> {
    nullable_string_rows(
        columns,
        rows.into_iter()
            .map(|r| r.into_iter().map(Some).collect())
            .collect(),
    )
}

/// A result of string columns that may hold NULLs.
pub(crate) fn nullable_string_rows(
    columns: &[&str],
    rows: Vec<Vec<Option<String>>>,
) -> Result<Output> {
    let schema: SchemaRef = Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| Field::new(*c, DataType::Utf8, true))
            .collect::<Vec<_>>(),
    ));
    let arrays: Vec<ArrayRef> = (0..columns.len())
        .map(|i| {
            Arc::new(StringArray::from(
                rows.iter().map(|r| r[i].clone()).collect::<Vec<_>>(),
            )) as ArrayRef
        })
        .collect();
    let batch = RecordBatch::try_new(schema.clone(), arrays)?;
    Ok(Output::Rows(Box::pin(RecordBatchStreamAdapter::new(
        schema,
        futures::stream::once(async move { Ok(batch) }),
    ))))
}

/// Runs one statement for a session: each family of statements has its
/// module (`query`, `ddl`, `dml`, `admin`, `show`, `session`).
pub async fn execute(fe: &Arc<Frontend>, session: &mut Session, stmt: Statement) -> Result<Output> {
    use Statement as S;
    fe.queries
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    session.take_assigned();
    match &stmt {
        S::Empty => Ok(ok()),
        S::Query(_) | S::Bound(_) | S::Insert { .. } | S::Explain { .. } => {
            query::execute(fe, session, stmt).await
        }
        S::CreateDatabase { .. }
        | S::DropDatabase { .. }
        | S::CreateTable(_)
        | S::DropTable { .. }
        | S::TruncateTable { .. }
        | S::AddPartition { .. }
        | S::DropPartition { .. }
        | S::SetTableProperties { .. } => ddl::execute(fe, session, stmt).await,
        S::Delete { .. } | S::Update(_) => dml::execute(fe, session, stmt).await,
        S::AdminCompact { .. }
        | S::AdminRepair { .. }
        | S::AdminShowReplicaStatus { .. }
        | S::Analyze { .. }
        | S::DropStats { .. }
        | S::Kill { .. } => admin::execute(fe, session, stmt).await,
        S::Use(_)
        | S::Prepare { .. }
        | S::ExecutePrepared { .. }
        | S::Deallocate(_)
        | S::Set(_)
        | S::Begin
        | S::Commit
        | S::Rollback => session::execute(fe, session, stmt).await,
        S::ShowColumnStats { .. }
        | S::ShowDatabases(_)
        | S::ShowMeta(_)
        | S::ShowCreateTable { .. }
        | S::ShowCreateDatabase(_)
        | S::Describe { .. }
        | S::ShowPartitions { .. }
        | S::ShowTablets { .. }
        | S::ShowVariables { .. }
        | S::ShowQueryProfile { .. }
        | S::ShowProcessList
        | S::ShowBackends
        | S::ShowColocationGroups
        | S::ShowFrontends
        | S::ShowTransaction { .. }
        | S::ShowLoad { .. }
        | S::ShowEmpty { .. }
        | S::ShowEngines => show::execute(fe, session, stmt).await,
        S::AlterSystem(a) => system::alter_system(fe, a.clone()).await,
    }
}

/// A statement handed to a family module that does not run it: a
/// dispatcher bug, reported rather than a panic.
fn not_in_family(family: &str, stmt: &Statement) -> TethysError {
    TethysError::Internal(format!("the {family} statements do not include {stmt:?}"))
}

pub(crate) fn table_snapshot(fe: &Frontend, db: &str, name: &str) -> Result<crate::catalog::Table> {
    Ok(fe.catalog.read().find_table(db, name)?.1.clone())
}
