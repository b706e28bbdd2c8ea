//! The host's face of [`crate::authority::metrics`]: the text of its metrics, with
//! the values read at scrape time (pending approvals from the store, the
//! MCP servers from the manager).

use super::{Host, lock};
use crate::authority::metrics::Scraped;
use crate::state::runs::now_ms;

impl Host {
    /// This host's metrics in the Prometheus text exposition format
    /// (version 0.0.4, [`crate::METRICS_CONTENT_TYPE`]), as `GET /metrics`
    /// of `skillhost serve --http` serves them. Every series starts with
    /// `skillhost_`:
    ///
    /// - `tool_calls_total{kind, outcome}`: every call through
    ///   [`Host::call`] (and the calls skills make with `invoke`), by
    ///   `kind` (`wasm`, `mcp`, or `unknown` for a tool that is not
    ///   registered) and `outcome` (`ok`, `error`, `timeout`, `denied`,
    ///   `waiting_approval`, `trapped`, `cancelled`). A call that waits for
    ///   approval counts as `waiting_approval`, then once more with how it
    ///   ended when an operator approves it in this process;
    /// - `tool_call_duration_seconds{kind}`: a histogram of the executed
    ///   calls' durations (`wasm`, `mcp`);
    /// - `traps_total{reason}`: calls the sandbox stopped (`fuel`,
    ///   `deadline`, `memory`, `stack`, `panic`, `output-too-large`,
    ///   `other`);
    /// - `timeouts_total{kind}`: calls that ran out of time;
    /// - `approvals_pending`: runs waiting for approval, not expired (read
    ///   from the data dir, so runs of other processes count too; left out
    ///   if the database cannot be read);
    /// - `mcp_servers{state}` and `mcp_restarts_total{server}`: the MCP
    ///   servers this host supervises;
    /// - `build_info{version}`: always 1.
    ///
    /// Counters count what this `Host` did since it was built: another
    /// `Host` (in this process or another, such as a CLI call) counts
    /// apart.
    ///
    /// ```no_run
    /// # async fn f() -> anyhow::Result<()> {
    /// use skillhost::{Caller, HostBuilder};
    /// let host = HostBuilder::new("data").build().await?;
    /// host.call(&Caller::Operator, "text.word_count",
    ///     serde_json::json!({"text": "a b"}), &Default::default()).await;
    /// let text = host.metrics_text();
    /// assert!(text.contains(r#"skillhost_tool_calls_total{kind="wasm",outcome="ok"} 1"#));
    /// # Ok(()) }
    /// ```
    pub fn metrics_text(&self) -> String {
        let pending = lock(&self.inner.store).pending_run_count(now_ms());
        let pending_approvals = match pending {
            Ok(n) => Some(n),
            Err(e) => {
                tracing::warn!("metrics: cannot count the pending approvals: {e}");
                None
            }
        };
        let servers = self.inner.mcp.statuses();
        self.inner.metrics.encode(&Scraped {
            pending_approvals,
            servers: &servers,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{Caller, HostBuilder};

    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    /// Two hosts in one process count apart, and each counts its own
    /// calls by kind and outcome.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_host_counts_its_own_calls() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let a = HostBuilder::new(tmp.path().join("a"))
            .build()
            .await
            .expect("host a");
        let b = HostBuilder::new(tmp.path().join("b"))
            .build()
            .await
            .expect("host b");
        let args = serde_json::json!({"text": "one two"});
        for _ in 0..2 {
            let run = a
                .call(
                    &Caller::Operator,
                    "text.word_count",
                    args.clone(),
                    &Default::default(),
                )
                .await;
            assert_eq!(run.outcome, crate::Outcome::Ok, "{run:?}");
        }
        let run = a
            .call(
                &Caller::persona("nobody"),
                "text.word_count",
                args.clone(),
                &Default::default(),
            )
            .await;
        assert_eq!(run.outcome, crate::Outcome::Denied, "{run:?}");
        let run = a
            .call(
                &Caller::Operator,
                "no.such_tool",
                args.clone(),
                &Default::default(),
            )
            .await;
        assert_eq!(run.outcome, crate::Outcome::Error, "{run:?}");

        let series = |kind: &str, outcome: &str| {
            format!("skillhost_tool_calls_total{{kind=\"{kind}\",outcome=\"{outcome}\"}}")
        };
        let text = a.metrics_text();
        assert_eq!(sample(&text, &series("wasm", "ok")), Some(2.0), "{text}");
        assert_eq!(
            sample(&text, &series("wasm", "denied")),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            sample(&text, &series("unknown", "error")),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                "skillhost_tool_call_duration_seconds_count{kind=\"wasm\"}"
            ),
            Some(3.0),
            "{text}"
        );
        assert_eq!(
            sample(&text, "skillhost_approvals_pending"),
            Some(0.0),
            "{text}"
        );
        let text = b.metrics_text();
        assert_eq!(sample(&text, &series("wasm", "ok")), Some(0.0), "{text}");
        a.shutdown().await;
        b.shutdown().await;
    }
}
