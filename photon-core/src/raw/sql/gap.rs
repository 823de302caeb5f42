//! Gaps: seqs a subscription still needed that retention or `truncate_before` deleted.
//!
//! Seqs of a topic are assigned densely from 1 and deletion only ever removes a topic's
//! oldest records, so a cursor positioned after seq `s ≥ 1` has lost events exactly when
//! `s + 1` was assigned (the topic's last seq is at least `s + 1`) and the first record
//! still stored is above `s + 1` (or none is). The gap runs from `s + 1` to that first
//! stored seq (or to the last seq + 1). A cursor at 0 (from the beginning) has no gap: it
//! starts at the first record kept. The range is the topic's: a keyed subscription is told
//! of it too, although the removed records may have held none of its key's events.

/// The gap `(from, to)` a cursor positioned after `after` has run into, given the topic's
/// last assigned seq and its first stored one (`None`: no record stored).
pub fn gap_after(after: i64, last_seq: i64, first_stored: Option<i64>) -> Option<(i64, i64)> {
    if after < 1 {
        return None;
    }
    let next = after + 1;
    if last_seq < next {
        return None;
    }
    let to = first_stored.unwrap_or(last_seq + 1);
    (to > next).then_some((next, to))
}

#[cfg(test)]
mod tests {
    use super::gap_after;

    #[test]
    fn a_cursor_from_the_beginning_never_has_a_gap() {
        assert_eq!(gap_after(0, 10, Some(5)), None);
    }

    #[test]
    fn deleted_seqs_in_front_of_the_cursor_are_a_gap() {
        assert_eq!(gap_after(2, 10, Some(5)), Some((3, 5)));
        assert_eq!(gap_after(2, 10, None), Some((3, 11)));
    }

    #[test]
    fn no_gap_when_the_next_seq_is_stored_or_not_assigned() {
        assert_eq!(gap_after(2, 10, Some(3)), None);
        assert_eq!(gap_after(10, 10, None), None);
    }
}
