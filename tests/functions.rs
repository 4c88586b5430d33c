//! Every function in `docs/functions.md` through the MySQL protocol: each
//! callable one's example gives Doris' answer, each refused or internal one
//! is refused with an error naming it.

use std::path::PathBuf;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};
use tethys_fe::sql::functions::{Verdict, list};
use tethys_sql_tests::TethysServer;

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tethys"))
}

/// A value as the `mysql` client prints it.
fn text(v: &Value) -> String {
    match v {
        Value::NULL => "NULL".into(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Double(d) => d.to_string(),
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn every_listed_function_answers_as_listed() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    let mut wrong = Vec::new();
    let mut ran = 0;
    for f in list() {
        match (&f.verdict, &f.example) {
            (Verdict::Doris | Verdict::Same | Verdict::Extension, Some((call, answer))) => {
                let sql = format!("SELECT {call}");
                ran += 1;
                match c.query::<Row, _>(&sql).await {
                    Ok(rows) => {
                        let got = rows
                            .first()
                            .and_then(|r| r.as_ref(0))
                            .map(text)
                            .unwrap_or_else(|| "(no row)".into());
                        if &got != answer {
                            wrong.push(format!("{sql}\n  want {answer:?}\n  got  {got:?}"));
                        }
                    }
                    Err(e) => wrong.push(format!("{sql}\n  want {answer:?}\n  error {e}")),
                }
            }
            (Verdict::Refused(_) | Verdict::Internal(_), _) => {
                let sql = format!("SELECT {}(1)", f.name);
                match c.query_drop(&sql).await {
                    Ok(()) => wrong.push(format!("{sql}\n  was not refused")),
                    Err(e) if e.to_string().contains(&format!("Function '{}'", f.name)) => {}
                    Err(e) => wrong.push(format!("{sql}\n  refused without naming it: {e}")),
                }
            }
            _ => wrong.push(format!("{}: callable but no example", f.name)),
        }
    }
    assert!(ran > 300, "only {ran} examples ran");
    let e = c
        .query_drop("SELECT no_such_function(1)")
        .await
        .expect_err("unknown function");
    assert!(
        e.to_string()
            .contains("Can not found function 'no_such_function'"),
        "{e}"
    );
    assert!(
        wrong.is_empty(),
        "{} of {} functions answered wrongly:\n{}",
        wrong.len(),
        list().len(),
        wrong.join("\n")
    );
}
