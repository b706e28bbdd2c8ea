//! A call's teardown after its answer: dropping the store resets the
//! instance's memory and tables (7-8 µs for a small guest), work that the
//! caller does not need to wait for.
//!
//! On a current-thread runtime (`serve --stdio`) the store is handed to a
//! task that first yields: the scheduler runs it once every task that was
//! ready has run, so the front writes the answer before the reset, and the
//! reset overlaps the client reading it. At most one store waits per
//! thread: a caller that makes call after call without ever letting the
//! scheduler run (an embedder's loop of awaited calls that never pend)
//! drops the previous call's store when the next one ends, so waiting
//! stores never hold more than one instance slot per thread. On a
//! multi-thread runtime (`serve --http`, the library in tests) the store is
//! dropped at once: another worker would run the task in parallel anyway,
//! and an instance slot held past the call could make the pool refuse the
//! next one under load.

use std::any::Any;
use std::cell::RefCell;

use tokio::runtime::{Handle, RuntimeFlavor};

thread_local! {
    /// The store waiting for its teardown on this thread, if any.
    static WAITING: RefCell<Option<Box<dyn Any + Send>>> = const { RefCell::new(None) };
}

/// Drops `spent` (a call's store) after the answer where that is cheaper
/// for the caller (see the module docs), at once otherwise.
pub(crate) fn after_answer<T: Send + 'static>(spent: T) {
    match Handle::try_current() {
        Ok(rt) if rt.runtime_flavor() == RuntimeFlavor::CurrentThread => {
            // An earlier store still waiting (its task has not run) goes
            // now, outside the borrow.
            let earlier = WAITING.with(|w| w.borrow_mut().replace(Box::new(spent)));
            tear_down(earlier);
            rt.spawn(async {
                tokio::task::yield_now().await;
                tear_down(WAITING.with(|w| w.borrow_mut().take()));
            });
        }
        _ => tear_down(Some(spent)),
    }
}

fn tear_down<T>(spent: Option<T>) {
    if spent.is_some() {
        let mut clock = crate::stages::start();
        drop(spent);
        crate::stages::lap(crate::stages::Stage::Teardown, &mut clock);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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
    fn calls_that_never_let_the_scheduler_run_keep_one_store_waiting() {
        static LIVE: AtomicUsize = AtomicUsize::new(0);
        struct Counted;
        impl Drop for Counted {
            fn drop(&mut self) {
                LIVE.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            for _ in 0..1000 {
                LIVE.fetch_add(1, Ordering::SeqCst);
                after_answer(Counted);
                assert!(LIVE.load(Ordering::SeqCst) <= 1, "stores pile up");
            }
            // The thousand tasks run (most find nothing to drop), the
            // last one drops the last store.
            for _ in 0..10_000 {
                if LIVE.load(Ordering::SeqCst) == 0 {
                    break;
                }
                tokio::task::yield_now().await;
            }
            assert_eq!(
                LIVE.load(Ordering::SeqCst),
                0,
                "the last store was never dropped"
            );
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
