//! Each stage's options are decoded once, at load: the kinds' methods, the engine's
//! fingerprints and the report read what the load kept.

use repro_engine::{fingerprint, statcache::StatCache};
use repro_pipeline::kind::Overrides;
use repro_pipeline::options::decodes;
use repro_pipeline::workload::testing::source_root;
use std::collections::BTreeMap;
use std::path::Path;

/// `from` copied into `to`, folders and all.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn each_stages_options_are_decoded_once_whatever_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::copy(
        source_root().join("pipeline.yaml"),
        root.join("pipeline.yaml"),
    )
    .unwrap();
    copy_tree(&source_root().join("kernels"), &root.join("kernels"));

    let before = decodes();
    let project = crate::load(&root.join("pipeline.yaml")).unwrap();
    let at_load = decodes() - before;
    assert_eq!(
        at_load,
        project.stages.len(),
        "the load decodes each stage's options once"
    );

    let mut cache = StatCache::load(root);
    let mut fingerprints = Vec::new();
    for stage in &project.stages {
        let configured = stage.configured(&project.configs);
        stage.kind.outputs(&configured, &project.pipeline);
        stage.kind.optional_outputs(&configured, &project.pipeline);
        let inputs = fingerprint::compute(
            &project,
            stage,
            BTreeMap::new(),
            &Overrides::default(),
            &mut cache,
        )
        .unwrap();
        fingerprints.push(inputs.fingerprint());
    }
    repro_report::context::scopes(&project.pipeline, &project.configs, &Default::default());
    repro_report::chart_files(&project.pipeline, &project.configs);
    assert_eq!(fingerprints.len(), project.stages.len());
    assert_eq!(
        decodes() - before,
        at_load,
        "outputs, fingerprints and the report decode nothing again"
    );
}
