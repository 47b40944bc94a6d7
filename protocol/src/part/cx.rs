//! What the client lends a part: the network, the cluster monitor's view, and where its
//! finished requests go.

use alloc::vec::Vec;
use bytes::Bytes;

use super::Leg;
use crate::event::{ClientError, Completion, Event, Reply};
use crate::ids::{RequestId, TransactionId};
use crate::messages::coordination::GetLeaderRequest;
use crate::messages::types::{KeyRange, KeyValue};
use crate::messages::{NetworkAddress, ReplyPromise};
use crate::monitor::ClusterMonitor;
use crate::net::Io;
use crate::route::{PartId, PartRoute, Route};
use crate::serializer::Message;
use crate::time::Instant;
use crate::transaction::SpecialRead;
use crate::uid::{well_known, Uid};

/// A special-key read of a transaction that a part answered with the rows of a module: the
/// client hands it to the transaction's special key space, which resolves the selectors and
/// applies the limits as for any module.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) req: RequestId,
    pub(crate) tx: TransactionId,
    pub(crate) read: SpecialRead,
    /// The module's rows, and the ranges they cover.
    pub(crate) result: Result<(Vec<KeyValue>, KeyRange), ClientError>,
}

/// The [`Io`] and monitor lent to part `part` for one call.
pub(crate) struct PartCx<'a> {
    pub(crate) io: Io<'a>,
    pub(crate) monitor: &'a ClusterMonitor,
    part: PartId,
    answers: &'a mut Vec<Answer>,
}

impl<'a> PartCx<'a> {
    pub(crate) fn new(
        io: Io<'a>,
        monitor: &'a ClusterMonitor,
        part: PartId,
        answers: &'a mut Vec<Answer>,
    ) -> Self {
        PartCx {
            io,
            monitor,
            part,
            answers,
        }
    }

    /// The part lent this.
    pub(crate) fn part(&self) -> PartId {
        self.part
    }

    pub(crate) fn now(&self) -> Instant {
        self.io.now
    }

    /// Sends `msg(reply)` to endpoint `dest` at `addr`; its answer comes back to this part as
    /// question `leg` of request `op`.
    pub(crate) fn ask<M: Message>(
        &mut self,
        addr: &NetworkAddress,
        dest: Uid,
        op: RequestId,
        leg: impl Leg,
        msg: impl FnOnce(ReplyPromise) -> M,
    ) {
        let token = self.io.token();
        let msg = msg(ReplyPromise { token });
        let route = Route::Part(
            self.part,
            PartRoute {
                op,
                leg: leg.to_leg(),
            },
        );
        self.io.send(addr, dest, &msg, token, route);
    }

    /// [`PartCx::ask`] of one of `endpoints` (see `FailureMonitor::pick`); `false` while
    /// none can be asked.
    pub(crate) fn ask_one<M: Message>(
        &mut self,
        endpoints: &[(NetworkAddress, Uid)],
        op: RequestId,
        leg: impl Leg,
        msg: impl FnOnce(ReplyPromise) -> M,
    ) -> bool {
        let Some(i) = self.io.pick(endpoints) else {
            return false;
        };
        let (addr, dest) = &endpoints[i];
        self.ask(addr, *dest, op, leg, msg);
        true
    }

    /// Asks the coordinator at `addr` who leads cluster `key` (`GetLeaderRequest` with no
    /// known leader).
    pub(crate) fn ask_leader(
        &mut self,
        addr: &NetworkAddress,
        key: &Bytes,
        op: RequestId,
        leg: impl Leg,
    ) {
        self.ask(
            addr,
            well_known::CLIENT_LEADER_REG_GET_LEADER,
            op,
            leg,
            |reply| GetLeaderRequest {
                key: key.clone(),
                known_leader: Uid::default(),
                reply,
            },
        );
    }

    /// Finishes the application's request `req` with `result`.
    pub(crate) fn finish(&mut self, req: RequestId, result: Result<Reply, ClientError>) {
        self.io
            .events
            .push_back(Event::Complete(Completion::new(req, result)));
    }

    /// Hands a transaction's special-key read to its special key space (see [`Answer`]).
    pub(crate) fn answer(&mut self, answer: Answer) {
        self.answers.push(answer);
    }
}
