//! Unmodified sysbench 1.0.20 and the mariadb client against `millrace
//! serve`: every OLTP script runs prepare, run and cleanup in both
//! prepared-statement modes on small tables, with no error other than the
//! deadlocks and lock wait timeouts sysbench retries. CI installs sysbench and
//! mariadb-client (Debian packages) before the tests; without them these
//! tests fail and say so.

use std::net::SocketAddr;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;
use common::{have_command, temp_dir, Server, PASSWORD};

const SCRIPTS: [&str; 8] = [
    "oltp_insert",
    "oltp_update_index",
    "oltp_update_non_index",
    "oltp_delete",
    "oltp_point_select",
    "oltp_read_only",
    "oltp_read_write",
    "oltp_write_only",
];

fn require(cmd: &str, package: &str) {
    assert!(
        have_command(cmd),
        "`{cmd}` is not installed: apt-get install {package} (.ci/run does)"
    );
}

fn sysbench(addr: SocketAddr, script: &str, mode: &str, step: &str, extra: &[&str]) -> Output {
    Command::new("sysbench")
        .arg(script)
        .args([
            "--db-driver=mysql",
            "--mysql-host=127.0.0.1",
            "--mysql-user=root",
            "--mysql-db=sbtest",
            "--tables=2",
            "--table-size=200",
            "--report-interval=0",
        ])
        .arg(format!("--mysql-port={}", addr.port()))
        .arg(format!("--mysql-password={PASSWORD}"))
        .arg(format!("--db-ps-mode={mode}"))
        .args(extra)
        .arg(step)
        .output()
        .expect("run sysbench")
}

fn mariadb(addr: SocketAddr, sql: &str) -> Output {
    Command::new("mariadb")
        .arg("-h127.0.0.1")
        .arg(format!("-P{}", addr.port()))
        .arg("-uroot")
        .arg(format!("-p{PASSWORD}"))
        .arg("--connect-timeout=5")
        .arg("-e")
        .arg(sql)
        .output()
        .expect("run mariadb")
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn every_oltp_script_in_both_ps_modes() {
    require("sysbench", "sysbench");
    require("mariadb", "mariadb-client");
    let dir = temp_dir("sysbench");
    let server = Server::start(&dir, &[]);
    let out = mariadb(server.addr, "CREATE DATABASE sbtest");
    assert!(out.status.success(), "{}", text(&out));
    for mode in ["auto", "disable"] {
        for script in SCRIPTS {
            let t0 = Instant::now();
            for (step, extra) in [
                ("prepare", &[][..]),
                ("run", &["--threads=8", "--time=2"][..]),
                ("cleanup", &[][..]),
            ] {
                let out = sysbench(server.addr, script, mode, step, extra);
                let all = text(&out);
                assert!(
                    out.status.success() && !all.contains("FATAL"),
                    "{script} {step} --db-ps-mode={mode}: {all}"
                );
                if step == "run" {
                    // Some work was done, and every error was one sysbench
                    // retries by default (1213 deadlock, 1205 lock wait).
                    assert!(all.contains("transactions:"), "{all}");
                    for line in all.lines().filter(|l| l.contains("error")) {
                        assert!(
                            !line.contains("FATAL") && !line.contains("ERROR"),
                            "{script} --db-ps-mode={mode}: {line}"
                        );
                    }
                }
            }
            eprintln!(
                "{script} --db-ps-mode={mode}: {:.1} s",
                t0.elapsed().as_secs_f64()
            );
        }
    }
    // cleanup dropped every table.
    let out = mariadb(server.addr, "SHOW TABLES FROM sbtest");
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("sbtest1"), "{}", text(&out));
    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mariadb_client_runs_sql() {
    require("mariadb", "mariadb-client");
    let dir = temp_dir("mariadb-sql");
    let server = Server::start(&dir, &[]);
    let script = "CREATE DATABASE shop;
        USE shop;
        CREATE TABLE items (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            name VARCHAR(40) NOT NULL, price DECIMAL(10,2), KEY by_name (name)) ENGINE=InnoDB;
        INSERT INTO items (name, price) VALUES ('apple', 1.25), ('pear', 2.50), ('fig', 4.00);
        UPDATE items SET price = price * 2 WHERE name = 'fig';
        SELECT id, name, price FROM items ORDER BY price DESC;
        SELECT COUNT(*), SUM(price), MAX(name) FROM items;
        status";
    let out = mariadb(server.addr, script);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("3\tfig\t8.00"), "{all}");
    assert!(all.contains("3\t11.75\tpear"), "{all}");
    assert!(all.contains("Current database:\tshop"), "{all}");
    let out = mariadb(server.addr, "SELECT * FROM shop.nope");
    assert!(!out.status.success());
    assert!(text(&out).contains("ERROR 1146 (42S02)"), "{}", text(&out));
    // Restarted, the server has the table and its rows.
    let (status, _) = server.stop();
    assert!(status.success());
    let server = Server::start(&dir, &[]);
    let out = mariadb(server.addr, "SELECT name FROM shop.items WHERE id = 2");
    assert!(text(&out).contains("pear"), "{}", text(&out));
    // A result far larger than the server's 64 KiB output buffer arrives
    // whole and in order (the buffer drains while it fills).
    let values: Vec<String> = (0..2500)
        .map(|i| format!("('{i:0>5}-{}', {i})", "x".repeat(30)))
        .collect();
    let out = mariadb(
        server.addr,
        &format!(
            "INSERT INTO shop.items (name, price) VALUES {}; SELECT name FROM shop.items WHERE price < 2500 ORDER BY price",
            values.join(",")
        ),
    );
    let all = text(&out);
    assert!(out.status.success(), "{}", &all[..all.len().min(2000)]);
    let names: Vec<&str> = all
        .lines()
        .filter(|l| l.ends_with(&"x".repeat(30)))
        .collect();
    assert_eq!(names.len(), 2500);
    for (i, n) in names.iter().enumerate() {
        assert!(n.starts_with(&format!("{i:0>5}-")), "row {i}: {n}");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let (status, _) = server.stop();
    assert!(status.success() && Instant::now() < deadline);
    let _ = std::fs::remove_dir_all(&dir);
}
