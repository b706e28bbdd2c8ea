//! The epoch ticker: a thread that advances the engine's epoch every tick
//! while any guest runs, so running guests notice their deadline and yield
//! to other calls. After [`IDLE_TICKS`] ticks with no call in flight it
//! sleeps until the next call starts (an idle host spends no CPU on it,
//! and a busy one does not wake it call by call).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use wasmtime::Engine;

/// Ticks with no call in flight before the ticker sleeps: one second at
/// the default tick, so calls that follow each other keep it awake.
const IDLE_TICKS: u32 = 1000;

/// What the ticker thread and the calls share.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    /// Stores alive (calls in flight).
    active: AtomicUsize,
    /// Set by the thread just before it parks; a call that finds it set
    /// wakes the thread.
    sleeping: AtomicBool,
}

pub(crate) struct EpochTicker {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Keeps the ticker ticking while it lives: one per store.
pub(crate) struct Ticking {
    shared: Arc<Shared>,
}

impl Drop for Ticking {
    fn drop(&mut self) {
        self.shared.active.fetch_sub(1, Ordering::SeqCst);
    }
}

impl EpochTicker {
    pub fn start(engine: &Engine, tick: Duration) -> EpochTicker {
        let weak = engine.weak();
        EpochTicker::with(tick, move || match weak.upgrade() {
            Some(engine) => {
                engine.increment_epoch();
                true
            }
            None => false,
        })
    }

    /// A ticker calling `tick_once` every `tick` while a call is in flight,
    /// until it returns false.
    fn with(tick: Duration, tick_once: impl Fn() -> bool + Send + 'static) -> EpochTicker {
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("skillhost-epoch".into())
            .spawn(move || {
                let mut idle = 0u32;
                while !s.stop.load(Ordering::SeqCst) {
                    if s.active.load(Ordering::SeqCst) == 0 {
                        idle = idle.saturating_add(1);
                    } else {
                        idle = 0;
                    }
                    if idle > IDLE_TICKS {
                        // Either a call starting now sees `sleeping` and
                        // unparks (an unpark before the park makes it
                        // return at once), or this sees the call.
                        s.sleeping.store(true, Ordering::SeqCst);
                        if s.active.load(Ordering::SeqCst) == 0 && !s.stop.load(Ordering::SeqCst) {
                            std::thread::park();
                        }
                        s.sleeping.store(false, Ordering::SeqCst);
                        idle = 0;
                        continue;
                    }
                    std::thread::sleep(tick);
                    if !tick_once() {
                        break;
                    }
                }
            })
            .ok();
        if thread.is_none() {
            tracing::error!(
                "could not start the epoch ticker thread: deadlines rely on the outer timeout only"
            );
        }
        EpochTicker { shared, thread }
    }

    fn thread(&self) -> Option<&Thread> {
        self.thread.as_ref().map(|t| t.thread())
    }

    /// Marks one call in flight until the guard is dropped, waking the
    /// ticker if it slept.
    pub fn ticking(&self) -> Ticking {
        self.shared.active.fetch_add(1, Ordering::SeqCst);
        if self.shared.sleeping.swap(false, Ordering::SeqCst)
            && let Some(t) = self.thread()
        {
            t.unpark();
        }
        Ticking {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counting() -> (EpochTicker, Arc<AtomicUsize>) {
        let n = Arc::new(AtomicUsize::new(0));
        let c = n.clone();
        let t = EpochTicker::with(Duration::from_millis(1), move || {
            c.fetch_add(1, Ordering::SeqCst);
            true
        });
        (t, n)
    }

    /// Waits (bounded) until `n` stops moving; returns its value.
    fn settled(n: &AtomicUsize) -> usize {
        let mut last = n.load(Ordering::SeqCst);
        for _ in 0..100 {
            std::thread::sleep(Duration::from_millis(50));
            let now = n.load(Ordering::SeqCst);
            if now == last {
                return now;
            }
            last = now;
        }
        panic!("the ticker never went to sleep");
    }

    #[test]
    fn sleeps_when_idle_and_wakes_for_a_call() {
        let (t, n) = counting();
        // Idle from the start: it sleeps after IDLE_TICKS ticks at most.
        let asleep = settled(&n);
        assert!(
            asleep <= IDLE_TICKS as usize + 1,
            "{asleep} ticks before sleeping"
        );
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(n.load(Ordering::SeqCst), asleep, "ticked while asleep");
        // A call wakes it and it ticks while the call lasts.
        let a = t.ticking();
        let b = t.ticking();
        for _ in 0..500 {
            if n.load(Ordering::SeqCst) >= asleep + 5 {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(
            n.load(Ordering::SeqCst) >= asleep + 5,
            "did not tick during a call"
        );
        drop(a);
        let during = n.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            n.load(Ordering::SeqCst) > during,
            "stopped with a call left"
        );
        drop(b);
        // Then sleeps again.
        let again = settled(&n);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            n.load(Ordering::SeqCst),
            again,
            "ticked after the last call"
        );
    }

    #[test]
    fn drop_stops_a_sleeping_ticker() {
        let (t, _) = counting();
        drop(t); // joins: returns only if the thread woke and ended
    }
}
