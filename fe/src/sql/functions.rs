//! The functions a user may call, each with its verdict against Doris 2.1
//! (`functions.txt`, which `docs/functions.md` is generated from):
//!
//! ```sql
//! SELECT stddev(x), array_slice(a, 2, 2) FROM t
//! ```
//!
//! DataFusion's `stddev` is the sample deviation, Doris' the population one;
//! DataFusion's `array_slice` takes an end where Doris' takes a length.
//! Every call a user writes is looked up here before planning: a Tethys
//! function or a DataFusion one whose semantics match Doris' (or that no
//! MySQL or Doris function shares a name with) runs; one whose semantics
//! differ is refused with the reason, an internal one is refused, and a
//! name not listed is `Can not found function`.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::OnceLock;

use datafusion::sql::sqlparser::ast::{Expr, Statement, visit_expressions};
use tethys_common::{Result, TethysError};

/// What Tethys does with calls of one function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Tethys' own function (or rewrite), written to Doris' semantics.
    Doris,
    /// DataFusion's function, whose semantics match Doris'.
    Same,
    /// DataFusion's function with no Doris counterpart and a name no MySQL
    /// or Doris function has.
    Extension,
    /// Used by the FE's rewrites; refused when written by a user.
    Internal(String),
    /// Refused, for this reason.
    Refused(String),
}

/// One listed function.
#[derive(Debug, Clone)]
pub struct Function {
    pub name: String,
    /// The section of `docs/functions.md` it is listed in.
    pub section: String,
    pub verdict: Verdict,
    /// A call (`SELECT <example>` runs) and Doris' answer to it, as the
    /// `mysql` client prints it; for callable functions only.
    pub example: Option<(String, String)>,
}

/// The list, in `functions.txt`'s order.
pub fn list() -> &'static [Function] {
    static LIST: OnceLock<Vec<Function>> = OnceLock::new();
    LIST.get_or_init(|| parse(include_str!("functions.txt")).unwrap_or_default())
}

fn by_name() -> &'static HashMap<String, Function> {
    static MAP: OnceLock<HashMap<String, Function>> = OnceLock::new();
    MAP.get_or_init(|| list().iter().map(|f| (f.name.clone(), f.clone())).collect())
}

/// Reads `functions.txt`; an error names the line.
pub fn parse(text: &str) -> std::result::Result<Vec<Function>, String> {
    let mut out = Vec::new();
    let mut section = String::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(s) = line.strip_prefix("## ") {
            section = s.trim().to_string();
            continue;
        }
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = line.splitn(4, '|').map(str::trim).collect();
        let bad = |why: &str| format!("functions.txt line {}: {why}: {line}", i + 1);
        let (name, verdict) = match parts.as_slice() {
            [name, verdict, ..] => (name.to_string(), *verdict),
            _ => return Err(bad("expected name | verdict | ...")),
        };
        let (verdict, example) = match (verdict, &parts[2..]) {
            ("doris" | "same" | "extension", [call, answer]) => {
                let v = match verdict {
                    "doris" => Verdict::Doris,
                    "same" => Verdict::Same,
                    _ => Verdict::Extension,
                };
                (v, Some((call.to_string(), answer.to_string())))
            }
            ("internal", [why]) => (Verdict::Internal(why.to_string()), None),
            ("refused", [why]) => (Verdict::Refused(why.to_string()), None),
            _ => return Err(bad("a callable function needs an example and its answer")),
        };
        out.push(Function {
            name,
            section: section.clone(),
            verdict,
            example,
        });
    }
    Ok(out)
}

/// Refuses a statement that calls a function not listed as callable.
pub fn check_calls(stmt: &Statement) -> Result<()> {
    let verdict = visit_expressions(stmt, |e| {
        let Expr::Function(f) = e else {
            return ControlFlow::Continue(());
        };
        let Some(last) = f.name.0.last() else {
            return ControlFlow::Continue(());
        };
        let name = last.to_string().trim_matches('`').to_ascii_lowercase();
        match by_name().get(&name).map(|f| &f.verdict) {
            Some(Verdict::Doris | Verdict::Same | Verdict::Extension) => ControlFlow::Continue(()),
            Some(Verdict::Refused(why)) => ControlFlow::Break(TethysError::NotSupported(format!(
                "Function '{name}' is not supported: {why}"
            ))),
            Some(Verdict::Internal(what)) => ControlFlow::Break(TethysError::NotSupported(
                format!("Function '{name}' is internal to Tethys (it plans {what})"),
            )),
            None => ControlFlow::Break(TethysError::Analysis(format!(
                "Can not found function '{name}'"
            ))),
        }
    });
    match verdict {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_reads() {
        let all = parse(include_str!("functions.txt")).expect("functions.txt");
        assert_eq!(all.len(), list().len());
        let mut seen = std::collections::HashSet::new();
        for f in &all {
            assert!(seen.insert(&f.name), "{} is listed twice", f.name);
            assert!(!f.section.is_empty(), "{} has no section", f.name);
        }
    }

    #[test]
    fn calls_are_checked() {
        let check = |sql: &str| {
            let stmt = crate::sql::rewrite::parse_for_datafusion(sql).map(|_| ());
            stmt.map_err(|e| e.to_string())
        };
        assert!(check("select abs(-1), stddev(x) over () from t").is_ok());
        let e = check("select array_slice([1, 2, 3], 1, 2)").expect_err("refused");
        assert!(e.contains("Function 'array_slice' is not supported"), "{e}");
        let e = check("select no_such_fn(1)").expect_err("unknown");
        assert_eq!(e, "Can not found function 'no_such_fn'");
        let e = check("select tethys_text(1)").expect_err("internal");
        assert!(e.contains("internal"), "{e}");
    }
}
