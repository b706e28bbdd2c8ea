//! The schema of the host's database and how it moves forward: SQLite's
//! migrations since the first version, PostgreSQL's since the version it
//! was first supported at (14: the whole schema at once). Both lists end at
//! the same version, [`SCHEMA_VERSION`]; a migration added later is added
//! to both. A database whose version is newer than this binary's is
//! refused, never written.

use super::db::{Db, DbError, params};

/// SQLite's migrations, applied in order; the index + 1 is the version
/// (kept in `PRAGMA user_version`).
const SQLITE: &[&str] = &[
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
    // 15: what replicas sharing a database need (PostgreSQL; on SQLite the
    // columns stay empty): the bundle an install came from, content
    // addressed in `blobs` (so another replica unpacks the same bytes),
    // and the replica running an approved call with the time its lease on
    // the run ends (a replica that died mid-call is found out by its lease).
    "ALTER TABLE installed_skills ADD COLUMN bundle_sha256 TEXT;
     CREATE TABLE blobs (
        sha256 TEXT PRIMARY KEY,
        size INTEGER NOT NULL,
        bytes BLOB NOT NULL
     );
     ALTER TABLE runs ADD COLUMN runner TEXT;
     ALTER TABLE runs ADD COLUMN lease_until_ms INTEGER;
     CREATE INDEX runs_leased ON runs (lease_until_ms) WHERE outcome = 'running';",
    // 16: what replicas share beyond tables (PostgreSQL; on SQLite they
    // stay empty, the data dir's files serving instead): documents sealed
    // under the data dir's key (the MCP servers' configuration), each
    // with a revision so that two writers never lose each other's change;
    // and the fingerprint of the key every replica must seal under.
    "CREATE TABLE sealed_documents (
        name TEXT PRIMARY KEY,
        revision INTEGER NOT NULL,
        nonce BLOB NOT NULL,
        sealed BLOB NOT NULL,
        updated_at INTEGER NOT NULL
     );
     CREATE TABLE sealing_key (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        fingerprint TEXT NOT NULL,
        recorded_at INTEGER NOT NULL
     );
     CREATE TRIGGER gen_documents_i AFTER INSERT ON sealed_documents BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_documents_u AFTER UPDATE ON sealed_documents BEGIN UPDATE generation SET value = value + 1; END;
     CREATE TRIGGER gen_documents_d AFTER DELETE ON sealed_documents BEGIN UPDATE generation SET value = value + 1; END;",
    // 17: who made a ref a skill's script wrote (the persona, or none for
    // the operator, and the run), so the front serves it to that persona.
    "ALTER TABLE refs ADD COLUMN made_by TEXT;
     ALTER TABLE refs ADD COLUMN made_by_run TEXT;",
];

/// PostgreSQL's migrations: (version, statements), in order. The schema
/// at each version is SQLite's at that version, with PostgreSQL's types
/// (`BIGINT` for every integer, `BYTEA` for bytes, identity columns) and
/// its triggers (one function per counter; each change also notifies
/// `skillhost_changes`, which serving replicas listen to).
const POSTGRES: &[(i64, &str)] = &[
    (
        14,
        "CREATE TABLE installed_skills (
        name TEXT NOT NULL,
        version TEXT NOT NULL,
        digest TEXT NOT NULL,
        signer TEXT,
        trusted BIGINT NOT NULL,
        installed_at BIGINT NOT NULL,
        PRIMARY KEY (name, version)
     );
     CREATE TABLE skill_settings (
        name TEXT PRIMARY KEY,
        enabled BIGINT NOT NULL DEFAULT 1,
        trusted_local BIGINT NOT NULL DEFAULT 0
     );
     CREATE TABLE trusted_keys (
        key_id TEXT PRIMARY KEY,
        label TEXT NOT NULL,
        public_key TEXT NOT NULL,
        added_at BIGINT NOT NULL
     );
     CREATE TABLE key_skill_grants (
        key_id TEXT NOT NULL,
        skill TEXT NOT NULL,
        PRIMARY KEY (key_id, skill)
     );
     CREATE TABLE mcp_tool_pins (
        server TEXT NOT NULL,
        tool TEXT NOT NULL,
        hash TEXT NOT NULL,
        pinned_at BIGINT NOT NULL,
        PRIMARY KEY (server, tool)
     );
     CREATE TABLE events (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        at BIGINT NOT NULL,
        kind TEXT NOT NULL,
        server TEXT,
        tool TEXT,
        detail TEXT NOT NULL,
        run_id TEXT,
        persona TEXT,
        outcome TEXT,
        duration_ms BIGINT
     );
     CREATE INDEX events_kind ON events (kind, server, tool) WHERE kind <> 'call';
     CREATE INDEX events_run ON events (run_id) WHERE kind <> 'call' AND run_id IS NOT NULL;
     CREATE TABLE generation (
        id BIGINT PRIMARY KEY CHECK (id = 1),
        value BIGINT NOT NULL
     );
     INSERT INTO generation (id, value) VALUES (1, 0);
     CREATE TABLE personas (
        id TEXT PRIMARY KEY,
        description TEXT NOT NULL DEFAULT '',
        created_at BIGINT NOT NULL,
        client_approval BIGINT NOT NULL DEFAULT 0
     );
     CREATE TABLE skill_grants (
        persona TEXT NOT NULL REFERENCES personas (id) ON DELETE CASCADE,
        skill TEXT NOT NULL,
        identity TEXT,
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
        created_at_ms BIGINT NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        expires_at_ms BIGINT,
        duration_ms BIGINT,
        runner_pid BIGINT,
        decided_by TEXT,
        resume_digest TEXT
     );
     CREATE INDEX runs_by_tool ON runs (tool, created_at_ms);
     CREATE INDEX runs_by_time ON runs (created_at_ms);
     CREATE INDEX runs_pending ON runs (approval) WHERE approval = 'pending';
     CREATE INDEX runs_by_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
     CREATE TABLE refs (
        ref_id TEXT PRIMARY KEY,
        sha256 TEXT NOT NULL,
        size BIGINT NOT NULL,
        label TEXT NOT NULL,
        created_at BIGINT NOT NULL
     );
     CREATE TABLE api_tokens (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        digest TEXT NOT NULL UNIQUE,
        prefix TEXT NOT NULL,
        persona TEXT NOT NULL REFERENCES personas (id) ON DELETE CASCADE,
        label TEXT NOT NULL DEFAULT '',
        created_at BIGINT NOT NULL
     );
     CREATE INDEX api_tokens_persona ON api_tokens (persona);
     CREATE TABLE permission_approvals (
        skill TEXT NOT NULL,
        identity TEXT NOT NULL,
        permissions TEXT NOT NULL,
        digest TEXT NOT NULL,
        approved_by TEXT NOT NULL,
        approved_at BIGINT NOT NULL,
        PRIMARY KEY (skill, identity)
     );
     CREATE TABLE skill_secrets (
        skill TEXT NOT NULL,
        name TEXT NOT NULL,
        identity TEXT NOT NULL,
        nonce BYTEA NOT NULL,
        sealed BYTEA NOT NULL,
        set_at BIGINT NOT NULL,
        PRIMARY KEY (skill, name)
     );
     CREATE TABLE questions (
        id TEXT PRIMARY KEY,
        server TEXT NOT NULL,
        tool TEXT NOT NULL,
        persona TEXT,
        message TEXT NOT NULL,
        schema TEXT NOT NULL,
        asked_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        state TEXT NOT NULL,
        answer TEXT,
        decided_by TEXT
     );
     CREATE INDEX questions_state ON questions (state, asked_at);
     CREATE TABLE host_keys (
        name TEXT PRIMARY KEY,
        key BYTEA NOT NULL,
        created_at BIGINT NOT NULL
     );
     CREATE TABLE token_generation (
        id BIGINT PRIMARY KEY CHECK (id = 1),
        value BIGINT NOT NULL
     );
     INSERT INTO token_generation (id, value) VALUES (1, 0);
     CREATE FUNCTION skillhost_state_changed() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
        UPDATE generation SET value = value + 1;
        PERFORM pg_notify('skillhost_changes', 'state');
        RETURN NULL;
     END $$;
     CREATE FUNCTION skillhost_tokens_changed() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
        UPDATE token_generation SET value = value + 1;
        PERFORM pg_notify('skillhost_changes', 'tokens');
        RETURN NULL;
     END $$;
     CREATE TRIGGER gen_personas AFTER INSERT OR DELETE ON personas
        FOR EACH ROW EXECUTE FUNCTION skillhost_state_changed();
     CREATE TRIGGER gen_grants AFTER INSERT OR UPDATE OR DELETE ON skill_grants
        FOR EACH ROW EXECUTE FUNCTION skillhost_state_changed();
     CREATE TRIGGER gen_settings AFTER INSERT OR UPDATE OR DELETE ON skill_settings
        FOR EACH ROW EXECUTE FUNCTION skillhost_state_changed();
     CREATE TRIGGER gen_installed AFTER INSERT OR UPDATE OR DELETE ON installed_skills
        FOR EACH ROW EXECUTE FUNCTION skillhost_state_changed();
     CREATE TRIGGER gen_tools AFTER INSERT OR UPDATE OR DELETE ON mcp_tools
        FOR EACH ROW EXECUTE FUNCTION skillhost_state_changed();
     CREATE TRIGGER gen_pins AFTER INSERT OR UPDATE OR DELETE ON mcp_tool_pins
        FOR EACH ROW EXECUTE FUNCTION skillhost_state_changed();
     CREATE TRIGGER gen_approvals AFTER INSERT OR UPDATE OR DELETE ON permission_approvals
        FOR EACH ROW EXECUTE FUNCTION skillhost_state_changed();
     CREATE TRIGGER gen_secrets AFTER INSERT OR UPDATE OR DELETE ON skill_secrets
        FOR EACH ROW EXECUTE FUNCTION skillhost_state_changed();
     CREATE TRIGGER gen_tokens AFTER INSERT OR UPDATE OR DELETE ON api_tokens
        FOR EACH ROW EXECUTE FUNCTION skillhost_tokens_changed();",
    ),
    (
        15,
        "ALTER TABLE installed_skills ADD COLUMN bundle_sha256 TEXT;
         CREATE TABLE blobs (
            sha256 TEXT PRIMARY KEY,
            size BIGINT NOT NULL,
            bytes BYTEA NOT NULL
         );
         ALTER TABLE runs ADD COLUMN runner TEXT;
         ALTER TABLE runs ADD COLUMN lease_until_ms BIGINT;
         CREATE INDEX runs_leased ON runs (lease_until_ms) WHERE outcome = 'running';",
    ),
    (
        16,
        "CREATE TABLE sealed_documents (
            name TEXT PRIMARY KEY,
            revision BIGINT NOT NULL,
            nonce BYTEA NOT NULL,
            sealed BYTEA NOT NULL,
            updated_at BIGINT NOT NULL
         );
         CREATE TABLE sealing_key (
            id BIGINT PRIMARY KEY CHECK (id = 1),
            fingerprint TEXT NOT NULL,
            recorded_at BIGINT NOT NULL
         );
         CREATE TRIGGER gen_documents AFTER INSERT OR UPDATE OR DELETE ON sealed_documents
            FOR EACH ROW EXECUTE FUNCTION skillhost_state_changed();",
    ),
    (
        17,
        "ALTER TABLE refs ADD COLUMN made_by TEXT;
         ALTER TABLE refs ADD COLUMN made_by_run TEXT;",
    ),
];

/// The schema version this binary writes.
pub(crate) const SCHEMA_VERSION: i64 = SQLITE.len() as i64;

/// Key of the advisory lock that serialises replicas migrating one
/// PostgreSQL database at once.
const MIGRATION_LOCK: i64 = 0x736b_696c_6c68_6f73;

/// Refuses a database newer than this binary.
fn check_not_newer(version: i64) -> Result<(), DbError> {
    if version > SCHEMA_VERSION {
        return Err(DbError::Value(format!(
            "the database has schema version {version}, newer than this skillhost's \
             ({SCHEMA_VERSION}): run a newer skillhost against it, or point this one at \
             another database"
        )));
    }
    Ok(())
}

/// Brings the database to [`SCHEMA_VERSION`], in one transaction; refuses
/// one that is newer.
pub(crate) fn migrate(db: &Db) -> Result<(), DbError> {
    match db {
        Db::Sqlite(_) => db.transaction(|tx| {
            let version: i64 = tx.query_row("PRAGMA user_version", params![], |r| r.get(0))?;
            check_not_newer(version)?;
            for (i, sql) in SQLITE
                .iter()
                .enumerate()
                .skip(usize::try_from(version).unwrap_or(0))
            {
                tx.execute_batch(sql)?;
                tx.execute_batch(&format!("PRAGMA user_version = {}", i + 1))?;
            }
            Ok(())
        }),
        Db::Postgres(_) => {
            // A session lock, taken before the transaction: a replica that
            // waited for another's migration then reads what it committed.
            db.execute("SELECT pg_advisory_lock(?1)", params![MIGRATION_LOCK])?;
            let out = db.transaction(|tx| {
                tx.execute_batch(
                    "CREATE TABLE IF NOT EXISTS schema_version (
                        id BIGINT PRIMARY KEY CHECK (id = 1),
                        version BIGINT NOT NULL
                     )",
                )?;
                let version: i64 = tx
                    .query_opt(
                        "SELECT version FROM schema_version WHERE id = 1",
                        params![],
                        |r| r.get(0),
                    )?
                    .unwrap_or(0);
                check_not_newer(version)?;
                for (v, sql) in POSTGRES.iter().filter(|(v, _)| *v > version) {
                    tx.execute_batch(sql)?;
                    tx.execute(
                        "INSERT INTO schema_version (id, version) VALUES (1, ?1)
                         ON CONFLICT (id) DO UPDATE SET version = excluded.version",
                        params![*v],
                    )?;
                }
                Ok(())
            });
            let unlocked = db.execute("SELECT pg_advisory_unlock(?1)", params![MIGRATION_LOCK]);
            out.and(unlocked.map(|_| ()))
        }
    }
}

/// The version the database is at.
#[cfg(test)]
pub(crate) fn version(db: &Db) -> Result<i64, DbError> {
    match db {
        Db::Sqlite(_) => db.query_row("PRAGMA user_version", params![], |r| r.get(0)),
        Db::Postgres(_) => db.query_row(
            "SELECT version FROM schema_version WHERE id = 1",
            params![],
            |r| r.get(0),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_backends_end_at_the_same_version() {
        assert_eq!(POSTGRES.last().map(|(v, _)| *v), Some(SCHEMA_VERSION));
        assert!(POSTGRES.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn a_newer_database_is_refused_and_left_as_it_was() {
        let db = Db::Sqlite(rusqlite::Connection::open_in_memory().unwrap());
        migrate(&db).unwrap();
        assert_eq!(version(&db).unwrap(), SCHEMA_VERSION);
        db.execute_batch(&format!("PRAGMA user_version = {}", SCHEMA_VERSION + 1))
            .unwrap();
        let e = migrate(&db).unwrap_err().to_string();
        assert!(e.contains("newer than this skillhost"), "{e}");
        assert_eq!(version(&db).unwrap(), SCHEMA_VERSION + 1);
    }
}
