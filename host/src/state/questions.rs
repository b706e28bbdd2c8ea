//! The `questions` table: questions upstream MCP servers asked during calls
//! that no client could be asked, and the operator's answers.
//!
//! A question moves from `open` to `accepted`, `declined` or `expired`
//! exactly once (a compare-and-set on `state`), so two operators answering
//! at once cannot both win, and an answer never lands on a call that gave
//! up.

use crate::state::db::{self, params};

use super::Store;

/// Where a question stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionState {
    /// Waiting for the operator.
    Open,
    /// Answered with a filled-in form.
    Accepted,
    /// Refused by the operator.
    Declined,
    /// Its call ended, or its time ran out, before an answer.
    Expired,
}

impl QuestionState {
    fn as_str(self) -> &'static str {
        match self {
            QuestionState::Open => "open",
            QuestionState::Accepted => "accepted",
            QuestionState::Declined => "declined",
            QuestionState::Expired => "expired",
        }
    }

    fn parse(s: &str) -> QuestionState {
        match s {
            "open" => QuestionState::Open,
            "accepted" => QuestionState::Accepted,
            "declined" => QuestionState::Declined,
            _ => QuestionState::Expired,
        }
    }
}

/// One stored question.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QuestionRow {
    /// `q_` and 16 hex digits.
    pub id: String,
    /// The server that asks.
    pub server: String,
    /// The tool whose call it interrupts (`server.tool`).
    pub tool: String,
    /// The persona whose call it is (none for the operator's).
    pub persona: Option<String>,
    /// What the server asks.
    pub message: String,
    /// The form, a JSON object schema.
    pub schema: serde_json::Value,
    /// When it was asked (Unix ms).
    pub asked_at: i64,
    /// When it stops waiting (Unix ms).
    pub expires_at: i64,
    /// Where it stands.
    pub state: QuestionState,
    /// Who decided (`operator:cli`, …), once decided.
    pub decided_by: Option<String>,
}

fn row(r: &db::Row<'_>) -> db::Result<QuestionRow> {
    let schema: String = r.get(5)?;
    let state: String = r.get(8)?;
    Ok(QuestionRow {
        id: r.get(0)?,
        server: r.get(1)?,
        tool: r.get(2)?,
        persona: r.get(3)?,
        message: r.get(4)?,
        schema: serde_json::from_str(&schema).unwrap_or(serde_json::Value::Null),
        asked_at: r.get(6)?,
        expires_at: r.get(7)?,
        state: QuestionState::parse(&state),
        decided_by: r.get(9)?,
    })
}

const COLUMNS: &str =
    "id, server, tool, persona, message, schema, asked_at, expires_at, state, decided_by";

impl Store {
    /// Records an open question.
    pub(crate) fn insert_question(&self, q: &QuestionRow) -> db::Result<()> {
        self.db().execute(
            "INSERT INTO questions (id, server, tool, persona, message, schema, asked_at, expires_at, state)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'open')",
            params![
                q.id,
                q.server,
                q.tool,
                q.persona,
                q.message,
                q.schema.to_string(),
                q.asked_at,
                q.expires_at
            ],
        )?;
        Ok(())
    }

    /// The open questions that have not expired at `now_ms`, oldest first.
    pub(crate) fn open_questions(&self, now_ms: i64) -> db::Result<Vec<QuestionRow>> {
        self.db().query_map(
            &format!(
                "SELECT {COLUMNS} FROM questions WHERE state = 'open' AND expires_at > ?1 ORDER BY asked_at"
            ),
            params![now_ms],
            row,
        )
    }

    /// One question.
    pub(crate) fn question(&self, id: &str) -> db::Result<Option<QuestionRow>> {
        self.db().query_opt(
            &format!("SELECT {COLUMNS} FROM questions WHERE id = ?1"),
            params![id],
            row,
        )
    }

    /// Moves an open, unexpired question to `state` with `answer`; `false`
    /// when it was not open any more (answered, expired, or gone).
    pub(crate) fn decide_question(
        &self,
        id: &str,
        state: QuestionState,
        answer: Option<&serde_json::Value>,
        decided_by: &str,
        now_ms: i64,
    ) -> db::Result<bool> {
        let n = self.db().execute(
            "UPDATE questions SET state = ?2, answer = ?3, decided_by = ?4
             WHERE id = ?1 AND state = 'open' AND expires_at > ?5",
            params![
                id,
                state.as_str(),
                answer.map(|a| a.to_string()),
                decided_by,
                now_ms
            ],
        )?;
        Ok(n == 1)
    }

    /// A question's state and answer (what the waiting call polls).
    pub(crate) fn question_answer(
        &self,
        id: &str,
    ) -> db::Result<Option<(QuestionState, Option<serde_json::Value>)>> {
        self.db().query_opt(
            "SELECT state, answer FROM questions WHERE id = ?1",
            params![id],
            |r| {
                let state: String = r.get(0)?;
                let answer: Option<String> = r.get(1)?;
                Ok((
                    QuestionState::parse(&state),
                    answer.and_then(|a| serde_json::from_str(&a).ok()),
                ))
            },
        )
    }

    /// Marks a question expired if it is still open (its call gave up).
    pub(crate) fn expire_question(&self, id: &str) -> db::Result<()> {
        self.db().execute(
            "UPDATE questions SET state = 'expired' WHERE id = ?1 AND state = 'open'",
            params![id],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(id: &str, expires_at: i64) -> QuestionRow {
        QuestionRow {
            id: id.into(),
            server: "everything".into(),
            tool: "everything.ask".into(),
            persona: Some("support".into()),
            message: "name?".into(),
            schema: serde_json::json!({"type": "object"}),
            asked_at: 1,
            expires_at,
            state: QuestionState::Open,
            decided_by: None,
        }
    }

    #[test]
    fn a_question_is_decided_once_and_never_after_it_expired() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open_sqlite(dir.path()).expect("store");
        store.insert_question(&q("q_a", 1000)).expect("insert");
        store.insert_question(&q("q_b", 50)).expect("insert");
        let open = store.open_questions(100).expect("open");
        assert_eq!(
            open.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["q_a"]
        );
        let answer = serde_json::json!({"name": "Ana"});
        assert!(
            store
                .decide_question(
                    "q_a",
                    QuestionState::Accepted,
                    Some(&answer),
                    "operator:cli",
                    100
                )
                .expect("decide")
        );
        assert!(
            !store
                .decide_question("q_a", QuestionState::Declined, None, "operator:cli", 100)
                .expect("decide")
        );
        assert_eq!(
            store.question_answer("q_a").expect("answer"),
            Some((QuestionState::Accepted, Some(answer)))
        );
        // Expired by time: no answer lands.
        assert!(
            !store
                .decide_question("q_b", QuestionState::Declined, None, "operator:cli", 100)
                .expect("decide")
        );
        store.expire_question("q_b").expect("expire");
        assert_eq!(
            store.question("q_b").expect("q").map(|r| r.state),
            Some(QuestionState::Expired)
        );
        assert_eq!(store.question("q_zz").expect("q"), None);
    }
}
