//! The simulated cluster as a test sees it: [`TestCluster`]'s checks and faults over the
//! same core, in the simulation. What a fault makes (closes, replies) goes out on the
//! simulated network when the world next runs.
//!
//! [`TestCluster`]: crate::cluster::TestCluster

use std::cell::RefCell;
use std::rc::Rc;

use crate::cluster::server::State;
use crate::cluster::Role;

/// A handle to the simulation's cluster (from [`super::Sim::cluster`], or [`super::cluster`]
/// inside a run). Each method is [`TestCluster`]'s of the same name.
///
/// [`TestCluster`]: crate::cluster::TestCluster
#[derive(Clone)]
pub struct SimCluster(pub(crate) Rc<RefCell<State>>);

impl SimCluster {
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.0.borrow_mut())
    }

    crate::cluster::checks::checks_and_faults!();

    /// Faults: kills a role's process (its connections close, connects are refused).
    pub fn kill(&self, role: Role) {
        self.with(|st| {
            st.kill(role);
        })
    }

    /// Faults: restarts a role's process at the same address (killing it first if up).
    pub fn restart(&self, role: Role) {
        self.with(|st| st.restart(role))
    }
}
