//! The declaration against parameter layouts read from cubins nvcc builds here.

use super::*;
use crate::workload::problem::Locator;
use crate::{
    workload::testing::cubin, workload::testing::pipeline, workload::testing::rmsnorm,
    workload::testing::SHIPPED_PIPELINE,
};
use std::path::Path;

const RMS_WARP_ROW: [&str; 4] = [
    "THREADS_PER_ROW=32",
    "ROWS_PER_BLOCK=4",
    "VEC=8",
    "CACHED_VECS=4",
];

fn args_key(workload: &str) -> Vec<String> {
    path(workload, &["args"])
}

#[test]
fn the_rmsnorm_kernel_and_reference_match_the_declaration_on_sm89_and_sm90a() {
    let decl = rmsnorm();
    for arch in ["sm_89", "sm_90a"] {
        let test = "the_rmsnorm_kernel_and_reference_match_the_declaration_on_sm89_and_sm90a";
        let Some(elf) = cubin(test, "kernels/rmsnorm/rmsnorm.cu", arch, &RMS_WARP_ROW) else {
            return;
        };
        let l = layout(&elf, "rmsnorm_fwd").unwrap();
        let got: Vec<(usize, usize)> = l.params.iter().map(|p| (p.offset, p.size)).collect();
        assert_eq!(
            got,
            [(0, 8), (8, 8), (16, 8), (24, 4), (28, 4), (32, 4)],
            "{arch}"
        );
        assert_eq!(l.block_bytes, Some(36), "{arch}");
        let want = kernel_params("rmsnorm", &decl);
        assert_eq!(check("rmsnorm_fwd", &want, &l, args_key("rmsnorm")), []);

        let elf = cubin(test, "kernels/rmsnorm/reference.cu", arch, &[]).unwrap();
        let l = layout(&elf, "rmsnorm_reference").unwrap();
        let want = reference_params("rmsnorm", &decl);
        assert_eq!(
            check("rmsnorm_reference", &want, &l, args_key("rmsnorm")),
            []
        );
    }
}

#[test]
fn a_parameter_of_the_wrong_size_is_an_error_at_its_dtype() {
    let Some(elf) = cubin(
        "a_parameter_of_the_wrong_size_is_an_error_at_its_dtype",
        "kernels/rmsnorm/rmsnorm.cu",
        "sm_89",
        &RMS_WARP_ROW,
    ) else {
        return;
    };
    let l = layout(&elf, "rmsnorm_fwd").unwrap();
    let text = SHIPPED_PIPELINE.replace("{name: eps,    dtype: fp32", "{name: eps,    dtype: fp16");
    let decl = pipeline(&text).workloads["rmsnorm"].clone();
    let problems = check(
        "rmsnorm_fwd",
        &kernel_params("rmsnorm", &decl),
        &l,
        args_key("rmsnorm"),
    );
    assert_eq!(problems.len(), 1, "{problems:#?}");
    let d = Locator::new(Path::new("pipeline.yaml"), &text).diagnostic(&problems[0]);
    let line = text.lines().position(|l| l.contains("{name: eps")).unwrap() + 1;
    let col = text.lines().nth(line - 1).unwrap().find("fp16").unwrap() + 1;
    assert_eq!(
        d.to_string(),
        format!("pipeline.yaml:{line}:{col}: error: argument `eps` is 2 bytes, but parameter 5 of kernel `rmsnorm_fwd` is 4 bytes\n  help: match the kernel's signature: pointers are inputs or outputs, values are scalars of the parameter's type")
    );

    // `hidden` declared as a buffer, and `eps` left out.
    let mut decl = rmsnorm();
    decl.args[4].role = crate::workload::spec::Role::Input;
    decl.args.pop();
    let problems = check(
        "rmsnorm_fwd",
        &kernel_params("rmsnorm", &decl),
        &l,
        args_key("rmsnorm"),
    );
    let messages: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "kernel `rmsnorm_fwd` takes 6 parameters (of 8, 8, 8, 4, 4, 4 bytes) but 5 are declared",
            "argument `hidden` is a buffer, passed as an 8-byte pointer, but parameter 4 of kernel `rmsnorm_fwd` is 4 bytes",
        ]
    );
    assert_eq!(problems[1].path.join("."), "workloads.rmsnorm.args.4.role");
}

#[test]
fn a_missing_entry_lists_the_cubins_kernels_and_garbage_is_an_error() {
    let Some(elf) = cubin(
        "a_missing_entry_lists_the_cubins_kernels_and_garbage_is_an_error",
        "kernels/rmsnorm/reference.cu",
        "sm_90a",
        &[],
    ) else {
        return;
    };
    assert_eq!(
        layout(&elf, "rmsnorm_ref").unwrap_err(),
        "the cubin has no kernel `rmsnorm_ref` (its kernels: `rmsnorm_reference`)"
    );
    assert_eq!(layout(b"not elf", "k").unwrap_err(), "not an ELF64 file");
    let mut cut = elf.clone();
    cut.truncate(elf.len() / 2);
    assert!(layout(&cut, "rmsnorm_reference").is_err());
}
