//! A linear axis whose ticks and labels sit at chosen points (categories, member counts,
//! percentile steps), where plotters would otherwise pick round numbers.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};

/// Values in `range`, drawn linearly, ticked at `points` only.
pub(super) struct PointsAxis {
    range: Range<f64>,
    points: Vec<f64>,
}

impl PointsAxis {
    /// An axis over `range` with ticks at `points`.
    pub(super) fn new(range: Range<f64>, points: Vec<f64>) -> Self {
        Self { range, points }
    }
}

impl Ranged for PointsAxis {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = (self.range.end - self.range.start).max(f64::EPSILON);
        let fraction = (value - self.range.start) / span;
        limit.0 + (fraction * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // The chosen points are the bold ticks; there are no light ones between them.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.points.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_linearly_and_ticks_at_the_points() {
        let axis = PointsAxis::new(0.0..4.0, vec![0.5, 1.5]);
        assert_eq!(
            [0.0, 1.0, 4.0].map(|v| axis.map(&v, (100, 500))),
            [100, 200, 500]
        );
        assert_eq!(axis.key_points(10usize), Vec::<f64>::new());
        assert_eq!(axis.range(), 0.0..4.0);
    }
}
