//! `tethys shell`: a MySQL-protocol SQL shell, so a user needs nothing else
//! installed. Line editing and history, multi-line statements ending in `;`,
//! aligned tables with row counts and timings, `-e` and piped input for
//! scripts (tab-separated when not a terminal), and Ctrl-C cancels the running
//! statement (via `KILL QUERY` on a second connection) instead of exiting.

use std::io::{IsTerminal, Read};
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, Row, Value};

#[derive(Args, Clone)]
#[command(disable_help_flag = true)]
pub struct ShellArgs {
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// Server host.
    #[arg(short = 'h', long, default_value = "127.0.0.1")]
    host: String,
    /// Server MySQL port.
    #[arg(short = 'P', long, default_value_t = 9030)]
    port: u16,
    /// User.
    #[arg(short = 'u', long, default_value = "root")]
    user: String,
    /// Prompt for a password.
    #[arg(short = 'p', long)]
    password: bool,
    /// Default database.
    #[arg(short = 'D', long)]
    database: Option<String>,
    /// Execute these statements and exit.
    #[arg(short = 'e', long)]
    execute: Option<String>,
}

fn value_text(v: &Value) -> String {
    match v {
        Value::NULL => "NULL".into(),
        Value::Bytes(b) => String::from_utf8_lossy(b).to_string(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Double(d) => d.to_string(),
        Value::Date(y, mo, d, h, mi, s, us) => {
            if *h == 0 && *mi == 0 && *s == 0 && *us == 0 {
                format!("{y:04}-{mo:02}-{d:02}")
            } else {
                format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}")
            }
        }
        Value::Time(neg, d, h, m, s, _) => {
            format!(
                "{}{:02}:{m:02}:{s:02}",
                if *neg { "-" } else { "" },
                *d * 24 + *h as u32
            )
        }
    }
}

fn print_table(headers: &[String], numeric: &[bool], rows: &[Vec<String>]) {
    let mut w: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let sep: String = format!(
        "+{}+",
        w.iter()
            .map(|n| "-".repeat(n + 2))
            .collect::<Vec<_>>()
            .join("+")
    );
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = " ".repeat(w[i] - c.chars().count());
                if numeric.get(i).copied().unwrap_or(false) {
                    format!(" {pad}{c} ")
                } else {
                    format!(" {c}{pad} ")
                }
            })
            .collect();
        format!("|{}|", parts.join("|"))
    };
    println!("{sep}");
    let header_line = {
        let parts: Vec<String> = headers
            .iter()
            .enumerate()
            .map(|(i, c)| format!(" {}{} ", c, " ".repeat(w[i] - c.chars().count())))
            .collect();
        format!("|{}|", parts.join("|"))
    };
    println!("{header_line}");
    println!("{sep}");
    for r in rows {
        println!("{}", line(r));
    }
    println!("{sep}");
}

/// Runs one statement; prints its result. Returns false on error.
async fn run_statement(conn: &mut Conn, kill: &KillInfo, sql: &str, tty: bool) -> bool {
    let start = Instant::now();
    let fut = async {
        let mut result = conn.query_iter(sql).await?;
        let columns: Vec<String> = result
            .columns_ref()
            .iter()
            .map(|c| c.name_str().to_string())
            .collect();
        let numeric: Vec<bool> = result
            .columns_ref()
            .iter()
            .map(|c| {
                use mysql_async::consts::ColumnType as T;
                matches!(
                    c.column_type(),
                    T::MYSQL_TYPE_TINY
                        | T::MYSQL_TYPE_SHORT
                        | T::MYSQL_TYPE_LONG
                        | T::MYSQL_TYPE_LONGLONG
                        | T::MYSQL_TYPE_INT24
                        | T::MYSQL_TYPE_FLOAT
                        | T::MYSQL_TYPE_DOUBLE
                        | T::MYSQL_TYPE_NEWDECIMAL
                )
            })
            .collect();
        let rows: Vec<Row> = result.collect().await?;
        let affected = result.affected_rows();
        let info = result.info().to_string();
        Ok::<_, mysql_async::Error>((columns, numeric, rows, affected, info))
    };
    tokio::pin!(fut);
    let res = tokio::select! {
        r = &mut fut => r,
        _ = tokio::signal::ctrl_c() => {
            kill.kill().await;
            eprintln!("^C -- query aborted");
            fut.await
        }
    };
    let elapsed = start.elapsed().as_secs_f64();
    match res {
        Ok((columns, numeric, rows, affected, info)) => {
            let rows: Vec<Vec<String>> = rows
                .into_iter()
                .map(|r| r.unwrap().iter().map(value_text).collect())
                .collect();
            if columns.is_empty() {
                if tty {
                    println!(
                        "Query OK, {affected} row{} affected ({elapsed:.2} sec)",
                        if affected == 1 { "" } else { "s" }
                    );
                    if !info.is_empty() {
                        println!("{info}");
                    }
                    println!();
                }
            } else if tty {
                if rows.is_empty() {
                    println!("Empty set ({elapsed:.2} sec)\n");
                } else {
                    print_table(&columns, &numeric, &rows);
                    println!(
                        "{} row{} in set ({elapsed:.2} sec)\n",
                        rows.len(),
                        if rows.len() == 1 { "" } else { "s" }
                    );
                }
            } else {
                println!("{}", columns.join("\t"));
                for r in rows {
                    println!("{}", r.join("\t"));
                }
            }
            true
        }
        Err(mysql_async::Error::Server(e)) => {
            eprintln!("ERROR {} ({}): {}", e.code, e.state, e.message);
            false
        }
        Err(e) => {
            eprintln!("ERROR: {e}");
            false
        }
    }
}

/// What Ctrl-C needs to cancel the running statement.
struct KillInfo {
    opts: OptsBuilder,
    conn_id: u32,
}

impl KillInfo {
    async fn kill(&self) {
        if let Ok(mut c) = Conn::new(self.opts.clone()).await {
            let _ = c.query_drop(format!("KILL QUERY {}", self.conn_id)).await;
            let _ = c.disconnect().await;
        }
    }
}

/// Takes the complete statements out of `buf`, leaving the unfinished
/// rest; none while a quote or comment is open. The FE's splitter
/// (`tethys_fe::sql::complete_statements`), so the shell and the server
/// agree on where a statement ends.
fn take_statements(buf: &mut String) -> Vec<String> {
    match tethys_fe::sql::complete_statements(buf) {
        Some((statements, rest_at)) => {
            *buf = buf[rest_at..].to_string();
            statements
        }
        None => vec![],
    }
}

pub async fn run(args: ShellArgs) -> ExitCode {
    let password = if args.password {
        eprint!("Enter password: ");
        let mut s = String::new();
        let _ = std::io::stdin().read_line(&mut s);
        Some(s.trim_end().to_string())
    } else {
        None
    };
    let opts = OptsBuilder::default()
        .ip_or_hostname(args.host.clone())
        .tcp_port(args.port)
        .user(Some(args.user.clone()))
        .pass(password)
        .db_name(args.database.clone())
        .prefer_socket(false);
    let mut conn = match Conn::new(opts.clone()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ERROR: cannot connect to {}:{}: {e}", args.host, args.port);
            return ExitCode::FAILURE;
        }
    };
    let kill = KillInfo {
        opts: opts.clone(),
        conn_id: conn.id(),
    };
    let stdin_tty = std::io::stdin().is_terminal();
    let stdout_tty = std::io::stdout().is_terminal();
    // `-e` or piped input: run the statements in order, stop at the first
    // that fails.
    let batch = match args.execute {
        Some(sql) => Some((sql, stdout_tty)),
        None if !stdin_tty => {
            let mut input = String::new();
            let _ = std::io::stdin().read_to_string(&mut input);
            Some((input, false))
        }
        None => None,
    };
    if let Some((mut sql, tty)) = batch {
        sql.push(';');
        let mut ok = true;
        for s in take_statements(&mut sql) {
            ok = run_statement(&mut conn, &kill, &s, tty).await;
            if !ok {
                break;
            }
        }
        let _ = conn.disconnect().await;
        return if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let (major, minor, patch) = conn.server_version();
    println!(
        "Welcome to the Tethys shell. Connection id: {}. Server version: {major}.{minor}.{patch}",
        conn.id()
    );
    println!("Statements end with ';'. Type 'exit' or Ctrl-D to leave.\n");
    let mut rl = match rustyline::DefaultEditor::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ERROR: cannot start line editing: {e}");
            return ExitCode::FAILURE;
        }
    };
    let history =
        std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".tethys_history"));
    if let Some(h) = &history {
        let _ = rl.load_history(h);
    }
    let mut buf = String::new();
    loop {
        let prompt = if buf.trim().is_empty() {
            "tethys> "
        } else {
            "     -> "
        };
        match rl.readline(prompt) {
            Ok(line) => {
                let t = line.trim();
                if buf.trim().is_empty()
                    && (t.eq_ignore_ascii_case("exit") || t.eq_ignore_ascii_case("quit"))
                {
                    break;
                }
                buf.push_str(&line);
                buf.push('\n');
                for s in take_statements(&mut buf) {
                    let _ = rl.add_history_entry(format!("{s};"));
                    run_statement(&mut conn, &kill, &s, true).await;
                }
            }
            Err(rustyline::error::ReadlineError::Interrupted) => {
                buf.clear();
            }
            Err(_) => break,
        }
    }
    if let Some(h) = &history {
        let _ = rl.save_history(h);
    }
    let _ = conn.disconnect().await;
    println!("Bye");
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::take_statements;

    #[test]
    fn statements_split_on_semicolons() {
        let mut b = "select 1; select ';'\n; select".to_string();
        assert_eq!(take_statements(&mut b), vec!["select 1", "select ';'"]);
        assert_eq!(b, " select");
        // A `;` in a comment ends nothing (the shell's own splitter cut there).
        let mut b = "select 1 -- a; b\n, 2; select /* ; */ 3;".to_string();
        assert_eq!(
            take_statements(&mut b),
            vec!["select 1 \n, 2", "select   3"]
        );
        // An open quote waits for more input.
        let mut b = "select 'a;".to_string();
        assert!(take_statements(&mut b).is_empty());
        assert_eq!(b, "select 'a;");
    }
}
