//! `latency.svg`: one panel per adapter with the percentile curves of the publish-to-
//! subscriber round trip (Photon, Photon sealed, the raw client), from the HDR histograms.
//! The horizontal axis spreads the tail: each step right is ten times closer to 100%
//! (0%, 90%, 99%, 99.9%, ...); a curve stops where its sample count does, since a
//! percentile closer to 100% than one sample in the histogram says nothing.

use plotters::prelude::*;

use super::axis::PointsAxis;
use super::{
    adapters_in_order, draw_legend, per_adapter_panels, DrawResult, FONT, PHOTON, PHOTON_DELAYED,
    PHOTON_EXECUTOR, PHOTON_SEALED, RAW,
};
use crate::latency::LatencyFigure;
use crate::report::{LatencyRow, Report};

/// The chart, or `None` when the report has no round-trip rows.
pub(super) fn draw(report: &Report) -> DrawResult<Option<String>> {
    let adapters = adapters_in_order(report.latency.iter().map(|row| row.adapter.as_str()));
    if adapters.is_empty() {
        return Ok(None);
    }
    per_adapter_panels(
        "Publish-to-subscriber round trip by percentile (HDR histograms, every round)",
        &adapters,
        |adapter, panel| {
            let rows: Vec<&LatencyRow> = report
                .latency
                .iter()
                .filter(|row| row.adapter == adapter)
                .collect();
            draw_panel(panel, adapter, &series_of(&rows))
        },
    )
    .map(Some)
}

/// The curves of one adapter: Photon per metric, and the raw client once.
fn series_of<'a>(rows: &[&'a LatencyRow]) -> Vec<(&'static str, RGBColor, &'a LatencyFigure)> {
    let mut series = Vec::new();
    for row in rows {
        let (title, color) = match row.metric.as_str() {
            "latency_sealed" => ("Photon sealed", PHOTON_SEALED),
            "latency_executor" => ("Photon executor", PHOTON_EXECUTOR),
            "latency_delayed" => ("Photon due at once (scheduler)", PHOTON_DELAYED),
            _ => ("Photon", PHOTON),
        };
        series.push((title, color, &row.photon));
    }
    if let Some(row) = rows.first() {
        series.push(("raw client", RAW, &row.raw));
    }
    series
}

/// Where quantile `q` sits on the horizontal axis: `-log10(1 - q)`, capped at `cap`.
fn position(quantile: f64, cap: f64) -> f64 {
    if quantile >= 1.0 {
        cap
    } else {
        (-(1.0 - quantile).log10()).min(cap)
    }
}

/// `2500.0` -> `2500`, `12.5` -> `12.5`, `0.25` -> `0.250`.
fn micros_label(us: f64) -> String {
    if us >= 100.0 {
        format!("{us:.0}")
    } else if us >= 1.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.3}")
    }
}

/// `0` -> `0%`, `1` -> `90%`, `3` -> `99.9%`.
fn percentile_label(position: f64) -> String {
    let steps = position.round() as i32;
    if steps <= 0 {
        return "0%".to_owned();
    }
    let percent = 100.0 - 100.0 / 10f64.powi(steps);
    let decimals = usize::try_from(steps - 2).unwrap_or(0);
    format!("{percent:.decimals$}%")
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    adapter: &str,
    series: &[(&'static str, RGBColor, &LatencyFigure)],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let cap_of = |figure: &LatencyFigure| (figure.samples.max(1) as f64).log10();
    let right = series
        .iter()
        .map(|(_, _, figure)| cap_of(figure))
        .fold(1.0_f64, f64::max);
    let values = || {
        series
            .iter()
            .flat_map(|(_, _, figure)| figure.curve.iter().map(|point| point.us))
            .filter(|us| *us > 0.0)
    };
    let low = values().fold(f64::INFINITY, f64::min);
    let high = values().fold(0.0_f64, f64::max);
    let (low, high) = if low.is_finite() && high > 0.0 {
        (low / 1.5, high * 1.5)
    } else {
        (0.1, 10.0)
    };
    let steps: Vec<f64> = (0..=right.floor() as i32).map(f64::from).collect();
    let mut chart = ChartBuilder::on(area)
        .caption(adapter, (FONT, 15))
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(64)
        .build_cartesian_2d(PointsAxis::new(0.0..right, steps), (low..high).log_scale())?;
    chart
        .configure_mesh()
        .x_label_formatter(&|x| percentile_label(*x))
        .y_label_formatter(&|us| micros_label(*us))
        .x_desc("percentile")
        .y_desc("µs (log)")
        .label_style((FONT, 12))
        .draw()?;
    for (title, color, figure) in series {
        let cap = cap_of(figure);
        let points: Vec<(f64, f64)> = figure
            .curve
            .iter()
            .filter(|point| point.us > 0.0)
            .map(|point| (position(point.quantile, cap), point.us))
            .collect();
        let color = *color;
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(format!("{title} ({} samples)", figure.samples))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], color.stroke_width(2)));
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_spreads_the_tail() {
        assert_eq!(position(0.0, 4.0), 0.0);
        assert!((position(0.99, 4.0) - 2.0).abs() < 1e-9);
        assert_eq!(position(1.0, 4.0), 4.0);
        assert_eq!(position(0.999_999, 4.0), 4.0);
        let labels: Vec<String> = (0..5).map(|x| percentile_label(f64::from(x))).collect();
        assert_eq!(labels, ["0%", "90%", "99%", "99.9%", "99.99%"]);
        let micros: Vec<String> = [2_500.0, 12.5, 0.25].map(micros_label).to_vec();
        assert_eq!(micros, ["2500", "12.5", "0.250"]);
    }
}
