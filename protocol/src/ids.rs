//! The identifiers the core and its driver exchange. A leaf: every part of the core names
//! connections, requests and transactions by these, and none of them owns the others.

/// One connection between core and driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnectionId(pub u64);

/// One application request: it finishes with exactly one [`Event::Complete`].
///
/// [`Event::Complete`]: crate::Event::Complete
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// A tenant handle of the core (one per `open_tenant`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TenantHandle(pub u64);

/// One transaction of a [`Client`](crate::Client).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TransactionId(pub u64);
