//! Parser for the resource report `ptxas -v` prints (through `nvcc -Xptxas -v`).
//!
//! The report is a sequence of lines like these (CUDA 12.9 and 13.0 wording):
//!
//! ```text
//! ptxas info    : Compiling entry function 'reduce_smem' for 'sm_89'
//! ptxas info    : Function properties for reduce_smem
//!     128 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//! ptxas info    : Used 29 registers, used 1 barriers, 128 bytes cumulative stack size, 1024 bytes smem, 372 bytes cmem[0]
//! ```
//!
//! Older CUDA 12 releases leave out `used N barriers` and `cumulative stack size`; every
//! release leaves out `smem` and `cmem[0]` when they are zero. The `Used ...` line is read
//! as a comma-separated list of `N <what>` items in any order, so a field that is absent
//! stays `None` and an unknown one is ignored. `Function properties` blocks of non-entry
//! (device) functions are skipped: only entry functions can be launched and gated.

use repro_schema::EntryResources;

/// Every entry function's resources, in the order ptxas compiled them. Lines that are not
/// part of the report (compiler errors, warnings, `#` comments) are ignored.
pub fn parse(report: &str) -> Vec<EntryResources> {
    let mut entries: Vec<EntryResources> = Vec::new();
    // The entry whose `Used ...` line comes next.
    let mut compiling: Option<usize> = None;
    // The entry whose `N bytes stack frame, ...` line comes next (None: a device function).
    let mut properties_of: Option<usize> = None;

    for raw in report.lines() {
        let line = strip_prefix(raw);
        if let Some(name) = quoted_after(line, "Compiling entry function ") {
            entries.push(EntryResources {
                name: name.to_string(),
                ..EntryResources::default()
            });
            compiling = Some(entries.len() - 1);
            properties_of = None;
        } else if let Some(name) = line.strip_prefix("Function properties for ") {
            let name = name.trim();
            properties_of = entries.iter().rposition(|e| e.name == name);
        } else if line.contains("bytes stack frame") {
            if let Some(i) = properties_of.take() {
                read_properties(&mut entries[i], line);
            }
        } else if let Some(items) = line.strip_prefix("Used ") {
            if let Some(i) = compiling.take() {
                read_usage(&mut entries[i], items);
            }
        }
    }
    entries
}

/// The text after `ptxas info    :` / `ptxas warning :`, trimmed.
fn strip_prefix(line: &str) -> &str {
    let line = line.trim();
    match line.strip_prefix("ptxas") {
        Some(rest) => rest.split_once(':').map_or(rest, |(_, after)| after).trim(),
        None => line,
    }
}

/// `'name'` right after `prefix`.
fn quoted_after<'a>(line: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(prefix)?.strip_prefix('\'')?;
    rest.split_once('\'').map(|(name, _)| name)
}

/// `128 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads`.
fn read_properties(entry: &mut EntryResources, line: &str) {
    for (n, what) in items(line) {
        match what {
            "bytes stack frame" => entry.stack_bytes = Some(n),
            "bytes spill stores" => entry.spill_store_bytes = Some(n),
            "bytes spill loads" => entry.spill_load_bytes = Some(n),
            _ => {}
        }
    }
}

/// `29 registers, used 1 barriers, 128 bytes cumulative stack size, 1024 bytes smem, 372 bytes cmem[0]`
/// (the leading `Used ` already stripped).
fn read_usage(entry: &mut EntryResources, line: &str) {
    for (n, what) in items(line) {
        match what {
            "registers" => entry.registers = u32::try_from(n).ok(),
            "barriers" => entry.barriers = u32::try_from(n).ok(),
            "bytes smem" => entry.smem_bytes = Some(n),
            "bytes cmem[0]" => entry.cmem_bytes = Some(n),
            "bytes cumulative stack size" => entry.cumulative_stack_bytes = Some(n),
            _ => {}
        }
    }
}

/// The `N <what>` items of a comma-separated list; a leading `used ` is dropped, items
/// that do not start with a number are skipped.
fn items(line: &str) -> impl Iterator<Item = (u64, &str)> {
    line.split(',').filter_map(|item| {
        let item = item.trim();
        let item = item.strip_prefix("used ").unwrap_or(item);
        let (n, what) = item.split_once(char::is_whitespace)?;
        Some((n.parse().ok()?, what.trim()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<EntryResources> {
        let path = format!(
            "{}/tests/fixtures/ptxas/{name}.txt",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
        );
        parse(&std::fs::read_to_string(&path).unwrap())
    }

    fn entry(entries: &[EntryResources], name: &str) -> EntryResources {
        entries
            .iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no entry {name} in {entries:?}"))
            .clone()
    }

    #[test]
    fn cuda13_sm90_several_entries_and_a_device_function() {
        let entries = fixture("cuda13_sm90_multi");
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        // The noinline device function `_Z6helperfi` is not an entry.
        assert_eq!(names, ["reduce_smem", "scale_kernel"]);
        assert_eq!(
            entry(&entries, "reduce_smem"),
            EntryResources {
                name: "reduce_smem".into(),
                registers: Some(30),
                smem_bytes: Some(1024),
                stack_bytes: Some(128),
                cumulative_stack_bytes: Some(128),
                spill_store_bytes: Some(0),
                spill_load_bytes: Some(0),
                barriers: Some(1),
                // sm_90 reports no cmem[0] here.
                cmem_bytes: None,
            }
        );
        let scale = entry(&entries, "scale_kernel");
        assert_eq!(scale.registers, Some(10));
        assert_eq!(scale.barriers, Some(0));
        assert_eq!(scale.smem_bytes, None, "no smem item in the report");
        assert_eq!(scale.cumulative_stack_bytes, None);
        assert_eq!(scale.stack_bytes, Some(0));
    }

    #[test]
    fn cuda13_sm89_reports_constant_memory() {
        let entries = fixture("cuda13_sm89_multi");
        let reduce = entry(&entries, "reduce_smem");
        assert_eq!(reduce.registers, Some(29));
        assert_eq!(reduce.cmem_bytes, Some(372));
        assert_eq!(reduce.smem_bytes, Some(1024));
        assert_eq!(entry(&entries, "scale_kernel").cmem_bytes, Some(372));
    }

    #[test]
    fn cuda13_spills() {
        let spilly = entry(&fixture("cuda13_sm90_spill"), "spilly");
        assert_eq!(spilly.registers, Some(24));
        assert_eq!(spilly.stack_bytes, Some(824));
        assert_eq!(spilly.spill_store_bytes, Some(1536));
        assert_eq!(spilly.spill_load_bytes, Some(1808));
        assert_eq!(spilly.cumulative_stack_bytes, Some(824));
        assert_eq!(spilly.barriers, Some(0));
        let spilly89 = entry(&fixture("cuda13_sm89_spill"), "spilly");
        assert_eq!(spilly89.spill_store_bytes, Some(2172));
        assert_eq!(spilly89.spill_load_bytes, Some(2440));
    }

    #[test]
    fn cuda12_reports_parse_like_cuda13() {
        let e12 = fixture("cuda12_sm90_multi");
        let e13 = fixture("cuda13_sm90_multi");
        assert_eq!(e12, e13);
        let e12 = fixture("cuda12_sm89_multi");
        assert_eq!(entry(&e12, "reduce_smem").registers, Some(29));
        let spilly = entry(&fixture("cuda12_sm89_spill"), "spilly");
        assert_eq!(spilly.spill_store_bytes, Some(2172));
        assert_eq!(spilly.cmem_bytes, Some(372));
    }

    #[test]
    fn older_wording_without_barriers_or_cumulative_stack() {
        // The `Used` line as CUDA 11 / early CUDA 12 print it: smem before cmem, no
        // barriers, no cumulative stack; and a cmem bank other than 0.
        let report = "\
ptxas info    : Compiling entry function 'k' for 'sm_80'
ptxas info    : Function properties for k
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 255 registers, 49152 bytes smem, 400 bytes cmem[0], 8 bytes cmem[2]
";
        let k = entry(&parse(report), "k");
        assert_eq!(k.registers, Some(255));
        assert_eq!(k.smem_bytes, Some(49152));
        assert_eq!(k.cmem_bytes, Some(400));
        assert_eq!(k.barriers, None);
        assert_eq!(k.cumulative_stack_bytes, None);
        assert_eq!(k.spill_store_bytes, Some(4));
    }

    #[test]
    fn missing_properties_block_leaves_fields_empty() {
        let report = "ptxas info    : Compiling entry function 'k' for 'sm_90'\n\
                      ptxas info    : Used 12 registers\n";
        let k = entry(&parse(report), "k");
        assert_eq!(k.registers, Some(12));
        assert_eq!(k.stack_bytes, None);
        assert_eq!(k.spill_store_bytes, None);
        assert_eq!(k.barriers, None);
    }

    #[test]
    fn compile_error_output_has_no_entries() {
        assert!(fixture("cuda13_compile_error").is_empty());
        assert!(parse("").is_empty());
        assert!(parse("garbage\nUsed lots of registers\n").is_empty());
    }
}
