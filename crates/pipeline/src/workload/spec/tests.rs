//! Declarations read from YAML: scalar values, thresholds, reference arguments, inits, launches.

use super::*;

#[test]
fn a_launch_names_what_its_expressions_read() {
    let launch: Launch = serde_yaml::from_str(
        "{grid: [\"(rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK\"], block: [THREADS_PER_ROW * 2], \
             smem: repro_smem, requires: [\"repro_head_dim == D\"], defines: {UNREAD: 1}}",
    )
    .unwrap();
    let names: Vec<&str> = launch.names().into_iter().collect();
    assert_eq!(
        names,
        [
            "D",
            "ROWS_PER_BLOCK",
            "THREADS_PER_ROW",
            "repro_head_dim",
            "repro_smem",
            "rows"
        ]
    );
}

#[test]
fn the_defines_a_launch_reads_are_the_named_ones_over_its_defaults() {
    let launch: Launch = serde_yaml::from_str(
        "{grid: [\"(rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK\"], block: [THREADS_PER_ROW], \
             defines: {THREADS_PER_ROW: 128, ROWS_PER_BLOCK: 1, UNREAD: 1}}",
    )
    .unwrap();
    let read = |defines: &[(&str, i64)]| {
        let defines = defines.iter().map(|&(k, v)| (k.to_string(), v)).collect();
        launch
            .defines_read(&defines)
            .into_iter()
            .collect::<Vec<_>>()
    };
    let pair = |k: &str, v: i64| (k.to_string(), v);
    // A variant that leaves a define out launches as one that gives its default.
    assert_eq!(
        read(&[("ROWS_PER_BLOCK", 4), ("VEC", 8)]),
        [pair("ROWS_PER_BLOCK", 4), pair("THREADS_PER_ROW", 128)]
    );
    assert_eq!(
        read(&[("ROWS_PER_BLOCK", 4), ("THREADS_PER_ROW", 128)]),
        read(&[("ROWS_PER_BLOCK", 4)])
    );
    assert_ne!(read(&[("THREADS_PER_ROW", 32)]), read(&[]));
}

#[test]
fn reads_every_form_of_a_scalar_value() {
    let v = |s: &str| serde_yaml::from_str::<ScalarValue>(s);
    assert_eq!(v("1.0e-6").unwrap(), ScalarValue::Float(1e-6));
    assert_eq!(
        v("4096").unwrap(),
        ScalarValue::Int(ExprText("4096".into()))
    );
    assert_eq!(
        v("hidden * 2").unwrap(),
        ScalarValue::Int(ExprText("hidden * 2".into()))
    );
    assert_eq!(
        v("{pow: [D, -0.5]}").unwrap(),
        ScalarValue::Pow {
            pow: (ExprText("D".into()), -0.5)
        }
    );
    let err = v("[1, 2]").unwrap_err().to_string();
    assert!(err.contains("`{pow: [expr, exponent]}`"), "{err}");
    assert!(v("{pow: [D]}").is_err());
}

#[test]
fn reads_thresholds_and_reference_args() {
    let t: Threshold = serde_yaml::from_str("{fp16-pv: 0.02, fp8-pv: 1.0}").unwrap();
    assert_eq!(t.for_class(Some("fp8-pv")), Some(1.0));
    assert_eq!(t.for_class(Some("other")), None);
    assert_eq!(t.for_class(None), None);
    assert_eq!(
        serde_yaml::from_str::<Threshold>("0.5").unwrap(),
        Threshold::One(0.5)
    );
    let args: Vec<RefArg> =
        serde_yaml::from_str("[q, {name: D, dtype: int32, role: scalar, value: D}]").unwrap();
    assert_eq!(args[0], RefArg::Name("q".into()));
    let RefArg::Extra(extra) = &args[1] else {
        panic!("{args:?}")
    };
    assert_eq!((extra.name.as_str(), extra.role), ("D", Role::Scalar));
    let err = serde_yaml::from_str::<Vec<RefArg>>("[{name: D, dtyp: int32}]")
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field `dtyp`"), "{err}");
}

#[test]
fn inits_are_single_key_maps() {
    let i: Init = serde_yaml::from_str("{normal: {std: 2}}").unwrap();
    assert_eq!(
        i,
        Init::Normal(Normal {
            mean: 0.0,
            std: 2.0,
            seed: None
        })
    );
    let i: Init = serde_yaml::from_str("{constant: 1}").unwrap();
    assert_eq!(i, Init::Constant(1.0));
    let err = serde_yaml::from_str::<Init>("{gaussian: {}}")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown field `gaussian`, expected one of `normal`, `uniform`, `constant`"),
        "{err}"
    );
    let err = serde_yaml::from_str::<Init>("{constant: 1, normal: {}}")
        .unwrap_err()
        .to_string();
    assert!(err.contains("an `init` is one of"), "{err}");
    let back = serde_yaml::to_string(&Init::Constant(2.0)).unwrap();
    assert_eq!(back, "constant: 2.0\n");
}
