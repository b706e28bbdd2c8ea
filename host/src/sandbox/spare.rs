//! Spare instances: the next call's fresh instance, made ahead of it.
//!
//! Instantiating a Python or JavaScript guest costs hundreds of µs (the
//! interpreter's modules fill their function tables at every
//! instantiation), a Rust guest a few µs. For a component whose last
//! instantiation cost at least the sandbox's spare threshold
//! (`SPARE_MIN_INSTANTIATE` by default), the end of each call starts
//! making the next call's instance in a task of its own, so a call that
//! finds one ready pays only for the guest's own work. A spare is still a
//! fresh instance: it is made for one call, has run nothing but the
//! component's instantiation, and is used once.
//!
//! A spare is used only where it is the store the call would have made:
//! made under the same limits, by an instantiation that touched nothing
//! outside its own memory (no import of the `host` interface called, no
//! byte written to stdout or stderr, no outbound request, no memory
//! denied, no filesystem asked for; see [`untouched`]). A component
//! whose instantiation fails or touches anything never gets spares again.
//! Before the guest runs, the call's own state (tool, deadline, config,
//! invoker, refs, reach, filesystem) replaces the spare's, and its fuel is what a
//! fresh store would have left after the same instantiation.
//!
//! An unused spare holds an instance slot of the pool and its memory's
//! written pages: one per component at most, [`MAX_SPARE_INSTANCES`] in a
//! sandbox, dropped with its component. A call that finds the pool full
//! drops every spare and tries once more, so spares never make a call
//! busy. While it waits a spare's store keeps no epoch ticking.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use wasmtime::Store;

use super::SandboxInner;
use super::state::CallState;
use crate::limits::{Limits, MAX_SPARE_INSTANCES};

/// A fresh instance made ahead of its call: `I` is the instance's
/// bindings (a skill's, or the script runtime's).
pub(crate) struct Spare<I> {
    /// Its store, with no epoch ticking while it waits.
    store: Store<CallState>,
    /// The instance.
    instance: I,
    /// Fuel its instantiation consumed.
    fuel_used: u64,
    /// The limits it was made under.
    limits: Limits,
    /// Its place among the sandbox's spares.
    _held: Held,
}

impl<I> Spare<I> {
    /// A spare made under `limits`, holding its place.
    pub fn new(
        store: Store<CallState>,
        instance: I,
        fuel_used: u64,
        limits: Limits,
        held: Held,
    ) -> Spare<I> {
        Spare {
            store,
            instance,
            fuel_used,
            limits,
            _held: held,
        }
    }

    /// Its store, its instance and the fuel its instantiation consumed;
    /// its place among the sandbox's spares is given back (it is a call's
    /// instance now).
    pub fn into_parts(self) -> (Store<CallState>, I, u64) {
        (self.store, self.instance, self.fuel_used)
    }
}

/// Whether a store's instantiation touched nothing outside its memory, so
/// the store can serve a call it was not made for.
pub(crate) fn untouched(state: &CallState) -> bool {
    state.host_calls == 0
        && state.host_trap.is_none()
        && state.limiter.memory_denied.is_none()
        && state.stdout.lock().total == 0
        && state.stderr.lock().total == 0
        && state.outbound_records().is_empty()
        && !state.call.reach.fs.touched()
}

/// The spares of a sandbox's components: how many are held or being made,
/// and which components hold one, so that a call the pool has no slot
/// for can take theirs.
#[derive(Default)]
pub(crate) struct SpareRoom {
    count: Arc<AtomicUsize>,
    holders: Mutex<Vec<Weak<dyn Evict>>>,
}

/// A component's spares, as its sandbox sees them: something that can
/// give its slot back.
pub(crate) trait Evict: Send + Sync {
    /// Drops the ready spare; whether there was one.
    fn evict(&self) -> bool;
}

impl<I: Send> Evict for Spares<I> {
    fn evict(&self) -> bool {
        let dropped = self.slot().ready.take();
        dropped.is_some()
    }
}

impl SpareRoom {
    /// A place for one more spare, if fewer than [`MAX_SPARE_INSTANCES`]
    /// are held or being made.
    pub fn reserve(&self) -> Option<Held> {
        self.count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_SPARE_INSTANCES).then_some(n + 1)
            })
            .ok()
            .map(|_| Held(self.count.clone()))
    }

    fn holders(&self) -> MutexGuard<'_, Vec<Weak<dyn Evict>>> {
        // A list of weak references: a panic while it was held cannot
        // leave it half-written.
        self.holders.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes that `spares` holds a spare now.
    pub fn holds<I: Send + 'static>(&self, spares: &Arc<Spares<I>>) {
        let mut holders = self.holders();
        holders.retain(|w| w.strong_count() > 0);
        let this = Arc::as_ptr(spares).cast::<()>();
        if !holders
            .iter()
            .any(|w| std::ptr::eq(w.as_ptr().cast::<()>(), this))
        {
            let weak: Weak<dyn Evict> = Arc::downgrade(spares) as Weak<dyn Evict>;
            holders.push(weak);
        }
    }

    /// Drops every spare held, giving their instance slots to calls;
    /// whether there was any.
    pub fn evict(&self) -> bool {
        let holders: Vec<Arc<dyn Evict>> = {
            let mut list = self.holders();
            let alive = list.iter().filter_map(Weak::upgrade).collect();
            list.clear();
            alive
        };
        let mut any = false;
        for h in holders {
            any |= h.evict();
        }
        any
    }

    /// How many are held or being made.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }
}

/// One spare's place in its sandbox's count, given back when dropped.
#[derive(Debug)]
pub(crate) struct Held(Arc<AtomicUsize>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How making a spare ended.
pub(crate) enum Making<I> {
    /// It is ready for the next call.
    Ready(Spare<I>),
    /// The instantiation trapped, ran out of time or touched something:
    /// the component gets no more spares.
    Refused,
    /// Not made for a passing reason (no place, no runtime, the pool
    /// full, the task dropped): a later call may try again.
    Abandoned,
}

impl<I> Making<I> {
    /// What an instantiation made ahead of its call comes to, given its
    /// outcome within its deadline (`made`): the pool full is a passing
    /// reason (abandoned); a trap, a link error or the deadline is the
    /// component's own doing (refused), and so is an instantiation that
    /// touched anything outside its memory (`who` names it in the log).
    pub fn settle(
        made: Result<wasmtime::Result<I>, tokio::time::error::Elapsed>,
        mut store: Store<CallState>,
        limits: Limits,
        held: Held,
        who: &str,
    ) -> Making<I> {
        let instance = match made {
            Ok(Ok(instance)) => instance,
            Ok(Err(e)) if e.is::<wasmtime::PoolConcurrencyLimitError>() => {
                return Making::Abandoned;
            }
            Ok(Err(_)) | Err(_) => return Making::Refused,
        };
        let state = store.data_mut();
        state.ticking = None;
        if !untouched(state) {
            tracing::debug!(
                who,
                "its instantiation touched the outside: no spare instances"
            );
            return Making::Refused;
        }
        let fuel_used = limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        Making::Ready(Spare::new(store, instance, fuel_used, limits, held))
    }
}

/// A component's spare, the cost of its instantiation, and whether a spare
/// is being made.
pub(crate) struct Spares<I> {
    slot: Mutex<Slot<I>>,
    /// The shortest instantiation seen, in ns (`u64::MAX`: none yet): the
    /// component's own cost, whatever else the machine was doing.
    instantiate_ns: AtomicU64,
    /// Calls that ran in a spare.
    used: AtomicU64,
}

struct Slot<I> {
    ready: Option<Spare<I>>,
    making: bool,
    /// A spare's instantiation failed or touched something: no more.
    refused: bool,
}

impl<I> Default for Slot<I> {
    fn default() -> Slot<I> {
        Slot {
            ready: None,
            making: false,
            refused: false,
        }
    }
}

impl<I> Default for Spares<I> {
    fn default() -> Spares<I> {
        Spares {
            slot: Mutex::default(),
            instantiate_ns: AtomicU64::new(u64::MAX),
            used: AtomicU64::new(0),
        }
    }
}

impl<I> Spares<I> {
    fn slot(&self) -> MutexGuard<'_, Slot<I>> {
        // The slot is a plain value; a panic while it was held cannot
        // leave it half-written.
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The spare, if one made under `limits` is ready. A spare made for
    /// other limits is dropped: the next one is made for these.
    pub fn take(&self, limits: &Limits) -> Option<Spare<I>> {
        let spare = self.slot().ready.take()?;
        if spare.limits == *limits {
            self.used.fetch_add(1, Ordering::Relaxed);
            Some(spare)
        } else {
            None
        }
    }

    /// Notes how long an instantiation took.
    pub fn instantiated(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX - 1);
        self.instantiate_ns.fetch_min(ns, Ordering::Relaxed);
    }

    /// Whether a spare should be made now (none ready or being made, the
    /// component not refused, its instantiation at least `threshold`); if
    /// so, marks one as being made: the caller must then call
    /// [`made`](Spares::made).
    pub fn begin(&self, threshold: Duration) -> bool {
        let ns = self.instantiate_ns.load(Ordering::Relaxed);
        if ns == u64::MAX || u128::from(ns) < threshold.as_nanos() {
            return false;
        }
        let mut slot = self.slot();
        if slot.refused || slot.making || slot.ready.is_some() {
            return false;
        }
        slot.making = true;
        true
    }

    /// Ends what [`begin`](Spares::begin) started.
    pub fn made(&self, making: Making<I>) {
        let mut slot = self.slot();
        slot.making = false;
        match making {
            Making::Ready(s) => slot.ready = Some(s),
            Making::Refused => slot.refused = true,
            Making::Abandoned => {}
        }
    }

    /// Whether a spare is ready.
    pub fn ready(&self) -> bool {
        self.slot().ready.is_some()
    }

    /// How many calls ran in a spare.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }
}

/// A loaded component that gets spares: a skill's, or the script
/// runtime.
pub(crate) trait MakesSpares: Clone + Send + Sync + 'static {
    /// Its instances' bindings.
    type Instance: Send + 'static;
    /// Its spare.
    fn spares(&self) -> &Arc<Spares<Self::Instance>>;
    /// Its sandbox.
    fn sandbox(&self) -> &SandboxInner;
    /// Makes a fresh instance under `limits` with nothing of a call bound
    /// to it (see [`untouched`]).
    fn make(
        &self,
        limits: Limits,
        held: Held,
    ) -> impl Future<Output = Making<Self::Instance>> + Send;
}

/// Starts making a spare of `c` for the next call under `limits`, if it
/// gets spares and has none. The task first yields, so that the tasks
/// already ready (the answer's writer on a one-thread runtime) run first.
pub(crate) fn refill<C: MakesSpares>(c: &C, limits: Limits) {
    let Some(threshold) = c.sandbox().spare_threshold else {
        return;
    };
    if !c.spares().begin(threshold) {
        return;
    }
    let making = MakingSpare(Some(c.clone()));
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let Some(held) = c.sandbox().spares.reserve() else {
        return;
    };
    rt.spawn(async move {
        tokio::task::yield_now().await;
        if let Some(c) = &making.0 {
            let made = c.make(limits, held).await;
            making.finish(made);
        }
    });
}

/// A spare being made: ends as abandoned if its task is dropped before it
/// ends (its runtime shut down), so a later call may start another.
struct MakingSpare<C: MakesSpares>(Option<C>);

impl<C: MakesSpares> MakingSpare<C> {
    fn finish(mut self, made: Making<C::Instance>) {
        if let Some(c) = self.0.take() {
            let ready = matches!(made, Making::Ready(_));
            c.spares().made(made);
            if ready {
                c.sandbox().spares.holds(c.spares());
            }
        }
    }
}

impl<C: MakesSpares> Drop for MakingSpare<C> {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            c.spares().made(Making::Abandoned);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_stops_at_the_cap_and_places_come_back_when_dropped() {
        let count = SpareRoom::default();
        let held: Vec<Held> = (0..MAX_SPARE_INSTANCES)
            .map(|_| count.reserve().expect("a place under the cap"))
            .collect();
        assert!(!count.evict(), "nothing to evict");
        assert_eq!(count.held(), MAX_SPARE_INSTANCES);
        assert!(count.reserve().is_none(), "a place past the cap");
        drop(held);
        assert_eq!(count.held(), 0);
        assert!(count.reserve().is_some());
    }

    #[test]
    fn nothing_is_made_before_an_instantiation_was_timed_or_under_the_threshold() {
        let spares = Spares::<()>::default();
        assert!(!spares.begin(Duration::ZERO), "no instantiation timed yet");
        spares.instantiated(Duration::from_micros(80));
        assert!(
            spares.begin(Duration::from_micros(50)),
            "over the threshold"
        );
        assert!(!spares.begin(Duration::ZERO), "one already being made");
        spares.made(Making::Abandoned);
        // One quick instantiation shows what the component costs: a slow
        // one seen before was the machine.
        spares.instantiated(Duration::from_micros(5));
        spares.instantiated(Duration::from_micros(900));
        assert!(
            !spares.begin(Duration::from_micros(50)),
            "under the threshold"
        );
        assert!(
            spares.begin(Duration::from_micros(5)),
            "abandoned: may begin again"
        );
        spares.made(Making::Refused);
        assert!(!spares.begin(Duration::ZERO), "refused for good");
        assert!(!spares.ready());
    }
}
