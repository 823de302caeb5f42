//! Reading the shared row form ([`photon_core::raw::row`]) from PostgreSQL. The `body` column
//! is `bytea` holding the body's JSON.

use photon_core::raw::row::StoredRow;
use photon_core::{Record, Result};
use tokio_postgres::Row;

pub(crate) use photon_core::raw::row::{PendingRow, RECORD_COLUMNS};

/// Reads the [`RECORD_COLUMNS`] of a row.
pub(crate) fn read_row(row: &Row) -> std::result::Result<StoredRow, tokio_postgres::Error> {
    Ok(StoredRow {
        seq: row.try_get(0)?,
        event_id: row.try_get(1)?,
        envelope_id: row.try_get(2)?,
        topic_key: row.try_get(3)?,
        created_at: row.try_get(4)?,
        body: row.try_get(5)?,
        extra: row.try_get(6)?,
    })
}

/// Decodes rows of `topic` read with [`RECORD_COLUMNS`].
///
/// # Errors
/// A column of an unexpected type (a damaged schema) fails the whole read.
pub(crate) fn decode_rows(
    rows: &[Row],
    topic: &str,
) -> std::result::Result<Vec<Result<Record>>, tokio_postgres::Error> {
    rows.iter()
        .map(|row| read_row(row).map(|stored| stored.decode(topic)))
        .collect()
}
