//! Durable host state in an embedded SQLite database (`skillhost.db` in the
//! data dir): installed skills, their trust and enablement, trusted
//! publisher keys. WAL mode, versioned migrations, one transaction per
//! change so a kill -9 leaves the last committed state.

pub(crate) mod data_dir;
pub(crate) mod personas;
pub(crate) mod refs;
pub(crate) mod runs;
pub(crate) mod tokens;

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

/// File name of the database in the data dir.
pub const DB_FILE: &str = "skillhost.db";

/// Schema migrations, applied in order; the index + 1 is the version.
const MIGRATIONS: &[&str] = &[
    // 1: skills and keys.
    "CREATE TABLE installed_skills (
        name TEXT NOT NULL,
        version TEXT NOT NULL,
        digest TEXT NOT NULL,
        signer TEXT,
        trusted INTEGER NOT NULL,
        installed_at INTEGER NOT NULL,
        PRIMARY KEY (name, version)
     );
     CREATE TABLE skill_settings (
        name TEXT PRIMARY KEY,
        enabled INTEGER NOT NULL DEFAULT 1,
        trusted_local INTEGER NOT NULL DEFAULT 0
     );
     CREATE TABLE trusted_keys (
        key_id TEXT PRIMARY KEY,
        label TEXT NOT NULL,
        public_key TEXT NOT NULL,
        added_at INTEGER NOT NULL
     );
     CREATE TABLE key_skill_grants (
        key_id TEXT NOT NULL,
        skill TEXT NOT NULL,
        PRIMARY KEY (key_id, skill)
     );",
    // 2: MCP tool pins and host events.
    "CREATE TABLE mcp_tool_pins (
        server TEXT NOT NULL,
        tool TEXT NOT NULL,
        hash TEXT NOT NULL,
        pinned_at INTEGER NOT NULL,
        PRIMARY KEY (server, tool)
     );
     CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        kind TEXT NOT NULL,
        server TEXT,
        tool TEXT,
        detail TEXT NOT NULL
     );
     CREATE INDEX events_kind ON events (kind, server, tool);",
    // 3: personas, skill grants, runs and approvals, refs, discovered MCP
    // tool definitions, and a generation counter that every change to what
    // a persona may see bumps (so a long-running host notices changes made
    // by another process).
    "CREATE TABLE generation (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        value INTEGER NOT NULL
     );
     INSERT INTO generation (id, value) VALUES (1, 0);
     CREATE TABLE personas (
        id TEXT PRIMARY KEY,
        description TEXT NOT NULL DEFAULT '',
        created_at INTEGER NOT NULL
     );
     CREATE TABLE skill_grants (
        persona TEXT NOT NULL REFERENCES personas (id) ON DELETE CASCADE,
        skill TEXT NOT NULL,
        PRIMARY KEY (persona, skill)
     );
     CREATE TABLE mcp_tools (
        server TEXT NOT NULL,
        name TEXT NOT NULL,
        definition TEXT NOT NULL,
        PRIMARY KEY (server, name)
     );
     CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        parent_run_id TEXT,
        persona TEXT,
        tool TEXT NOT NULL,
        server TEXT NOT NULL,
        outcome TEXT NOT NULL,
        approval TEXT,
        args TEXT,
        input_refs TEXT NOT NULL DEFAULT '[]',
        error TEXT,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        expires_at_ms INTEGER,
        duration_ms INTEGER
     );
     CREATE INDEX runs_by_tool ON runs (tool, persona, created_at_ms);
     CREATE INDEX runs_by_time ON runs (created_at_ms);
     CREATE INDEX runs_pending ON runs (approval) WHERE approval = 'pending';
     CREATE TABLE refs (
        ref_id TEXT PRIMARY KEY,
        sha256 TEXT NOT NULL,
        size INTEGER NOT NULL,
        label TEXT NOT NULL,
        created_at INTEGER NOT NULL
     );
     ALTER TABLE events ADD COLUMN run_id TEXT;
     ALTER TABLE events ADD COLUMN persona TEXT;
     ALTER TABLE events ADD COLUMN outcome TEXT;
     ALTER TABLE events ADD COLUMN duration_ms INTEGER;
     CREATE INDEX events_run ON events (run_id);
     CREATE TRIGGER gen_personas_i AFTER INSERT ON personas BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_personas_d AFTER DELETE ON personas BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_grants_i AFTER INSERT ON skill_grants BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_grants_d AFTER DELETE ON skill_grants BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_settings_i AFTER INSERT ON skill_settings BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_settings_u AFTER UPDATE ON skill_settings BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_settings_d AFTER DELETE ON skill_settings BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_installed_i AFTER INSERT ON installed_skills BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_installed_u AFTER UPDATE ON installed_skills BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_installed_d AFTER DELETE ON installed_skills BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_tools_i AFTER INSERT ON mcp_tools BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_tools_u AFTER UPDATE ON mcp_tools BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_tools_d AFTER DELETE ON mcp_tools BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_pins_i AFTER INSERT ON mcp_tool_pins BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_pins_u AFTER UPDATE ON mcp_tool_pins BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_pins_d AFTER DELETE ON mcp_tool_pins BEGIN UPDATE generation SET value = value + 1; END;",
    // 4: the process that runs an approved call, so that a run left
    // `running` by a process that died is marked interrupted.
    "ALTER TABLE runs ADD COLUMN runner_pid INTEGER;",
    // 5: bearer tokens of the HTTP front, each bound to one persona; only
    // the token's sha256 is kept.
    "CREATE TABLE api_tokens (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        digest TEXT NOT NULL UNIQUE,
        prefix TEXT NOT NULL,
        persona TEXT NOT NULL REFERENCES personas (id) ON DELETE CASCADE,
        label TEXT NOT NULL DEFAULT '',
        created_at INTEGER NOT NULL
     );
     CREATE INDEX api_tokens_persona ON api_tokens (persona);",
];

/// One installed skill version as recorded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InstalledRecord {
    /// Skill name.
    pub name: String,
    /// Version.
    pub version: semver::Version,
    /// sha256 of the signed statement (the bundle's identity).
    pub digest: String,
    /// Key id of the signer, if signed.
    pub signer: Option<String>,
    /// Whether the operator trusts it (trusted signer, or `skills trust`).
    pub trusted: bool,
    /// Unix seconds.
    pub installed_at: i64,
}

/// A trusted publisher key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TrustedKey {
    /// Key id (16 hex digits of the key's sha256).
    pub key_id: String,
    /// Operator's label.
    pub label: String,
    /// Base64 public key.
    pub public_key: String,
    /// Skills this key is explicitly trusted to publish even when another
    /// key signed earlier versions.
    pub skills: Vec<String>,
}

/// The database.
pub(crate) struct Store {
    conn: Connection,
}

/// Unix seconds (0 if the clock is before 1970): the timestamps of
/// installs, personas, grants and tokens.
pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn parse_version(s: String) -> rusqlite::Result<semver::Version> {
    semver::Version::parse(&s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(1, rusqlite::types::Type::Text, Box::new(e))
    })
}

impl Store {
    /// The connection, for the modules that keep their own tables here
    /// (personas, runs, refs).
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// The connection, mutably (for transactions).
    pub(crate) fn conn_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// The state generation: bumped by every change to personas, grants,
    /// skill enablement or trust, installs, discovered MCP tools and pins
    /// (triggers), and by [`Store::bump_generation`].
    pub fn generation(&self) -> rusqlite::Result<i64> {
        self.conn
            .prepare_cached("SELECT value FROM generation WHERE id = 1")?
            .query_row([], |r| r.get(0))
    }

    /// Bumps the generation for a change the database does not see (the
    /// MCP servers' configuration file).
    pub fn bump_generation(&self) -> rusqlite::Result<()> {
        self.conn
            .execute("UPDATE generation SET value = value + 1 WHERE id = 1", [])?;
        Ok(())
    }

    /// SQLite's `data_version`: changes when another connection commits.
    pub fn data_version(&self) -> rusqlite::Result<i64> {
        self.conn
            .prepare_cached("PRAGMA data_version")?
            .query_row([], |r| r.get(0))
    }

    /// Opens (creating and migrating) the database in `data_dir`.
    pub fn open(data_dir: &Path) -> anyhow::Result<Store> {
        let path = data_dir.join(DB_FILE);
        let conn = Connection::open(&path)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let mut store = Store { conn };
        store
            .migrate()
            .map_err(|e| anyhow::anyhow!("cannot migrate {}: {e}", path.display()))?;
        Ok(store)
    }

    fn migrate(&mut self) -> rusqlite::Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let version: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        for (i, sql) in MIGRATIONS
            .iter()
            .enumerate()
            .skip(usize::try_from(version).unwrap_or(0))
        {
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        }
        tx.commit()
    }

    /// The pinned definition hashes of `server`'s tools.
    pub fn mcp_pins(&self, server: &str) -> rusqlite::Result<Vec<(String, String)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT tool, hash FROM mcp_tool_pins WHERE server = ?1 ORDER BY tool")?;
        stmt.query_map(params![server], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect()
    }

    /// Pins `tool` of `server` at `hash` (replacing an older pin).
    pub fn mcp_pin(&self, server: &str, tool: &str, hash: &str) -> rusqlite::Result<()> {
        self.conn.execute(
            "INSERT INTO mcp_tool_pins (server, tool, hash, pinned_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (server, tool) DO UPDATE SET hash = excluded.hash, pinned_at = excluded.pinned_at",
            params![server, tool, hash, now()],
        )?;
        Ok(())
    }

    /// Replaces every pin of `server` with `pins` in one transaction (the
    /// operator's approval of its current tool definitions).
    pub fn mcp_replace_pins(
        &mut self,
        server: &str,
        pins: &[(String, String)],
    ) -> rusqlite::Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute(
            "DELETE FROM mcp_tool_pins WHERE server = ?1",
            params![server],
        )?;
        for (tool, hash) in pins {
            tx.execute(
                "INSERT INTO mcp_tool_pins (server, tool, hash, pinned_at) VALUES (?1, ?2, ?3, ?4)",
                params![server, tool, hash, now()],
            )?;
        }
        tx.commit()
    }

    /// Records an event.
    pub fn record_event(
        &self,
        kind: &str,
        server: Option<&str>,
        tool: Option<&str>,
        detail: &serde_json::Value,
    ) -> rusqlite::Result<()> {
        self.conn.execute(
            "INSERT INTO events (at, kind, server, tool, detail) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![now(), kind, server, tool, detail.to_string()],
        )?;
        Ok(())
    }

    /// Whether an event with exactly these fields was recorded (uses the
    /// `events_kind` index).
    pub fn has_event(
        &self,
        kind: &str,
        server: Option<&str>,
        tool: Option<&str>,
        detail: &serde_json::Value,
    ) -> rusqlite::Result<bool> {
        self.conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM events
             WHERE kind = ?1 AND server IS ?2 AND tool IS ?3 AND detail = ?4)",
            params![kind, server, tool, detail.to_string()],
            |r| r.get(0),
        )
    }

    /// Every installed version, sorted by name then version.
    pub fn installed(&self) -> rusqlite::Result<Vec<InstalledRecord>> {
        let mut stmt = self.conn.prepare(
            "SELECT name, version, digest, signer, trusted, installed_at FROM installed_skills",
        )?;
        let mut rows: Vec<InstalledRecord> = stmt
            .query_map([], |r| {
                Ok(InstalledRecord {
                    name: r.get(0)?,
                    version: parse_version(r.get(1)?)?,
                    digest: r.get(2)?,
                    signer: r.get(3)?,
                    trusted: r.get(4)?,
                    installed_at: r.get(5)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        rows.sort_by(|a, b| a.name.cmp(&b.name).then(a.version.cmp(&b.version)));
        Ok(rows)
    }

    /// Records an install.
    pub fn add_installed(&mut self, r: &InstalledRecord) -> rusqlite::Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute(
            "INSERT INTO installed_skills (name, version, digest, signer, trusted, installed_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![r.name, r.version.to_string(), r.digest, r.signer, r.trusted, now()],
        )?;
        tx.execute(
            "INSERT OR IGNORE INTO skill_settings (name, enabled) VALUES (?1, 1)",
            params![r.name],
        )?;
        tx.commit()
    }

    /// Removes one installed version (or all of a name when `version` is
    /// `None`); returns the removed versions.
    pub fn remove_installed(
        &mut self,
        name: &str,
        version: Option<&semver::Version>,
    ) -> rusqlite::Result<Vec<semver::Version>> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut removed = Vec::new();
        {
            let mut stmt = tx.prepare("SELECT version FROM installed_skills WHERE name = ?1")?;
            let versions: Vec<String> = stmt
                .query_map(params![name], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            for v in versions {
                let parsed = parse_version(v.clone())?;
                if version.is_none_or(|want| *want == parsed) {
                    tx.execute(
                        "DELETE FROM installed_skills WHERE name = ?1 AND version = ?2",
                        params![name, v],
                    )?;
                    removed.push(parsed);
                }
            }
        }
        tx.commit()?;
        Ok(removed)
    }

    /// Marks every installed version of `name` trusted, and a local
    /// development folder of that name too; returns the installed versions
    /// changed.
    pub fn set_trusted(&mut self, name: &str) -> rusqlite::Result<usize> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let n = tx.execute(
            "UPDATE installed_skills SET trusted = 1 WHERE name = ?1",
            params![name],
        )?;
        tx.execute(
            "INSERT INTO skill_settings (name, trusted_local) VALUES (?1, 1)
             ON CONFLICT(name) DO UPDATE SET trusted_local = 1",
            params![name],
        )?;
        tx.commit()?;
        Ok(n)
    }

    /// Whether the operator trusted a local development skill of this name.
    pub fn trusted_local(&self, name: &str) -> rusqlite::Result<bool> {
        Ok(self
            .conn
            .query_row(
                "SELECT trusted_local FROM skill_settings WHERE name = ?1",
                params![name],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(false))
    }

    /// Whether a skill name is enabled (default: enabled).
    pub fn enabled(&self, name: &str) -> rusqlite::Result<bool> {
        Ok(self
            .conn
            .query_row(
                "SELECT enabled FROM skill_settings WHERE name = ?1",
                params![name],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(true))
    }

    /// Enables or disables a skill name.
    pub fn set_enabled(&mut self, name: &str, enabled: bool) -> rusqlite::Result<()> {
        self.conn.execute(
            "INSERT INTO skill_settings (name, enabled) VALUES (?1, ?2)
             ON CONFLICT(name) DO UPDATE SET enabled = excluded.enabled",
            params![name, enabled],
        )?;
        Ok(())
    }

    /// Every trusted key.
    pub fn trusted_keys(&self) -> rusqlite::Result<Vec<TrustedKey>> {
        let mut stmt = self
            .conn
            .prepare("SELECT key_id, label, public_key FROM trusted_keys ORDER BY label, key_id")?;
        let keys: Vec<(String, String, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let mut out = Vec::new();
        for (key_id, label, public_key) in keys {
            let mut s = self
                .conn
                .prepare("SELECT skill FROM key_skill_grants WHERE key_id = ?1 ORDER BY skill")?;
            let skills = s
                .query_map(params![key_id], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            out.push(TrustedKey {
                key_id,
                label,
                public_key,
                skills,
            });
        }
        Ok(out)
    }

    /// Adds (or relabels) a trusted key, optionally trusted for given skills.
    pub fn add_trusted_key(
        &mut self,
        key_id: &str,
        label: &str,
        public_key: &str,
        skills: &[String],
    ) -> rusqlite::Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute(
            "INSERT INTO trusted_keys (key_id, label, public_key, added_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(key_id) DO UPDATE SET label = excluded.label",
            params![key_id, label, public_key, now()],
        )?;
        for s in skills {
            tx.execute(
                "INSERT OR IGNORE INTO key_skill_grants (key_id, skill) VALUES (?1, ?2)",
                params![key_id, s],
            )?;
        }
        tx.commit()
    }

    /// Removes a trusted key by id or label; returns how many were removed.
    pub fn remove_trusted_key(&mut self, id_or_label: &str) -> rusqlite::Result<usize> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute(
            "DELETE FROM key_skill_grants WHERE key_id IN (SELECT key_id FROM trusted_keys WHERE key_id = ?1 OR label = ?1)",
            params![id_or_label],
        )?;
        let n = tx.execute(
            "DELETE FROM trusted_keys WHERE key_id = ?1 OR label = ?1",
            params![id_or_label],
        )?;
        tx.commit()?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_records_round_trip_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = Store::open(dir.path()).unwrap();
            let r = InstalledRecord {
                name: "a".into(),
                version: semver::Version::new(1, 2, 3),
                digest: "d".into(),
                signer: Some("k".into()),
                trusted: false,
                installed_at: 0,
            };
            s.add_installed(&r).unwrap();
            assert!(s.add_installed(&r).is_err(), "same version twice");
            s.set_enabled("a", false).unwrap();
            s.add_trusted_key("k", "pub", "AAAA", &["a".into()])
                .unwrap();
        }
        let mut s = Store::open(dir.path()).unwrap();
        let all = s.installed().unwrap();
        assert_eq!(all.len(), 1);
        assert!(!s.enabled("a").unwrap());
        assert!(s.enabled("other").unwrap());
        assert_eq!(s.trusted_keys().unwrap()[0].skills, vec!["a".to_string()]);
        assert_eq!(s.set_trusted("a").unwrap(), 1);
        assert!(s.installed().unwrap()[0].trusted);
        assert_eq!(s.remove_installed("a", None).unwrap().len(), 1);
        assert_eq!(s.remove_trusted_key("pub").unwrap(), 1);
    }
}
