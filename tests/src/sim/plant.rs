//! Bugs planted on purpose, to show the swarm finds them (`--features planted-bugs` only:
//! a normal build has none of this). One bug at a time, per thread: the simulation runs on
//! one thread, so a plant affects only the world of the test that set it.

use std::cell::Cell;

/// A bug the swarm should find.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plant {
    /// The resolver commits every transaction, conflicts or not.
    ResolverIgnoresConflicts,
    /// The resolver skips each transaction's last read conflict range.
    SkipReadConflictRange,
    /// The workloads' retry loops take `commit_unknown_result` for "did not commit": the
    /// next attempt does not check whether the earlier one landed.
    CommitUnknownAsFailed,
}

impl Plant {
    pub const ALL: [Plant; 3] = [
        Plant::ResolverIgnoresConflicts,
        Plant::SkipReadConflictRange,
        Plant::CommitUnknownAsFailed,
    ];
}

thread_local! {
    static PLANTED: Cell<Option<Plant>> = const { Cell::new(None) };
}

/// Plants `p` on this thread (`None`: no bug).
pub fn set(p: Option<Plant>) {
    PLANTED.with(|c| c.set(p));
}

/// Whether `p` is planted on this thread.
pub(crate) fn is(p: Plant) -> bool {
    PLANTED.with(|c| c.get() == Some(p))
}
