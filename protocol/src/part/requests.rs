//! The table of a part's requests in flight: by id, so in the order they were made.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use super::PartCx;
use crate::event::{ClientError, Reply};
use crate::ids::RequestId;
use crate::time::Instant;

/// A part's requests in flight, each with its state `S`.
#[derive(Debug)]
pub(crate) struct Requests<S> {
    by_id: BTreeMap<RequestId, S>,
}

impl<S> Default for Requests<S> {
    fn default() -> Self {
        Requests {
            by_id: BTreeMap::new(),
        }
    }
}

impl<S> Requests<S> {
    pub(crate) fn start(&mut self, req: RequestId, state: S) {
        self.by_id.insert(req, state);
    }

    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Forgets `req`; `false` if it is not here.
    pub(crate) fn cancel(&mut self, req: RequestId) -> bool {
        self.by_id.remove(&req).is_some()
    }

    pub(crate) fn get_mut(&mut self, req: RequestId) -> Option<&mut S> {
        self.by_id.get_mut(&req)
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (RequestId, &mut S)> {
        self.by_id.iter_mut().map(|(r, s)| (*r, s))
    }

    /// The ids, to walk while the table changes.
    pub(crate) fn ids(&self) -> Vec<RequestId> {
        self.by_id.keys().copied().collect()
    }

    /// The earliest of every request's `timers`.
    pub(crate) fn next_timer<'s, I: IntoIterator<Item = Instant>>(
        &'s self,
        timers: impl FnMut(&'s S) -> I,
    ) -> Option<Instant> {
        self.by_id.values().flat_map(timers).min()
    }

    /// Takes out the requests that are `done`.
    pub(crate) fn take_done(&mut self, done: impl Fn(&S) -> bool) -> Vec<(RequestId, S)> {
        let ids: Vec<RequestId> = self
            .by_id
            .iter()
            .filter(|(_, s)| done(s))
            .map(|(r, _)| *r)
            .collect();
        ids.into_iter()
            .filter_map(|r| Some((r, self.by_id.remove(&r)?)))
            .collect()
    }

    /// Finishes `req` once `outcome` decides it (`None`: not yet).
    pub(crate) fn settle(
        &mut self,
        cx: &mut PartCx<'_>,
        req: RequestId,
        outcome: impl FnOnce(&mut S, Instant) -> Option<Result<Reply, ClientError>>,
    ) {
        let now = cx.now();
        let Some(result) = self.by_id.get_mut(&req).and_then(|s| outcome(s, now)) else {
            return;
        };
        self.by_id.remove(&req);
        cx.finish(req, result);
    }
}
