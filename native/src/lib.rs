//! hetsched's compiled decision core, imported from Python as `hetsched_core`.
//!
//! Pure functions of the state they are given: no I/O, no clock, no randomness, so a
//! replayed log gives the same decisions. Each piece has a Python twin kept only as the
//! test oracle (tests/oracle/), which randomized tests compare with it bit for bit.

use pyo3::prelude::*;

mod classes;
mod fragmentation;
mod place;
mod score;
mod select;

/// The module's version; the packages' versions move with it.
const VERSION: &str = env!("CARGO_PKG_VERSION");

#[pymodule]
fn hetsched_core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", VERSION)?;
    m.add_class::<fragmentation::FragTable>()?;
    m.add_function(wrap_pyfunction!(score::sigmoid_steps, m)?)?;
    m.add_function(wrap_pyfunction!(place::score_feasible, m)?)?;
    m.add_function(wrap_pyfunction!(select::top_k, m)?)?;
    m.add_function(wrap_pyfunction!(classes::node_classes, m)?)?;
    Ok(())
}
