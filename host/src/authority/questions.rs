//! Questions from upstream MCP servers that go to the operator.
//!
//! When a server asks a question during a call (a form: `elicitation/create`
//! or an `input_required` round) and the caller's client cannot be asked
//! (it declared no elicitation, it speaks an era where the host cannot ask
//! mid-call, `serve --no-elicitation`, or the call came from the CLI), the
//! question waits for the operator: a row in the `questions` table and a
//! `question_asked` event naming the server, the tool and the persona. The
//! call waits on the row — at most [`QUESTION_WAIT`], and never past the
//! call's own deadline — so the operator may answer from any process
//! (`skillhost runs questions`, `runs answer`). An answer is checked against
//! the question's form, lands exactly once (`question_answered` event,
//! with the decider; the content goes only to the server), and a question
//! whose call gave up is `expired`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use skillhost_mcp::{ElicitQuestion, ElicitReply, ElicitReplyFuture, UpstreamElicitor};

use super::{Decider, Host, HostInner, lock};
use crate::error::ApprovalError;
use crate::state::questions::{QuestionRow, QuestionState};
use crate::state::runs::{HostEvent, now_ms};

pub use crate::state::questions::{QuestionRow as Question, QuestionState as QuestionStatus};

/// How long a question waits for the operator at most (the call's own
/// deadline usually ends it first).
pub const QUESTION_WAIT: Duration = Duration::from_secs(300);

/// How often a waiting call looks at its question's row.
const POLL: Duration = Duration::from_millis(200);

/// The operator's answer to a question.
#[derive(Debug, Clone, PartialEq)]
pub enum QuestionAnswer {
    /// The filled-in form (a JSON object matching the question's schema).
    Accept(Value),
    /// Refuse to answer.
    Decline,
}

/// # Questions to the operator
///
/// What a skill asked that the operator answers.
impl Host {
    /// The questions waiting for the operator, oldest first.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::ApprovalError> {
    /// for q in host.questions()? {
    ///     println!("{} {} asks: {}", q.id, q.server, q.message);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn questions(&self) -> Result<Vec<Question>, ApprovalError> {
        lock(&self.inner.store)
            .open_questions(now_ms())
            .map_err(|e| ApprovalError::State(anyhow::Error::from(e).into()))
    }

    /// Answers question `id` as `decider`. An accepted form must match the
    /// question's schema (with its defaults filled in for what it leaves
    /// out); a question answered, expired or unknown is refused.
    pub fn answer_question(
        &self,
        id: &str,
        answer: QuestionAnswer,
        decider: &Decider,
    ) -> Result<QuestionStatus, ApprovalError> {
        let state_err =
            |e: crate::state::db::DbError| ApprovalError::State(anyhow::Error::from(e).into());
        let store = lock(&self.inner.store);
        let Some(q) = store.question(id).map_err(state_err)? else {
            return Err(ApprovalError::NotFound(format!(
                "no question {:?} (`skillhost runs questions` lists the open ones)",
                crate::escape::escape_control(id, 64, false)
            )));
        };
        if q.state != QuestionState::Open || q.expires_at <= now_ms() {
            return Err(ApprovalError::Decided(format!(
                "question {id} is not waiting any more ({}): its call has its answer or gave up",
                match q.state {
                    QuestionState::Open => "expired",
                    QuestionState::Accepted => "accepted",
                    QuestionState::Declined => "declined",
                    QuestionState::Expired => "expired",
                }
            )));
        }
        let (state, content) = match answer {
            QuestionAnswer::Decline => (QuestionState::Declined, None),
            QuestionAnswer::Accept(Value::Object(mut content)) => {
                skillhost_mcp::apply_defaults(&q.schema, &mut content);
                let content = Value::Object(content);
                let schema = crate::Schema::compile(&q.schema).map_err(|e| {
                    ApprovalError::Refused(format!("the question's form cannot be checked: {e}"))
                })?;
                if let Err(problems) = schema.check(&content) {
                    return Err(ApprovalError::Refused(format!(
                        "the answer does not fit the question's form: {}",
                        problems.join("; ")
                    )));
                }
                (QuestionState::Accepted, Some(content))
            }
            QuestionAnswer::Accept(_) => {
                return Err(ApprovalError::Refused(
                    "an answer is a JSON object of the form's fields".into(),
                ));
            }
        };
        let decided = store
            .decide_question(id, state, content.as_ref(), &decider.to_string(), now_ms())
            .map_err(state_err)?;
        drop(store);
        if !decided {
            return Err(ApprovalError::Decided(format!(
                "question {id} was answered or expired meanwhile"
            )));
        }
        self.inner.emit(HostEvent {
            at_ms: now_ms(),
            kind: "question_answered".into(),
            run_id: None,
            persona: q.persona.clone(),
            tool: Some(q.tool.clone()),
            server: Some(q.server.clone()),
            outcome: None,
            duration_ms: None,
            detail: serde_json::json!({"question": id, "answer": state, "by": decider.to_string()}),
        });
        Ok(state)
    }
}

/// Puts a call's questions to the operator (see the module documentation).
pub(crate) struct OperatorQuestions {
    pub inner: Arc<HostInner>,
    pub tool: String,
    pub persona: Option<String>,
    pub run_id: String,
}

impl UpstreamElicitor for OperatorQuestions {
    fn ask(&self, q: ElicitQuestion) -> ElicitReplyFuture {
        let inner = self.inner.clone();
        let tool = self.tool.clone();
        let persona = self.persona.clone();
        let run_id = self.run_id.clone();
        Box::pin(async move {
            let id = match question_id() {
                Ok(id) => id,
                Err(e) => {
                    tracing::warn!("cannot make a question id: {e}");
                    return ElicitReply::Decline;
                }
            };
            let asked_at = now_ms();
            let row = QuestionRow {
                id: id.clone(),
                server: q.server.clone(),
                tool: tool.clone(),
                persona: persona.clone(),
                message: crate::escape::escape_control(&q.message, 4096, false),
                schema: q.schema.clone(),
                asked_at,
                expires_at: asked_at + QUESTION_WAIT.as_millis() as i64,
                state: QuestionState::Open,
                decided_by: None,
            };
            if let Err(e) = lock(&inner.store).insert_question(&row) {
                tracing::warn!("cannot record a question for the operator: {e}");
                return ElicitReply::Decline;
            }
            inner.emit(HostEvent {
                at_ms: asked_at,
                kind: "question_asked".into(),
                run_id: Some(run_id),
                persona,
                tool: Some(tool),
                server: Some(q.server.clone()),
                outcome: None,
                duration_ms: None,
                detail: serde_json::json!({
                    "question": id,
                    "message": crate::escape::escape_control(&q.message, 512, false),
                }),
            });
            // Marks the question expired if the call stops waiting.
            let _expire = ExpireOnDrop {
                inner: inner.clone(),
                id: id.clone(),
            };
            let deadline = tokio::time::Instant::now() + QUESTION_WAIT;
            while tokio::time::Instant::now() < deadline {
                tokio::time::sleep(POLL).await;
                let answer = lock(&inner.store).question_answer(&id);
                match answer {
                    Ok(Some((QuestionState::Accepted, Some(Value::Object(content))))) => {
                        return ElicitReply::Accept(content);
                    }
                    Ok(Some((QuestionState::Open, _))) => continue,
                    Ok(Some((QuestionState::Declined, _))) => return ElicitReply::Decline,
                    Ok(_) => return ElicitReply::Cancel,
                    Err(e) => {
                        tracing::warn!("cannot read question {id}: {e}");
                        return ElicitReply::Cancel;
                    }
                }
            }
            ElicitReply::Cancel
        })
    }
}

struct ExpireOnDrop {
    inner: Arc<HostInner>,
    id: String,
}

impl Drop for ExpireOnDrop {
    fn drop(&mut self) {
        if let Err(e) = lock(&self.inner.store).expire_question(&self.id) {
            tracing::warn!("cannot expire question {}: {e}", self.id);
        }
    }
}

/// `q_` and 16 random hex digits.
fn question_id() -> anyhow::Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(format!("q_{}", hex::encode(bytes)))
}
