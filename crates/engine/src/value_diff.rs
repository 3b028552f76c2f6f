//! A changed value said in one terminal line. Short values read `from → to`; long ones (the
//! profile stage's metric list, a tune space, the gates as JSON) read as what changed in
//! them: the names added and removed, or the keys changed, as many as fit, then counts;
//! other long text (a hardware line, a message) is cut to fit, with `…`. `repro status
//! --json` keeps both values in full.

use std::collections::BTreeMap;

/// What `from → to` became, in at most `budget` columns (counts alone when even the names
/// do not fit).
pub fn summarize(from: &str, to: &str, budget: usize) -> String {
    let plain = format!("{from} → {to}");
    if width(&plain) <= budget {
        return plain;
    }
    let groups = match (items(from), items(to)) {
        (Some(Items::Keyed(a)), Some(Items::Keyed(b))) => keyed_groups(&a, &b),
        (Some(Items::List(a)), Some(Items::List(b))) => list_groups(&a, &b),
        _ => Vec::new(),
    };
    if groups.is_empty() {
        return cut_both(from, to, budget);
    }
    if groups.iter().all(|g| g.names.is_empty()) {
        return "same items, in another order".into();
    }
    // Shortest names first, so that one long name does not crowd out the rest; full names
    // if that shows as many, else names cut at LONGEST_NAME.
    let mut groups = groups;
    for g in &mut groups {
        g.names.sort_by_key(|n| width(n));
    }
    let (full, shown_full) = fit(&groups, budget);
    for g in &mut groups {
        g.names = g.names.iter().map(|n| short(n)).collect();
    }
    let (cut, shown_cut) = fit(&groups, budget);
    if shown_cut > shown_full {
        cut
    } else {
        full
    }
}

/// The groups in `budget` columns: counts first, then one more name per group, round after
/// round, while it fits. Returns the text and how many names it shows.
fn fit(groups: &[Group], budget: usize) -> (String, usize) {
    let mut shown = vec![0; groups.len()];
    loop {
        let mut grew = false;
        for (i, group) in groups.iter().enumerate() {
            if shown[i] < group.names.len() {
                shown[i] += 1;
                if width(&render(groups, &shown)) <= budget {
                    grew = true;
                } else {
                    shown[i] -= 1;
                }
            }
        }
        if !grew {
            return (render(groups, &shown), shown.iter().sum());
        }
    }
}

/// Columns a line takes (every character here is one column wide).
pub fn width(s: &str) -> usize {
    s.chars().count()
}

/// A value seen as a list or a map.
enum Items {
    List(Vec<String>),
    Keyed(BTreeMap<String, String>),
}

/// JSON objects are maps; JSON arrays and comma-separated names (no spaces inside an item,
/// so prose is not mistaken for a list) are lists; anything else is a single value.
fn items(s: &str) -> Option<Items> {
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(serde_json::Value::Object(map)) => {
            return Some(Items::Keyed(
                map.into_iter().map(|(k, v)| (k, v.to_string())).collect(),
            ))
        }
        Ok(serde_json::Value::Array(list)) => {
            return Some(Items::List(
                list.into_iter()
                    .map(|v| match v {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    })
                    .collect(),
            ))
        }
        _ => {}
    }
    let split: Vec<String> = s.split(',').map(|p| p.trim().to_string()).collect();
    let names = split.len() > 1 && split.iter().all(|p| !p.contains(char::is_whitespace));
    names.then_some(Items::List(split))
}

/// One kind of difference (`added`, `removed`, `changed`) and the names it concerns.
struct Group {
    label: &'static str,
    names: Vec<String>,
}

fn list_groups(from: &[String], to: &[String]) -> Vec<Group> {
    let added = to.iter().filter(|x| !from.contains(x)).cloned().collect();
    let removed = from.iter().filter(|x| !to.contains(x)).cloned().collect();
    vec![
        Group {
            label: "added",
            names: added,
        },
        Group {
            label: "removed",
            names: removed,
        },
    ]
}

fn keyed_groups(from: &BTreeMap<String, String>, to: &BTreeMap<String, String>) -> Vec<Group> {
    let pick = |f: &dyn Fn(&String) -> bool, keys: &BTreeMap<String, String>| -> Vec<String> {
        keys.keys().filter(|&k| f(k)).cloned().collect()
    };
    vec![
        Group {
            label: "keys added",
            names: pick(&|k| !from.contains_key(k), to),
        },
        Group {
            label: "removed",
            names: pick(&|k| !to.contains_key(k), from),
        },
        Group {
            label: "changed",
            names: pick(&|k| to.get(k).is_some_and(|v| v != &from[k]), from),
        },
    ]
}

/// `added 3 (a, b, …1 more); removed 1 (c)`, with the first `shown[i]` names of group `i`.
fn render(groups: &[Group], shown: &[usize]) -> String {
    groups
        .iter()
        .zip(shown)
        .filter(|(g, _)| !g.names.is_empty())
        .map(|(g, &shown)| {
            let n = g.names.len();
            if shown == 0 {
                return format!("{} {n}", g.label);
            }
            let mut names = g.names[..n.min(shown)].join(", ");
            if n > shown {
                names.push_str(&format!(", …{} more", n - shown));
            }
            format!("{} {n} ({names})", g.label)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Names longer than this may be shown cut, with `…` (an ncu metric name can be 100
/// characters long).
const LONGEST_NAME: usize = 40;

fn short(name: &str) -> String {
    if width(name) <= LONGEST_NAME {
        return name.to_string();
    }
    let kept: String = name.chars().take(LONGEST_NAME - 1).collect();
    format!("{kept}…")
}

/// `from → to` in `budget` columns: a short side whole, the rest cut with `…`.
fn cut_both(from: &str, to: &str, budget: usize) -> String {
    // What both share at the start says nothing about the change: keep where they differ.
    let (from, to) = after_common_start(from, to);
    let plain = format!("{from} → {to}");
    if width(&plain) <= budget {
        return plain;
    }
    let room = budget.saturating_sub(3);
    let (wf, wt) = (width(&from), width(&to));
    let (rf, rt) = if wf <= room / 2 {
        (wf, room - wf)
    } else if wt <= room / 2 {
        (room - wt, wt)
    } else {
        (room / 2, room - room / 2)
    };
    let cut = |s: &str, keep: usize| {
        if width(s) <= keep {
            s.to_string()
        } else {
            let kept: String = s.chars().take(keep.saturating_sub(1)).collect();
            format!("{kept}…")
        }
    };
    format!("{} → {}", cut(&from, rf), cut(&to, rt))
}

/// Both values without the words they start with in common (`…` marks the cut), when that
/// start is long enough to matter; else both as they are.
fn after_common_start(from: &str, to: &str) -> (String, String) {
    let common: usize = from
        .chars()
        .zip(to.chars())
        .take_while(|(a, b)| a == b)
        .count();
    // Back to the last word boundary inside the common start.
    let boundary = from
        .char_indices()
        .take(common)
        .filter(|(_, c)| *c == ' ' || *c == ',')
        .map(|(i, c)| i + c.len_utf8())
        .last()
        .unwrap_or(0);
    if boundary < 12 {
        return (from.to_string(), to.to_string());
    }
    (
        format!("…{}", &from[boundary..]),
        format!("…{}", &to[boundary..]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_value_keeps_where_it_differs() {
        let from = "Cuda compilation tools, release 13.0, V13.0.88";
        let to = "Cuda compilation tools, release 13.1, V13.1.80";
        assert_eq!(summarize(from, to, 60), "…13.0, V13.0.88 → …13.1, V13.1.80");
    }

    /// The profile stage's metric list as its fingerprint holds it (about 40 names).
    fn metrics(extra: &[&str], drop: &[&str]) -> String {
        let mut names: Vec<String> = (0..40)
            .map(|i| format!("smsp__pcsamp_warps_issue_stalled_reason_{i:02}.sum"))
            .filter(|n| !drop.contains(&n.as_str()))
            .collect();
        names.extend(extra.iter().map(|s| s.to_string()));
        names.join(",")
    }

    #[test]
    fn short_values_read_from_and_to() {
        assert_eq!(summarize("3", "5", 80), "3 → 5");
    }

    #[test]
    fn a_long_list_says_what_was_added_and_removed_within_the_budget() {
        let gone = "smsp__pcsamp_warps_issue_stalled_reason_07.sum";
        let from = metrics(&[], &[]);
        let to = metrics(&["l1tex__t_bytes.sum", "dram__bytes_read.sum"], &[gone]);
        assert!(from.len() > 1000);
        let text = summarize(&from, &to, 80);
        assert_eq!(
            text,
            "added 2 (l1tex__t_bytes.sum, dram__bytes_read.sum); removed 1"
        );
        let text = summarize(&from, &to, 60);
        assert_eq!(text, "added 2 (l1tex__t_bytes.sum, …1 more); removed 1");
        // Cut names when that shows more of them.
        assert_eq!(
            summarize(&from, &to, 105),
            "added 2 (l1tex__t_bytes.sum, dram__bytes_read.sum); removed 1 \
             (smsp__pcsamp_warps_issue_stalled_reason…)"
        );
        // With room, every name; with little room, counts only.
        assert_eq!(
            summarize(&from, &to, 200),
            format!("added 2 (l1tex__t_bytes.sum, dram__bytes_read.sum); removed 1 ({gone})")
        );
        assert_eq!(summarize(&from, &to, 20), "added 2; removed 1");
        // A very long name is cut rather than left out.
        let tensor = "sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_active";
        let to = format!("{from},{tensor},l1tex__t_bytes.sum");
        assert_eq!(
            summarize(&from, &to, 90),
            "added 2 (l1tex__t_bytes.sum, sm__pipe_tensor_type_hmma_hgmma_qgmma_i…)"
        );
    }

    #[test]
    fn json_maps_name_their_changed_keys_and_lists_their_items() {
        let from =
            r#"{"TILE_M":[32,64],"TILE_N":[32,64],"NUM_STAGES":[2,3],"NUM_WARPS":[4,8],"PAD":[0]}"#;
        let to = r#"{"TILE_M":[32,64,128],"TILE_N":[32,64],"NUM_STAGES":[2,3],"NUM_WARPS":[4,8],"SWIZZLE":[0,1]}"#;
        assert_eq!(
            summarize(from, to, 60),
            "keys added 1 (SWIZZLE); removed 1 (PAD); changed 1 (TILE_M)"
        );
        let a = serde_json::to_string(&(0..30).map(|i| format!("m{i}")).collect::<Vec<_>>());
        let b = serde_json::to_string(&(1..31).map(|i| format!("m{i}")).collect::<Vec<_>>());
        assert_eq!(
            summarize(&a.unwrap(), &b.unwrap(), 60),
            "added 1 (m30); removed 1 (m0)"
        );
    }

    #[test]
    fn reordered_or_unlisted_values_say_so() {
        let a = metrics(&[], &[]);
        let mut names: Vec<&str> = a.split(',').collect();
        names.reverse();
        assert_eq!(
            summarize(&a, &names.join(","), 80),
            "same items, in another order"
        );
        // Not lists: a hardware line, prose with commas. Cut to fit, not split into words.
        let gpu = "NVIDIA H100 80GB HBM3 sm_90 driver 580.159.04";
        let none =
            "no CUDA driver (libcuda.so.1) found: libcuda.so.1: cannot open shared object file";
        let text = summarize(gpu, none, 60);
        assert_eq!(
            text,
            "NVIDIA H100 80GB HBM3 sm_90… → no CUDA driver (libcuda.so.1…"
        );
        assert!(width(&text) <= 60);
        let prose = "skipped: no GPU (no driver, no attributes), try again later please";
        assert_eq!(
            summarize(prose, "ok", 40),
            "skipped: no GPU (no driver, no att… → ok"
        );
    }
}
