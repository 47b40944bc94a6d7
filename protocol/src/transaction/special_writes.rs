//! Writes into the special key space (`special_key_space_enable_writes`), as RYW keeps them
//! apart from its write map (`specialKeySpaceWriteMap`): each set or clear lands in the
//! write module that holds it, and is acted on only at commit, when the module turns the
//! writes into ordinary mutations (`SpecialKeySpace::commit`).
//!
//! The modules this client acts on are the tenant module (`\xff\xff/management/tenant/`) and
//! the management commands fdbcli drives (exclusions by address and locality, their options,
//! the database lock, consistency-check suspension, data distribution, maintenance, process
//! classes, the coordinators, the version keys); their
//! commits need reads, so the API layer runs them (`fdb-api`), taking the writes out of the
//! core with [`crate::Client::take_special_writes`]; so does the global configuration module.
//! The tracing module acts on its writes at once (`tracing`). A write into libfdb_c's one other
//! write module, the actor profiler's configuration, is refused with `unsupported_operation`
//! rather than kept and never carried out.
//!
//! As in libfdb_c, some modules keep their writes their own way: a set in an exclusion module
//! keeps an empty value whatever was written, and the options module keeps a set only of an
//! option it knows and forgets what a clear covers.

use alloc::vec::Vec;
use bytes::Bytes;

use crate::error::ErrorCode;

/// `\xff\xff/management/tenant/`: the tenant map, configuration and renames.
pub const TENANT_MANAGEMENT_RANGE: (&[u8], &[u8]) = (
    b"\xff\xff/management/tenant/",
    b"\xff\xff/management/tenant0",
);

/// libfdb_c 7.3's write modules (registered `READWRITE` in `DatabaseContext` at API version
/// 730: `profiling/` is gone from 720 on), by key order, and whether this client carries
/// their writes out.
#[rustfmt::skip]
const WRITE_MODULES: [(&[u8], &[u8], bool); 17] = [
    (b"\xff\xff/actor_profiler_conf/", b"\xff\xff/actor_profiler_conf0", false),
    (COORDINATORS_PREFIX, b"\xff\xff/configuration/coordinators0", true),
    (CLASS_TYPE_PREFIX, b"\xff\xff/configuration/process/class_type0", true),
    (b"\xff\xff/global_config/", b"\xff\xff/global_config0", true),
    (b"\xff\xff/management/consistency_check_suspended", b"\xff\xff/management/consistency_check_suspended\x00", true),
    (b"\xff\xff/management/data_distribution/", b"\xff\xff/management/data_distribution0", true),
    (b"\xff\xff/management/db_locked", b"\xff\xff/management/db_locked\x00", true),
    (b"\xff\xff/management/excluded/", b"\xff\xff/management/excluded0", true),
    (b"\xff\xff/management/excluded_locality/", b"\xff\xff/management/excluded_locality0", true),
    (b"\xff\xff/management/failed/", b"\xff\xff/management/failed0", true),
    (b"\xff\xff/management/failed_locality/", b"\xff\xff/management/failed_locality0", true),
    (b"\xff\xff/management/maintenance/", b"\xff\xff/management/maintenance0", true),
    (b"\xff\xff/management/min_required_commit_version", b"\xff\xff/management/min_required_commit_version\x00", true),
    (b"\xff\xff/management/options/", b"\xff\xff/management/options0", true),
    (TENANT_MANAGEMENT_RANGE.0, TENANT_MANAGEMENT_RANGE.1, true),
    (b"\xff\xff/management/version_epoch", b"\xff\xff/management/version_epoch\x00", true),
    (b"\xff\xff/tracing/", b"\xff\xff/tracing0", true),
];

/// `\xff\xff/management/options/`: what the management commands are told (`force`, ...).
const MANAGEMENT_OPTIONS_PREFIX: &[u8] = b"\xff\xff/management/options/";

/// The options the options module keeps (`SpecialKeySpace::options`).
const MANAGEMENT_OPTIONS: [&[u8]; 5] = [
    b"excluded/force",
    b"failed/force",
    b"excluded_locality/force",
    b"failed_locality/force",
    b"worker_interfaces/verify",
];

/// The exclusion modules, whose sets keep an empty value.
const EXCLUSION_MODULES: [&[u8]; 4] = [
    b"\xff\xff/management/excluded/",
    b"\xff\xff/management/excluded_locality/",
    b"\xff\xff/management/failed/",
    b"\xff\xff/management/failed_locality/",
];

/// `\xff\xff/configuration/coordinators/`: fdbcli's `coordinators`.
const COORDINATORS_PREFIX: &[u8] = b"\xff\xff/configuration/coordinators/";

/// `\xff\xff/configuration/process/class_type/`: fdbcli's `setclass`.
const CLASS_TYPE_PREFIX: &[u8] = b"\xff\xff/configuration/process/class_type/";

/// A write its module refuses as it is made, with why (`\xff\xff/error_message`, in
/// libfdb_c's JSON): a clear of a process class (`ProcessClassRangeImpl::clear`, whose two
/// overloads carry each other's message in libfdb_c 7.3), or of the coordinators
/// (`CoordinatorsImpl::clear`).
pub(crate) fn refused_write(
    begin: &[u8],
    value: Option<&Bytes>,
    single: bool,
) -> Option<&'static str> {
    if value.is_some() {
        return None;
    }
    if begin.starts_with(COORDINATORS_PREFIX) {
        return Some(if single {
            r#"{"command":"coordinators","message":"Clear operation is meaningless thus forbidden for coordinators","retriable":false}"#
        } else {
            r#"{"command":"coordinators","message":"Clear range is meaningless thus forbidden for coordinators","retriable":false}"#
        });
    }
    if !begin.starts_with(CLASS_TYPE_PREFIX) {
        return None;
    }
    Some(if single {
        r#"{"command":"setclass","message":"Clear range operation is meaningless thus forbidden for setclass","retriable":false}"#
    } else {
        r#"{"command":"setclass","message":"Clear operation is meaningless thus forbidden for setclass","retriable":false}"#
    })
}

/// The write module holding `key`: its index in [`WRITE_MODULES`].
fn module_of(key: &[u8]) -> Option<usize> {
    WRITE_MODULES
        .iter()
        .position(|(b, e, _)| *b <= key && key < *e)
}

/// Where a write of `[begin, end)` (`begin < end`) goes (`SpecialKeySpace::set` / `clear`):
/// `Ok(())` when this client keeps it, or the error the write fails with.
pub(crate) fn check_module(begin: &[u8], end: &[u8], single: bool) -> Result<(), ErrorCode> {
    let first = module_of(begin);
    if !single {
        // The module of the range's last key (`rangeContainingKeyBefore(end)`).
        let last = WRITE_MODULES
            .iter()
            .position(|(b, e, _)| *b < end && end <= *e);
        if first != last {
            return match (first, last) {
                (None, None) => Err(ErrorCode::SPECIAL_KEYS_NO_WRITE_MODULE_FOUND),
                _ => Err(ErrorCode::SPECIAL_KEYS_CROSS_MODULE_CLEAR),
            };
        }
    }
    match first {
        None => Err(ErrorCode::SPECIAL_KEYS_NO_WRITE_MODULE_FOUND),
        Some(i) if WRITE_MODULES[i].2 => Ok(()),
        Some(_) => Err(ErrorCode::UNSUPPORTED_OPERATION),
    }
}

/// One write: `[begin, end)` set to `value` (a set covers its key alone), or cleared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecialWrite {
    /// Where the write begins.
    pub begin: Bytes,
    /// Where it ends (`key | 0x00` for a single key).
    pub end: Bytes,
    /// The value set, or `None` for a clear.
    pub value: Option<Bytes>,
}

/// The writes, as a map of disjoint ranges in key order: a later write replaces whatever an
/// earlier one left in its range (`KeyRangeMap::insert`).
#[derive(Clone, Debug, Default)]
pub(crate) struct SpecialWriteMap {
    ranges: Vec<SpecialWrite>,
}

impl SpecialWriteMap {
    pub(crate) fn insert(&mut self, begin: Bytes, end: Bytes, value: Option<Bytes>) {
        let mut kept = Vec::with_capacity(self.ranges.len() + 2);
        for r in self.ranges.drain(..) {
            if r.end <= begin || r.begin >= end {
                kept.push(r);
                continue;
            }
            if r.begin < begin {
                kept.push(SpecialWrite {
                    begin: r.begin.clone(),
                    end: begin.clone(),
                    value: r.value.clone(),
                });
            }
            if r.end > end {
                kept.push(SpecialWrite {
                    begin: end.clone(),
                    end: r.end,
                    value: r.value,
                });
            }
        }
        let at = kept.partition_point(|r| r.begin < begin);
        kept.insert(at, SpecialWrite { begin, end, value });
        self.ranges = kept;
    }

    /// Forgets whatever was written in `[begin, end)` (`KeyRangeMap::rawErase`).
    pub(crate) fn erase(&mut self, begin: &[u8], end: &[u8]) {
        self.insert(
            Bytes::copy_from_slice(begin),
            Bytes::copy_from_slice(end),
            None,
        );
        self.ranges.retain(|r| !(r.begin == begin && r.end == end));
    }

    /// A write as its module keeps it (each module's `set` / `clear`): a set in an exclusion
    /// module keeps an empty value; the options module keeps a set of a known option only,
    /// and a clear there forgets the writes it covers (a single-key clear only of a known
    /// option).
    pub(crate) fn write(&mut self, begin: Bytes, end: Bytes, value: Option<Bytes>) {
        let single = end.len() == begin.len() + 1 && end.starts_with(&begin);
        if let Some(option) = begin.strip_prefix(MANAGEMENT_OPTIONS_PREFIX) {
            let option = if single { option } else { b"" };
            let known = MANAGEMENT_OPTIONS.contains(&option);
            match value {
                Some(v) if single && known => self.insert(begin, end, Some(v)),
                Some(_) => {}
                None if !single || known => self.erase(&begin, &end),
                None => {}
            }
            return;
        }
        let exclusion = EXCLUSION_MODULES.iter().any(|m| begin.starts_with(m));
        let value = match value {
            Some(_) if exclusion => Some(Bytes::new()),
            v => v,
        };
        self.insert(begin, end, value);
    }

    /// The writes, kept.
    pub(crate) fn writes(&self) -> &[SpecialWrite] {
        &self.ranges
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub(crate) fn take(&mut self) -> Vec<SpecialWrite> {
        core::mem::take(&mut self.ranges)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn later_writes_replace_earlier_ones_in_their_range() {
        let mut m = SpecialWriteMap::default();
        m.insert(b("a"), b("a\0"), Some(b("1")));
        m.insert(b("c"), b("c\0"), Some(b("2")));
        m.insert(b("b"), b("d"), None);
        m.insert(b("a"), b("a\0"), Some(b("3")));
        let got: Vec<_> = m
            .take()
            .into_iter()
            .map(|w| (w.begin, w.end, w.value))
            .collect();
        assert_eq!(
            got,
            [(b("a"), b("a\0"), Some(b("3"))), (b("b"), b("d"), None),]
        );
        assert!(m.is_empty());
    }

    #[test]
    fn modules_keep_their_writes_their_own_way() {
        let mut m = SpecialWriteMap::default();
        let force = Bytes::from_static(b"\xff\xff/management/options/excluded/force");
        let force_end = Bytes::from_static(b"\xff\xff/management/options/excluded/force\0");
        m.write(force, force_end, Some(b("x")));
        m.write(
            Bytes::from_static(b"\xff\xff/management/options/nonsense"),
            Bytes::from_static(b"\xff\xff/management/options/nonsense\0"),
            Some(b("x")),
        );
        m.write(
            Bytes::from_static(b"\xff\xff/management/excluded/1.2.3.4"),
            Bytes::from_static(b"\xff\xff/management/excluded/1.2.3.4\0"),
            Some(b("ignored")),
        );
        let got: Vec<_> = m.writes().iter().map(|w| w.value.clone()).collect();
        assert_eq!(got, [Some(Bytes::new()), Some(b("x"))]);
        m.write(
            Bytes::from_static(b"\xff\xff/management/options/"),
            Bytes::from_static(b"\xff\xff/management/options0"),
            None,
        );
        assert_eq!(m.writes().len(), 1, "the clear forgot the option");
    }

    #[test]
    fn a_clear_inside_a_range_splits_it() {
        let mut m = SpecialWriteMap::default();
        m.insert(b("a"), b("z"), None);
        m.insert(b("m"), b("m\0"), Some(b("v")));
        let got: Vec<_> = m.take().into_iter().map(|w| (w.begin, w.end)).collect();
        assert_eq!(
            got,
            [(b("a"), b("m")), (b("m"), b("m\0")), (b("m\0"), b("z"))]
        );
    }

    proptest::proptest! {
        /// Against a model of one-byte keys: each key holds the last write covering it, and
        /// the map stays sorted and disjoint.
        #[test]
        fn the_map_keeps_the_last_write_of_each_key(
            writes in proptest::collection::vec((0u8..16, 1u8..6, proptest::option::of(0u8..4)), 0..24)
        ) {
            let mut m = SpecialWriteMap::default();
            let mut model: [Option<Option<u8>>; 24] = [None; 24];
            for (b, len, v) in writes {
                let e = b + len;
                m.insert(Bytes::from(vec![b]), Bytes::from(vec![e]), v.map(|x| Bytes::from(vec![x])));
                for k in b..e {
                    model[k as usize] = Some(v);
                }
            }
            let ranges = m.take();
            for w in ranges.windows(2) {
                proptest::prop_assert!(w[0].end <= w[1].begin);
            }
            for k in 0u8..24 {
                let got = ranges
                    .iter()
                    .find(|r| r.begin[0] <= k && k < r.end[0])
                    .map(|r| r.value.as_ref().map(|v| v[0]));
                proptest::prop_assert_eq!(got, model[k as usize]);
            }
        }
    }

    #[test]
    fn modules_decide_where_a_write_goes() {
        let t = b"\xff\xff/management/tenant/map/x";
        assert_eq!(
            check_module(t, b"\xff\xff/management/tenant/map/x\0", true),
            Ok(())
        );
        assert_eq!(
            check_module(
                b"\xff\xff/management/version_epoch",
                b"\xff\xff/management/version_epoch\0",
                true
            ),
            Ok(())
        );
        assert_eq!(
            check_module(
                b"\xff\xff/actor_profiler_conf/x",
                b"\xff\xff/actor_profiler_conf/x\0",
                true
            ),
            Err(ErrorCode::UNSUPPORTED_OPERATION)
        );
        assert_eq!(
            check_module(b"\xff\xff/nothing", b"\xff\xff/nothing\0", true),
            Err(ErrorCode::SPECIAL_KEYS_NO_WRITE_MODULE_FOUND)
        );
        assert_eq!(
            check_module(
                b"\xff\xff/management/tenant/",
                b"\xff\xff/management/version_epoch",
                false
            ),
            Err(ErrorCode::SPECIAL_KEYS_CROSS_MODULE_CLEAR)
        );
        assert_eq!(
            check_module(TENANT_MANAGEMENT_RANGE.0, TENANT_MANAGEMENT_RANGE.1, false),
            Ok(())
        );
    }
}
