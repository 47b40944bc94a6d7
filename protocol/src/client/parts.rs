//! The list of the client's parts beside the transactions: each a [`Part`], one line here
//! (its field and type). The list makes the [`Parts`] the client holds, and hands each part
//! what concerns it: the time to poll it, its replies and losses, a cancel, the census. The
//! parts are polled in this order.

use bytes::Bytes;

use crate::exclusion_check::ExclusionChecks;
use crate::global_config::GlobalConfig;
use crate::ids::RequestId;
use crate::part::{Leg, Part, PartCx};
use crate::quorum_check::QuorumChecks;
use crate::route::{Loss, PartId, PartRoute};
use crate::special_cluster::ClusterReads;
use crate::status::StatusReads;
use crate::time::Instant;

macro_rules! parts {
    ($($(#[$doc:meta])* $name:ident: $part:ty,)*) => {
        /// The client's parts (see the module docs).
        #[derive(Debug, Default)]
        pub(crate) struct Parts {
            $($(#[$doc])* pub(crate) $name: $part,)*
        }

        /// Each part's place in the list: its [`PartId`].
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy)]
        enum Place {
            $($name,)*
        }

        impl Parts {
            /// Every part, in the order they are polled.
            pub(crate) const ALL: &[PartId] = &[$(PartId(Place::$name as u8),)*];

            /// Sends what part `cx` is lent for has due, and finishes what it decided.
            pub(crate) fn poll(&mut self, cx: &mut PartCx<'_>) {
                match cx.part() {
                    $(id if id == PartId(Place::$name as u8) => self.$name.poll(cx),)*
                    _ => {}
                }
            }

            /// The answer to a question a part asked (`Ok`), or its loss.
            pub(crate) fn deliver(
                &mut self,
                cx: &mut PartCx<'_>,
                route: PartRoute,
                answer: Result<&Bytes, Loss>,
            ) {
                match cx.part() {
                    $(id if id == PartId(Place::$name as u8) => {
                        let Some(leg) = Leg::from_leg(route.leg) else { return };
                        match answer {
                            Ok(message) => self.$name.on_reply(cx, route.op, leg, message),
                            Err(why) => self.$name.on_lost(cx, route.op, leg, why),
                        }
                    })*
                    _ => {}
                }
            }

            /// Whether the question went to a proxy (see [`Part::asks_proxies`]).
            pub(crate) fn asks_proxies(part: PartId, route: &PartRoute) -> bool {
                match part {
                    $(id if id == PartId(Place::$name as u8) => {
                        Leg::from_leg(route.leg).is_some_and(<$part as Part>::asks_proxies)
                    })*
                    _ => false,
                }
            }

            /// The earliest time a part must be polled.
            pub(crate) fn poll_timeout(&self) -> Option<Instant> {
                [$(self.$name.poll_timeout(),)*].into_iter().flatten().min()
            }

            /// Gives up on `req`; `false` if no part holds it.
            pub(crate) fn cancel(&mut self, req: RequestId) -> bool {
                $(self.$name.cancel(req) ||)* false
            }

            /// How many requests the parts hold for the application.
            pub(crate) fn len(&self) -> usize {
                0 $(+ self.$name.len())*
            }
        }
    };
}

parts! {
    /// `\xff\xff/status/json` reads.
    status: StatusReads,
    /// Coordinators changes' reachability checks.
    quorum_checks: QuorumChecks,
    /// Safety checks before servers are marked failed.
    exclusion_checks: ExclusionChecks,
    /// Reads of the special-key modules filled from the cluster.
    cluster_reads: ClusterReads,
    /// The global configuration view.
    global_config: GlobalConfig,
}
