//! Paired block ratios: geometric mean and a block-bootstrap 95% interval.

use crate::workload::Rng;

/// The geometric mean of positive ratios (`None` when empty or any is not positive/finite).
pub fn geomean(ratios: &[f64]) -> Option<f64> {
    if ratios.is_empty() || ratios.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
        return None;
    }
    Some((ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp())
}

/// A ratio estimate: geometric mean over blocks and its bootstrap interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub geomean: f64,
    pub lo: f64,
    pub hi: f64,
    pub blocks: usize,
}

/// Block bootstrap: resamples whole blocks (each block's paired ratio) with replacement,
/// `resamples` times, and takes the 2.5th and 97.5th percentiles of the resampled geometric
/// means. Seeded, so the same inputs give the same interval. With one block the interval
/// is the point itself.
pub fn bootstrap(ratios: &[f64], resamples: usize, seed: u64) -> Option<Estimate> {
    let point = geomean(ratios)?;
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    let n = logs.len();
    let mut rng = Rng::new(seed);
    let mut means: Vec<f64> = (0..resamples.max(1))
        .map(|_| (0..n).map(|_| logs[rng.below(n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| -> f64 {
        let i = ((means.len() - 1) as f64 * q).round() as usize;
        means[i].exp()
    };
    Some(Estimate {
        geomean: point,
        lo: at(0.025),
        hi: at(0.975),
        blocks: n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geomean_basics() {
        assert_eq!(geomean(&[]), None);
        assert_eq!(geomean(&[1.0, 0.0]), None);
        let g = geomean(&[0.5, 2.0]).unwrap();
        assert!((g - 1.0).abs() < 1e-12);
        let g = geomean(&[0.25, 1.0]).unwrap();
        assert!((g - 0.5).abs() < 1e-12);
    }

    #[test]
    fn bootstrap_is_seeded_and_brackets_the_point() {
        let r = [0.52, 0.61, 0.55, 0.58, 0.49, 0.66];
        let a = bootstrap(&r, 2000, 42).unwrap();
        let b = bootstrap(&r, 2000, 42).unwrap();
        assert_eq!(a, b);
        assert!(a.lo <= a.geomean && a.geomean <= a.hi);
        assert!(a.lo >= 0.49 && a.hi <= 0.66);
        assert_eq!(a.blocks, 6);
        let one = bootstrap(&[0.7], 100, 1).unwrap();
        assert!((one.lo - 0.7).abs() < 1e-12 && (one.hi - 0.7).abs() < 1e-12);
    }
}
