//! A call's teardown after its answer: dropping the store resets the
//! instance's memory and tables (7-8 µs for a small guest), work that the
//! caller does not need to wait for.
//!
//! On a current-thread runtime (`serve --stdio`) the store is handed to a
//! task that first yields: the scheduler runs it once every task that was
//! ready has run, so the front writes the answer before the reset, and the
//! reset overlaps the client reading it. On a multi-thread runtime (`serve
//! --http`, the library in tests) the store is dropped at once: another
//! worker would run the task in parallel anyway, and an instance slot held
//! past the call could make the pool refuse the next one under load.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Drops `spent` (a call's store) after the answer where that is cheaper
/// for the caller (see the module docs), at once otherwise.
pub(crate) fn after_answer<T: Send + 'static>(spent: T) {
    match Handle::try_current() {
        Ok(rt) if rt.runtime_flavor() == RuntimeFlavor::CurrentThread => {
            rt.spawn(async move {
                tokio::task::yield_now().await;
                let mut clock = crate::stages::start();
                drop(spent);
                crate::stages::lap(crate::stages::Stage::Teardown, &mut clock);
            });
        }
        _ => {
            let mut clock = crate::stages::start();
            drop(spent);
            crate::stages::lap(crate::stages::Stage::Teardown, &mut clock);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn on_one_thread_the_drop_waits_for_the_ready_tasks() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let dropped = Arc::new(AtomicBool::new(false));
            // A task that was ready before the drop was handed over: the
            // answer's writer, in serve --stdio.
            let seen = dropped.clone();
            let writer = tokio::spawn(async move { seen.load(Ordering::SeqCst) });
            after_answer(Flag(dropped.clone()));
            assert!(!dropped.load(Ordering::SeqCst), "dropped before the answer");
            assert!(
                !writer.await.expect("writer"),
                "dropped before the writer ran"
            );
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            assert!(dropped.load(Ordering::SeqCst), "never dropped");
        });
    }

    #[test]
    fn elsewhere_it_drops_at_once() {
        let dropped = Arc::new(AtomicBool::new(false));
        after_answer(Flag(dropped.clone()));
        assert!(dropped.load(Ordering::SeqCst));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .expect("runtime");
        let d = Arc::new(AtomicBool::new(false));
        let d2 = d.clone();
        rt.block_on(async move { after_answer(Flag(d2)) });
        assert!(d.load(Ordering::SeqCst));
    }
}
