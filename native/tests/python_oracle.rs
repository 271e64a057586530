//! The crate's tests are the project's Python tests: this runs them against the
//! extension module `cargo test` has just built, so that a change to the Rust (a
//! mutant of `cargo mutants`, see docs/testing.md) is judged by the differential tests
//! that compare the core with its Python oracle.
//!
//! `cargo test` builds the cdylib beside this test's binary; the test copies it into a
//! scratch folder as `hetsched_core.abi3.so`, puts that folder first on PYTHONPATH,
//! checks that Python imports that file and not the installed build, and runs pytest.
//!
//! Environment: `HETSCHED_REPO` is the project's root (default: this crate's parent,
//! which is wrong inside `cargo mutants`' scratch copy, so its runner sets it), whose
//! `.venv/bin/python` runs the tests; `HETSCHED_CORE_TESTS` the pytest arguments
//! (default: the differential tests of the core).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const DIFFERENTIAL_TESTS: &str = "tests/policies/test_fragmentation_core.py \
    tests/policies/test_scalar_scores.py tests/core/test_scoring_paths.py tests/core/test_top_k.py \
    tests/core/test_score_feasible_input.py tests/core/test_node_classes.py";

fn built_module() -> PathBuf {
    // target/<profile>/deps/python_oracle-<hash>: the cdylib is in target/<profile>.
    let exe = env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("the deps folder");
    let name = "libhetsched_core.so";
    [deps.join(name), deps.parent().expect("the profile folder").join(name)]
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no {name} beside {}", exe.display()))
}

fn repo() -> PathBuf {
    env::var_os("HETSCHED_REPO").map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the project root").to_path_buf()
    })
}

#[test]
fn the_python_tests_pass_against_this_build() {
    let repo = repo();
    let python = repo.join(".venv/bin/python");
    assert!(python.exists(), "no {} (run ./dev lint first)", python.display());
    let scratch = env::temp_dir().join(format!("hetsched-core-{}", std::process::id()));
    fs::create_dir_all(&scratch).expect("a scratch folder");
    let module = scratch.join("hetsched_core.abi3.so");
    fs::copy(built_module(), &module).expect("the module copied");
    let pythonpath = env::join_paths([scratch.clone(), repo.clone()]).expect("PYTHONPATH");

    let imported = Command::new(&python)
        .args(["-c", "import hetsched_core; print(hetsched_core.__file__)"])
        .env("PYTHONPATH", &pythonpath)
        .current_dir(&repo)
        .output()
        .expect("python runs");
    let imported = String::from_utf8_lossy(&imported.stdout).trim().to_string();
    assert_eq!(Path::new(&imported), module, "Python imported another hetsched_core");

    let tests = env::var("HETSCHED_CORE_TESTS").unwrap_or_else(|_| DIFFERENTIAL_TESTS.into());
    let status = Command::new(&python)
        .args(["-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "not integration"])
        .args(tests.split_whitespace())
        .env("PYTHONPATH", &pythonpath)
        .current_dir(&repo)
        .status()
        .expect("pytest runs");
    let _ = fs::remove_dir_all(&scratch);
    assert!(status.success(), "the Python tests failed against this build");
}
