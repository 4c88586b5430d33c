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
    let out: Vec<mysql_async::Row> = c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    out.into_iter()
        .map(|r| {
            (0..r.len())
                .map(|i| match r.as_ref(i) {
                    Some(mysql_async::Value::NULL) | None => "NULL".to_string(),
                    Some(mysql_async::Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
                    Some(v) => format!("{v:?}"),
                })
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect()
}

#[tokio::test]
async fn runtime_filters_keep_answers_and_show_in_explain() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    for s in [
        "CREATE DATABASE rf",
        "USE rf",
        "CREATE TABLE fact (id BIGINT NOT NULL, dim_id INT, code VARCHAR(8), amount DECIMAL(10,2)) \
         DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 3",
        "CREATE TABLE dim (dim_id INT NOT NULL, grp VARCHAR(8), code VARCHAR(8)) \
         DUPLICATE KEY(dim_id) DISTRIBUTED BY HASH(dim_id) BUCKETS 2",
    ] {
        c.query_drop(s).await.expect(s);
    }
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
    c.query_drop("SET runtime_filter_mode = 'OFF'")
        .await
        .expect("off");
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

    c.query_drop("SET runtime_filter_mode = 'GLOBAL'")
        .await
        .expect("on");
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
    c.query_drop("SET runtime_filter_mode = 'OFF'")
        .await
        .expect("off");
    let plan = rows(&mut c, &format!("EXPLAIN {}", queries[0]))
        .await
        .join("\n");
    assert!(!plan.contains("runtime filters"), "{plan}");
}
