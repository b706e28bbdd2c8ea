//! `skillhost migrate --to postgres://…`: a data dir's state copied from
//! its SQLite file into an empty PostgreSQL database, in one transaction,
//! then checked: every table's row count on both sides, and every blob's
//! bytes against the sha256 it is stored under.
//!
//! What is copied: every table of the schema but the change counters (the
//! target keeps its own), and the blobs: the bundles installs were made
//! from, and the data dir's ref files (which PostgreSQL keeps in `blobs`,
//! so every replica reads them); and the data dir's `mcp_servers.json`,
//! sealed under its `secrets.key` (replicas share the configuration in the
//! database), with the key's fingerprint; and the HTTP servers' OAuth
//! sign-ins (`mcp/<name>/oauth.json`), sealed the same way, so no replica
//! signs in again. An install made before installs kept
//! their bundle is copied as a record whose bundle other replicas cannot
//! unpack; the report names it (installing it again fixes that).

use std::path::Path;

use anyhow::Context as _;
use sha2::{Digest, Sha256};

use super::Store;
use super::data_dir::{DataDir, DatabaseUrl};
use super::db::{Db, Owned, Param, PgConn, params};
use super::sealing::{SECRETS_KEY_FILE, Sealed, SealingKey};
use crate::upstream::shared_sign_ins;
use skillhost_mcp::McpConfig;

/// Every table copied, in an order that satisfies the foreign keys, with
/// its columns.
const TABLES: &[(&str, &str)] = &[
    (
        "installed_skills",
        "name, version, digest, signer, trusted, installed_at, bundle_sha256",
    ),
    ("skill_settings", "name, enabled, trusted_local"),
    ("trusted_keys", "key_id, label, public_key, added_at"),
    ("key_skill_grants", "key_id, skill"),
    ("mcp_tool_pins", "server, tool, hash, pinned_at"),
    ("personas", "id, description, created_at, client_approval"),
    ("skill_grants", "persona, skill, identity"),
    ("mcp_tools", "server, name, definition"),
    (
        "runs",
        "run_id, parent_run_id, persona, tool, server, outcome, approval, args, input_refs, \
         error, created_at_ms, updated_at_ms, expires_at_ms, duration_ms, runner_pid, \
         decided_by, resume_digest, runner, lease_until_ms",
    ),
    (
        "events",
        "id, at, kind, server, tool, detail, run_id, persona, outcome, duration_ms",
    ),
    ("refs", "ref_id, sha256, size, label, created_at"),
    (
        "api_tokens",
        "id, digest, prefix, persona, label, created_at",
    ),
    (
        "permission_approvals",
        "skill, identity, permissions, digest, approved_by, approved_at",
    ),
    (
        "skill_secrets",
        "skill, name, identity, nonce, sealed, set_at",
    ),
    (
        "questions",
        "id, server, tool, persona, message, schema, asked_at, expires_at, state, answer, \
         decided_by",
    ),
    ("host_keys", "name, key, created_at"),
    ("blobs", "sha256, size, bytes"),
    (
        "sealed_documents",
        "name, revision, nonce, sealed, updated_at",
    ),
    ("sealing_key", "id, fingerprint, recorded_at"),
];

/// The tables whose identity column the copy sets, so new rows continue
/// after the copied ids.
const IDENTITIES: &[&str] = &["events", "api_tokens"];

/// What a migration copied and checked.
///
/// ```
/// let r = skillhost::MigrationReport::default();
/// assert!(r.tables.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct MigrationReport {
    /// Each table and its rows, the same on both sides.
    pub tables: Vec<(String, u64)>,
    /// Blobs copied (bundles and refs), each checked against its sha256.
    pub blobs: u64,
    /// Of them, the data dir's ref files.
    pub refs: u64,
    /// Installs whose bundle was not kept (installed before installs kept
    /// it): other replicas cannot unpack them until installed again.
    pub installs_without_bundle: Vec<String>,
    /// The servers whose OAuth sign-in was carried (sealed).
    pub sign_ins: Vec<String>,
    /// Servers whose token file was not used, with why (they sign in
    /// again on the replicas).
    pub sign_ins_not_carried: Vec<(String, String)>,
}

/// Copies the state of the data dir at `data_dir` (its SQLite file and ref
/// files) into the empty PostgreSQL database `url`, and checks the copy.
/// Refuses, changing nothing, a database that already holds state.
pub fn migrate_to(data_dir: &Path, url: &str) -> anyhow::Result<MigrationReport> {
    let data = DataDir::open(data_dir)?;
    let url = DatabaseUrl::parse(url)?;
    let source = Store::open_sqlite(&data.root)?;
    let target = Db::Postgres(Box::new(
        PgConn::connect(url.expose()).with_context(|| format!("cannot connect to {url}"))?,
    ));
    super::migrations::migrate(&target).with_context(|| format!("cannot migrate {url}"))?;

    // The ref files, into `blobs` beside the bundles.
    let mut ref_blobs: Vec<(String, Vec<u8>)> = Vec::new();
    for r in source.ref_records()? {
        let bytes = data
            .dir
            .read(format!("{}/{}", super::refs::REFS_DIR, r.ref_id))
            .with_context(|| format!("cannot read ref {}", r.ref_id))?;
        anyhow::ensure!(
            hex::encode(Sha256::digest(&bytes)) == r.sha256,
            "ref {} does not match its recorded sha256: not migrated",
            r.ref_id
        );
        ref_blobs.push((r.sha256, bytes));
    }

    // The MCP servers' configuration, which replicas keep in the
    // database, sealed under the data dir's key; the key's fingerprint
    // goes with it (and with any sealed secret), so every replica is
    // asked for this key.
    let mcp = McpConfig::load(&data.dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    let has_key = data.dir.exists(SECRETS_KEY_FILE);
    let mut mcp_document = None;
    let mut report = MigrationReport {
        refs: ref_blobs.len() as u64,
        ..Default::default()
    };
    // The HTTP servers' sign-ins, each a document of its own.
    let mut sign_ins: Vec<(String, Sealed)> = Vec::new();
    if has_key || !mcp.servers.is_empty() {
        let key = SealingKey::load(&data.dir, true)?;
        source.check_sealing_key(&key)?;
        if !mcp.servers.is_empty() {
            mcp_document = Some(crate::upstream::shared_config::seal(&key, &mcp)?);
        }
        let files = skillhost_mcp::TokenHome::Files(data.root.clone());
        for server in &mcp.servers {
            match skillhost_mcp::oauth::kept_sign_in(&files, server) {
                Ok(Some(bytes)) => {
                    let sealed = shared_sign_ins::seal(&key, &server.name, &bytes)?;
                    sign_ins.push((shared_sign_ins::document(&server.name), sealed));
                    report.sign_ins.push(server.name.clone());
                }
                Ok(None) => {}
                Err(why) => report.sign_ins_not_carried.push((server.name.clone(), why)),
            }
        }
    }

    for r in source.installed()? {
        if r.bundle_sha256.is_none() {
            report
                .installs_without_bundle
                .push(format!("{}@{}", r.name, r.version));
        }
    }
    target.transaction(|tx| {
        let held: i64 = tx.query_row(
            "SELECT (SELECT COUNT(*) FROM personas) + (SELECT COUNT(*) FROM installed_skills)
                  + (SELECT COUNT(*) FROM runs) + (SELECT COUNT(*) FROM api_tokens)
                  + (SELECT COUNT(*) FROM trusted_keys) + (SELECT COUNT(*) FROM events)",
            params![],
            |r| r.get(0),
        )?;
        if held > 0 {
            return Err(super::db::DbError::Value(format!(
                "the database already holds skillhost state ({held} rows of personas, installs, \
                 runs, tokens, keys and events): migrate into an empty database"
            )));
        }
        for (table, columns) in TABLES {
            let n = columns.split(',').count();
            let placeholders: Vec<String> = (1..=n).map(|i| format!("?{i}")).collect();
            let insert = format!(
                "INSERT INTO {table} ({columns}) VALUES ({})",
                placeholders.join(", ")
            );
            let rows = source.db().query_map(
                &format!("SELECT {columns} FROM {table}"),
                params![],
                |r| {
                    (0..n)
                        .map(|i| r.owned(i))
                        .collect::<super::db::Result<Vec<Owned>>>()
                },
            )?;
            for row in &rows {
                let values: Vec<&dyn Param> = row.iter().map(|v| v as &dyn Param).collect();
                tx.execute(&insert, &values)?;
            }
        }
        for (sha256, bytes) in &ref_blobs {
            super::skills::put_blob_on(tx, sha256, bytes)?;
        }
        let documents = mcp_document
            .iter()
            .map(|doc| (crate::upstream::shared_config::DOCUMENT, doc))
            .chain(sign_ins.iter().map(|(name, doc)| (name.as_str(), doc)));
        for (name, doc) in documents {
            tx.execute(
                "INSERT INTO sealed_documents (name, revision, nonce, sealed, updated_at)
                 VALUES (?1, 1, ?2, ?3, ?4)",
                params![name, doc.nonce, doc.sealed, super::now()],
            )?;
        }
        for table in IDENTITIES {
            tx.execute(
                &format!(
                    "SELECT setval(pg_get_serial_sequence('{table}', 'id'),
                       COALESCE((SELECT MAX(id) FROM {table}), 0) + 1, false)"
                ),
                params![],
            )?;
        }
        Ok(())
    })?;

    // The check, on what was committed.
    for (table, _) in TABLES {
        let count = |db: &Db| -> super::db::Result<i64> {
            db.query_row(&format!("SELECT COUNT(*) FROM {table}"), params![], |r| {
                r.get(0)
            })
        };
        let (from, to) = (count(source.db())?, count(&target)?);
        let expected = if *table == "blobs" {
            let mut shas: Vec<String> =
                source
                    .db()
                    .query_map("SELECT sha256 FROM blobs", params![], |r| r.get(0))?;
            shas.extend(ref_blobs.iter().map(|(s, _)| s.clone()));
            shas.sort();
            shas.dedup();
            shas.len() as i64
        } else if *table == "sealed_documents" {
            from + i64::from(mcp_document.is_some()) + sign_ins.len() as i64
        } else {
            from
        };
        anyhow::ensure!(
            to == expected,
            "the copy of {table} has {to} rows where {expected} were expected"
        );
        report
            .tables
            .push(((*table).to_string(), u64::try_from(to).unwrap_or(0)));
    }
    target.query_each("SELECT sha256, bytes FROM blobs", params![], |r| {
        let sha: String = r.get(0)?;
        let bytes: Vec<u8> = r.get(1)?;
        if hex::encode(Sha256::digest(&bytes)) != sha {
            return Err(super::db::DbError::Value(format!(
                "the copied blob {sha} does not match its sha256"
            )));
        }
        report.blobs += 1;
        Ok(())
    })?;
    Ok(report)
}
