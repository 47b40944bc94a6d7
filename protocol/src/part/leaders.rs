//! Coordinators asked who leads the cluster, each again until it answers: what a
//! coordinators change's check (`changeQuorumChecker`) and the exclusion check's quorum step
//! (`checkExclusion`'s `smartQuorum`) count their answers from, by their own deadlines.

use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use super::{Leg, PartCx};
use crate::ids::RequestId;
use crate::messages::NetworkAddress;
use crate::time::Instant;

/// The pause before a coordinator whose request the network lost is asked again.
const LOST_RETRY: Duration = Duration::from_millis(250);

#[derive(Clone, Debug)]
struct Asked {
    /// Where it is asked (`None`: a host name not resolved yet).
    addr: Option<NetworkAddress>,
    answered: bool,
    /// When to send (again); `None` while a request is out or once answered.
    send_at: Option<Instant>,
}

/// The coordinators asked who leads cluster `key`.
#[derive(Clone, Debug)]
pub(crate) struct LeaderAsks {
    key: Bytes,
    asked: Vec<Asked>,
}

impl LeaderAsks {
    /// Asks each of `coordinators`, first at `at`.
    pub(crate) fn new(
        key: Bytes,
        coordinators: impl IntoIterator<Item = Option<NetworkAddress>>,
        at: Instant,
    ) -> Self {
        let asked = coordinators
            .into_iter()
            .map(|addr| Asked {
                addr,
                answered: false,
                send_at: Some(at),
            })
            .collect();
        LeaderAsks { key, asked }
    }

    /// Asks every coordinator that is due and has not answered; coordinator `i`'s answer
    /// comes back as question `leg(i)` of request `op`.
    pub(crate) fn send_due<L: Leg>(
        &mut self,
        cx: &mut PartCx<'_>,
        op: RequestId,
        leg: impl Fn(usize) -> L,
    ) {
        let now = cx.now();
        for (i, a) in self.asked.iter_mut().enumerate() {
            let (Some(addr), Some(at)) = (&a.addr, a.send_at) else {
                continue;
            };
            if a.answered || at > now {
                continue;
            }
            a.send_at = None;
            cx.ask_leader(addr, &self.key, op, leg(i));
        }
    }

    /// When coordinators are to be asked again.
    pub(crate) fn timers(&self) -> impl Iterator<Item = Instant> + '_ {
        self.asked.iter().filter_map(|a| a.send_at)
    }

    /// Coordinator `i` answered; `false` if there is none such.
    pub(crate) fn answered(&mut self, i: usize) -> bool {
        self.asked.get_mut(i).map(|a| a.answered = true).is_some()
    }

    /// Coordinator `i`'s request was lost (or answered with something else): it is asked
    /// again a little after `now`, unless it answered.
    pub(crate) fn lost(&mut self, i: usize, now: Instant) {
        self.ask_again(i, now + LOST_RETRY);
    }

    /// Coordinator `i` is to be asked again at `at`, unless it answered.
    pub(crate) fn ask_again(&mut self, i: usize, at: Instant) {
        if let Some(a) = self.asked.get_mut(i).filter(|a| !a.answered) {
            a.send_at = Some(at);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.asked.len()
    }

    /// Whether coordinator `i` answered.
    pub(crate) fn has_answered(&self, i: usize) -> bool {
        self.asked.get(i).is_some_and(|a| a.answered)
    }

    /// How many answered.
    pub(crate) fn answers(&self) -> usize {
        self.asked.iter().filter(|a| a.answered).count()
    }
}
