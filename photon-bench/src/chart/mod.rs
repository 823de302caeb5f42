//! SVG charts of a report, drawn with plotters: throughput per adapter, round-trip
//! percentile curves per adapter, and consumer group scaling.
//!
//! Text goes into the SVG as `<text>` elements for the viewer to render, so drawing needs
//! no fonts on the machine.

mod axis;
mod groups;
mod latency;
mod throughput;

use std::path::{Path, PathBuf};

use photon_core::{PhotonError, Result};
use plotters::style::RGBColor;

use crate::report::{BaselineKind, Report};

/// Photon's series.
const PHOTON: RGBColor = RGBColor(0x2b, 0x6c, 0xb0);
/// Photon with a transport key.
const PHOTON_SEALED: RGBColor = RGBColor(0x8e, 0x44, 0xad);
/// Photon's executor (publish -> handler start).
const PHOTON_EXECUTOR: RGBColor = RGBColor(0x16, 0xa0, 0x85);
/// The raw client's series.
const RAW: RGBColor = RGBColor(0xe6, 0x7e, 0x22);
/// A durable subscription's series.
const DURABLE: RGBColor = RGBColor(0x27, 0xae, 0x60);
/// Whole-topic subscription baselines (keyed subscription rows).
const WHOLE_TOPIC: RGBColor = RGBColor(0x7f, 0x8c, 0x8d);
/// Single-event handler baselines (batch handler rows).
const SINGLE_HANDLER: RGBColor = RGBColor(0x8e, 0x44, 0xad);
/// Telemetry-off baselines (telemetry rows).
const TELEMETRY_OFF: RGBColor = RGBColor(0x34, 0x49, 0x5e);
/// Publishing at once, the baseline of the delayed rows.
const AT_ONCE: RGBColor = RGBColor(0xd3, 0x54, 0x00);
/// Photon's round trips through the scheduler.
const PHOTON_DELAYED: RGBColor = RGBColor(0xc0, 0x39, 0x2b);
/// One color per adapter where a chart shows several.
const ADAPTER_COLORS: [RGBColor; 6] = [
    RGBColor(0x2b, 0x6c, 0xb0),
    RGBColor(0xe6, 0x7e, 0x22),
    RGBColor(0x27, 0xae, 0x60),
    RGBColor(0xc0, 0x39, 0x2b),
    RGBColor(0x8e, 0x44, 0xad),
    RGBColor(0x7f, 0x8c, 0x8d),
];
/// Width of every chart in pixels.
const WIDTH: u32 = 1000;
/// Font of every chart (the viewer picks the face).
const FONT: &str = "sans-serif";

/// What drawing can fail with (the SVG backend writes into a string, so this is
/// plotters' own refusal, such as an empty range).
type DrawResult<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Draws the legend of `chart`'s labelled series at `position`, on a translucent white
/// box, as every chart does.
fn draw_legend<'a, DB, CT>(
    chart: &mut plotters::chart::ChartContext<'a, DB, CT>,
    position: plotters::chart::SeriesLabelPosition,
) -> DrawResult
where
    DB: plotters::prelude::DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: plotters::coord::CoordTranslate,
{
    use plotters::style::{Color, BLACK, WHITE};
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 12))
        .draw()?;
    Ok(())
}

/// Height of one adapter's panel in the per-adapter charts.
const PANEL_HEIGHT: u32 = 320;

/// The adapters `names` mention, in the order they first appear.
fn adapters_in_order<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut adapters: Vec<&str> = Vec::new();
    for name in names {
        if !adapters.contains(&name) {
            adapters.push(name);
        }
    }
    adapters
}

/// An SVG with `title` above one panel per adapter, each drawn by `draw_panel`.
fn per_adapter_panels(
    title: &str,
    adapters: &[&str],
    mut draw_panel: impl FnMut(
        &str,
        &plotters::drawing::DrawingArea<plotters::prelude::SVGBackend, plotters::coord::Shift>,
    ) -> DrawResult,
) -> DrawResult<String> {
    use plotters::prelude::*;
    let mut svg = String::new();
    {
        let height = 50 + PANEL_HEIGHT * adapters.len() as u32;
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, (FONT, 16))?;
        let panels = root.split_evenly((adapters.len(), 1));
        for (adapter, panel) in adapters.iter().zip(&panels) {
            draw_panel(adapter, panel)?;
        }
        root.present()?;
    }
    Ok(svg)
}

/// A chart: its file name and SVG text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chart {
    /// File name, for example `throughput.svg`.
    pub file: &'static str,
    /// The SVG document.
    pub svg: String,
}

/// The charts `report` has rows for: `throughput.svg` (rates other than groups),
/// `latency.svg` (round trips) and `groups.svg` (consumer group rows).
///
/// # Errors
/// [`PhotonError::InvalidInput`] naming the chart plotters refused to draw.
pub fn render(report: &Report) -> Result<Vec<Chart>> {
    let mut charts = Vec::new();
    let drawn = [
        ("throughput.svg", throughput::draw(report)),
        ("latency.svg", latency::draw(report)),
        ("groups.svg", groups::draw(report)),
    ];
    for (file, svg) in drawn {
        let svg = svg.map_err(|e| PhotonError::InvalidInput(format!("chart {file}: {e}")))?;
        if let Some(svg) = svg {
            charts.push(Chart { file, svg });
        }
    }
    Ok(charts)
}

/// Renders `report`'s charts into `directory` (created if missing); returns the paths
/// written.
///
/// # Errors
/// [`PhotonError::InvalidInput`] naming the chart that could not be drawn or the file that
/// could not be written.
pub fn write(report: &Report, directory: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(directory).map_err(|e| {
        PhotonError::InvalidInput(format!("cannot create {}: {e}", directory.display()))
    })?;
    let mut written = Vec::new();
    for chart in render(report)? {
        let path = directory.join(chart.file);
        std::fs::write(&path, chart.svg).map_err(|e| {
            PhotonError::InvalidInput(format!("cannot write {}: {e}", path.display()))
        })?;
        written.push(path);
    }
    Ok(written)
}

fn baseline_color(kind: BaselineKind) -> RGBColor {
    match kind {
        BaselineKind::Raw => RAW,
        BaselineKind::Durable => DURABLE,
        BaselineKind::WholeTopic => WHOLE_TOPIC,
        BaselineKind::SingleHandler => SINGLE_HANDLER,
        BaselineKind::TelemetryOff => TELEMETRY_OFF,
        BaselineKind::AtOnce => AT_ONCE,
    }
}

/// `1234567.0` -> `1.2M`, `45600.0` -> `45.6k`, `12.0` -> `12`.
fn short_number(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1e6 {
        format!("{:.1}M", value / 1e6)
    } else if magnitude >= 1e3 {
        format!("{:.1}k", value / 1e3)
    } else {
        format!("{value:.0}")
    }
}

#[cfg(test)]
mod tests;
