//! The `tessera` command line. `tessera serve` runs the all-in-one node.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tessera_server::cluster::{roles, FrontendRole};
use tessera_server::config::{Config, AUTOMATIC_SHARDS, DEFAULT_DATA_DIR, DEFAULT_LISTEN};

#[derive(Parser)]
#[command(name = "tessera", version, about = "Tessera: a sharded, Prometheus-compatible time-series database.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the all-in-one node: remote write/read, the Prometheus HTTP API and S local shards.
    #[command(long_about = SERVE_ABOUT)]
    Serve(ServeArgs),
    /// Run PromQL conformance scripts (Prometheus' promqltest format) against the engine;
    /// prints one line per failing eval and `N passed, M failed`; exits 1 on any failure.
    Promqltest(PromqltestArgs),
    /// Bulk-load exposition files with timestamps (Prometheus text or OpenMetrics) into a
    /// data directory, much faster than remote write; the server must not be running on it.
    #[command(long_about = IMPORT_ABOUT)]
    Import(ImportArgs),
    /// Cluster tools.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    // ---- cluster roles (server/src/cluster/roles.rs) ----
    /// Run an ingester: the shards placement gives this id, served over gRPC to the
    /// distributors and queriers; HTTP serves probes, /metrics and /api/v1/status/cluster.
    Ingester(IngesterArgs),
    /// Run a distributor: remote write, routed by series hash to W of each shard's replicas.
    Distributor(FrontendArgs),
    /// Run a querier: the Prometheus query API over the ingesters.
    Querier(FrontendArgs),
    /// Run a gateway: distributor and querier in one process.
    Gateway(FrontendArgs),
    /// Validate a config file for one role without starting anything; prints
    /// `ok: ROLE config FILE is valid`, or exits 2 with messages naming the keys to fix.
    CheckConfig(CheckConfigArgs),
}

#[derive(Args)]
struct CheckConfigArgs {
    /// The role the file is meant for; the cluster roles also need a valid [cluster] table.
    #[arg(long, value_enum)]
    role: tessera_server::check_config::Role,
    /// TOML config file.
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

#[derive(Args)]
struct IngesterArgs {
    /// TOML config file with the [cluster] table (see deploy/tessera.toml).
    #[arg(long, env = "TESSERA_CONFIG", value_name = "FILE")]
    config: PathBuf,
    /// This ingester's id, one of [cluster]'s; default $TESSERA_INGESTER_ID, else $HOSTNAME.
    #[arg(long, env = "TESSERA_INGESTER_ID", value_name = "ID")]
    id: Option<String>,
    /// Data directory (config key `data_dir`).
    #[arg(long, env = "TESSERA_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// HTTP listen address for probes, /metrics and status (config key `listen`).
    #[arg(long, env = "TESSERA_LISTEN", value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// gRPC listen address; default 0.0.0.0:<port of this ingester's addr in [cluster]>.
    /// Port 0 picks a free port, printed on stdout as "grpc listening on ADDR".
    #[arg(long, value_name = "ADDR")]
    grpc_listen: Option<SocketAddr>,
    /// Log filter (tracing env-filter syntax).
    #[arg(long, env = "TESSERA_LOG", value_name = "FILTER", default_value = "info")]
    log: String,
}

#[derive(Args)]
struct FrontendArgs {
    /// TOML config file with the [cluster] table (see deploy/tessera.toml).
    #[arg(long, env = "TESSERA_CONFIG", value_name = "FILE")]
    config: PathBuf,
    /// HTTP listen address (config key `listen`); port 0 picks a free port, printed on
    /// stdout as "listening on ADDR".
    #[arg(long, env = "TESSERA_LISTEN", value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Log filter (tracing env-filter syntax).
    #[arg(long, env = "TESSERA_LOG", value_name = "FILTER", default_value = "info")]
    log: String,
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Print the shard → replicas table of the `[cluster]` table in a config file, the
    /// load per ingester and the balance.
    Placement {
        /// Config file with a `[cluster]` table.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
}

#[derive(Args)]
struct ImportArgs {
    /// Data directory to import into (created if missing).
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,

    /// Shard count; default: the one recorded in the data directory, else the config's (16).
    #[arg(long, value_name = "N")]
    shards: Option<u32>,

    /// Tenant the samples belong to (as the `X-Scope-OrgID` header would say).
    #[arg(long, value_name = "TENANT", default_value = tessera_server::shards::DEFAULT_TENANT)]
    tenant: String,

    /// TOML config file: its [storage] (retention, out-of-order window, chunk sizes) and
    /// [limits] (name rules, label limits, max_future_secs) apply as for `serve`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Samples per write batch (memory: about 16 bytes each plus labels per series).
    #[arg(long, value_name = "N", default_value_t = tessera_server::import::DEFAULT_BATCH_SAMPLES)]
    batch_samples: usize,

    /// Memory for keeping the validated samples (24 bytes each) so the files are parsed
    /// once; larger inputs are parsed twice (validate, then write). 0 = always twice.
    #[arg(long, value_name = "BYTES", default_value_t = tessera_server::import::DEFAULT_CACHE_BYTES)]
    cache_bytes: usize,

    /// Exposition files with a timestamp on every sample.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

#[derive(Args)]
struct PromqltestArgs {
    /// Script files (`load`, `clear`, `eval instant|range` with `expect` lines).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

const IMPORT_ABOUT: &str = "\
Bulk-load historical samples into a data directory (backfill), without the HTTP path.

Input: Prometheus text exposition (timestamps in integer milliseconds) or OpenMetrics \
(what `promtool tsdb create-blocks-from openmetrics` reads; timestamps in seconds). A \
file whose last non-empty line is `# EOF` is read as OpenMetrics, any other as \
Prometheus text. Every sample line needs a timestamp.

Every file is parsed and validated first; a bad line fails the import with \
`file:line: reason` and the data directory is left untouched. Only then are the samples \
written, grouped by series and sorted by time, every shard in parallel, made durable \
once at the end. Series are placed exactly as remote write places them (tenant \
included), so `tessera serve` on the directory answers PromQL over them afterwards.

The directory must not be in use by a running server (its shards' locks are checked). \
Its recorded shard count is kept; --shards must match it if given.";

const SERVE_ABOUT: &str = "\
Run the all-in-one node: the remote-write receiver (POST /api/v1/write, RW 1.0 and 2.0), \
remote read (POST /api/v1/read), the Prometheus HTTP API, /metrics, and S local shards, \
each a storage engine with its own WAL.

Settings come from, lowest to highest precedence: built-in defaults, the config file \
(--config, TOML; every key is documented in deploy/tessera.toml), environment variables, \
flags. Only the top-level keys have flags; the [limits], [storage] and [query] tables are set in the file.

/-/healthy answers 200 as soon as the process listens; /-/ready answers 200 once every \
shard has replayed its WAL. SIGTERM or SIGINT stops accepting connections, finishes \
in-flight requests, flushes the shards and exits 0.

Point a Prometheus agent at it with:
  remote_write:
    - url: http://127.0.0.1:9201/api/v1/write";

#[derive(Args)]
struct ServeArgs {
    /// TOML config file with the same keys as the flags plus [limits], [storage] and [query]
    /// (see deploy/tessera.toml). Without it, built-in defaults apply.
    #[arg(long, env = "TESSERA_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,

    /// HTTP listen address (config key `listen`). Port 0 picks a free port; the bound
    /// address is printed on stdout as "listening on ADDR".
    #[arg(long, env = "TESSERA_LISTEN", value_name = "ADDR", help_heading = "Settings (override the config file)")]
    #[arg(long_help = format!("HTTP listen address (config key `listen`). Default {DEFAULT_LISTEN} (loopback only). \
Port 0 picks a free port; the bound address is printed on stdout as \"listening on ADDR\"."))]
    listen: Option<SocketAddr>,

    /// Data directory for the shards' WAL and RocksDB files (config key `data_dir`).
    #[arg(long, env = "TESSERA_DATA_DIR", value_name = "DIR", help_heading = "Settings (override the config file)")]
    #[arg(long_help = format!("Directory for the shards' WAL and RocksDB files (config key `data_dir`). \
Default {DEFAULT_DATA_DIR}. Created if missing."))]
    data_dir: Option<PathBuf>,

    /// Number of local shards (config key `shards`); fixed when the data directory is created.
    #[arg(long, env = "TESSERA_SHARDS", value_name = "N", help_heading = "Settings (override the config file)")]
    #[arg(long_help = format!("Number of logical shards, each its own storage engine (config key `shards`). \
Default 0: the count the data directory recorded, or for a new directory 2 per core, from {} to {}. \
Recorded in the data directory on first start; a different value later is refused, \
because series are placed in shard xxh3_64(tenant, labels) mod shards.", AUTOMATIC_SHARDS.start(), AUTOMATIC_SHARDS.end()))]
    shards: Option<u32>,

    /// Log filter, e.g. `info` or `tessera_server=debug,info` (tracing env-filter syntax).
    #[arg(long, env = "TESSERA_LOG", value_name = "FILTER", default_value = "info")]
    log: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Import(args) => import(args),
        Command::Cluster(ClusterCommand::Placement { config }) => cluster_placement(&config),
        Command::Ingester(args) => ingester(args),
        Command::Distributor(args) => frontend(args, FrontendRole::Distributor),
        Command::Querier(args) => frontend(args, FrontendRole::Querier),
        Command::Gateway(args) => frontend(args, FrontendRole::Gateway),
        Command::CheckConfig(args) => check_config(&args),
        Command::Promqltest(args) => {
            if tessera_query::promqltest::run_cli(&args.files) == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Logs go to stderr; stdout carries only the "listening on" lines.
fn init_logs(log: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(log).unwrap_or_else(|e| {
        eprintln!("warning: invalid --log filter {log:?} ({e}); using \"info\"");
        tracing_subscriber::EnvFilter::new("info")
    });
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

fn serve(args: ServeArgs) -> ExitCode {
    init_logs(&args.log);

    let mut config = match &args.config {
        Some(path) => match Config::from_file(path) {
            Ok(c) => c,
            Err(e) => return fail(anyhow::Error::new(e)),
        },
        None => Config::default(),
    };
    if let Some(v) = args.listen {
        config.listen = v;
    }
    if let Some(v) = args.data_dir {
        config.data_dir = v;
    }
    if let Some(v) = args.shards {
        config.shards = v;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => return fail(anyhow::Error::new(e).context("cannot start the async runtime")),
    };
    let result = runtime.block_on(tessera_server::serve::run(config));
    // The shards are flushed by now. Dropping the runtime would wait for every blocking
    // task without limit (a storage scan that outlived its request, say); give them a
    // moment to see their cancel flags, then exit regardless.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    wait_for_query_threads();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn import(args: ImportArgs) -> ExitCode {
    // Storage logs (shard opening, flushes) go to stderr at warn and above; stdout
    // carries only the summary.
    let filter = tracing_subscriber::EnvFilter::new("warn");
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    let config = match &args.config {
        Some(path) => match Config::from_file(path) {
            Ok(c) => c,
            Err(e) => return fail(anyhow::Error::new(e)),
        },
        None => Config::default(),
    };
    let opts = tessera_server::import::ImportOptions {
        data_dir: args.data_dir,
        shards: args.shards,
        tenant: args.tenant,
        files: args.files,
        config,
        batch_samples: args.batch_samples,
        cache_bytes: args.cache_bytes,
    };
    match tessera_server::import::run(&opts) {
        Ok(s) => {
            println!(
                "imported {} samples of {} series from {} file(s) in {:.2} s ({:.2} s validating, {:.2} s writing \
                 and flushing): {:.0} samples/s",
                s.samples,
                s.series,
                s.files,
                s.validate_seconds + s.write_seconds,
                s.validate_seconds,
                s.write_seconds,
                s.samples_per_sec()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn cluster_placement(path: &std::path::Path) -> ExitCode {
    let config = match Config::from_file(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = config.cluster.validate() {
        eprintln!("error: {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    match config.cluster.placement() {
        Ok(p) => {
            print!("{}", p.render());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}: cluster: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}

/// Lets the query threads, whose cancel flags the runtime's shutdown raised, stop before
/// the process exits under them (see `query_api::wait_for_query_threads`).
fn wait_for_query_threads() {
    const LIMIT: std::time::Duration = std::time::Duration::from_secs(5);
    if !tessera_server::http::query_api::wait_for_query_threads(LIMIT) {
        tracing::warn!(limit_secs = LIMIT.as_secs(), "query threads still running at exit");
    }
}

// ---- cluster roles ----

/// Runs `f` on a fresh multi-threaded runtime, then gives stray blocking tasks a
/// moment before exiting.
fn run_async(f: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => return fail(anyhow::Error::new(e).context("cannot start the async runtime")),
    };
    let result = runtime.block_on(f);
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    wait_for_query_threads();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn ingester(args: IngesterArgs) -> ExitCode {
    init_logs(&args.log);
    let mut config = match Config::from_file(&args.config) {
        Ok(c) => c,
        Err(e) => return fail(anyhow::Error::new(e)),
    };
    roles::apply_overrides(&mut config, args.listen, args.data_dir);
    let Some(id) = args.id.or_else(|| std::env::var("HOSTNAME").ok()).filter(|s| !s.is_empty()) else {
        return fail(anyhow::anyhow!("no ingester id: pass --id or set TESSERA_INGESTER_ID (or HOSTNAME)"));
    };
    let opts = roles::IngesterOptions { id, grpc_listen: args.grpc_listen };
    run_async(roles::run_ingester(config, opts))
}

fn frontend(args: FrontendArgs, role: FrontendRole) -> ExitCode {
    init_logs(&args.log);
    let mut config = match Config::from_file(&args.config) {
        Ok(c) => c,
        Err(e) => return fail(anyhow::Error::new(e)),
    };
    roles::apply_overrides(&mut config, args.listen, None);
    run_async(roles::run_frontend(config, role))
}

/// Exit 0 with `ok: ...` (plus a summary) or 2 with one `error:` line per problem.
fn check_config(args: &CheckConfigArgs) -> ExitCode {
    let (role, file) = (args.role.name(), args.file.display());
    match tessera_server::check_config::check_file(args.role, &args.file) {
        Ok(checked) => {
            println!("ok: {role} config {file} is valid");
            println!("  {}", checked.summary);
            for note in checked.notes {
                eprintln!("note: {file}: {note}");
            }
            ExitCode::SUCCESS
        }
        Err(errors) => {
            for e in errors {
                eprintln!("error: {file}: {e}");
            }
            eprintln!("{role} config {file} is NOT valid");
            ExitCode::from(2)
        }
    }
}

fn fail(e: anyhow::Error) -> ExitCode {
    tracing::error!("{e:#}");
    eprintln!("error: {e:#}");
    ExitCode::FAILURE
}
