//! Rounds in which the sides of a comparison take turns at going first.

use futures::future::LocalBoxFuture;
use photon_core::Result;

use crate::latency::Latencies;
use crate::measure::with_cpu_time;

/// One side's measurement of one round.
pub(crate) type Measure<'a, T> = Box<dyn FnMut(usize) -> LocalBoxFuture<'a, Result<T>> + 'a>;

/// One side of a comparison: its name on stderr and its measurement.
pub(crate) struct Side<'a, T> {
    name: &'static str,
    measure: Measure<'a, T>,
}

/// A side named `name` measured by `measure(round)`.
pub(crate) fn side<'a, T, F>(name: &'static str, mut measure: F) -> Side<'a, T>
where
    F: FnMut(usize) -> LocalBoxFuture<'a, Result<T>> + 'a,
{
    Side {
        name,
        measure: Box::new(move |round| measure(round)),
    }
}

/// A figure of one round, as stderr shows it.
pub(crate) trait RoundFigure {
    /// The figure, for example `12345/s`.
    fn describe(&self) -> String;
    /// What the CPU time of the round is divided by: the round's `events`, or its round
    /// trips.
    fn units(&self, events: usize) -> usize;
}

/// Events per second.
impl RoundFigure for f64 {
    fn describe(&self) -> String {
        format!("{self:.0}/s")
    }

    fn units(&self, events: usize) -> usize {
        events
    }
}

impl RoundFigure for Latencies {
    fn describe(&self) -> String {
        let us = |q: Option<f64>| q.map_or_else(|| "-".to_owned(), |us| format!("{us:.1}"));
        let round = self.round();
        format!(
            "p50 {} µs, p99 {} µs of {}",
            us(round.p50_us),
            us(round.p99_us),
            round.samples
        )
    }

    fn units(&self, _events: usize) -> usize {
        usize::try_from(self.samples()).unwrap_or(usize::MAX)
    }
}

/// Runs every side once per round, each round counting `events` events. Round `r` starts with side `r mod N` and goes on in
/// order, so that no side always meets the server fresh (or busy). Returns each side's
/// figures in round order. Each round's figures go to stderr, with this process's CPU time
/// per event (or round trip): the broker shares the machine, so the client's own cost per
/// event tells apart what Photon's code spends.
///
/// # Errors
/// The first error of any side.
pub(crate) async fn in_turns<T: RoundFigure, const N: usize>(
    what: &str,
    rounds: usize,
    events: usize,
    mut sides: [Side<'_, T>; N],
) -> Result<[Vec<T>; N]> {
    let mut figures: [Vec<T>; N] = std::array::from_fn(|_| Vec::with_capacity(rounds));
    for round in 0..rounds {
        let mut line = format!("  {what} round {}:", round + 1);
        for turn in 0..N {
            let index = (round + turn) % N;
            let side = &mut sides[index];
            let (figure, cpu) = with_cpu_time((side.measure)(round)).await;
            let figure = figure?;
            let units = figure.units(events).max(1);
            let per_unit = cpu.map_or_else(
                || "?".to_owned(),
                |cpu| format!("{:.1}", cpu.as_secs_f64() * 1e6 / units as f64),
            );
            line.push_str(&format!(
                " {} {} ({per_unit} µs CPU each);",
                side.name,
                figure.describe()
            ));
            figures[index].push(figure);
        }
        eprintln!("{}", line.trim_end_matches(';'));
    }
    Ok(figures)
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use futures::FutureExt;

    use super::*;

    #[tokio::test]
    async fn sides_take_turns_at_going_first() {
        let order = RefCell::new(Vec::new());
        let order = &order;
        let sides = ["a", "b", "c"].map(|name| {
            side(name, move |round| {
                async move {
                    order.borrow_mut().push(format!("{name}{round}"));
                    Ok(round as f64)
                }
                .boxed_local()
            })
        });
        let [a, b, c] = in_turns("test", 4, 1, sides).await.unwrap();
        assert_eq!(
            *order.borrow(),
            ["a0", "b0", "c0", "b1", "c1", "a1", "c2", "a2", "b2", "a3", "b3", "c3"]
        );
        let rounds = vec![0.0, 1.0, 2.0, 3.0];
        assert_eq!((a, b, c), (rounds.clone(), rounds.clone(), rounds));
    }
}
