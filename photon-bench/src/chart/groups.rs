//! `groups.svg`: consumer group rate by member count, per adapter, beside the durable
//! subscription's rate on the same topic (dashed), with every round as a dot.

use plotters::prelude::*;

use super::axis::PointsAxis;
use super::{draw_legend, short_number, DrawResult, ADAPTER_COLORS, FONT, WIDTH};
use crate::report::{Report, ThroughputRow};

/// Height of the chart.
const HEIGHT: u32 = 480;

/// The chart, or `None` when the report has no consumer group rows.
pub(super) fn draw(report: &Report) -> DrawResult<Option<String>> {
    let rows: Vec<(u32, &ThroughputRow)> = report
        .throughput
        .iter()
        .filter_map(|row| Some((row.group_members()?, row)))
        .collect();
    let mut adapters: Vec<&str> = Vec::new();
    for (_, row) in &rows {
        if !adapters.contains(&row.adapter.as_str()) {
            adapters.push(&row.adapter);
        }
    }
    if adapters.is_empty() {
        return Ok(None);
    }
    let most = rows.iter().map(|(members, _)| *members).max().unwrap_or(1);
    let top = rows
        .iter()
        .flat_map(|(_, row)| [row.photon.spread().1, row.baseline.spread().1])
        .fold(0.0_f64, f64::max)
        .max(1.0)
        * 1.2;
    let mut members: Vec<u32> = rows.iter().map(|(members, _)| *members).collect();
    members.sort_unstable();
    members.dedup();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Consumer groups: events/s by member count beside a durable subscription (dashed)",
                (FONT, 16),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(
                PointsAxis::new(
                    0.5..f64::from(most) + 0.5,
                    members.iter().map(|m| f64::from(*m)).collect(),
                ),
                0.0..top,
            )?;
        chart
            .configure_mesh()
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|v| short_number(*v))
            .x_desc("members")
            .y_desc("events/s")
            .label_style((FONT, 12))
            .draw()?;
        for (index, adapter) in adapters.iter().enumerate() {
            let color = ADAPTER_COLORS[index % ADAPTER_COLORS.len()];
            let mut of_adapter: Vec<(u32, &ThroughputRow)> = rows
                .iter()
                .filter(|(_, row)| row.adapter == *adapter)
                .copied()
                .collect();
            of_adapter.sort_by_key(|(members, _)| *members);
            draw_adapter(&mut chart, adapter, color, &of_adapter, most)?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present()?;
    }
    Ok(Some(svg))
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<PointsAxis, plotters::coord::types::RangedCoordf64>,
>;

fn draw_adapter(
    chart: &mut Chart<'_, '_>,
    adapter: &str,
    color: RGBColor,
    rows: &[(u32, &ThroughputRow)],
    most: u32,
) -> DrawResult {
    let medians = rows
        .iter()
        .map(|(members, row)| (f64::from(*members), row.photon.median));
    chart
        .draw_series(LineSeries::new(medians, color.stroke_width(2)))?
        .label(format!("{adapter} group"))
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], color.stroke_width(2)));
    for (members, row) in rows {
        let x = f64::from(*members);
        chart.draw_series(
            row.photon
                .rounds
                .iter()
                .map(|value| Circle::new((x, *value), 3, color.filled())),
        )?;
    }
    // Every group row of a run carries the same durable rounds.
    if let Some((_, row)) = rows.first() {
        let durable = row.baseline.median;
        chart
            .draw_series(DashedLineSeries::new(
                [(0.5, durable), (f64::from(most) + 0.5, durable)],
                6,
                4,
                color.stroke_width(1),
            ))?
            .label(format!("{adapter} durable subscription"))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], color.stroke_width(1)));
    }
    Ok(())
}
