//! Reading the shared row form ([`photon_core::raw::row`]) from SQLite.

pub(crate) use photon_core::raw::row::StoredRow;
use rusqlite::{Connection, Row};

pub(crate) use photon_core::raw::row::{PendingRow, RECORD_COLUMNS};

/// Reads the [`RECORD_COLUMNS`] of a row.
pub(crate) fn read_row(row: &Row<'_>) -> rusqlite::Result<StoredRow> {
    Ok(StoredRow {
        seq: row.get(0)?,
        event_id: row.get(1)?,
        envelope_id: row.get(2)?,
        topic_key: row.get(3)?,
        created_at: row.get(4)?,
        body: match row.get_ref(5)? {
            rusqlite::types::ValueRef::Text(bytes) | rusqlite::types::ValueRef::Blob(bytes) => {
                bytes.to_vec()
            }
            rusqlite::types::ValueRef::Null => Vec::new(),
            rusqlite::types::ValueRef::Integer(n) => n.to_string().into_bytes(),
            rusqlite::types::ValueRef::Real(x) => x.to_string().into_bytes(),
        },
        extra: row.get(6)?,
    })
}

/// The rows a cached statement selects (its columns in [`RECORD_COLUMNS`] order).
///
/// # Errors
/// SQLite errors.
pub(crate) fn select_rows(
    connection: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<Vec<StoredRow>> {
    let mut statement = connection.prepare_cached(sql)?;
    let rows = statement.query_map(params, read_row)?;
    rows.collect()
}
