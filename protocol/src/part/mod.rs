//! One contract for the client's parts beside the transactions — status reads, the
//! coordinators and exclusion checks, the special-key modules filled from the cluster, the
//! global configuration view: each owns its requests and answers the same hooks ([`Part`]),
//! as every socket kind of smoltcp answers `process` / `dispatch` / `poll_at`. The client
//! keeps them in one list (`client::parts`), so adding a part is one file and one line there.
//!
//! A part sends through a [`PartCx`], which routes each reply back to it as `(op, leg)`: the
//! request it serves and the part's own route. The bookkeeping parts share lives here too:
//! the table of requests in flight ([`Requests`]) and the coordinators asked who leads until
//! each answers ([`LeaderAsks`]).

mod cx;
mod leaders;
mod requests;

use bytes::Bytes;
use core::time::Duration;

pub(crate) use cx::{Answer, PartCx};
pub(crate) use leaders::LeaderAsks;
pub(crate) use requests::Requests;

use crate::ids::RequestId;
use crate::route::Loss;
use crate::time::Instant;

/// `FLOW_KNOBS->PREVENT_FAST_SPIN_DELAY`: the pause before a part asks again when the answer
/// says to (a `broken_promise`, `dd_not_found`, a request lost with its proxy). One knob in
/// FDB, so one constant for every part.
pub(crate) const PREVENT_FAST_SPIN_DELAY: Duration = Duration::from_millis(10);

/// What the client asks of each of its parts.
pub(crate) trait Part {
    /// The part's own route: which of a request's questions a reply answers.
    type Leg: Leg;

    /// Sends what is due and finishes what is decided.
    fn poll(&mut self, cx: &mut PartCx<'_>);

    /// The earliest time [`Part::poll`] must run again.
    fn poll_timeout(&self) -> Option<Instant>;

    /// The answer to question `leg` of request `op`.
    fn on_reply(&mut self, cx: &mut PartCx<'_>, op: RequestId, leg: Self::Leg, message: &Bytes);

    /// Question `leg` of request `op` will get no answer.
    fn on_lost(&mut self, cx: &mut PartCx<'_>, op: RequestId, leg: Self::Leg, why: Loss);

    /// Gives up on `req`: no event will come for it. `false`: not one of this part's.
    fn cancel(&mut self, req: RequestId) -> bool;

    /// How many requests it holds for the application (counted in `Census::status_reads`).
    fn len(&self) -> usize;

    /// Whether question `leg` went to a proxy, so that new proxies lose it
    /// (`onProxiesChanged`).
    fn asks_proxies(_leg: Self::Leg) -> bool {
        false
    }
}

/// [`Part::len`] and [`Part::cancel`] for a part whose requests are the table in field
/// `$table` (a [`Requests`]): every part counts and cancels through its table, so the two
/// hooks are written once, here.
macro_rules! requests_in {
    ($table:ident) => {
        fn len(&self) -> usize {
            self.$table.len()
        }

        fn cancel(&mut self, req: $crate::ids::RequestId) -> bool {
            self.$table.cancel(req)
        }
    };
}
pub(crate) use requests_in;

/// A part's own route as the network carries it: a number ([`crate::route::PartRoute`]).
pub(crate) trait Leg: Copy {
    /// The number.
    fn to_leg(self) -> u32;
    /// Back from the number (`None`: not one this type makes).
    fn from_leg(leg: u32) -> Option<Self>;
}

/// One question a request.
impl Leg for () {
    fn to_leg(self) -> u32 {
        0
    }
    fn from_leg(leg: u32) -> Option<Self> {
        (leg == 0).then_some(())
    }
}

/// The question to target `usize`.
impl Leg for usize {
    fn to_leg(self) -> u32 {
        self as u32
    }
    fn from_leg(leg: u32) -> Option<Self> {
        Some(leg as usize)
    }
}

/// One question (`None`), then one to each target `usize`.
impl Leg for Option<usize> {
    fn to_leg(self) -> u32 {
        self.map_or(0, |i| i as u32 + 1)
    }
    fn from_leg(leg: u32) -> Option<Self> {
        Some(leg.checked_sub(1).map(|i| i as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::Leg;

    #[test]
    fn a_leg_comes_back_as_it_went() {
        assert_eq!(<()>::from_leg(().to_leg()), Some(()));
        for i in [0usize, 1, 7] {
            assert_eq!(usize::from_leg(i.to_leg()), Some(i));
            assert_eq!(Option::from_leg(Some(i).to_leg()), Some(Some(i)));
        }
        assert_eq!(Option::<usize>::from_leg(None.to_leg()), Some(None));
    }
}
