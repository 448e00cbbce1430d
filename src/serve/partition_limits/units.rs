//! Item sizes and capacity units, as DynamoDB counts them ("Item sizes and formats",
//! CapacityUnitCalculations; "Read/write capacity units", read-write-operations): a write unit is
//! one write of an item up to 1 KB, a read unit one strongly consistent read of up to 4 KB (two
//! eventually consistent ones), and a transaction consumes twice.
//!
//! Units are kept in halves throughout ([`Halves`]), so an eventually consistent read of a small
//! item (half a unit) is a whole number.

use serde_json::{Map, Value};

/// Capacity units × 2.
pub type Halves = u64;

/// One write unit covers this many bytes of an item.
pub const WRITE_UNIT_BYTES: u64 = 1024;
/// One read unit covers this many bytes read.
pub const READ_UNIT_BYTES: u64 = 4096;

/// The size of an item in DynamoDB JSON (`{"name": {"S": "…"}, …}`): each attribute's name and
/// value, as DynamoDB sizes them.
pub fn item_size(item: &Map<String, Value>) -> u64 {
    item.iter()
        .map(|(name, value)| name.len() as u64 + value_size(value))
        .sum()
}

/// The size of one typed value (`{"S": "…"}`): strings and binaries by their bytes, a number by
/// its significant digits (one byte per two, plus one), a boolean or null one byte, a list or map
/// 3 bytes plus one per element plus its elements (a map's names included).
pub fn value_size(value: &Value) -> u64 {
    let Some((kind, inner)) = value.as_object().and_then(|typed| typed.iter().next()) else {
        return 0;
    };
    match (kind.as_str(), inner) {
        ("S", Value::String(s)) => s.len() as u64,
        ("N", Value::String(n)) => number_size(n),
        ("B", Value::String(b)) => binary_size(b),
        ("BOOL" | "NULL", _) => 1,
        ("SS", Value::Array(items)) => items
            .iter()
            .map(|s| s.as_str().map_or(0, |s| s.len() as u64))
            .sum(),
        ("NS", Value::Array(items)) => items
            .iter()
            .map(|n| n.as_str().map_or(0, number_size))
            .sum(),
        ("BS", Value::Array(items)) => items
            .iter()
            .map(|b| b.as_str().map_or(0, binary_size))
            .sum(),
        ("L", Value::Array(items)) => 3 + items.iter().map(|v| 1 + value_size(v)).sum::<u64>(),
        ("M", Value::Object(members)) => {
            3 + members
                .iter()
                .map(|(name, v)| 1 + name.len() as u64 + value_size(v))
                .sum::<u64>()
        }
        _ => 0,
    }
}

fn number_size(n: &str) -> u64 {
    let digits = n
        .trim_start_matches(['-', '+'])
        .split(['e', 'E'])
        .next()
        .unwrap_or_default()
        .replace('.', "");
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len() as u64;
    significant.div_ceil(2) + 1
}

fn binary_size(base64: &str) -> u64 {
    let padding = base64.bytes().rev().take_while(|b| *b == b'=').count() as u64;
    (base64.len() as u64 / 4 * 3).saturating_sub(padding)
}

/// The write units of writing an item of `bytes` (at least one), in halves.
pub fn write_halves(bytes: u64, transactional: bool) -> Halves {
    let units = bytes.div_ceil(WRITE_UNIT_BYTES).max(1);
    units * 2 * if transactional { 2 } else { 1 }
}

/// The read units of reading `bytes` (at least one unit's worth), in halves: half for an
/// eventually consistent read, twice in a transaction.
pub fn read_halves(bytes: u64, consistent: bool, transactional: bool) -> Halves {
    let units = bytes.div_ceil(READ_UNIT_BYTES).max(1);
    let halves = if consistent { units * 2 } else { units };
    halves * if transactional { 2 } else { 1 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_and_units_are_counted_as_dynamodb_counts_them() {
        let item = json!({"pk": {"S": "PLATE#AB12"}, "n": {"N": "12345"}, "ok": {"BOOL": true},
                          "l": {"L": [{"S": "ab"}]}});
        // 2+10, 1+(3+1), 2+1, 1+(3+1+2)
        assert_eq!(item_size(item.as_object().unwrap()), 12 + 5 + 3 + 7);
        assert_eq!(write_halves(1, false), 2);
        assert_eq!(write_halves(1024, false), 2);
        assert_eq!(write_halves(1025, false), 4);
        assert_eq!(write_halves(1024, true), 4);
        assert_eq!(read_halves(100, false, false), 1);
        assert_eq!(read_halves(100, true, false), 2);
        assert_eq!(read_halves(4097, true, false), 4);
        assert_eq!(read_halves(100, true, true), 4);
        assert_eq!(value_size(&json!({"B": "AAAA"})), 3);
        assert_eq!(value_size(&json!({"N": "0.0012300"})), 3);
    }
}
