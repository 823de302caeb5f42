use std::path::PathBuf;

use super::*;
use crate::latency::Latencies;
use crate::measure::BenchOptions;
use crate::provenance::{Provenance, RunOptions};
use crate::report::{LatencyRow, ThroughputRow};

fn empty_report() -> Report {
    Report::new(Provenance::at_start(RunOptions {
        scenario: "compare".into(),
        adapters: vec!["mem".into()],
        profile: "debug".into(),
        executor_parallelism: 8,
        telemetry: "info".into(),
        sizes: BenchOptions::default(),
    }))
}

fn latencies(offset_ns: u64) -> Latencies {
    let mut latencies = Latencies::default();
    for nanos in 1..=2_000 {
        latencies.record(std::time::Duration::from_nanos(nanos * 100 + offset_ns));
    }
    latencies
}

fn full_report() -> Report {
    let mut report = empty_report();
    let raw = vec![900.0, 1_000.0, 1_100.0];
    report.throughput = vec![
        ThroughputRow::new(
            "mem",
            "publish",
            vec![400.0, 500.0, 450.0],
            BaselineKind::Raw,
            raw.clone(),
        ),
        ThroughputRow::new(
            "mem",
            "publish_sealed",
            vec![200.0, 250.0, 220.0],
            BaselineKind::Raw,
            raw,
        ),
        ThroughputRow::new(
            "mem",
            "executor",
            vec![300.0, 320.0, 310.0],
            BaselineKind::Durable,
            vec![400.0, 410.0, 405.0],
        ),
        ThroughputRow::new(
            "sqlite",
            "publish",
            vec![40.0, 50.0, 45.0],
            BaselineKind::Raw,
            vec![90.0, 95.0, 99.0],
        ),
        ThroughputRow::new(
            "mem",
            "group_1",
            vec![70.0, 72.0],
            BaselineKind::Durable,
            vec![80.0, 82.0],
        ),
        ThroughputRow::new(
            "mem",
            "group_2",
            vec![140.0, 150.0],
            BaselineKind::Durable,
            vec![80.0, 82.0],
        ),
        ThroughputRow::new(
            "mem",
            "group_4",
            vec![260.0, 280.0],
            BaselineKind::Durable,
            vec![80.0, 82.0],
        ),
    ];
    let raw = latencies(0).figure(vec![latencies(0).round()]);
    report.latency = vec![
        LatencyRow {
            adapter: "mem".into(),
            metric: "latency".into(),
            photon: latencies(5_000).figure(Vec::new()),
            raw: raw.clone(),
        },
        LatencyRow {
            adapter: "mem".into(),
            metric: "latency_sealed".into(),
            photon: latencies(9_000).figure(Vec::new()),
            raw,
        },
    ];
    report
}

fn scratch() -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::env::temp_dir().join(format!(
        "photon-bench-charts-{}-{nanos}",
        std::process::id()
    ))
}

#[test]
fn every_chart_is_written_with_its_series() {
    let directory = scratch();
    let written = write(&full_report(), &directory).unwrap();
    let names: Vec<String> = written
        .iter()
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["throughput.svg", "latency.svg", "groups.svg"]);
    let read = |file: &str| std::fs::read_to_string(directory.join(file)).unwrap();
    let (throughput, latency, groups) = (
        read("throughput.svg"),
        read("latency.svg"),
        read("groups.svg"),
    );
    std::fs::remove_dir_all(&directory).unwrap();

    for svg in [&throughput, &latency, &groups] {
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        assert!(svg.trim_end().ends_with("</svg>"));
    }
    let texts = |svg: &str| -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|part| {
                let text = part.split_once('>')?.1.split_once("</text>")?.0;
                Some(text.trim().to_owned())
            })
            .collect()
    };
    let throughput = texts(&throughput);
    // Legends are per panel: Photon and the raw client in both, durable only in mem's.
    let expected = [
        ("Photon", 2),
        ("raw client", 2),
        ("durable subscription", 1),
        ("mem", 1),
        ("sqlite", 1),
        ("publish", 2),
        ("publish_sealed", 1),
        ("executor", 1),
        ("0.45x", 1),
        ("0.22x", 1),
        ("0.77x", 1),
        ("0.47x", 1),
    ];
    for (title, count) in expected {
        let found = throughput.iter().filter(|t| *t == title).count();
        assert_eq!(found, count, "{title} in {throughput:?}");
    }
    assert!(
        !throughput.iter().any(|t| t.starts_with("group_")),
        "{throughput:?}"
    );
    let latency = texts(&latency);
    for title in [
        "Photon (2000 samples)",
        "Photon sealed (2000 samples)",
        "raw client (2000 samples)",
        "90%",
        "99%",
    ] {
        assert_eq!(
            latency.iter().filter(|t| *t == title).count(),
            1,
            "{title} in {latency:?}"
        );
    }
    let groups = texts(&groups);
    for title in ["mem group", "mem durable subscription", "members"] {
        assert_eq!(
            groups.iter().filter(|t| *t == title).count(),
            1,
            "{title} in {groups:?}"
        );
    }
}

#[test]
fn a_chart_without_rows_is_not_written() {
    let mut report = full_report();
    report.latency.clear();
    report
        .throughput
        .retain(|row| row.group_members().is_none());
    let names: Vec<&str> = render(&report)
        .unwrap()
        .iter()
        .map(|chart| chart.file)
        .collect();
    assert_eq!(names, ["throughput.svg"]);
    assert_eq!(render(&empty_report()).unwrap(), Vec::new());
}

#[test]
fn numbers_are_short() {
    let shown: Vec<String> = [1_234_567.0, 45_600.0, 12.0].map(short_number).to_vec();
    assert_eq!(shown, ["1.2M", "45.6k", "12"]);
}
