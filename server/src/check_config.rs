//! `tessera check-config --role ROLE FILE`: validates a config file for one role without
//! starting anything (no data directory is opened, no port bound, no peer dialled).
//!
//! The file is parsed exactly as the server parses it (`Config::from_file`: unknown keys
//! are an error) and checked with the same `Config::validate` the server runs at start-up.
//! The cluster roles (ingester, distributor, querier, gateway) also need a `[cluster]`
//! table that passes `ClusterConfig::validate` (membership, RF, W, placement);
//! `serve` ignores `[cluster]`. Every message names the key to fix. Deployment tooling
//! runs this before rolling a config out (`deploy/kubernetes/README.md`).

use std::path::Path;

use crate::config::Config;
use crate::error::ConfigError;

/// The process roles of the `tessera` binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// The all-in-one node.
    Serve,
    /// Holds shard replicas: WAL, head and RocksDB, served over gRPC.
    Ingester,
    /// Remote write: routes every series to the replicas of its shard.
    Distributor,
    /// The Prometheus query and read API over the ingesters.
    Querier,
    /// Distributor and querier in one process.
    Gateway,
}

impl Role {
    /// Every role, in the order of the help text.
    pub const ALL: [Role; 5] = [Role::Serve, Role::Ingester, Role::Distributor, Role::Querier, Role::Gateway];

    /// The name used on the command line (`--role NAME`, `tessera NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Role::Serve => "serve",
            Role::Ingester => "ingester",
            Role::Distributor => "distributor",
            Role::Querier => "querier",
            Role::Gateway => "gateway",
        }
    }

    /// Whether the role is part of a cluster (and so needs `[cluster]`).
    pub fn is_cluster(self) -> bool {
        self != Role::Serve
    }
}

/// A config that passed the checks of a role.
#[derive(Debug)]
pub struct Checked {
    /// The parsed configuration (defaults filled in).
    pub config: Config,
    /// One line describing what the role will run with, e.g. the cluster's shape.
    pub summary: String,
    /// Things worth knowing that are not errors (a table the role ignores, say).
    pub notes: Vec<String>,
}

/// Reads `path` and validates it for `role`; on failure, every message found (each
/// naming the key to fix), prefixed with nothing: the caller adds the file name.
pub fn check_file(role: Role, path: &Path) -> Result<Checked, Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| vec![format!("cannot read the file: {e}")])?;
    validate_for_role(role, &text)
}

/// Validates config text (TOML) for `role`. Errors: the TOML does not parse or has an
/// unknown key (one message, from the parser, naming line and key); otherwise every
/// failed check (the common `Config::validate`, then the `[cluster]` checks of a
/// cluster role), in that order.
pub fn validate_for_role(role: Role, text: &str) -> Result<Checked, Vec<String>> {
    let config = match Config::from_toml(text) {
        Ok(c) => c,
        Err(ConfigError::Parse { message, .. }) => return Err(vec![message.trim_end().to_owned()]),
        Err(e) => return Err(vec![e.to_string()]),
    };
    // The typed parse fills a missing table with defaults; whether `[cluster]` was
    // written at all is a question about the text.
    let has_cluster =
        text.parse::<toml::Table>().map(|t| t.get("cluster").is_some_and(toml::Value::is_table)).unwrap_or(false);

    let mut errors = Vec::new();
    if let Err(e) = config.validate() {
        errors.push(match e {
            ConfigError::Invalid(m) => m,
            other => other.to_string(),
        });
    }
    if config.data_dir.as_os_str().is_empty() && matches!(role, Role::Serve | Role::Ingester) {
        errors.push("data_dir must not be empty (the directory holding the shards' WAL and RocksDB files)".into());
    }
    let mut notes = Vec::new();
    if role.is_cluster() {
        if !has_cluster {
            errors.push(format!(
                "[cluster] table is missing: the {} role needs cluster.shards, cluster.replication_factor and the \
                 ingesters (cluster.ingesters = [{{ id, addr }}, ...], or cluster.ingester_count with \
                 cluster.ingester_addr_template); deploy/cluster/local.toml is a complete example",
                role.name()
            ));
        } else if let Err(e) = config.cluster.validate() {
            errors.push(e);
        }
    } else if has_cluster {
        notes.push("the [cluster] table is ignored by `tessera serve`".to_owned());
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let summary = summary(role, &config);
    Ok(Checked { config, summary, notes })
}

/// What the role will run with, in one line.
fn summary(role: Role, config: &Config) -> String {
    if !role.is_cluster() {
        let shards = match config.shards {
            0 => format!("the recorded shard count (a new directory: {})", crate::config::automatic_shards()),
            n => format!("{n} shards"),
        };
        return format!("{shards} in {}, HTTP on {}", config.data_dir.display(), config.listen);
    }
    let c = &config.cluster;
    format!(
        "cluster: {} shards, replication factor {}, write quorum {}, {} ingesters, placement {}",
        c.shards,
        c.replication_factor,
        c.write_quorum(),
        c.ingesters().len(),
        c.placement
    )
}

#[cfg(test)]
mod tests;
