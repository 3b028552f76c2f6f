//! The shape of a request written as dimensions (`--dims rows=4,hidden=1024`) rather than
//! a shape name.

use repro_pipeline::workload::exprs::Bindings;

/// Whether a shape text is dimensions (`rows=4,hidden=1024`, or `4,1024`: integers in the
/// order of the workload's `dims`) rather than a shape name.
pub fn is_dims(text: &str) -> bool {
    !text.is_empty()
        && text.split(',').all(|part| {
            let value = part.split_once('=').map_or(part, |(_, v)| v);
            value.trim().parse::<i64>().is_ok()
        })
}

/// The dimensions `text` gives for a workload with `dims`: every one of them, by name or in
/// order, each a positive integer.
pub fn parse_dims(text: &str, dims: &[String]) -> Result<Bindings, String> {
    let expected = || {
        format!(
            "expected the workload's dimensions as {} (or their values in that order)",
            dims.iter()
                .map(|d| format!("{d}=N"))
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let mut out = Bindings::new();
    for (i, part) in parts.iter().enumerate() {
        let (name, value) = match part.split_once('=') {
            Some((n, v)) => (n.trim().to_string(), v.trim()),
            None => match dims.get(i) {
                Some(d) => (d.clone(), *part),
                None => {
                    return Err(format!(
                        "{} values for {} dimensions; {}",
                        parts.len(),
                        dims.len(),
                        expected()
                    ))
                }
            },
        };
        if !dims.contains(&name) {
            return Err(format!(
                "`{name}` is not a dimension of the workload; {}",
                expected()
            ));
        }
        match value.parse::<i64>() {
            Ok(v) if v > 0 => {
                out.insert(name, v);
            }
            _ => {
                return Err(format!(
                    "`{part}` is not a positive integer; {}",
                    expected()
                ))
            }
        }
    }
    if let Some(missing) = dims.iter().find(|d| !out.contains_key(*d)) {
        return Err(format!("no value for `{missing}`; {}", expected()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn dims_are_named_or_in_order_and_every_one_is_given() {
        let dims = names(&["rows", "hidden"]);
        let both = Bindings::from([("rows".into(), 4), ("hidden".into(), 1024)]);
        assert_eq!(parse_dims("rows=4,hidden=1024", &dims).unwrap(), both);
        assert_eq!(parse_dims("hidden=1024, rows=4", &dims).unwrap(), both);
        assert_eq!(parse_dims("4,1024", &dims).unwrap(), both);
        let err = parse_dims("4", &dims).unwrap_err();
        assert_eq!(err, "no value for `hidden`; expected the workload's dimensions as rows=N,hidden=N (or their values in that order)");
        assert!(parse_dims("rows=4,hiden=2", &dims)
            .unwrap_err()
            .starts_with("`hiden` is not a dimension"));
        assert!(parse_dims("rows=0,hidden=2", &dims)
            .unwrap_err()
            .starts_with("`rows=0` is not a positive integer"));
        assert!(parse_dims("1,2,3", &dims)
            .unwrap_err()
            .starts_with("3 values for 2 dimensions"));
        assert!(is_dims("2,8,512,64") && is_dims("rows=4,hidden=1024"));
        assert!(!is_dims("mission") && !is_dims("") && !is_dims("rows=x"));
    }
}
