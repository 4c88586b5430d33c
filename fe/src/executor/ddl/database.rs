//! CREATE DATABASE and DROP DATABASE.

use std::collections::BTreeMap;
use std::sync::Arc;

use tethys_common::{Result, TethysError};

use super::tablets::drop_tablets;
use super::tablets::now_ms;
use crate::catalog::*;
use crate::frontend::Frontend;

/// CREATE DATABASE.
pub fn create_database(fe: &Arc<Frontend>, name: &str, if_not_exists: bool) -> Result<()> {
    if name.eq_ignore_ascii_case("information_schema") {
        return Err(TethysError::DatabaseExists(name.into()));
    }
    fe.catalog.mutate(|state, ids| {
        if state.database(name).is_some() {
            if if_not_exists {
                return Ok((EditOp::RemoveTxns { ids: vec![] }, ()));
            }
            return Err(TethysError::DatabaseExists(name.into()));
        }
        Ok((
            EditOp::CreateDatabase {
                db: Database {
                    id: ids.alloc(),
                    name: name.to_string(),
                    tables: BTreeMap::new(),
                    create_time: now_ms(),
                },
            },
            (),
        ))
    })
}

/// DROP DATABASE.
pub async fn drop_database(fe: &Arc<Frontend>, name: &str, if_exists: bool) -> Result<()> {
    let parts = fe.catalog.mutate(|state, _| {
        let Some(db) = state.database(name) else {
            if if_exists {
                return Ok((EditOp::RemoveTxns { ids: vec![] }, vec![]));
            }
            return Err(TethysError::DatabaseNotExists(name.into()));
        };
        let parts: Vec<Partition> = db
            .tables
            .values()
            .flat_map(|t| t.partitions.clone())
            .collect();
        Ok((
            EditOp::DropDatabase {
                name: db.name.clone(),
            },
            parts,
        ))
    })?;
    drop_tablets(fe, &parts).await;
    Ok(())
}
