//! The tag throttles a database remembers (`DatabaseContext::throttledTags`, one
//! `ClientTagThrottleData` per priority and tag): learnt from the `tagThrottleInfo` of every
//! read version reply, they refuse later transactions carrying a throttled tag before any
//! request is sent, until the throttle expires.
//!
//! The wire carries a throttle's expiration as a duration from the proxy's now
//! (`ClientTagThrottleLimits::serialize`), so it is re-based on this core's clock when the
//! reply arrives, as libfdb_c does on its own.
//!
//! libfdb_c drops expired throttles every `TAG_THROTTLE_EXPIRATION_INTERVAL` from a recurring
//! timer started with the database; here the same sweeps run when the state is next used,
//! each at the time it was due, counted from the first use.

use alloc::collections::BTreeMap;
use bytes::Bytes;

use crate::messages::grv::{Priority, TagCount, TagThrottleEntry};
use crate::time::Instant;

/// `READ_TAG_SAMPLE_RATE`: the fraction of reads that carry their transaction's read tags,
/// unless the global configuration says otherwise.
pub(crate) const READ_TAG_SAMPLE_RATE: f64 = 0.01;
/// `TAG_THROTTLE_SMOOTHING_WINDOW` (seconds): the folding time of the rate smoothers.
pub(crate) const TAG_THROTTLE_SMOOTHING_WINDOW: f64 = 2.0;
/// `TAG_THROTTLE_RECHECK_INTERVAL` (seconds): how long a throttled tag is refused before a
/// transaction may ask the proxy again whether it still is.
pub(crate) const TAG_THROTTLE_RECHECK_INTERVAL: f64 = 5.0;
/// `TAG_THROTTLE_EXPIRATION_INTERVAL` (seconds): the period of the sweep of expired throttles.
pub(crate) const TAG_THROTTLE_EXPIRATION_INTERVAL: f64 = 60.0;

fn secs(t: Instant) -> f64 {
    t.0.as_secs_f64()
}

/// `e^x` to double precision (`core` has no `exp`): `2^k * e^r` with `|r| <= ln 2 / 2`,
/// `e^r` by its series.
fn exp(x: f64) -> f64 {
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    if x.is_nan() {
        return x;
    }
    if x > 709.0 {
        return f64::INFINITY;
    }
    if x < -745.0 {
        return 0.0;
    }
    let k = (x / core::f64::consts::LN_2 + if x < 0.0 { -0.5 } else { 0.5 }) as i32;
    let r = (x - k as f64 * LN2_HI) - k as f64 * LN2_LO;
    let (mut sum, mut term) = (1.0, 1.0);
    for n in 1..=16 {
        term *= r / n as f64;
        sum += term;
    }
    // 2^k in two steps, so that k below -1022 stays in range.
    let half = k / 2;
    let pow2 = |e: i32| f64::from_bits(((e + 1023) as u64) << 52);
    sum * pow2(half) * pow2(k - half)
}

/// flow's `Smoother`: exponential smoothing of a running total.
#[derive(Clone, Debug)]
struct Smoother {
    folding: f64,
    total: f64,
    time: f64,
    estimate: f64,
}

impl Smoother {
    fn new(folding: f64) -> Self {
        let mut s = Smoother {
            folding,
            total: 0.0,
            time: 0.0,
            estimate: 0.0,
        };
        s.reset(0.0);
        s
    }

    fn reset(&mut self, value: f64) {
        self.time = 0.0;
        self.total = value;
        self.estimate = value;
    }

    fn update(&mut self, t: f64) {
        let elapsed = t - self.time;
        if elapsed != 0.0 {
            self.time = t;
            self.estimate += (self.total - self.estimate) * (1.0 - exp(-elapsed / self.folding));
        }
    }

    fn set_total(&mut self, total: f64, t: f64) {
        self.add_delta(total - self.total, t);
    }

    fn add_delta(&mut self, delta: f64, t: f64) {
        self.update(t);
        self.total += delta;
    }

    fn smooth_total(&mut self, t: f64) -> f64 {
        self.update(t);
        self.estimate
    }

    fn smooth_rate(&mut self, t: f64) -> f64 {
        self.update(t);
        (self.total - self.estimate) / self.folding
    }
}

/// `ClientTagThrottleData`: one tag's throttle at one priority.
#[derive(Clone, Debug)]
struct Throttle {
    tps_rate: f64,
    /// On this core's clock, in seconds.
    expiration: f64,
    last_check: f64,
    rate_set: bool,
    smooth_rate: Smoother,
    smooth_released: Smoother,
}

impl Throttle {
    fn new(now: f64, tps_rate: f64, expiration: f64) -> Self {
        let mut smooth_rate = Smoother::new(TAG_THROTTLE_SMOOTHING_WINDOW);
        smooth_rate.reset(tps_rate);
        Throttle {
            tps_rate,
            expiration,
            last_check: now,
            rate_set: false,
            smooth_rate,
            smooth_released: Smoother::new(TAG_THROTTLE_SMOOTHING_WINDOW),
        }
    }

    fn update(&mut self, now: f64, tps_rate: f64, expiration: f64) {
        self.tps_rate = tps_rate;
        if !self.rate_set || self.expired(now) {
            self.rate_set = true;
            self.smooth_rate.reset(tps_rate);
        } else {
            self.smooth_rate.set_total(tps_rate, now);
        }
        self.expiration = expiration;
    }

    fn expired(&self, now: f64) -> bool {
        self.expiration <= now
    }

    fn can_recheck(&self, now: f64) -> bool {
        self.last_check < now - TAG_THROTTLE_RECHECK_INTERVAL
    }

    /// `throttleDuration`: how long a transaction with this tag would have to wait, zero
    /// while the smoothed rate leaves room for one more transaction in the window.
    fn duration(&mut self, now: f64) -> f64 {
        if self.expiration <= now {
            return 0.0;
        }
        let capacity = (self.smooth_rate.smooth_total(now) - self.smooth_released.smooth_rate(now))
            * TAG_THROTTLE_SMOOTHING_WINDOW;
        if capacity >= 1.0 {
            return 0.0;
        }
        if self.tps_rate == 0.0 {
            return (self.expiration - now).max(0.0);
        }
        (self.expiration - now).min(capacity / self.tps_rate)
    }
}

/// The remembered throttles, by priority and tag.
#[derive(Debug, Default)]
pub(crate) struct TagThrottles {
    by_priority: BTreeMap<Priority, BTreeMap<Bytes, Throttle>>,
    /// When the next sweep of expired throttles is due (seconds); `None` before first use.
    next_sweep: Option<f64>,
}

impl TagThrottles {
    /// Runs the sweeps due by `now` and hands back the throttles of `priority`.
    fn at(&mut self, now: f64, priority: Priority) -> &mut BTreeMap<Bytes, Throttle> {
        let mut due = *self
            .next_sweep
            .get_or_insert(now + TAG_THROTTLE_EXPIRATION_INTERVAL);
        while due <= now {
            for tags in self.by_priority.values_mut() {
                tags.retain(|_, t| !t.expired(due));
            }
            due += TAG_THROTTLE_EXPIRATION_INTERVAL;
        }
        self.next_sweep = Some(due);
        self.by_priority.entry(priority).or_default()
    }

    /// `Transaction::getReadVersion`: whether a transaction with `tags` is refused with
    /// `tag_throttled` before it asks for a read version. A throttled tag is refused until
    /// `TAG_THROTTLE_RECHECK_INTERVAL` has passed since it was last let through to the proxy
    /// (as in libfdb_c, the last of the transaction's throttled tags decides that).
    pub(crate) fn refuse_before_grv(
        &mut self,
        now: Instant,
        priority: Priority,
        tags: &[Bytes],
    ) -> bool {
        let now = secs(now);
        let throttles = self.at(now, priority);
        let mut max_delay: f64 = 0.0;
        let mut can_recheck = false;
        for tag in tags {
            let Some(t) = throttles.get_mut(tag) else {
                continue;
            };
            if t.expired(now) {
                throttles.remove(tag);
            } else {
                max_delay = max_delay.max(t.duration(now));
                can_recheck = t.can_recheck(now);
            }
        }
        if max_delay > 0.0 && !can_recheck {
            return true;
        }
        for tag in tags {
            if let Some(t) = throttles.get_mut(tag) {
                t.last_check = now;
            }
        }
        false
    }

    /// `getConsistentReadVersion`: a reply to a batch that asked with `asked` at `priority`.
    /// A tag the reply throttles is learnt (or its throttle updated); a tag it leaves out
    /// is no longer throttled.
    pub(crate) fn learn(
        &mut self,
        now: Instant,
        priority: Priority,
        asked: &[TagCount],
        info: &[TagThrottleEntry],
    ) {
        if asked.is_empty() {
            return;
        }
        let now = secs(now);
        let throttles = self.at(now, priority);
        for a in asked {
            match info.iter().find(|e| e.tag == a.tag) {
                None => {
                    throttles.remove(&a.tag);
                }
                Some(e) => {
                    let (rate, expiration) = (e.limits.tps_rate, now + e.limits.duration);
                    throttles
                        .entry(a.tag.clone())
                        .and_modify(|t| t.update(now, rate, expiration))
                        .or_insert_with(|| Throttle::new(now, rate, expiration));
                }
            }
        }
    }

    /// `extractReadVersion`: whether a transaction with `tags` that got its read version
    /// fails with `tag_throttled`; if not, it counts as released against each known
    /// throttle of its tags.
    pub(crate) fn refuse_after_grv(
        &mut self,
        now: Instant,
        priority: Priority,
        tags: &[Bytes],
    ) -> bool {
        if tags.is_empty() {
            return false;
        }
        let now = secs(now);
        let throttles = self.at(now, priority);
        for tag in tags {
            let Some(t) = throttles.get_mut(tag) else {
                continue;
            };
            if t.expired(now) {
                throttles.remove(tag);
            } else if t.duration(now) > 0.0 {
                return true;
            }
        }
        for tag in tags {
            if let Some(t) = throttles.get_mut(tag) {
                t.smooth_released.add_delta(1.0, now);
            }
        }
        false
    }

    /// `Transaction::getBackoff` for `tag_throttled`: the delay before jitter, raised to the
    /// longest throttle of the transaction's tags, at most `TAG_THROTTLE_RECHECK_INTERVAL`.
    pub(crate) fn backoff(
        &mut self,
        now: Instant,
        priority: Priority,
        tags: &[Bytes],
        backoff: f64,
    ) -> f64 {
        let now = secs(now);
        let throttles = self.at(now, priority);
        let mut b = backoff;
        for tag in tags {
            if let Some(t) = throttles.get_mut(tag) {
                b = b.max(TAG_THROTTLE_RECHECK_INTERVAL.min(t.duration(now)));
                if b == TAG_THROTTLE_RECHECK_INTERVAL {
                    break;
                }
            }
        }
        b
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::messages::grv::ClientTagThrottleLimits;
    use alloc::vec;
    use alloc::vec::Vec;

    fn at(s: f64) -> Instant {
        Instant::from_secs_f64(s)
    }

    fn entry(tag: &'static [u8], tps_rate: f64, duration: f64) -> TagThrottleEntry {
        TagThrottleEntry {
            tag: Bytes::from_static(tag),
            limits: ClientTagThrottleLimits { tps_rate, duration },
        }
    }

    fn asked(tag: &'static [u8]) -> Vec<TagCount> {
        vec![TagCount {
            tag: Bytes::from_static(tag),
            count: 1,
        }]
    }

    #[test]
    fn exp_matches_std() {
        for x in [-700.0, -30.5, -2.0, -0.5, -1e-9, 0.0, 0.25, 1.0, 3.7, 100.0] {
            let (got, want) = (exp(x), std::primitive::f64::exp(x));
            assert!(((got - want) / want).abs() < 1e-15, "{x}: {got} vs {want}");
        }
    }

    #[test]
    fn a_rate_admits_its_share_of_transactions() {
        let mut th = TagThrottles::default();
        let hot = [Bytes::from_static(b"hot")];
        let p = Priority::Default;
        // One transaction a second: a capacity of (1 - released rate) * 2 s.
        th.learn(at(10.0), p, &asked(b"hot"), &[entry(b"hot", 1.0, 30.0)]);
        assert!(!th.refuse_after_grv(at(10.0), p, &hot));
        assert!(!th.refuse_after_grv(at(10.0), p, &hot));
        // Two released: half a second later the capacity is 2 * (1 - e^-0.25) = 0.44, less
        // than a transaction, and the wait is capacity / rate.
        assert!(th.refuse_after_grv(at(10.5), p, &hot));
        let b = th.backoff(at(10.5), p, &hot, 0.01);
        assert!((b - 2.0 * (1.0 - exp(-0.25))).abs() < 1e-9, "{b}");
        // The released rate decays: room again.
        assert!(!th.refuse_after_grv(at(13.0), p, &hot));
        // Another priority, or another tag, knows of no throttle.
        assert!(!th.refuse_after_grv(at(10.5), Priority::Batch, &hot));
    }

    #[test]
    fn a_rate_of_zero_refuses_until_expiry_and_backs_off_at_most_the_recheck_interval() {
        let mut th = TagThrottles::default();
        let t = [Bytes::from_static(b"t")];
        th.learn(
            at(1.0),
            Priority::Default,
            &asked(b"t"),
            &[entry(b"t", 0.0, 8.0)],
        );
        assert!(th.refuse_after_grv(at(1.0), Priority::Default, &t));
        assert_eq!(th.backoff(at(1.0), Priority::Default, &t, 0.01), 5.0);
        assert_eq!(th.backoff(at(6.0), Priority::Default, &t, 0.01), 3.0);
        // Refused before asking until the recheck interval has passed since it was learnt.
        assert!(th.refuse_before_grv(at(5.9), Priority::Default, &t));
        assert!(!th.refuse_before_grv(at(6.1), Priority::Default, &t));
        // Just rechecked: refused again for another interval.
        assert!(th.refuse_before_grv(at(8.0), Priority::Default, &t));
        assert!(!th.refuse_before_grv(at(9.0), Priority::Default, &t));
        assert!(!th.refuse_after_grv(at(9.0), Priority::Default, &t));
    }

    #[test]
    fn expired_throttles_are_swept_on_the_interval() {
        let mut th = TagThrottles::default();
        th.learn(
            at(0.0),
            Priority::Batch,
            &asked(b"t"),
            &[entry(b"t", 0.0, 10.0)],
        );
        assert_eq!(th.by_priority[&Priority::Batch].len(), 1);
        // Expired at 10 s but kept until the sweep due at 60 s.
        th.at(59.0, Priority::Default);
        assert_eq!(th.by_priority[&Priority::Batch].len(), 1);
        th.at(61.0, Priority::Default);
        assert!(th.by_priority[&Priority::Batch].is_empty());
    }
}
