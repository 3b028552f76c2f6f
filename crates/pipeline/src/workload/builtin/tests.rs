//! The built-in workload: the legacy form reads as the declaration the shipped pipeline
//! writes out, its own checks, and the attention kernels' parameters in real cubins.

use super::*;
use crate::workload::problem::path;
use crate::workload::Workloads;
use crate::{
    workload::abi::check, workload::abi::kernel_params, workload::abi::layout,
    workload::abi::reference_params,
};
use crate::{workload::exprs::Bindings, workload::exprs::Compiled};
use crate::{
    workload::testing::attention, workload::testing::cubin, workload::testing::pipeline,
    workload::testing::SHIPPED_PIPELINE,
};
use repro_base::elf::read_i32_global;

const LEGACY: &str = include_str!("../../../../../tests/fixtures/workload/legacy_pipeline.yaml");

#[test]
fn the_legacy_form_reads_as_the_shipped_declaration() {
    let legacy = pipeline(LEGACY);
    let (name, decl) = declaration(&legacy).expect("a built-in workload");
    let shipped = pipeline(SHIPPED_PIPELINE).workloads[OP].clone();
    assert_eq!(name, OP);
    assert_eq!(
        serde_yaml::to_value(&decl).unwrap(),
        serde_yaml::to_value(&shipped).unwrap()
    );
    let w = Workloads::of(&legacy);
    assert_eq!(w.reference_name(OP), "reference");
    assert_eq!(
        Workloads::of(&pipeline(SHIPPED_PIPELINE)).reference_name(OP),
        "reference-sdpa_fp8"
    );
    assert_eq!(
        w.class_of(&legacy, "stage2-baseline").as_deref(),
        Some("fp16-pv")
    );
    assert_eq!(
        w.control_of(&legacy, OP).as_deref(),
        Some("stage2-baseline")
    );
}

#[test]
fn its_own_checks_name_the_key_at_fault() {
    let text = LEGACY
        .replace("op: sdpa_fp8", "op: sdpa_fp16")
        .replace(
            "single:  [gaussian, sharp]",
            "single:  [gaussian, sharp, sharp]",
        )
        .replace(
            "precision: fp16-pv}   # P·V in fp16",
            "precision: fp16-p}   # P·V in fp16",
        );
    let problems = problems(&pipeline(&text));
    let found: Vec<(String, &str)> = problems
        .iter()
        .map(|p| (p.path.join("."), p.message.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (
                "workload.op".to_string(),
                "unknown built-in workload `sdpa_fp16`"
            ),
            (
                "workload.inputs.single.2".to_string(),
                "recipe `sharp` is listed twice for shape `single`"
            ),
            (
                "kernels.sdpa_fp8.precision".to_string(),
                "`fp16-p` is not a precision class of `sdpa_fp8`"
            ),
        ]
    );
    assert_eq!(problems[2].help, "did you mean `fp16-pv`?");
    let text = LEGACY.replace("primary: mission", "primary: mision");
    let p = &problems_of(&text)[0];
    assert_eq!(
        (p.path.join("."), p.help.as_str()),
        ("workload.primary".into(), "did you mean `mission`?")
    );
}

fn problems_of(text: &str) -> Vec<Problem> {
    problems(&pipeline(text))
}

fn args_key(workload: &str) -> Vec<String> {
    path(workload, &["args"])
}

#[test]
fn the_attention_declaration_matches_sdpa_fp8_and_its_reference() {
    let test = "the_attention_declaration_matches_sdpa_fp8_and_its_reference";
    let defines = [
        "USE_CP_ASYNC=1",
        "USE_WMMA_PV=1",
        "USE_WARP_SPECIALIZATION=0",
    ];
    let Some(elf) = cubin(test, "kernels/sdpa_fp8.cu", "sm_89", &defines) else {
        return;
    };
    let decl = attention();
    let l = layout(&elf, "sdpa_fp8_fwd").unwrap();
    assert_eq!(
        check(
            "sdpa_fp8_fwd",
            &kernel_params("sdpa_fp8", &decl),
            &l,
            args_key("sdpa_fp8")
        ),
        []
    );
    // The launch reads the geometry the kernel exports.
    let globals: Bindings = decl
        .launch
        .globals
        .iter()
        .map(|g| {
            (
                g.clone(),
                i64::from(read_i32_global(&elf, g).expect("exported")),
            )
        })
        .collect();
    let c = Compiled::new(
        "sdpa_fp8",
        &decl,
        &["USE_CP_ASYNC", "USE_WMMA_PV", "USE_WARP_SPECIALIZATION"],
    )
    .unwrap();
    let dims = c.dims("small").unwrap();
    let g = c.launch(&dims, &globals, "").unwrap();
    let rows = globals["repro_rows_per_block"];
    assert_eq!(g.grid, [(40 + rows - 1) / rows, 3, 2]);
    assert_eq!(g.block, [globals["repro_block_threads"], 1, 1]);
    assert_eq!(c.unmet(&dims, &globals, "").unwrap(), None);
    let mut d128 = dims.clone();
    d128.insert("D".into(), 128);
    assert_eq!(
        c.unmet(&d128, &globals, "").unwrap().as_deref(),
        Some("repro_head_dim == D")
    );

    let elf = cubin(test, "kernels/reference.cu", "sm_89", &[]).unwrap();
    let l = layout(&elf, "sdpa_reference_f32").unwrap();
    assert_eq!(l.params.len(), 11);
    assert_eq!(
        check(
            "sdpa_reference_f32",
            &reference_params("sdpa_fp8", &decl),
            &l,
            args_key("sdpa_fp8")
        ),
        []
    );
}
