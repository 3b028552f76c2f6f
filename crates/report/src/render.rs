//! Rendering user-editable minijinja templates. Undefined names are errors
//! (`UndefinedBehavior::Strict`), reported with the template's path, the line and the
//! expression that was undefined, so an edit to `templates/*.j2` fails loudly instead of
//! leaving a silent gap in the report.
//!
//! Filters available to templates besides minijinja's built-ins:
//! - `yaml`: a value as a YAML scalar (strings quoted, none → `null`);
//! - `cell`: text safe inside a markdown table cell (`|` escaped, newlines folded).

use minijinja::{AutoEscape, Environment, ErrorKind, UndefinedBehavior, Value};
use serde::Serialize;
use std::path::Path;

/// A template's source and the name errors use for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// The path relative to the project root (`templates/summary.md.j2`), or
    /// `<built-in>/…` when the project has no such file.
    pub name: String,
    pub source: String,
}

impl Template {
    /// The project's template at `rel` if it exists, else the built-in default.
    pub fn load(root: &Path, rel: &str, builtin: &str) -> anyhow::Result<Template> {
        let path = root.join(rel);
        if path.is_file() {
            let source = std::fs::read_to_string(&path)
                .map_err(|e| anyhow::anyhow!("cannot read template {}: {e}", path.display()))?;
            Ok(Template {
                name: rel.to_string(),
                source,
            })
        } else {
            let file = rel.rsplit('/').next().unwrap_or(rel);
            Ok(Template {
                name: format!("<built-in>/{file}"),
                source: builtin.to_string(),
            })
        }
    }
}

/// A template that could not be rendered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{template}:{line}: {message}")]
pub struct TemplateError {
    pub template: String,
    /// 1-based; 0 when minijinja did not know.
    pub line: usize,
    /// For an undefined value: the expression that was undefined (e.g. `tune.data.trails`).
    pub undefined: Option<String>,
    pub message: String,
}

/// Render `template` with `ctx`.
pub fn render<S: Serialize>(template: &Template, ctx: &S) -> Result<String, TemplateError> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_keep_trailing_newline(true);
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_debug(true);
    env.add_filter("yaml", yaml_scalar);
    env.add_filter("cell", md_cell);
    env.add_template(&template.name, &template.source)
        .map_err(|e| to_error(template, &e))?;
    let tmpl = env
        .get_template(&template.name)
        .map_err(|e| to_error(template, &e))?;
    tmpl.render(Value::from_serialize(ctx))
        .map_err(|e| to_error(template, &e))
}

fn to_error(template: &Template, e: &minijinja::Error) -> TemplateError {
    // The innermost error carries the most precise location.
    let mut inner: &minijinja::Error = e;
    while let Some(src) = std::error::Error::source(inner).and_then(|s| s.downcast_ref()) {
        inner = src;
    }
    let line = inner.line().or(e.line()).unwrap_or(0);
    let expr = inner
        .range()
        .or(e.range())
        .and_then(|r| expression_at(&template.source, r));
    let (undefined, message) = if inner.kind() == ErrorKind::UndefinedError {
        let what = expr.clone().unwrap_or_else(|| "a name".into());
        (
            expr,
            format!(
                "undefined value `{what}`: the report context has no such name (fields are listed in docs/guide/report.md); fix the template or restore the default with `git checkout {}`",
                template.name
            ),
        )
    } else {
        let detail = inner.detail().or(e.detail()).unwrap_or("");
        let near = expr.map(|x| format!(" in `{x}`")).unwrap_or_default();
        (None, format!("{}{near}: {detail}", inner.kind()))
    };
    TemplateError {
        template: template.name.clone(),
        line,
        undefined,
        message,
    }
}

/// The source text of an error's span. minijinja's span of an attribute lookup starts at
/// the dot (`.data.trails`), so widen it left over the object's name (`tune.data.trails`).
fn expression_at(source: &str, range: std::ops::Range<usize>) -> Option<String> {
    let head = source.get(..range.start)?;
    let start = head
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_alphanumeric() || *c == '_' || *c == '.')
        .last()
        .map_or(range.start, |(i, _)| i);
    source.get(start..range.end).map(|s| s.trim().to_string())
}

/// A value as a YAML scalar: strings JSON-quoted (valid YAML), none/undefined → `null`.
fn yaml_scalar(v: Value) -> String {
    if v.is_none() || v.is_undefined() {
        return "null".into();
    }
    if let Some(s) = v.as_str() {
        return serde_json::to_string(s).unwrap_or_else(|_| "null".into());
    }
    v.to_string()
}

/// Text safe in a markdown table cell.
fn md_cell(v: Value) -> String {
    let s = if v.is_none() {
        "n/a".to_string()
    } else {
        v.to_string()
    };
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tpl(source: &str) -> Template {
        Template {
            name: "templates/t.md.j2".into(),
            source: source.into(),
        }
    }

    #[test]
    fn undefined_name_reports_template_line_and_expression() {
        let t = tpl("line one\n{{ headline.rows }}\n{{ tune.trails }}\n");
        let ctx = serde_json::json!({"headline": {"rows": 1}, "tune": {"trials": 3}});
        let err = render(&t, &ctx).unwrap_err();
        assert_eq!(err.template, "templates/t.md.j2");
        assert_eq!(err.line, 3);
        assert_eq!(err.undefined.as_deref(), Some("tune.trails"));
        let msg = err.to_string();
        assert!(
            msg.starts_with("templates/t.md.j2:3: undefined value `tune.trails`"),
            "{msg}"
        );
    }

    #[test]
    fn syntax_error_names_template_and_line() {
        let err = render(&tpl("ok\n{% if %}\n"), &serde_json::json!({})).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(
            err.to_string()
                .starts_with("templates/t.md.j2:2: syntax error"),
            "{err}"
        );
    }

    #[test]
    fn filters_quote_yaml_and_escape_cells() {
        let ctx = serde_json::json!({"s": "a: b", "n": null, "x": 1.5, "c": "x|y\nz"});
        let out = render(
            &tpl("{{ s|yaml }} {{ n|yaml }} {{ x|yaml }} {{ c|cell }}"),
            &ctx,
        )
        .unwrap();
        assert_eq!(out, r#""a: b" null 1.5 x\|y z"#);
    }
}
