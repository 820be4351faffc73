//! `millrace serve` from start to stop: the settings (flags, environment,
//! millrace.toml), the data directory and the engine (running crash
//! recovery), the listeners and the metrics endpoint on a small tokio
//! runtime, the status lines, and shutdown.
//!
//! Shutdown (SIGTERM or SIGINT): stop accepting, let each connection finish
//! the command it is running (at most `DRAIN_TIMEOUT` in all), close the
//! connections, then shut the engine down (flush and checkpoint).

use crate::auth::password_stage2;
use crate::config::{self, Flags, Settings};
use crate::listener::{accept_loop, bind_unix, start_refuser, Listener};
use crate::metrics_http;
use crate::shared::{Shared, MAX_PREPARED_STMT_COUNT};
use clap::Args;
use millrace_io::FsStorage;
use millrace_metrics::Registry;
use millrace_sys::cpu::{CpuBudget, CpuProbe};
use millrace_trx::Engine;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// Prints a status line on stdout. A server outlives whoever reads its
/// output (a closed pipe, a terminal gone): a failed write is ignored, where
/// `println!` would panic and take the server down mid-shutdown.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// How long shutdown waits for connections to finish their current command.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Settings file (TOML; see `config.rs` or the README); default:
    /// ./millrace.toml if it exists. Flags win over it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// TCP address to listen on [default: 127.0.0.1:3306].
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Option<String>,
    /// Also listen on this Unix socket.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The data directory (created if missing, recovered if it crashed)
    /// [default: ./millrace-data].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Most client connections at once; more get error 1040 [default: 512].
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// The password of user `root` (else --root-password-file, else
    /// $MILLRACE_ROOT_PASSWORD, else the config file, else empty; an empty
    /// password allows loopback and Unix socket only). Other users see it
    /// in `ps`: prefer the environment or a file.
    #[arg(long, value_name = "PASSWORD")]
    root_password: Option<String>,
    /// Read the password of user `root` from the first line of this file.
    #[arg(long, value_name = "PATH")]
    root_password_file: Option<PathBuf>,
    /// The largest command a client may send, e.g. 16M; a larger one gets
    /// error 1153 and the connection is closed [default: 64M].
    #[arg(long, value_name = "SIZE")]
    max_allowed_packet: Option<String>,
    /// Prometheus text metrics at http://ADDR/metrics (loopback only)
    /// [default: 127.0.0.1:9104].
    #[arg(long, value_name = "ADDR:PORT")]
    metrics_listen: Option<String>,
    /// No metrics endpoint.
    #[arg(long)]
    no_metrics: bool,
    /// Buffer pool size, e.g. 512M or 2G [default: 1/16 of the memory
    /// available, within 128M..2G].
    #[arg(long, value_name = "SIZE")]
    buffer_pool_size: Option<String>,
}

pub fn run(args: ServeArgs) -> Result<(), String> {
    let flags = Flags {
        config: args.config,
        listen: args.listen,
        socket: args.socket,
        data_dir: args.data_dir,
        max_connections: args.max_connections,
        max_allowed_packet: args.max_allowed_packet,
        root_password: args.root_password,
        root_password_file: args.root_password_file,
        metrics_listen: args.metrics_listen,
        no_metrics: args.no_metrics,
        buffer_pool_size: args.buffer_pool_size,
    };
    let settings = config::resolve(
        flags,
        std::env::var("MILLRACE_ROOT_PASSWORD").ok(),
        millrace_sys::mem::available_memory_bytes(),
    )?;
    if settings.root_password_on_command_line {
        eprintln!(
            "warning: --root-password is visible to other users of this machine (ps); \
             use MILLRACE_ROOT_PASSWORD or --root-password-file"
        );
    }
    let password = settings.root_password.clone();
    let addr = settings
        .listen
        .to_socket_addrs()
        .map_err(|e| format!("listen {}: {e}", settings.listen))?
        .next()
        .ok_or_else(|| format!("listen {}: no address", settings.listen))?;
    if password.is_empty() && !is_loopback(addr.ip()) {
        return Err(format!(
            "refusing to listen on {addr} with an empty root password: set --root-password, \
             MILLRACE_ROOT_PASSWORD or root_password in the config, or listen on loopback \
             (127.0.0.1, ::1) or --socket"
        ));
    }
    let metrics_addr = match &settings.metrics_listen {
        None => None,
        Some(m) => {
            let a = m
                .to_socket_addrs()
                .map_err(|e| format!("metrics_listen {m}: {e}"))?
                .next()
                .ok_or_else(|| format!("metrics_listen {m}: no address"))?;
            if !is_loopback(a.ip()) {
                return Err(format!(
                    "metrics_listen {a}: the metrics endpoint listens on loopback only"
                ));
            }
            Some(a)
        }
    };
    if let Some(f) = &settings.config_file {
        say!("settings from {}", f.display());
    }

    let t0 = Instant::now();
    let dir = &settings.data_dir;
    let storage =
        Arc::new(FsStorage::new(dir, false).map_err(|e| format!("{}: {e}", dir.display()))?);
    let cpu = CpuBudget::start(CpuProbe::system(), Duration::from_secs(1));
    let engine = Engine::open(storage, settings.engine.clone(), cpu, Registry::new())
        .map_err(|e| format!("opening {}: {e}", dir.display()))?;
    let sql = millrace_sql::Instance::open(engine.clone())
        .map_err(|e| format!("opening the catalog in {}: {}", dir.display(), e.message))?;
    say!(
        "millrace {}: data directory {} open in {:.1} s; {}",
        env!("CARGO_PKG_VERSION"),
        dir.display(),
        t0.elapsed().as_secs_f64(),
        settings.engine_summary
    );

    let served = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("millrace-net")
        .build()
        .map_err(|e| format!("starting the network runtime: {e}"))
        .and_then(|rt| {
            let r = rt.block_on(serve(&settings, addr, metrics_addr, password, sql));
            rt.shutdown_timeout(Duration::from_secs(1));
            r
        });
    if let Some(path) = &settings.socket {
        if served.is_ok() {
            let _ = std::fs::remove_file(path);
        }
    }
    // The engine is shut down even when serving failed (a listener could
    // not bind, say): a clean shutdown spares the next start a recovery.
    let stopped = engine.shutdown().map_err(|e| format!("shutting down: {e}"));
    served?;
    stopped?;
    say!("millrace stopped");
    Ok(())
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

async fn serve(
    args: &Settings,
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    password: String,
    sql: Arc<millrace_sql::Instance>,
) -> Result<(), String> {
    // Handlers first: a signal that arrives once we listen must stop us
    // cleanly, not kill us.
    let signals = Signals::install()?;
    let tcp = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("listening on {addr}: {e}"))?;
    let local = tcp.local_addr().map_err(|e| e.to_string())?;
    let unix = match &args.socket {
        Some(path) => Some(bind_unix(path)?),
        None => None,
    };
    let metrics = match metrics_addr {
        Some(a) => Some(
            tokio::net::TcpListener::bind(a)
                .await
                .map_err(|e| format!("--metrics-listen {a}: {e}"))?,
        ),
        None => None,
    };
    let registry = sql.engine().registry().clone();
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let (alive, mut all_gone) = mpsc::channel::<()>(1);
    // Refused connections take ids from a range of their own: they never
    // get a session.
    let refuser = start_refuser(Arc::new(AtomicU32::new(1 << 31)));
    // @@max_allowed_packet reports what the protocol layer enforces.
    sql.max_allowed_packet_bytes.store(
        args.max_allowed_packet as u64,
        std::sync::atomic::Ordering::Relaxed,
    );
    let shared = Arc::new(Shared {
        sql,
        password_stage2: password_stage2(&password),
        max_connections: args.max_connections,
        max_allowed_packet: args.max_allowed_packet,
        connections: AtomicUsize::new(0),
        next_id: AtomicU32::new(1),
        prepared: AtomicUsize::new(0),
        max_prepared: MAX_PREPARED_STMT_COUNT,
        questions: AtomicU64::new(0),
        started: Instant::now(),
        logins: Default::default(),
        live: Default::default(),
        shutdown: shutdown_rx,
        alive,
        refuser,
    });

    let pw = if password.is_empty() { "" } else { " -p" };
    say!(
        "listening on {local}; connect with: mariadb -h{} -P{} -uroot{pw}",
        local.ip(),
        local.port()
    );
    tokio::spawn(accept_loop(Listener::Tcp(tcp), shared.clone()));
    if let Some(listener) = metrics {
        let at = listener.local_addr().map_err(|e| e.to_string())?;
        say!("metrics at http://{at}/metrics");
        tokio::spawn(metrics_http::serve(listener, registry));
    }
    if let (Some(listener), Some(path)) = (unix, &args.socket) {
        say!(
            "listening on {}; connect with: mariadb --socket={} -uroot{pw}",
            path.display(),
            path.display()
        );
        tokio::spawn(accept_loop(Listener::Unix(listener), shared.clone()));
    }

    signals.wait().await;
    say!("stopping: no new connections, waiting for running commands");
    let _ = shutdown_tx.send(true);
    shared.stop_connections();
    drop(shared);
    if tokio::time::timeout(DRAIN_TIMEOUT, all_gone.recv())
        .await
        .is_err()
    {
        eprintln!(
            "warning: connections still busy after {} s; shutting down anyway",
            DRAIN_TIMEOUT.as_secs()
        );
    }
    Ok(())
}

/// SIGTERM and SIGINT, caught.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Result<Self, String> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM: {e}"))?,
            int: signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT: {e}"))?,
        })
    }

    async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only() {
        assert!(is_loopback("127.0.0.1".parse().unwrap()));
        assert!(is_loopback("127.1.2.3".parse().unwrap()));
        assert!(is_loopback("::1".parse().unwrap()));
        assert!(!is_loopback("0.0.0.0".parse().unwrap()));
        assert!(!is_loopback("::".parse().unwrap()));
        assert!(!is_loopback("10.0.0.1".parse().unwrap()));
    }
}
