//! The `crates` table: the workspace's crate graph as `cargo metadata` reports it, one row
//! per crate from the top floor down, so docs/ARCHITECTURE.md draws the layering cargo
//! enforces (a crate cannot import one above it: that would be a cycle cargo refuses).

use anyhow::Context;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Deserialize)]
struct Metadata {
    packages: Vec<Package>,
    workspace_members: Vec<String>,
}

#[derive(Deserialize)]
struct Package {
    id: String,
    name: String,
    #[serde(default)]
    description: Option<String>,
    dependencies: Vec<Dependency>,
}

#[derive(Deserialize)]
struct Dependency {
    name: String,
    /// `None` for a normal dependency; `dev` and `build` ones are not layering.
    kind: Option<String>,
    /// Set for a dependency on a crate of this workspace (or another local one).
    #[serde(default)]
    path: Option<String>,
}

/// The table for the workspace whose `Cargo.toml` is in `root`, from `cargo metadata`.
pub fn render(root: &Path) -> Result<String, String> {
    metadata(root)
        .and_then(|json| table(&json))
        .map_err(|e| format!("the crates table: {e:#}"))
}

fn metadata(root: &Path) -> anyhow::Result<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    duct::cmd!(
        cargo,
        "metadata",
        "--format-version",
        "1",
        "--no-deps",
        "--offline"
    )
    .dir(root)
    .stdout_capture()
    .stderr_capture()
    .read()
    .context("`cargo metadata` failed: it needs Rust's cargo and the project's Cargo.toml")
}

/// The markdown table of `cargo metadata`'s JSON: floor (1 = depends on no other crate of
/// the workspace), crate, the workspace crates it depends on (highest first), its
/// description.
fn table(json: &str) -> anyhow::Result<String> {
    let meta: Metadata = serde_json::from_str(json).context("cannot read its JSON")?;
    let members: BTreeMap<&str, &Package> = meta
        .packages
        .iter()
        .filter(|p| meta.workspace_members.contains(&p.id))
        .map(|p| (p.name.as_str(), p))
        .collect();
    let deps: BTreeMap<&str, Vec<&str>> = members
        .iter()
        .map(|(&name, p)| {
            let on = p
                .dependencies
                .iter()
                .filter(|d| d.kind.is_none() && d.path.is_some())
                .map(|d| d.name.as_str())
                .filter(|d| members.contains_key(d))
                .collect();
            (name, on)
        })
        .collect();
    let floors = floors(&deps)?;
    let mut rows: Vec<&str> = members.keys().copied().collect();
    rows.sort_by_key(|name| (std::cmp::Reverse(floors[name]), *name));
    let mut out =
        String::from("| floor | crate | depends on | what it is for |\n|---:|---|---|---|\n");
    for name in rows {
        let mut on = deps[name].clone();
        on.sort_by_key(|d| (std::cmp::Reverse(floors[d]), *d));
        let on = match on.is_empty() {
            true => "—".to_string(),
            false => on
                .iter()
                .map(|d| format!("`{d}`"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let what = members[name].description.as_deref().unwrap_or("");
        out.push_str(&format!(
            "| {} | `{name}` | {on} | {} |\n",
            floors[name],
            what.replace('|', "\\|")
        ));
    }
    Ok(out)
}

/// Each crate's floor: one above the highest crate it depends on.
fn floors<'a>(deps: &BTreeMap<&'a str, Vec<&'a str>>) -> anyhow::Result<BTreeMap<&'a str, usize>> {
    let mut floors: BTreeMap<&str, usize> = BTreeMap::new();
    while floors.len() < deps.len() {
        let placed = floors.len();
        for (&name, on) in deps {
            if floors.contains_key(name) {
                continue;
            }
            let below: Option<Vec<usize>> = on.iter().map(|d| floors.get(d).copied()).collect();
            if let Some(below) = below {
                floors.insert(name, below.into_iter().max().unwrap_or(0) + 1);
            }
        }
        anyhow::ensure!(
            floors.len() > placed,
            "the workspace's crates depend on each other in a cycle"
        );
    }
    Ok(floors)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cargo metadata`'s shape, cut to what the table reads.
    const METADATA: &str = r#"{
      "workspace_members": ["top 0.1.0", "mid 0.1.0", "low 0.1.0"],
      "packages": [
        {"id": "low 0.1.0", "name": "low", "description": "the ground | floor", "dependencies": [
          {"name": "serde", "kind": null}]},
        {"id": "top 0.1.0", "name": "top", "description": "the command line", "dependencies": [
          {"name": "low", "kind": null, "path": "/w/low"},
          {"name": "mid", "kind": null, "path": "/w/mid"},
          {"name": "low", "kind": "dev", "path": "/w/low"}]},
        {"id": "mid 0.1.0", "name": "mid", "dependencies": [
          {"name": "low", "kind": null, "path": "/w/low"}]}
      ]
    }"#;

    #[test]
    fn crates_are_listed_from_the_top_floor_down_with_what_they_depend_on() {
        assert_eq!(
            table(METADATA).unwrap(),
            "| floor | crate | depends on | what it is for |\n|---:|---|---|---|\n\
             | 3 | `top` | `mid`, `low` | the command line |\n\
             | 2 | `mid` | `low` |  |\n\
             | 1 | `low` | — | the ground \\| floor |\n"
        );
    }

    #[test]
    fn a_cycle_is_an_error_not_a_hang() {
        let cyclic = METADATA.replace(
            r#"{"name": "serde", "kind": null}"#,
            r#"{"name": "top", "kind": null, "path": "/w/top"}"#,
        );
        assert!(table(&cyclic).unwrap_err().to_string().contains("cycle"));
    }
}
