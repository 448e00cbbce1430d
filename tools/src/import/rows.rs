//! The rows of a file: JSON Lines, or CSV with a header row naming the fields, each row a create
//! route's body with the line it starts on and its text (which its id is derived from).

use super::Kind;
use serde_json::{Map, Value};
use std::path::Path;

/// One row of the file: where it starts, its text (which its id is derived from) and its fields.
pub(super) struct Row {
    pub line: u64,
    pub raw: String,
    pub fields: Result<Map<String, Value>, String>,
}

/// Reads `file` as JSON Lines or CSV; `Err` when it is neither, or a CSV lacks a column `kind`
/// needs: nothing is written then.
pub(super) fn read_rows(file: &Path, kind: Kind) -> Result<Vec<Row>, String> {
    let bytes = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        format!(
            "{} is not JSON Lines or CSV: it is not UTF-8 text",
            file.display()
        )
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let extension = file
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let json_lines = match extension.as_deref() {
        Some("csv") => false,
        Some("jsonl" | "ndjson" | "json") => true,
        _ => text.trim_start().starts_with('{'),
    };
    if json_lines {
        read_json_lines(file, text)
    } else {
        read_csv(file, text, kind)
    }
}

fn read_json_lines(file: &Path, text: &str) -> Result<Vec<Row>, String> {
    let rows: Vec<Row> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| Row {
            line: n as u64 + 1,
            raw: line.to_owned(),
            fields: match serde_json::from_str::<Value>(line) {
                Ok(Value::Object(object)) => Ok(object),
                Ok(_) => Err("the row is not a JSON object".to_owned()),
                Err(_) => Err("the row is not valid JSON".to_owned()),
            },
        })
        .collect();
    // One bad row is that row's reject; a first row that is not an object is another format.
    if let Some(Row {
        line,
        fields: Err(reason),
        ..
    }) = rows.first()
    {
        return Err(format!(
            "{} is not JSON Lines: line {line}: {reason}",
            file.display()
        ));
    }
    Ok(rows)
}

fn read_csv(file: &Path, text: &str, kind: Kind) -> Result<Vec<Row>, String> {
    let mut records = csv_records(text)
        .map_err(|reason| format!("{} is not CSV: {reason}", file.display()))?
        .into_iter();
    let header: Vec<String> = records
        .next()
        .map(|(_, _, header)| header.into_iter().map(|h| h.trim().to_owned()).collect())
        .unwrap_or_default();
    if header.iter().all(String::is_empty) {
        // The kind's columns cannot be missing from a header that is not there.
        return Err(format!(
            "{} is not CSV rows can be read from: it has no header row naming the columns {} rows \
             need",
            file.display(),
            kind.name()
        ));
    }
    if let Some(twice) = header
        .iter()
        .enumerate()
        .find(|(i, column)| !column.is_empty() && header[..*i].contains(column))
        .map(|(_, column)| column)
    {
        // Which of the two cells a row means is not for the import to guess.
        return Err(format!(
            "{} is not CSV rows can be read from: its header names {twice} twice",
            file.display()
        ));
    }
    let missing: Vec<&str> = kind
        .required_columns()
        .iter()
        .copied()
        .filter(|column| !header.iter().any(|h| h == column))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{} is not JSON Lines, nor CSV with the columns {} rows need: its header lacks {}",
            file.display(),
            kind.name(),
            missing.join(", ")
        ));
    }
    Ok(records
        .filter(|(_, raw, _)| !raw.trim().is_empty())
        .map(|(line, raw, cells)| {
            let fields = if cells.len() > header.len() {
                Err(format!(
                    "the row has {} cells and the header {} columns",
                    cells.len(),
                    header.len()
                ))
            } else {
                Ok(header
                    .iter()
                    .zip(cells)
                    // An empty cell is a field not given, as a body without it.
                    .filter(|(_, cell)| !cell.is_empty())
                    .map(|(name, cell)| {
                        let value = match cell.parse::<i64>() {
                            Ok(n) if kind.integer_columns().contains(&name.as_str()) => n.into(),
                            _ => Value::String(cell),
                        };
                        (name.clone(), value)
                    })
                    .collect())
            };
            Row { line, raw, fields }
        })
        .collect())
}

/// CSV records (RFC 4180: quoted cells may hold commas, quotes doubled and line breaks), each
/// with the line it starts on and its text. A quoted cell still open at the end of the text is
/// an error: read as written, every row after its opening quote would be that one cell, and
/// would neither be created nor rejected.
fn csv_records(text: &str) -> Result<Vec<(u64, String, Vec<String>)>, String> {
    let mut records = Vec::new();
    let (mut cells, mut cell) = (Vec::new(), String::new());
    let (mut line, mut start_line, mut start) = (1u64, 1u64, 0usize);
    let (mut quoted, mut quote_line) = (false, 0u64);
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek().is_some_and(|(_, next)| *next == '"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') if cell.is_empty() => (quoted, quote_line) = (true, line),
            (false, ',') => cells.push(std::mem::take(&mut cell)),
            (false, '\n') => {
                cells.push(std::mem::take(&mut cell));
                let raw = text[start..at].trim_end_matches('\r').to_owned();
                records.push((start_line, raw, std::mem::take(&mut cells)));
                line += 1;
                start_line = line;
                start = at + 1;
            }
            (false, '\r') if chars.peek().is_some_and(|(_, next)| *next == '\n') => {}
            (_, c) => {
                if c == '\n' {
                    line += 1;
                }
                cell.push(c);
            }
        }
    }
    if quoted {
        return Err(format!(
            "line {quote_line}: a quoted cell opens there and is never closed (a `\"` is \
             missing, or a quote inside a cell is not doubled)"
        ));
    }
    if start < text.len() {
        cells.push(cell);
        records.push((start_line, text[start..].to_owned(), cells));
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_cells_may_hold_commas_quotes_and_line_breaks() {
        let records =
            csv_records("a,b\r\n\"x, y\",\"say \"\"hi\"\"\"\n\"two\nlines\",z\n").unwrap();
        let cells: Vec<Vec<String>> = records.iter().map(|(_, _, c)| c.clone()).collect();
        assert_eq!(
            cells,
            [
                vec!["a", "b"],
                vec!["x, y", "say \"hi\""],
                vec!["two\nlines", "z"]
            ]
        );
        // Each record names the line it starts on.
        let lines: Vec<u64> = records.iter().map(|(line, _, _)| *line).collect();
        assert_eq!(lines, [1, 2, 3]);
    }

    #[test]
    fn a_quoted_cell_never_closed_refuses_the_file_naming_its_line() {
        let text = "isbn,title\n1,\"The classic\n2,Algorithms\n3,Patterns\n";
        let refused = csv_records(text).unwrap_err();
        assert!(
            refused.starts_with("line 2: a quoted cell opens there"),
            "{refused}"
        );
        let refused = read_csv(Path::new("f.csv"), text, Kind::Books)
            .err()
            .expect("refused");
        assert!(refused.starts_with("f.csv is not CSV: line 2"), "{refused}");
        // Closed on a later line, it is one cell holding a line break, as RFC 4180 allows.
        assert_eq!(csv_records("a,b\n\"x\ny\",z\n").unwrap().len(), 2);
    }

    #[test]
    fn a_csv_header_naming_a_column_twice_is_refused_whole() {
        let refused = read_csv(
            Path::new("f.csv"),
            "plate,plate,chassis\na,b,c\n",
            Kind::Vehicles,
        )
        .err()
        .expect("refused");
        assert!(refused.contains("names plate twice"), "{refused}");
    }

    #[test]
    fn a_csv_without_a_header_row_is_refused_whole() {
        for text in ["", "\n", " , \n"] {
            let refused = read_csv(Path::new("f.csv"), text, Kind::Branches)
                .err()
                .expect("refused");
            assert!(
                refused.ends_with("no header row naming the columns branches rows need"),
                "{text:?}: {refused}"
            );
        }
    }

    #[test]
    fn a_csv_without_a_needed_column_is_refused_whole() {
        let refused = read_csv(Path::new("f.csv"), "branchId,name\nc,C\n", Kind::Branches)
            .err()
            .unwrap();
        assert!(
            refused.contains("lacks address, city, phone, openingHours"),
            "{refused}"
        );
    }
}
