//! Doris aggregates computed from a group's collected rows: the FE plans
//! `topn(x, k)` as `topn_of(array_agg(x), k)`,
//! `window_funnel(w, mode, t, c1, ...)` as
//! `window_funnel_of(w, mode, array_agg(struct(t, c1, ...)))` and
//! `group_concat(x ORDER BY k1 DESC, ... SEPARATOR s)` as
//! `group_concat_of(array_agg(struct(k1, ..., x)), s, 'desc nulls last,...')`,
//! so the partial / final split is `array_agg`'s, and two aggregates ordered
//! differently share a query (DataFusion refuses conflicting orders).
//!
//! ```sql
//! SELECT user_id, window_funnel(3600, 'default', event_time,
//!        event = 'view', event = 'cart', event = 'pay') AS level
//! FROM events GROUP BY user_id;
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int32Array, StringBuilder};
use arrow::datatypes::{DataType, Int64Type};
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::fixed::Fixed;
use super::text::mysql_text;

pub(super) fn udfs() -> Vec<Arc<ScalarUDF>> {
    vec![
        Arc::new(ScalarUDF::from(TopN {
            signature: Signature::any(2, Volatility::Immutable),
        })),
        Arc::new(ScalarUDF::from(WindowFunnel {
            signature: Signature::any(3, Volatility::Immutable),
        })),
        Fixed::udf(
            "group_concat_of",
            Signature::any(3, Volatility::Immutable),
            DataType::Utf8,
            group_concat_of,
        ),
    ]
}

/// `topn_of(values, k)`: the k most frequent values with their counts, as
/// Doris' `topn` prints them (`{"a":3,"b":2}`), most frequent first, ties
/// in value order; NULLs are not counted.
#[derive(Debug, PartialEq, Eq, Hash)]
struct TopN {
    signature: Signature,
}

/// The JSON of the k most frequent texts.
pub fn top_n(values: impl Iterator<Item = String>, k: usize) -> String {
    let mut counts: HashMap<String, u64> = HashMap::new();
    for v in values {
        *counts.entry(v).or_default() += 1;
    }
    let mut ranked: Vec<(String, u64)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let body: Vec<String> = ranked
        .into_iter()
        .take(k)
        .map(|(v, n)| format!("{}:{n}", serde_json::Value::String(v)))
        .collect();
    format!("{{{}}}", body.join(","))
}

impl ScalarUDFImpl for TopN {
    named_by_fields!("topn_of");
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args {
            [DataType::List(_) | DataType::Null, k] if k.is_integer() || k.is_null() => {
                Ok(DataType::Utf8)
            }
            _ => plan_err!("topn(expr, k) takes an integer k"),
        }
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = super::arrays(&args)?;
        let k = arrow::compute::kernels::cast::cast(&arrays[1], &DataType::Int64)?;
        let k = k.as_primitive::<Int64Type>();
        let mut out = StringBuilder::new();
        let DataType::List(_) = arrays[0].data_type() else {
            out.append_nulls(args.number_rows);
            return Ok(ColumnarValue::Array(Arc::new(out.finish())));
        };
        let lists = arrays[0].as_list::<i32>();
        for i in 0..args.number_rows {
            if lists.is_null(i) || k.is_null(i) {
                out.append_null();
                continue;
            }
            let texts = mysql_text(&lists.value(i))?;
            let texts = texts.as_string::<i32>();
            let values = texts.iter().flatten().map(str::to_string);
            out.append_value(top_n(values, k.value(i).max(0) as usize));
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// How `window_funnel` reads a chain of events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FunnelMode {
    /// Any order of other events between the steps.
    Default,
    /// A step seen again while the chain is open ends it.
    Deduplication,
    /// An event that is not the chain's next step ends it.
    Fixed,
    /// Each step strictly later than the one before.
    Increase,
}

impl FunnelMode {
    fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "default" => FunnelMode::Default,
            "deduplication" => FunnelMode::Deduplication,
            "fixed" => FunnelMode::Fixed,
            "increase" => FunnelMode::Increase,
            _ => return None,
        })
    }
}

/// The longest chain of steps 1, 2, ... within `window` (in the time
/// unit of `events`) of the chain's first step. `events` are (time, the
/// steps the row meets), in any order.
pub fn funnel_level(mut events: Vec<(i64, Vec<bool>)>, window: i64, mode: FunnelMode) -> i32 {
    let steps = events.first().map_or(0, |e| e.1.len());
    if steps == 0 {
        return 0;
    }
    events.sort_by_key(|e| e.0);
    // For each step reached: (the chain's start, the step's time).
    let mut reached: Vec<Option<(i64, i64)>> = vec![None; steps];
    let mut started = false;
    for (t, met) in &events {
        if mode == FunnelMode::Fixed && started && !met.iter().any(|m| *m) {
            continue;
        }
        for (step, _) in met.iter().enumerate().filter(|(_, m)| **m) {
            if step == 0 {
                reached[0] = Some((*t, *t));
                started = true;
                continue;
            }
            if mode == FunnelMode::Deduplication && reached[step].is_some() {
                return level(&reached);
            }
            if mode == FunnelMode::Fixed && started && reached[step - 1].is_none() {
                return level(&reached);
            }
            if let Some((start, prev)) = reached[step - 1] {
                let in_time = *t <= start.saturating_add(window)
                    && (mode != FunnelMode::Increase || prev < *t);
                if in_time {
                    reached[step] = Some((start, *t));
                    if step + 1 == steps {
                        return steps as i32;
                    }
                }
            }
        }
    }
    level(&reached)
}

fn level(reached: &[Option<(i64, i64)>]) -> i32 {
    reached
        .iter()
        .rposition(Option::is_some)
        .map_or(0, |i| i as i32 + 1)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct WindowFunnel {
    signature: Signature,
}

impl ScalarUDFImpl for WindowFunnel {
    named_by_fields!("window_funnel_of");
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args {
            [w, _, DataType::List(_) | DataType::Null] if w.is_integer() || w.is_null() => {
                Ok(DataType::Int32)
            }
            _ => plan_err!(
                "window_funnel(window_seconds, mode, time, condition, ...) takes an integer window"
            ),
        }
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let arrays = super::arrays(&args)?;
        let window = arrow::compute::kernels::cast::cast(&arrays[0], &DataType::Int64)?;
        let window = window.as_primitive::<Int64Type>();
        let modes = mysql_text(&arrays[1])?;
        let modes = modes.as_string::<i32>();
        let DataType::List(_) = arrays[2].data_type() else {
            return Ok(ColumnarValue::Array(Arc::new(Int32Array::from(vec![0; n]))));
        };
        let lists = arrays[2].as_list::<i32>();
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            if lists.is_null(i) || window.is_null(i) || modes.is_null(i) {
                out.push(Some(0));
                continue;
            }
            let Some(mode) = FunnelMode::parse(modes.value(i)) else {
                return exec_err!(
                    "window_funnel: unknown mode '{}' (default, deduplication, fixed or increase)",
                    modes.value(i)
                );
            };
            let rows = lists.value(i);
            let rows = rows.as_struct();
            let times = super::time::wall_clock(rows.column(0))?;
            let conds: Vec<ArrayRef> = rows.columns()[1..].to_vec();
            let mut events = Vec::with_capacity(rows.len());
            for (r, t) in times.iter().enumerate() {
                let Some(t) = t else { continue };
                let met = conds
                    .iter()
                    .map(|c| match c.as_boolean_opt() {
                        Some(b) => b.is_valid(r) && b.value(r),
                        None => false,
                    })
                    .collect();
                events.push((t.and_utc().timestamp(), met));
            }
            out.push(Some(funnel_level(events, window.value(i), mode)));
        }
        Ok(ColumnarValue::Array(Arc::new(Int32Array::from(out))))
    }
}

/// `group_concat_of(rows, separator, orders)`: each row a struct of the
/// ORDER BY keys and then the value (as text); `orders` one
/// `asc|desc nulls first|last` per key, comma-separated. NULL values are
/// skipped; no value is NULL.
fn group_concat_of(_: &str, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
    let n = args.number_rows;
    let arrays = super::arrays(&args)?;
    let seps = mysql_text(&arrays[1])?;
    let seps = seps.as_string::<i32>();
    let orders = mysql_text(&arrays[2])?;
    let orders = orders.as_string::<i32>();
    let mut out = StringBuilder::new();
    let DataType::List(_) = arrays[0].data_type() else {
        out.append_nulls(n);
        return Ok(ColumnarValue::Array(Arc::new(out.finish())));
    };
    let lists = arrays[0].as_list::<i32>();
    for i in 0..n {
        if lists.is_null(i) || seps.is_null(i) {
            out.append_null();
            continue;
        }
        let rows = lists.value(i);
        let rows = rows.as_struct();
        let Some((value, keys)) = rows.columns().split_last() else {
            out.append_null();
            continue;
        };
        let options = sort_options(if orders.is_null(i) {
            ""
        } else {
            orders.value(i)
        })?;
        let sort: Vec<arrow::compute::SortColumn> = keys
            .iter()
            .zip(
                options
                    .iter()
                    .copied()
                    .chain(std::iter::repeat(Default::default())),
            )
            .map(|(k, o)| arrow::compute::SortColumn {
                values: k.clone(),
                options: Some(o),
            })
            .collect();
        let order: Vec<u32> = if sort.is_empty() {
            (0..rows.len() as u32).collect()
        } else {
            arrow::compute::lexsort_to_indices(&sort, None)?
                .values()
                .to_vec()
        };
        let texts = mysql_text(value)?;
        let texts = texts.as_string::<i32>();
        let mut joined: Option<String> = None;
        for r in order {
            let r = r as usize;
            if texts.is_null(r) {
                continue;
            }
            match &mut joined {
                Some(j) => {
                    j.push_str(seps.value(i));
                    j.push_str(texts.value(r));
                }
                None => joined = Some(texts.value(r).to_string()),
            }
        }
        out.append_option(joined);
    }
    Ok(ColumnarValue::Array(Arc::new(out.finish())))
}

/// The sort options of `orders`.
fn sort_options(orders: &str) -> Result<Vec<arrow::compute::SortOptions>> {
    orders
        .split(',')
        .filter(|o| !o.trim().is_empty())
        .map(|o| {
            let words: Vec<String> = o.split_whitespace().map(str::to_ascii_lowercase).collect();
            match words
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .as_slice()
            {
                [dir, "nulls", first] => Ok(arrow::compute::SortOptions {
                    descending: *dir == "desc",
                    nulls_first: *first == "first",
                }),
                _ => exec_err!("group_concat_of: bad order '{o}'"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t: i64, step: usize, n: usize) -> (i64, Vec<bool>) {
        let mut met = vec![false; n];
        met[step] = true;
        (t, met)
    }

    #[test]
    fn funnel_levels() {
        // view at 0, cart at 10, pay at 50: all in a window of 60.
        let e = vec![ev(0, 0, 3), ev(10, 1, 3), ev(50, 2, 3)];
        assert_eq!(funnel_level(e.clone(), 60, FunnelMode::Default), 3);
        assert_eq!(funnel_level(e.clone(), 20, FunnelMode::Default), 2);
        assert_eq!(funnel_level(vec![ev(5, 1, 3)], 60, FunnelMode::Default), 0);
        // A second cart before pay ends a deduplicated chain.
        let d = vec![ev(0, 0, 3), ev(10, 1, 3), ev(20, 1, 3), ev(30, 2, 3)];
        assert_eq!(funnel_level(d.clone(), 60, FunnelMode::Default), 3);
        assert_eq!(funnel_level(d, 60, FunnelMode::Deduplication), 2);
        // Pay before cart breaks a fixed chain.
        let f = vec![ev(0, 0, 3), ev(10, 2, 3), ev(20, 1, 3)];
        assert_eq!(funnel_level(f.clone(), 60, FunnelMode::Default), 2);
        assert_eq!(funnel_level(f, 60, FunnelMode::Fixed), 1);
        // Steps at the same time do not count as increasing.
        let same = vec![ev(0, 0, 2), ev(0, 1, 2)];
        assert_eq!(funnel_level(same.clone(), 60, FunnelMode::Default), 2);
        assert_eq!(funnel_level(same, 60, FunnelMode::Increase), 1);
    }

    #[test]
    fn top_n_json() {
        let v = ["a", "b", "a", "c", "b", "a"].map(String::from);
        assert_eq!(top_n(v.clone().into_iter(), 2), r#"{"a":3,"b":2}"#);
        assert_eq!(top_n(v.into_iter(), 9), r#"{"a":3,"b":2,"c":1}"#);
    }
}
