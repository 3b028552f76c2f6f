//! Workload declaration errors as the user sees them: `file:line:column: error: ...` from loading
//! the shipped pipeline with one thing of its RMSNorm workload changed.

use repro_pipeline::{load::load_str, load::LoadError};
use repro_pipeline::{workload::testing::source_root, workload::testing::SHIPPED_PIPELINE};
use std::path::Path;

/// The shipped pipeline with `from` replaced by `to` (which must occur once).
fn edited(from: &str, to: &str) -> String {
    assert_eq!(
        SHIPPED_PIPELINE.matches(from).count(),
        1,
        "`{from}` occurs once"
    );
    SHIPPED_PIPELINE.replace(from, to)
}

/// The errors of loading `text` as the project's `pipeline.yaml`.
fn errors(text: &str) -> Vec<String> {
    let root = source_root();
    match load_str(text, Path::new("pipeline.yaml"), &root, &crate::kinds()) {
        Ok(_) => Vec::new(),
        Err(LoadError::Invalid(e)) => e.0.iter().map(ToString::to_string).collect(),
        Err(other) => panic!("{other}"),
    }
}

/// The line and column of the first occurrence of `needle` in `text`, 1-based.
fn at(text: &str, needle: &str) -> (usize, usize) {
    let i = text
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` in the text"));
    let line = text[..i].matches('\n').count() + 1;
    let col = i - text[..i].rfind('\n').map_or(0, |n| n + 1) + 1;
    (line, col)
}

/// The one error of `text`, which must start with `pipeline.yaml:L:C: error: ` where
/// L:C is where `place` is, shifted by `shift` columns.
fn one_error_at(text: &str, place: &str, shift: usize) -> String {
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let (line, col) = at(text, place);
    let prefix = format!("pipeline.yaml:{line}:{}: error: ", col + shift);
    assert!(
        errs[0].starts_with(&prefix),
        "expected {prefix}…, got\n{}",
        errs[0]
    );
    errs[0][prefix.len()..].to_string()
}

#[test]
fn the_shipped_declarations_load_clean() {
    assert_eq!(errors(SHIPPED_PIPELINE), Vec::<String>::new());
}

#[test]
fn an_argument_shape_that_does_not_evaluate_points_into_the_expression() {
    let text = edited("shape: [hidden],", "shape: [\"hidden - 1001\"],");
    let msg = one_error_at(&text, "hidden - 1001", 0);
    assert_eq!(
        msg,
        "`hidden - 1001` is 0 for shape `ragged`; it must be at least 1\n  help: with hidden = 1001"
    );
    let text = edited("shape: [hidden],", "shape: [hidden / (rows - 4)],");
    let msg = one_error_at(&text, "hidden / (rows", 7);
    assert_eq!(msg, "`hidden / (rows - 4)` cannot be evaluated for shape `small`: it divides by zero\n  help: guard the divisor");
}

#[test]
fn an_unknown_name_in_an_expression_suggests_the_dimension() {
    let text = edited("shape: [hidden],", "shape: [hiden],");
    let msg = one_error_at(&text, "hiden]", 0);
    assert!(
        msg.starts_with("cannot read `hiden`: unknown parameter `hiden` — did you mean `hidden`?"),
        "{msg}"
    );
    let text = edited(
        "block: [THREADS_PER_ROW * ROWS_PER_BLOCK]",
        "block: [THREADS_PER_ROW * ROW_PER_BLOCK]",
    );
    let msg = one_error_at(&text, "ROW_PER_BLOCK]", 0);
    assert!(msg.contains("did you mean `ROWS_PER_BLOCK`?"), "{msg}");
}

#[test]
fn a_grid_beyond_cudas_limits_is_named_once_with_the_shape_and_variant() {
    let text = edited(
        "grid: [\"(rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK\"]",
        "grid: [1, rows * 32]",
    );
    let msg = one_error_at(&text, "rows * 32", 0);
    assert!(
        msg.starts_with("the launch for shape `mission` with variant `rms-block-row` is beyond CUDA's limits: grid.y is 65536; the limit is 65535"),
        "{msg}"
    );
    // A block of too many threads: at the `block` key, one error for all shapes.
    let text = edited("ROWS_PER_BLOCK: 4, VEC: 8", "ROWS_PER_BLOCK: 64, VEC: 8");
    let msg = one_error_at(&text, "block: [THREADS_PER_ROW", 8);
    assert!(
        msg.contains(
            "variant `rms-warp-row` is beyond CUDA's limits: block.x is 2048; the limit is 1024"
        ),
        "{msg}"
    );
}

#[test]
fn inputs_must_be_drawn_exactly_once_and_outputs_need_gates() {
    let text = edited(
        "role: input,  shape: [hidden],       init: {uniform: {low: 0.5, high: 1.5}}",
        "role: input,  shape: [hidden]",
    );
    let msg = one_error_at(&text, "{name: weight", 0);
    assert!(
        msg.starts_with("input `weight` has no values\n  help: give it an `init`"),
        "{msg}"
    );
    let text = edited("      y: {max_abs_err", "      z: {max_abs_err");
    let errs = errors(&text);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(
        errs[0].contains("error: `z` is not an output\n  help: the outputs are `y`"),
        "{}",
        errs[0]
    );
    assert!(
        errs[1].contains("error: output `y` has no gates"),
        "{}",
        errs[1]
    );
    let text = edited(
        "init: {uniform: {low: 0.5, high: 1.5}}",
        "init: {uniform: {low: 1.5, high: 0.5}}",
    );
    let msg = one_error_at(&text, "{uniform", 0);
    assert_eq!(
        msg,
        "the `init` of `weight`: `uniform` needs finite `low` < `high`"
    );
}

#[test]
fn keys_a_role_does_not_take_and_typos_are_errors() {
    let text = edited("role: scalar, value: rows}", "role: scalar}");
    let msg = one_error_at(&text, "{name: rows", 0);
    assert!(msg.starts_with("scalar `rows` has no `value`"), "{msg}");
    let text = edited(
        "role: output, shape: [rows, hidden]}",
        "role: output, shape: [rows, hidden], init: {constant: 0}}",
    );
    let msg = one_error_at(&text, "init: {constant", 0);
    assert!(
        msg.starts_with("an output argument takes no `init`"),
        "{msg}"
    );
    let text = edited(
        "{name: eps,    dtype: fp32",
        "{name: eps,    dtype: float32",
    );
    let msg = one_error_at(&text, "float32", 0);
    assert!(
        msg.contains("unknown variant `float32`, expected one of `e4m3`"),
        "{msg}"
    );
    // The stages that use the kernel then say it is in no workload; the typo is named.
    let text = edited("kernels: [rmsnorm]", "kernels: [rmsnrm]");
    let (line, col) = at(&text, "rmsnrm");
    let errs = errors(&text);
    assert!(
        errs.iter().any(|e| e.starts_with(&format!(
            "pipeline.yaml:{line}:{col}: error: workload `rmsnorm` names kernel `rmsnrm`"
        )) && e.ends_with("help: did you mean `rmsnorm`?")),
        "{errs:#?}"
    );
    let text = edited(
        "mission: [gaussian, tiny, large, offset]",
        "mission: [gaussian, tiny, huge]",
    );
    let msg = one_error_at(&text, "huge", 0);
    assert!(
        msg.starts_with(
            "no recipe `huge`\n  help: the recipes are `gaussian`, `tiny`, `large`, `offset`"
        ),
        "{msg}"
    );
}

#[test]
fn the_reference_is_a_kernel_or_a_command_and_its_source_exists() {
    let text = edited(
        "entry: rmsnorm_reference",
        "entry: rmsnorm_reference\n      run: [python3, kernels/rmsnorm/reference.py]",
    );
    let msg = one_error_at(&text, "[python3", 0);
    assert!(
        msg.starts_with("the reference is a kernel (`source`) or a command (`run`), not both"),
        "{msg}"
    );
    let text = edited(
        "source: kernels/rmsnorm/reference.cu",
        "source: kernels/rmsnorm/referenc.cu",
    );
    let msg = one_error_at(&text, "kernels/rmsnorm/referenc.cu", 0);
    assert!(
        msg.starts_with("reference source `kernels/rmsnorm/referenc.cu` does not exist"),
        "{msg}"
    );
}

#[test]
fn quantization_needs_fp8_and_scales_of_the_right_size() {
    let text = edited(
        "init: {normal: {}}}",
        "init: {normal: {}}, quantize: {block: [hidden], scales: weight}}",
    );
    let errs = errors(&text);
    assert!(
        errs.iter()
            .any(|e| e.contains("`x` is fp16: only FP8 inputs (e4m3, e5m2) are quantized")),
        "{errs:#?}"
    );
    assert!(
        errs.iter().any(|e| e
            .contains("input `weight` is drawn twice: by its `init` and the quantization of `x`")),
        "{errs:#?}"
    );
    let text = edited("dtype: fp16,  role: input,  shape: [rows, hidden], init: {normal: {}}}", "dtype: e4m3,  role: input,  shape: [rows, hidden], init: {normal: {}}, quantize: {block: [hidden], scales: s}}\n      - {name: s, dtype: fp32, role: input, shape: [2]}");
    let msg = errors(&text).join("\n");
    assert!(
        msg.contains("`x` has 4 blocks for shape `small` but `s` holds 2 scales"),
        "{msg}"
    );
}

#[test]
fn a_kernel_belongs_to_one_workload_and_dims_do_not_shadow_defines() {
    let text = edited("\nworkloads:\n", "\nworkloads:\n  rmsnorm2:\n    kernels: [rmsnorm]\n    dims: [n]\n    shapes: {s: {n: 1}}\n    primary: s\n    args: [{name: o, dtype: fp32, role: output, shape: [n]}]\n    launch: {grid: [n], block: [32]}\n    reference: {run: [true]}\n    gates: {o: {max_abs_err: 0}}\n");
    // (The RMSNorm tune stage then tunes `rmsnorm2`'s kernel, which has no shape `small`.)
    let errs = errors(&text);
    assert!(
        errs.iter()
            .any(|e| e.contains("error: kernel `rmsnorm` is already in workload `rmsnorm2`")),
        "{errs:#?}"
    );
    let text = edited("dims: [rows, hidden]", "dims: [rows, hidden, VEC]");
    let errs = errors(&text).join("\n");
    assert!(
        errs.contains("dimension `VEC` has the name of a define of this workload's variants"),
        "{errs}"
    );
}

#[test]
fn a_threshold_that_is_not_a_finite_number_is_refused_where_it_is_declared() {
    let text = edited("max_rel_l2_err: 0.001,", "max_rel_l2_err: .nan,");
    assert_eq!(
        one_error_at(&text, ".nan", 0),
        "`max_rel_l2_err` must be a number at least 0"
    );
    let text = edited("fp8-pv: 0.1}", "fp8-pv: .inf}");
    assert_eq!(
        one_error_at(&text, ".inf", 0),
        "`max_rel_l2_err` must be a number at least 0"
    );
}

/// A pipeline in the legacy `workload: {op: sdpa_fp8}` form loads, and its stages are
/// valid, through the declaration it is read as.
#[test]
fn a_legacy_pipeline_loads_through_its_declaration() {
    const LEGACY: &str = include_str!("../../../../tests/fixtures/workload/legacy_pipeline.yaml");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pipeline.yaml"), LEGACY).unwrap();
    std::fs::create_dir_all(dir.path().join("kernels")).unwrap();
    std::fs::write(dir.path().join("kernels/reference.cu"), "").unwrap();
    std::fs::create_dir_all(dir.path().join("kernels/baselines")).unwrap();
    std::fs::write(dir.path().join("kernels/baselines/torch_sdpa.py"), "").unwrap();
    let loaded = crate::load(&dir.path().join("pipeline.yaml"));
    assert!(loaded.is_ok(), "{}", loaded.err().unwrap());
}
