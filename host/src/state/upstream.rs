//! The upstream MCP servers' tables: the tool definitions the operator
//! approved (`mcp_tool_pins`) and the tools last discovered on each server
//! (`mcp_tools`, what the registry registers).

use crate::state::db::{self, params};

use crate::state::{Store, now};

impl Store {
    /// The pinned definition hashes of `server`'s tools.
    pub fn mcp_pins(&self, server: &str) -> db::Result<Vec<(String, String)>> {
        self.db().query_map(
            "SELECT tool, hash FROM mcp_tool_pins WHERE server = ?1 ORDER BY tool",
            params![server],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    /// Pins `tool` of `server` at `hash` (replacing an older pin).
    pub fn mcp_pin(&self, server: &str, tool: &str, hash: &str) -> db::Result<()> {
        self.db().execute(
            "INSERT INTO mcp_tool_pins (server, tool, hash, pinned_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (server, tool) DO UPDATE SET hash = excluded.hash, pinned_at = excluded.pinned_at",
            params![server, tool, hash, now()],
        )?;
        Ok(())
    }

    /// Replaces every pin of `server` with `pins` in one transaction (the
    /// operator's approval of its current tool definitions).
    pub fn mcp_replace_pins(&mut self, server: &str, pins: &[(String, String)]) -> db::Result<()> {
        self.db().transaction(|tx| {
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
            Ok(())
        })
    }

    /// The discovered tool definitions of every server, as stored JSON.
    pub fn mcp_tool_definitions(&self) -> db::Result<Vec<(String, String)>> {
        self.db().query_map(
            "SELECT server, definition FROM mcp_tools ORDER BY server, name",
            params![],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    /// Replaces the stored tool definitions of `server` (name → JSON) in
    /// one transaction; rows that did not change are left alone so the
    /// generation moves only on a real change.
    pub fn replace_mcp_tools(
        &mut self,
        server: &str,
        tools: &[(String, String)],
    ) -> db::Result<()> {
        self.db().transaction(|tx| {
            let stored: Vec<(String, String)> = tx.query_map(
                "SELECT name, definition FROM mcp_tools WHERE server = ?1",
                params![server],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            for (name, _) in &stored {
                if !tools.iter().any(|(n, _)| n == name) {
                    tx.execute(
                        "DELETE FROM mcp_tools WHERE server = ?1 AND name = ?2",
                        params![server, name],
                    )?;
                }
            }
            for (name, def) in tools {
                if stored.iter().any(|(n, d)| n == name && d == def) {
                    continue;
                }
                tx.execute(
                    "INSERT INTO mcp_tools (server, name, definition) VALUES (?1, ?2, ?3)
                     ON CONFLICT (server, name) DO UPDATE SET definition = excluded.definition",
                    params![server, name, def],
                )?;
            }
            Ok(())
        })
    }

    /// Forgets the stored tools of a removed server.
    pub fn forget_mcp_server(&self, server: &str) -> db::Result<()> {
        self.db()
            .execute("DELETE FROM mcp_tools WHERE server = ?1", params![server])?;
        self.db().execute(
            "DELETE FROM mcp_tool_pins WHERE server = ?1",
            params![server],
        )?;
        Ok(())
    }
}
