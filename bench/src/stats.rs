//! Summary statistics over measured durations: median and p99 by the nearest-rank method.

use serde_json::{Value, json};

/// A summary of a set of samples in microseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub median: f64,
    pub p99: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

/// The nearest-rank percentile of sorted samples: the smallest value with at least `p` percent
/// of the samples at or below it.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The median: the mean of the two middle values for an even count.
pub fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

impl Summary {
    pub fn of(samples: &[f64]) -> Summary {
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        Summary {
            count: s.len(),
            median: median(&s),
            p99: percentile(&s, 99.0),
            mean: if s.is_empty() {
                f64::NAN
            } else {
                s.iter().sum::<f64>() / s.len() as f64
            },
            min: s.first().copied().unwrap_or(f64::NAN),
            max: s.last().copied().unwrap_or(f64::NAN),
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "count": self.count,
            "median_us": round(self.median),
            "p99_us": round(self.p99),
            "mean_us": round(self.mean),
            "min_us": round(self.min),
            "max_us": round(self.max),
        })
    }
}

/// Rounds to 0.1 so that results files stay readable.
pub fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[1.0, 2.0, 3.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 3.0, 10.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn nearest_rank_percentiles() {
        let s: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&s, 99.0), 99.0);
        assert_eq!(percentile(&s, 100.0), 100.0);
        assert_eq!(percentile(&s, 50.0), 50.0);
        assert_eq!(percentile(&[5.0], 99.0), 5.0);
    }

    #[test]
    fn summary_sorts_its_input() {
        let s = Summary::of(&[3.0, 1.0, 2.0]);
        assert_eq!(
            (s.count, s.median, s.min, s.max, s.mean),
            (3, 2.0, 1.0, 3.0, 2.0)
        );
    }
}
