//! Shrinking a failing schedule: operations are removed, one block at a time, while the
//! schedule still fails the model.

use std::sync::Arc;

use super::checker::check;
use super::generator::Schedule;
use super::runner::run;
use crate::context::PortFactory;

/// Most runs a shrink makes (each plays a schedule on the real port).
const MAX_RUNS: usize = 30;

/// The shortest schedule found, by removing blocks of operations (halves, then quarters,
/// down to single operations), that still fails [`check`] on ports of `factory`. Timing
/// can make a shorter schedule pass by chance; the result is the shortest one seen
/// failing.
pub async fn shrink(factory: &Arc<dyn PortFactory>, failing: Schedule) -> Schedule {
    let mut best = failing;
    let mut runs = 0;
    let mut block = best.ops.len().div_ceil(2).max(1);
    while block >= 1 && runs < MAX_RUNS {
        let mut start = 0;
        let mut removed_any = false;
        while start < best.ops.len() && runs < MAX_RUNS {
            let mut candidate = best.clone();
            let end = (start + block).min(candidate.ops.len());
            candidate.ops.drain(start..end);
            runs += 1;
            if check(&run(factory, &candidate).await).is_err() {
                best = candidate;
                removed_any = true;
            } else {
                start += block;
            }
        }
        if block == 1 && !removed_any {
            break;
        }
        block = (block / 2).max(1);
        if block == 1 && !removed_any && runs >= MAX_RUNS {
            break;
        }
    }
    best
}
