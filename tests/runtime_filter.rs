//! Runtime filters end to end: a join's build side becomes a filter on the
//! probe side's backend scan (IN list, bloom filter beyond
//! `runtime_filter_max_in_num`, key bounds), EXPLAIN shows it on both ends
//! in Doris' words, and answers are the same with filters on, off, and in
//! bloom form, including NULL keys, string keys and empty build sides.

use std::path::PathBuf;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tethys_sql_tests::TethysServer;

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tethys"))
}

async fn rows(c: &mut Conn, sql: &str) -> Vec<String> {
    tethys_sql_tests::query_lines(c, sql, "|").await
}

#[tokio::test]
async fn runtime_filters_keep_answers_and_show_in_explain() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    tethys_sql_tests::run_all(
        &mut c,
        &[
        "CREATE DATABASE rf",
        "USE rf",
        "CREATE TABLE fact (id BIGINT NOT NULL, dim_id INT, code VARCHAR(8), amount DECIMAL(10,2)) \
         DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 3",
        "CREATE TABLE dim (dim_id INT NOT NULL, grp VARCHAR(8), code VARCHAR(8)) \
         DUPLICATE KEY(dim_id) DISTRIBUTED BY HASH(dim_id) BUCKETS 2",
        ],
    )
    .await;
    // 3000 fact rows over dim ids 0..299 (and some NULL dims), 300 dims.
    let mut values = vec![];
    for i in 0..3000 {
        let dim = if i % 97 == 0 {
            "NULL".to_string()
        } else {
            (i % 300).to_string()
        };
        values.push(format!("({i}, {dim}, 'c{}', {}.25)", i % 40, i % 50));
    }
    c.query_drop(format!("INSERT INTO fact VALUES {}", values.join(",")))
        .await
        .expect("fact");
    let dims: Vec<String> = (0..300)
        .map(|i| format!("({i}, 'g{}', 'c{}')", i % 10, i % 40))
        .collect();
    c.query_drop(format!("INSERT INTO dim VALUES {}", dims.join(",")))
        .await
        .expect("dim");

    let queries = [
        // Selective dimension: a short IN list and tight bounds.
        "SELECT d.grp, count(*), sum(f.amount) FROM fact f JOIN dim d ON f.dim_id = d.dim_id \
         WHERE d.grp = 'g3' GROUP BY d.grp",
        // Many keys (bloom form when runtime_filter_max_in_num is small).
        "SELECT count(*), sum(f.amount) FROM fact f JOIN dim d ON f.dim_id = d.dim_id WHERE d.dim_id % 3 = 1",
        // String keys.
        "SELECT count(*) FROM fact f JOIN dim d ON f.code = d.code WHERE d.grp IN ('g1', 'g2')",
        // Empty build side.
        "SELECT count(*) FROM fact f JOIN dim d ON f.dim_id = d.dim_id WHERE d.grp = 'none'",
        // Semi join and the probe side's NULL keys.
        "SELECT count(*) FROM fact WHERE dim_id IN (SELECT dim_id FROM dim WHERE grp = 'g7')",
        "SELECT count(*) FROM fact f LEFT JOIN dim d ON f.dim_id = d.dim_id AND d.grp = 'g1' WHERE d.dim_id IS NULL",
        // Two keys.
        "SELECT count(*) FROM fact f JOIN dim d ON f.dim_id = d.dim_id AND f.code = d.code WHERE d.grp = 'g5'",
    ];
    let mut expected = vec![];
    tethys_sql_tests::run_all(&mut c, &["SET runtime_filter_mode = 'OFF'"]).await;
    for q in queries {
        expected.push(rows(&mut c, q).await);
    }
    assert!(
        expected[0].len() == 1 && expected[0][0].starts_with("g3|2"),
        "{:?}",
        expected[0]
    );
    assert_eq!(expected[3], vec!["0"]);
    for setting in [
        "SET runtime_filter_mode = 'GLOBAL'",
        "SET runtime_filter_max_in_num = 1",
    ] {
        c.query_drop(setting).await.expect(setting);
        for (q, want) in queries.iter().zip(&expected) {
            assert_eq!(&rows(&mut c, q).await, want, "{setting}: {q}");
        }
    }

    tethys_sql_tests::run_all(&mut c, &["SET runtime_filter_mode = 'GLOBAL'"]).await;
    let plan = rows(&mut c, &format!("EXPLAIN {}", queries[0]))
        .await
        .join("\n");
    assert!(
        plan.contains(
            "runtime filters: RF000[min_max] <- dim_id@0, RF001[in_or_bloom] <- dim_id@0"
        ),
        "{plan}"
    );
    assert!(
        plan.contains(
            "runtime filters: RF000[min_max] -> dim_id@0, RF001[in_or_bloom] -> dim_id@0"
        ),
        "{plan}"
    );
    assert!(plan.contains("INNER JOIN(BROADCAST)"), "{plan}");
    // A build side that reads a whole table filters nothing: no runtime filter.
    let plan = rows(
        &mut c,
        "EXPLAIN SELECT count(*) FROM fact f JOIN dim d ON f.dim_id = d.dim_id",
    )
    .await
    .join("\n");
    assert!(
        plan.contains("VHASH JOIN") && !plan.contains("runtime filters"),
        "{plan}"
    );
    tethys_sql_tests::run_all(&mut c, &["SET runtime_filter_mode = 'OFF'"]).await;
    let plan = rows(&mut c, &format!("EXPLAIN {}", queries[0]))
        .await
        .join("\n");
    assert!(!plan.contains("runtime filters"), "{plan}");
}

/// A join whose probe keys come from two tables joined below it (TPC-H
/// q05's `l_suppkey = s_suppkey AND c_nationkey = s_nationkey`) hashes on
/// the big table's key only and checks the other pair as a join predicate,
/// so its runtime filter reaches the big table's scan.
#[tokio::test]
async fn runtime_filter_of_a_join_on_keys_from_two_tables_reaches_the_scan() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    tethys_sql_tests::run_all(
        &mut c,
        &[
            "CREATE DATABASE rf2",
            "USE rf2",
            "CREATE TABLE sales (id BIGINT NOT NULL, cust INT, supp INT, amount INT) \
         DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 3",
            "CREATE TABLE cust (cust INT NOT NULL, nation INT) \
         DUPLICATE KEY(cust) DISTRIBUTED BY HASH(cust) BUCKETS 1",
            "CREATE TABLE supp (supp INT NOT NULL, nation INT, region VARCHAR(8)) \
         DUPLICATE KEY(supp) DISTRIBUTED BY HASH(supp) BUCKETS 1",
        ],
    )
    .await;
    let sales: Vec<String> = (0..5000)
        .map(|i| format!("({i}, {}, {}, {})", i % 500, (i * 7) % 100, i % 13))
        .collect();
    c.query_drop(format!("INSERT INTO sales VALUES {}", sales.join(",")))
        .await
        .expect("sales");
    let custs: Vec<String> = (0..500).map(|i| format!("({i}, {})", i % 5)).collect();
    c.query_drop(format!("INSERT INTO cust VALUES {}", custs.join(",")))
        .await
        .expect("cust");
    let supps: Vec<String> = (0..100)
        .map(|i| format!("({i}, {}, '{}')", i % 5, if i < 10 { "ASIA" } else { "EU" }))
        .collect();
    c.query_drop(format!("INSERT INTO supp VALUES {}", supps.join(",")))
        .await
        .expect("supp");
    // The FROM order: `sales ⋈ cust` under the join with `supp`, the shape
    // this test is about (reordered, `supp ⋈ cust` by nation is built and
    // sales probes it on both keys).
    tethys_sql_tests::run_all(&mut c, &["SET disable_join_reorder = true"]).await;
    let q = "SELECT count(*), sum(s.amount) FROM sales s JOIN cust c ON s.cust = c.cust \
             JOIN supp p ON s.supp = p.supp AND c.nation = p.nation WHERE p.region = 'ASIA'";
    // Reference: supplier i < 10 has nation i % 5; sale i's customer has
    // nation (i % 500) % 5 = i % 5, its supplier (7 i) % 100.
    let (mut n, mut sum) = (0, 0);
    for i in 0..5000 {
        let supp = (i * 7) % 100;
        if supp < 10 && supp % 5 == i % 5 {
            n += 1;
            sum += i % 13;
        }
    }
    assert_eq!(rows(&mut c, q).await, vec![format!("{n}|{sum}")]);
    tethys_sql_tests::run_all(&mut c, &["SET runtime_filter_mode = 'OFF'"]).await;
    assert_eq!(rows(&mut c, q).await, vec![format!("{n}|{sum}")]);
    tethys_sql_tests::run_all(&mut c, &["SET runtime_filter_mode = 'GLOBAL'"]).await;
    let plan = rows(&mut c, &format!("EXPLAIN ANALYZE {q}"))
        .await
        .join("\n");
    assert!(plan.contains("other join predicates: nation@"), "{plan}");
    // The sales scan gets the supplier join's filter on `supp` and returns
    // only the rows of the ten ASIA suppliers (a tenth).
    let sales_scan = plan
        .split("VOlapScanNode")
        .find(|s| s.contains("TABLE: rf2.sales"))
        .unwrap_or_else(|| panic!("{plan}"));
    assert!(sales_scan.contains("-> supp@"), "{plan}");
    assert!(
        sales_scan.lines().any(|l| l.trim() == "RowsProduced: 500"),
        "{plan}"
    );

    // TPC-H q02's shape: a decorrelated per-customer minimum, semi-joined
    // on the customer and the minimum. Keyed on the customer alone, the
    // join's filter passes the aggregation and reaches the inner sales scan.
    let q = "SELECT s.id, s.amount FROM sales s JOIN cust c ON s.cust = c.cust \
             WHERE c.nation = 1 AND c.cust < 50 AND s.amount = \
             (SELECT min(s2.amount) FROM sales s2 WHERE s2.cust = s.cust) ORDER BY s.id";
    let with_filters = rows(&mut c, q).await;
    tethys_sql_tests::run_all(&mut c, &["SET runtime_filter_mode = 'OFF'"]).await;
    let without = rows(&mut c, q).await;
    tethys_sql_tests::run_all(&mut c, &["SET runtime_filter_mode = 'GLOBAL'"]).await;
    // Customers 1, 6, ..., 46 (nation 1), each with sales i = cust + 500 k;
    // amounts i % 13, so each customer's minimum sale.
    let mut want = vec![];
    for cust in (1..50).filter(|c| c % 5 == 1) {
        let sales: Vec<i64> = (0..10).map(|k| cust + 500 * k).collect();
        let min = sales.iter().map(|i| i % 13).min().unwrap_or_default();
        want.extend(
            sales
                .iter()
                .filter(|i| *i % 13 == min)
                .map(|i| format!("{i}|{min}")),
        );
    }
    want.sort_by_key(|r| r.split('|').next().and_then(|v| v.parse::<i64>().ok()));
    assert_eq!(with_filters, want);
    assert_eq!(without, want);
    let plan = rows(&mut c, &format!("EXPLAIN ANALYZE {q}"))
        .await
        .join("\n");
    assert!(
        plan.contains("LEFTSEMI JOIN") || plan.contains("RIGHTSEMI JOIN"),
        "{plan}"
    );
    assert!(plan.contains("other join predicates: amount@"), "{plan}");
}

/// The `RowsProduced` an EXPLAIN ANALYZE plan shows on `table`'s
/// scan node.
fn rows_produced(plan: &str, table: &str) -> u64 {
    let scan = plan
        .split("VOlapScanNode")
        .find(|s| s.contains(&format!("TABLE: {table}")))
        .unwrap_or_else(|| panic!("no scan of {table}: {plan}"));
    scan.lines()
        .find_map(|l| l.trim().strip_prefix("RowsProduced: "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no RowsProduced on {table}: {plan}"))
}

/// Each form of a join's key set drops probe rows in the backend scan: an
/// IN list for a few sparse keys, a bitmap for integers in a narrow range,
/// a bloom filter beyond `runtime_filter_max_in_num`, and a partitioned
/// join's filter (one per build partition) applied as the set of all its
/// keys. The answers match those without runtime filters.
#[tokio::test]
async fn every_key_set_form_drops_probe_rows_in_the_scan() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    tethys_sql_tests::run_all(
        &mut c,
        &[
            "CREATE DATABASE rf3",
            "USE rf3",
            "CREATE TABLE fact (id BIGINT NOT NULL, sparse BIGINT, v INT) \
         DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 3",
            "CREATE TABLE dim (id BIGINT NOT NULL, sparse BIGINT, tag VARCHAR(8)) \
         DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2",
        ],
    )
    .await;
    let fact: Vec<String> = (0..20_000i64)
        .map(|i| format!("({i}, {}, {})", i * 1_000_003, i % 7))
        .collect();
    c.query_drop(format!("INSERT INTO fact VALUES {}", fact.join(",")))
        .await
        .expect("fact");
    // Tag 'few': ten ids spread over the whole range; 'dense': the even ids
    // of 5000..5999; everything else 'other'.
    let dim: Vec<String> = (0..20_000i64)
        .map(|i| {
            let tag = if i % 2000 == 7 {
                "few"
            } else if (5000..6000).contains(&i) && i % 2 == 0 {
                "dense"
            } else {
                "other"
            };
            format!("({i}, {}, '{tag}')", i * 1_000_003)
        })
        .collect();
    c.query_drop(format!("INSERT INTO dim VALUES {}", dim.join(",")))
        .await
        .expect("dim");

    let few = "SELECT count(*), sum(f.v) FROM fact f JOIN dim d ON f.sparse = d.sparse \
               WHERE d.tag = 'few'";
    let dense = "SELECT count(*), sum(f.v) FROM fact f JOIN dim d ON f.id = d.id \
                 WHERE d.tag = 'dense'";
    let mut want = vec![];
    tethys_sql_tests::run_all(&mut c, &["SET runtime_filter_mode = 'OFF'"]).await;
    for q in [few, dense] {
        want.push(rows(&mut c, q).await);
    }
    let sum = |ids: &mut dyn Iterator<Item = i64>| {
        let ids: Vec<i64> = ids.collect();
        format!("{}|{}", ids.len(), ids.iter().map(|i| i % 7).sum::<i64>())
    };
    assert_eq!(
        want[0],
        vec![sum(&mut (0..20_000).filter(|i| i % 2000 == 7))]
    );
    assert_eq!(want[1], vec![sum(&mut (5000..6000).filter(|i| i % 2 == 0))]);
    tethys_sql_tests::run_all(&mut c, &["SET runtime_filter_mode = 'GLOBAL'"]).await;

    let analyze = async |c: &mut Conn, q: &str, want: &Vec<String>| {
        assert_eq!(&rows(c, q).await, want, "{q}");
        rows(c, &format!("EXPLAIN ANALYZE {q}")).await.join("\n")
    };
    // Ten sparse keys: an exact IN list, only the ten matching rows leave
    // the scan.
    let plan = analyze(&mut c, few, &want[0]).await;
    assert!(plan.contains("INNER JOIN(BROADCAST)"), "{plan}");
    assert_eq!(rows_produced(&plan, "rf3.fact"), 10, "{plan}");
    // 500 keys within 1000 values: an exact bitmap.
    let plan = analyze(&mut c, dense, &want[1]).await;
    assert_eq!(rows_produced(&plan, "rf3.fact"), 500, "{plan}");
    // More keys than runtime_filter_max_in_num: a bloom filter, which lets a
    // few rows through that the join then drops.
    tethys_sql_tests::run_all(&mut c, &["SET runtime_filter_max_in_num = 4"]).await;
    let plan = analyze(&mut c, few, &want[0]).await;
    let n = rows_produced(&plan, "rf3.fact");
    assert!((10..100).contains(&n), "{n}: {plan}");
    tethys_sql_tests::run_all(&mut c, &["SET runtime_filter_max_in_num = 1024"]).await;
    // A partitioned join: its filter routes probe rows to each build
    // partition's keys by hash; the scan applies the set of all of them.
    tethys_sql_tests::run_all(&mut c, &["SET broadcast_row_count_limit = 0"]).await;
    for (q, want, n) in [(few, &want[0], 10), (dense, &want[1], 500)] {
        let plan = analyze(&mut c, q, want).await;
        assert!(plan.contains("INNER JOIN(PARTITIONED)"), "{plan}");
        assert_eq!(rows_produced(&plan, "rf3.fact"), n, "{plan}");
    }
}
