//! `docs/functions.md`, generated from `functions.txt` and the function
//! registry the FE plans with: every registered function must be listed,
//! and each callable one's result type is the type its example plans to.
//! `TETHYS_BLESS=1 cargo test -p tethys-fe --lib functions_doc` rewrites
//! the file; without it the test fails when the file is stale.

use std::collections::BTreeMap;
use std::fmt::Write;

use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use tethys_common::functions::ConstFn;

use super::functions::{Function, Verdict, list};

/// The name Doris gives a result type.
fn doris_type(t: &DataType) -> String {
    match t {
        DataType::Null => "NULL".into(),
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INT".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
            "BIGINT UNSIGNED".into()
        }
        DataType::Float16 | DataType::Float32 => "FLOAT".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => format!("DECIMAL({p},{s})"),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "VARCHAR".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "VARBINARY".into(),
        DataType::Date32 | DataType::Date64 => "DATE".into(),
        DataType::Timestamp(_, _) => "DATETIME".into(),
        DataType::Time32(_) | DataType::Time64(_) => "TIME".into(),
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            format!("ARRAY<{}>", doris_type(f.data_type()))
        }
        DataType::Struct(fields) => format!(
            "STRUCT<{}>",
            fields
                .iter()
                .map(|f| format!("{}:{}", f.name(), doris_type(f.data_type())))
                .collect::<Vec<_>>()
                .join(",")
        ),
        DataType::Map(_, _) => "MAP".into(),
        other => other.to_string(),
    }
}

/// The FE's function registry: name (aliases too) to (kind, canonical
/// name, argument signatures).
fn registry(ctx: &SessionContext) -> BTreeMap<String, (&'static str, String, String)> {
    let state = ctx.state();
    let mut out = BTreeMap::new();
    for (name, f) in state.scalar_functions() {
        let sig = f.signature().type_signature.to_string_repr().join(" / ");
        out.insert(name.clone(), ("scalar", f.name().to_string(), sig));
    }
    for (name, f) in state.aggregate_functions() {
        let sig = f.signature().type_signature.to_string_repr().join(" / ");
        out.insert(name.clone(), ("aggregate", f.name().to_string(), sig));
    }
    for (name, f) in state.window_functions() {
        let sig = f.signature().type_signature.to_string_repr().join(" / ");
        out.insert(name.clone(), ("window", f.name().to_string(), sig));
    }
    out
}

fn context() -> SessionContext {
    let mut config = SessionConfig::new();
    let opts = config.options_mut();
    opts.sql_parser.dialect = datafusion::config::Dialect::MySQL;
    opts.sql_parser.parse_float_as_decimal = true;
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .build();
    let mut ctx = SessionContext::new_with_state(state);
    let _ = tethys_common::functions::register_all(&mut ctx);
    for (name, value) in [
        ("database", ScalarValue::Utf8(None)),
        ("schema", ScalarValue::Utf8(None)),
        ("user", ScalarValue::Utf8(Some("'root'@'%'".into()))),
        ("current_user", ScalarValue::Utf8(Some("'root'@'%'".into()))),
        ("session_user", ScalarValue::Utf8(Some("'root'@'%'".into()))),
        ("connection_id", ScalarValue::Int64(Some(1))),
        ("version", ScalarValue::Utf8(Some("5.7.99".into()))),
        ("last_insert_id", ScalarValue::Int64(Some(0))),
    ] {
        ctx.register_udf(ConstFn::udf(name, value));
    }
    ctx
}

/// The type `SELECT <example>` plans to, or why it does not plan.
async fn result_type(ctx: &SessionContext, example: &str) -> Result<String, String> {
    let stmt = super::rewrite::parse_for_datafusion(&format!("SELECT {example}"))
        .map_err(|e| e.to_string())?;
    let plan = ctx
        .state()
        .statement_to_plan(stmt)
        .await
        .map_err(|e| e.to_string())?;
    let schema = plan.schema();
    Ok(doris_type(schema.field(0).data_type()))
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

fn verdict_text(v: &Verdict) -> String {
    match v {
        Verdict::Doris => "Tethys, as Doris".into(),
        Verdict::Same => "DataFusion's, as Doris".into(),
        Verdict::Extension => "DataFusion extension".into(),
        Verdict::Internal(what) => format!("internal (plans {what}); refused"),
        Verdict::Refused(why) => format!("refused: {why}"),
    }
}

async fn render() -> Result<String, String> {
    let ctx = context();
    let reg = registry(&ctx);
    let listed: BTreeMap<&str, &Function> = list().iter().map(|f| (f.name.as_str(), f)).collect();
    let unlisted: Vec<&String> = reg
        .keys()
        .filter(|n| !listed.contains_key(n.as_str()))
        .collect();
    if !unlisted.is_empty() {
        return Err(format!(
            "registered but not in fe/src/sql/functions.txt: {unlisted:?}"
        ));
    }
    let count = |p: fn(&Verdict) -> bool| list().iter().filter(|f| p(&f.verdict)).count();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Functions\n\n\
         Every function a query may name, with its verdict against Doris 2.1. Generated from \
         `fe/src/sql/functions.txt` and the FE's function registry by \
         `TETHYS_BLESS=1 cargo test -p tethys-fe --lib functions_doc`; do not edit by hand. \
         Each callable function's example runs through the MySQL protocol in \
         `tests/functions.rs` and must give the answer shown; each refused one must be refused \
         with its name.\n\n\
         - **Tethys, as Doris**: Tethys' own function or rewrite, written to Doris' semantics ({}).\n\
         - **DataFusion's, as Doris**: DataFusion's function, whose semantics match Doris' ({}).\n\
         - **DataFusion extension**: no Doris counterpart, and no MySQL or Doris function has the name ({}).\n\
         - **refused**: the semantics differ from Doris' or are not yet checked; a call is an error naming the function and the reason ({}).\n\
         - **internal**: planned by the FE's rewrites, refused when written ({}).\n\n\
         A name in neither list is answered `Can not found function 'name'`.",
        count(|v| *v == Verdict::Doris),
        count(|v| *v == Verdict::Same),
        count(|v| *v == Verdict::Extension),
        count(|v| matches!(v, Verdict::Refused(_))),
        count(|v| matches!(v, Verdict::Internal(_))),
    );
    let mut section = "";
    for f in list() {
        if f.section != section {
            section = &f.section;
            let _ = writeln!(
                md,
                "\n## {section}\n\n| Function | Kind | Arguments | Result | Verdict | Example | Answer |\n|---|---|---|---|---|---|---|"
            );
        }
        let (kind, args) = match reg.get(&f.name) {
            Some((kind, canonical, sig)) if canonical != &f.name => {
                (*kind, format!("as `{canonical}`: {sig}"))
            }
            Some((kind, _, sig)) => (*kind, sig.clone()),
            None => ("rewritten", "see the verdict".into()),
        };
        let (result, example, answer) = match &f.example {
            Some((call, answer)) => (
                result_type(&ctx, call)
                    .await
                    .unwrap_or_else(|e| format!("(does not plan: {e})")),
                format!("`{}`", cell(call)),
                format!("`{}`", cell(answer)),
            ),
            None => (String::new(), String::new(), String::new()),
        };
        let _ = writeln!(
            md,
            "| `{}` | {kind} | {} | {result} | {} | {example} | {answer} |",
            f.name,
            cell(&args),
            cell(&verdict_text(&f.verdict)),
        );
    }
    Ok(md)
}

#[tokio::test]
async fn docs_functions_md_is_current() {
    let md = render().await.expect("every registered function is listed");
    let unplanned: Vec<&str> = md
        .lines()
        .filter(|l| l.contains("(does not plan"))
        .collect();
    assert!(
        unplanned.is_empty(),
        "examples that do not plan: {unplanned:#?}"
    );
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/functions.md");
    if std::env::var_os("TETHYS_BLESS").is_some() {
        std::fs::write(&path, &md).expect("write docs/functions.md");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == md,
        "docs/functions.md is stale: run TETHYS_BLESS=1 cargo test -p tethys-fe --lib functions_doc"
    );
}
