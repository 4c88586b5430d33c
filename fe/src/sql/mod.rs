//! SQL front door: splitting, classifying and parsing statements in the Doris
//! dialect. Queries are handed to DataFusion; everything else is parsed here.

pub mod assign;
pub mod calls;
pub mod depth;
pub mod functions;
#[cfg(test)]
mod functions_doc;
pub mod join_hints;
pub mod params;
pub mod partitions;
pub mod rewrite;
pub mod set;
pub mod statement;
pub mod table_functions;
pub mod tokens;

pub use statement::{Statement, complete_statements, parse, split_statements};
