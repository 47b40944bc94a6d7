//! The client's view of the global configuration (`fdbclient/GlobalConfig.actor.cpp`), which
//! `\xff\xff/global_config/` shows (`GlobalConfigImpl::getRange`).
//!
//! The configuration lives in `\xff/globalConfig/k/<name>` as tuple-packed values. As
//! libfdb_c's `GlobalConfig::updater` does, the view is filled by a
//! `GlobalConfigRefreshRequest` to a GRV proxy and then kept current from the history each
//! `ClientDBInfo` carries (the last few commits' mutations, by commit version): entries
//! newer than the view are applied; when the oldest entry is newer than the view (updates
//! were missed, or the cluster marked the history stale with `Version::MAX`) the whole
//! configuration is read again, until the proxy answers at least the newest version seen.
//!
//! libfdb_c starts its view when the database is created; this client starts it at the
//! first read of the module, which waits for the first refresh (libfdb_c would answer
//! whatever it had by then). A value that is not a tuple whose first element is a string,
//! integer, bool, float, double or versionstamp is left out (libfdb_c logs
//! `GlobalConfigTupleParseError`); a read that reaches a versionstamp fails with
//! `internal_error` (libfdb_c's `ASSERT`). Values show as text: strings as they are,
//! integers in decimal, bools as `1` / `0`, floats and doubles with six decimals (`%f`).

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::error::ErrorCode;
use crate::event::ClientError;
use crate::ids::{RequestId, TransactionId};
use crate::messages::coordination::{ClientDBInfo, GrvProxyInterface, VersionHistory};
use crate::messages::grv::{GlobalConfigRefreshReply, GlobalConfigRefreshRequest};
use crate::messages::types::{KeyRange, KeyValue};
use crate::messages::{decode_reply, ErrorOr};
use crate::part::{requests_in, Answer, Part, PartCx, Requests};
use crate::route::Loss;
use crate::ryw::range_read::remove_or_equal;
use crate::time::Instant;
use crate::transaction::SpecialRead;
use crate::tuple::Element;
use crate::uid::Uid;

/// `\xff\xff/global_config/`.
pub const GLOBAL_CONFIG_MODULE: (&[u8], &[u8]) =
    (b"\xff\xff/global_config/", b"\xff\xff/global_config0");
/// `globalConfigKeysPrefix`: where the values live.
pub const GLOBAL_CONFIG_KEYS_PREFIX: &[u8] = b"\xff/globalConfig/k/";
/// `GLOBAL_CONFIG_REFRESH_BACKOFF` and `_MAX_BACKOFF`.
const BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How long `refresh` waits before asking again a proxy behind the newest version seen.
const BEHIND_DELAY: Duration = Duration::from_millis(250);

/// `transactionTagSampleRate`: the fraction of reads that carry their transaction's
/// auto-throttle tags (`READ_TAG_SAMPLE_RATE` when unset).
pub(crate) const TRANSACTION_TAG_SAMPLE_RATE: &[u8] = b"config/transaction_tag_sample_rate";

/// `globalConfigHistoryPrefix`: one key per commit, ending in its versionstamp.
pub const GLOBAL_CONFIG_HISTORY_PREFIX: &[u8] = b"\xff/globalConfig/h/";
/// `globalConfigVersionKey`: the versionstamp of the last commit (the cluster controller
/// watches it to send the history out).
pub const GLOBAL_CONFIG_VERSION_KEY: &[u8] = b"\xff/globalConfig/v";
/// `VersionHistory`'s file identifier.
const VERSION_HISTORY_FILE_IDENTIFIER: u32 = 5_863_456;

/// The value of a history key (`GlobalConfig::applyChanges`): the commit's mutations as a
/// `VersionHistory` of version 0, serialized with the protocol version in front
/// (`ObjectWriter` with `IncludeVersion`), as the cluster controller reads it back. The
/// version must be the cluster's (`protocol`): a cluster controller that finds another one
/// publishes no history at all, only "refresh everything", to every client.
pub fn history_value(
    mutations: Vec<crate::messages::commit::MutationRef>,
    protocol: crate::version::Protocol,
) -> Vec<u8> {
    let vh = VersionHistory {
        mutations,
        version: 0,
    };
    let mut out = protocol.version().0.to_le_bytes().to_vec();
    out.extend(crate::serializer::encode_with(
        &vh,
        VERSION_HISTORY_FILE_IDENTIFIER,
    ));
    out
}

/// One value, as `GlobalConfig::insert` keeps it.
#[derive(Clone, Debug, PartialEq)]
enum ConfigValue {
    Str(Bytes),
    Int(i64),
    Bool(bool),
    Float(f32),
    Double(f64),
    Versionstamp,
}

impl ConfigValue {
    /// `Tuple::unpack` and the first element's type; `None` for what libfdb_c leaves out.
    fn parse(v: &[u8]) -> Option<ConfigValue> {
        let t: Vec<Element<'_>> = crate::tuple::unpack(v).ok()?;
        Some(match t.first()? {
            Element::String(s) => ConfigValue::Str(Bytes::copy_from_slice(s.as_bytes())),
            Element::Int(i) => ConfigValue::Int(*i),
            Element::Bool(b) => ConfigValue::Bool(*b),
            Element::Float(f) => ConfigValue::Float(*f),
            Element::Double(d) => ConfigValue::Double(*d),
            Element::Versionstamp(_) => ConfigValue::Versionstamp,
            _ => return None,
        })
    }

    /// The value as `GlobalConfigImpl::getRange` shows it; `None` for a versionstamp.
    fn text(&self) -> Option<Bytes> {
        let s = match self {
            ConfigValue::Str(b) => return Some(b.clone()),
            ConfigValue::Int(i) => alloc::format!("{i}"),
            ConfigValue::Bool(b) => String::from(if *b { "1" } else { "0" }),
            ConfigValue::Float(f) => fixed6(f64::from(*f)),
            ConfigValue::Double(d) => fixed6(*d),
            ConfigValue::Versionstamp => return None,
        };
        Some(Bytes::from(s.into_bytes()))
    }
}

/// `std::to_string` of a float or double (`%f`).
fn fixed6(d: f64) -> String {
    if d.is_nan() {
        return String::from(if d.is_sign_negative() { "-nan" } else { "nan" });
    }
    alloc::format!("{d:.6}")
}

/// Where the refresh stands.
#[derive(Clone, Debug, PartialEq)]
enum State {
    /// Nobody read the module yet.
    Unused,
    /// Reading the whole configuration: until a reply of at least `largest_seen`.
    Refreshing {
        last_known: i64,
        largest_seen: i64,
        /// Not before (a retry's backoff).
        at: Option<Instant>,
        sent: bool,
        backoff: Duration,
    },
    Ready,
}

/// A module read waiting for the first refresh.
#[derive(Debug)]
struct Waiting {
    tx: TransactionId,
    read: SpecialRead,
}

/// The refresh's route: it serves every read waiting, so no request of its own.
const REFRESH: RequestId = RequestId(0);

/// The view and its refresh.
#[derive(Debug)]
pub(crate) struct GlobalConfig {
    data: BTreeMap<Bytes, ConfigValue>,
    last_update: i64,
    state: State,
    /// The `ClientDBInfo` (by id) whose history the view has taken in.
    applied: Option<Uid>,
    waiting: Requests<Waiting>,
}

impl Default for GlobalConfig {
    fn default() -> Self {
        GlobalConfig {
            data: BTreeMap::new(),
            last_update: 0,
            state: State::Unused,
            applied: None,
            waiting: Requests::default(),
        }
    }
}

/// Whether `read` stays inside the module (the reads this view answers).
pub(crate) fn is_module_read(read: &SpecialRead) -> bool {
    let (b, e) = match read {
        SpecialRead::Get(key) => {
            return GLOBAL_CONFIG_MODULE.0 <= key.as_ref() && key.as_ref() < GLOBAL_CONFIG_MODULE.1
        }
        SpecialRead::Range(b, e, _) => {
            let (mut b, mut e) = (b.clone(), e.clone());
            remove_or_equal(&mut b);
            remove_or_equal(&mut e);
            (b.key, e.key)
        }
    };
    let (mb, me) = GLOBAL_CONFIG_MODULE;
    mb <= b.as_ref() && b.as_ref() < me && mb <= e.as_ref() && e.as_ref() <= me
}

impl GlobalConfig {
    /// A module read: answered once the view has been read (see [`GlobalConfig::poll`]).
    pub(crate) fn start(&mut self, req: RequestId, tx: TransactionId, read: SpecialRead) {
        self.waiting.start(req, Waiting { tx, read });
        if self.state == State::Unused {
            self.begin_refresh(-1, 0);
        }
    }

    /// `GlobalConfig::get<double>(name, default)`: the value if the view holds a double
    /// there, else `default` (libfdb_c's `any_cast` takes only a double).
    pub(crate) fn get_double(&self, name: &[u8], default: f64) -> f64 {
        match self.data.get(name) {
            Some(ConfigValue::Double(d)) => *d,
            _ => default,
        }
    }

    /// `GlobalConfig::refresh`: the view starts empty, then takes the proxy's rows.
    fn begin_refresh(&mut self, last_known: i64, largest_seen: i64) {
        self.data.clear();
        self.state = State::Refreshing {
            last_known,
            largest_seen,
            at: None,
            sent: false,
            backoff: BACKOFF,
        };
    }

    /// The module's rows (`[begin, end)` of the space and the rows there), or
    /// `internal_error` where a versionstamp would show.
    pub(crate) fn rows(&self) -> Result<Vec<KeyValue>, ClientError> {
        let mut out = Vec::with_capacity(self.data.len());
        for (name, v) in &self.data {
            let value = v
                .text()
                .ok_or(ClientError::Fdb(ErrorCode::INTERNAL_ERROR))?;
            out.push(KeyValue {
                key: Bytes::from([GLOBAL_CONFIG_MODULE.0, name].concat()),
                value,
            });
        }
        Ok(out)
    }

    /// The whole module, which [`GlobalConfig::rows`] covers.
    pub(crate) fn covered() -> KeyRange {
        KeyRange {
            begin: Bytes::from_static(GLOBAL_CONFIG_MODULE.0),
            end: Bytes::from_static(GLOBAL_CONFIG_MODULE.1),
        }
    }

    /// The proxy's answer to the refresh.
    fn refreshed(&mut self, now: Instant, message: &Bytes) {
        let State::Refreshing {
            largest_seen,
            backoff,
            ..
        } = self.state.clone()
        else {
            return;
        };
        match decode_reply::<GlobalConfigRefreshReply>(message) {
            Ok(ErrorOr::Ok(reply)) => {
                for kv in &reply.result.data {
                    if let Some(name) = kv.key.strip_prefix(GLOBAL_CONFIG_KEYS_PREFIX) {
                        self.insert(&Bytes::copy_from_slice(name), &kv.value);
                    }
                }
                if reply.version >= largest_seen || largest_seen == i64::MAX {
                    self.last_update = reply.version;
                    self.state = State::Ready;
                } else {
                    self.retry(now + BEHIND_DELAY, backoff);
                }
            }
            _ => self.back_off(now),
        }
    }

    /// Asks again once the backoff has passed, and doubles it for the next failure.
    fn back_off(&mut self, now: Instant) {
        if let State::Refreshing { backoff, .. } = self.state {
            self.retry(now + backoff, (backoff * 2).min(MAX_BACKOFF));
        }
    }

    fn retry(&mut self, at: Instant, next_backoff: Duration) {
        if let State::Refreshing {
            at: when,
            sent,
            backoff,
            ..
        } = &mut self.state
        {
            *when = Some(at);
            *sent = false;
            *backoff = next_backoff;
        }
    }

    /// One pass of the updater over `info.history`.
    fn apply_history(&mut self, info: &ClientDBInfo) {
        let history: &[VersionHistory] = &info.history;
        let (Some(first), Some(last)) = (history.first(), history.last()) else {
            self.applied = Some(info.id);
            return;
        };
        if self.last_update < first.version {
            self.begin_refresh(self.last_update, last.version);
            // After it, the history is looked at again unless it was marked stale.
            self.applied = (first.version == i64::MAX).then_some(info.id);
            return;
        }
        for vh in history {
            if vh.version <= self.last_update {
                continue;
            }
            for m in &vh.mutations {
                match m.kind {
                    0 => self.insert(&m.param1, &m.param2),
                    1 => self.data.retain(|k, _| !(m.param1 <= *k && *k < m.param2)),
                    _ => {}
                }
            }
            self.last_update = vh.version;
        }
        self.applied = Some(info.id);
    }

    /// `GlobalConfig::insert`: the old value goes; the new one stays if it parses.
    fn insert(&mut self, name: &Bytes, value: &[u8]) {
        self.data.remove(name);
        if let Some(v) = ConfigValue::parse(value) {
            self.data.insert(name.clone(), v);
        }
    }
}

impl Part for GlobalConfig {
    type Leg = ();

    requests_in!(waiting);

    fn poll_timeout(&self) -> Option<Instant> {
        match &self.state {
            State::Refreshing {
                at: Some(t),
                sent: false,
                ..
            } => Some(*t),
            _ => None,
        }
    }

    /// Sends the refresh when due, takes in a new `ClientDBInfo`'s history, and answers the
    /// reads waiting once the view is current.
    fn poll(&mut self, cx: &mut PartCx<'_>) {
        let Some(info) = cx.monitor.info() else {
            return;
        };
        // The updater's loop: each pass either applies the history or refreshes.
        for _ in 0..4 {
            if self.state != State::Ready || self.applied == Some(info.id) {
                break;
            }
            self.apply_history(info);
        }
        if let State::Refreshing {
            last_known,
            at,
            sent,
            ..
        } = &mut self.state
        {
            if !*sent && at.is_none_or(|t| t <= cx.now()) {
                let proxies = info.grv_proxy_streams(GrvProxyInterface::REFRESH_GLOBAL_CONFIG);
                let last_known = *last_known;
                let ask = |reply| GlobalConfigRefreshRequest { last_known, reply };
                if cx.ask_one(&proxies, REFRESH, (), ask) {
                    *sent = true;
                } else {
                    // Every proxy's endpoint is gone: try again after the backoff, as
                    // libfdb_c's refresh does once its load balance gives up, rather than
                    // leave a due timer that wakes the driver for nothing.
                    self.back_off(cx.now());
                }
            }
        }
        if self.state == State::Ready && self.applied == Some(info.id) {
            let rows = self.rows();
            for (req, w) in self.waiting.take_done(|_| true) {
                let result = rows.clone().map(|rows| (rows, GlobalConfig::covered()));
                let (tx, read) = (w.tx, w.read);
                cx.answer(Answer {
                    req,
                    tx,
                    read,
                    result,
                });
            }
        }
    }

    fn on_reply(&mut self, cx: &mut PartCx<'_>, _: RequestId, _: (), message: &Bytes) {
        self.refreshed(cx.now(), message);
    }

    /// The refresh got no reply: ask again after the backoff.
    fn on_lost(&mut self, cx: &mut PartCx<'_>, _: RequestId, _: (), _why: Loss) {
        self.back_off(cx.now());
    }

    /// The refresh goes to a GRV proxy.
    fn asks_proxies(_: ()) -> bool {
        true
    }
}

/// The fuzz target's drive of the view (`fuzzing::global_config`): `message` as the proxy's
/// refresh reply, then as a `ClientDBInfo` whose history the view takes in. The rows it
/// answers stay inside the module, in order, once each, whatever the bytes.
pub(crate) fn fuzz_view(message: &Bytes) {
    let mut view = GlobalConfig::default();
    view.begin_refresh(-1, 0);
    view.refreshed(Instant::ZERO, message);
    check_rows(&view);
    if let Ok(ErrorOr::Ok(info)) = decode_reply::<ClientDBInfo>(message) {
        view.state = State::Ready;
        for _ in 0..4 {
            view.apply_history(&info);
        }
        check_rows(&view);
    }
}

fn check_rows(view: &GlobalConfig) {
    match view.rows() {
        Ok(rows) => {
            let (b, e) = GLOBAL_CONFIG_MODULE;
            for w in rows.windows(2) {
                assert!(w[0].key < w[1].key, "rows out of order");
            }
            for r in &rows {
                assert!(
                    b <= r.key.as_ref() && r.key.as_ref() < e,
                    "a row outside the module"
                );
            }
        }
        Err(e) => assert_eq!(e, ClientError::Fdb(ErrorCode::INTERNAL_ERROR)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_value_is_what_libfdb_c_writes() {
        // libfdb_c 7.3.77's value for a commit setting `probe_key` to `hello`.
        let theirs = "00000073b000db0f2400000020785900000000000a000d000c0004000800060008000400\
            080010000c0004000e000000040000001000000000000000000000000400000001000000040000003800\
            00001800000008000000000000000500000068656c6c6f0000000900000070726f62655f6b6579000000";
        let m = alloc::vec![crate::messages::commit::MutationRef {
            kind: 0,
            param1: Bytes::from_static(b"probe_key"),
            param2: Bytes::from_static(b"hello"),
        }];
        let ours = history_value(m.clone(), crate::version::Protocol::V7_3);
        let hex: String = ours.iter().map(|b| alloc::format!("{b:02x}")).collect();
        assert_eq!(hex, theirs);
        // On a 7.4 cluster only the version in front differs.
        let v74 = history_value(m, crate::version::Protocol::V7_4);
        assert_eq!(&v74[..8], &0x0FDB_00B0_7400_0000u64.to_le_bytes());
        assert_eq!(v74[8..], ours[8..]);
    }

    #[test]
    fn values_show_as_libfdb_c_prints_them() {
        let text = |packed: Vec<u8>| {
            ConfigValue::parse(&packed)
                .and_then(|v| v.text())
                .map(|b| String::from_utf8(b.to_vec()).unwrap())
        };
        assert_eq!(text(crate::tuple::pack(&("abc",))).as_deref(), Some("abc"));
        assert_eq!(text(crate::tuple::pack(&(-42i64,))).as_deref(), Some("-42"));
        assert_eq!(text(crate::tuple::pack(&(true,))).as_deref(), Some("1"));
        assert_eq!(
            text(crate::tuple::pack(&(0.5f64,))).as_deref(),
            Some("0.500000")
        );
        assert_eq!(
            text(crate::tuple::pack(&(1.25f32,))).as_deref(),
            Some("1.250000")
        );
        assert_eq!(text(b"hello".to_vec()), None, "not a tuple");
        assert_eq!(text(Vec::new()), None, "an empty tuple");
        assert_eq!(text(crate::tuple::pack(&(b"raw".to_vec(),))), None, "bytes");
    }
}
