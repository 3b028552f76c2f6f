//! Reads what `ncu --csv` prints, for the raw page (one row per launch, one column per
//! metric, a units row under the header) and the details page (one row per metric:
//! "Section Name","Metric Name","Metric Unit","Metric Value").
//!
//! ncu writes its own `==PROF==`/`==WARNING==`/`==ERROR==` lines and the profiled program's
//! output to the same stream, before the CSV; those lines are skipped. Columns are found by
//! their header name, never by position. Values are kept as printed (`"1,980,000"`, `n/a`,
//! `(256, 1, 1)`); [`Metric::number`] reads the numeric ones.

use std::collections::BTreeMap;

/// Which `--page` an export came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    Raw,
    Details,
}

/// One metric of one launch, as ncu printed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    pub value: String,
    pub unit: String,
}

impl Metric {
    /// The value as a number: thousands separators dropped; `None` for `n/a`, empty or
    /// non-numeric values (`(256, 1, 1)`, `PolicySpread`).
    pub fn number(&self) -> Option<f64> {
        parse_number(&self.value)
    }

    /// Value and unit as one string, e.g. `16,544 ns`.
    pub fn display(&self) -> String {
        if self.unit.is_empty() {
            self.value.clone()
        } else {
            format!("{} {}", self.value, self.unit)
        }
    }
}

/// One profiled kernel launch.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// ncu's `ID` column (the launch's index among the profiled ones).
    pub id: String,
    /// The `Kernel Name` column, e.g. `scale_add(float *, const float *, float, int, int)`.
    pub kernel: String,
    /// The `CC` column, e.g. `9.0`, when present.
    pub compute_capability: Option<String>,
    /// Metric name → value. Raw page: the metric names of the header
    /// (`gpu__time_duration.sum`). Details page: `<Section Name>: <Metric Name>`
    /// (`GPU Speed Of Light Throughput: Duration`), except the rows of the
    /// `Command line profiler metrics` section, which carry raw metric names.
    pub metrics: BTreeMap<String, Metric>,
}

impl Launch {
    pub fn get(&self, name: &str) -> Option<&Metric> {
        self.metrics.get(name)
    }

    /// The function name without its parameter list (`scale_add`).
    pub fn function_name(&self) -> &str {
        self.kernel.split('(').next().unwrap_or(&self.kernel).trim()
    }
}

/// A parsed export.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    pub page: Page,
    /// In the order ncu printed them.
    pub launches: Vec<Launch>,
}

/// Why an export could not be read. Line numbers are 1-based lines of the input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    #[error("no ncu CSV header found (a line starting with \"ID\",\"Process ID\"){}", said(.ncu_said))]
    NoHeader {
        /// ncu's own `==ERROR==`/`==WARNING==` lines, which usually say why.
        ncu_said: Vec<String>,
    },
    #[error("line {line}: the header has no {column:?} column; is this `ncu --csv` output?")]
    MissingColumn { line: usize, column: &'static str },
    #[error("line {line}: expected the units row of a raw-page export (an empty \"ID\" field) right under the header, found {found:?}; export again with `ncu --csv --page raw`")]
    MissingUnitsRow { line: usize, found: String },
    #[error("line {line}: {found} fields where the header has {expected}; the file looks truncated or edited")]
    RowLength {
        line: usize,
        expected: usize,
        found: usize,
    },
    #[error("line {line}: the file ends inside a quoted field; it looks truncated")]
    UnterminatedQuote { line: usize },
    #[error("line {line}: {message}")]
    Csv { line: usize, message: String },
    #[error("the export has a header but no profiled launch")]
    NoLaunches,
}

fn said(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("; ncu said:\n  {}", lines.join("\n  "))
    }
}

/// `1,980,000` → 1980000; `n/a`, empty and non-numeric text → `None`.
pub fn parse_number(text: &str) -> Option<f64> {
    let t = text.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("n/a") {
        return None;
    }
    let cleaned: String = t.chars().filter(|c| *c != ',').collect();
    cleaned.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// ncu's message lines (`==ERROR== ...`, `==WARNING== ...`) found anywhere in `text`.
pub fn ncu_messages(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim_end)
        .filter(|l| l.starts_with("==ERROR==") || l.starts_with("==WARNING=="))
        .map(str::to_string)
        .collect()
}

/// The CSV part of `text`: from the header on, without ncu's `==...==` lines or other
/// text between records. Returns the kept text and, per kept line, its line number in `text`.
fn csv_region(text: &str) -> Result<(String, Vec<usize>), ParseError> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("\"ID\","))
        .ok_or_else(|| ParseError::NoHeader {
            ncu_said: ncu_messages(text),
        })?;
    let mut kept = String::new();
    let mut line_of = Vec::new();
    let mut in_quote = false;
    for (i, line) in lines.iter().enumerate().skip(start) {
        // Outside a quoted field every ncu record starts with a quote; anything else is
        // ncu's own messages or the program's output.
        if !in_quote && !line.starts_with('"') {
            continue;
        }
        kept.push_str(line);
        kept.push('\n');
        line_of.push(i + 1);
        if line.matches('"').count() % 2 == 1 {
            in_quote = !in_quote;
        }
    }
    if in_quote {
        return Err(ParseError::UnterminatedQuote {
            line: line_of.last().copied().unwrap_or(start + 1),
        });
    }
    Ok((kept, line_of))
}

/// Parse a raw-page or details-page export (the page is recognized from the header).
pub fn parse(text: &str) -> Result<Export, ParseError> {
    let (csv_text, line_of) = csv_region(text)?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(csv_text.as_bytes());
    let mut records = Vec::new();
    for rec in reader.records() {
        let line_in = |pos: Option<&csv::Position>| {
            let l = pos.map(|p| p.line() as usize).unwrap_or(1).max(1);
            line_of.get(l - 1).copied().unwrap_or(l)
        };
        match rec {
            Ok(r) => {
                let line = line_in(r.position());
                records.push((line, r));
            }
            Err(e) => {
                return Err(ParseError::Csv {
                    line: line_in(e.position()),
                    message: e.to_string(),
                })
            }
        }
    }
    let mut iter = records.into_iter();
    let (header_line, header) = iter
        .next()
        .ok_or(ParseError::NoHeader { ncu_said: vec![] })?;
    let columns = Columns::new(&header, header_line)?;
    let rest: Vec<_> = iter.collect();
    let export = if header.iter().any(|h| h == "Metric Name") {
        parse_details(&columns, rest)?
    } else {
        parse_raw(&columns, &header, rest)?
    };
    if export.launches.is_empty() {
        return Err(ParseError::NoLaunches);
    }
    Ok(export)
}

/// Column indices of the header, looked up by name.
struct Columns {
    names: Vec<String>,
    line: usize,
}

impl Columns {
    fn new(header: &csv::StringRecord, line: usize) -> Result<Self, ParseError> {
        let c = Columns {
            names: header.iter().map(str::to_string).collect(),
            line,
        };
        c.index("ID")?;
        c.index("Kernel Name")?;
        Ok(c)
    }

    fn index(&self, column: &'static str) -> Result<usize, ParseError> {
        self.names
            .iter()
            .position(|n| n == column)
            .ok_or(ParseError::MissingColumn {
                line: self.line,
                column,
            })
    }

    fn optional(&self, column: &str) -> Option<usize> {
        self.names.iter().position(|n| n == column)
    }
}

fn field(rec: &csv::StringRecord, i: usize) -> String {
    rec.get(i).unwrap_or("").to_string()
}

/// Columns before the metrics on the raw page: launch identity, not metrics.
const RAW_ID_COLUMNS: &[&str] = &[
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
];

fn parse_raw(
    columns: &Columns,
    header: &csv::StringRecord,
    rows: Vec<(usize, csv::StringRecord)>,
) -> Result<Export, ParseError> {
    let id = columns.index("ID")?;
    let kernel = columns.index("Kernel Name")?;
    let cc = columns.optional("CC");
    let mut rows = rows.into_iter();
    let units = match rows.next() {
        Some((line, rec)) => {
            let id_value = field(&rec, id);
            if !id_value.is_empty() {
                return Err(ParseError::MissingUnitsRow {
                    line,
                    found: rec.iter().take(5).collect::<Vec<_>>().join(","),
                });
            }
            check_len(&rec, header.len(), line)?;
            rec
        }
        None => return Err(ParseError::NoLaunches),
    };
    let mut launches = Vec::new();
    for (line, rec) in rows {
        check_len(&rec, header.len(), line)?;
        let mut metrics = BTreeMap::new();
        for (i, name) in header.iter().enumerate() {
            if RAW_ID_COLUMNS.contains(&name) {
                continue;
            }
            metrics.insert(
                name.to_string(),
                Metric {
                    value: field(&rec, i),
                    unit: field(&units, i),
                },
            );
        }
        launches.push(Launch {
            id: field(&rec, id),
            kernel: field(&rec, kernel),
            compute_capability: cc.map(|c| field(&rec, c)).filter(|s| !s.is_empty()),
            metrics,
        });
    }
    Ok(Export {
        page: Page::Raw,
        launches,
    })
}

fn check_len(rec: &csv::StringRecord, expected: usize, line: usize) -> Result<(), ParseError> {
    if rec.len() != expected {
        return Err(ParseError::RowLength {
            line,
            expected,
            found: rec.len(),
        });
    }
    Ok(())
}

/// The details page section whose rows carry raw metric names (`--metrics` on the details page).
const COMMAND_LINE_SECTION: &str = "Command line profiler metrics";

fn parse_details(
    columns: &Columns,
    rows: Vec<(usize, csv::StringRecord)>,
) -> Result<Export, ParseError> {
    let need = |c: &'static str| columns.index(c);
    let (id, kernel) = (need("ID")?, need("Kernel Name")?);
    let (section, name, unit, value) = (
        need("Section Name")?,
        need("Metric Name")?,
        need("Metric Unit")?,
        need("Metric Value")?,
    );
    let cc = columns.optional("CC");
    let rule = columns.optional("Rule Name");
    let width = columns.names.len();
    let mut launches: Vec<Launch> = Vec::new();
    for (line, rec) in rows {
        // ncu ends a metric row at an empty `Rule Name` field, leaving off the rule
        // columns after it; any other length means a field is missing or extra, and the
        // columns after it would be read shifted.
        let ends_at_rule = rule.is_some_and(|r| rec.len() == r + 1 && field(&rec, r).is_empty());
        if rec.len() != width && !ends_at_rule {
            return Err(ParseError::RowLength {
                line,
                expected: width,
                found: rec.len(),
            });
        }
        // Rule rows (advice text) carry no metric.
        if rule.is_some_and(|r| !field(&rec, r).is_empty()) || field(&rec, name).is_empty() {
            continue;
        }
        let launch_id = field(&rec, id);
        if launches.last().map(|l| &l.id) != Some(&launch_id) {
            launches.push(Launch {
                id: launch_id,
                kernel: field(&rec, kernel),
                compute_capability: cc.map(|c| field(&rec, c)).filter(|s| !s.is_empty()),
                metrics: BTreeMap::new(),
            });
        }
        let sec = field(&rec, section);
        let key = if sec == COMMAND_LINE_SECTION {
            field(&rec, name)
        } else {
            format!("{sec}: {}", field(&rec, name))
        };
        let launch = launches.last_mut().expect("pushed above");
        launch.metrics.insert(
            key,
            Metric {
                value: field(&rec, value),
                unit: field(&rec, unit),
            },
        );
    }
    Ok(Export {
        page: Page::Details,
        launches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_drop_thousands_separators_and_reject_text() {
        assert_eq!(parse_number("1,980,000"), Some(1_980_000.0));
        assert_eq!(parse_number("2,591,208,791.21"), Some(2_591_208_791.21));
        assert_eq!(parse_number("107.26"), Some(107.26));
        assert_eq!(parse_number("n/a"), None);
        assert_eq!(parse_number(""), None);
        assert_eq!(parse_number("(256, 1, 1)"), None);
        assert_eq!(parse_number("PolicySpread"), None);
    }

    #[test]
    fn text_before_and_among_records_is_skipped() {
        let text = "app: hello\n==PROF== Connected\n\"ID\",\"Kernel Name\",\"m.sum\"\n\"\",\"\",\"ns\"\n==WARNING== between\nprogram text\n\"0\",\"k(int)\",\"1,024\"\n";
        let e = parse(text).unwrap();
        assert_eq!(e.page, Page::Raw);
        assert_eq!(e.launches.len(), 1);
        assert_eq!(e.launches[0].function_name(), "k");
        assert_eq!(e.launches[0].get("m.sum").unwrap().number(), Some(1024.0));
        assert_eq!(e.launches[0].get("m.sum").unwrap().display(), "1,024 ns");
    }

    #[test]
    fn quoted_newlines_stay_inside_their_field() {
        let text = "\"ID\",\"Kernel Name\",\"m\"\n\"\",\"\",\"\"\n\"0\",\"k\",\"a\nb\"\n";
        let e = parse(text).unwrap();
        assert_eq!(e.launches[0].get("m").unwrap().value, "a\nb");
    }

    #[test]
    fn missing_units_row_is_named() {
        let text = "\"ID\",\"Kernel Name\",\"m\"\n\"0\",\"k\",\"1\"\n";
        let err = parse(text).unwrap_err();
        assert!(
            matches!(err, ParseError::MissingUnitsRow { line: 2, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("units row"));
    }

    #[test]
    fn no_header_quotes_ncu() {
        let text = "app: hi\n==PROF== Disconnected\n==WARNING== No kernels were profiled.\n";
        let err = parse(text).unwrap_err();
        assert!(
            err.to_string().contains("No kernels were profiled"),
            "{err}"
        );
    }

    #[test]
    fn short_row_and_open_quote_are_errors() {
        let short = "\"ID\",\"Kernel Name\",\"m\"\n\"\",\"\",\"\"\n\"0\",\"k\"\n";
        assert!(matches!(
            parse(short).unwrap_err(),
            ParseError::RowLength {
                line: 3,
                expected: 3,
                found: 2
            }
        ));
        let open = "\"ID\",\"Kernel Name\",\"m\"\n\"\",\"\",\"\"\n\"0\",\"k\",\"12";
        assert!(matches!(
            parse(open).unwrap_err(),
            ParseError::UnterminatedQuote { line: 3 }
        ));
    }

    #[test]
    fn a_details_row_missing_a_field_is_an_error() {
        let header = "\"ID\",\"Kernel Name\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\",\"Rule Name\",\"Rule Type\"\n";
        let good = "\"0\",\"k\",\"S\",\"Duration\",\"ns\",\"1,024\",\n\"0\",\"k\",\"S\",\"\",\"\",\"\",\"Rule\",\"OPT\"\n";
        let e = parse(&format!("{header}{good}")).unwrap();
        assert_eq!(
            e.launches[0].get("S: Duration").unwrap().number(),
            Some(1024.0)
        );
        // The unit left out: the value would be read as the unit.
        let missing = "\"0\",\"k\",\"S\",\"Duration\",\"1,024\",\n";
        assert_eq!(
            parse(&format!("{header}{missing}")).unwrap_err(),
            ParseError::RowLength {
                line: 2,
                expected: 8,
                found: 6
            }
        );
        // Without the rule columns every row has the header's length.
        let bare = "\"ID\",\"Kernel Name\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\"0\",\"k\",\"S\",\"Duration\",\"1,024\"\n";
        assert!(matches!(
            parse(bare).unwrap_err(),
            ParseError::RowLength { line: 2, .. }
        ));
    }

    #[test]
    fn header_without_kernel_column_is_rejected() {
        let err = parse("\"ID\",\"x\"\n").unwrap_err();
        assert_eq!(
            err,
            ParseError::MissingColumn {
                line: 1,
                column: "Kernel Name"
            }
        );
    }
}
