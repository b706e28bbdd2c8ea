//! Durable host state in an embedded SQLite database (`skillhost.db` in the
//! data dir): installed skills, their trust and enablement, trusted
//! publisher keys. WAL mode, versioned migrations, one transaction per
//! change so a kill -9 leaves the last committed state.

pub(crate) mod data_dir;
pub(crate) mod host_keys;
pub(crate) mod permissions;
pub(crate) mod personas;
pub(crate) mod questions;
pub(crate) mod refs;
pub(crate) mod runs;
pub(crate) mod secrets;
pub(crate) mod skills;
pub(crate) mod tokens;
pub(crate) mod upstream;
pub(crate) mod writer;

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

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
    // 6: whether a persona's MCP client may answer its confirmations (off
    // by default), who decided each approval, and the sha256 of the one
    // resume state a waiting run handed to its client.
    "ALTER TABLE personas ADD COLUMN client_approval INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE runs ADD COLUMN decided_by TEXT;
     ALTER TABLE runs ADD COLUMN resume_digest TEXT;",
    // 7: the identity of the skill a grant was given to (`builtin`,
    // `local`, `signer:KEY`, `unsigned:DIGEST`): a grant applies to that
    // skill only, and is suspended while another skill holds the name. A
    // grant from before (NULL) is bound to the skill present when it is
    // first read.
    "ALTER TABLE skill_grants ADD COLUMN identity TEXT;
     CREATE TRIGGER gen_grants_u AFTER UPDATE ON skill_grants BEGIN UPDATE generation SET value = value + 1; END;",
    // 8: the permissions (network origins, secrets, assets) an operator
    // approved for a skill, by the skill's identity (the set as canonical
    // JSON and its sha256); and skill secrets, sealed under the key file
    // `secrets.key` (never stored in the clear), bound to the identity of
    // the skill they were set for. Both change what is ready.
    "CREATE TABLE permission_approvals (
        skill TEXT NOT NULL,
        identity TEXT NOT NULL,
        permissions TEXT NOT NULL,
        digest TEXT NOT NULL,
        approved_by TEXT NOT NULL,
        approved_at INTEGER NOT NULL,
        PRIMARY KEY (skill, identity)
     );
     CREATE TABLE skill_secrets (
        skill TEXT NOT NULL,
        name TEXT NOT NULL,
        identity TEXT NOT NULL,
        nonce BLOB NOT NULL,
        sealed BLOB NOT NULL,
        set_at INTEGER NOT NULL,
        PRIMARY KEY (skill, name)
     );
     CREATE TRIGGER gen_approvals_i AFTER INSERT ON permission_approvals BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_approvals_u AFTER UPDATE ON permission_approvals BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_approvals_d AFTER DELETE ON permission_approvals BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_secrets_i AFTER INSERT ON skill_secrets BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_secrets_u AFTER UPDATE ON skill_secrets BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_secrets_d AFTER DELETE ON skill_secrets BEGIN UPDATE generation SET value = value + 1; END;",
    // 9: questions an upstream MCP server asked during a call that no
    // client could be asked, waiting for the operator (the call waits on
    // the row, whichever process answers).
    "CREATE TABLE questions (
        id TEXT PRIMARY KEY,
        server TEXT NOT NULL,
        tool TEXT NOT NULL,
        persona TEXT,
        message TEXT NOT NULL,
        schema TEXT NOT NULL,
        asked_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        state TEXT NOT NULL,
        answer TEXT,
        decided_by TEXT
     );
     CREATE INDEX questions_state ON questions (state, asked_at);",
    // 10: keys the host signs with (the requestState of calls that wait
    // for their caller's answers), made once, shared by every process on
    // the data dir.
    "CREATE TABLE host_keys (
        name TEXT PRIMARY KEY,
        key BLOB NOT NULL,
        created_at INTEGER NOT NULL
     );",
    // 11: fewer bytes and index updates per recorded call: no query reads
    // events by run id (a run's own row holds its outcome), and the index
    // that `has_event` searches leaves out the `call` events, one per call,
    // that it is never asked about.
    "DROP INDEX events_run;
     DROP INDEX events_kind;
     CREATE INDEX events_kind ON events (kind, server, tool) WHERE kind <> 'call';",
    // 12: a counter every change to the persona tokens bumps (any process),
    // so a serving host keeps the tokens in memory and asks the database
    // only whether they changed.
    "CREATE TABLE token_generation (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        value INTEGER NOT NULL
     );
     INSERT INTO token_generation (id, value) VALUES (1, 0);
     CREATE TRIGGER gen_tokens_i AFTER INSERT ON api_tokens BEGIN UPDATE token_generation SET value = value + 1; END;
     CREATE TRIGGER gen_tokens_u AFTER UPDATE ON api_tokens BEGIN UPDATE token_generation SET value = value + 1; END;
     CREATE TRIGGER gen_tokens_d AFTER DELETE ON api_tokens BEGIN UPDATE token_generation SET value = value + 1; END;",
    // 13: a run's detail reads its events and the runs it invoked. Both
    // indexes leave out what every call writes (its `call` event, a null
    // parent), so the call path pays nothing for them.
    "CREATE INDEX events_run ON events (run_id) WHERE kind <> 'call' AND run_id IS NOT NULL;
     CREATE INDEX runs_by_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;",
    // 14: fewer bytes per call. A call that ends ok on its own no longer
    // writes a `call` event beside its run (`RunRow::says_all_of`), and the
    // index of runs by tool leaves out the persona (a listing filtered by
    // both reads the tool's runs newest first and skips the others).
    "DROP INDEX runs_by_tool;
     CREATE INDEX runs_by_tool ON runs (tool, created_at_ms);",
];

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
        // Created private (0600) before SQLite opens it: SQLite gives its
        // `-wal` and `-shm` files the database file's mode.
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(data_dir::PRIVATE_FILE_MODE)
                .open(&path)
            {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => anyhow::bail!("cannot create {}: {e}", path.display()),
            }
        }
        let conn = Connection::open(&path)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        conn.busy_timeout(Duration::from_secs(10))?;
        // A new database frees the pages of deleted runs back to the file
        // system on `gc` (`PRAGMA incremental_vacuum`); only settable
        // before the first table.
        let fresh: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if fresh == 0 {
            conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
        }
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
}
