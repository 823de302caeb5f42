//! `throughput.svg`: one panel per adapter, a pair of bars per metric (Photon beside its
//! baseline) at the median round, with the lowest-to-highest round as an error bar and
//! every round as a dot.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::PointsAxis;
use super::{
    adapters_in_order, baseline_color, draw_legend, per_adapter_panels, short_number, DrawResult,
    FONT, PHOTON,
};
use crate::report::{BaselineKind, Report, ThroughputRow};

/// The chart, or `None` when the report has no throughput rows other than groups.
pub(super) fn draw(report: &Report) -> DrawResult<Option<String>> {
    let rows: Vec<&ThroughputRow> = report
        .throughput
        .iter()
        .filter(|row| row.group_members().is_none())
        .collect();
    let adapters = adapters_in_order(rows.iter().map(|row| row.adapter.as_str()));
    if adapters.is_empty() {
        return Ok(None);
    }
    per_adapter_panels(
        "Throughput: Photon beside its baseline (bar: median round; whisker: lowest to highest; dots: every round)",
        &adapters,
        |adapter, panel| {
            let adapter_rows: Vec<&ThroughputRow> = rows
                .iter()
                .copied()
                .filter(|row| row.adapter == adapter)
                .collect();
            draw_panel(panel, adapter, &adapter_rows)
        },
    )
    .map(Some)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    adapter: &str,
    rows: &[&ThroughputRow],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let top = rows
        .iter()
        .flat_map(|row| [row.photon.spread().1, row.baseline.spread().1])
        .fold(0.0_f64, f64::max)
        .max(1.0)
        // Headroom above the tallest round for the ratios and the legend.
        * 1.45;
    let centers: Vec<f64> = (0..rows.len()).map(|i| i as f64 + 0.5).collect();
    let mut chart = ChartBuilder::on(area)
        .caption(adapter, (FONT, 15))
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(64)
        .build_cartesian_2d(PointsAxis::new(0.0..rows.len() as f64, centers), 0.0..top)?;
    let metric_of = |x: &f64| {
        rows.get(x.floor() as usize)
            .map_or_else(String::new, |row| row.metric.clone())
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&metric_of)
        .y_label_formatter(&|v| short_number(*v))
        .y_desc("events/s")
        .label_style((FONT, 12))
        .draw()?;

    let photon_bars = rows
        .iter()
        .enumerate()
        .map(|(i, row)| bar(i, 0.08, row.photon.median, PHOTON));
    chart
        .draw_series(photon_bars)?
        .label("Photon")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], PHOTON.filled()));
    for kind in [
        BaselineKind::Raw,
        BaselineKind::Durable,
        BaselineKind::WholeTopic,
        BaselineKind::SingleHandler,
        BaselineKind::TelemetryOff,
        BaselineKind::AtOnce,
    ] {
        let of_kind: Vec<(usize, &&ThroughputRow)> = rows
            .iter()
            .enumerate()
            .filter(|(_, row)| row.baseline_kind == kind)
            .collect();
        if of_kind.is_empty() {
            continue;
        }
        let color = baseline_color(kind);
        chart
            .draw_series(
                of_kind
                    .iter()
                    .map(|(i, row)| bar(*i, 0.52, row.baseline.median, color)),
            )?
            .label(kind.title())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    for (i, row) in rows.iter().enumerate() {
        for (offset, series) in [(0.08, &row.photon), (0.52, &row.baseline)] {
            let x = i as f64 + offset + 0.2;
            let (low, high) = series.spread();
            chart.draw_series(std::iter::once(ErrorBar::new_vertical(
                x,
                low,
                series.median,
                high,
                BLACK.stroke_width(1),
                8,
            )))?;
            chart.draw_series(
                series
                    .rounds
                    .iter()
                    .map(|value| Circle::new((x, *value), 3, BLACK.filled())),
            )?;
        }
        let label_y = row.photon.spread().1.max(row.baseline.spread().1);
        chart.draw_series(std::iter::once(Text::new(
            format!("{:.2}x", row.ratio),
            (i as f64 + 0.5, label_y + top * 0.04),
            (FONT, 12)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Bottom)),
        )))?;
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    Ok(())
}

/// A bar of width 0.4 starting `offset` into category `index`.
fn bar(index: usize, offset: f64, value: f64, color: RGBColor) -> Rectangle<(f64, f64)> {
    let left = index as f64 + offset;
    Rectangle::new([(left, 0.0), (left + 0.4, value)], color.mix(0.8).filled())
}
