//! The shipped pipeline's variants compile for every architecture the kernels promise
//! (sm_80, sm_89 for the L4, sm_90 and sm_90a for H100/H200) and pass the PTXAS gates there,
//! through the real `repro build` on a copy of the project; a variant that does not compile
//! fails alone; the corners of the shipped ws tune's space and every ws patch compile within
//! the ws kernel's gates. Needs nvcc (CI installs it); no GPU.

use assert_cmd::Command;
use repro::schema::{BuildRecord, BuildStatus};

use crate::shipped;
use shipped::{build, copy_project, pinned_nvcc, pinned_toolchain};

#[test]
fn shipped_variants_compile_and_pass_ptxas_gates_on_sm80_sm89_sm90_sm90a() {
    let Some(nvcc) =
        pinned_nvcc("shipped_variants_compile_and_pass_ptxas_gates_on_sm80_sm89_sm90_sm90a")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    copy_project(dir.path());
    // The shipped pipeline declares the L4's and the H100's; the kernels promise two more.
    let file = dir.path().join("pipeline.yaml");
    let yaml = std::fs::read_to_string(&file).unwrap();
    let declared = "\narch: [sm_89, sm_90a]";
    assert!(yaml.contains(declared), "the shipped `arch:` changed");
    let four = ["sm_80", "sm_89", "sm_90", "sm_90a"];
    std::fs::write(
        &file,
        yaml.replacen(declared, &format!("\narch: [{}]", four.join(", ")), 1),
    )
    .unwrap();
    let variants = [
        "stage2-baseline",
        "stage5-ws-p1",
        "stage5-ws-p2",
        "mma-m64",
        "mma-m64-kv2",
        "mma-m64-kv2-qr",
        "mma-m64-kv2-qr-lr",
        "mma-wg-kv2",
        "ws-c1-x2",
        "ws-c2-pp",
        "ws-c2-kv2",
    ];
    for (variant, rec) in variants.iter().zip(build(dir.path(), &variants)) {
        assert_eq!(rec.status, BuildStatus::Ok, "{variant}");
        assert_eq!(rec.nvcc_version, nvcc, "built by the pinned toolchain");
        let archs: Vec<&str> = rec.archs.keys().map(String::as_str).collect();
        assert_eq!(archs, four, "{variant}: one section per declared arch");
        for (arch, build) in &rec.archs {
            assert_eq!(build.command[0], "nvcc", "no machine path in the record");
            assert!(
                !build.gates.is_empty() && build.gates.iter().all(|g| g.pass),
                "{arch} {variant}: {:?}",
                build.gates
            );
            assert!(dir
                .path()
                .join(format!(".repro/cubins/{variant}.{arch}.cubin"))
                .is_file());
        }
    }
}

/// PTX of `source` in the project copy at `dir`, for `arch`, with `defines` (`NAME=VALUE`).
fn ptx(
    nvcc: &std::path::Path,
    dir: &std::path::Path,
    source: &str,
    arch: &str,
    defines: &str,
) -> String {
    let out = std::process::Command::new(nvcc)
        .current_dir(dir)
        .args(["-ptx", "-O3", &format!("-arch={arch}"), "-o", "-"])
        .args(defines.split(' ').map(|d| format!("-D{d}")))
        .arg(source)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{arch} {defines}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `USE_WGMMA=1` takes the warpgroup path only where it exists: the sm_90a build of
/// `mma-wg-kv2` issues `wgmma.mma_async`, the sm_90 and sm_89 builds of the same variant do not
/// (they are the `mma.sync` kernel).
#[test]
fn the_wgmma_variant_uses_wgmma_on_sm90a_only() {
    let Some(toolchain) = pinned_toolchain("the_wgmma_variant_uses_wgmma_on_sm90a_only") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    copy_project(dir.path());
    let wg = "TILE_M=64 TILE_N=32 KV_SPLIT=2 USE_WGMMA=1 KV_VIA_REGS=1";
    let mma = "kernels/sdpa_fp8_mma.cu";
    assert!(ptx(&toolchain.nvcc, dir.path(), mma, "sm_90a", wg).contains("wgmma.mma_async"));
    for arch in ["sm_90", "sm_89"] {
        let text = ptx(&toolchain.nvcc, dir.path(), mma, arch, wg);
        assert!(
            !text.contains("wgmma") && text.contains("mma.sync.aligned.m16n8k16"),
            "{arch}"
        );
    }
}

/// `kernels/sdpa_fp8_ws.cu` is the warp-specialized Hopper kernel only where Hopper's features
/// are (sm_90a: register hand-over, bulk copies on mbarriers, warpgroup MMAs); for the L4's
/// sm_89 and a plain sm_90 the same variant is the register-resident `mma.sync` kernel.
#[test]
fn the_ws_kernel_is_warp_specialized_on_sm90a_and_the_mma_kernel_elsewhere() {
    let Some(toolchain) =
        pinned_toolchain("the_ws_kernel_is_warp_specialized_on_sm90a_and_the_mma_kernel_elsewhere")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    copy_project(dir.path());
    let ws = "kernels/sdpa_fp8_ws.cu";
    let pp = "NUM_CONSUMERS=2 TILE_N=128 NUM_STAGES=3 PINGPONG=1";
    let hopper = ptx(&toolchain.nvcc, dir.path(), ws, "sm_90a", pp);
    for feature in [
        "setmaxnreg.dec.sync.aligned.u32",
        "setmaxnreg.inc.sync.aligned.u32",
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16",
        "bar.arrive 3, 256",
    ] {
        assert!(hopper.contains(feature), "sm_90a: {feature}");
    }
    for arch in ["sm_90", "sm_89"] {
        let text = ptx(&toolchain.nvcc, dir.path(), ws, arch, pp);
        assert!(
            !text.contains("setmaxnreg") && text.contains("mma.sync.aligned.m16n8k16"),
            "{arch}"
        );
    }
}

/// `KV_GROUP_SYNC=1` replaces the per-tile block barrier with one named barrier per KV group
/// (ids 1 and 2, 128 threads each with `TILE_M` 64 and `KV_SPLIT` 2); without it there is none.
#[test]
fn kv_group_sync_gives_each_kv_group_its_own_barrier() {
    let Some(toolchain) = pinned_toolchain("kv_group_sync_gives_each_kv_group_its_own_barrier")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    copy_project(dir.path());
    let base = "TILE_M=64 TILE_N=32 KV_SPLIT=2 USE_WGMMA=1";
    for arch in ["sm_90a", "sm_89"] {
        let mma = "kernels/sdpa_fp8_mma.cu";
        let with = ptx(
            &toolchain.nvcc,
            dir.path(),
            mma,
            arch,
            &format!("{base} KV_GROUP_SYNC=1"),
        );
        let without = ptx(&toolchain.nvcc, dir.path(), mma, arch, base);
        for id in [1, 2] {
            let bar = format!("bar.sync {id}, 128;");
            assert!(
                with.contains(&bar),
                "{arch}: no `{bar}` with KV_GROUP_SYNC=1"
            );
            assert!(
                !without.contains(&bar),
                "{arch}: `{bar}` without KV_GROUP_SYNC"
            );
        }
    }
}

/// The fault drill's broken variant, without a GPU: it fails alone (a failed gate, exit 1),
/// its record keeps nvcc's error, the others are built, and the run is recorded as such.
#[test]
fn a_variant_that_does_not_compile_fails_alone() {
    if pinned_nvcc("a_variant_that_does_not_compile_fails_alone").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    copy_project(dir.path());
    let yaml = std::fs::read_to_string(dir.path().join("pipeline.yaml")).unwrap();
    let broken = yaml.replacen(
        "variants:\n",
        "variants:\n  broken-tile: {kernel: sdpa_fp8, defines: {TILE_M: 48}}\n",
        1,
    );
    assert_ne!(broken, yaml);
    std::fs::write(dir.path().join("pipeline.yaml"), broken).unwrap();
    let repro = |args: &[&str]| {
        Command::cargo_bin("repro")
            .unwrap()
            .current_dir(dir.path())
            .args(args)
            .output()
            .unwrap()
    };
    let out = repro(&["build", "-q"]);
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("did not compile") && text.contains("TILE_M must be one of"),
        "{text}"
    );
    let read = |v: &str| -> BuildRecord {
        serde_json::from_slice(
            &std::fs::read(dir.path().join(format!("artifacts/build/{v}.json"))).unwrap(),
        )
        .unwrap()
    };
    let rec = read("broken-tile");
    assert_eq!(rec.status, BuildStatus::CompileError);
    for arch in ["sm_89", "sm_90a"] {
        let error = rec.archs[arch].error.as_deref().unwrap();
        assert!(error.contains("TILE_M must be one of"), "{arch}: {error}");
        assert!(!dir
            .path()
            .join(format!(".repro/cubins/broken-tile.{arch}.cubin"))
            .exists());
        assert!(dir
            .path()
            .join(format!(".repro/cubins/stage2-baseline.{arch}.cubin"))
            .is_file());
    }
    assert_eq!(read("stage2-baseline").status, BuildStatus::Ok);
    let status = repro(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.lines().next().unwrap().starts_with("build"), "{text}");
    assert!(
        text.contains("up-to-date (gate failed: did not compile"),
        "{text}"
    );
}

/// ptxas's report of the shipped attention kernel (stage5-ws-p2 on sm_89, CUDA 13): the
/// module's globals and its named barriers are read as the entry's.
#[test]
fn ptxas_report_of_the_shipped_kernel_with_module_globals_and_named_barriers() {
    let path = format!(
        "{}/tests/fixtures/ptxas/cuda13_sm89_sdpa_ws_p2.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let entries = repro::stages::build::ptxas::parse(&std::fs::read_to_string(path).unwrap());
    assert_eq!(
        entries,
        [repro::schema::EntryResources {
            name: "sdpa_fp8_fwd".into(),
            registers: Some(94),
            stack_bytes: Some(0),
            spill_store_bytes: Some(0),
            spill_load_bytes: Some(0),
            barriers: Some(16),
            // cmem[4] on the module line is not the entry's bank 0.
            cmem_bytes: Some(416),
            ..Default::default()
        }]
    );
}

/// `source` (relative to `dir`) compiled to a cubin for `arch` with `defines`: nvcc's
/// ptxas report of it, or nvcc's error.
fn compile(
    nvcc: &std::path::Path,
    dir: &std::path::Path,
    source: &str,
    arch: &str,
    defines: &[String],
) -> Result<repro::schema::EntryResources, String> {
    let out = std::process::Command::new(nvcc)
        .current_dir(dir)
        .args([
            "-cubin",
            "-O3",
            &format!("-arch={arch}"),
            "-Xptxas",
            "-v",
            "-o",
        ])
        .arg(dir.join(format!("{}.cubin", defines.join("_").replace('=', ""))))
        .args(defines.iter().map(|d| format!("-D{d}")))
        .arg(source)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(text);
    }
    let entries = repro::stages::build::ptxas::parse(&text);
    entries.into_iter().next().ok_or(text)
}

/// Compile each job (`(arch, defines)`) of `source` in `dir` on every core; the gates of the
/// ws kernel (its own ptxas limits over `gates.ptxas`) must pass for each.
fn compiles_within_the_ws_gates(
    nvcc: &std::path::Path,
    dir: &std::path::Path,
    what: &str,
    jobs: &[(&str, Vec<String>)],
) {
    let p = repro::pipeline::load(&dir.join("pipeline.yaml"))
        .unwrap()
        .pipeline;
    let gates = p.ptxas_gates_for("sdpa_fp8_ws").unwrap();
    let (max_regs, max_spill) = (gates.max_registers.unwrap(), gates.max_spill_bytes.unwrap());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let results: Vec<_> = std::thread::scope(|s| {
        let chunks: Vec<_> = jobs.chunks(jobs.len().div_ceil(threads)).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|(arch, d)| compile(nvcc, dir, "kernels/sdpa_fp8_ws.cu", arch, d))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    for ((arch, defines), result) in jobs.iter().zip(results) {
        let e = result.unwrap_or_else(|err| panic!("{what} {arch} {defines:?}: {err}"));
        let spills = e.spill_store_bytes.unwrap_or(0) + e.spill_load_bytes.unwrap_or(0);
        assert!(
            e.registers.is_some_and(|r| r <= max_regs) && spills <= max_spill,
            "{what} {arch} {defines:?}: {:?} registers, {spills} bytes of spills",
            e.registers
        );
    }
}

/// The corners of the shipped ws tune's space compile for sm_90a and pass the kernel's gates
/// (its `static_assert`s on registers and shared memory, and its ptxas limits, which the
/// space's constraints are written from): per (consumers, blocks per SM, tile, ping-pong, KV split),
/// the deepest rings with the fewest producer registers and the shallowest with the most.
#[test]
fn the_corners_of_the_ws_tune_space_compile_within_the_gates() {
    let Some(toolchain) =
        pinned_toolchain("the_corners_of_the_ws_tune_space_compile_within_the_gates")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    copy_project(dir.path());
    let project = repro::pipeline::load(&dir.path().join("pipeline.yaml")).unwrap();
    let o = project
        .configs
        .of::<repro::tune::options::TuneOptions>()
        .map(|(_, o)| o)
        .find(|o| o.kernel == "sdpa_fp8_ws")
        .expect("a tune stage of sdpa_fp8_ws");
    let group = |c: &repro::tune::space::Config| {
        [
            "NUM_CONSUMERS",
            "CTAS_PER_SM",
            "TILE_N",
            "PINGPONG",
            "KV_SPLIT",
        ]
        .map(|k| c.get(k).copied())
    };
    let rings = |c: &repro::tune::space::Config| c["NUM_STAGES"] * 2 + c["RAW_STAGES"];
    let mut corners = std::collections::BTreeMap::new();
    for c in o.space.valid() {
        let (deep, shallow) = corners.entry(group(c)).or_insert((c, c));
        if (rings(c), -c["PRODUCER_REGS"]) > (rings(deep), -deep["PRODUCER_REGS"]) {
            *deep = c;
        }
        if (rings(c), -c["PRODUCER_REGS"]) < (rings(shallow), -shallow["PRODUCER_REGS"]) {
            *shallow = c;
        }
    }
    assert_eq!(corners.len(), 8, "{corners:?}");
    let jobs: Vec<(&str, Vec<String>)> = corners
        .values()
        .flat_map(|(a, b)| [a, b])
        .map(|c| {
            let mut defines = o.base_defines.clone();
            defines.extend(c.iter().map(|(k, v)| (k.clone(), v.to_string())));
            (
                "sm_90a",
                defines.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            )
        })
        .collect();
    compiles_within_the_ws_gates(&toolchain.nvcc, dir.path(), "the ws tune space", &jobs);
}

/// Every patch of kernels/proposals/ws applies to the ws kernel and compiles for sm_90a (the
/// `ws-c1-x2`, a ping-pong and a split-KV configuration) and sm_89 (the mma path), within the gates.
#[test]
fn every_ws_patch_compiles_for_sm90a_and_sm89_within_the_gates() {
    let Some(toolchain) =
        pinned_toolchain("every_ws_patch_compiles_for_sm90a_and_sm89_within_the_gates")
    else {
        return;
    };
    let configs = [
        (
            "sm_90a",
            "NUM_CONSUMERS=1 CTAS_PER_SM=2 TILE_N=128 NUM_STAGES=2",
        ),
        (
            "sm_90a",
            "NUM_CONSUMERS=2 CTAS_PER_SM=1 TILE_N=128 NUM_STAGES=3 PINGPONG=1 PRODUCER_REGS=48",
        ),
        (
            "sm_90a",
            "NUM_CONSUMERS=2 CTAS_PER_SM=1 TILE_N=128 NUM_STAGES=4 RAW_STAGES=4 KV_SPLIT=2",
        ),
        ("sm_89", "NUM_CONSUMERS=1 CTAS_PER_SM=2"),
    ];
    let jobs: Vec<(&str, Vec<String>)> = configs
        .iter()
        .map(|(arch, d)| (*arch, d.split(' ').map(String::from).collect()))
        .collect();
    let folder = std::path::Path::new(shipped::SOURCE_ROOT).join("kernels/proposals/ws");
    let mut patches: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "patch"))
        .collect();
    patches.sort();
    assert!(patches.len() >= 2, "{}", folder.display());
    for patch in patches {
        let dir = tempfile::tempdir().unwrap();
        copy_project(dir.path());
        let kernel = dir.path().join("kernels/sdpa_fp8_ws.cu");
        let text = std::fs::read_to_string(&kernel).unwrap();
        let diff = std::fs::read_to_string(&patch).unwrap();
        let patched = repro::tune::proposer::store::apply(&text, &diff)
            .unwrap_or_else(|e| panic!("{}: {e}", patch.display()));
        std::fs::write(&kernel, patched).unwrap();
        let name = patch.file_name().unwrap().to_string_lossy().into_owned();
        compiles_within_the_ws_gates(&toolchain.nvcc, dir.path(), &name, &jobs);
    }
}
