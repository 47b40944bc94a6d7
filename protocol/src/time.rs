//! Time and randomness, both supplied from outside so the core stays deterministic.

use core::ops::{Add, Sub};
use core::time::Duration;

use crate::uid::Uid;

/// A point in time: the duration since an origin the driver chooses (any monotonic clock).
/// The core never reads a clock; drivers pass `now` in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub Duration);

impl Instant {
    /// The clock's origin.
    pub const ZERO: Instant = Instant(Duration::ZERO);

    /// `s` seconds after the origin.
    pub fn from_secs_f64(s: f64) -> Self {
        Instant(Duration::from_secs_f64(s))
    }

    /// Time elapsed since `earlier`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0 + d)
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d))
    }
}

/// A small deterministic generator (SplitMix64) for reply tokens, jitter and replica choice.
/// Same seed, same sequence: that is what makes the state machine replayable.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next random number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn random01(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[0, n)`; `n` must be non-zero.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// A fresh random UID. Never a well-known token.
    pub fn uid(&mut self) -> Uid {
        loop {
            let u = Uid::new(self.next_u64(), self.next_u64());
            if !u.is_well_known() && u != Uid::default() {
                return u;
            }
        }
    }

    /// `d` scaled by FDB's `delayJittered` factor, uniform in `[0.9, 1.1)`.
    pub fn jittered(&mut self, d: Duration) -> Duration {
        d.mul_f64(0.9 + 0.2 * self.random01())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }

    #[test]
    fn ranges() {
        let mut r = Rng::new(3);
        for _ in 0..1000 {
            let x = r.random01();
            assert!((0.0..1.0).contains(&x));
            assert!(r.below(5) < 5);
            let j = r.jittered(Duration::from_secs(1));
            assert!(j >= Duration::from_millis(900) && j < Duration::from_millis(1100));
            assert!(!r.uid().is_well_known());
        }
    }

    #[test]
    fn instant_arithmetic() {
        let t = Instant::from_secs_f64(1.5);
        assert_eq!((t + Duration::from_millis(500)).0, Duration::from_secs(2));
        assert_eq!(
            t.saturating_since(t + Duration::from_secs(1)),
            Duration::ZERO
        );
        assert_eq!((t - Duration::from_secs(9)), Instant::ZERO);
    }
}
